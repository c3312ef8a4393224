// Package mock runs an algorithm in the mock runtime, the one job of
// run_kernel_in_mock (kernbench test): the same kernels and tl API through
// ccl's run path on a machine where nothing takes time, over several
// schedules of same-time events, reporting wrong elements and the first
// schedule that found them.
package mock

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/dtype"
	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// Options configure RunKernel.
type Options struct {
	Path      string // the algorithm file, relative to Dir, then algorithms/
	Dir       string // folder of the calling test file ("" = working directory)
	WorldSize int
	// WorldSizeGiven: the test gave world_size; an MSCCL schedule, whose
	// ngpus fixes it, runs at its ngpus when it did not.
	WorldSizeGiven bool
	Count          int64
	DType          string
	Collective     string
	Topology       string
	RedOp          string
	InPlace        bool
	Root           int
	RootGiven      bool // root = … given, also as 0: it wins over params.root; a collective without a root refuses it
	RedOpGiven     bool // redop = … given: a collective without a reduction refuses it
	Params         []starlark.Tuple
	Schedules      int    // interleavings to explore (>= 1)
	Seed           uint64 // picks the interleavings
	Sets           []string
	Env            script.Env // the working directory and environment variables
	Embedded       fs.FS
	Stderr         io.Writer
	MaxSteps       uint64           // Starlark step limit per rank (0: 10^8)
	Watchdog       *script.Watchdog // wall-clock limit of the calling test (nil: none)
	MaxMemory      int64            // host memory bound (kernbench test --max-memory; 0: none)
	// LoadPath are the folders load() may read besides the algorithm's
	// own (kernbench test --load-path).
	LoadPath []string
	// CheckPlace, when set, refuses an algorithm file the calling test
	// may not read (script.Loader.CheckPlace of the test's loader).
	CheckPlace func(path string) error
	// TimingOnly moves no bytes (run_kernel_in_mock(timing_only=True)):
	// control flow, deadlocks and message counts of large world sizes
	// without their memory; nothing is verified.
	TimingOnly bool
}

// Result is what a mock run reports.
type Result struct {
	Wrong           int64 // wrong elements, summed over schedules
	FailingSchedule int   // first schedule with a wrong element, -1 if none
	Sends, Recvs    int64 // of one schedule (the same in every schedule)
	Outputs         [][]byte
	DType           dtype.DType
	Schedules       int
	// FirstWrong and WrongRanges describe the wrong elements of the first
	// failing schedule (nil when nothing is wrong).
	FirstWrong  *report.WrongElem
	WrongRanges []report.RankWrong
	// SendWritten are the ranks that wrote into their sendbuf in the
	// first failing schedule of an out-of-place run, as kernbench run
	// reports them (report.Result.SendWritten).
	SendWritten []int
}

// scheduleSeed is schedule i's jitter seed: schedule 0 is plain scheduling
// order whatever the seed (so schedules=N never explores less than
// schedules=1 did); every other (seed, i) is a reproducible permutation of
// same-time events, i.e. of which runnable rank goes next.
func scheduleSeed(seed uint64, i int) uint64 {
	if i == 0 {
		return 0
	}
	z := seed*0x9e3779b97f4a7c15 + uint64(i+1)*0xbf58476d1ce4e5b9
	z ^= z >> 31
	return z | 1
}

// RunKernel runs an algorithm in the mock runtime: the same kernels
// and tl API on a machine where nothing takes time, FIFO per direction with
// the configured ring depth, and a deterministic order of runnable ranks
// (schedule i of Schedules explores another order). A deadlock is an error
// whose message contains "deadlock" and every blocked rank's position.
func RunKernel(o Options) (*Result, error) {
	path := o.Path
	src := script.Source{Env: o.Env, Embedded: o.Embedded}
	if cand := filepath.Join(o.Dir, path); o.Dir != "" && src.Exists(cand) {
		path = cand
	} else if !src.Exists(path) {
		if alt := filepath.Join("algorithms", path); src.Exists(alt) {
			path = alt
		}
	}
	// A file (not an algorithm named in ccl.yaml) is read only where the
	// test's own load() statements may read.
	if o.CheckPlace != nil && (strings.HasSuffix(path, ".star") || strings.ContainsRune(path, '/') || ccl.IsMSCCL(path)) {
		if err := o.CheckPlace(path); err != nil {
			return nil, err
		}
	}
	if o.Schedules < 1 {
		o.Schedules = 1
	}
	if o.MaxSteps == 0 {
		o.MaxSteps = 100_000_000
	}
	world := o.WorldSize
	if ccl.IsMSCCL(path) && !o.WorldSizeGiven {
		world = 0 // the schedule's ngpus
	}
	res := &Result{FailingSchedule: -1, Schedules: o.Schedules}
	for i := 0; i < o.Schedules; i++ {
		rep, err := ccl.Run(path, ccl.Options{
			Sets: o.Sets, WorldSize: world, Topology: o.Topology, Collective: o.Collective,
			Counts: []int64{o.Count}, DType: o.DType, RedOp: o.RedOp, RedOpGiven: o.RedOpGiven, InPlace: o.InPlace, Root: o.Root, RootGiven: o.RootGiven,
			Verify: !o.TimingOnly, TimingOnly: o.TimingOnly, Untimed: true, Keywords: true, KeepOutputs: !o.TimingOnly, JitterSeed: scheduleSeed(o.Seed, i), Params: o.Params,
			Env: o.Env, Embedded: o.Embedded, Stderr: o.Stderr, MaxSteps: o.MaxSteps, Watchdog: o.Watchdog, MaxMemory: o.MaxMemory,
			LoadPath: o.LoadPath,
		})
		if err != nil {
			var f *report.Failure
			if errors.As(err, &f) {
				msg := f.Msg
				if f.Detail != "" && f.Detail != f.Msg {
					msg += "\n" + f.Detail
				}
				if o.Schedules > 1 {
					msg = fmt.Sprintf("schedule %d of %d (seed %d): %s", i, o.Schedules, o.Seed, msg)
				}
				return nil, report.WithKind(f.ErrorKind(), &report.Failure{Rank: f.Rank, Msg: msg, Backtrace: f.Backtrace, Err: f.Err})
			}
			return nil, err
		}
		r := rep.Results[0]
		if i == 0 || (r.Wrong > 0 && res.FailingSchedule < 0) {
			res.Outputs = r.Outputs
			res.Sends, res.Recvs = r.Ops.Send, r.Ops.Recv
			res.DType, _ = dtype.Parse(r.DType)
		}
		if r.Wrong > 0 && res.FailingSchedule < 0 {
			res.FailingSchedule = i
			res.FirstWrong, res.WrongRanges, res.SendWritten = r.FirstWrong, r.WrongRanges, r.SendWritten
		}
		res.Wrong += r.Wrong
		if f := r.Verdict(); f != nil && f.ErrorKind() == errkind.Phase2Mismatch {
			// (A wrong result is the mock's to report: res.Wrong and the
			// failing schedule.)
			f.Msg = fmt.Sprintf("schedule %d: %s", i, r.Phase2)
			if d := r.Phase2Diagnosis; d != nil {
				f.Msg += "\n  " + strings.Join(d.Lines(), "\n  ")
			}
			f.Msg += "\n" + report.Phase2Advice
			return nil, f
		}
	}
	return res, nil
}
