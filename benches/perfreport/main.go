// Command perfreport measures kernbench's speed and memory on the jobs the
// performance targets are stated for, and writes the tables of
// docs/performance.md. Each job is a separate `kernbench run` process on
// one core (GOMAXPROCS=1); its wall time and peak RSS come from the
// operating system, its simulated message count from the run's --json
// report.
//
//	go run ./benches/perfreport                  # print the tables
//	go run ./benches/perfreport -write docs/performance.md
//	go run ./benches/perfreport -full            # also N=1024 and 16384 ranks (minutes)
//
// Figures are wall clock on whatever machine runs this: run it on an idle
// machine (-bin measures an existing binary, e.g. an older build, so two
// builds can be compared back to back).
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
}

// result is what one job measured.
type result struct {
	job      job
	wall     time.Duration
	rssBytes int64
	sends    int64
	events   int64
	dataB    int64 // send + recv bytes of all ranks
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
	full := flag.Bool("full", false, "also run the long jobs (N=1024, 16384 ranks)")
	flag.Parse()
	if err := run(*bin, *write, *full); err != nil {
		fmt.Fprintln(os.Stderr, "perfreport:", err)
		os.Exit(1)
	}
}

func run(bin, write string, full bool) error {
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
		r, err := measure(bin, j)
		if err != nil {
			return fmt.Errorf("%s: %w", j.name, err)
		}
		results = append(results, r)
	}
	table := render(results)
	if write == "" {
		fmt.Print(table)
		return nil
	}
	return splice(write, table)
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
	fmt.Fprintf(&b, "Measured by `go run ./benches/perfreport` on %s/%s, %d CPUs, %s, one core per job (GOMAXPROCS=1); %s.\n\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format("2006-01-02"))
	b.WriteString("| job | messages | events | wall | µs per message | peak RSS | RSS per data byte |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f s | %.1f | %.0f MB | %.2f |\n",
			r.job.name, r.sends, r.events, r.wall.Seconds(), r.wall.Seconds()*1e6/float64(max(r.sends, 1)),
			float64(r.rssBytes)/1e6, float64(r.rssBytes)/float64(max(r.dataB, 1)))
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
