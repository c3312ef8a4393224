package mscclio_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/engine/config"
	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// Every schedule under testdata/msccl (msccl-tools' examples at 4, 8 and 16
// GPUs) runs at 1 MiB with no flags and verifies: where the rx rings, and
// then the thread blocks' staging, do not fit TCM, kernbench puts them in
// HBM and the report says why.
func TestMSCCLDefaultsFit(t *testing.T) {
	longTest(t)
	files, err := filepath.Glob(filepath.Join(mscclTestdata, "*.xml"))
	if err != nil || len(files) < 30 {
		t.Fatalf("schedules in %s: %d, %v", mscclTestdata, len(files), err)
	}
	// Where each file's rings and staging go (the others: TCM, TCM).
	moved := map[string][2]string{
		"allreduce_hierarchical_16.xml":        {"hbm", ""},
		"allreduce_hierarchical_8x2_16.xml":    {"hbm", ""},
		"allreduce_hierarchical_4x4_i2_16.xml": {"hbm", "hbm"},
		"reduce_scatter_ring_16.xml":           {"hbm", ""},
	}
	for _, file := range files {
		if mscclRacy[filepath.Base(file)] {
			continue // TestMSCCLRaceReported
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			rep, err := ccl.Run(file, ccl.Options{Sizes: []int64{1 << 20}, Verify: true, Embedded: kernbench.Files})
			if err != nil {
				t.Fatalf("run with no flags: %v", err)
			}
			checkCorrect(t, rep)
			if r := rep.Results[0]; r.Phase2Match == nil || !*r.Phase2Match {
				t.Errorf("phase2_match = %v, want true", r.Phase2Match)
			}
			want, ok := moved[filepath.Base(file)]
			if !ok {
				want = [2]string{"tcm", ""}
			}
			if diff := cmp.Diff(want, [2]string{rep.BufferKind, rep.Staging}); diff != "" {
				t.Errorf("buffer_kind, staging (-want +got):\n%s", diff)
			}
			// A choice says why; the configured place does not.
			if (rep.BufferKind != "tcm") != strings.HasPrefix(rep.BufferKindWhy, "chosen: rank ") || (rep.Staging != "") != strings.HasPrefix(rep.StagingWhy, "chosen: rank ") {
				t.Errorf("buffer_kind_why %q, staging_why %q for buffer_kind %s, staging %q", rep.BufferKindWhy, rep.StagingWhy, rep.BufferKind, rep.Staging)
			}
		})
	}
}

// The report of msccl-tools' 16-GPU hierarchical allreduce as 8 × 2, the
// schedule that stopped a run with the defaults, and of the same on 4 × 4
// in two instances, whose 36 thread blocks' staging needs more than TCM.
func TestMSCCLDefaultsFitWhy(t *testing.T) {
	cases := []struct {
		file               string
		kind, why, staging string
		stagingWhy         string
	}{
		{"allreduce_hierarchical_8x2_16.xml", "hbm",
			"chosen: rank 0's TCM (1048576 bytes) cannot hold its 45 rx rings of 32768 bytes and 20 staging rings of 40960 bytes: 2293760 bytes", "", ""},
		{"allreduce_hierarchical_4x4_i2_16.xml", "hbm",
			"chosen: rank 0's TCM (1048576 bytes) cannot hold its 60 rx rings of 32768 bytes and 24 staging rings of 40960 bytes: 2949120 bytes", "hbm",
			"chosen: rank 0's TCM (1048576 bytes) cannot hold its 24 staging rings of 40960 bytes and 30 pairs of landing slots of 8192 bytes: 1228800 bytes"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			rep := runVerified(t, filepath.Join(mscclTestdata, c.file), ccl.Options{Counts: []int64{4096}})
			checkCorrect(t, rep)
			if diff := cmp.Diff([]string{c.kind, c.why, c.staging, c.stagingWhy}, []string{rep.BufferKind, rep.BufferKindWhy, rep.Staging, rep.StagingWhy}); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
		})
	}
}

var fixesList = regexp.MustCompile(`; any one of these fits: (.*)$`)

