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
//	go run ./benches/perfreport -peer /path/to/ring_allreduce_simpy.py  # against the SimPy peer
//	go run ./benches/perfreport -threads 4       # the parallel engine at K = 4 (default: 2 where there are 2 cores)
//
// Figures are wall clock on whatever machine runs this, and a shared
// machine's speed drifts from minute to minute: each job runs -runs times
// (the long ones -full-runs times) and the table shows the median wall
// time. With -baseline, an older build runs alternately with the measured
// one, run for run, so both see the same drift, and the table adds its
// median and the ratio of the two (-bin measures an existing binary
// instead of building ./cmd/kernbench).
//
// With -peer SCRIPT, the ring jobs whose rank count the SimPy model of
// the same ring is run at (64 and 256 ranks, 1024 with -full) also run
// that model (`-python SCRIPT --ranks N --chunks 8 --slots 32`, N·2(N−1)·8
// messages, as many as kernbench's) alternately with kernbench, run for
// run, and the table adds both processes' CPU time (user + system) per
// message and the ratio of the two, pair by pair: the measure the
// performance targets are stated in. The model is not shipped with
// kernbench; SimPy must be importable by -python (PYTHONPATH passes
// through), which is resolved to the interpreter's own executable first.
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
	// peerN is the rank count of the SimPy peer's matching job
	// (peerArgs), 0 for a job the peer has no counterpart of.
	peerN int
}

// ringArgs is ring_allreduce with 4 KiB messages and N × 32 KiB per rank
// (N·2(N−1)·8 messages), on as many SIPs as N ranks need.
func ringArgs(n int, extra ...string) []string {
	return append([]string{"ring_allreduce", "--world-size", fmt.Sprint(n),
		"--set", fmt.Sprintf("system.sips=%d", (n+31)/32), "--bytes", fmt.Sprintf("%dK", n*32)}, extra...)
}

var jobs = []job{
	{"ring, timing-only, N=64", ringArgs(64, "--timing-only"), false, 64},
	{"ring, timing-only, N=256", ringArgs(256, "--timing-only"), false, 256},
	{"ring, verified, N=64", ringArgs(64), false, 64},
	{"ring, --verify-data=false, N=64", ringArgs(64, "--verify-data=false"), false, 64},
	{"ring, verified, N=256 × 1 MiB per rank", []string{"ring_allreduce", "--world-size", "256", "--set", "system.sips=8", "--bytes", "1M"}, false, 0},
	{"ring, timing-only, N=1024", ringArgs(1024, "--timing-only"), true, 1024},
	{"tree_allreduce, timing-only, 16384 ranks × 4 KiB", []string{"tree_allreduce", "--world-size", "16384", "--set", "system.sips=512", "--bytes", "4K", "--timing-only"}, true, 0},
	// Set-up at scale: a rank's kernel start (Starlark thread and frames,
	// coroutine stack, machine objects) against a handful of messages.
	{"tree_allreduce, timing-only, 65536 ranks × 4 KiB", []string{"tree_allreduce", "--world-size", "65536", "--set", "system.sips=2048", "--bytes", "4K", "--timing-only"}, true, 0},
}

// result is what one job measured.
type result struct {
	job      job
	wall     time.Duration // median over the runs
	cpu      time.Duration // median user + system time over the runs
	runs     int
	rssBytes int64 // the largest peak over the runs
	sends    int64
	events   int64
	dataB    int64   // send + recv bytes of all ranks
	simNS    float64 // simulated time (its --json sim_time_ns)
	// base is the baseline binary's median wall time over as many runs,
	// alternating with the measured binary's (0 without -baseline).
	base time.Duration
	// peer is the SimPy peer's runs, alternating with kernbench's (nil
	// without -peer or for a job it has no counterpart of).
	peer *peerResult
}

// peerResult is what the peer's runs of a job measured.
type peerResult struct {
	out       peerOutput    // the first run's (all runs simulate the same)
	cpu, wall time.Duration // medians over the runs
	msgs      int64
	ratios    []float64 // peer ÷ kernbench CPU per message, pair by pair
}

