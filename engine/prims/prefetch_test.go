package prims

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/machine"
)

// The queue of loads issued ahead: a take at its head, in the middle or
// of a range never loaded, a push into a full queue whose head has moved
// on, and a write that makes some loads stale leave exactly the loads not
// taken or dropped, in issue order.
func TestPrefetchQueue_TakePushDrop(t *testing.T) {
	mem := &machine.Memory{}
	reg := func(i int64) machine.Region { return machine.Region{Mem: mem, Off: 64 * i, N: 64} }
	var pq PrefetchQueue
	pq.loads = make([]Prefetched, 0, 4)
	for i := int64(0); i < 4; i++ {
		pq.Push(reg(i), int(i)+1)
	}
	live := func() []int64 {
		got := []int64{}
		for _, l := range pq.Live() {
			if l.Reg != reg(l.Reg.Off/64) || l.H != any(int(l.Reg.Off/64)+1) {
				t.Errorf("load %v carries handle %d", l.Reg, l.H)
			}
			got = append(got, l.Reg.Off/64)
		}
		return got
	}
	steps := []struct {
		name string
		do   func() any // the handle taken, if any
		take any
		want []int64
	}{
		{"take at the head", func() any { return pq.Take(reg(0)) }, 1, []int64{1, 2, 3}},
		{"take in the middle", func() any { return pq.Take(reg(2)) }, 3, []int64{1, 3}},
		{"take of a range never loaded", func() any { return pq.Take(reg(7)) }, nil, []int64{1, 3}},
		{"pushes into a full queue", func() any { pq.Push(reg(4), 5); pq.Push(reg(5), 6); return nil }, nil, []int64{1, 3, 4, 5}},
		{"a write over loads 3 and 4", func() any { pq.Drop(machine.Region{Mem: mem, Off: 64*3 + 10, N: 100}); return nil }, nil, []int64{1, 5}},
		{"a write into another memory", func() any { pq.Drop(machine.Region{Mem: &machine.Memory{}, Off: 64, N: 64}); return nil }, nil, []int64{1, 5}},
		{"every load taken", func() any { return []any{pq.Take(reg(1)), pq.Take(reg(5))} }, []any{2, 6}, []int64{}},
	}
	for _, s := range steps {
		if diff := cmp.Diff(s.take, s.do()); diff != "" {
			t.Fatalf("%s: handles taken (-want +got):\n%s", s.name, diff)
		}
		if diff := cmp.Diff(s.want, live()); diff != "" {
			t.Fatalf("%s: live loads (-want +got):\n%s", s.name, diff)
		}
	}
	if pq.head != 0 || pq.Len() != 0 {
		t.Fatalf("an empty queue restarts at its slice's start: head %d, len %d", pq.head, len(pq.loads))
	}
}

// Overlaps looks at the loads not taken only.
func TestPrefetchQueue_Overlaps(t *testing.T) {
	mem := &machine.Memory{}
	var pq PrefetchQueue
	pq.Push(machine.Region{Mem: mem, Off: 0, N: 64}, 1)
	pq.Push(machine.Region{Mem: mem, Off: 64, N: 64}, 2)
	tests := []struct {
		reg  machine.Region
		want bool
	}{
		{machine.Region{Mem: mem, Off: 60, N: 8}, true},
		{machine.Region{Mem: mem, Off: 128, N: 8}, false},
		{machine.Region{Mem: &machine.Memory{}, Off: 0, N: 8}, false},
	}
	for _, tt := range tests {
		if got := pq.Overlaps(tt.reg); got != tt.want {
			t.Errorf("Overlaps(%v) = %v, want %v", tt.reg, got, tt.want)
		}
	}
	pq.Take(machine.Region{Mem: mem, Off: 0, N: 64})
	if pq.Overlaps(machine.Region{Mem: mem, Off: 0, N: 8}) {
		t.Error("a taken load still overlaps")
	}
}
