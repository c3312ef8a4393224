package hostmem

import (
	"kernbench/engine/collective"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testRun is a run of the collective coll at world ranks, count f32
// elements per rank, in the modes modes gives: the figures ccl reads off
// its plan.
func testRun(t *testing.T, coll string, world int, count int64, modes Run) Run {
	t.Helper()
	c, ok := collective.Lookup(coll)
	if !ok {
		t.Fatalf("no collective %q", coll)
	}
	const sz = 4 // f32
	send, recv := count, count
	if c.SendMul {
		send *= int64(world)
	}
	if c.RecvMul {
		recv *= int64(world)
	}
	r := modes
	r.World = world
	if !r.TimingOnly {
		r.SendBytes, r.RecvBytes, r.CountBytes = SatMul(send, sz), SatMul(recv, sz), SatMul(count, sz)
		r.BusFactor, r.Alltoall = c.BusFactor(world), coll == "alltoall"
	}
	return r
}

func TestEstimateMemory(t *testing.T) {
	const mib = 1 << 20
	rg := Rings{QPs: 16, NSlots: 8, SlotSize: 4096, Reach: 4} // a ring of 8 ranks, two directions each
	ringBytes := int64(16 * 8 * 4096)
	ranks := int64(8*perRankBytes + 16*perQPBytes)
	kernels := int64(8 * 8 * 4 * perStepBytes)
	// ring allreduce at 8 ranks × 1 MiB: 1.75 MiB of bus bytes per rank in
	// 4 KiB messages, 448 per rank, and a partly filled one for each of
	// 8 × 4 steps.
	records := int64((480*recordsPerMsg + recordsPerRank) * 8)
	oplog, phase2 := records*LogRecordBytes, records*phase2PerRecord
	// × 32 (32 MiB buffers): 14336 full slots and 32 partly filled ones.
	records32 := int64((14368*recordsPerMsg + recordsPerRank) * 8)
	small := ranks + kernels
	// Under 256 MiB of held blocks (the bench's buffers and the rings,
	// twice them when verified: the image) the collector's headroom is
	// Go's 100 % of what is live, gc.go's above. Kernels may allocate work
	// buffers as large as the bench's (Scratch).
	tests := []struct {
		name  string
		coll  string
		count int64
		modes Run
		want  Estimate
	}{
		// Blocks of one repeated pattern (the recv sentinel, zeroed rings)
		// cost the image nothing; the replay holds per record, not per
		// block written.
		{"verified", "allreduce", mib / 4, Run{Verify: true},
			Estimate{Data: 16 * mib, Rings: ringBytes, Scratch: 16 * mib, OpLog: oplog, Phase2: phase2, Ranks: ranks, Kernels: kernels,
				Runtime: RuntimeBytes + (32*mib+ringBytes+oplog+phase2+small)/100*100}},
		// In place, the blocks phase 1 writes hold the inputs: the image
		// keeps them in full.
		{"verified in place: the image keeps the inputs", "allreduce", mib / 4, Run{Verify: true, InPlace: true},
			Estimate{Data: 8 * mib, Image: 8 * mib, Rings: ringBytes, Scratch: 8 * mib, OpLog: oplog, Phase2: phase2, Ranks: ranks, Kernels: kernels,
				Runtime: RuntimeBytes + (24*mib+ringBytes+oplog+phase2+small)/100*100}},
		{"verified, large: gc.go's headroom", "allreduce", 8 * mib, Run{Verify: true},
			Estimate{Data: 512 * mib, Rings: ringBytes, Scratch: 512 * mib, OpLog: records32 * LogRecordBytes, Phase2: records32 * phase2PerRecord, Ranks: ranks, Kernels: kernels,
				Runtime: RuntimeBytes + (1024*mib+ringBytes+records32*(LogRecordBytes+phase2PerRecord)+small)/100*int64(GCPercent(2*(512*mib+ringBytes)))}},
		{"unverified", "allreduce", mib / 4, Run{},
			Estimate{Data: 16 * mib, Rings: ringBytes, Scratch: 16 * mib, Ranks: ranks, Kernels: kernels, Runtime: RuntimeBytes + (32*mib+ringBytes+small)/100*100}},
		{"unverified, large: gc.go's headroom over the memory alone", "allreduce", 4 * mib, Run{},
			Estimate{Data: 256 * mib, Rings: ringBytes, Scratch: 256 * mib, Ranks: ranks, Kernels: kernels, Runtime: RuntimeBytes + (512*mib+ringBytes+small)/100*int64(GCPercent(256*mib+ringBytes))}},
		{"unverified with --oplog keeps the log", "allreduce", mib / 4, Run{KeepsLog: true},
			Estimate{Data: 16 * mib, Rings: ringBytes, Scratch: 16 * mib, OpLog: oplog, Ranks: ranks, Kernels: kernels, Runtime: RuntimeBytes + (32*mib+ringBytes+oplog+small)/100*100}},
		{"in place: one buffer", "allreduce", mib / 4, Run{InPlace: true},
			Estimate{Data: 8 * mib, Rings: ringBytes, Scratch: 8 * mib, Ranks: ranks, Kernels: kernels, Runtime: RuntimeBytes + (16*mib+ringBytes+small)/100*100}},
		{"timing only: no data, no log", "allreduce", mib / 4, Run{TimingOnly: true, Verify: true},
			Estimate{Ranks: ranks, Kernels: kernels, Runtime: RuntimeBytes + kernels}},
		{"allgather: the recv buffer is world × count", "allgather", mib / 4, Run{},
			Estimate{Data: 8 * 9 * mib, Rings: ringBytes, Scratch: 8 * 9 * mib, Ranks: ranks, Kernels: kernels, Runtime: RuntimeBytes + (144*mib+ringBytes+small)/100*100}},
		{"huge sizes saturate", "allreduce", 1 << 61, Run{Verify: true},
			Estimate{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Configured(testRun(t, tt.coll, 8, tt.count, tt.modes), rg)
			if strings.HasPrefix(tt.name, "huge") {
				// Only: nothing wraps negative.
				if got.Total() <= 0 || got.Data <= 0 {
					t.Errorf("estimate wrapped: %+v", got)
				}
				return
			}
			tt.want.Basis = BasisConfiguration
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Configured (-want +got):\n%s", diff)
			}
		})
	}
}

