package prims

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// The staging ring hands out its slots in turn, each sized for the piece
// (a whole slot at most), and comes round after the last.
func TestStaging_SlotsInTurn(t *testing.T) {
	m := newMachine(t, 1)
	pe := m.Ranks[0]
	var s Staging
	if s.Ready() {
		t.Fatal("a ring without memory is ready")
	}
	s.Set(machine.Region{Mem: pe.TCM, Off: 1024, N: 3 * 256})
	var got []machine.Region
	m.Sim.Spawn("kernel", func(p *sim.Proc) {
		for _, n := range []int64{256, 100, 256, 8} {
			reg, err := s.Slot(nil, p, 256, n)
			if err != nil {
				t.Error(err)
			}
			got = append(got, reg)
		}
	})
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	want := []machine.Region{{Mem: pe.TCM, Off: 1024, N: 256}, {Mem: pe.TCM, Off: 1280, N: 100}, {Mem: pe.TCM, Off: 1536, N: 256}, {Mem: pe.TCM, Off: 1024, N: 8}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b *machine.Memory) bool { return a == b })); diff != "" {
		t.Errorf("slots (-want +got):\n%s", diff)
	}
}
