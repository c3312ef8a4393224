// Command perfreport measures kernbench's speed and memory on the jobs the
// performance targets are stated for, and writes the tables of
// docs/performance.md. Each job is a separate `kernbench run` process on
// one core (GOMAXPROCS=1); its wall time and peak RSS come from the
// operating system, its simulated message count from the run's --json
// report.
//
//	go run ./benches/perfreport                  # print the tables
//	go run ./benches/perfreport -write docs/performance.md
//	go run ./benches/perfreport -full            # also N=1024, 16384 and 65536 ranks (minutes)
//	go run ./benches/perfreport -baseline /tmp/kb-old   # before/after, alternating
//
// Figures are wall clock on whatever machine runs this, and a shared
// machine's speed drifts from minute to minute: each job runs -runs times
// (the long ones -full-runs times) and the table shows the median wall
// time. With -baseline, an older build runs alternately with the measured
// one, run for run, so both see the same drift, and the table adds its
// median and the ratio of the two (-bin measures an existing binary
// instead of building ./cmd/kernbench).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// job is one measured kernbench invocation.
type job struct {
	name string   // what the row is about
	args []string // after `kernbench run`
	full bool     // only with -full (long)
}

// ringArgs is ring_allreduce with 4 KiB messages and N × 32 KiB per rank
// (N·2(N−1)·8 messages), on as many SIPs as N ranks need.
func ringArgs(n int, extra ...string) []string {
	return append([]string{"ring_allreduce", "--world-size", fmt.Sprint(n),
		"--set", fmt.Sprintf("system.sips=%d", (n+31)/32), "--bytes", fmt.Sprintf("%dK", n*32)}, extra...)
}

var jobs = []job{
	{"ring, timing-only, N=64", ringArgs(64, "--timing-only"), false},
	{"ring, timing-only, N=256", ringArgs(256, "--timing-only"), false},
	{"ring, verified, N=64", ringArgs(64), false},
	{"ring, --verify-data=false, N=64", ringArgs(64, "--verify-data=false"), false},
	{"ring, verified, N=256 × 1 MiB per rank", []string{"ring_allreduce", "--world-size", "256", "--set", "system.sips=8", "--bytes", "1M"}, false},
	{"ring, timing-only, N=1024", ringArgs(1024, "--timing-only"), true},
	{"tree_allreduce, timing-only, 16384 ranks × 4 KiB", []string{"tree_allreduce", "--world-size", "16384", "--set", "system.sips=512", "--bytes", "4K", "--timing-only"}, true},
	// Set-up at scale: a rank's kernel start (Starlark thread and frames,
	// coroutine stack, machine objects) against a handful of messages.
	{"tree_allreduce, timing-only, 65536 ranks × 4 KiB", []string{"tree_allreduce", "--world-size", "65536", "--set", "system.sips=2048", "--bytes", "4K", "--timing-only"}, true},
}

// result is what one job measured.
type result struct {
	job      job
	wall     time.Duration // median over the runs
	runs     int
	rssBytes int64 // the largest peak over the runs
	sends    int64
	events   int64
	dataB    int64 // send + recv bytes of all ranks
	// base is the baseline binary's median wall time over as many runs,
	// alternating with the measured binary's (0 without -baseline).
	base time.Duration
}

type report struct {
	WorldSize int `json:"world_size"`
	Results   []struct {
		Bytes int64 `json:"bytes"`
		Ops   struct {
			Send int64 `json:"send"`
		} `json:"ops"`
		Events int64 `json:"events"`
	} `json:"results"`
}

func main() {
	bin := flag.String("bin", "", "kernbench binary to measure (default: build ./cmd/kernbench)")
	write := flag.String("write", "", "replace the generated section of this markdown file")
	full := flag.Bool("full", false, "also run the long jobs (N=1024, 16384 and 65536 ranks)")
	goBench := flag.Bool("gobench", true, "also run the engine's Go benchmarks (event loop, process switch, IPCQ ring, the shipped ring end to end)")
	flag.IntVar(&runs, "runs", 3, "runs of each job; the table shows the median wall time")
	flag.IntVar(&fullRuns, "full-runs", 1, "runs of each long (-full) job")
	flag.StringVar(&baseline, "baseline", "", "an older kernbench binary to run alternately with the measured one (before/after columns)")
	flag.Parse()
	if runs < 1 || fullRuns < 1 {
		fmt.Fprintln(os.Stderr, "perfreport: -runs and -full-runs must be >= 1")
		os.Exit(2)
	}
	if err := run(*bin, *write, *full, *goBench); err != nil {
		fmt.Fprintln(os.Stderr, "perfreport:", err)
		os.Exit(1)
	}
}

// Repetitions and the baseline (flags).
var (
	runs, fullRuns int
	baseline       string
)

func run(bin, write string, full, goBench bool) error {
	if bin == "" {
		dir, err := os.MkdirTemp("", "perfreport")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "kernbench")
		build := exec.Command("go", "build", "-o", bin, "./cmd/kernbench")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build: %w", err)
		}
	}
	var results []result
	for _, j := range jobs {
		if j.full && !full {
			continue
		}
		fmt.Fprintf(os.Stderr, "perfreport: %s ...\n", j.name)
		r, err := measureRuns(bin, j)
		if err != nil {
			return fmt.Errorf("%s: %w", j.name, err)
		}
		results = append(results, r)
	}
	table := render(results)
	if goBench {
		lines, err := goBenchmarks()
		if err != nil {
			return err
		}
		table += "\nGo benchmarks (`GOMAXPROCS=1 go test -run '^$' -bench … -benchmem`, one run each):\n\n```\n" + strings.Join(lines, "\n") + "\n```\n"
	}
	if write == "" {
		fmt.Print(table)
		return nil
	}
	return splice(write, table)
}

