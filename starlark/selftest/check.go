package selftest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
	"kernbench/starlark/mock"
	"kernbench/starlark/report"
)

// Problem is an invariant a case broke.
type Problem struct {
	Invariant string // "phase2", "hazard-named", "wrong", "mock", "timing-only", "determinism", "error"
	Msg       string
}

func (p Problem) String() string { return p.Invariant + ": " + p.Msg }

// Outcome is what the checks of one case found.
type Outcome struct {
	Case     *Case
	Problems []Problem
	// Hazard is the hazard the timed run reported, if any (not a
	// problem by itself: the kernel and its line are named).
	Hazard string
	// MockErr is the mock's error: the generator made a kernel the mock
	// rejects (a hazard in some schedule, a deadlock): a generator bug
	// or a mock bug, reported as a problem of its own.
	MockErr string
	// Exit is the full run's exit status.
	Exit int
}

// hazardKinds are the error kinds that report a race of the kernel.
var hazardKinds = map[string]bool{
	"SendBufferHazard": true, "StaleSlot": true, "LocalOperandHazard": true,
	"PendingStoreHazard": true, "WriteWriteHazard": true,
}

// CheckOptions tune Check.
type CheckOptions struct {
	// Schedules is how many interleavings the mock explores (0: 3).
	Schedules int
	// SkipProcs leaves out the GOMAXPROCS 1 vs 2 comparison.
	SkipProcs bool
}

// run is one Run's outcome, in the form the comparisons need.
type run struct {
	rep    *report.Report
	fail   *report.Failure
	err    error
	stderr string
	oplog  string // with runLogged
}

// status is the exit status kernbench would give the run.
func (r run) status() int {
	if r.fail != nil {
		return r.fail.ErrorKind().Status
	}
	if r.err != nil {
		return 4
	}
	for _, res := range r.rep.Results {
		if res.Phase2Match != nil && !*res.Phase2Match {
			return report.ExitWrong
		}
		if res.Wrong > 0 {
			return report.ExitWrong
		}
	}
	return report.ExitOK
}

