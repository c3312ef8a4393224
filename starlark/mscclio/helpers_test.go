package mscclio_test

import (
	"testing"

	"kernbench"
	"kernbench/starlark/ccl"
	"kernbench/starlark/report"
	"kernbench/starlark/report/reporttest"
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
	reporttest.Rows(t, target, rep, len(o.Counts))
	return rep
}

var checkCorrect = reporttest.CheckCorrect

func longTest(t *testing.T) { t.Helper(); reporttest.Long(t, "a long equivalence test") }
