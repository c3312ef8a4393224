package ccl

import (
	"encoding/json"
	"fmt"
	"kernbench/starlark/report"
	"kernbench/starlark/report/reporttest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
)

// runRing runs the shipped ring_allreduce with the embedded ccl.yaml and
// reference verification, on top of the given options.
func runRing(t *testing.T, o Options) *report.Report {
	t.Helper()
	return runVerified(t, "ring_allreduce", o)
}

// runVerified runs target with the embedded ccl.yaml and reference
// verification on top of o, and checks that every count got its row.
func runVerified(t *testing.T, target string, o Options) *report.Report {
	t.Helper()
	o.Embedded = kernbench.Files
	o.Verify = true
	rep, err := Run(target, o)
	if err != nil {
		t.Fatalf("Run(%s, world %d, root %d, counts %v, %s %s, in_place %v, sets %v) failed: %v",
			target, o.WorldSize, o.Root, o.Counts, o.DType, o.RedOp, o.InPlace, o.Sets, err)
	}
	reporttest.Rows(t, target, rep, len(o.Counts))
	return rep
}

// checkCorrect is reporttest.CheckCorrect.
var checkCorrect = reporttest.CheckCorrect

// Ring allreduce is correct for every world size that fits the default
// machine's first 16 PEs and for counts that do not split evenly into
// world_size chunks (including the empty and single-element buffers).
func TestRingAllreduceWorldSizesAndRaggedCounts(t *testing.T) {
	counts := []int64{1000, 37, 0, 1}
	for world := 1; world <= 16; world++ {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("world=%d/in_place=%v", world, inPlace), func(t *testing.T) {
				rep := runRing(t, Options{WorldSize: world, InPlace: inPlace, Counts: counts, DType: "f32", RedOp: "sum"})
				if rep.WorldSize != world {
					t.Errorf("report world_size = %d, want %d", rep.WorldSize, world)
				}
				checkCorrect(t, rep)
				for _, r := range rep.Results {
					if r.InPlace != inPlace {
						t.Errorf("count %d: in_place = %v, want %v", r.Count, r.InPlace, inPlace)
					}
				}
			})
		}
	}
}

// Every dtype with every reduction matches the Go reference (which
// tolerates the dtype's rounding) at an odd and an even world size.
func TestRingAllreduceDTypesAndRedOps(t *testing.T) {
	dtypes := []string{"f32", "f16", "bf16", "f64", "i32", "i64", "u8"}
	redops := []string{"sum", "prod", "max", "min", "avg"}
	for _, world := range []int{3, 8} {
		for _, dt := range dtypes {
			for _, op := range redops {
				t.Run(fmt.Sprintf("world=%d/%s/%s", world, dt, op), func(t *testing.T) {
					rep := runRing(t, Options{WorldSize: world, Counts: []int64{1000}, DType: dt, RedOp: op})
					r := rep.Results[0]
					if r.DType != dt || r.RedOp != op {
						t.Errorf("row is %s %s, want %s %s", r.DType, r.RedOp, dt, op)
					}
					checkCorrect(t, rep)
				})
			}
		}
	}
}

// Sleep and poll backpressure both give the right answer, and for a
// kernel with a fixed schedule (the message-by-message ring) polling is
// never faster than sleeping: a polling rank wakes on the next multiple of
// poll_interval_ns instead of exactly when the pointer it waits on moves.
// A coarse 1 µs interval must cost at least one interval. (The primitives'
// ring adapts to what has arrived, e.g. whether a deferred send goes out
// before a wait, so a later wake-up may happen to give a better schedule:
// for it only the results and the coarse bound are checked.)
func TestRingAllreduceBackpressure(t *testing.T) {
	for _, algo := range []string{"ring_allreduce_manual", "ring_allreduce"} {
		for _, world := range []int{2, 4, 5, 8} {
			for _, count := range []int64{1, 999, 4096} {
				t.Run(fmt.Sprintf("%s/world=%d/count=%d", algo, world, count), func(t *testing.T) {
					testBackpressure(t, algo, world, count, algo == "ring_allreduce_manual")
				})
			}
		}
	}
}

