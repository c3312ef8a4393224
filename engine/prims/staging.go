package prims

import (
	"errors"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// ErrInProcess stops a step of a fused primitive's pipeline, run on the
// event loop, at a wait that only the primitive's process can do (a
// blocking wait): the process then does that part again itself.
var ErrInProcess = errors.New("internal error: a fused primitive's step needs its process")

// Staging is the ring of staging slots a rank's fused primitives store
// forwarded pieces into before sending them: n_slots + 2 slots of the
// slot size, in the rank's private memory. A slot comes round again only
// after n_slots + 1 later sends, and a send passes backpressure only when
// the message n_slots before it has been received, so in a ring the wait
// for a send still reading a slot is almost never taken.
type Staging struct {
	// ring is the whole ring (N = 0 until Set), next the offset of the
	// next slot in it: a slot is computed rather than read from a slice of
	// regions, whose array was a cache line more per piece at a hundred
	// ranks.
	ring machine.Region
	next int64
}

// Ready reports whether the ring has its memory.
func (s *Staging) Ready() bool { return s.ring.N != 0 }

// Set gives the ring its memory, a whole number of slots.
func (s *Staging) Set(ring machine.Region) { s.ring, s.next = ring, 0 }

// Slot returns the first n bytes of the next slot (slotSize bytes), once
// no send of g still reads them. p is the primitive's process: in a step
// on the event loop, which cannot block, a send still reading the slot is
// ErrInProcess (the process takes the same slot again and waits).
func (s *Staging) Slot(g *machine.Group, p *sim.Proc, slotSize, n int64) (machine.Region, error) {
	reg := machine.Region{Mem: s.ring.Mem, Off: s.ring.Off + s.next, N: n}
	if reg.SendsMayRead() { // (no call otherwise: the common case)
		if err := awaitUnread(g, p, reg); err != nil {
			return machine.Region{}, err
		}
	}
	if s.next += slotSize; s.next == s.ring.N {
		s.next = 0
	}
	return reg, nil
}

// awaitUnread waits in p until no send of g reads reg; in a step on the
// event loop, which cannot block, a send still reading it is
// ErrInProcess. (A step leaves the wait to the process only when a send
// does read the slot: SendsMayRead's bounds span every send from TCM, so
// they mostly cover the staging ring.)
func awaitUnread(g *machine.Group, p *sim.Proc, reg machine.Region) error {
	if p.Sim().Running() != p {
		if !g.Unread(reg) {
			return ErrInProcess
		}
		return nil
	}
	return g.WaitUnread(p, reg)
}
