package ccl

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	kernbench "kernbench"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/report"
	"kernbench/starlark/tl"
)

// mismatchRun runs a 4-rank ring allreduce whose memory is changed behind
// the op_log's back by the hooks, and returns its one row.
func mismatchRun(t *testing.T) report.Result {
	t.Helper()
	rep, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 4, Counts: []int64{4096}, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Phase2Match == nil || *r.Phase2Match {
		t.Fatalf("phase2_match = %v, want false", r.Phase2Match)
	}
	if r.Phase2Diagnosis == nil {
		t.Fatal("a phase-2 mismatch without its diagnosis")
	}
	return r
}

// Rule (docs/architecture.md, Two-pass verification): a phase-2 mismatch
// names the first record whose effect differs between the phases and the tl
// call that issued it. Here a byte of rank 0's send buffer changes at 1 ns
// with no record (as a buffer reused under an operation would): the first
// record that read it in phase 1 (a load of rank 0's kernel) read other bytes
// than the replay does.
func TestPhase2DiagnosisNamesFirstDivergentRecord(t *testing.T) {
	duringPhase1 = func(m *machine.Machine, send []*tl.Ptr) {
		m.Sim.At(sim.Nanosecond, sim.HandlerFunc(func() {
			b := send[0].Reg.Bytes()
			b[len(b)-1] ^= 0x40
		}))
	}
	defer func() { duringPhase1 = nil }()
	r := mismatchRun(t)
	d := r.Phase2Diagnosis
	if !d.Reproduced {
		t.Error("the diagnosing run did not reproduce the mismatch")
	}
	dv := d.FirstDivergent
	if dv == nil {
		t.Fatalf("no divergent record named; diagnosis %+v", d)
	}
	if dv.Rank != 0 || !strings.HasPrefix(dv.Origin, "rank 0 tl.") || !strings.Contains(dv.Origin, "ring_allreduce.star:") {
		t.Errorf("first divergent record %v, want one of rank 0 issued at a line of ring_allreduce.star", dv)
	}
	if d.Phase1Writer == nil || d.Phase2Writer == nil || !strings.Contains(d.Phase1Writer.Origin, "ring_allreduce.star:") {
		t.Errorf("last writers %v / %v, want both, issued at lines of ring_allreduce.star", d.Phase1Writer, d.Phase2Writer)
	}
	if r.Wrong == 0 || r.FirstWrong == nil {
		t.Errorf("wrong = %d, want the wrong elements counted beside the mismatch", r.Wrong)
	}
	if strings.Contains(r.Phase2, "last written by") {
		t.Errorf("phase2_mismatch %q repeats the diagnosis", r.Phase2)
	}
}

// A change of memory after every record (no record read it) has no
// divergent record: the diagnosis says the memory changed outside any.
func TestPhase2DiagnosisOfAChangeOutsideRecords(t *testing.T) {
	afterPhase1 = func(m *machine.Machine) {
		b := m.Ranks[2].TCM.Bytes(0, 1)
		b[0] ^= 0xff
	}
	defer func() { afterPhase1 = nil }()
	d := mismatchRun(t).Phase2Diagnosis
	if d.FirstDivergent != nil {
		t.Errorf("divergent record %v named for a change no record made", d.FirstDivergent)
	}
	want := "every record's effect in phase 2 equals its effect in phase 1: the memory changed outside any record"
	if diff := cmp.Diff(want, d.Lines()[len(d.Lines())-1]); diff != "" {
		t.Errorf("last line (-want +got):\n%s", diff)
	}
}

// The diagnosing run prints nothing: what the kernels print, the first
// run printed.
func TestPhase2DiagnosisRunPrintsNothing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hello.star")
	src := "COLLECTIVE = \"allreduce\"\n\ndef kernel(sendbuf, recvbuf, rank, world_size, tl):\n    print(\"hello\")\n    tl.copy(recvbuf, sendbuf)\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	afterPhase1 = func(m *machine.Machine) { m.Ranks[0].TCM.Bytes(0, 1)[0] ^= 0xff }
	defer func() { afterPhase1 = nil }()
	var stderr bytes.Buffer
	rep, err := Run(file, Options{Embedded: kernbench.Files, WorldSize: 1, Counts: []int64{16}, Verify: true, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results[0].Phase2Diagnosis == nil {
		t.Fatal("no diagnosis: the test needs a mismatch")
	}
	if n := strings.Count(stderr.String(), "] hello"); n != 1 {
		t.Errorf("the kernel's print came out %d times, want once:\n%q", n, stderr.String())
	}
}

// Rule (issue 31 item 1, decision 4): on a machine of several SIPs the
// diagnosing run is the same partitioned run, its SIPs' witnessed op_logs
// merged (oplog.WitnessAll): it reproduces the mismatch and names the
// same first divergent record and writers for every number of threads.
func TestPhase2DiagnosisOnPartitions(t *testing.T) {
	duringPhase1 = func(m *machine.Machine, send []*tl.Ptr) {
		if !m.Partitioned() {
			t.Error("the run is not partitioned")
		}
		m.RankSim(2).At(sim.Nanosecond, sim.HandlerFunc(func() {
			b := send[2].Reg.Bytes()
			b[len(b)-1] ^= 0x40
		}))
	}
	defer func() { duringPhase1 = nil }()
	var want *report.Phase2Diagnosis
	for _, k := range []int{1, 2} {
		rep, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 4, Counts: []int64{4096}, Verify: true, Threads: k,
			Sets: []string{"system.sips=2", "system.cubes_per_sip=1", "system.pes_per_cube=2"}})
		if err != nil {
			t.Fatal(err)
		}
		d := rep.Results[0].Phase2Diagnosis
		if d == nil || !d.Reproduced || d.FirstDivergent == nil || d.FirstDivergent.Rank != 2 || !strings.HasPrefix(d.FirstDivergent.Origin, "rank 2 tl.") {
			t.Fatalf("K=%d: diagnosis %+v, want the mismatch reproduced and a first divergent record of rank 2's kernel", k, d)
		}
		if want == nil {
			want = d
		} else if diff := cmp.Diff(want, d); diff != "" {
			t.Errorf("K=%d's diagnosis differs from K=1's (-1 +%d):\n%s", k, k, diff)
		}
	}
}
