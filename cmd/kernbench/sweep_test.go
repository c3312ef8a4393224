package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/cmd/kernbench/internal/compare"
	"kernbench/cmd/kernbench/internal/listflag"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

func TestParseSweep(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []int64
		err  bool
	}{
		{spec: "1K:8K", want: []int64{1024, 2048, 4096, 8192}},
		{spec: "1K:8K:4", want: []int64{1024, 4096}},
		{spec: "1K:9K", want: []int64{1024, 2048, 4096, 8192}},
		{spec: "4K:4K", want: []int64{4096}},
		{spec: "1000:8000:2", want: []int64{1000, 2000, 4000, 8000}},
		{spec: "8K:1K", err: true},
		{spec: "1K", err: true},
		{spec: "1K:2K:1", err: true},
		{spec: "1K:2K:x", err: true},
		{spec: "0:2K", err: true},
		{spec: "1Q:2K", err: true},
		// Issue 13: a huge FACTOR made the second size infinite, whose
		// int64 is negative ("count must be >= 0 (got -2305843009213693952)").
		{spec: "4:64:1e308", want: []int64{4}},
		{spec: "4:64:1e300", want: []int64{4}},
		// A MAX of 2^63-1 is 2^63 as a float: the step to it wrapped too.
		{spec: "4611686018427387904:9223372036854775807", want: []int64{1 << 62}},
		// Steps that round to one size are one row, not 1000 copies.
		{spec: "4:6:1.001", want: []int64{4, 5}},
		// More than 1000 sizes is an error, not a sweep cut short of MAX
		// (nor one that takes for ever with a FACTOR a hair over 1).
		{spec: "4:1G:1.01", err: true},
		{spec: "1:8E:1.0000000000000002", err: true},
	} {
		got, err := listflag.Sweep(tc.spec)
		if (err != nil) != tc.err {
			t.Errorf("parseSweep(%q) error = %v, want error %v", tc.spec, err, tc.err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parseSweep(%q) (-want +got):\n%s", tc.spec, diff)
		}
	}
}

// The line after a sweep with refused sizes says which were not run and
// what reaches them: --timing-only when it fits for all, how many it
// reaches when only some, else a larger --max-memory.
func TestRefusedSizes(t *testing.T) {
	const limit = 100
	row := func(bytes, timingOnly int64) report.Result {
		r := report.Result{Bytes: bytes}
		if timingOnly >= 0 {
			r.Refused = &report.Refusal{Limit: limit, TimingOnly: timingOnly}
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		label string
		rows  []report.Result
		want  string
	}{
		{"none refused", "", []report.Result{row(1, -1), row(2, -1)}, ""},
		{"timing-only reaches one", "", []report.Result{row(1, -1), row(2, 50)},
			"kernbench: 1 of 2 sizes refused over --max-memory, not run: 2 (the rows say why); --timing-only runs it, or raise --max-memory\n"},
		{"timing-only reaches some", "ring", []report.Result{row(1, -1), row(2, 50), row(4, 150)},
			"kernbench: ring: 2 of 3 sizes refused over --max-memory, not run: 2, 4 (the rows say why); --timing-only runs 1 of them; or raise --max-memory\n"},
		{"timing-only already", "", []report.Result{row(1, 0), row(2, 0)},
			"kernbench: 2 of 2 sizes refused over --max-memory, not run: 1, 2 (the rows say why); raise --max-memory\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			got := compare.RefusedSizes([]compare.Labeled{{Label: tc.label, Rep: &report.Report{Results: tc.rows}}}, &stderr)
			if diff := cmp.Diff(tc.want, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if want := min(1, len(tc.want)); len(got) != want {
				t.Fatalf("%d failures, want %d", len(got), want)
			}
			for _, lf := range got {
				if k := lf.F.ErrorKind(); k != errkind.MemoryLimit || lf.Label != tc.label {
					t.Errorf("failure %s of %q, want %s (exit 2) of %q", k.Name, lf.Label, errkind.MemoryLimit.Name, tc.label)
				}
			}
		})
	}
}
