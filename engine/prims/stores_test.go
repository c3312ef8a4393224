package prims

import (
	"testing"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// Settle waits for the stores into an overlapping range only, Drain for
// every one; WouldWait says beforehand whether Settle waits.
func TestStores_SettleWaitsForOverlappingStores(t *testing.T) {
	tests := []struct {
		name     string
		reg      machine.Region // in HBM (the stores: [0, 4096) and [8192, 8192+64))
		wait     bool
		wantDone []bool // the stores' state once Settle returned
	}{
		{name: "over the slow store", reg: machine.Region{Off: 100, N: 8}, wait: true, wantDone: []bool{true, true}},
		{name: "over the fast store", reg: machine.Region{Off: 8192, N: 8}, wait: true, wantDone: []bool{false, true}},
		{name: "over neither", reg: machine.Region{Off: 5000, N: 8}, wantDone: []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, 1)
			pe := m.Ranks[0]
			// (The fast one is issued first: the two share a path.)
			fast := m.Store(pe, machine.Region{Mem: pe.HBM, Off: 8192, N: 64}, nil)
			slow := m.Store(pe, machine.Region{Mem: pe.HBM, Off: 0, N: 4096}, nil)
			var s Stores
			s.Add([]*machine.MemOp{slow, fast})
			reg := tt.reg
			reg.Mem = pe.HBM
			var got []bool
			m.Sim.Spawn("kernel", func(p *sim.Proc) {
				if err := s.Settle(m, p, reg); err != nil {
					t.Error(err)
				}
				got = []bool{slow.Done, fast.Done}
				if err := s.Drain(m, p); err != nil {
					t.Error(err)
				}
				if len(s) != 0 {
					t.Errorf("%d stores left after Drain", len(s))
				}
			})
			if w := s.WouldWait(reg); w != tt.wait {
				t.Errorf("WouldWait = %v, want %v", w, tt.wait)
			}
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0] != tt.wantDone[0] || got[1] != tt.wantDone[1] {
				t.Errorf("after Settle the stores are done: %v, want %v", got, tt.wantDone)
			}
		})
	}
}
