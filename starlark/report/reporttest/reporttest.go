// Package reporttest holds what the tests of the packages that run
// simulations share to check a report: every row verified and right, a
// row per size, and the -short tier's skip of the long tests. Only tests
// import it.
package reporttest

import (
	"testing"

	"kernbench/starlark/report"
)

// Rows fails t at once unless rep has a row for each of the sizes asked
// for (target names the run).
func Rows(t testing.TB, target string, rep *report.Report, sizes int) {
	t.Helper()
	if len(rep.Results) != sizes {
		t.Fatalf("%s: got %d result rows, want %d", target, len(rep.Results), sizes)
	}
}

// CheckCorrect fails t unless every row of rep was verified with no wrong
// element and its phase-2 replay, when it ran, matched.
func CheckCorrect(t testing.TB, rep *report.Report) {
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

// Long skips t in the -short tier (go test -short ./...: under a minute
// of CPU); why says what makes it long. The full tier, go test ./... and
// CI, runs it.
func Long(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip(why + ": the full tier (go test ./...) runs it")
	}
}
