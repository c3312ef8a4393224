// Package testreport runs `kernbench test`'s files and reports them, its
// one job: go-test-like lines as each test and file finishes, the tally
// of passes, failures and files that did not load, and a line on stderr
// while a test runs long.
package testreport

import (
	"fmt"
	"io"
	"kernbench/starlark/errkind"
	"kernbench/starlark/testrun"
	"strings"
	"sync"
	"time"
)

// LoadFailure is a test file that did not load, in test --json.
type LoadFailure struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// Tally is what the test files of a run came to.
type Tally struct {
	All          []testrun.Result
	LoadFailures []LoadFailure
	Passed       int
	Failed       int
	Broken       int // files that did not load
	LoadTimedOut int // files of broken stopped by -timeout as they loaded
	TimedOut     int
	OutOfMemory  int
}

// Run runs files, printing each test's outcome and each file's
// line on text (warnings on stderr).
func Run(files []string, ro testrun.Options, prog *Progress, text, stderr io.Writer) *Tally {
	t := &Tally{LoadFailures: []LoadFailure{}}
	for _, f := range files {
		start := time.Now()
		prog.Start(f, "loading")
		results, err := testrun.RunFile(f, ro)
		prog.Start("", "")
		if err != nil {
			t.Broken++
			if errkind.Of(err) == errkind.Timeout {
				t.LoadTimedOut++
			}
			fmt.Fprintf(text, "FAIL %s [load error]\n%s\n", f, indent(err.Error()))
			t.LoadFailures = append(t.LoadFailures, LoadFailure{File: f, Error: err.Error()})
			continue
		}
		fileFailed := 0
		for _, r := range results {
			if r.Pass {
				t.Passed++
				if ro.Verbose {
					fmt.Fprintf(text, "--- PASS: %s (%.2fs)\n", r.Name, r.Seconds)
				}
				continue
			}
			t.Failed++
			fileFailed++
			if r.TimedOut {
				t.TimedOut++
			}
			if r.OutOfMemory {
				t.OutOfMemory++
			}
			fmt.Fprintf(text, "--- FAIL: %s (%.2fs)\n", r.Name, r.Seconds)
			for _, m := range r.Messages {
				fmt.Fprintln(text, indent(m))
			}
		}
		if len(results) == 0 && ro.Run == nil {
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
		t.All = append(t.All, results...)
	}
	return t
}

// indent indents every line of s by four spaces.
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

// ProgressEvery is how long a test runs before it is reported on stderr,
// and how often after that; progressTick is how often the reporter looks.
const (
	ProgressEvery = 10 * time.Second
	progressTick  = time.Second
)

// LockedWriter serialises writes from the tests and the progress reporter.
type LockedWriter struct {
	mu sync.Mutex
	W  io.Writer
}

func (l *LockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.W.Write(b)
}

// Progress says on stderr which test is running when one takes long:
// a test that runs for minutes must not look like a hang, and fast runs
// stay silent (and deterministic).
type Progress struct {
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

// NewProgress reports a test that has run for every, and again each
// every after that, in wall time.
func NewProgress(w io.Writer, every time.Duration) *Progress {
	t := time.NewTicker(progressTick)
	p := StartProgress(w, t.C, time.Now, every)
	p.stopTicks = t.Stop
	return p
}

// StartProgress looks at the running test at each tick, taking its
// time from the tick and its start from now (the tests give both, the
// clock's ticks and now). A test is reported once each whole period of
// every it has run: a test that has run for less is never "still
// running", however the ticks fall.
func StartProgress(w io.Writer, ticks <-chan time.Time, now func() time.Time, every time.Duration) *Progress {
	p := &Progress{w: w, now: now, every: every, stopTicks: func() {}, done: make(chan struct{}), exited: make(chan struct{})}
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

// Start is testrun's OnTest: name is now running ("" file: nothing is).
func (p *Progress) Start(file, name string) {
	p.mu.Lock()
	p.current, p.since, p.reported = "", p.now(), 0
	if file != "" {
		p.current = file + ": " + name
	}
	p.mu.Unlock()
}

// Stop ends the reports; none is written once it returns.
func (p *Progress) Stop() {
	p.stopTicks()
	close(p.done)
	<-p.exited
}