type report struct {
	WorldSize int `json:"world_size"`
	Results   []struct {
		Bytes int64 `json:"bytes"`
		Ops   struct {
			Send int64 `json:"send"`
		} `json:"ops"`
		Events    int64   `json:"events"`
		SimTimeNS float64 `json:"sim_time_ns"`
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
	flag.StringVar(&peerScript, "peer", "", "the SimPy ring allreduce model to run alternately with kernbench's ring jobs (CPU per message and the ratio); SimPy must be importable")
	flag.IntVar(&threads, "threads", min(2, runtime.NumCPU()), "also measure the ring jobs of several SIPs at --threads K against --threads 1 (wall time, alternating); 1 or less: not")
	flag.StringVar(&python, "python", "python3", "the Python interpreter that runs -peer (resolved to its own executable, sys.executable, so that a launcher's start is not counted)")
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

// Repetitions, the baseline and the peer (flags).
var (
	runs, fullRuns     int
	baseline           string
	peerScript, python string
	// threads is K of the threads table (-threads; below 2: none).
	threads int
	// loadAtStart is the load average when the measurements began.
	loadAtStart string
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
	if peerScript != "" {
		exe, err := resolvePython(python)
		if err != nil {
			return err
		}
		python = exe
	}
	loadAtStart = loadAverage()
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
	var threadResults []threadResult
	for _, j := range threadJobs {
		if threads < 2 || j.full && !full {
			continue
		}
		fmt.Fprintf(os.Stderr, "perfreport: %s, --threads %d against 1 ...\n", j.name, threads)
		n := runs
		if j.full {
			n = fullRuns
		}
		tr, err := measureThreads(bin, j, threads, n)
		if err != nil {
			return fmt.Errorf("%s: %w", j.name, err)
		}
		threadResults = append(threadResults, tr)
	}
	table := render(results) + renderThreads(threadResults)
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
// With -peer, the peer's matching job runs after each of kernbench's runs
// and must send as many messages.
func measureRuns(bin string, j job) (result, error) {
	n := runs
	if j.full {
		n = fullRuns
	}
	var walls, cpus, baseWalls []time.Duration
	var peerCPUs, peerWalls []time.Duration
	var pr *peerResult
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
		cpus = append(cpus, got.cpu)
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
		if peerScript != "" && j.peerN > 0 {
			p, err := runPeer(python, peerScript, j.peerN)
			if err != nil {
				return result{}, err
			}
			if pr == nil {
				pr = &peerResult{out: p.out, msgs: peerMessages(j.peerN, peerChunks)}
				if pr.msgs != r.sends {
					return result{}, fmt.Errorf("the peer sends %d messages at N=%d, kernbench %d: not the same job", pr.msgs, j.peerN, r.sends)
				}
			}
			if p.out != pr.out {
				return result{}, fmt.Errorf("peer run %d printed %+v, run 1 %+v", i+1, p.out, pr.out)
			}
			peerCPUs = append(peerCPUs, p.cpu)
			peerWalls = append(peerWalls, p.wall)
		}
	}
	r.runs = n
	r.wall = median(walls)
	r.cpu = median(cpus)
	if pr != nil {
		pr.cpu, pr.wall = median(peerCPUs), median(peerWalls)
		pr.ratios = pairRatios(seconds(peerCPUs), seconds(cpus), pr.msgs, r.sends)
		r.peer = pr
	}
	if len(baseWalls) > 0 {
		r.base = median(baseWalls)
	}
	return r, nil
}

// seconds is ds in seconds.
func seconds(ds []time.Duration) []float64 {
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = d.Seconds()
	}
	return s
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
func measure(bin string, j job) (result, error) { return measureOn(bin, j, 1) }

// measureCmd runs cmd, kernbench run of j with --json, and reads what it
// measured.
func measureCmd(cmd *exec.Cmd, j job) (result, error) {
	c, err := runChild(cmd)
	if err != nil {
		return result{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(c.errOut.String()))
	}
	var rep report
	if err := json.Unmarshal(c.out.Bytes(), &rep); err != nil || len(rep.Results) != 1 {
		return result{}, fmt.Errorf("reading its --json report: %v", err)
	}
	r := result{job: j, wall: c.wall, cpu: c.cpu, sends: rep.Results[0].Ops.Send, events: rep.Results[0].Events, simNS: rep.Results[0].SimTimeNS}
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
		if loadAtStart != "" {
			load = ", load average " + loadAtStart + " when the runs began and " + l + " when the table was written"
		}
	}
	how := "`go run ./benches/perfreport`"
	if peerScript != "" {
		how = "`go run ./benches/perfreport -peer " + filepath.Base(peerScript) + "`"
	}
	fmt.Fprintf(&b, "Measured by %s on %s/%s, %d CPUs, %s, one core per job (GOMAXPROCS=1); %s%s. Wall time is the median of the runs shown; peak RSS the largest.\n\n",
		how, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format("2006-01-02"), load)
	withBase, withPeer := baseline != "", peerScript != ""
	b.WriteString("| job | messages | events | runs | wall | µs per message | peak RSS | RSS per data byte |")
	if withBase {
		b.WriteString(" baseline wall | baseline / this |")
	}
	if withPeer {
		b.WriteString(" CPU µs per message | peer CPU µs per message | peer ÷ kernbench, CPU per message |")
	}
	b.WriteString("\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	if withBase {
		b.WriteString(" ---: | ---: |")
	}
	if withPeer {
		b.WriteString(" ---: | ---: | ---: |")
	}
	b.WriteString("\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.2f s | %.1f | %.0f MB | %.2f |",
			r.job.name, r.sends, r.events, r.runs, r.wall.Seconds(), usPerMessage(r.wall.Seconds(), r.sends),
			float64(r.rssBytes)/1e6, float64(r.rssBytes)/float64(max(r.dataB, 1)))
		if withBase {
			fmt.Fprintf(&b, " %.2f s | %.2f |", r.base.Seconds(), r.base.Seconds()/max(r.wall.Seconds(), 1e-9))
		}
		if withPeer {
			fmt.Fprintf(&b, " %.2f |", usPerMessage(r.cpu.Seconds(), r.sends))
			if p := r.peer; p != nil {
				fmt.Fprintf(&b, " %.2f | %s |", usPerMessage(p.cpu.Seconds(), p.msgs), ratioCell(p.ratios))
			} else {
				b.WriteString(" – | – |")
			}
		}
		b.WriteString("\n")
	}
	if withPeer {
		writePeerNotes(&b, results)
	}
	b.WriteString("\nCommands (each as `GOMAXPROCS=1 kernbench run … --json`):\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- %s: `kernbench run %s`\n", r.job.name, strings.Join(r.job.args, " "))
	}
	return b.String()
}

