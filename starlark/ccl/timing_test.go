package ccl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/engine/machine"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
)

// A timing-only run moves no bytes but simulates exactly what a full run
// simulates: for every shipped algorithm, at several world sizes and sizes,
// the simulated time, the number of events and every operation count are
// equal; the reference check and phase 2 are reported as not run.
func TestTimingOnlyMatchesFullRun(t *testing.T) {
	longTest(t)
	cfg, _, err := target.LoadConfig(script.Env{}, "", nil, kernbench.Files)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		SimTimeNs float64
		Events    uint64
		Ops       report.OpCounts
	}
	for _, algo := range cfg.AlgorithmNames {
		for _, world := range []int{4, 8, 16} {
			t.Run(fmt.Sprintf("%s/world=%d", algo, world), func(t *testing.T) {
				t.Parallel()
				counts := []int64{1, 1000, 1 << 16}
				run := func(timingOnly bool) []row {
					rep, err := Run(algo, Options{Embedded: kernbench.Files, WorldSize: world, Counts: counts, Verify: true, TimingOnly: timingOnly})
					if err != nil {
						t.Fatalf("timing_only=%v: %v", timingOnly, err)
					}
					var rows []row
					for _, r := range rep.Results {
						rows = append(rows, row{r.SimTimeNs, r.Events, r.Ops})
						if timingOnly && (r.Verified || r.Phase2Match != nil || r.Wrong != 0) {
							t.Errorf("timing-only row %d: verified %v, phase2_match %v, wrong %d; want not run", r.Count, r.Verified, r.Phase2Match, r.Wrong)
						}
						if !timingOnly && !r.Verified {
							t.Errorf("full run row %d not verified: %d wrong", r.Count, r.Wrong)
						}
					}
					if rep.TimingOnly != timingOnly {
						t.Errorf("report timing_only = %v, want %v", rep.TimingOnly, timingOnly)
					}
					return rows
				}
				full, timing := run(false), run(true)
				if diff := cmp.Diff(full, timing); diff != "" {
					t.Errorf("timing-only run differs from the full run (-full +timing):\n%s", diff)
				}
			})
		}
	}
}

// Under --timing-only a kernel that reads values (control flow that could
// depend on data) fails with TimingOnly at its position instead of
// silently diverging from the full run.
func TestTimingOnlyRejectsReadingValues(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, read, dtype string }{
		{"tile", "tl.fetch(sendbuf).tolist()", ""},
		{"ptr", "sendbuf.tolist()", ""},
		{"bytes", "sendbuf.tobytes()", ""},
		{"index", "sendbuf[0]", ""},
		// Whether an integer tile divided by a tile fails depends on the
		// divisor's elements (ZeroDivision on a 0): refused too, so that
		// the two runs never end differently (a full run with zeros in
		// the divisor exited 4, the timing-only run 0).
		{"intdiv", "tl.fetch(sendbuf) / tl.full(16, 3, \"i32\")", "i32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name+".star")
			src := "def kernel(sendbuf, recvbuf, rank, world_size, tl):\n    tl.copy(recvbuf, sendbuf)\n    x = " + tc.read + "\n"
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Run(file, Options{Embedded: kernbench.Files, WorldSize: 1, Counts: []int64{16}, DType: tc.dtype, Verify: true}); err != nil {
				t.Fatalf("full run: %v", err)
			}
			_, err := Run(file, Options{Embedded: kernbench.Files, WorldSize: 1, Counts: []int64{16}, DType: tc.dtype, TimingOnly: true})
			var f *report.Failure
			if !errors.As(err, &f) || f.ErrorKind().Status != report.ExitRuntime || !strings.Contains(f.Msg, "TimingOnly") || !strings.Contains(f.Detail+f.Msg, tc.name+".star:3:") {
				t.Errorf("timing-only run: %v (detail %q); want a TimingOnly error at %s.star:3", err, detailOf(f), tc.name)
			}
		})
	}
}

func detailOf(f *report.Failure) string {
	if f == nil {
		return ""
	}
	return f.Detail
}

// Two-pass verification (phase 2): replays the op_log on the pre-run image and compares it with the
// live memory: a write that bypassed the op_log (here one byte of rank 3's
// rx ring, which the reference check does not look at) is a mismatch.
func TestPhase2CatchesUnloggedWrite(t *testing.T) {
	run := func() *report.Result {
		rep, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 4, Counts: []int64{4096}, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		return &rep.Results[0]
	}
	if r := run(); r.Phase2Match == nil || !*r.Phase2Match {
		t.Fatalf("clean run: phase2_match %v (%s), want true", r.Phase2Match, r.Phase2)
	}
	afterPhase1 = func(m *machine.Machine) {
		tcm := m.Ranks[3].TCM
		b := tcm.Bytes(0, 1)
		b[0] ^= 0xff
	}
	defer func() { afterPhase1 = nil }()
	r := run()
	if r.Phase2Match == nil || *r.Phase2Match || r.Phase2 == "" {
		t.Errorf("after an unlogged write: phase2_match %v (%q), want false with a message", r.Phase2Match, r.Phase2)
	}
	if r.Wrong != 0 {
		t.Errorf("wrong = %d, want 0 (the write is outside the buffers)", r.Wrong)
	}
}
