package prims

import (
	"testing"

	"kernbench/engine/machine"
)

// The scratch is taken from the group's staging memory (TCM by default),
// and its two landing slots alternate.
func TestScratch(t *testing.T) {
	m := newMachine(t, 1)
	pe := m.Ranks[0]
	for _, tt := range []struct {
		kind machine.Space
		want *machine.Memory
	}{{machine.TCM, pe.TCM}, {machine.HBM, pe.HBM}, {machine.SRAM, pe.SRAM}} {
		if got := ScratchMemory(pe, tt.kind); got != tt.want {
			t.Errorf("ScratchMemory(%v) is not the PE's memory of that kind", tt.kind)
		}
	}
	var s Scratch
	if s.HasInbox() {
		t.Fatal("a new scratch has landing slots")
	}
	s.SetInbox(machine.Region{Mem: pe.TCM, Off: 1024, N: 128}, 64)
	var offs []int64
	for range 3 {
		reg := s.NextInbox()
		if reg.Mem != pe.TCM || reg.N != 64 {
			t.Fatalf("landing slot %v, want 64 bytes of TCM", reg)
		}
		offs = append(offs, reg.Off)
	}
	if offs[0] != 1024 || offs[1] != 1088 || offs[2] != 1024 {
		t.Errorf("landing slots at %v, want 1024, 1088, 1024", offs)
	}
}
