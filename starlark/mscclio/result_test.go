package mscclio_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernbench"
	"kernbench/engine/msccl"
	"kernbench/starlark/ccl"
	"kernbench/starlark/mscclio"
)

// shippedSchedules parses every schedule under testdata/msccl.
func shippedSchedules(t *testing.T) []*msccl.Algo {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(mscclTestdata, "*.xml"))
	if err != nil || len(files) < 30 {
		t.Fatalf("schedules in %s: %d, %v", mscclTestdata, len(files), err)
	}
	var algos []*msccl.Algo
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		a, err := msccl.Parse(file, data)
		if err != nil {
			t.Fatal(err)
		}
		algos = append(algos, a)
	}
	return algos
}

// Every schedule under testdata/msccl (msccl-tools' examples: allreduce,
// allgather, reduce_scatter and alltoall, in place and out of place)
// leaves the result its collective wants.
func TestResultOfShippedSchedules(t *testing.T) {
	for _, a := range shippedSchedules(t) {
		root, _ := mscclio.Root(a)
		if err := mscclio.Result(a, root); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// The race check finds the race msccl-tools wrote into one of its
// examples (mscclRacy; a run reports it as SendBufferHazard) and no
// other.
func TestRacesOfShippedSchedules(t *testing.T) {
	for _, a := range shippedSchedules(t) {
		err := mscclio.Races(a)
		if racy := mscclRacy[filepath.Base(a.File)]; (err != nil) != racy {
			t.Errorf("%s: Races = %v, want a race %v", filepath.Base(a.File), err, racy)
		}
	}
}

// chainXML is a three-gpu chain schedule 0 -> 1 -> 2 of broadcast (gpu 0
// sends its input on) or, reversed, of reduce (gpu 2 sends, gpu 0
// reduces into its output), with gpu 1's step and gpu 0's extra thread
// block (a copy of its input into its output, or none) chosen.
func chainXML(coll string, inPlace bool, middle string, rootCopy bool) string {
	ip := map[bool]int{false: 0, true: 1}[inPlace]
	step := func(typ, src, dst string) string {
		return fmt.Sprintf("      <step s=\"0\" type=\"%s\" srcbuf=\"%s\" srcoff=\"0\" dstbuf=\"%s\" dstoff=\"0\" cnt=\"2\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n", typ, src, dst)
	}
	tb := func(id, send, recv int, st string) string {
		return fmt.Sprintf("    <tb id=\"%d\" send=\"%d\" recv=\"%d\" chan=\"0\">\n%s    </tb>\n", id, send, recv, st)
	}
	var gpus [3]string
	if coll == "broadcast" {
		gpus[0] = tb(0, 1, -1, step("s", "i", "o"))
		gpus[1] = tb(0, 2, 0, step(middle, "o", "o"))
		gpus[2] = tb(0, -1, 1, step("r", "o", "o"))
	} else {
		gpus[0] = tb(0, -1, 1, step("rrc", "i", "o"))
		gpus[1] = tb(0, 0, 2, step(middle, "i", "o"))
		gpus[2] = tb(0, 1, -1, step("s", "i", "o"))
	}
	if rootCopy {
		gpus[0] += tb(1, -1, -1, step("cpy", "i", "o"))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<algo name=\"chain\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"3\" coll=\"%s\" inplace=\"%d\">\n", coll, ip)
	for g, body := range gpus {
		fmt.Fprintf(&b, "  <gpu id=\"%d\" i_chunks=\"2\" o_chunks=\"2\" s_chunks=\"0\">\n%s  </gpu>\n", g, body)
	}
	b.WriteString("</algo>\n")
	return b.String()
}

// Rule (docs/msccl.md, Checking a schedule): what check says of a
// schedule's result is what a run of it finds in its data. Broadcast and
// reduce (whose root the schedule implies), in place and out of place,
// correct and wrong: a schedule check passes verifies when run, and one
// it refuses leaves wrong elements.
func TestResultAgreesWithRun(t *testing.T) {
	tests := []struct {
		name      string
		coll      string
		inPlace   bool
		middle    string
		rootCopy  bool
		wantWrong bool
	}{
		{"broadcast, root copies", "broadcast", false, "rcs", true, false},
		{"broadcast, root's output never written", "broadcast", false, "rcs", false, true},
		{"broadcast in place", "broadcast", true, "rcs", false, false},
		{"reduce", "reduce", false, "rrs", false, false},
		{"reduce in place", "reduce", true, "rrs", false, false},
		{"reduce, a rank only forwards", "reduce", false, "rcs", false, true},
		{"reduce in place, a rank only forwards", "reduce", true, "rcs", false, true},
		{"reduce, a rank also stores its partial sum", "reduce", false, "rrcs", false, true},
		{"reduce in place, a rank also stores its partial sum", "reduce", true, "rrcs", false, true},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := chainXML(tc.coll, tc.inPlace, tc.middle, tc.rootCopy)
			a, err := msccl.Parse("chain.xml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			root, _ := mscclio.Root(a)
			static := mscclio.Result(a, root)
			if (static != nil) != tc.wantWrong {
				t.Errorf("Result = %v, want wrong %v", static, tc.wantWrong)
			}
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".xml")
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := ccl.Run(file, ccl.Options{Sizes: []int64{4096}, Verify: true, Embedded: kernbench.Files})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if r := rep.Results[0]; (r.Wrong != 0) != tc.wantWrong || !tc.wantWrong && !r.Verified {
				t.Errorf("run: %d wrong (verified %v), want wrong %v", r.Wrong, r.Verified, tc.wantWrong)
			}
		})
	}
}
