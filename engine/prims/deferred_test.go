package prims

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
)

// A deferred piece is the send of its staging slot; taking it sets, once,
// what runs when its store is done (the message counted); once sent it
// forgets the store and origin and gives up the send side it held.
func TestDeferred(t *testing.T) {
	tests := []struct {
		name        string
		holdSide    bool
		wantRelease int
	}{
		{name: "one thread: no side held"},
		{name: "threads: the send side held until sent", holdSide: true, wantRelease: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, 1)
			pe := m.Ranks[0]
			slot := machine.Region{Mem: pe.TCM, Off: 64, N: 24}
			q := &machine.QueuePair{Dir: "E"}
			releases := 0
			var release func()
			if tt.holdSide {
				release = func() { releases++ }
			}
			var d Deferred
			var sent int64
			for piece := range 2 { // reused piece after piece
				store := m.StoreAt(pe, slot, nil, 0)
				d.Defer(store, q, slot, dtype.F32, 6, "k.star:3:5", release)
				ss := d.Take(m, &sent)
				want := machine.MsgMeta{DType: uint8(dtype.F32), Count: 6, Origin: "k.star:3:5"}
				if ss != &d.Send || ss.Store != store || ss.Q != q || ss.Src != slot || !cmp.Equal(ss.Meta, want) || ss.Stored == nil {
					t.Fatalf("piece %d: send %+v, want the slot's send of 6 f32 with its store", piece, *ss)
				}
				if err := m.Sim.Run(); err != nil {
					t.Fatal(err)
				}
				ss.Stored()
				d.Sent()
				if sent != int64(piece+1) || d.Send.Store != nil || d.Send.Meta.Origin != nil || releases != tt.wantRelease*(piece+1) {
					t.Errorf("piece %d sent: %d messages counted, store %v, origin %v, %d releases", piece, sent, d.Send.Store, d.Send.Meta.Origin, releases)
				}
			}
		})
	}
}