// goBenchmarks are the Go benchmarks of the engine and the end-to-end
// ring, one run each on one core; it returns their result lines.
var goBenchmarkRuns = [][]string{
	{"./engine/sim", "EventLoop|ProcSwitch", "1s"},
	{"./engine/machine", "IPCQRing64", "1s"},
	{"./starlark/ccl", "RingTimingOnly/N=64|RingVerified64|RingAllreduce64", "2x"},
}

func goBenchmarks() ([]string, error) {
	var lines []string
	for _, b := range goBenchmarkRuns {
		fmt.Fprintf(os.Stderr, "perfreport: go test %s -bench %s ...\n", b[0], b[1])
		cmd := exec.Command("go", "test", b[0], "-run", "^$", "-bench", b[1], "-benchmem", "-benchtime", b[2], "-count", "1")
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go test %s: %v: %s%s", b[0], err, out.String(), errOut.String())
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "Benchmark") {
				lines = append(lines, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return lines, nil
}

// measureRuns runs a job -runs (or -full-runs) times, alternating with the
// baseline binary when there is one, and keeps the median wall times and
// the largest peak RSS. Both binaries must report the same simulation.
func measureRuns(bin string, j job) (result, error) {
	n := runs
	if j.full {
		n = fullRuns
	}
	var walls, baseWalls []time.Duration
	var r result
	for i := range n {
		got, err := measure(bin, j)
		if err != nil {
			return result{}, err
		}
		if i == 0 {
			r = got
		}
		if got.sends != r.sends || got.events != r.events {
			return result{}, fmt.Errorf("run %d simulated %d messages and %d events, run 1 %d and %d", i+1, got.sends, got.events, r.sends, r.events)
		}
		walls = append(walls, got.wall)
		r.rssBytes = max(r.rssBytes, got.rssBytes)
		if baseline != "" {
			b, err := measure(baseline, j)
			if err != nil {
				return result{}, fmt.Errorf("baseline: %w", err)
			}
			if b.sends != r.sends || b.events != r.events {
				return result{}, fmt.Errorf("the baseline simulated %d messages and %d events, the measured binary %d and %d", b.sends, b.events, r.sends, r.events)
			}
			baseWalls = append(baseWalls, b.wall)
		}
	}
	r.runs = n
	r.wall = median(walls)
	if len(baseWalls) > 0 {
		r.base = median(baseWalls)
	}
	return r, nil
}

// median is the middle value (the mean of the two middle ones for an even
// count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadAverage is the host's 1-minute load average, or "" where it cannot
// be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return ""
}

// measure runs one job as a child process on one core.
func measure(bin string, j job) (result, error) {
	cmd := exec.Command(bin, append(append([]string{"run"}, j.args...), "--json")...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(errOut.String()))
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Results) != 1 {
		return result{}, fmt.Errorf("reading its --json report: %v", err)
	}
	r := result{job: j, wall: wall, sends: rep.Results[0].Ops.Send, events: rep.Results[0].Events}
	// The bench's per-rank buffers: size is the larger of send and recv,
	// and for allreduce both are that size.
	r.dataB = 2 * rep.Results[0].Bytes * int64(rep.WorldSize)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.rssBytes = ru.Maxrss * 1024 // Linux reports KiB
	}
	return r, nil
}

func render(results []result) string {
	var b strings.Builder
	load := ""
	if l := loadAverage(); l != "" {
		load = ", load average " + l + " when the table was written"
	}
	fmt.Fprintf(&b, "Measured by `go run ./benches/perfreport` on %s/%s, %d CPUs, %s, one core per job (GOMAXPROCS=1); %s%s. Wall time is the median of the runs shown; peak RSS the largest.\n\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format("2006-01-02"), load)
	withBase := baseline != ""
	b.WriteString("| job | messages | events | runs | wall | µs per message | peak RSS | RSS per data byte |")
	if withBase {
		b.WriteString(" baseline wall | baseline / this |")
	}
	b.WriteString("\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	if withBase {
		b.WriteString(" ---: | ---: |")
	}
	b.WriteString("\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.2f s | %.1f | %.0f MB | %.2f |",
			r.job.name, r.sends, r.events, r.runs, r.wall.Seconds(), r.wall.Seconds()*1e6/float64(max(r.sends, 1)),
			float64(r.rssBytes)/1e6, float64(r.rssBytes)/float64(max(r.dataB, 1)))
		if withBase {
			fmt.Fprintf(&b, " %.2f s | %.2f |", r.base.Seconds(), r.base.Seconds()/max(r.wall.Seconds(), 1e-9))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nCommands (each as `GOMAXPROCS=1 kernbench run … --json`):\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- %s: `kernbench run %s`\n", r.job.name, strings.Join(r.job.args, " "))
	}
	return b.String()
}

const (
	beginMark = "<!-- perfreport:begin (generated by go run ./benches/perfreport -write docs/performance.md) -->"
	endMark   = "<!-- perfreport:end -->"
)

// splice replaces the text between the markers of file with table.
func splice(file, table string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	old, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return err
	}
	s := string(old)
	i, k := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || k < i {
		return fmt.Errorf("%s has no %q … %q section", file, beginMark, endMark)
	}
	s = s[:i+len(beginMark)] + "\n" + table + s[k:]
	return os.WriteFile(file, []byte(s), 0o644)
}
