package mscclio_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/starlark/ccl"
	"kernbench/starlark/check"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

// The schedules generated from msccl-tools' examples (testdata/msccl,
// generate.sh), each at 4, 8 and 16 ranks.
var mscclSchedules = []struct {
	prefix, collective string
	sets               []string
}{
	{"allreduce_ring_ch1", "allreduce", nil},
	{"allreduce_ring_ch2", "allreduce", nil},
	{"allreduce_binomial_tree1", "allreduce", nil},
	{"allreduce_binomial_tree2", "allreduce", nil},
	{"allreduce_rdh", "allreduce", nil},
	// 16 ranks of the hierarchical schedule use 30 queue pairs on some
	// ranks: kernbench puts their rx rings in HBM (TestMSCCLDefaultsFit).
	{"allreduce_hierarchical", "allreduce", nil},
	{"allgather_ring_ch2", "allgather", nil},
	{"alltoall_allpairs", "alltoall", nil},
	{"alltoall_two_step", "alltoall", nil},
	// One thread block, and so one channel, per chunk: at 16 ranks the 30
	// rx rings go to HBM.
	{"reduce_scatter_ring", "reduce_scatter", nil},
}

// Every generated schedule computes its collective (#wrong 0) and replays
// (phase2_match) through the ordinary run path, for an empty buffer, one
// loop iteration and several with a short last one.
func TestMSCCLSchedulesVerify(t *testing.T) {
	longTest(t)
	for _, s := range mscclSchedules {
		for _, world := range []int{4, 8, 16} {
			file := filepath.Join(mscclTestdata, fmt.Sprintf("%s_%d.xml", s.prefix, world))
			t.Run(filepath.Base(file), func(t *testing.T) {
				t.Parallel()
				rep := runVerified(t, file, ccl.Options{Counts: []int64{0, 4096, 36000}, Sets: s.sets})
				got := []any{rep.Collective, rep.WorldSize, rep.Topology}
				if diff := cmp.Diff([]any{s.collective, world, "custom"}, got); diff != "" {
					t.Errorf("collective, world size, topology (-want +got):\n%s", diff)
				}
				checkCorrect(t, rep)
				for _, r := range rep.Results {
					if r.Phase2Match == nil || !*r.Phase2Match {
						t.Errorf("count %d: phase2_match = %v, want true", r.Count, r.Phase2Match)
					}
				}
			})
		}
	}
}

// Other element types and reductions, and other orders of ready threads
// (the schedules with cross-thread-block dependencies).
func TestMSCCLDtypesRedopsJitter(t *testing.T) {
	cases := []struct {
		file, dtype, redop string
		jitter             uint64
	}{
		{"allreduce_ring_ch2_8.xml", "f16", "sum", 0},
		{"allreduce_ring_ch2_8.xml", "bf16", "max", 0},
		{"allreduce_rdh_8.xml", "i32", "prod", 0},
		{"allreduce_hierarchical_8.xml", "f32", "min", 0},
		{"allreduce_rdh_8.xml", "f32", "sum", 1},
		{"allreduce_hierarchical_8.xml", "f32", "sum", 2},
		{"allreduce_binomial_tree2_8.xml", "f32", "sum", 3},
		{"alltoall_two_step_8.xml", "i64", "sum", 4},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s/%s/jitter=%d", c.file, c.dtype, c.redop, c.jitter), func(t *testing.T) {
			t.Parallel()
			rep := runVerified(t, filepath.Join(mscclTestdata, c.file), ccl.Options{Counts: []int64{8192}, DType: c.dtype, RedOp: c.redop, JitterSeed: c.jitter})
			checkCorrect(t, rep)
		})
	}
}

