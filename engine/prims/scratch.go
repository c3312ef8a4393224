package prims

import "kernbench/engine/machine"

// Scratch is a rank's private memory for its fused primitives: the
// staging ring forwarded pieces are stored into, and two landing slots
// (one piece of lookahead) that a message in a ring outside the PE's TCM
// is copied into before it is loaded. Each is allocated on first use, for
// the kernel's lifetime.
type Scratch struct {
	// (First: a forwarded piece reads the staging ring, a TCM ring's
	// piece nothing else.)
	Staging   Staging
	inbox     []machine.Region // the two landing slots (nil until SetInbox)
	nextInbox int
}

// ScratchMemory is the memory of pe that a group's scratch is taken from:
// its StagingKind, TCM unless HBM or SRAM.
func ScratchMemory(pe *machine.PE, kind machine.Space) *machine.Memory {
	switch kind {
	case machine.HBM:
		return pe.HBM
	case machine.SRAM:
		return pe.SRAM
	}
	return pe.TCM
}

// HasInbox reports whether the landing slots have their memory.
func (s *Scratch) HasInbox() bool { return s.inbox != nil }

// SetInbox gives the landing slots reg, two slots of slot bytes.
func (s *Scratch) SetInbox(reg machine.Region, slot int64) {
	s.inbox = []machine.Region{reg.Sub(0, slot), reg.Sub(slot, slot)}
}

// NextInbox returns the next landing slot (the two alternate).
func (s *Scratch) NextInbox() machine.Region {
	reg := s.inbox[s.nextInbox]
	s.nextInbox = 1 - s.nextInbox
	return reg
}