// text is everything the run reports, as bytes (wall time left out).
func (r run) text() string {
	var b strings.Builder
	if r.rep != nil {
		rep := *r.rep
		rep.WallS = 0
		j, err := json.MarshalIndent(&rep, "", " ")
		if err != nil {
			fmt.Fprintf(&b, "marshal: %v\n", err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	if r.fail != nil {
		fmt.Fprintf(&b, "failure %s (%d) rank %d: %s\n%s\n%s\n%s\n", r.fail.ErrorKind().Name, r.fail.ErrorKind().Status, r.fail.Rank, r.fail.Msg, r.fail.Detail,
			strings.Join(r.fail.Backtrace, "\n"), strings.Join(r.fail.SpawnedAt, "\n"))
	} else if r.err != nil {
		fmt.Fprintf(&b, "error %T: %v\n", r.err, r.err)
	}
	b.WriteString(r.stderr)
	return b.String()
}

// Check runs the case in dir (it writes kernel.star there) and checks the
// invariants.
func Check(c *Case, dir string, o CheckOptions) *Outcome {
	out := &Outcome{Case: c}
	file := filepath.Join(dir, FileName)
	if err := os.WriteFile(file, []byte(c.Source), 0o644); err != nil {
		out.Problems = append(out.Problems, Problem{"error", err.Error()})
		return out
	}
	if o.Schedules == 0 {
		o.Schedules = 3
	}
	problem := func(inv, format string, a ...any) {
		out.Problems = append(out.Problems, Problem{inv, fmt.Sprintf(format, a...)})
	}

	// The mock, over several interleavings: the kernel is valid.
	var stderr bytes.Buffer
	mr, merr := mock.RunKernel(mock.Options{
		Path: file, WorldSize: c.WorldSize, Count: c.Count, DType: c.DType, RedOp: c.RedOp, InPlace: c.InPlace, Root: c.Root,
		Schedules: o.Schedules, Seed: c.Seed, Sets: c.Sets, Embedded: kernbench.Files, Stderr: &stderr,
		MaxSteps: maxSteps,
	})
	var mf *report.Failure
	expected := errors.As(merr, &mf) && c.ZeroDiv && mf.ErrorKind().Name == "ZeroDivision" // the kernel divides by zero
	switch {
	case expected:
	case merr != nil:
		out.MockErr = merr.Error()
		problem("mock", "the mock rejects the generated kernel: %s", firstLines(merr.Error(), 12))
	case mr.Wrong > 0:
		problem("mock", "the mock computes a wrong result: %d wrong, schedule %d, first %+v", mr.Wrong, mr.FailingSchedule, *mr.FirstWrong)
	}
	mockOK := merr == nil && mr.Wrong == 0

	full := c.run(file, false)
	if f := full.fail; f != nil && f.ErrorKind().Name == "WaitTimeout" && !slices.ContainsFunc(c.Sets, isTimeoutSet) {
		// Slow, not stuck (the report says so): a valid kernel on a slow
		// machine (one-slot rings of 64 bytes) may wait longer than the
		// default deadlock_timeout_ns. The case is checked again with a
		// timeout that lets it end.
		slow := *c
		slow.Sets = append(slices.Clone(c.Sets), slowTimeoutSet)
		return Check(&slow, dir, o)
	}
	out.Exit = full.status()
	if full.err != nil && full.fail == nil {
		problem("error", "Run returned %T, not a *Failure: %v", full.err, full.err)
	}
	// 1. Phase 1 and phase 2 agree.
	if full.rep != nil {
		for _, res := range full.rep.Results {
			if res.Phase2Match == nil || !*res.Phase2Match {
				problem("phase2", "phase 2 disagrees with phase 1: %s", firstLines(res.Phase2, 6))
			}
		}
	}
	// 2. A hazard names the kernel and its line; no hazard: right result.
	if f := full.fail; f != nil {
		if hazardKinds[f.ErrorKind().Name] {
			out.Hazard = f.ErrorKind().Name
			if !namesKernelLine(f) {
				problem("hazard-named", "%s does not name %s and a line: %s\nbacktrace: %q", f.ErrorKind().Name, FileName, f.Msg, f.Backtrace)
			}
			if mockOK {
				// Not an invariant of the brief, but a kernel valid in
				// every schedule of the mock should be valid timed too:
				// worth a look.
				problem("hazard-valid", "the timed run reports %s on a kernel the mock passes: %s", f.ErrorKind().Name, firstLines(f.Msg, 4))
			}
		} else if !(c.ZeroDiv && f.ErrorKind().Name == "ZeroDivision") {
			problem("error", "the run failed (%s, exit %d): %s", f.ErrorKind().Name, f.ErrorKind().Status, firstLines(f.Msg+"\n"+f.Detail, 16))
		}
	} else if full.rep != nil {
		for _, res := range full.rep.Results {
			if res.Wrong > 0 {
				inv := "wrong"
				if mockOK {
					inv = "wrong-mock-passes" // invariant 3 as well
				}
				problem(inv, "%d wrong element(s) without a hazard; first %+v, ranges %+v", res.Wrong, res.FirstWrong, res.WrongRanges)
			}
		}
	}
	// 4. --timing-only simulates the same.
	timing := c.run(file, true)
	if timing.fail != nil && timing.fail.ErrorKind() == errkind.TimingOnly {
		// A kernel whose run depends on values (it reads them, or divides
		// an integer tile by a tile) is refused by --timing-only, with its
		// line: nothing to compare.
	} else if a, b := full.status(), timing.status(); a != b && !(a == report.ExitWrong && b == report.ExitOK) {
		problem("timing-only", "exit status %d (%s), timing-only %d (%s)", a, failText(full), b, failText(timing))
	} else if full.fail == nil && timing.fail == nil && full.rep != nil && timing.rep != nil {
		type row struct {
			SimTimeNs float64
			Events    uint64
			Ops       report.OpCounts
		}
		var fr, tr []row
		for _, r := range full.rep.Results {
			fr = append(fr, row{r.SimTimeNs, r.Events, r.Ops})
		}
		for _, r := range timing.rep.Results {
			tr = append(tr, row{r.SimTimeNs, r.Events, r.Ops})
		}
		if d := cmp.Diff(fr, tr); d != "" {
			problem("timing-only", "timing-only differs from the full run (-full +timing):\n%s", d)
		}
	} else if full.fail != nil && timing.fail != nil && full.fail.ErrorKind().Name != timing.fail.ErrorKind().Name {
		problem("timing-only", "full run fails with %s, timing-only with %s", full.fail.ErrorKind().Name, timing.fail.ErrorKind().Name)
	}
	// 5. Byte-identical output: again, and under GOMAXPROCS 1 and 2.
	if !o.SkipProcs {
		// These two also write the op_log (--oplog), which must be the
		// same too; the second re-checks the queue pairs' pointer
		// invariants after every delivery and credit (--check), which
		// changes nothing else.
		prev := runtime.GOMAXPROCS(1)
		one := c.runLogged(file, false)
		runtime.GOMAXPROCS(2)
		two := c.runLogged(file, true)
		runtime.GOMAXPROCS(prev)
		if d := cmp.Diff(one.oplog, two.oplog); d != "" {
			problem("determinism", "the op_logs of GOMAXPROCS 1 and 2 differ (-1 +2):\n%s", firstLines(d, 30))
		}
		if d := cmp.Diff(full.text(), one.text()); d != "" {
			problem("determinism", "two runs differ (-first +GOMAXPROCS=1):\n%s", firstLines(d, 30))
		}
		if d := cmp.Diff(one.text(), two.text()); d != "" {
			problem("determinism", "GOMAXPROCS 1 and 2 differ (-1 +2):\n%s", firstLines(d, 30))
		}
	} else if again := c.run(file, false); full.text() != again.text() {
		problem("determinism", "two runs differ:\n%s", firstLines(cmp.Diff(full.text(), again.text()), 30))
	}
	return out
}

// maxSteps bounds each thread's Starlark steps (the kernbench default).
const maxSteps = 100_000_000

// Run runs the case's kernel in file as `kernbench run` with c.Args()
// does.
func (c *Case) Run(file string, timingOnly bool) (*report.Report, error) {
	r := c.run(file, timingOnly)
	return r.rep, r.err
}

// run runs the case as `kernbench run` would.
func (c *Case) run(file string, timingOnly bool) run { return c.runWith(file, timingOnly, nil, false) }

// runLogged is run with --oplog (r.oplog is the op_log's text), and with
// --check when check is set.
func (c *Case) runLogged(file string, check bool) run {
	var log bytes.Buffer
	r := c.runWith(file, false, &log, check)
	r.oplog = log.String()
	return r
}

func (c *Case) runWith(file string, timingOnly bool, oplog *bytes.Buffer, check bool) run {
	var stderr bytes.Buffer
	o := ccl.Options{
		Sets: c.Sets, WorldSize: c.WorldSize, Counts: []int64{c.Count}, DType: c.DType, RedOp: c.RedOp,
		InPlace: c.InPlace, Root: c.Root, Seed: c.InputSeed, DataSpace: c.DataSpace, JitterSeed: c.JitterSeed,
		Verify: true, TimingOnly: timingOnly, MaxSteps: maxSteps, Jobs: 1, Check: check,
		Embedded: kernbench.Files, Stderr: &stderr,
	}
	if oplog != nil {
		o.OpLog = oplog
	}
	rep, err := ccl.Run(file, o)
	r := run{rep: rep, err: err, stderr: stderr.String()}
	var f *report.Failure
	if errors.As(err, &f) {
		r.fail = f
	}
	return r
}

var kernelLine = regexp.MustCompile(regexp.QuoteMeta(FileName) + `:[0-9]+:[0-9]+`)

// namesKernelLine: the failure's message or backtrace points into the
// kernel.
func namesKernelLine(f *report.Failure) bool {
	for _, l := range f.Backtrace {
		if kernelLine.MatchString(l) {
			return true
		}
	}
	return kernelLine.MatchString(f.Msg)
}

func failText(r run) string {
	if r.fail != nil {
		return r.fail.ErrorKind().Name + ": " + firstLines(r.fail.Msg, 3)
	}
	if r.err != nil {
		return r.err.Error()
	}
	return "ok"
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more lines)", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}

// slowTimeoutSet is the deadlock timeout of a case whose run waited longer
// than the default for work still going on (1 s of simulated time).
const slowTimeoutSet = "defaults.deadlock_timeout_ns=1000000000"

func isTimeoutSet(s string) bool { return strings.HasPrefix(s, "defaults.deadlock_timeout_ns=") }
