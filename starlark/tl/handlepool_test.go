package tl

import (
	"testing"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// The kernels of a run share one pool of recycled handles (HandlePool):
// the load a rank issues next reuses the handle any rank recycled last
// (still in cache), filled anew for its own source, and a kernel created
// without a pool gets one of its own rather than none.
func TestHandlePool_SharedByTheKernelsOfARun(t *testing.T) {
	s := sim.New()
	m, err := machine.New(s, HarnessParams())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Place(2); err != nil {
		t.Fatal(err)
	}
	m.SetTimingOnly()
	pool := &HandlePool{}
	a := New(&Kernel{M: m, PE: m.Ranks[0], Rank: 0, World: 2, Handles: pool})
	b := New(&Kernel{M: m, PE: m.Ranks[1], Rank: 1, World: 2, Handles: pool})
	if a.Handles != pool || b.Handles != pool {
		t.Fatal("New replaced the pool the kernels were created with")
	}
	ptr := func(k *Kernel) *Ptr {
		return &Ptr{Reg: machine.Region{Mem: k.PE.TCM, Off: 0, N: 64}, Count: 16, Rank: k.Rank}
	}
	ha, err := a.fetchAsync("tl.fetch", ptr(a))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	a.recycle(ha, true)
	hb, err := b.fetchAsync("tl.fetch", ptr(b))
	if err != nil {
		t.Fatal(err)
	}
	if hb != ha {
		t.Fatal("rank 1's load did not reuse the handle rank 0 recycled last")
	}
	if hb.src.Reg.Mem != b.PE.TCM || hb.src.Rank != 1 || hb.op == nil || hb.op.Done || hb.stale != nil || hb.nextFree != nil {
		t.Fatalf("the reused handle was not filled anew for rank 1's load: src %v rank %d, op %v, stale %v", hb.src.Reg, hb.src.Rank, hb.op, hb.stale)
	}
	if pool.free != nil {
		t.Fatal("the reused handle is still in the pool")
	}

	own := New(&Kernel{M: m, PE: m.Ranks[0], Rank: 0, World: 1})
	if own.Handles == nil || own.Handles == pool {
		t.Fatal("a kernel created without a pool did not get one of its own")
	}
}
