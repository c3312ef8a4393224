package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"kernbench"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report/reporttest"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
)

// memoryCase is one run whose host memory estimate is held against its
// measured peak.
type memoryCase struct {
	algo       string
	world      int
	bytes      string
	timingOnly bool
}

func (c memoryCase) String() string {
	mode := "verified"
	if c.timingOnly {
		mode = "timing-only"
	}
	return fmt.Sprintf("%s/%d/%s/%s", c.algo, c.world, c.bytes, mode)
}

// memoryCases are the runs of TestMemoryEstimateMatchesPeak: every
// shipped algorithm at 2, 8 and 32 ranks, 4K and 256K, verified and
// timing-only (alltoall's 256K at 32 ranks is 512 MiB of buffers: left to
// the full matrix), and the outliers below; with full
// (KERNBENCH_MEMORY_MATRIX=full) every shipped algorithm at 2, 8, 64 and
// 512 ranks, 4K and 256K (and 1M to 64 ranks), and at 4096 ranks × 4K,
// verified and timing-only. alltoall stops at 64 ranks there: its
// buffers are world² × size (8 GiB at 1024 × 4K) and its messages grow as
// the cube of the world (256 ranks × 4K, timing-only, runs for minutes).
func memoryCases(t *testing.T, full bool) []memoryCase {
	cfg, _, err := target.LoadConfig(script.Env{}, "", nil, kernbench.Files)
	if err != nil {
		t.Fatal(err)
	}
	type grid struct {
		worlds []int
		sizes  []string
	}
	grids := []grid{{[]int{2, 8, 32}, []string{"4K", "256K"}}}
	if full {
		grids = []grid{{[]int{2, 8, 64}, []string{"4K", "256K", "1M"}}, {[]int{512}, []string{"4K", "256K"}}, {[]int{4096}, []string{"4K"}}}
	}
	var cases []memoryCase
	for _, g := range grids {
		for _, w := range g.worlds {
			for _, b := range g.sizes {
				for _, a := range cfg.AlgorithmNames {
					if a == "alltoall" && (!full && w == 32 && b != "4K" || w > 64) {
						continue
					}
					cases = append(cases, memoryCase{a, w, b, false}, memoryCase{a, w, b, true})
				}
			}
		}
	}
	if full {
		return cases
	}
	// The short matrix's outliers of the full one, in a few seconds of CPU
	// each: kernels that keep a view and a handle per piece, which the
	// counted estimate put at 1.4-1.5 times their peak
	// (ring_allreduce_manual at 64 ranks × 256K, verified, and at 256 × 4K,
	// --timing-only; custom_mesh at 256 × 1M, --timing-only, 1.51, and at
	// 128 × 1M the same cause), and which the configuration alone puts at
	// 0.31 and 0.33 of their peak (ring_allreduce_manual at 128 × 256K and
	// custom_mesh at 256 × 1M, --timing-only: counted now).
	return append(cases,
		memoryCase{"ring_allreduce_manual", 64, "256K", false}, memoryCase{"ring_allreduce_manual", 256, "4K", true},
		memoryCase{"custom_mesh", 128, "1M", true}, memoryCase{"ring_allreduce_manual", 128, "256K", true},
		memoryCase{"custom_mesh", 256, "1M", true})
}

// memoryRun is what one run reported: its estimate (counted by the
// probe, and from the configuration alone) and its peak resident set.
type memoryRun struct {
	counted, configured, peak int64
}

var peakLine = regexp.MustCompile(`# peak resident set: (\d+) bytes`)