// applyFix turns one fix an error suggests into options: "--set K=V"
// (replacing the item it names "in place of") or "--data-space S".
func applyFix(t *testing.T, o ccl.Options, fix string) ccl.Options {
	t.Helper()
	o.Sets = append([]string(nil), o.Sets...)
	if rest, ok := strings.CutPrefix(fix, "--data-space "); ok {
		o.DataSpace = rest
		return o
	}
	item, ok := strings.CutPrefix(fix, "--set ")
	if !ok {
		t.Fatalf("fix %q is neither --set nor --data-space", fix)
	}
	item, old, replaces := strings.Cut(item, " (in place of ")
	old = strings.TrimSuffix(old, ")")
	drop := func(items []string, it string) []string {
		var out []string
		for _, s := range items {
			if s != it {
				out = append(out, s)
			}
		}
		if len(out) == len(items) {
			t.Fatalf("fix %q replaces %q, which the run does not give (%v)", fix, it, items)
		}
		return out
	}
	switch {
	case !replaces:
	case strings.HasPrefix(old, "--set "):
		o.Sets = drop(o.Sets, strings.TrimPrefix(old, "--set "))
	case strings.HasPrefix(old, "--vary "):
		o.Vary = drop(o.Vary, strings.TrimPrefix(old, "--vary "))
	default:
		t.Fatalf("fix %q replaces %q", fix, old)
	}
	o.Sets = append(o.Sets, item)
	return o
}

// A buffer_kind the user gave is never changed: when the rings do not fit
// there, the run stops (exit 2) with the settings that fit, and each of
// them, applied, runs and verifies.
func TestMSCCLGivenBufferKind(t *testing.T) {
	hier16 := filepath.Join(mscclTestdata, "allreduce_hierarchical_8x2_16.xml")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ccl.yaml"), []byte("defaults:\n  buffer_kind: tcm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(hier16)
	if err != nil {
		t.Fatal(err)
	}
	rings := "rank 0's TCM (1048576 bytes) cannot hold its 45 rx rings of 32768 bytes: 1474560 bytes"
	cases := []struct {
		name  string
		file  string
		o     ccl.Options
		want  string
		fixes int
	}{
		{"--set", hier16, ccl.Options{Sets: []string{"defaults.buffer_kind=tcm"}},
			hier16 + ": buffer_kind tcm (--set defaults.buffer_kind=tcm) does not fit: " + rings +
				"; any one of these fits: --set defaults.buffer_kind=hbm (in place of --set defaults.buffer_kind=tcm), --set defaults.n_slots=5, --set defaults.slot_size=2048", 3},
		{"--vary", hier16, ccl.Options{Vary: []string{"defaults.buffer_kind=tcm"}},
			hier16 + ": buffer_kind tcm (--vary defaults.buffer_kind=tcm) does not fit: " + rings +
				"; any one of these fits: --set defaults.buffer_kind=hbm (in place of --vary defaults.buffer_kind=tcm), --set defaults.n_slots=5, --set defaults.slot_size=2048", 3},
		{"ccl.yaml", abs, ccl.Options{Env: script.Env{Dir: dir}},
			abs + ": buffer_kind tcm (ccl.yaml:2) does not fit: " + rings +
				"; any one of these fits: --set defaults.buffer_kind=hbm, --set defaults.n_slots=5, --set defaults.slot_size=2048", 3},
		{"sram", hier16, ccl.Options{Sets: []string{"defaults.buffer_kind=sram"}},
			hier16 + ": buffer_kind sram (--set defaults.buffer_kind=sram) does not fit: cube 0's SRAM (8388608 bytes, shared by ranks 0-7) cannot hold their 360 rx rings of 32768 bytes: 11796480 bytes" +
				"; any one of these fits: --set defaults.buffer_kind=hbm (in place of --set defaults.buffer_kind=sram), --set defaults.n_slots=5, --set defaults.slot_size=2048", 3},
		// n_slots given too: its fix replaces it.
		{"n_slots given", hier16, ccl.Options{Sets: []string{"defaults.buffer_kind=tcm", "defaults.n_slots=16"}},
			hier16 + ": buffer_kind tcm (--set defaults.buffer_kind=tcm) does not fit: rank 0's TCM (1048576 bytes) cannot hold its 45 rx rings of 65536 bytes: 2949120 bytes" +
				"; any one of these fits: --set defaults.buffer_kind=hbm (in place of --set defaults.buffer_kind=tcm), --set defaults.n_slots=5 (in place of --set defaults.n_slots=16), --set defaults.slot_size=1024", 3},
		// The bench's buffers in TCM too: moving them out is a fix.
		{"data in tcm", filepath.Join(mscclTestdata, "allreduce_hierarchical_8.xml"), ccl.Options{Sets: []string{"defaults.buffer_kind=tcm"}, DataSpace: "tcm", Counts: []int64{131072}},
			filepath.Join(mscclTestdata, "allreduce_hierarchical_8.xml") + ": buffer_kind tcm (--set defaults.buffer_kind=tcm) does not fit: rank 0's TCM (1048576 bytes) cannot hold its 21 rx rings of 32768 bytes and the bench's buffers (524288 bytes): 1212416 bytes" +
				"; any one of these fits: --set defaults.buffer_kind=hbm (in place of --set defaults.buffer_kind=tcm), --set defaults.n_slots=6, --set defaults.slot_size=2048, --data-space hbm", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.o.Embedded, c.o.Verify = kernbench.Files, true
			if c.o.Counts == nil {
				c.o.Counts = []int64{4096}
			}
			_, err := ccl.Run(c.file, c.o)
			var f *report.Failure
			if !errors.As(err, &f) {
				t.Fatalf("Run: %v, want a *Failure", err)
			}
			if diff := cmp.Diff([]any{report.ExitUsage, "InitError", c.want}, []any{f.ErrorKind().Status, f.ErrorKind().Name, f.Msg}); diff != "" {
				t.Fatalf("exit status, kind and message (-want +got):\n%s", diff)
			}
			m := fixesList.FindStringSubmatch(f.Msg)
			if m == nil {
				t.Fatal("no fixes in the message")
			}
			fixes := strings.Split(m[1], ", ")
			if len(fixes) != c.fixes {
				t.Errorf("%d fixes, want %d", len(fixes), c.fixes)
			}
			for _, fix := range fixes {
				o := applyFix(t, c.o, fix)
				rep, err := ccl.Run(c.file, o)
				if err != nil {
					t.Errorf("with %s: %v", fix, err)
					continue
				}
				checkCorrect(t, rep)
				if kind := strings.Fields(strings.TrimPrefix(c.want, c.file+": "))[1]; !strings.Contains(fix, "buffer_kind") && rep.BufferKind != kind {
					t.Errorf("with %s: buffer_kind %s, want the given %s kept", fix, rep.BufferKind, kind)
				}
			}
		})
	}
}

