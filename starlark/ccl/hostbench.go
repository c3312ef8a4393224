package ccl

import (
	"errors"
	"fmt"
	"slices"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"kernbench/engine/config"
	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/engine/spelling"
	"kernbench/starlark/errkind"
	"kernbench/starlark/failure"
	"kernbench/starlark/host"
	"kernbench/starlark/hostmem/admit"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
	"kernbench/starlark/tl"
)

// runHostBench runs a bench file's run_rank(rank, world_size, torch) once
// per rank as concurrent simulated host processes, with the algorithm of
// defaults.algorithm (or opts.Algorithm) behind torch.distributed.
// redops are the reductions the bench's own check handles (its REDOPS;
// nil: any).
func runHostBench(benchFile string, runRank starlark.Callable, redops []dtype.RedOp, cfg *config.Config, cfgDir string, loader *script.Loader, opts Options) (*report.Report, error) {
	if opts.ExportMSCCL != nil {
		// The schedule it writes names the builtin bench's buffers; a host
		// bench's are its own tensors. Refused, not a run without the file.
		return nil, usage("--export-msccl writes the builtin bench's schedule, and %s is a host bench: export the algorithm it runs (kernbench run ALGORITHM --export-msccl FILE)", benchFile)
	}
	name := cfg.Defaults.Algorithm
	if opts.Algorithm != "" {
		name = opts.Algorithm
	}
	tgt, err := target.Resolve(name, cfg, cfgDir, loader.Src)
	if err != nil {
		return nil, err
	}
	if err := target.Ineffective(cfg, tgt.RunOf(true), opts.given()); err != nil {
		return nil, err
	}
	globals, err := loader.Load(tgt.File)
	if err != nil {
		f := report.WithKind(errkind.Init, &report.Failure{Rank: -1,
			Msg: fmt.Sprintf("init_process_group: algorithm %q (%s): %s", name, tgt.File, script.Format(err)), Err: err})
		if msg, tb, bt, ok := script.LoadFailure(err); ok {
			f.Msg = fmt.Sprintf("init_process_group: algorithm %q (%s): %s", name, tgt.File, msg)
			f.Detail, f.Backtrace = tb, bt
		}
		return nil, f
	}
	kernel, err := target.EntryPoint(globals, tgt.File, "kernel")
	if err != nil {
		return nil, err
	}
	hook, _ := globals["neighbors"].(starlark.Callable)
	p, err := makePlan(tgt, globals, hook != nil, opts)
	if err != nil {
		return nil, err
	}
	if redops != nil && !slices.Contains(redops, p.red) {
		// The same at every size: refused once, before the first runs
		// (the bench's own fail() said it at size 1 as a runtime error).
		return nil, usage("%s %s: %s checks %s (its REDOPS); kernbench run ALGORITHM %s %s checks every redop with the builtin bench",
			opts.optionName("--redop"), p.red, benchFile, andList(redops), opts.optionName("--redop"), p.red)
	}
	sayThreads(opts, cfg, tgt.Settings, false, p.world)
	// Host benches run their sizes one after the other (the bench's own
	// loader is shared by its run_rank calls).
	return p.sweep(cfg, tgt, benchFile, nil, func(p *plan, _ *script.Loader, count int64) (*report.Result, error) {
		return diagnosed(p.opts, func(o Options) (*report.Result, error) {
			pp := *p
			pp.opts = o
			return runHostOnce(&pp, cfg, tgt, quiet(loader, o), kernel, hook, runRank, count)
		})
	})
}

// DeclaredRedOps reads a host bench's REDOPS, the reductions its own
// check computes (nil when it declares none: it takes any).
func DeclaredRedOps(file string, globals starlark.StringDict) ([]dtype.RedOp, error) {
	v, ok := globals["REDOPS"]
	if !ok {
		return nil, nil
	}
	bad := func(format string, args ...any) error {
		return report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: file + ": REDOPS" + fmt.Sprintf(format, args...)})
	}
	seq, ok := v.(starlark.Indexable)
	if _, isStr := v.(starlark.String); !ok || isStr {
		return nil, bad(" must be a list or tuple of redop names (got a %s)", v.Type())
	}
	redops := []dtype.RedOp{}
	for i := 0; i < seq.Len(); i++ {
		s, ok := starlark.AsString(seq.Index(i))
		if !ok {
			return nil, bad(" must be a list or tuple of redop names (got a %s in it)", seq.Index(i).Type())
		}
		r, err := dtype.ParseRedOp(s)
		if err != nil {
			return nil, bad(": %q is not a redop (sum, prod, max, min, avg)%s", s, spelling.Hint(s, []string{"sum", "prod", "max", "min", "avg"}))
		}
		redops = append(redops, r)
	}
	return redops, nil
}