func testBackpressure(t *testing.T, algo string, world int, count int64, fixedSchedule bool) {
	run := func(backpressure string, sets ...string) float64 {
		sets = append(sets, "defaults.backpressure="+backpressure)
		rep := runVerified(t, algo, Options{WorldSize: world, Counts: []int64{count}, Sets: sets})
		checkCorrect(t, rep)
		if rep.Backpressure != backpressure {
			t.Errorf("backpressure = %q, want %q", rep.Backpressure, backpressure)
		}
		return rep.Results[0].SimTimeNs
	}
	sleep := run("sleep")
	poll := run("poll")
	fine := run("poll", "defaults.poll_interval_ns=1")
	coarse := run("poll", "defaults.poll_interval_ns=1000")
	t.Logf("sim_time_ns: sleep %v, poll every 10 ns %v, 1 ns %v, 1 µs %v", sleep, poll, fine, coarse)
	if coarse < sleep+1000 {
		t.Errorf("poll every 1 µs took %v ns, want >= sleep %v ns + 1000", coarse, sleep)
	}
	if fixedSchedule && (poll < sleep || fine < sleep) {
		t.Errorf("polling beat exact wake-ups: sleep %v ns, poll every 10 ns %v ns, every 1 ns %v ns", sleep, poll, fine)
	}
}

// The IPCQ receive rings may live in any memory kind.
func TestRingAllreduceBufferKinds(t *testing.T) {
	for _, kind := range []string{"tcm", "hbm", "sram"} {
		t.Run(kind, func(t *testing.T) {
			rep := runRing(t, Options{WorldSize: 8, Counts: []int64{4096, 37}, Sets: []string{"defaults.buffer_kind=" + kind}})
			if rep.BufferKind != kind {
				t.Errorf("buffer_kind = %q, want %q", rep.BufferKind, kind)
			}
			checkCorrect(t, rep)
		})
	}
}

// The bench may put sendbuf/recvbuf in any memory; 4096 f32 elements × 2
// buffers fit the 1 MiB TCM next to the rings and the kernel's staging area.
func TestRingAllreduceDataSpaces(t *testing.T) {
	for _, space := range []string{"tcm", "sram", "hbm"} {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/in_place=%v", space, inPlace), func(t *testing.T) {
				rep := runRing(t, Options{WorldSize: 8, Counts: []int64{4096, 37}, DataSpace: space, InPlace: inPlace})
				if rep.DataSpace != space {
					t.Errorf("data_space = %q, want %q", rep.DataSpace, space)
				}
				checkCorrect(t, rep)
			})
		}
	}
}

// The same run twice gives the same report, byte for byte, apart from the
// wall-clock time.
func TestRunDeterministic(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"default", Options{WorldSize: 8, Counts: []int64{4096, 1000, 37}}},
		{"poll/hbm_rings/bf16/max", Options{WorldSize: 6, Counts: []int64{3000}, DType: "bf16", RedOp: "max",
			Sets: []string{"defaults.backpressure=poll", "defaults.buffer_kind=hbm"}}},
		{"jitter", Options{WorldSize: 7, Counts: []int64{2048}, JitterSeed: 42}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := func() string {
				rep := runRing(t, tc.opts)
				rep.WallS = 0
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			first, second := doc(), doc()
			if diff := cmp.Diff(first, second); diff != "" {
				t.Errorf("second run differs from the first (-first +second):\n%s", diff)
			}
		})
	}
}

// longTest skips t in the -short tier: it is one of the long
// equivalence tests (every shipped algorithm over world sizes, counts,
// schedules).
func longTest(t *testing.T) { t.Helper(); reporttest.Long(t, "a long equivalence test") }
