package prims

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
)

// A view's elements [start, start+count) are their bytes in its memory.
func TestViewSubRegion(t *testing.T) {
	mem := &machine.Memory{}
	v := View{Reg: machine.Region{Mem: mem, Off: 256, N: 40}, DT: dtype.F64, Count: 5}
	tests := []struct {
		start, count int64
		want         machine.Region
	}{
		{0, 5, machine.Region{Mem: mem, Off: 256, N: 40}},
		{1, 2, machine.Region{Mem: mem, Off: 264, N: 16}},
		{5, 0, machine.Region{Mem: mem, Off: 296, N: 0}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, v.SubRegion(tt.start, tt.count), cmp.Comparer(func(a, b *machine.Memory) bool { return a == b })); diff != "" {
			t.Errorf("SubRegion(%d, %d) (-want +got):\n%s", tt.start, tt.count, diff)
		}
	}
}

type lease struct{ err error }

func (l lease) Check() error { return l.err }

// A received slot's view is stale once a later message took its slot (its
// generation moved on), and the error names the message that did; a lent
// view is stale when its lease says so.
func TestViewStale(t *testing.T) {
	q := &machine.QueuePair{Dir: "W", Peer: 0, PeerDir: "E", Slots: make([]machine.RxSlot, 4)}
	q.Slots[2].Gen = 3
	q.Slots[2].Meta = machine.MsgMeta{Seq: 10, Origin: "k.star:7:3"}
	released := errors.New("the input handle was released")
	tests := []struct {
		name      string
		v         View
		wantSlot  string
		wantLease error
	}{
		{name: "not a slot", v: View{}},
		{name: "the slot's message", v: View{Slot: SlotRef{Q: q, Idx: 2, Gen: 3}}},
		{name: "overwritten", v: View{Slot: SlotRef{Q: q, Idx: 2, Gen: 2}},
			wantSlot: "StaleSlot: rank 1 fetch src: the rx slot 2 of direction W was overwritten by rank 0's send E #10 issued at k.star:7:3 (received as generation 2, now 3); copy it out (recv dst=) or use it before receiving 4 more messages"},
		{name: "lease held", v: View{Lease: lease{}}},
		{name: "lease ended", v: View{Lease: lease{released}}, wantLease: released},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.v.CheckSlot(1, "fetch src")
			if tt.v.SlotStale() != (tt.wantSlot != "") {
				t.Errorf("SlotStale() = %v", tt.v.SlotStale())
			}
			var pe *Error
			switch {
			case tt.wantSlot == "" && err != nil:
				t.Errorf("CheckSlot: %v, want nil", err)
			case tt.wantSlot != "" && (!errors.As(err, &pe) || pe.Kind != KindStaleSlot || err.Error() != tt.wantSlot):
				t.Errorf("CheckSlot: %v\nwant %s", err, tt.wantSlot)
			}
			if err := tt.v.CheckLease(); err != tt.wantLease {
				t.Errorf("CheckLease: %v, want %v", err, tt.wantLease)
			}
		})
	}
}
