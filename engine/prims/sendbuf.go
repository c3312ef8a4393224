package prims

import (
	"fmt"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// Messenger issues one message of a buffer send: reg, count elements of
// dt, on q from process p. For a tracked send s (nil: none), rest is the
// part of its source still unissued once this message is queued (s's
// Rest, taken by Posted).
type Messenger interface {
	Message(p *sim.Proc, q *machine.QueuePair, reg machine.Region, dt dtype.DType, count int64, origin any, s *Send, rest machine.Region) error
}

// SendBuffer sends src, count elements of dt (src.N bytes: a raw view's
// bytes that do not fill an element travel too), on q from process p as
// messages of at most piece bytes of whole elements, each an ordinary
// IPCQ message issued by m, and returns once the last one is issued; an
// empty src is one empty message. While a src of several messages is
// sent, q.Sending is its size, which a deadlock report compares with the
// ring the send waits on (a single message never fills more than a slot,
// and leaves the queue pair's cold fields alone).
func SendBuffer(m Messenger, p *sim.Proc, q *machine.QueuePair, src machine.Region, dt dtype.DType, count, piece int64, origin any, s *Send) error {
	if src.N <= piece {
		return m.Message(p, q, src, dt, count, origin, s, machine.Region{})
	}
	q.Sending = src.N
	err := sendEach(m, p, q, src, dt, count, piece, origin, s)
	q.Sending = 0
	return err
}

// sendEach issues the messages of a src longer than one piece.
func sendEach(m Messenger, p *sim.Proc, q *machine.QueuePair, src machine.Region, dt dtype.DType, count, piece int64, origin any, s *Send) error {
	sz := int64(dt.Size())
	per := piece / sz
	if per == 0 {
		return &machine.IPCQError{Kind: "IpcqMessageTooLarge", Msg: fmt.Sprintf("rank %d send %s: one %s element (%d bytes) exceeds a message of %d bytes", q.Rank, q.Dir, dt, sz, piece)}
	}
	for lo := int64(0); lo < count; lo += per {
		n := min(per, count-lo)
		if err := m.Message(p, q, src.Sub(lo*sz, n*sz), dt, n, origin, s, src.Sub((lo+n)*sz, src.N-(lo+n)*sz)); err != nil {
			return err
		}
	}
	// Bytes of a raw view that do not fill an element still travel.
	if rest := src.N - count*sz; rest > 0 {
		return m.Message(p, q, src.Sub(count*sz, rest), dt, 0, origin, s, machine.Region{})
	}
	return nil
}
