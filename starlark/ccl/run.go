// Package ccl is the run path, its one job: from a `kernbench run`'s
// options to a filled report. It resolves the run (starlark/target),
// plans the sizes and sweeps them, builds a world per size (the
// machine and maps of starlark/wiring, the IPCQ process group), runs the
// kernels through a bench (the builtin collective bench, a host bench, an
// L3 bench or an MSCCL schedule, all on the same world), verifies the
// result against the collective's definition, replays phase 2 and fills
// the report (starlark/report). kernbench check (starlark/check) plans
// through it (PlanKernel) without simulating.
package ccl

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime/debug"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/chakra"
	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/mscclio"
	"kernbench/starlark/orch"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
	"kernbench/starlark/tl"
)

// Options are the inputs of one `kernbench run`.
type Options struct {
	ConfigPath string   // --config; "" = ./ccl.yaml if present, else the embedded default
	Sets       []string // --set key.path=value
	// Vary are the --vary items (key.path=value) of this variant of a
	// comparison, applied after Sets.
	Vary []string
	// Faults are the --fault items: system.faults entries written as
	// key=value pairs (config.ParseFaults), after the configuration's own.
	Faults []string
	// Compared are the ccl.yaml algorithms every variant of the
	// comparison this run belongs to uses: a --set of one of their keys
	// takes effect in another run even where not in this one.
	Compared   []string
	WorldSize  int // 0 = configured
	Topology   string
	Collective string
	Algorithm  string  // the algorithm behind a host bench (default: defaults.algorithm)
	Counts     []int64 // elements per rank buffer, one result row each (nil = 1 MiB worth)
	Sizes      []int64 // bytes per rank buffer (converted with the dtype); used when Counts is nil
	DType      string
	RedOp      string
	// RedOpGiven says RedOp was given (--redop, redop = …), also as
	// sum: a collective without a reduction refuses it.
	RedOpGiven bool
	InPlace    bool
	Seed       uint64
	DataSpace  string // tcm | sram | hbm (default hbm)
	Root       int
	// RootGiven says Root was given (--root), also as 0: it then wins
	// over the ccl.yaml entry's params.root.
	RootGiven bool
	// BenchFlags are the flags given that shape the collective bench
	// (--count, --dtype, --world-size, …): an L3 bench, which makes its own
	// traffic, refuses them rather than run without them.
	BenchFlags []string
	MaxSteps   uint64
	// Keywords says the options above came from run_kernel_in_mock's
	// keywords, not from flags: a bad value is then named as the keyword
	// the test wrote (topology), not as a flag it never gave (--topology).
	Keywords bool
	// Strict turns warnings about lost work into errors: an L3 main that
	// returns with messages still queued or regions live (exit 4).
	Strict bool
	// Watchdog, when set, stops the run's Starlark threads at a wall-clock
	// limit (--timeout): exit 3, like the step limit.
	Watchdog   *script.Watchdog
	JitterSeed uint64
	Verify     bool
	// Detail adds the busiest resources to each result (-v).
	Detail bool
	// ProbeMemory counts every run's host memory estimate with probes
	// (checkMemory), not only one near --max-memory: for the tests that
	// hold the estimate against measured peaks
	// (KERNBENCH_MEMORY_PROBE=always).
	ProbeMemory bool
	// OpLog, when set, receives every run's op_log as JSON lines.
	OpLog io.Writer
	// CCLTrace, when set, receives one line per send and recv
	// (KERNBENCH_CCL_TRACE=1).
	CCLTrace io.Writer
	// Trace, when set, receives the timeline (Chrome Trace Event JSON) of
	// the run; with several sizes, of the last one.
	Trace io.Writer
	// TraceRanks and TraceKinds, when set, limit the trace to those ranks
	// (links stay) and those event kinds (trace.Kinds).
	TraceRanks []int
	TraceKinds []string
	// Progress, when set, is told before each size of a sweep is simulated.
	Progress func(i, n int, count int64)
	// OnStart, when set, sees the report's header (algorithm, collective,
	// topology) before the first size runs; an error it returns ends the
	// run (a comparison refuses an algorithm of another collective).
	OnStart func(*report.Report) error
	// TimingOnly moves and stores no bytes (--timing-only): the same
	// simulated time, events and operation counts, without data, so no
	// reference check and no phase 2; a kernel that reads values fails.
	TimingOnly bool
	// Jobs > 1 runs up to that many sizes of a sweep at once (-j); the
	// report and every output are the same as with 1.
	Jobs int
	// OnResult, when set, receives each size's row as soon as it is done
	// (the CLI prints rows as they finish, so a failure at a later size
	// keeps them).
	OnResult func(r *report.Result)
	// Check re-verifies every queue pair's pointer invariants after each
	// delivery and credit (--check; costly).
	Check bool
	// DumpPointers, when set, receives every queue pair's pointers at the
	// end of each run (also after a failure).
	DumpPointers io.Writer
	// Untimed runs on a machine where nothing takes time (the mock
	// runtime): only the order of events matters, and JitterSeed picks it.
	Untimed bool
	// KeepOutputs copies every rank's recv buffer into Result.Outputs.
	KeepOutputs bool
	// Params are extra keyword arguments for kernel(), over the ccl.yaml
	// entry's params.
	Params []starlark.Tuple
	// ExportMSCCL, when set, receives the run's schedule as MSCCL XML
	// (--export-msccl; one size only).
	ExportMSCCL io.Writer
	// ExportChakra, when set, receives the run's schedule as Chakra
	// execution traces (--export-chakra; one size only, not with
	// TimingOnly: it is read from the op_log).
	ExportChakra func(*chakra.Trace)
	// MaxMemory bounds the host memory of a run (--max-memory; 0 = no
	// bound): a size whose estimate is over it is refused (exit 2), and a
	// run that passes it anyway stops (exit 3, OutOfMemory).
	MaxMemory int64
	// MaxMemoryIsDefault says MaxMemory is DefaultMaxMemory, not a limit
	// the user gave: a refusal then says where its figure comes from.
	MaxMemoryIsDefault bool
	// RefusedAsRows runs every size of a sweep whose estimate fits and
	// makes each one over MaxMemory a row saying so (Result.Refused)
	// instead of ending the run there: the user asked for several sizes
	// (the CLI sets it for a sweep of several, in a shard of one too).
	// Without it a refused size is the run's error.
	RefusedAsRows bool

	// LoadPath are folders the user allows load() to read (--load-path),
	// besides the script's own folder tree and the shipped library.
	LoadPath []string

	Env      script.Env // the working directory and environment variables
	Embedded fs.FS      // the shipped ccl.yaml, algorithms and benches
	Stderr   io.Writer  // print() and diagnostics

	// witness: this run diagnoses a phase-2 mismatch (diagnosed): its
	// op_log is witnessed and its operations name their tl calls.
	witness bool
	// probe: this run is a memory estimate's probe (tl.Retention);
	// scaledProbe: one of a smaller world than the run's, whose values
	// are followed finely (Retention.Fine).
	probe, scaledProbe bool
	// silent: this run is made only to learn its outcome (a diagnosis, a
	// tried fix): its kernels' prints go nowhere.
	silent bool
}

