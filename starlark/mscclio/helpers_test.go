package mscclio_test

import (
	"testing"

	"kernbench"
	"kernbench/starlark/ccl"
	"kernbench/starlark/report"
)

// These tests run schedules, and export runs, through ccl.Run: the whole
// pipeline this package is glue for.

const mscclTestdata = "../../testdata/msccl"

// runVerified runs target with the embedded algorithms and the reference
// check, failing the test on an error or a missing row.
func runVerified(t *testing.T, target string, o ccl.Options) *report.Report {
	t.Helper()
	o.Embedded = kernbench.Files
	o.Verify = true
	rep, err := ccl.Run(target, o)
	if err != nil {
		t.Fatalf("Run(%s, world %d, root %d, counts %v, %s %s, in_place %v, sets %v) failed: %v",
			target, o.WorldSize, o.Root, o.Counts, o.DType, o.RedOp, o.InPlace, o.Sets, err)
	}
	if len(rep.Results) != len(o.Counts) {
		t.Fatalf("%s: got %d result rows, want %d", target, len(rep.Results), len(o.Counts))
	}
	return rep
}

// checkCorrect fails unless every row was verified with no wrong element
// and phase 2 matched.
func checkCorrect(t *testing.T, rep *report.Report) {
	t.Helper()
	for _, r := range rep.Results {
		if r.Wrong != 0 || !r.Verified {
			t.Errorf("%s world %d count %d %s %s in_place=%v: wrong = %d, verified = %v, first wrong %+v; want 0 wrong, verified",
				rep.Algorithm, rep.WorldSize, r.Count, r.DType, r.RedOp, r.InPlace, r.Wrong, r.Verified, r.FirstWrong)
		}
		if r.Phase2Match != nil && !*r.Phase2Match {
			t.Errorf("%s world %d count %d %s %s in_place=%v: phase-2 replay does not match: %s",
				rep.Algorithm, rep.WorldSize, r.Count, r.DType, r.RedOp, r.InPlace, r.Phase2)
		}
	}
}

// longTest skips a long equivalence test under -short.
func longTest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a long equivalence test: the full tier (go test ./...) runs it")
	}
}
