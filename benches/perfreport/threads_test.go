package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The threads table: the speed-up is formed pair by pair (one-thread wall
// over K-thread wall of the same pair), its median and range shown, and
// CPU use is the K-thread runs' CPU over their wall. The times are
// constants in seconds fed to the arithmetic, not measurements.
func TestThreadsTable(t *testing.T) {
	ms := func(v ...int) []float64 {
		var s []float64
		for _, x := range v {
			s = append(s, float64(x)/1000)
		}
		return s
	}
	r := threadResult{
		job:     threadJobs[0],
		k:       2,
		one:     ms(1500, 1460, 1450),
		many:    ms(800, 740, 870),
		manyCPU: ms(1520, 1440, 1600),
	}
	if diff := cmp.Diff([]float64{1.875, 1460.0 / 740, 1450.0 / 870}, wallRatios(r.one, r.many), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("wallRatios (-want +got):\n%s", diff)
	}
	got := renderThreads([]threadResult{r})
	want := "| ring, timing-only, N=256 | 2 | 3 | 1.46 s | 0.80 s | 190 % | 1.88 (1.67–1.97) |\n"
	if !strings.Contains(got, want) {
		t.Errorf("renderThreads: no row %q in\n%s", want, got)
	}
	if !strings.Contains(got, "`GOMAXPROCS=K kernbench run ring_allreduce --world-size 256 --set system.sips=8 --bytes 8192K --timing-only --threads K`") {
		t.Errorf("renderThreads: no command in\n%s", got)
	}
	if renderThreads(nil) != "" {
		t.Errorf("renderThreads(nil) is not empty")
	}
}