// Run executes `kernbench run arg`.
func Run(arg string, opts Options) (*report.Report, error) {
	if IsMSCCL(arg) {
		return runMSCCL(arg, opts)
	}
	cfg, cfgDir, err := opts.loadConfig()
	if err != nil {
		return nil, err
	}
	src := script.Source{Env: opts.Env, Embedded: opts.Embedded}
	tgt, err := target.Resolve(arg, cfg, cfgDir, src)
	if err != nil {
		return nil, err
	}
	if err := target.Ineffective(cfg, tgt.RunOf(false), opts.given()); err != nil {
		return nil, err
	}
	loader := &script.Loader{Src: src, Search: filepath.Join(cfgDir, "algorithms"), LoadPath: opts.LoadPath, MaxSteps: opts.MaxSteps, Watchdog: opts.Watchdog, Stderr: opts.Stderr, Predeclared: orch.Predeclared()}
	if cfgDir == "" {
		loader.Search = "algorithms"
	} else {
		// A local ccl.yaml lies over the embedded one: its modules may
		// load the shipped helpers.
		loader.Fallback = "algorithms"
	}
	loader.PrintPrefix = printPrefix
	var release func()
	loader.MemoryWatch, release = hostmem.Watch(opts.MaxMemory, opts.MaxMemoryIsDefault)
	defer release()
	globals, err := loader.Load(tgt.File)
	if err != nil {
		return nil, testFileHint(tgt.File, loadFailure(err))
	}
	if v, ok := globals["run_rank"]; ok {
		rr, ok := v.(starlark.Callable)
		if !ok {
			return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%q must be a function (got a %s)", "run_rank", v.Type())})
		}
		return runHostBench(tgt.File, rr, cfg, cfgDir, loader, opts)
	}
	if v, ok := globals["main"]; ok && globals["kernel"] == nil {
		mf, ok := v.(starlark.Callable)
		if !ok {
			return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%q must be a function (got a %s)", "main", v.Type())})
		}
		if err := target.Ineffective(cfg, target.RunOf{Known: true, What: tgt.File}, opts.given()); err != nil {
			return nil, err
		}
		return runL3Bench(tgt.File, mf, cfg, loader, opts)
	}
	kernel, err := target.EntryPoint(globals, tgt.File, "kernel")
	if err != nil {
		return nil, testFileHint(tgt.File, err)
	}
	if err := target.Ineffective(cfg, tgt.RunOf(true), opts.given()); err != nil {
		return nil, err
	}
	var hook starlark.Callable
	if v, ok := globals["neighbors"]; ok {
		c, ok := v.(starlark.Callable)
		if !ok {
			return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%s: \"neighbors\" must be a function (got a %s)", tgt.File, v.Type())})
		}
		hook = c
	}
	pl, err := makePlan(tgt, globals, hook != nil, opts)
	if err != nil {
		return nil, err
	}
	if problems := callProblems(kernel, pl, cfg.File, tgt); len(problems) > 0 {
		return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: strings.Join(problems, "\n")})
	}
	return pl.sweep(tgt, tgt.File, loader, func(p *plan, loader *script.Loader, count int64) (*report.Result, error) {
		return runOnce(p, cfg, tgt, loader, kernel, hook, count)
	})
}

