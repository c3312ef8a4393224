package prims

import (
	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// Stores are the stores a rank's fused primitives issued into their
// destinations and did not wait for (so the next call starts at once).
// Any later operation of the rank on an overlapping range waits for them
// first (Settle), and so does the kernel's end (Drain).
type Stores struct {
	ops []*machine.MemOp
}

// Len is the number of stores noted and not yet found done.
func (s *Stores) Len() int { return len(s.ops) }

// Add notes ops; the caller may reuse the slice.
func (s *Stores) Add(ops []*machine.MemOp) { s.ops = append(s.ops, ops...) }

// Settle waits in p until no store under way writes into reg, so that an
// operation on reg sees (or overwrites) the stored data; the stores found
// done are recycled into m.
func (s *Stores) Settle(m *machine.Machine, p *sim.Proc, reg machine.Region) error {
	if len(s.ops) == 0 {
		// Nothing left under way (a reduce-scatter's primitives store
		// nothing): no call (this much inlines, every load asks).
		return nil
	}
	return s.settle(m, p, reg)
}

func (s *Stores) settle(m *machine.Machine, p *sim.Proc, reg machine.Region) error {
	ws := s.ops
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
		s.ops = ws[:live]
	}
	for _, op := range s.ops {
		if !op.Done && op.Dst.Overlaps(reg) {
			if err := op.Wait(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// WouldWait reports whether Settle(reg) would wait.
func (s *Stores) WouldWait(reg machine.Region) bool {
	for _, op := range s.ops {
		if !op.Done && op.Dst.Overlaps(reg) {
			return true
		}
	}
	return false
}

// Drain waits in p for every store under way and recycles them into m.
func (s *Stores) Drain(m *machine.Machine, p *sim.Proc) error {
	for _, op := range s.ops {
		if err := op.Wait(p); err != nil {
			return err
		}
	}
	for _, op := range s.ops {
		m.Recycle(op, false)
	}
	clear(s.ops)
	s.ops = s.ops[:0]
	return nil
}