// estimateCounted makes the algorithm's part from a probe's counts: its
// records (data operations, allocations, the bench's own per rank), the
// views and handles its kernels held at the peak, and the bytes those
// handles move when the run moves bytes; the collector's headroom is the
// garbage that fills it, up to gc.go's.
func TestEstimateCounted(t *testing.T) {
	const mib = 1 << 20
	rg := Rings{QPs: 16, NSlots: 8, SlotSize: 4096, Reach: 4}
	ringBytes := int64(3 * 16 * 8 * 4096 / 2) // the rings' TCM grows by doubling
	c := &Counts{Ops: 10000, AllocBytes: 1 * mib, Allocs: 8, TileBytes: 4 * mib,
		RetainedViews: 800, RetainedHandles: 400, RetainedHandleBytes: 400 * 4096}
	records := int64(10000 + 8 + 8*recordsPerRank)
	ranks := int64(8*perRankBytes + 16*perQPBytes)
	kernels := int64(800*ViewBytes + 400*HandleBytes)
	held := kernels + 400*4096/100*handleBytePercent
	// The handles, held as the kernels go, fill half their headroom.
	// 10000 operations make more garbage than the ranks' state: it fills
	// the headroom over it.
	garbage := (held-400*HandleBytes)/100*garbagePercent + 400*HandleBytes/100*handleGarbagePercent + ranks
	scratch := int64(mib / 100 * scratchPercent)
	tests := []struct {
		name  string
		coll  string
		modes Run
		want  Estimate
	}{
		{"verified", "allreduce", Run{Verify: true},
			Estimate{Data: 16 * mib, Rings: ringBytes, Scratch: scratch, OpLog: records * LogRecordBytes, Phase2: records * phase2PerRecord, Ranks: ranks, Kernels: held,
				Runtime: RuntimeBytes + garbage + 4*mib/100*tileGarbagePercent + records*(LogRecordBytes+phase2PerRecord)/100*recordGarbagePercent}},
		{"unverified", "allreduce", Run{},
			Estimate{Data: 16 * mib, Rings: ringBytes, Scratch: scratch, Ranks: ranks, Kernels: held,
				Runtime: RuntimeBytes + garbage + 4*mib/100*tileGarbagePercent}},
		{"timing-only: no bytes, no records, kernels' views and handles only", "allreduce", Run{TimingOnly: true},
			Estimate{Ranks: ranks, Kernels: kernels, Runtime: RuntimeBytes + 800*ViewBytes/100*garbagePercent + 400*HandleBytes/100*handleGarbagePercent + ranks}},
		{"verified alltoall: the replay holds the recv buffers", "alltoall", Run{Verify: true},
			Estimate{Data: 16 * mib, Rings: ringBytes, Scratch: scratch, OpLog: records * LogRecordBytes, Phase2: records*phase2PerRecord + 8*mib, Ranks: ranks, Kernels: held,
				Runtime: RuntimeBytes + garbage + 4*mib/100*tileGarbagePercent + records*(LogRecordBytes+phase2PerRecord)/100*recordGarbagePercent}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Counted(testRun(t, tt.coll, 8, mib/4, tt.modes), rg, c)
			if tt.coll == "alltoall" {
				got = Counted(testRun(t, tt.coll, 8, mib/32, tt.modes), rg, c) // count per peer: 1 MiB buffers
			}
			tt.want.Basis, tt.want.Counts = BasisCounted, c
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Counted (-want +got):\n%s", diff)
			}
		})
	}
}