// What the file fixes cannot be changed by flags; each conflict is a
// usage error (exit 2) that says what to drop.
func TestMSCCLFlagConflicts(t *testing.T) {
	file := filepath.Join(mscclTestdata, "alltoall_allpairs_4.xml")
	inplace := filepath.Join(mscclTestdata, "allreduce_ring_ch2_4.xml")
	cases := []struct {
		name string
		file string
		o    ccl.Options
		want string
	}{
		{"world size", file, ccl.Options{WorldSize: 8}, file + " is a schedule for ngpus=4 ranks; drop --world-size 8"},
		{"collective", file, ccl.Options{Collective: "allgather"}, file + " is an alltoall schedule; drop --collective allgather"},
		{"topology", file, ccl.Options{Topology: "ring_1d"}, file + ": an MSCCL schedule's neighbour map comes from its thread blocks; drop --topology ring_1d"},
		{"in place", file, ccl.Options{InPlace: true}, file + " is an out-of-place schedule (inplace=0); drop --in-place"},
		{"ragged", inplace, ccl.Options{Counts: []int64{6}}, inplace + ": count 6: the allreduce buffer of 6 elements does not cut into nchunksperloop=4 equal chunks; use a count whose larger buffer is a multiple of 4"},
		{"missing", "nowhere.xml", ccl.Options{}, "nowhere.xml: no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Embedded = kernbench.Files
			_, err := ccl.Run(c.file, c.o)
			var f *report.Failure
			if !errors.As(err, &f) {
				t.Fatalf("Run: %v, want a *Failure", err)
			}
			if diff := cmp.Diff([]any{report.ExitUsage, c.want}, []any{f.ErrorKind().Status, f.Msg}); diff != "" {
				t.Errorf("exit status and message (-want +got):\n%s", diff)
			}
		})
	}
}

// An in-place schedule runs in place without --in-place: the file says so.
func TestMSCCLInPlaceFromFile(t *testing.T) {
	rep := runVerified(t, filepath.Join(mscclTestdata, "allgather_ring_ch2_4.xml"), ccl.Options{Counts: []int64{1024}})
	checkCorrect(t, rep)
	if !rep.Results[0].InPlace {
		t.Errorf("in_place = false, want true (the file has inplace=1)")
	}
}

