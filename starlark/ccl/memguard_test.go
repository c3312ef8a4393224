package ccl

import (
	"fmt"

	"errors"
	"io/fs"
	"kernbench"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/dtype"
)

func testPlan(t *testing.T, coll string, world int, opts Options) *plan {
	t.Helper()
	c, err := LookupCollective(coll)
	if err != nil {
		t.Fatal(err)
	}
	return &plan{world: world, coll: c, dt: dtype.F32, opts: opts}
}

func TestEstimateMemory(t *testing.T) {
	const mib = 1 << 20
	rg := rings{QPs: 16, NSlots: 8, SlotSize: 4096, Reach: 4} // a ring of 8 ranks, two directions each
	ringBytes := int64(16 * 8 * 4096)
	ranks := int64(8 * (perRankBytes + 8*4*perStepBytes))
	// ring allreduce at 8 ranks × 1 MiB: 1.75 MiB of bus bytes per rank in
	// 4 KiB messages, 448 per rank, and a partly filled one for each of
	// 8 × 4 steps.
	records := int64((480*recordsPerMsg + recordsPerRank) * 8)
	tests := []struct {
		name  string
		coll  string
		count int64
		opts  Options
		want  MemoryEstimate
	}{
		// The pre-run image keeps the sentinel-filled recv buffers and the
		// zeroed rings as patterns; the replay may hold every block phase 1
		// wrote (recv side and rings).
		{"verified", "allreduce", mib / 4, Options{Verify: true},
			MemoryEstimate{Data: 16 * mib, Rings: ringBytes, OpLog: records * recordBytes * 3 / 2, Phase2: 8*mib + ringBytes + records*phase2PerRecord, Ranks: ranks,
				Runtime: runtimeBytes + 16*mib/100*10 + (records*recordBytes*3/2+8*mib+ringBytes+records*phase2PerRecord+ranks)/2}},
		// In place, the blocks phase 1 writes hold the inputs: the image
		// keeps them in full.
		{"verified in place: the image keeps the inputs", "allreduce", mib / 4, Options{Verify: true, InPlace: true},
			MemoryEstimate{Data: 8 * mib, Image: 8 * mib, Rings: ringBytes, OpLog: records * recordBytes * 3 / 2, Phase2: 8*mib + ringBytes + records*phase2PerRecord, Ranks: ranks,
				Runtime: runtimeBytes + 16*mib/100*10 + (records*recordBytes*3/2+8*mib+ringBytes+records*phase2PerRecord+ranks)/2}},
		{"unverified", "allreduce", mib / 4, Options{},
			MemoryEstimate{Data: 16 * mib, Rings: ringBytes, Ranks: ranks, Runtime: runtimeBytes + 16*mib/100*10 + ranks/2}},
		{"unverified with --oplog keeps the log", "allreduce", mib / 4, Options{OpLog: &strings.Builder{}},
			MemoryEstimate{Data: 16 * mib, Rings: ringBytes, OpLog: records * recordBytes * 3 / 2, Ranks: ranks, Runtime: runtimeBytes + 16*mib/100*10 + (records*recordBytes*3/2+ranks)/2}},
		{"in place: one buffer", "allreduce", mib / 4, Options{InPlace: true},
			MemoryEstimate{Data: 8 * mib, Rings: ringBytes, Ranks: ranks, Runtime: runtimeBytes + 8*mib/100*10 + ranks/2}},
		{"timing only: no data, no log", "allreduce", mib / 4, Options{TimingOnly: true, Verify: true},
			MemoryEstimate{Ranks: ranks, Runtime: runtimeBytes}},
		{"allgather: the recv buffer is world × count", "allgather", mib / 4, Options{},
			MemoryEstimate{Data: 8 * 9 * mib, Rings: ringBytes, Ranks: ranks, Runtime: runtimeBytes + 72*mib/100*10 + ranks/2}},
		{"huge sizes saturate", "allreduce", 1 << 61, Options{Verify: true},
			MemoryEstimate{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPlan(t, tt.coll, 8, tt.opts)
			got := p.estimateMemory(tt.count, rg)
			if strings.HasPrefix(tt.name, "huge") {
				// Only: nothing wraps negative.
				if got.Total() <= 0 || got.Data <= 0 {
					t.Errorf("estimate wrapped: %+v", got)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("estimateMemory (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckMemory(t *testing.T) {
	rg := rings{QPs: 16, NSlots: 8, SlotSize: 4096, Reach: 4}
	tests := []struct {
		name  string
		limit int64
		opts  Options
		want  []string // substrings of the message; nil = accepted
	}{
		{"no limit", 0, Options{Verify: true}, nil},
		{"fits", 1 << 30, Options{Verify: true}, nil},
		{"over: names the estimate and every alternative", 128 << 20, Options{Verify: true},
			[]string{"this run (4M per rank buffer) needs about 194.9 MiB of host memory (simulated memory 64.0 MiB, IPCQ rings 512.0 KiB", "over --max-memory 128.0 MiB",
				"--timing-only (about 25.5 MiB: fits)", "--verify-data=false (about 97.2 MiB: fits)", "--bytes 2M or smaller (about ", "raise --max-memory"}},
		{"nothing fits", 10 << 20, Options{Verify: true},
			[]string{"--timing-only (about 25.5 MiB: too large too)", "--verify-data=false (about 97.2 MiB: too large too)", "none fits at this world size"}},
		{"unverified: no --verify-data=false", 32 << 20, Options{},
			[]string{"--timing-only (about", "--bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.MaxMemory = tt.limit
			p := testPlan(t, "allreduce", 8, tt.opts)
			_, err := p.checkMemory(1<<20, rg) // 4 MiB buffers, 64 MiB of data
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("got %v, want a Failure", err)
			}
			if diff := cmp.Diff([]any{ExitUsage, "OutOfMemory"}, []any{f.Code, f.Kind}); diff != "" {
				t.Errorf("code, kind (-want +got):\n%s", diff)
			}
			for _, w := range tt.want {
				if !strings.Contains(f.Msg, w) {
					t.Errorf("message lacks %q:\n%s", w, f.Msg)
				}
			}
			if tt.opts.Verify == false && strings.Contains(f.Msg, "--verify-data=false") {
				t.Errorf("suggests --verify-data=false to an unverified run:\n%s", f.Msg)
			}
		})
	}
}

func TestAvailableMemory(t *testing.T) {
	const meminfo = "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n"
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if s, ok := m[name]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	tests := []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"meminfo only", map[string]string{"/proc/meminfo": meminfo}, 8000000 * 1024},
		{"cgroup v2 limit below", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30},
		{"cgroup v2 without limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, 8000000 * 1024},
		{"cgroup v1 limit below", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30},
		{"cgroup v1 unlimited", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 8000000 * 1024},
		{"cgroup limit above what is available", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "68719476736"}, 8000000 * 1024},
		{"old kernel: MemTotal", map[string]string{"/proc/meminfo": "MemTotal:       4000000 kB\n"}, 4000000 * 1024},
		{"nothing known", map[string]string{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := availableMemory(files(tt.files)); got != tt.want {
				t.Errorf("availableMemory = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestFlagSize(t *testing.T) {
	got := []string{flagSize(4 << 20), flagSize(1 << 30), flagSize(96 << 10), flagSize(1000), flagSize(3 << 19)}
	want := []string{"4M", "1G", "96K", "1000", "1536K"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flagSize (-want +got):\n%s", diff)
	}
}

// The op_log estimate is an upper bound on the records the shipped
// algorithms log (records are what the op_log's host memory grows with;
// counting them is deterministic where a peak RSS is not), and within a
// small factor of them where records dominate the estimate: large buffers,
// and many ranks with tiny chunks (ring_allreduce at 1024 ranks × 4K sends
// 2 × 1023 one-element messages per rank; the first estimate counted two
// 4 KiB ones and was 1000 times short), and the alltoall relayed around a
// ring (p(p - 1)/2 chunks per rank).
func TestEstimateMessagesBoundsShippedAlgorithms(t *testing.T) {
	type tc struct {
		algo  string
		world int
		bytes int64
		o     Options
		// maxRatio bounds estimate/records (0: only the lower bound).
		maxRatio float64
	}
	var cases []tc
	for _, a := range []string{"ring_allreduce", "ring_allreduce_manual", "ring_allreduce_bidir", "ring_allreduce_unidir",
		"tree_allreduce", "tree_broadcast", "tree_reduce", "mesh_allreduce", "custom_mesh", "ring_reduce_scatter",
		"ring_allgather", "alltoall", "rd_allreduce", "hier_allreduce"} {
		for _, w := range []int{4, 32} {
			for _, b := range []int64{4, 64 << 10} {
				cases = append(cases, tc{algo: a, world: w, bytes: b})
			}
		}
		cases = append(cases, tc{algo: a, world: 8, bytes: 1 << 20, maxRatio: 3})
	}
	cases = append(cases,
		tc{"ring_allreduce", 128, 4096, Options{Sets: []string{"system.sips=4"}}, 3},
		tc{"ring_allreduce_bidir", 64, 64, Options{Sets: []string{"system.sips=2"}}, 3},
		tc{"alltoall", 16, 4096, Options{Topology: "ring_1d"}, 3},
	)
	for _, c := range cases {
		name := fmt.Sprintf("%s/world=%d/bytes=%d/%s%s", c.algo, c.world, c.bytes, c.o.Topology, strings.Join(c.o.Sets, ","))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := c.o
			o.Embedded = kernbench.Files
			o.Verify, o.Detail, o.WorldSize, o.Sizes = true, true, c.world, []int64{c.bytes}
			rep, err := Run(c.algo, o)
			if err != nil {
				t.Fatal(err)
			}
			r := rep.Results[0]
			if r.HostMemory == nil || r.OpLog == nil {
				t.Fatalf("no estimate or op_log cost in %+v", r)
			}
			est := r.HostMemory.OpLog / (recordBytes * 3 / 2)
			got := r.OpLog.Records
			if est < got {
				t.Errorf("estimated %d op_log records, the run logged %d (%d messages)", est, got, r.Ops.Send)
			}
			if c.maxRatio > 0 && float64(est) > c.maxRatio*float64(got) {
				t.Errorf("estimated %d op_log records, %.1f times the %d logged (want at most %.1f times)", est, float64(est)/float64(got), got, c.maxRatio)
			}
		})
	}
}

// A -j sweep's sizes share --max-memory: a size waits while its estimate
// does not fit next to the running ones, and one over the limit alone
// still runs once nothing else does.
func TestMemBudget(t *testing.T) {
	b := newMemBudget(100)
	relA := b.acquire(60)
	started := make(chan struct{})
	go func() {
		rel := b.acquire(50) // 60 + 50 > 100: waits for A
		close(started)
		rel()
	}()
	select {
	case <-started:
		t.Fatal("a size started while its estimate did not fit next to the running one")
	case <-time.After(50 * time.Millisecond):
	}
	relA()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting size did not start once the running one was done")
	}
	relC := b.acquire(30)
	relD := b.acquire(70) // 30 + 70 fits exactly
	relC()
	relD()
	relBig := b.acquire(500) // alone: runs
	relBig()
	var none *memBudget
	none.acquire(1 << 60)() // no limit: admits everything
}
