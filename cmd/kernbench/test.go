package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"kernbench"
	"kernbench/engine/config"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/script"
	"kernbench/starlark/testrun"
)

func newTestCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	var run string
	var verbose, asJSON, builtin bool
	var maxSteps uint64
	var maxMemory string
	var timeout time.Duration
	var loadPath []string
	cmd := &cobra.Command{
		Use:   "test [PATH...]",
		Short: "Run *_test.star files (test_* functions) in the mock runtime",
		Long: `Find *_test.star files under the given files or folders (default: the
working directory), run every top-level test_* function with assert
predeclared and @kernbench//testing.star (run_kernel_in_mock) loadable, and
print go-test-like results ending in "N passed, N failed".

Each test file has -timeout (default 10m, like go test) of wall-clock time;
at the limit its running test and the rest of the file stop. A test that
runs longer than 10s is reported on stderr every 10s.

Host memory is bounded as in kernbench run (--max-memory, default 80% of
the machine's memory, cgroup limit included): a mock run or run_l3 estimated over it fails its
test; one that passes it while simulating stops with "out of memory at
t=…" and exit status 3.

--builtin runs the tests shipped inside the binary instead of files on
disk: the tests of the shipped algorithms (algorithms/*_test.star) and of
the L3/L2 builtins (benches/l3l2_test.star), exactly as shipped, from any
folder. It reads nothing on disk: a ./ccl.yaml or ./algorithms folder of
the working directory is not used. PATH arguments then name shipped files
or folders (kernbench test --builtin algorithms/ring_allreduce_test.star).

Exit status: 0 all passed, 1 a test failed, 2 a test file did not load,
3 a test file passed its -timeout (as it loaded too) or a test's
simulation passed --max-memory.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return usageErr(stderr, asJSON, fmt.Sprintf("-timeout must be >= 0 (got %v)", timeout))
			}
			if maxSteps == 0 {
				maxSteps = defaultMaxSteps
			}
			if builtin && len(loadPath) > 0 {
				return usageErr(stderr, asJSON, "--load-path cannot be used with --builtin: the shipped tests load only shipped files")
			}
			if err := checkLoadPath(env, loadPath); err != nil {
				return usageErr(stderr, asJSON, err.Error())
			}
			if err := emptyValue(cmd.Flags(), "run"); err != nil {
				return usageErr(stderr, asJSON, err.Error())
			}
			limit := hostmem.DefaultMaxMemory()
			if maxMemory != "" {
				n, err := config.ParseSize(maxMemory)
				if err != nil || n <= 0 {
					if err == nil {
						err = fmt.Errorf("must be > 0 (got %s)", maxMemory)
					}
					return usageErr(stderr, asJSON, "--max-memory: "+err.Error())
				}
				limit = n
			}
			// print() of the tests and the progress reporter share stderr.
			stderr := &lockedWriter{w: stderr}
			prog := newTestProgress(stderr, progressEvery)
			defer prog.stop()
			o := testrun.Options{Verbose: verbose, Env: env, Embedded: kernbench.Files, Stderr: stderr, MaxSteps: maxSteps,
				Timeout: timeout, MaxMemory: limit, OnTest: prog.start, LoadPath: loadPath}
			if run != "" {
				re, err := regexp.Compile(run)
				if err != nil {
					return usageErr(stderr, asJSON, fmt.Sprintf("-run: %v", err))
				}
				o.Run = re
			}
			var files []string
			var err error
			if builtin {
				// The shipped tests see the shipped files only, whatever
				// the working directory holds.
				o.Env.NoDisk = true
				files, err = testrun.DiscoverEmbedded(kernbench.Files, args)
			} else {
				files, err = testrun.Discover(env, args)
				if err != nil && len(args) > 0 && strings.HasSuffix(err.Error(), ": no such file or folder") {
					// kernbench test algorithms outside the repository.
					if _, e2 := testrun.DiscoverEmbedded(kernbench.Files, args); e2 == nil {
						err = fmt.Errorf("%v (the tests shipped with kernbench run from any folder with: kernbench test --builtin %s)", err, strings.Join(args, " "))
					}
				}
			}
			if err != nil {
				return usageErr(stderr, asJSON, err.Error())
			}
			if len(files) == 0 {
				// Like go test's "no test files": a run from the wrong folder
				// should not look like a clean pass.
				where := "the working directory"
				if builtin {
					where = "the files shipped with kernbench"
				}
				if len(args) > 0 {
					where = strings.Join(args, ", ")
				}
				fmt.Fprintf(stderr, "kernbench: no *_test.star files in %s\n", where)
			}
			// With --json, stdout holds the JSON document alone (a program
			// reads it); the go-test-like lines go to stderr.
			text := stdout
			if asJSON {
				text = stderr
			}
			type loadFailure struct {
				File  string `json:"file"`
				Error string `json:"error"`
			}
			var all []testrun.Result
			loadFailures := []loadFailure{}
			passed, failed, broken, timedOut, outOfMemory := 0, 0, 0, 0, 0
			loadTimedOut := 0 // files of broken stopped by -timeout as they loaded
			for _, f := range files {
				start := time.Now()
				prog.start(f, "loading")
				results, err := testrun.RunFile(f, o)
				prog.start("", "")
				if err != nil {
					broken++
					if errkind.Of(err) == errkind.Timeout {
						loadTimedOut++
					}
					fmt.Fprintf(text, "FAIL %s [load error]\n%s\n", f, indent(err.Error()))
					loadFailures = append(loadFailures, loadFailure{File: f, Error: err.Error()})
					continue
				}
				fileFailed := 0
				for _, r := range results {
					if r.Pass {
						passed++
						if verbose {
							fmt.Fprintf(text, "--- PASS: %s (%.2fs)\n", r.Name, r.Seconds)
						}
						continue
					}
					failed++
					fileFailed++
					if r.TimedOut {
						timedOut++
					}
					if r.OutOfMemory {
						outOfMemory++
					}
					fmt.Fprintf(text, "--- FAIL: %s (%.2fs)\n", r.Name, r.Seconds)
					for _, m := range r.Messages {
						fmt.Fprintln(text, indent(m))
					}
				}
				if len(results) == 0 && o.Run == nil {
					hint := ""
					if !strings.HasSuffix(f, "_test.star") {
						hint = " (an algorithm? run it with kernbench run, and test it from a NAME_test.star file)"
					}
					fmt.Fprintf(stderr, "kernbench: %s defines no test_* functions%s\n", f, hint)
				}
				status := "ok  "
				if fileFailed > 0 {
					status = "FAIL"
				}
				fmt.Fprintf(text, "%s %s\t%d test(s)\t%.3fs\n", status, f, len(results), time.Since(start).Seconds())
				all = append(all, results...)
			}
			fmt.Fprintf(text, "%d passed, %d failed\n", passed, failed)
			if asJSON {
				if all == nil {
					all = []testrun.Result{}
				}
				writeJSON(stdout, map[string]any{"results": all, "passed": passed, "failed": failed, "load_errors": broken, "load_failures": loadFailures})
			}
			switch {
			case broken > loadTimedOut:
				return reported(errkind.Load, fmt.Sprintf("%d test file(s) did not load", broken))
			case loadTimedOut > 0:
				return reported(errkind.TestTimeout, fmt.Sprintf("%d test file(s) passed -timeout as they loaded", loadTimedOut))
			case timedOut > 0:
				return reported(errkind.TestTimeout, fmt.Sprintf("%d test(s) passed -timeout", timedOut))
			case outOfMemory > 0:
				return reported(errkind.HostMemory, fmt.Sprintf("%d test(s) passed --max-memory", outOfMemory))
			case failed > 0:
				return reported(errkind.TestFailed, fmt.Sprintf("%d test(s) failed", failed))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "run only tests whose name matches this regular expression")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list passing tests too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as one JSON document on stdout (the go-test-like lines go to stderr)")
	cmd.Flags().BoolVar(&builtin, "builtin", false, "run the tests shipped inside kernbench (the algorithms' and the L3/L2 builtins'), from any folder, reading nothing on disk")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "wall-clock limit of each test file (0 = none); also -timeout")
	addLoadPath(cmd.Flags(), &loadPath)
	cmd.Flags().StringVar(&maxMemory, "max-memory", "", "host memory each simulation of a test may use, e.g. 4G (default: 80% of the machine's memory, cgroup limit included, at most half the address space a ulimit -v leaves)")
	cmd.Flags().Uint64Var(&maxSteps, "max-steps", 0, "Starlark step limit per thread, tests and the kernels they run (0 = default 10^8)")
	return cmd
}

func indent(s string) string {
	out := "    "
	for _, c := range s {
		out += string(c)
		if c == '\n' {
			out += "    "
		}
	}
	return out
}

// progressEvery is how long a test runs before it is reported on stderr,
// and how often after that; progressTick is how often the reporter looks.
const (
	progressEvery = 10 * time.Second
	progressTick  = time.Second
)

// lockedWriter serialises writes from the tests and the progress reporter.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// testProgress says on stderr which test is running when one takes long:
// a test that runs for minutes must not look like a hang, and fast runs
// stay silent (and deterministic).
type testProgress struct {
	mu        sync.Mutex
	w         io.Writer
	now       func() time.Time
	every     time.Duration
	current   string
	since     time.Time
	reported  int // reports of the current test so far
	stopTicks func()
	done      chan struct{}
	exited    chan struct{}
}

// newTestProgress reports a test that has run for every, and again each
// every after that, in wall time.
func newTestProgress(w io.Writer, every time.Duration) *testProgress {
	t := time.NewTicker(progressTick)
	p := startTestProgress(w, t.C, time.Now, every)
	p.stopTicks = t.Stop
	return p
}

// startTestProgress looks at the running test at each tick, taking its
// time from the tick and its start from now (the tests give both, the
// clock's ticks and now). A test is reported once each whole period of
// every it has run: a test that has run for less is never "still
// running", however the ticks fall.
func startTestProgress(w io.Writer, ticks <-chan time.Time, now func() time.Time, every time.Duration) *testProgress {
	p := &testProgress{w: w, now: now, every: every, stopTicks: func() {}, done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		for {
			select {
			case <-p.done:
				return
			case t := <-ticks:
				p.mu.Lock()
				ran := t.Sub(p.since)
				if n := int(ran / p.every); p.current != "" && n > p.reported {
					p.reported = n
					fmt.Fprintf(p.w, "kernbench test: %s still running (%s)\n", p.current, ran.Truncate(time.Second))
				}
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// start is testrun's OnTest: name is now running ("" file: nothing is).
func (p *testProgress) start(file, name string) {
	p.mu.Lock()
	p.current, p.since, p.reported = "", p.now(), 0
	if file != "" {
		p.current = file + ": " + name
	}
	p.mu.Unlock()
}

// stop ends the reports; none is written once it returns.
func (p *testProgress) stop() {
	p.stopTicks()
	close(p.done)
	<-p.exited
}