// A given buffer_kind that fits is kept, also where kernbench would have
// chosen another: the staging, which has no setting, moves instead.
func TestMSCCLGivenBufferKindKept(t *testing.T) {
	cases := []struct {
		file, set          string
		kind, staging, why string
	}{
		{"allreduce_hierarchical_16.xml", "defaults.buffer_kind=tcm", "tcm", "hbm",
			"chosen: rank 0's TCM (1048576 bytes) cannot hold its 30 rx rings of 32768 bytes and 12 staging rings of 40960 bytes: 1474560 bytes"},
		{"allreduce_ring_ch2_4.xml", "defaults.buffer_kind=hbm", "hbm", "", ""},
		{"allreduce_hierarchical_8x2_16.xml", "defaults.buffer_kind=hbm", "hbm", "", ""},
	}
	for _, c := range cases {
		t.Run(c.file+"/"+c.set, func(t *testing.T) {
			t.Parallel()
			rep := runVerified(t, filepath.Join(mscclTestdata, c.file), ccl.Options{Counts: []int64{4096}, Sets: []string{c.set}})
			checkCorrect(t, rep)
			if diff := cmp.Diff([]string{c.kind, "", c.staging, c.why}, []string{rep.BufferKind, rep.BufferKindWhy, rep.Staging, rep.StagingWhy}); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
		})
	}
}

var needBytes = regexp.MustCompile(`: (\d+) bytes$`)