// Tiles whose garbage would more than double the heap fill Go's goal, and
// the goal is over what was live at the last collection: all that is held
// throughout, half what grows through the run (the op_log, the replay, the
// handles and their bytes; ring_allreduce_manual at 64 ranks × 256K).
func TestEstimateCountedGoalOverWhatGrows(t *testing.T) {
	const mib = 1 << 20
	rg := Rings{QPs: 16, NSlots: 8, SlotSize: 4096, Reach: 4}
	c := &Counts{Ops: 100_000, TileBytes: 1 << 30, RetainedViews: 800, RetainedHandles: 4000, RetainedHandleBytes: 4000 * 4096}
	got := Counted(testRun(t, "allreduce", 8, mib/4, Run{Verify: true}), rg, c)
	grows := got.OpLog + got.Phase2 + 4000*HandleBytes + 4000*4096/100*handleBytePercent
	live := got.Total() - got.Runtime
	if want := RuntimeBytes + (live-grows/2)/100*100; got.Runtime != want {
		t.Errorf("runtime and headroom %d, want %d (%d live, %d of it growing)", got.Runtime, want, live, grows)
	}
}

// The headroom over the ranks' state is what their operations' garbage
// fills of it: none without operations, all of it once they make as much
// (mesh_allreduce at 1024 ranks: 764 K operations fill it; tree_allreduce,
// a few a rank, does not).
func TestEstimateCountedRankHeadroom(t *testing.T) {
	rg := Rings{QPs: 16, NSlots: 8, SlotSize: 4096, Reach: 4}
	ranks := int64(8*perRankBytes + 16*perQPBytes)
	for _, tt := range []struct {
		ops, want int64
	}{{0, 0}, {100, 100 * opGarbageBytes}, {ranks / opGarbageBytes * 2, ranks}} {
		c := &Counts{Ops: tt.ops}
		got := Counted(testRun(t, "allreduce", 8, 1024, Run{TimingOnly: true}), rg, c)
		if got.Runtime-RuntimeBytes != tt.want {
			t.Errorf("%d operations: headroom %d, want %d", tt.ops, got.Runtime-RuntimeBytes, tt.want)
		}
	}
}

// However much the kernels keep in views (ring_allreduce_bidir at 1024
// ranks, --timing-only: 4.0 M views, 1.25 GiB at the peak), the garbage
// made around them fills Go's 100 % over them: a cap of 64 MiB and 40 %
// put it at 0.73 of its peak.
func TestEstimateCountedLargeKernelState(t *testing.T) {
	rg := Rings{QPs: 16, NSlots: 8, SlotSize: 4096, Reach: 4}
	c := &Counts{RetainedViews: 10_000_000}
	got := Counted(testRun(t, "allreduce", 8, 1024, Run{TimingOnly: true}), rg, c)
	kernels := int64(10_000_000 * ViewBytes)
	want := Estimate{Ranks: 8*perRankBytes + 16*perQPBytes, Kernels: kernels, Runtime: RuntimeBytes + kernels/100*garbagePercent,
		Basis: BasisCounted, Counts: c}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Counted (-want +got):\n%s", diff)
	}
}

