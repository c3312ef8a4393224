package prims

import (
	"fmt"

	"kernbench/engine/machine"
)

// The hazards' errors: what fn on rank did and the operation it races
// with, with what to call first.

// ReadHazard is the PendingStoreHazard error of fn on rank reading reg (a
// send's source, a fetch, a copy's source) while an asynchronous write of
// the rank not waited for still writes an overlapping range (what is read
// would depend on which finishes first), or nil.
func (ws *Writes) ReadHazard(fn string, rank int, reg machine.Region, untimed bool) error {
	if w := ws.PendingRead(reg, untimed); w != nil {
		return errorf(KindPendingStoreHazard, "%s: rank %d reads %v while the %s%s still writes %v (tl.wait(its handle) first)",
			fn, rank, reg, w.Fn, w.IssuedAt(), w.Dst)
	}
	return nil
}

// WriteHazard is the WriteWriteHazard error of fn on rank writing dst
// while an earlier write of the rank into an overlapping range is not
// done (the two complete in an order that depends on the memories and
// paths involved: the winner changed with --data-space), or nil. by is
// the kernel or thread writing (nil: not known): an earlier write of
// another thread is named as that thread's, and the way out is to order
// the two threads, which no call of this one alone does.
func (ws *Writes) WriteHazard(fn string, rank int, dst machine.Region, by *Kernel) error {
	w := ws.PendingInto(dst)
	if w == nil {
		return nil
	}
	if by != nil && w.By != nil && w.By != by {
		return errorf(KindWriteWriteHazard, "%s: rank %d writes %v while %s's %s%s still writes %v (two threads write it at once: order the writes, e.g. tl.wait(the thread's handle) or tl.signal/tl.wait an event, or write elsewhere)",
			fn, rank, dst, w.By.Track(), w.Fn, w.IssuedAt(), w.Dst)
	}
	return errorf(KindWriteWriteHazard, "%s: rank %d writes %v while the %s%s still writes %v (%s first, or write elsewhere)",
		fn, rank, dst, w.Fn, w.IssuedAt(), w.Dst, w.SettleHint())
}

// SettleHint is what the kernel can call to wait for w: its handle's
// tl.wait, or tl.flush() for a write without one (a fused primitive's
// store, which goes on after the call returns).
func (w *Write) SettleHint() string {
	if w.Waited == nil {
		return "tl.flush()"
	}
	return "tl.wait(its handle)"
}

// WriteHazard is the SendBufferHazard error of fn on rank writing dst
// while one of the rank's buffer sends has not issued the overlapping part
// yet (a blocking one of another thread, or a tl.send_async), or nil; it
// forgets the sends that are done (Hit).
func (is *IssuingSends) WriteHazard(fn string, rank int, dst machine.Region) error {
	hit := is.Hit(dst)
	if hit != nil && hit.Blocking {
		return errorf(KindSendBufferHazard, "%s: rank %d writes %v while the tl.send(%q) at %v, in another thread, still reads it (order the write after the send and a tl.flush(%q), e.g. with tl.event, or write elsewhere)",
			fn, rank, dst, hit.Q.Dir, hit.Origin, hit.Q.Dir)
	}
	if hit != nil {
		return errorf(KindSendBufferHazard, "%s: rank %d writes %v while the tl.send_async(%q) issued at %v has not sent it yet (tl.wait(its handle) returns once all of it is issued, tl.flush(%q) once it is delivered and the source is free; or write elsewhere)",
			fn, rank, dst, hit.Q.Dir, hit.Origin, hit.Q.Dir)
	}
	return nil
}

// InFlightHazard is the SendBufferHazard error of fn on rank writing dst
// while a send of g still reads an overlapping source (its DMA has not
// completed, after tl.send and tl.wait(send_async handle) returned), or
// nil.
func InFlightHazard(g *machine.Group, fn string, rank int, dst machine.Region) error {
	m := g.InFlightReading(dst)
	if m == nil {
		return nil
	}
	where := ""
	if m.Meta.Origin != nil {
		where = fmt.Sprintf(" issued at %v", m.Meta.Origin)
	}
	return errorf(KindSendBufferHazard, "%s: rank %d writes %v while rank %d's send %s #%d%s still reads it (a send reads its source until its DMA completes, after tl.send and tl.wait(send_async handle) return: tl.flush(%q) frees it; or write elsewhere)",
		fn, rank, dst, m.Q.Rank, m.Q.Dir, m.Meta.Seq, where, m.Q.Dir)
}

// InUseError is the DirectionInUse error of rank's thread track, whose
// operation op (at) wants q's send or receive side while u, of thread
// byTrack, is using it (one thread per direction side at a time).
func (u *SideUse) InUseError(rank int, track string, q *machine.QueuePair, send bool, op string, at any, byTrack string) error {
	side := "receive"
	if send {
		side = "send"
	}
	return errorf(KindDirectionInUse, "rank %d %s: %s at %v uses the %s side of %s while %s's %s at %v is using it (one thread per direction side at a time)",
		rank, track, op, at, side, q.Dir, byTrack, u.Op, u.At)
}

// HazardError is the LocalOperandHazard error of fn on rank's thread
// track writing dst while r, a primitive of thread byTrack, still reads
// it as its local operand.
func (r *OperandRead) HazardError(fn string, rank int, track string, dst machine.Region, byTrack string) error {
	return errorf(KindLocalOperandHazard, "%s: rank %d %s writes %v while %s's %s at %v still reads it as its local operand",
		fn, rank, track, dst, byTrack, r.Op, r.At)
}
