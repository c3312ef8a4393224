package prims

import (
	"strings"

	"kernbench/engine/machine"
)

// Site is where a write was issued (a script position): valid or not, and
// printable. (An interface rather than a type parameter: a generic
// tracker's methods cost twice as much to inline at every check.)
type Site interface {
	IsValid() bool
	String() string
}

// Write is a write a rank issued: its operation and the operation's
// generation then, its destination, the operation's name and its call
// site. Waited, for an asynchronous write with a handle, is the handle's
// waited flag (nil for the rest): on an untimed machine such a write
// counts as pending until it is waited, as nothing takes time there.
type Write struct {
	Op     *machine.MemOp
	Gen    uint64
	Dst    machine.Region
	Fn     string
	At     Site
	Waited *bool
	// By is the kernel or thread that issued the write (nil when not
	// known): a write of another thread is not one tl.flush() waits for.
	By *Kernel
}

// OpPending reports whether w's operation has not completed. An operation
// recycled since it was issued has completed (only done operations are
// recycled), whatever later operation the object stands for now.
func (w *Write) OpPending() bool { return w.Op.Gen() == w.Gen && !w.Op.Done }

// PendingFor reports whether w still writes its range for a read: its
// operation is not done or, untimed, its handle is not waited yet.
func (w *Write) PendingFor(untimed bool) bool {
	return w.OpPending() || (untimed && w.Waited != nil && !*w.Waited)
}

// IssuedAt is " issued at SITE" for a hazard message, or "".
func (w *Write) IssuedAt() string {
	if w.At == nil || !w.At.IsValid() {
		return ""
	}
	return " issued at " + w.At.String()
}

// Writes are a rank's writes that may not be done: a second write into
// an overlapping range before the first is done races (the two complete
// in an order that depends on the memories and paths involved), and a
// read of a range an asynchronous write still writes depends on which
// finishes first. Entries whose write is over are dropped once the list
// reaches compactAt entries (Compact).
type Writes struct {
	list      []Write
	compactAt int
	// AsyncN counts the entries that carry a handle (Waited); read only
	// (a field: a check on every load reads it, inlined).
	AsyncN int
}

// Len is the number of entries (some may be over).
func (ws *Writes) Len() int { return len(ws.list) }

// Entries are the entries, oldest first (some may be over).
func (ws *Writes) Entries() []Write { return ws.list }

// WillCompact reports whether the next Note compacts the list first.
func (ws *Writes) WillCompact() bool { return len(ws.list) >= ws.compactAt }

// Note records the write op, issued by fn at at (a done op is not
// recorded).
func (ws *Writes) Note(fn string, op *machine.MemOp, at Site, untimed bool, by *Kernel) {
	if op.Done {
		return
	}
	if len(ws.list) >= ws.compactAt {
		// Here, where the list grows, not before a check: a fused
		// primitive's dst stores are noted piece after piece with no
		// check between them, and the list would grow by a call's
		// pieces, its entries cold again by the time they came round.
		ws.Compact(untimed)
	}
	// The entry is filled in place (a literal is built aside and copied
	// in, ten words per store of a primitive's piece).
	n := len(ws.list)
	if n < cap(ws.list) {
		ws.list = ws.list[:n+1]
	} else {
		ws.list = append(ws.list, Write{})
	}
	w := &ws.list[n]
	w.Op, w.Gen, w.Dst, w.Fn, w.At, w.Waited, w.By = op, op.Gen(), op.Dst, fn, at, nil, by
}

// Attach gives op's entry the waited flag of the handle its issuer got,
// if the write was an asynchronous one (its name ends in "_async").
func (ws *Writes) Attach(op *machine.MemOp, waited *bool) {
	for i := len(ws.list) - 1; i >= 0; i-- {
		if w := &ws.list[i]; w.Op == op && w.Gen == op.Gen() {
			if strings.HasSuffix(w.Fn, "_async") && w.Waited == nil {
				w.Waited = waited
				ws.AsyncN++
			}
			return
		}
	}
}

// PendingInto returns the first entry that overlaps dst and is not done,
// or nil. A write once done stays done, so nil stays the answer for the
// writes noted so far.
func (ws *Writes) PendingInto(dst machine.Region) *Write {
	// The destinations are in the entries: only an overlapping entry's
	// operation is looked at. (The list is compacted as writes are noted,
	// so it holds at most twice the writes under way.)
	for i := range ws.list {
		if w := &ws.list[i]; w.Dst.Overlaps(dst) && w.OpPending() {
			return w
		}
	}
	return nil
}

// PendingRead returns the first entry with a handle that still writes a
// range overlapping reg, or nil.
func (ws *Writes) PendingRead(reg machine.Region, untimed bool) *Write {
	if ws.AsyncN == 0 {
		return nil
	}
	for i := range ws.list {
		w := &ws.list[i]
		if w.Waited == nil || !w.Dst.Overlaps(reg) || !w.PendingFor(untimed) {
			continue
		}
		return w
	}
	return nil
}

// Compact drops the entries that are over. Note runs it when the list has
// doubled since the last time (at least 4 entries), so the scan that
// reads every entry's operation costs O(1) per write noted, and the list
// stays within twice the writes under way. (With at least 16, a fused
// primitive's dst stores, one entry of 80 bytes each, cycled through
// twenty cache lines per rank, all of them cold again by the time they
// came round: at 128 ranks 1.5 % more last-level cache misses.)
func (ws *Writes) Compact(untimed bool) {
	list := ws.list
	live := 0
	for i := range list {
		w := &list[i]
		if !w.PendingFor(untimed) {
			if w.Waited != nil {
				ws.AsyncN--
			}
			continue
		}
		if live != i {
			list[live] = *w
		}
		live++
	}
	clear(list[live:])
	ws.list = list[:live]
	ws.compactAt = max(4, 2*live)
}
