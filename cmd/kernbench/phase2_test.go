package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/cmd/kernbench/internal/compare"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

// Rule (docs/report.md, When phase 2 differs from phase 1; the two-pass
// verification reports the wrong elements like nccl-tests and the record
// that last wrote the first one): a phase-2 mismatch prints where the
// phases differ, the diagnosis (last
// writers, the first divergent record, each with its call), the
// wrong-element report, and what the mismatch means and what to try; the
// exit status is Phase2Mismatch's.
func TestPhase2MismatchReport(t *testing.T) {
	no := false
	r := report.Result{Bytes: 4096, RedOp: "sum", Phase2Match: &no, Wrong: 3,
		Phase2:      "phase 2 differs from phase 1 at address 0x10 (phase 2 0x00, phase 1 0x01)",
		FirstWrong:  &report.WrongElem{Rank: 1, Index: 7, Got: "2", Want: "1"},
		WrongRanges: []report.RankWrong{{Rank: 1, Wrong: 3, Ranges: []report.WrongRange{{Start: 7, End: 10}}}},
		Phase2Diagnosis: &report.Phase2Diagnosis{Reproduced: true,
			Phase1Writer:   &report.RecordRef{Seq: 9, Rank: 1, Kind: "ipcq", Name: "send", Dir: "E", TEndNs: 40, Origin: "rank 1's send E #3 at k.star:5:9"},
			Phase2Writer:   &report.RecordRef{Seq: 9, Rank: 1, Kind: "ipcq", Name: "send", Dir: "E", TEndNs: 40, Origin: "rank 1's send E #3 at k.star:5:9"},
			FirstDivergent: &report.RecordRef{Seq: 4, Rank: 1, Kind: "memory", Name: "store", TEndNs: 20, Origin: "rank 1 tl.recv_copy_send at k.star:7:20"}}}
	var stderr bytes.Buffer
	err := checkResults([]compare.Labeled{{Rep: &report.Report{WorldSize: 2, Results: []report.Result{r}}}}, &stderr)
	if k := errkind.Of(err); k != errkind.Phase2Mismatch {
		t.Fatalf("checkResults = %v (%v), want a Phase2Mismatch exit", err, k)
	}
	want := []string{
		"kernbench: two-pass verification failed at 4096 bytes: phase 2 differs from phase 1 at address 0x10 (phase 2 0x00, phase 1 0x01)",
		"  last write there, in both phases: record 9 (ipcq send E, rank 1, t_end 40ns), issued by rank 1's send E #3 at k.star:5:9",
		"  first record whose effect differs between the phases (phase 1 made other bytes than the replay makes from the op_log): record 4 (memory store, rank 1, t_end 20ns), issued by rank 1 tl.recv_copy_send at k.star:7:20",
		"kernbench: 3 wrong element(s) at 4096 bytes; first: rank 1 index 7 got 2 want 1",
		"  rank 1: 3 wrong at [7, 10)",
		"kernbench: " + report.Phase2Advice,
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}
