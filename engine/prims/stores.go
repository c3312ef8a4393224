package prims

import (
	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// Stores are the stores a rank's fused primitives issued into their
// destinations and did not wait for (so the next call starts at once).
// Any later operation of the rank on an overlapping range waits for them
// first (Settle), and so does the kernel's end (Drain). (A slice type:
// a hot path checks its length, inlined, before any call.)
type Stores []*machine.MemOp

// Add notes ops; the caller may reuse the slice.
func (s *Stores) Add(ops []*machine.MemOp) { *s = append(*s, ops...) }

// Settle waits in p until no store under way writes into reg, so that an
// operation on reg sees (or overwrites) the stored data; the stores found
// done are recycled into m.
// (A caller on a hot path checks Len first: with nothing under way, a
// reduce-scatter's primitives storing nothing, no call.)
func (s *Stores) Settle(m *machine.Machine, p *sim.Proc, reg machine.Region) error {
	ws := *s
	live := 0
	for i, op := range ws {
		if !op.Done {
			if live != i {
				ws[live] = op
			}
			live++
		} else {
			// Only this list knew the store (its tile's bytes may live on).
			m.Recycle(op, false)
		}
	}
	if live < len(ws) {
		clear(ws[live:])
		*s = ws[:live]
	}
	for _, op := range *s {
		if !op.Done && op.Dst.Overlaps(reg) {
			if err := op.Wait(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// WouldWait reports whether Settle(reg) would wait (in a step of a
// pipeline on the event loop, which cannot block, the caller leaves such
// a wait to the process).
func (s Stores) WouldWait(reg machine.Region) bool {
	for _, op := range s {
		if !op.Done && op.Dst.Overlaps(reg) {
			return true
		}
	}
	return false
}

// Drain waits in p for every store under way and recycles them into m.
func (s *Stores) Drain(m *machine.Machine, p *sim.Proc) error {
	for _, op := range *s {
		if err := op.Wait(p); err != nil {
			return err
		}
	}
	for _, op := range *s {
		m.Recycle(op, false)
	}
	clear((*s))
	*s = (*s)[:0]
	return nil
}
