package prims

import (
	"kernbench/engine/dtype"
	"kernbench/engine/machine"
)

// Deferred is a fused primitive's forwarded piece whose send waits for
// the next piece (or for the kernel's next operation that is not a fused
// primitive), so that one piece's store overlaps the next one's receive
// and math, also across consecutive primitive calls. The piece is its
// send, made ready when the piece is deferred (a rank defers a piece only
// once the one before has been sent): kept aside and copied into the send
// when it began, it was a cache line and a half more per piece at a
// hundred ranks. A rank reuses one Deferred piece after piece.
type Deferred struct {
	// Send is the send of the piece's staging slot: the store filling
	// it (Store), the forwarding direction (Q), the slot (Src) and the
	// message's dtype, count and origin (Meta). Its Stored is set once
	// (Take).
	Send machine.StoredSend
	// Release gives up the send side once the piece has been sent (nil:
	// nothing to give up, the rank has no threads).
	Release func()
}

// Defer makes d the piece stored by store into the staging slot, count
// elements of dt forwarded on q (origin: the call's), whose send holds
// the side release gives up (nil: none).
func (d *Deferred) Defer(store *machine.MemOp, q *machine.QueuePair, slot machine.Region, dt dtype.DType, count int64, origin any, release func()) {
	// Field by field: a struct literal was built aside and then copied in
	// whole.
	ss := &d.Send
	ss.Store, ss.Q, ss.Src, ss.Meta = store, q, slot, machine.MsgMeta{DType: uint8(dt), Count: count, Origin: origin}
	d.Release = release
}

// Take returns d's send of the staging slot, for the group to wait for
// the store, the credit and the send's overhead on the event loop without
// resuming the process for each (machine.StoredSend). Once the store is
// done its operation goes back to m (the staging slot holds the bytes now;
// the tile that was stored may still be stored elsewhere, so its bytes are
// not reused) and sent counts the message. d is used in place: nothing
// defers another piece until this one is sent (Sent).
func (d *Deferred) Take(m *machine.Machine, sent *int64) *machine.StoredSend {
	ss := &d.Send
	if ss.Stored == nil {
		ss.Stored = func() {
			m.Recycle(ss.Store, false)
			*sent++
		}
	}
	return ss
}

// Sent ends d's send: the store and the origin are forgotten and the send
// side given up (without a defer).
func (d *Deferred) Sent() {
	d.Send.Store, d.Send.Meta.Origin = nil, nil
	if d.Release != nil {
		d.Release()
	}
}