// ratioCell is the median of the pair ratios, with their range when
// there are several.
func ratioCell(ratios []float64) string {
	if len(ratios) == 1 {
		return fmt.Sprintf("%.2f", ratios[0])
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", medianFloat(ratios), slices.Min(ratios), slices.Max(ratios))
}

// writePeerNotes says what the peer columns are: the peer's command and
// versions, how the ratio is formed, and both models' simulated time.
func writePeerNotes(b *strings.Builder, results []result) {
	var versions []string
	var sims []string
	for _, r := range results {
		p := r.peer
		if p == nil {
			continue
		}
		v := "SimPy " + p.out.SimPy + ", Python " + p.out.Python
		if !slices.Contains(versions, v) {
			versions = append(versions, v)
		}
		sim := fmt.Sprintf("N=%d: kernbench %.1f µs (4 KiB messages), the peer %.1f µs (%d-byte chunks)", p.out.N, r.simNS/1e3, p.out.TSimUS, p.out.ChunkBytes)
		if !slices.Contains(sims, sim) {
			sims = append(sims, sim)
		}
	}
	if len(versions) == 0 {
		return
	}
	fmt.Fprintf(b, "\nPeer: `%s %s --ranks N --chunks %d --slots %d` on %s, a SimPy model of the same pipelined ring (not shipped with kernbench), run alternately with kernbench, run for run (the interpreter started directly, not through a launcher such as pyenv's shim); its message count is N·2(N−1)·%d, kernbench's the send count of its `--json`. CPU is the whole process's user + system time (the median of the runs); the ratio is the median of the pairs' ratios of CPU per message, their range in brackets (above 1: kernbench is faster). The peer checked every chunk (its `bad` column 0).\n",
		filepath.Base(python), filepath.Base(peerScript), peerChunks, peerSlots, strings.Join(versions, "; "), peerChunks)
	fmt.Fprintf(b, "\nSimulated time of the same jobs (the models differ: the peer's links and chunks are its own): %s.\n", strings.Join(sims, "; "))
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
