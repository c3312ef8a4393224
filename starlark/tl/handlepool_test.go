package tl

import (
	"runtime"
	"testing"
	"unsafe"

	"kernbench/engine/machine"
	"kernbench/engine/prims"
	"kernbench/engine/sim"
)

// The kernels of a run share one pool of recycled handles (HandlePool):
// the load a rank issues next reuses the handle any rank recycled last
// (still in cache), filled anew for its own source, and a kernel created
// without a pool gets one of its own rather than none.
func TestHandlePool_SharedByTheKernelsOfARun(t *testing.T) {
	m := timingOnlyMachine(t, 2)
	s := m.Sim
	pool := &HandlePool{}
	a := New(&Kernel{M: m, PE: m.Ranks[0], Rank: 0, World: 2, Handles: pool})
	b := New(&Kernel{M: m, PE: m.Ranks[1], Rank: 1, World: 2, Handles: pool})
	if a.Handles != pool || b.Handles != pool {
		t.Fatal("New replaced the pool the kernels were created with")
	}
	ptr := func(k *Kernel) *Ptr {
		return &Ptr{prims.View{Reg: machine.Region{Mem: k.PE.TCM, Off: 0, N: 64}, Count: 16, Rank: k.Rank}}
	}
	ha, err := a.FetchLoad("tl.fetch", &ptr(a).View)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	a.Recycle(ha, true)
	hb, err := b.FetchLoad("tl.fetch", &ptr(b).View)
	if err != nil {
		t.Fatal(err)
	}
	if hb != ha {
		t.Fatal("rank 1's load did not reuse the load rank 0 recycled last")
	}
	if hb.Src.Reg.Mem != b.PE.TCM || hb.Src.Rank != 1 || hb.Op == nil || hb.Op.Done || hb.Stale != nil {
		t.Fatalf("the reused load was not filled anew for rank 1's load: src %v rank %d, op %v, stale %v", hb.Src.Reg, hb.Src.Rank, hb.Op, hb.Stale)
	}
	if pool.New() == hb {
		t.Fatal("the reused load is still in the pool")
	}

	own := New(&Kernel{M: m, PE: m.Ranks[0], Rank: 0, World: 1})
	if own.Handles == nil || own.Handles == pool {
		t.Fatal("a kernel created without a pool did not get one of its own")
	}
}

// A handle begins with its load (prims.Load, whose fields a private load
// touches: TestLoadFieldsAreContiguous), and its size class starts on a
// line or half-way: a field added before the load, or one growing the
// handle, spreads a load over a fourth cache line.
func TestHandleBeginsWithItsLoad(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the cache-line layout is laid out for 64-bit pointers")
	}
	var h handle
	if unsafe.Offsetof(h.Load) != 0 {
		t.Errorf("handle.Load is at byte %d, want 0", unsafe.Offsetof(h.Load))
	}
	if s := unsafe.Sizeof(h); s != 224 {
		t.Errorf("handle is %d bytes, want 224 (a size class starting on a line or half-way)", s)
	}
}

// timingOnlyMachine is a harness machine with ranks placed, moving no
// bytes: the hazard and pool tests look at operations, not data.
func timingOnlyMachine(t *testing.T, ranks int) *machine.Machine {
	t.Helper()
	m, err := machine.New(sim.New(), HarnessParams())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Place(ranks); err != nil {
		t.Fatal(err)
	}
	m.SetTimingOnly()
	return m
}

// A Kernel begins with its engine kernel, whose first lines hold what a
// message's piece touches (prims' TestKernelPieceFieldsFirst).
func TestKernelBeginsWithItsEngineKernel(t *testing.T) {
	var k Kernel
	if off := unsafe.Offsetof(k.Kernel); off != 0 {
		t.Errorf("Kernel.Kernel (prims.Kernel) is at byte %d, want 0", off)
	}
}

// New binds no attribute (a kernel reads a handful of tl's fifty, and a
// run of tens of thousands of ranks made them all for every rank): each is
// made as the kernel first reads it, and a second read gives the same
// value.
func TestNewBindsAttributesOnFirstRead(t *testing.T) {
	m := timingOnlyMachine(t, 1)
	pool := &HandlePool{}
	stats := &Stats{}
	if n := testing.AllocsPerRun(10, func() {
		New(&Kernel{M: m, PE: m.Ranks[0], Rank: 0, World: 1, Handles: pool, Stats: stats})
	}); n > 1 {
		t.Errorf("New allocates %v objects besides the kernel; want none", n-1)
	}
	k := New(&Kernel{M: m, PE: m.Ranks[0], Rank: 0, World: 1})
	for _, name := range []string{"send", "machine", "load", "rank"} {
		a, err := k.Attr(name)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := k.Attr(name)
		if a != b {
			t.Errorf("tl.%s read twice gave two values (%v, %v)", name, a, b)
		}
	}
	if f, _ := k.Attr("fetch"); f != k.attr(attrIndex["load"]) {
		t.Error(`tl.fetch and getattr(tl, "load") are not the same builtin`)
	}
}

// A kernel that reads a few of tl's attributes and calls no fused
// primitive holds about a kilobyte: its Kernel (the fused primitives'
// slots and the write sites are made at their first use) and room for
// the dozen attributes a kernel reads, not a slot for each of tl's 44
// (at 65,536 ranks each kilobyte a rank is 64 MiB).
func TestKernelHoldsLittleBeforeUse(t *testing.T) {
	m := timingOnlyMachine(t, 1)
	pool := &HandlePool{}
	stats := &Stats{}
	const kernels = 1000
	keep := make([]*Kernel, kernels)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		k := New(&Kernel{M: m, PE: m.Ranks[0], Rank: 0, World: 1, Handles: pool, Stats: stats})
		for _, name := range []string{"rank", "slot_size", "n_slots"} {
			if _, err := k.Attr(name); err != nil {
				t.Fatal(err)
			}
		}
		keep[i] = k
	}
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	if per := (after.TotalAlloc - before.TotalAlloc) / kernels; per > 1300 {
		t.Errorf("a kernel that read three attributes allocated %d bytes, want at most 1300", per)
	}
}
