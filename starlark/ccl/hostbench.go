package ccl

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
	"kernbench/starlark/host"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
	"kernbench/starlark/tl"
)

// runHostBench runs a bench file's run_rank(rank, world_size, torch) once
// per rank as concurrent simulated host processes, with the algorithm of
// defaults.algorithm (or opts.Algorithm) behind torch.distributed.
func runHostBench(benchFile string, runRank starlark.Callable, cfg *config.Config, cfgDir string, loader *script.Loader, opts Options) (*report.Report, error) {
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
		return nil, report.WithKind(errkind.Init, &report.Failure{Rank: -1,
			Msg: fmt.Sprintf("init_process_group: algorithm %q (%s): %s", name, tgt.File, script.Format(err)), Err: err})
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
	// Host benches run their sizes one after the other (the bench's own
	// loader is shared by its run_rank calls).
	return p.sweep(tgt, benchFile, nil, func(p *plan, _ *script.Loader, count int64) (*report.Result, error) {
		return diagnosed(p.opts, func(o Options) (*report.Result, error) {
			pp := *p
			pp.opts = o
			return runHostOnce(&pp, cfg, tgt, quiet(loader, o), kernel, hook, runRank, count)
		})
	})
}

func runHostOnce(p *plan, cfg *config.Config, tgt *target.Target, loader *script.Loader, kernel, hook starlark.Callable, runRank starlark.Callable, count int64) (*report.Result, error) {
	w, err := newWorld(p, cfg, tgt.Settings)
	if err != nil {
		return nil, err
	}
	defer w.close()
	stats := make([]tl.Stats, p.world)
	var wrong int64
	var first *report.WrongElem
	checks := 0
	var initErr error
	rt := &host.Runtime{
		M: w.m, AlgoName: p.algoName, AlgoKernel: kernel, AlgoParams: p.params, RedOp: p.red, DataSpace: p.dataSpace,
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
			if w.g == nil && initErr == nil {
				initErr = w.install(p, tgt, loader, hook)
				if initErr == nil {
					// The bench's buffers are args.count elements per
					// rank, as the builtin bench's: the same estimate,
					// now that the rings are known.
					_, initErr = p.checkMemory(count, ringsOf(w.g), nil)
				}
			}
			return w.g, initErr
		},
		NewKernel: func(rank int, g *machine.Group, proc *sim.Proc) *tl.Kernel {
			k := &tl.Kernel{M: w.m, G: g, PE: w.m.Ranks[rank], Rank: rank, World: p.world, RedOp: p.red, Stats: &stats[rank], Proc: proc, MaxSteps: p.opts.MaxSteps}
			if g != nil {
				k.EP = g.EPs[rank]
			}
			return tl.New(k)
		},
		OnCheck: func(rank, n int, fw *host.Wrong) {
			checks++
			wrong += int64(n)
			if fw != nil && first == nil {
				first = &report.WrongElem{Rank: fw.Rank, Index: fw.Index, Got: fw.Got, Want: fw.Want}
			}
		},
	}
	w.snapshot()
	w.spawn(p.world, loader, func(r int, th *starlark.Thread, proc *sim.Proc) error {
		torch := host.New(rt, r, p.world, proc)
		_, err := starlark.Call(th, runRank, starlark.Tuple{starlark.MakeInt(r), starlark.MakeInt(p.world), torch}, nil)
		return script.Stopped(th, err)
	})
	if err := w.run(tgt); err != nil {
		var f *report.Failure
		if errors.As(initErr, &f) {
			return nil, f
		}
		return nil, err
	}
	res := w.result(p, count, stats)
	res.Wrong, res.FirstWrong = wrong, first
	res.Verified = checks > 0 && wrong == 0
	if err := w.phase2(p, res); err != nil {
		return nil, err
	}
	res.Verified = res.Verified && (res.Phase2Match == nil || *res.Phase2Match)
	if p.opts.ExportChakra != nil {
		if err := exportChakra(p, w, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// BenchFile is the path of a named bench in benches/; a name that is a
// path already (it has a folder or ends in .star) is used as given, so an
// absolute path is not turned into benches/ABS.star.
func BenchFile(name string) string {
	if strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) || strings.HasSuffix(name, ".star") {
		return name
	}
	return filepath.Join("benches", name+".star")
}
