package tl

import (
	"testing"

	"kernbench/engine/machine"
)

// The queue of tl.prefetch loads: a take at its head, in the middle or of
// a range never loaded, a push into a full queue whose head has moved on,
// and a write that makes some loads stale leave exactly the loads not
// taken or dropped, in issue order.
func TestPrefetchQueue_TakePushDrop(t *testing.T) {
	mem := &machine.Memory{}
	reg := func(i int64) machine.Region { return machine.Region{Mem: mem, Off: 64 * i, N: 64} }
	hs := make([]*handle, 8)
	for i := range hs {
		hs[i] = &handle{}
	}
	k := &Kernel{}
	k.prefetched.loads = make([]prefetchedLoad, 0, 4)
	for i := int64(0); i < 4; i++ {
		k.prefetched.push(prefetchedLoad{reg(i), hs[i]})
	}
	want := func(what string, idx ...int) {
		t.Helper()
		live := k.prefetched.live()
		ok := len(live) == len(idx)
		for j := 0; ok && j < len(idx); j++ {
			ok = live[j].reg == reg(int64(idx[j])) && live[j].h == hs[idx[j]]
		}
		if !ok {
			got := []int64{}
			for _, l := range live {
				got = append(got, l.reg.Off/64)
			}
			t.Fatalf("%s: live loads %v, want %v", what, got, idx)
		}
	}
	if h := k.takePrefetched(reg(0)); h != hs[0] {
		t.Fatalf("take at the head: got %p, want %p", h, hs[0])
	}
	want("after the head's take", 1, 2, 3)
	if h := k.takePrefetched(reg(2)); h != hs[2] {
		t.Fatalf("take in the middle: got %p, want %p", h, hs[2])
	}
	want("after a middle take", 1, 3)
	if h := k.takePrefetched(reg(7)); h != nil {
		t.Fatalf("take of a range never loaded: got %p, want nil", h)
	}
	// The queue is full (cap 4) with its head moved on: pushes reuse the
	// room of the taken loads.
	k.prefetched.push(prefetchedLoad{reg(4), hs[4]})
	k.prefetched.push(prefetchedLoad{reg(5), hs[5]})
	want("after pushes into a full queue", 1, 3, 4, 5)
	if !k.prefetchedOverlap(machine.Region{Mem: mem, Off: 64*3 + 10, N: 100}) {
		t.Fatal("a range over loads 3 and 4 overlaps no prefetched load")
	}
	k.dropPrefetched(machine.Region{Mem: mem, Off: 64*3 + 10, N: 100})
	want("after a write over loads 3 and 4", 1, 5)
	k.dropPrefetched(machine.Region{Mem: &machine.Memory{}, Off: 64, N: 64})
	want("after a write into another memory", 1, 5)
	k.takePrefetched(reg(1))
	k.takePrefetched(reg(5))
	want("after every load is taken")
	if k.prefetched.head != 0 || len(k.prefetched.loads) != 0 {
		t.Fatalf("an empty queue restarts at its slice's start: head %d, len %d", k.prefetched.head, len(k.prefetched.loads))
	}
}
