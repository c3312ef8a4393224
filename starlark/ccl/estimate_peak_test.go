package ccl

import (
	"fmt"
	"testing"

	"kernbench"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report/reporttest"
)

// TestEstimateNearMeasuredPeaks holds the host memory estimate of a few
// cheap runs against the peak resident set the same runs were measured at
// (KERNBENCH_MEMORY_PROBE=always KERNBENCH_REPORT_PEAK=1 kernbench run
// ALGORITHM --world-size N --bytes B [--timing-only] --set
// system.sips=ceil(N/32), Go 1.26, amd64, 23 GB, 2 cores): within
// 1.5× either side. The estimate is deterministic (the probes' counts
// are), so a change of the model or of what a probe counts that moves it
// away from what the runs hold fails here, in the short tier;
// TestMemoryEstimateMatchesPeak (cmd/kernbench) measures the peaks
// themselves over the whole matrix. The points are the ones the
// configuration alone misses: kernels that keep a view and a handle per
// piece, counted by a probe of the run (under 1024 ranks) or extrapolated
// from probes of smaller worlds (from 1024).
func TestEstimateNearMeasuredPeaks(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		algo       string
		world      int
		bytes      int64
		timingOnly bool
		peak       int64 // measured, bytes
		long       bool  // over 3 s of CPU: not in the -short tier
	}{
		{"ring_allreduce_manual", 128, 256 << 10, true, 113 * mib, false},
		{"ring_allreduce", 256, 4 << 10, true, 64 * mib, false},
		{"rd_allreduce", 1024, 4 << 10, true, 110 * mib, false},
		{"tree_allreduce", 1024, 4 << 10, true, 58 * mib, false},
		{"ring_allreduce_manual", 256, 4 << 10, true, 126 * mib, true},
		{"ring_allreduce_manual", 64, 256 << 10, false, 220 * mib, true},
		{"mesh_allreduce", 1024, 4 << 10, true, 205 * mib, true},
	} {
		mode := "verified"
		if c.timingOnly {
			mode = "timing-only"
		}
		t.Run(fmt.Sprintf("%s/%d/%d/%s", c.algo, c.world, c.bytes, mode), func(t *testing.T) {
			if c.long {
				reporttest.Long(t, "seconds of CPU")
			}
			t.Parallel()
			rep, err := Run(c.algo, Options{Embedded: kernbench.Files, WorldSize: c.world, Sizes: []int64{c.bytes},
				Sets: []string{fmt.Sprintf("system.sips=%d", (c.world+31)/32)}, TimingOnly: c.timingOnly, Verify: !c.timingOnly,
				ProbeMemory: true, Detail: true})
			if err != nil {
				t.Fatal(err)
			}
			e := rep.Results[0].HostMemory
			if e == nil || e.Basis != hostmem.BasisCounted {
				t.Fatalf("estimate %+v, want one counted by probes", e)
			}
			q := float64(e.Total()) / float64(c.peak)
			t.Logf("estimate %s, %.2f× the measured peak %s (%s)", hostmem.FormatBytes(e.Total()), q, hostmem.FormatBytes(c.peak), e.CountedBy())
			if q < 1/1.5 || q > 1.5 {
				t.Errorf("estimate %s is %.2f× the measured peak %s: not within 1.5×", hostmem.FormatBytes(e.Total()), q, hostmem.FormatBytes(c.peak))
			}
		})
	}
}