// The check before the run counts exactly what the run allocates: with
// TCM as large as the report says the rings and staging need, they go
// there and the run has room (no OutOfMemory at run time); a byte less and
// kernbench moves them. The bench's buffers count when they are in TCM.
func TestMSCCLFitExact(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		o       ccl.Options
		staging bool  // find the limit of the staging (rings in HBM), else of the rings
		start   int64 // a TCM that holds the bench's buffers and not the rest
	}{
		{"rings and staging", "allreduce_hierarchical_8.xml", ccl.Options{}, false, 4096},
		{"staging and landing slots", "allreduce_hierarchical_8.xml", ccl.Options{}, true, 4096},
		{"with the data in tcm", "allreduce_ring_ch2_4.xml", ccl.Options{DataSpace: "tcm", Counts: []int64{36000}}, false, 256 << 10},
		// 320 KiB: two buffers of 8 × 4096 f32 and the s buffer's 4 chunks.
		{"s buffer in tcm", "alltoall_two_step_8.xml", ccl.Options{DataSpace: "tcm", Counts: []int64{4096}}, false, 320 << 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			run := func(capacity int64) *report.Report {
				o := c.o
				if o.Counts == nil {
					o.Counts = []int64{4096}
				}
				o.Sets = []string{fmt.Sprintf("system.memory.tcm.capacity=%d", capacity)}
				return runVerified(t, filepath.Join(mscclTestdata, c.file), o)
			}
			why := func(r *report.Report) string {
				if c.staging {
					return r.StagingWhy
				}
				return r.BufferKindWhy
			}
			// Grow TCM to what the report says the first overfull rank
			// needs until nothing moves.
			capacity := c.start
			for i := 0; ; i++ {
				rep := run(capacity)
				m := needBytes.FindStringSubmatch(why(rep))
				if m == nil {
					if i == 0 {
						t.Fatalf("at capacity %d, where the test starts, nothing moved", capacity)
					}
					checkCorrect(t, rep)
					break
				}
				need, _ := strconv.ParseInt(m[1], 10, 64)
				if need <= capacity || i > 20 {
					t.Fatalf("at capacity %d: %q asks for %d bytes", capacity, why(rep), need)
				}
				capacity = need
			}
			rep := run(capacity - 1)
			if why(rep) == "" {
				t.Errorf("at capacity %d, a byte below what fits, nothing moved", capacity-1)
			}
		})
	}
}

// The shipped ccl.yaml in the working directory, unchanged (a clone of the
// repository), sets no buffer_kind of the user's: the rings still go
// where they fit.
func TestMSCCLShippedConfigIsDefault(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ccl.yaml"), config.DefaultYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	file, err := filepath.Abs(filepath.Join(mscclTestdata, "allreduce_hierarchical_8x2_16.xml"))
	if err != nil {
		t.Fatal(err)
	}
	rep := runVerified(t, file, ccl.Options{Counts: []int64{4096}, Env: script.Env{Dir: dir}})
	checkCorrect(t, rep)
	if rep.BufferKind != "hbm" || rep.BufferKindWhy == "" {
		t.Errorf("buffer_kind %s (%q), want hbm chosen", rep.BufferKind, rep.BufferKindWhy)
	}
}

// mscclRacy are the files under testdata/msccl in which msccl-tools wrote
// a race (docs/msccl.md): no run of them may pass.
var mscclRacy = map[string]bool{"allgather_recursive_doubling_i2_4.xml": true}

// msccl-tools' recursive doubling allgather in two instances: gpu 1 tb 2
// step 0 sends o[0..2) after waiting for tb 0's receive of o[0] only,
// while tb 1 step 1 receives o[1] with nothing ordering the two, so the
// send may read o[1] before or while it is written. kernbench reports it.
func TestMSCCLRaceReported(t *testing.T) {
	for file := range mscclRacy {
		_, err := ccl.Run(filepath.Join(mscclTestdata, file), ccl.Options{Sizes: []int64{1 << 20}, Verify: true, Embedded: kernbench.Files})
		if errkind.Of(err) != errkind.SendBufferHazard {
			t.Errorf("%s: %v (kind %v), want SendBufferHazard", file, err, errkind.Of(err))
		}
	}
}
