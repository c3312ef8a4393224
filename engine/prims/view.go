package prims

import (
	"fmt"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
)

// View is a typed view of simulated memory: Count elements of DT in Reg.
// starlark/tl's Ptr is this value (its only field) with the Starlark
// methods.
type View struct {
	Reg   machine.Region
	DT    dtype.DType
	Count int64
	Rank  int    // owning rank (-1: not a rank's memory)
	Dir   string // direction a received message arrived from ("" otherwise)
	// Slot identifies a received slot's view (tl.recv(return_slot=True))
	// and the slot's generation at receipt (StaleSlot detection); Slot.Q
	// is nil for any other view.
	Slot SlotRef
	// Lease, when set, says whether the memory still belongs to the view
	// (an L2 queue's input handle or output reservation): a view used
	// after its handle was released or its reservation published would
	// read later messages or change a sent one.
	Lease Lease
}

// SlotRef names an rx slot generation.
type SlotRef struct {
	Q   *machine.QueuePair
	Idx int
	Gen uint64
}

// Lease is the validity of a view whose memory is lent (View.Lease).
type Lease interface {
	// Check is nil while the view may be used, else the stale-view error.
	Check() error
}

// CheckLease is v's stale-view error, if any.
func (v *View) CheckLease() error {
	if v.Lease == nil {
		return nil
	}
	return v.Lease.Check()
}

// SlotStale reports whether v is a received slot that a later message has
// overwritten.
func (v *View) SlotStale() bool {
	return v.Slot.Q != nil && v.Slot.Q.Slots[v.Slot.Idx].Gen != v.Slot.Gen
}

// CheckSlot is the StaleSlot error of a received slot's view whose slot a
// later message overwrote since it was received (the ring wrapped), for
// rank's use of it; nil while it still holds the message.
func (v *View) CheckSlot(rank int, use string) error {
	if !v.SlotStale() {
		return nil
	}
	q := v.Slot.Q
	by := q.Slots[v.Slot.Idx].Meta // the message that overwrote it
	where := ""
	if by.Origin != nil {
		where = fmt.Sprintf(" issued at %v", by.Origin)
	}
	return errorf(KindStaleSlot, "rank %d %s: the rx slot %d of direction %s was overwritten by rank %d's send %s #%d%s (received as generation %d, now %d); copy it out (recv dst=) or use it before receiving %d more messages",
		rank, use, v.Slot.Idx, q.Dir, q.Peer, q.PeerDir, by.Seq, where, v.Slot.Gen, q.Slots[v.Slot.Idx].Gen, len(q.Slots))
}

// SubRegion is the memory of elements [start, start+count) of v.
func (v *View) SubRegion(start, count int64) machine.Region {
	sz := int64(v.DT.Size())
	return machine.Region{Mem: v.Reg.Mem, Off: v.Reg.Off + start*sz, N: count * sz}
}