// testFileHint ends the load error of a *_test.star file given to run by
// saying what it is: its own message (undefined: assert, no kernel) does
// not.
func testFileHint(file string, err error) error {
	var f *report.Failure
	if !errors.As(err, &f) || !strings.HasSuffix(file, "_test.star") {
		return err
	}
	f.Msg += fmt.Sprintf("\n%s is a test file (test_* functions): run it with kernbench test %s", file, file)
	return f
}

// optionName is how the user gave the option that flag sets: the flag
// itself, or the mock's keyword of the same name.
func (o Options) optionName(flag string) string { return o.given().OptionName(flag) }

func printPrefix(th *starlark.Thread) string {
	if k, ok := th.Local(kernelKey).(*tl.Kernel); ok && k != nil {
		return fmt.Sprintf("[t=%v rank=%d] ", k.M.Sim.Now(), k.Rank)
	}
	// L3 main and L2 orchestrators (and host benches between launches):
	// the simulated time and the process's name.
	if p, ok := th.Local(orch.ProcKey).(*sim.Proc); ok && p != nil {
		return fmt.Sprintf("[t=%v %s] ", p.Sim().Now(), p.Name)
	}
	return ""
}

// stepLimit turns a failure caused by the Starlark step limit, the
// wall-clock timeout or the memory watch outside a kernel (a module's top level, neighbors())
// into a step-limit or timeout failure: exit 3 and the hint, as inside
// kernels.
func stepLimit(f *report.Failure) *report.Failure {
	var ee *starlark.EvalError
	if !errors.As(f.Err, &ee) {
		return f
	}
	switch k := errkind.Of(f.Err); k {
	case errkind.HostMemory:
		// The reason names the limit and what to try.
		report.WithKind(k, f)
		f.Msg = strings.TrimPrefix(ee.Msg, "Starlark computation cancelled: ")
		f.Detail, f.Backtrace = script.Traceback(ee), script.Backtrace(ee)
	case errkind.StepLimit, errkind.Timeout:
		flag := "--max-steps"
		if k == errkind.Timeout {
			flag = "--timeout"
		}
		report.WithKind(k, f)
		f.Msg = ee.Msg + " (raise " + flag + " if the script is meant to run this long)"
		f.Detail, f.Backtrace = script.Traceback(ee), script.Backtrace(ee)
	}
	return f
}