// andList is "a", "a and b", "a, b and c".
func andList[T fmt.Stringer](xs []T) string {
	var s string
	for i, x := range xs {
		switch {
		case i == 0:
		case i == len(xs)-1:
			s += " and "
		default:
			s += ", "
		}
		s += x.String()
	}
	return s
}

// hostBench is one size of a host bench: run_rank on every rank, the
// algorithm's kernel behind torch.distributed, the bench's own checks.
type hostBench struct {
	p            *plan
	tgt          *target.Target
	loader       *script.Loader
	kernel, hook starlark.Callable
	runRank      starlark.Callable
	count        int64

	rt      *host.Runtime
	stats   []tl.Stats
	wrong   int64
	first   *report.WrongElem
	checks  int
	initErr error // init_process_group's failure
}

func runHostOnce(p *plan, cfg *config.Config, tgt *target.Target, loader *script.Loader, kernel, hook starlark.Callable, runRank starlark.Callable, count int64) (*report.Result, error) {
	return simulate(p, cfg, tgt.Settings, &hostBench{p: p, tgt: tgt, loader: loader, kernel: kernel, hook: hook, runRank: runRank, count: count})
}

// setUp makes the torch runtime; init_process_group installs the queue
// pairs when a rank calls it.
func (b *hostBench) setUp(w *world) error {
	p, count := b.p, b.count
	b.stats = make([]tl.Stats, p.world)
	b.rt = &host.Runtime{
		M: w.m, AlgoName: p.algoName, AlgoKernel: b.kernel, AlgoParams: p.params, RedOp: p.red, DataSpace: p.dataSpace,
		ThreadKey: kernelKey,
		Args: starlarkstruct.FromStringDict(starlark.String("args"), starlark.StringDict{
			"count":      starlark.MakeInt64(count),
			"bytes":      starlark.MakeInt64(count * int64(p.dt.Size())),
			"dtype":      starlark.String(p.dt.String()),
			"redop":      starlark.String(p.red.String()),
			"seed":       starlark.MakeUint64(p.opts.Seed),
			"in_place":   starlark.Bool(p.opts.InPlace),
			"root":       starlark.MakeInt(p.root),
			"collective": starlark.String(p.coll.Name),
		}),
		InitGroup: func(int) (*machine.Group, error) {
			if w.g == nil && b.initErr == nil {
				b.initErr = w.install(p, b.tgt, b.loader, b.hook)
				if b.initErr == nil {
					// The bench's buffers are args.count elements per
					// rank, as the builtin bench's: the same estimate,
					// now that the rings are known.
					_, b.initErr = p.checkMemory(count, admit.Rings(w.g), nil)
				}
			}
			return w.g, b.initErr
		},
		NewKernel: func(rank int, g *machine.Group, proc *sim.Proc) *tl.Kernel {
			k := &tl.Kernel{M: w.m, G: g, PE: w.m.Ranks[rank], Rank: rank, World: p.world, RedOp: p.red, Stats: &b.stats[rank], Proc: proc, MaxSteps: p.opts.MaxSteps}
			if g != nil {
				k.EP = g.EPs[rank]
			}
			return tl.New(k)
		},
		OnCheck: func(rank, n int, fw *host.Wrong) {
			b.checks++
			b.wrong += int64(n)
			if fw != nil && b.first == nil {
				b.first = &report.WrongElem{Rank: fw.Rank, Index: fw.Index, Got: fw.Got, Want: fw.Want}
			}
		},
	}
	return nil
}

// spawn calls run_rank(rank, world_size, torch) on every rank.
func (b *hostBench) spawn(w *world) {
	w.spawn(b.p.world, b.loader, func(r int, th *starlark.Thread, proc *sim.Proc) error {
		torch := host.New(b.rt, r, b.p.world, proc)
		_, err := starlark.Call(th, b.runRank, starlark.Tuple{starlark.MakeInt(r), starlark.MakeInt(b.p.world), torch}, nil)
		return script.Stopped(th, err)
	})
}

func (b *hostBench) failure(w *world, err error) error {
	return failure.Sim(err, w.procNote, w.faultsHeld())
}

// finish counts what torch.check found wrong: the run is verified when
// the bench checked and nothing was wrong.
func (b *hostBench) finish(w *world, runErr error) (*report.Result, error) {
	if runErr != nil {
		var f *report.Failure
		if errors.As(b.initErr, &f) {
			return nil, f
		}
		return nil, runErr
	}
	res := w.result(b.p, b.count, b.stats)
	res.Wrong, res.FirstWrong = b.wrong, b.first
	res.Verified = b.checks > 0 && b.wrong == 0
	if b.wrong > 0 {
		res.Disconnected = disconnected(w.g)
	}
	return res, nil
}

func (b *hostBench) export(w *world, res *report.Result) error {
	if b.p.opts.ExportChakra != nil {
		return exportChakra(b.p, w, res)
	}
	return nil
}
