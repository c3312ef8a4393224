package prims

import (
	"errors"
	"strings"
	"testing"

	"kernbench/engine/machine"
)

// Rule (docs/architecture.md, Invariants and failures, hazards;
// WriteWriteHazard is one of ours beyond the list there): a write whose
// operation completed and was recycled is over, even while the recycled
// object carries a later write into the same range. The hazard names that
// later write (not the finished one whose entry still pointed at the object),
// and the finished entry leaves the list of issued writes.
func TestWriteWriteHazard_RecycledOperationIsNotPending(t *testing.T) {
	m := newMachine(t, 1)
	s := m.Sim
	pe := m.Ranks[0]
	reg := machine.Region{Mem: pe.TCM, Off: 0, N: 64}
	// Writes issued from a fused primitive take its call site (no thread
	// needed to find it).
	k := &Kernel{M: m, PE: pe, InFused: true}
	at := func(line int) { k.FusedSite = site(line) }

	at(1)
	first := m.Store(pe, reg, nil)
	k.noteWrite("tl.first", first)
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	m.Recycle(first, false)

	at(2)
	second := m.Store(pe, reg, nil)
	if second != first {
		t.Fatal("the machine did not reuse the recycled operation; the test needs it to")
	}
	k.noteWrite("tl.second", second)

	err := k.CheckWriteWrite("tl.third", reg)
	var pe2 *Error
	if !errors.As(err, &pe2) || pe2.Kind != KindWriteWriteHazard {
		t.Fatalf("a write over the second's range: got %v, want a WriteWriteHazard", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "tl.second issued at kernel.star:2") {
		t.Errorf("the hazard names %q, want the pending write (tl.second issued at kernel.star:2)", msg)
	}
	k.writes.Compact(false)
	if ws := k.writes.Entries(); len(ws) != 1 || ws[0].Fn != "tl.second" {
		t.Errorf("issued writes after compaction: %d entries (%v), want tl.second's alone", len(ws), ws)
	}
}
