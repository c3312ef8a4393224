// Package ccl is the run path, its one job: from a `kernbench run`'s
// options to a filled report. It resolves the run (starlark/target),
// plans its sizes and sweeps them (starlark/sweep), and runs each size as
// a bench on a fresh world (once.go: the machine and maps of
// starlark/wiring, the IPCQ process group, the pre-run image, phase 2).
// A bench is one kind of run behind one interface: the builtin collective
// bench (its buffers and the collective's reference; MSCCL schedules and
// the mock run through it), a host bench or an L3 bench. What stopped a
// run becomes its failure through starlark/failure, and a size is
// admitted under --max-memory by starlark/hostmem/admit. kernbench check
// (starlark/check) plans through it (PlanKernel) without simulating.
package ccl

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/chakra"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
	"kernbench/starlark/failure"
	"kernbench/starlark/hostmem"
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
	// CollectiveOf is what gave Collective when it is not --collective
	// ("tune allreduce"): a run of an algorithm written for another
	// collective is then refused, where --collective warns and runs it.
	CollectiveOf string
	Algorithm    string  // the algorithm behind a host bench (default: defaults.algorithm)
	Counts       []int64 // elements per rank buffer, one result row each (nil = 1 MiB worth)
	Sizes        []int64 // bytes per rank buffer (converted with the dtype); used when Counts is nil
	DType        string
	RedOp        string
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
	// Threads is the goroutines a partitioned run (a timed run of the
	// builtin bench on a machine of several SIPs) simulates on, at most
	// one per SIP (--threads; 0 = runtime.GOMAXPROCS(0)). The run is the
	// same for every value (threads.go).
	Threads int
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
		return nil, testFileHint(tgt.File, failure.Load(err))
	}
	if v, ok := globals["run_rank"]; ok {
		rr, ok := v.(starlark.Callable)
		if !ok {
			return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%q must be a function (got a %s)", "run_rank", v.Type())})
		}
		if err := benchSignature(rr, "run_rank", "rank", "world_size", "torch"); err != nil {
			return nil, err
		}
		redops, err := DeclaredRedOps(tgt.File, globals)
		if err != nil {
			return nil, err
		}
		return runHostBench(tgt.File, rr, redops, cfg, cfgDir, loader, opts)
	}
	if v, ok := globals["main"]; ok && globals["kernel"] == nil {
		mf, ok := v.(starlark.Callable)
		if !ok {
			return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%q must be a function (got a %s)", "main", v.Type())})
		}
		if err := benchSignature(mf, "main", "orch"); err != nil {
			return nil, err
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
	sayThreads(opts, cfg, tgt.Settings, true, pl.world)
	if problems := tgt.CallProblems(kernel, pl.call(cfg.File)); len(problems) > 0 {
		return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: strings.Join(problems, "\n")})
	}
	rep, err := pl.sweep(cfg, tgt, tgt.File, loader, func(p *plan, loader *script.Loader, count int64) (*report.Result, error) {
		return runOnce(p, cfg, tgt, loader, kernel, hook, count)
	})
	return rep, defaultCollectiveHint(pl, tgt.File, err)
}

// benchSignature is the LoadError of a bench entry point (main,
// run_rank) that the runner could not call with args, as kernbench check
// reports it, before anything runs.
func benchSignature(c starlark.Callable, name string, args ...string) error {
	fn, ok := c.(*starlark.Function)
	if !ok {
		return nil
	}
	problems := target.BenchSignature(fn, name, args...)
	if len(problems) == 0 {
		return nil
	}
	for i, p := range problems {
		problems[i] = fn.Position().String() + ": " + p
	}
	return report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: strings.Join(problems, "\n")})
}

// defaultCollectiveHint adds to an OutOfBounds of a run whose collective
// nothing named that it ran as an allreduce: a kernel written for
// allgather, reduce_scatter or alltoall and left without its COLLECTIVE
// slices its buffers as that collective's, which allreduce's are too short
// for, and the error alone (a slice of a view) does not say why.
func defaultCollectiveHint(p *plan, file string, err error) error {
	var f *report.Failure
	if err == nil || !p.collDefault || !errors.As(err, &f) || f.ErrorKind() != errkind.OutOfBounds {
		return err
	}
	f.Hint = fmt.Sprintf("%s names no collective (no COLLECTIVE = \"...\" in it, no ccl.yaml entry, no --collective), so it ran as an allreduce, "+
		"whose sendbuf and recvbuf both hold count elements: if it implements another collective, say so with COLLECTIVE", file)
	if f.Detail != "" {
		f.Detail += "\n"
	}
	f.Detail += "hint: " + f.Hint
	return err
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

// setOption is a command line's "--set KEY=VALUE" in a message.
var setOption = regexp.MustCompile(`--set ([^\s;,()]+)`)

// inOptionTerms is msg, which may name a --set KEY=VALUE (the machine's
// advice: grow it with --set system.sips=2), in the terms the run was
// given its options in: set=["KEY=VALUE"] for a script's
// run_kernel_in_mock or run_l3 (Keywords), which has no --set.
func (o Options) inOptionTerms(msg string) string {
	if !o.Keywords {
		return msg
	}
	return setOption.ReplaceAllString(msg, `set=["$1"]`)
}

func printPrefix(th *starlark.Thread) string {
	if k, ok := th.Local(kernelKey).(*tl.Kernel); ok && k != nil {
		return fmt.Sprintf("[t=%v rank=%d] ", k.PE.Sim().Now(), k.Rank)
	}
	// L3 main and L2 orchestrators (and host benches between launches):
	// the simulated time and the process's name.
	if p, ok := th.Local(orch.ProcKey).(*sim.Proc); ok && p != nil {
		return fmt.Sprintf("[t=%v %s] ", p.Sim().Now(), p.Name)
	}
	return ""
}