// A -j sweep's sizes share --max-memory: a size waits while its estimate
// does not fit next to the running ones, and one over the limit alone
// still runs once nothing else does.
func TestMemBudget(t *testing.T) {
	b := NewBudget(100)
	relA := b.Acquire(60)
	started := make(chan struct{})
	go func() {
		rel := b.Acquire(50) // 60 + 50 > 100: waits for A
		close(started)
		rel()
	}()
	// Wait for the second size to be waiting, however long the machine
	// takes to get there (no clock: a loaded machine is only slower).
	for {
		b.mu.Lock()
		waiting := b.waiting
		b.mu.Unlock()
		if waiting == 1 {
			break
		}
		select {
		case <-started:
			t.Fatal("a size started while its estimate did not fit next to the running one")
		default:
		}
		runtime.Gosched()
	}
	relA()
	<-started // else a hang, which go test's -timeout reports
	relC := b.Acquire(30)
	relD := b.Acquire(70) // 30 + 70 fits exactly
	relC()
	relD()
	relBig := b.Acquire(500) // alone: runs
	relBig()
	var none *Budget
	none.Acquire(1 << 60)() // no limit: admits everything
}

// The memory holding the rings leaves half of them behind as it grows,
// but no more than the room it has left.
func TestRingGrowth(t *testing.T) {
	r := testRun(t, "allreduce", 8, 1<<18, Run{Verify: true})
	ring := func(qps int, room int64) Rings { return Rings{QPs: qps, NSlots: 8, SlotSize: 4096, Room: room} }
	got := []int64{
		ringGrowth(r, ring(16, 0)),       // room unknown: half the rings
		ringGrowth(r, ring(16, 1<<20)),   // 64 KiB a PE in 1 MiB: half
		ringGrowth(r, ring(8*31, 1<<20)), // 992 KiB a PE in 1 MiB: the 32 KiB left
		ringGrowth(r, ring(8*40, 1<<20)), // more than fits: nothing
	}
	want := []int64{16 * 8 * 4096 / 2, 16 * 8 * 4096 / 2, 8 * 32 << 10, 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ringGrowth (-want +got):\n%s", diff)
	}
}

// A run from 1024 ranks is counted from probes of a sixteenth and a
// quarter of its world.
func TestScaledWorlds(t *testing.T) {
	type worlds struct {
		Small, Large int
		OK           bool
	}
	var got []worlds
	for _, w := range []int{2, 256, 1023, 1024, 2000, 4096} {
		s, l, ok := ScaledWorlds(w)
		if !ok {
			s, l = 0, 0
		}
		got = append(got, worlds{s, l, ok})
	}
	want := []worlds{{}, {}, {}, {64, 256, true}, {125, 500, true}, {256, 1024, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ScaledWorlds (-want +got):\n%s", diff)
	}
}

// From 16,384 ranks the probes stay at 1024 and 4096 ranks: a quarter of
// the world cost a quarter of a 65,536-rank tree's run.
func TestScaledWorldsAtMost4096(t *testing.T) {
	type worlds struct {
		World, Small, Large int
	}
	var got []worlds
	for _, w := range []int{16384, 16385, 20000, 32768, 65536, 1 << 20} {
		s, l, ok := ScaledWorlds(w)
		if !ok {
			t.Fatalf("ScaledWorlds(%d): not scaled", w)
		}
		got = append(got, worlds{w, s, l})
	}
	want := []worlds{{16384, 1024, 4096}, {16385, 1024, 4096}, {20000, 1024, 4096}, {32768, 1024, 4096}, {65536, 1024, 4096}, {1 << 20, 1024, 4096}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ScaledWorlds (-want +got):\n%s", diff)
	}
}

// Every count grows as the power of the world the two probes show: a
// ring's views as p², a tree's as p, the fixed as p⁰; a count that
// shrinks stays, one that grows faster than p³ is taken as p³, and one
// the smaller probe did not see grows as p.
func TestExtrapolate(t *testing.T) {
	c1 := &Counts{Ops: 100, AllocBytes: 640, Allocs: 64, TileBytes: 50, RetainedViews: 4096, RetainedHandles: 0, RetainedHandleBytes: 1}
	c2 := &Counts{Ops: 1600, AllocBytes: 2560, Allocs: 64, TileBytes: 40, RetainedViews: 4096 * 256, RetainedHandles: 10, RetainedHandleBytes: 0}
	got := Extrapolate(64, c1, 256, c2, 1024)
	want := &Counts{Ops: 25600, AllocBytes: 10240, Allocs: 64, TileBytes: 40, RetainedViews: 4096 * 256 * 64, RetainedHandles: 40, RetainedHandleBytes: 0,
		ProbeWorlds: []int{64, 256}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Extrapolate (-want +got):\n%s", diff)
	}
	e := Counted(Run{World: 1024, TimingOnly: true}, Rings{}, got)
	if s := e.String(); !strings.Contains(s, "counted by --timing-only probes at 64 and 256 ranks") {
		t.Errorf("estimate %q does not say which probes counted it", s)
	}
}
