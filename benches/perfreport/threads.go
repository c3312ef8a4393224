package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// The parallel engine's target is stated in wall time: a timed run on
// --threads K goroutines against the same run on one, on a machine of K
// cores. Its jobs are the ring jobs whose ranks sit on several SIPs (a
// partition each), run alternately at --threads 1 (GOMAXPROCS=1) and at
// --threads K (GOMAXPROCS=K), run for run, so that both see the same
// drift of a shared machine; the ratio is formed pair by pair. Both must
// simulate the same run (messages, events and simulated time are the
// same for every K), which each pair checks.

// threadJobs are the jobs the threads table measures (the ring jobs of
// 256 ranks on 8 SIPs, and of 1024 on 32 with -full).
var threadJobs = []job{
	{name: "ring, timing-only, N=256", args: ringArgs(256, "--timing-only")},
	{name: "ring, timing-only, N=1024", args: ringArgs(1024, "--timing-only"), full: true},
}

// threadResult is what the alternating runs of one job measured, in
// seconds.
type threadResult struct {
	job     job
	k       int
	one     []float64 // wall of each --threads 1 run
	many    []float64 // wall of each --threads K run
	manyCPU []float64 // user + system of each --threads K run
}

// measureThreads runs j at --threads 1 and at --threads k alternately,
// n times each.
func measureThreads(bin string, j job, k, n int) (threadResult, error) {
	tr := threadResult{job: j, k: k}
	var first result
	for i := range n {
		for _, threads := range []int{1, k} {
			args := append(append([]string{}, j.args...), "--threads", fmt.Sprint(threads))
			r, err := measureOn(bin, job{name: j.name, args: args}, threads)
			if err != nil {
				return threadResult{}, fmt.Errorf("--threads %d: %w", threads, err)
			}
			if i == 0 && threads == 1 {
				first = r
			} else if r.sends != first.sends || r.events != first.events || r.simNS != first.simNS {
				return threadResult{}, fmt.Errorf("--threads %d simulated %d messages, %d events and %v ns, --threads 1 %d, %d and %v ns: not the same run",
					threads, r.sends, r.events, r.simNS, first.sends, first.events, first.simNS)
			}
			if threads == 1 {
				tr.one = append(tr.one, r.wall.Seconds())
			} else {
				tr.many = append(tr.many, r.wall.Seconds())
				tr.manyCPU = append(tr.manyCPU, r.cpu.Seconds())
			}
		}
	}
	return tr, nil
}

// wallRatios are, pair by pair, the one-thread wall time divided by the
// K-thread one: the speed-up.
func wallRatios(one, many []float64) []float64 {
	r := make([]float64, min(len(one), len(many)))
	for i := range r {
		r[i] = one[i] / max(many[i], 1e-9)
	}
	return r
}

// renderThreads is the threads table.
func renderThreads(results []threadResult) string {
	if len(results) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe parallel engine (`--threads K` with `GOMAXPROCS=K`, against `--threads 1` with `GOMAXPROCS=1`, alternating, run for run; the same messages, events and simulated time checked in every pair): wall times are medians, the speed-up is the median of the pairs' ratios with their range in brackets, and CPU use is the K-thread runs' user + system time over their wall time.\n\n")
	b.WriteString("| job | K | runs | one-thread wall | K-thread wall | K-thread CPU use | speed-up (one ÷ K, wall) |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		use := 0.0
		for i := range r.many {
			use += r.manyCPU[i] / max(r.many[i], 1e-9)
		}
		use /= float64(max(len(r.many), 1))
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f s | %.2f s | %.0f %% | %s |\n",
			r.job.name, r.k, len(r.one), medianFloat(r.one), medianFloat(r.many), 100*use, ratioCell(wallRatios(r.one, r.many)))
	}
	b.WriteString("\nCommands: ")
	for i, r := range results {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "`GOMAXPROCS=K kernbench run %s --threads K`", strings.Join(r.job.args, " "))
	}
	b.WriteString(".\n")
	return b.String()
}

// measureOn runs one job as a child process on procs cores (GOMAXPROCS).
func measureOn(bin string, j job, procs int) (result, error) {
	cmd := exec.Command(bin, append(append([]string{"run"}, j.args...), "--json")...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", procs))
	return measureCmd(cmd, j)
}