// simulateOnce simulates one size of the builtin collective bench.
func simulateOnce(p *plan, cfg *config.Config, tgt *target.Target, loader *script.Loader, kernel, hook starlark.Callable, count int64) (*report.Result, error) {
	w, err := newWorld(p, cfg, tgt.Settings)
	if err != nil {
		return nil, err
	}
	w.procNote = p.procNote
	defer w.close()
	if err := w.install(p, tgt, loader, hook); err != nil {
		return nil, err
	}
	var est hostmem.Estimate
	if err := checkFits(p, w.m, count); err != nil {
		return nil, err
	}
	if buffersFit(p, w.m, count) {
		probe := func(world int, count int64) (*hostmem.Counts, error) {
			q := *p
			q.opts = silent(p.opts)
			q.opts.TimingOnly, q.opts.Verify, q.opts.ProbeMemory, q.opts.probe = true, false, false, true
			q.budget, q.world, q.opts.scaledProbe = nil, world, world != p.world
			res, err := simulateOnce(&q, cfg, tgt, quiet(loader, q.opts), kernel, hook, count)
			// What the probe held goes back before the run allocates.
			debug.FreeOSMemory()
			if err != nil {
				return nil, err
			}
			return res.Counts, nil
		}
		if est, err = p.checkMemory(count, ringsOf(w.g), probe); err != nil {
			return nil, err
		}
	}
	defer p.budget.Acquire(est.Total())()
	b, err := newBench(p, w.m, count)
	if err != nil {
		return nil, err
	}
	stats := make([]tl.Stats, p.world)
	w.snapshot()
	b.keepSentinels(w)
	var rec *mscclio.Recorder
	if p.opts.ExportMSCCL != nil {
		rec = mscclio.NewRecorder(p.world)
	}
	// One pool of recycled handles for all ranks: the handle a rank's
	// load reuses is the one recycled last, still in cache.
	handles := &tl.HandlePool{}
	if p.opts.probe {
		r := tl.NewRetention(hostmem.ViewBytes, hostmem.HandleBytes)
		if p.opts.scaledProbe {
			r.Fine()
		}
		defer r.Close()
		for i := range stats {
			stats[i].Retained = r
		}
	}
	w.spawn(p.world, loader, func(r int, th *starlark.Thread, proc *sim.Proc) error {
		kt := &tl.Kernel{M: w.m, G: w.g, EP: w.g.EPs[r], PE: w.m.Ranks[r], Rank: r, World: p.world, RedOp: p.red, Stats: &stats[r], Proc: proc, Handles: handles, MaxSteps: p.opts.MaxSteps,
			NewThread: func(name string, t *tl.Kernel) *starlark.Thread {
				th := loader.NewThread(name)
				th.SetLocal(kernelKey, t)
				th.SetLocal(tl.ViewsKey, t)
				return th
			},
			Fail: func(err error) { w.s.Stop(&rankError{rank: r, err: err}) }}
		if loader.MemoryWatch != nil {
			// Tiles are refused before they pass --max-memory.
			kt.NoteAlloc = hostmem.NoteAlloc
		}
		if rec != nil {
			kt.Rec = rec
		}
		k := tl.New(kt)
		th.SetLocal(kernelKey, k)
		th.SetLocal(tl.ViewsKey, k)
		args := starlark.Tuple{b.send[r], b.recv[r], starlark.MakeInt(r), starlark.MakeInt(p.world)}
		kw := append(append([]starlark.Tuple(nil), p.params...), starlark.Tuple{starlark.String("tl"), k})
		_, err := starlark.Call(th, kernel, args, kw)
		err = script.Stopped(th, err)
		stats[r].Steps += int64(th.ExecutionSteps())
		if err == nil {
			err = k.Finish()
		} else {
			k.Release()
		}
		return err
	})
	if duringPhase1 != nil {
		duringPhase1(w.m, b.send)
	}
	if err := w.run(tgt); err != nil {
		return nil, err
	}
	if afterPhase1 != nil {
		afterPhase1(w.m)
	}
	b.keepInputs(w)
	res := w.result(p, count, stats)
	if p.opts.Detail {
		res.HostMemory = &est
	}
	if p.opts.Verify && !p.opts.TimingOnly {
		b.verify(res)
	}
	if p.opts.KeepOutputs && !p.opts.TimingOnly {
		for _, r := range b.recv {
			res.Outputs = append(res.Outputs, append([]byte(nil), r.Reg.View()...))
		}
	}
	if err := w.phase2(p, res); err != nil {
		return nil, err
	}
	res.Verified = res.Verified && (res.Phase2Match == nil || *res.Phase2Match)
	if rec != nil {
		if err := exportMSCCL(rec, p, b, w.g, count, p.opts.ExportMSCCL); err != nil {
			return nil, err
		}
	}
	if p.opts.ExportChakra != nil {
		if err := exportChakra(p, w, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// duringPhase1, when set (tests only), runs before the kernels start,
// e.g. to schedule a change of memory behind the op_log's back.
var duringPhase1 func(m *machine.Machine, send []*tl.Ptr)

// afterPhase1, when set (tests only), runs on the machine after the kernels
// and before the checks, e.g. to change memory behind the op_log's back.
var afterPhase1 func(m *machine.Machine)

// rankError is a failure raised while rank's kernel ran.
type rankError struct {
	rank int
	proc *sim.Proc // the rank's process, when the error is its own
	err  error
}

func (e *rankError) Error() string { return fmt.Sprintf("rank %d: %v", e.rank, e.err) }
func (e *rankError) Unwrap() error { return e.err }