// kernbench check on an XML file validates without simulating: every
// shipped schedule passes but the one msccl-tools wrote a race into,
// whose races it reports.
func TestMSCCLCheck(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(mscclTestdata, "*.xml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schedules in %s: %v", mscclTestdata, err)
	}
	for _, f := range files {
		problems := check.Run(f, check.Options{Embedded: kernbench.Files})
		if !mscclRacy[filepath.Base(f)] {
			if len(problems) > 0 {
				t.Errorf("check %s:\n%s", f, strings.Join(problems, "\n"))
			}
			continue
		}
		if len(problems) == 0 || !strings.Contains(problems[0], "nothing orders the two") {
			t.Errorf("check %s: %q, want its races", f, problems)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.xml")
	if err := os.WriteFile(bad, []byte("<algo ngpus=\"2\" coll=\"allreduce\" nchunksperloop=\"1\">\n<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\"/>\n</algo>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{bad + ":1: gpu 1 is missing (ngpus=2 wants ids 0..1)"}
	if diff := cmp.Diff(want, check.Run(bad, check.Options{Embedded: kernbench.Files})); diff != "" {
		t.Errorf("check problems (-want +got):\n%s", diff)
	}
}

// An imported schedule takes the simulated time of the same schedule
// written by hand on the primitives (testdata/msccl/handwritten), within
// 2 %: the import adds no simulated work of its own.
func TestMSCCLMatchesHandWritten(t *testing.T) {
	longTest(t)
	cases := []struct {
		xml, star string
		count     int64
		inPlace   bool
		sets      []string
	}{
		{"allreduce_ring_ch2", "ring_ch2.star", 524288, true, nil},
		{"allreduce_binomial_tree1", "binomial_tree1.star", 524288, true, nil},
		{"allreduce_binomial_tree2", "binomial_tree2.star", 524288, true, nil},
		{"allgather_ring_ch2", "allgather_ring_ch2.star", 65536, true, nil},
		{"alltoall_allpairs", "alltoall_allpairs.star", 16384, false, nil},
		{"alltoall_two_step", "alltoall_two_step.star", 16384, false, nil},
		{"allreduce_rdh", "rdh.star", 262144, true, nil},
		// 16 ranks use 27 queue pairs on some ranks (see mscclSchedules).
		{"allreduce_hierarchical", "hierarchical.star", 524288, true, []string{"defaults.buffer_kind=hbm"}},
		// A channel per chunk: at 16 ranks the rx rings fill TCM.
		{"reduce_scatter_ring", "reduce_scatter_ring.star", 65536, true, []string{"defaults.buffer_kind=hbm"}},
	}
	for _, c := range cases {
		for _, world := range []int{4, 8, 16} {
			t.Run(fmt.Sprintf("%s_%d", c.xml, world), func(t *testing.T) {
				t.Parallel()
				counts := []int64{c.count}
				imported := runVerified(t, filepath.Join(mscclTestdata, fmt.Sprintf("%s_%d.xml", c.xml, world)), ccl.Options{Counts: counts, Sets: c.sets})
				hand := runVerified(t, filepath.Join(mscclTestdata, "handwritten", c.star), ccl.Options{Counts: counts, WorldSize: world, InPlace: c.inPlace, Sets: c.sets})
				checkCorrect(t, imported)
				checkCorrect(t, hand)
				for i := range counts {
					x, h := imported.Results[i].SimTimeNs, hand.Results[i].SimTimeNs
					if d := math.Abs(x-h) / h; d > 0.02 {
						t.Errorf("count %d: imported %.3f us, by hand %.3f us: %.2f %% apart, want at most 2 %%", counts[i], x/1000, h/1000, 100*d)
					}
				}
			})
		}
	}
}

// --redop avg divides where a chunk's sum completes, which kernbench finds
// by following the contributions through the schedule: every generated
// schedule of a reduction verifies with avg (an undivided sum would be
// #wrong), in place and out of place, with a short last loop iteration.
func TestMSCCLAvg(t *testing.T) {
	for _, s := range mscclSchedules {
		if s.collective != "allreduce" && s.collective != "reduce_scatter" {
			continue
		}
		for _, world := range []int{4, 8} {
			file := filepath.Join(mscclTestdata, fmt.Sprintf("%s_%d.xml", s.prefix, world))
			t.Run(filepath.Base(file), func(t *testing.T) {
				t.Parallel()
				for _, dtype := range []string{"f32", "bf16"} {
					rep := runVerified(t, file, ccl.Options{Counts: []int64{36000}, Sets: s.sets, RedOp: "avg", DType: dtype})
					checkCorrect(t, rep)
				}
			})
		}
	}
}

// A schedule whose sum completes in a step that cannot divide (an rrs
// sends the sum without storing it), or in only some of a step's chunks,
// runs with sum but not with avg: an MSCCLError (exit 2) naming the step
// and its line, the kind the CLI's exit status and JSON both come from.
func TestMSCCLAvgRefused(t *testing.T) {
	rrs := `<algo name="rrs_completes" nchannels="1" nchunksperloop="1" ngpus="2" coll="allreduce" inplace="1">
  <gpu id="0" i_chunks="1" o_chunks="0" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="2" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="0" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="rrs" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
    </tb>
  </gpu>
</algo>
`
	// gpu 0 sends chunk 0 of its input with chunk 1 of an output it never
	// wrote: gpu 1's rrc completes the sum of chunk 0 only.
	partial := `<algo name="partial" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="0">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="1" type="s" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0" />
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="-1" recv="0" chan="0">
      <step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0" />
    </tb>
  </gpu>
</algo>
`
	cases := []struct {
		name    string
		src     string
		sumRuns bool // the schedule is a correct allreduce with sum
		want    string
	}{
		{"rrs completes", rrs, true, ":11: --redop avg: gpu 1 tb 0 step 0 (rrs) completes a sum, where avg divides by the world size; kernbench divides in the step that stores the complete sum (rrc or rrcs), and rrs cannot"},
		{"partial step", partial, false, ":10: gpu 1 tb 0 step 0 completes the sum of 1 of its 2 chunks: --redop avg divides where a sum completes, and cannot divide only some of a step's chunks"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "algo.xml")
			if err := os.WriteFile(file, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.sumRuns {
				checkCorrect(t, runVerified(t, file, ccl.Options{Counts: []int64{4096}}))
			}
			_, err := ccl.Run(file, ccl.Options{Counts: []int64{4096}, RedOp: "avg", Embedded: kernbench.Files})
			var f *report.Failure
			if !errors.As(err, &f) {
				t.Fatalf("Run: %v, want a *Failure", err)
			}
			got := []any{errkind.Of(err), errkind.Status(err), f.Out().Kind, f.Msg}
			want := []any{errkind.MSCCL, report.ExitUsage, "MSCCLError", file + c.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("kind, exit status, JSON kind and message (-want +got):\n%s", diff)
			}
		})
	}
}