// measureMemory runs c as a process of its own (its peak is its own,
// whatever runs beside it) with the estimate counted by a probe
// whatever the limit, and reads the estimate from its --json report and
// the peak from the line KERNBENCH_REPORT_PEAK adds. ok is false when the
// run did not complete (refused or stopped by --max-memory).
func measureMemory(t *testing.T, bin string, c memoryCase) (r memoryRun, ok bool) {
	t.Helper()
	args := []string{"run", c.algo, "--world-size", strconv.Itoa(c.world), "--bytes", c.bytes,
		"--set", fmt.Sprintf("system.sips=%d", (c.world+31)/32), "-v", "--json"}
	if c.timingOnly {
		args = append(args, "--timing-only")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KERNBENCH_MEMORY_PROBE=always", "KERNBENCH_REPORT_PEAK=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, isExit := err.(*exec.ExitError); isExit && (ee.ExitCode() == 2 || ee.ExitCode() == 3) &&
		(bytes.Contains(stderr.Bytes(), []byte("--max-memory")) || bytes.Contains(stderr.Bytes(), []byte("InitError"))) {
		// Refused or stopped by the default --max-memory (the machine
		// cannot hold it), or a size the configuration cannot set up
		// (hier_allreduce's rx rings at 1024 ranks).
		t.Logf("%v: not run here: %s", c, firstLine(stderr.String()))
		return r, false
	}
	if err != nil {
		t.Fatalf("kernbench %v: %v\n%s", args, err, stderr.String())
	}
	var rep struct {
		Results []struct {
			HostMemory *hostmem.Estimate `json:"host_memory_estimate"`
		} `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || len(rep.Results) != 1 || rep.Results[0].HostMemory == nil {
		t.Fatalf("kernbench %v: no host memory estimate in the report (%v):\n%s", args, err, stdout.String())
	}
	e := rep.Results[0].HostMemory
	if e.Basis != "counted" {
		t.Fatalf("kernbench %v: estimate %q, want one counted by a probe", args, e.Basis)
	}
	m := peakLine.FindSubmatch(stderr.Bytes())
	if m == nil {
		t.Fatalf("kernbench %v: no peak reported:\n%s", args, stderr.String())
	}
	r.counted, r.configured = e.Total(), e.Configured
	r.peak, _ = strconv.ParseInt(string(m[1]), 10, 64)
	return r, true
}

func firstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// TestMemoryEstimateMatchesPeak holds the host memory estimate of every
// shipped algorithm against the peak resident set of the same run: the
// estimate counted by probes (of the run, or from 1024 ranks of smaller
// worlds) within 1.5× of it, either side; the
// configuration's estimate, which admits runs under half the limit
// without a probe (an eighth for a timing-only run), never under 1/1.5
// of it for a run that moves bytes and never under a quarter of it for a
// timing-only run (so no run it admits passes half the limit).
// KERNBENCH_MEMORY_MATRIX=full runs the long matrix, 2 to 4096 ranks,
// one run at a time (go test -run TestMemoryEstimateMatchesPeak -timeout
// 0 -v ./cmd/kernbench): it takes hours and tens of GB; runs the machine
// cannot hold are refused or stopped by the default --max-memory and
// logged, as are sizes the configuration cannot set up.
func TestMemoryEstimateMatchesPeak(t *testing.T) {
	longTest(t)
	bin, err := exec.LookPath("kernbench")
	if err != nil {
		t.Skip("no kernbench command on PATH:", err)
	}
	full := os.Getenv("KERNBENCH_MEMORY_MATRIX") == "full"
	for _, c := range memoryCases(t, full) {
		t.Run(c.String(), func(t *testing.T) {
			// One run at a time: a run's peak is its own process's, but
			// not independent of what runs beside it. With the cores
			// busy, the collector's background marking falls behind the
			// kernels' allocation and the heap overshoots its goal: the
			// 128-rank custom_mesh timing-only run peaked at 72-80 MB
			// alone and at up to 86.9 MB beside its sibling runs, over
			// the 1.5x of its 57.8 MB estimate.
			r, ok := measureMemory(t, bin, c)
			if !ok {
				return
			}
			ratio := func(est int64) float64 { return float64(est) / float64(r.peak) }
			t.Logf("peak %s, estimate %s (%.2f), from the configuration %s (%.2f)",
				hostmem.FormatBytes(r.peak), hostmem.FormatBytes(r.counted), ratio(r.counted), hostmem.FormatBytes(r.configured), ratio(r.configured))
			if q := ratio(r.counted); q < 1/1.5 || q > 1.5 {
				t.Errorf("estimate %s is %.2f× the peak %s: not within 1.5×", hostmem.FormatBytes(r.counted), q, hostmem.FormatBytes(r.peak))
			}
			q := ratio(r.configured)
			switch {
			case !c.timingOnly && q < 1/1.5:
				t.Errorf("the configuration's estimate %s is %.2f× the peak %s: a run it admits without a probe could pass the limit", hostmem.FormatBytes(r.configured), q, hostmem.FormatBytes(r.peak))
			case c.timingOnly && q < 1.0/4:
				t.Errorf("the configuration's timing-only estimate %s is %.2f× the peak %s: a run it admits without a probe could pass half the limit", hostmem.FormatBytes(r.configured), q, hostmem.FormatBytes(r.peak))
			}
		})
	}
}

// longTest skips t in the -short tier: it runs many processes.
func longTest(t *testing.T) { t.Helper(); reporttest.Long(t, "runs many processes") }
