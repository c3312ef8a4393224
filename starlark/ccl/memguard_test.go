package ccl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/engine/dtype"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/hostmem/admit"
	"kernbench/starlark/report"
)

func testPlan(t *testing.T, coll string, world int, opts Options) *plan {
	t.Helper()
	c, err := LookupCollective(coll)
	if err != nil {
		t.Fatal(err)
	}
	return &plan{world: world, coll: c, dt: dtype.F32, opts: opts}
}

func TestCheckMemory(t *testing.T) {
	rg := hostmem.Rings{QPs: 16, NSlots: 8, SlotSize: 4096, Reach: 4}
	tests := []struct {
		name  string
		limit int64
		opts  Options
		want  []string // substrings of the message; nil = accepted
	}{
		{"no limit", 0, Options{Verify: true}, nil},
		{"fits", 1 << 30, Options{Verify: true}, nil},
		{"over: names the estimate and every alternative", 200 << 20, Options{Verify: true},
			[]string{"this run (4M per rank buffer) needs about 308.8 MiB of host memory (simulated memory 64.0 MiB, IPCQ rings 512.0 KiB, tl.alloc 64.0 MiB", "over --max-memory 200.0 MiB",
				"--timing-only (about 20.4 MiB: fits)", "--verify-data=false (about 277.7 MiB: too large too)", "--bytes 2M or smaller (about ", "raise --max-memory"}},
		{"nothing fits", 10 << 20, Options{Verify: true},
			[]string{"--timing-only (about 20.4 MiB: too large too)", "--verify-data=false (about 277.7 MiB: too large too)", "none fits at this world size"}},
		{"unverified: no --verify-data=false", 32 << 20, Options{},
			[]string{"--timing-only (about", "--bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.MaxMemory = tt.limit
			p := testPlan(t, "allreduce", 8, tt.opts)
			_, err := p.checkMemory(1<<20, rg, nil) // 4 MiB buffers, 64 MiB of data
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var f *report.Failure
			if !errors.As(err, &f) {
				t.Fatalf("got %v, want a Failure", err)
			}
			if diff := cmp.Diff([]any{report.ExitUsage, "OutOfMemory"}, []any{f.ErrorKind().Status, f.ErrorKind().Name}); diff != "" {
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

// A run whose configuration's estimate is over half the limit is counted
// by its probe before it is admitted: the counted estimate decides; a
// probe that passes the limit refuses the run; one that fails otherwise
// leaves the configuration's estimate. Runs far below the limit (under
// an eighth of it for a timing-only run), runs over 4 times it and probes
// pay for no probe, unless Options.ProbeMemory (not for a probe).
func TestCheckMemoryProbes(t *testing.T) {
	rg := hostmem.Rings{QPs: 16, NSlots: 8, SlotSize: 4096, Reach: 4}
	const count = 1 << 20 // 4 MiB buffers
	conf := hostmem.Configured(testPlan(t, "allreduce", 8, Options{Verify: true}).memRun(count, admit.Modes{Verify: true}), rg).Total()
	confT := hostmem.Configured(testPlan(t, "allreduce", 8, Options{TimingOnly: true}).memRun(count, admit.Modes{TimingOnly: true}), rg).Total()
	small := &hostmem.Counts{Ops: 1000}
	oom := &hostmem.OutOfMemoryError{Held: 1 << 30, Limit: 1}
	tests := []struct {
		name   string
		limit  int64
		opts   Options
		counts *hostmem.Counts
		err    error
		probed bool
		basis  string
		want   string // a substring of the refusal; "" = admitted
	}{
		{"far below the limit: no probe", 2*conf + 1, Options{Verify: true}, small, nil, false, hostmem.BasisConfiguration, ""},
		{"over half the limit: counted, admitted", 2*conf - 2, Options{Verify: true}, small, nil, true, hostmem.BasisCounted, ""},
		{"over the limit: counted, admitted", conf / 2, Options{Verify: true}, small, nil, true, hostmem.BasisCounted, ""},
		{"the probe passes the limit: refused", conf / 2, Options{Verify: true}, nil, oom, true, hostmem.BasisConfiguration, "its --timing-only probe, which holds less, passed it (it held 1.0 GiB at t=0ns)"},
		{"the probe fails otherwise: the configuration's estimate", conf / 2, Options{Verify: true}, nil, errors.New("reads values"), true, hostmem.BasisConfiguration, "needs about"},
		{"timing-only, under an eighth of the limit: no probe", 8*confT + 8, Options{TimingOnly: true}, small, nil, false, hostmem.BasisConfiguration, ""},
		{"timing-only, over an eighth of the limit: counted", 8*confT - 8, Options{TimingOnly: true}, small, nil, true, hostmem.BasisCounted, ""},
		{"timing-only over the limit: counted, not refused by the configuration", confT - 1, Options{TimingOnly: true}, &hostmem.Counts{}, nil, true, hostmem.BasisCounted, ""},
		{"timing-only, the probe passes the limit: refused", confT / 3, Options{TimingOnly: true}, nil, oom, true, hostmem.BasisConfiguration, "a probe of it (the same --timing-only run) passed it (it held 1.0 GiB at t=0ns)"},
		{"timing-only, over 4 times the limit: no probe could admit it", confT/4 - 1, Options{TimingOnly: true}, small, nil, false, hostmem.BasisConfiguration, "needs about"},
		{"not even the probe fits: no probe, the configuration's refusal", 1 << 20, Options{Verify: true}, small, nil, false, hostmem.BasisConfiguration, "--timing-only (about 20.4 MiB: too large too)"},
		{"ProbeMemory: counted however far below", 0, Options{Verify: true, ProbeMemory: true}, small, nil, true, hostmem.BasisCounted, ""},
		{"ProbeMemory counts timing-only runs too", 0, Options{TimingOnly: true, ProbeMemory: true}, small, nil, true, hostmem.BasisCounted, ""},
		{"a probe is not probed (it would probe itself without end)", 8*confT - 8, Options{TimingOnly: true, probe: true}, small, nil, false, hostmem.BasisConfiguration, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.MaxMemory = tt.limit
			p := testPlan(t, "allreduce", 8, tt.opts)
			probed := false
			e, err := p.checkMemory(count, rg, func(int, int64) (*hostmem.Counts, error) {
				probed = true
				return tt.counts, tt.err
			})
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if diff := cmp.Diff([]any{tt.probed, tt.basis, tt.want == ""}, []any{probed, e.Basis, err == nil}); diff != "" {
				t.Errorf("probed, basis, admitted (-want +got):\n%s\n%s", diff, msg)
			}
			if tt.want != "" && !strings.Contains(msg, tt.want) {
				t.Errorf("refusal lacks %q:\n%s", tt.want, msg)
			}
			if e.Basis == hostmem.BasisCounted && tt.opts.Verify && e.Configured != conf {
				t.Errorf("counted estimate names the configuration's %d, want %d", e.Configured, conf)
			}
		})
	}
}

// A run from 1024 ranks is counted by probes of a sixteenth and a
// quarter of its world, each with the run's chunk per peer, and
// extrapolated; when a smaller world does not run, by a probe of the run
// itself; a smaller world that passes the limit refuses it.
func TestCheckMemoryScaledProbes(t *testing.T) {
	rg := hostmem.Rings{QPs: 2048, NSlots: 8, SlotSize: 4096, Reach: 512}
	type call struct {
		World int
		Count int64
	}
	oom := &hostmem.OutOfMemoryError{Held: 1 << 30, Limit: 1}
	confT1024 := hostmem.Configured(testPlan(t, "allreduce", 1024, Options{TimingOnly: true}).memRun(1<<20, admit.Modes{TimingOnly: true}), rg).Total()
	tests := []struct {
		name  string
		coll  string
		world int
		count int64
		opts  Options
		fail  map[int]error // the probes that fail, by world
		calls []call
		refused,
		extrapolated bool
	}{
		{"1024 ranks: 64 and 256", "allreduce", 1024, 1 << 20, Options{TimingOnly: true}, nil,
			[]call{{64, 1 << 16}, {256, 1 << 18}}, false, true},
		{"4096 ranks: 256 and 1024", "allreduce", 4096, 1 << 20, Options{TimingOnly: true}, nil,
			[]call{{256, 1 << 16}, {1024, 1 << 18}}, false, true},
		{"a collective whose buffers grow with the world keeps its count", "allgather", 1024, 1024, Options{TimingOnly: true}, nil,
			[]call{{64, 1024}, {256, 1024}}, false, true},
		{"under 1024 ranks: the run itself", "allreduce", 512, 1024, Options{TimingOnly: true}, nil,
			[]call{{512, 1024}}, false, false},
		{"a run that moves bytes: the same", "allreduce", 1024, 1 << 20, Options{Verify: true}, nil,
			[]call{{64, 1 << 16}, {256, 1 << 18}}, false, true},
		{"a run that moves bytes whose own --timing-only run would not fit: the same, refused on their counts", "allreduce", 1024, 1 << 20, Options{Verify: true, MaxMemory: confT1024 / 2}, nil,
			[]call{{64, 1 << 16}, {256, 1 << 18}}, true, true},
		{"over 4 times the limit from the configuration alone: no probe", "allreduce", 1024, 1 << 20, Options{Verify: true, MaxMemory: confT1024/4 - 1}, nil,
			nil, true, false},
		{"timing-only, the same", "allreduce", 1024, 1 << 20, Options{TimingOnly: true, MaxMemory: confT1024/4 - 1}, nil,
			nil, true, false},
		{"a smaller world that does not run: the run itself", "allreduce", 1024, 1 << 20, Options{TimingOnly: true}, map[int]error{256: errors.New("no such topology")},
			[]call{{64, 1 << 16}, {256, 1 << 18}, {1024, 1 << 20}}, false, false},
		{"a smaller world passes the limit: refused", "allreduce", 1024, 1 << 20, Options{TimingOnly: true}, map[int]error{64: oom},
			[]call{{64, 1 << 16}}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.ProbeMemory = true
			p := testPlan(t, tt.coll, tt.world, tt.opts)
			var calls []call
			e, err := p.checkMemory(tt.count, rg, func(world int, count int64) (*hostmem.Counts, error) {
				calls = append(calls, call{world, count})
				if err := tt.fail[world]; err != nil {
					return nil, err
				}
				return &hostmem.Counts{Ops: int64(world * world), RetainedViews: int64(world)}, nil
			})
			if diff := cmp.Diff(tt.calls, calls); diff != "" {
				t.Errorf("probes (-want +got):\n%s", diff)
			}
			if (err != nil) != tt.refused {
				t.Fatalf("refused: %v, want %v", err, tt.refused)
			}
			if tt.refused && !tt.extrapolated {
				return
			}
			var worlds []int
			if e.Counts != nil {
				worlds = e.Counts.ProbeWorlds
			}
			if tt.extrapolated != (len(worlds) == 2) {
				t.Errorf("probe worlds %v, extrapolated: want %v", worlds, tt.extrapolated)
			}
			if tt.extrapolated && (e.Counts.Ops != int64(tt.world*tt.world) || e.Counts.RetainedViews != int64(tt.world)) {
				t.Errorf("extrapolated counts %+v, want %d operations and %d views", e.Counts, tt.world*tt.world, tt.world)
			}
		})
	}
}

// A size counted by probes runs them before its own world is built: a
// probe's looks (tl.Retention) are full collections, which marked the
// run's world too when it was built first (300 MB at 65,536 ranks, at
// each of 24 looks: 8 of a 14 s run). A run whose placement, rings or
// buffers the placed machine checks first is built first, as before (one
// whose buffers do not fit is refused without a probe).
func TestProbesRunBeforeTheWorldIsBuilt(t *testing.T) {
	type placed struct {
		World int
		Probe bool
	}
	tests := []struct {
		name  string
		algo  string
		world int
		bytes int64
		opts  Options
		want  []placed
		fails bool
	}{
		{"scaled probes", "tree_allreduce", 1024, 4 << 10, Options{TimingOnly: true, ProbeMemory: true, Sets: []string{"system.sips=32"}},
			[]placed{{64, true}, {256, true}, {1024, false}}, false},
		{"a probe of the run itself", "ring_allreduce", 8, 4 << 10, Options{Verify: true, ProbeMemory: true},
			[]placed{{8, true}, {8, false}}, false},
		{"a placement: the world first", "ring_allreduce", 8, 4 << 10, Options{Verify: true, ProbeMemory: true, Sets: []string{"system.placement=[0,8,16,24,1,9,17,25]"}},
			[]placed{{8, false}, {8, true}}, false},
		{"no limit: no probe", "ring_allreduce", 8, 4 << 10, Options{Verify: true},
			[]placed{{8, false}}, false},
		{"buffers over the simulated memory: refused without a probe", "ring_allreduce", 8, 64 << 30, Options{Verify: true, ProbeMemory: true},
			[]placed{{8, false}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []placed
			placing = func(world int, probe bool) { got = append(got, placed{world, probe}) }
			defer func() { placing = nil }()
			opts := tt.opts
			opts.Embedded, opts.WorldSize, opts.Sizes = kernbench.Files, tt.world, []int64{tt.bytes}
			_, err := Run(tt.algo, opts)
			if (err != nil) != tt.fails {
				t.Fatalf("run: %v, want failed %v", err, tt.fails)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("worlds placed (-want +got):\n%s", diff)
			}
		})
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
	longTest(t)
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
	// Chunks of 1 to 8 KiB, where ring_allreduce_manual cuts 512-byte
	// pieces, the pipelined primitives 1 KiB ones, and odd chunks a
	// smaller last piece per step. The rings and the mesh are within 3
	// times the bound; the tree and recursive doubling take far fewer
	// steps than their reach allows (lower bound only).
	for _, a := range []string{"ring_allreduce", "ring_allreduce_manual", "ring_allreduce_bidir", "mesh_allreduce", "hier_allreduce", "rd_allreduce", "tree_allreduce"} {
		for _, b := range []int64{20 << 10, 32 << 10, 48 << 10, 128 << 10, 200 << 10, 384 << 10, 1000 << 10, 1200 << 10} {
			r := 3.0
			switch a {
			case "hier_allreduce":
				r = 4
			case "rd_allreduce", "tree_allreduce":
				r = 0
			}
			cases = append(cases, tc{algo: a, world: 32, bytes: b, maxRatio: r})
		}
	}
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
			if r.OpLog.BytesPerRecord > hostmem.LogRecordBytes {
				t.Errorf("the op_log kept %.0f bytes per record, the estimate counts %d", r.OpLog.BytesPerRecord, hostmem.LogRecordBytes)
			}
			est := r.HostMemory.OpLog / hostmem.LogRecordBytes
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
