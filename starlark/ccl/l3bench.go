package ccl

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/config"
	"kernbench/engine/l3l2"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
	"kernbench/starlark/failure"
	"kernbench/starlark/orch"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
	"kernbench/starlark/tl"
)

// runL3Bench runs an L3 bench file: main(orch) as the L3 host process on a
// fresh machine with an L3-L2 hub (docs/l3l2.md). L2 functions it
// submits run as further processes; the run ends when main and every L2
// process have returned (a never-returning L2 ends in the deadlock watchdog
// or max_sim_time_ns). One result row: the simulated time and the operation
// counts of the kernels launched from L2.
func runL3Bench(file string, mainFn starlark.Callable, cfg *config.Config, loader *script.Loader, opts Options) (*report.Report, error) {
	for i, f := range cfg.System.Faults {
		if f.JitterNs > 0 || f.StopAtNs >= 0 {
			// The hub charges host↔device transfers from the links'
			// parameters without booking them: a degraded bandwidth or
			// latency takes effect, jitter and stops would not.
			return nil, report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%s: system.faults[%d]: an L3 bench (main(orch)) takes faults that degrade a link or PE (bandwidth_factor, latency_ns, slowdown), not jitter_ns or stop_at_ns: its host-device transfers are charged without booking the links", f.Pos, i)})
		}
	}
	set := cfg.Defaults
	rep := &report.Report{Algorithm: strings.TrimSuffix(filepath.Base(file), ".star"), File: file, Collective: "l3l2", Topology: "none",
		WorldSize: 1, BufferKind: set.BufferKind, Backpressure: set.Backpressure, DataSpace: "hbm"}
	// Told like a sweep's (plan.sweep): a comparison checks the collective
	// at the start and prints the row from OnResult.
	if opts.OnStart != nil {
		if err := opts.OnStart(rep); err != nil {
			return rep, err
		}
	}
	if len(opts.BenchFlags) > 0 {
		it := "them"
		if len(opts.BenchFlags) == 1 {
			it = "it"
		}
		// No report: refused before the run, not at a size of a --sweep
		// it was given.
		return nil, usage("%s cannot take effect: %s is an L3 bench (it defines main(orch) and no kernel), which makes its own traffic: "+
			"the collective bench's buffers, ranks and topology are not used; drop %s", strings.Join(opts.BenchFlags, ", "), file, it)
	}
	sayThreads(opts, cfg, set, false, 1)
	res, err := diagnosed(opts, func(o Options) (*report.Result, error) {
		return runL3Once(file, mainFn, cfg, quiet(loader, o).NewThread, o)
	})
	if err != nil {
		return rep, err
	}
	rep.Results = append(rep.Results, *res)
	if opts.OnResult != nil {
		opts.OnResult(res)
	}
	return rep, nil
}

// RunL3 runs main(orch) on a fresh simulated machine (timing on; the
// default ccl.yaml — ./ccl.yaml if present — plus the --set style
// overrides sets) and returns when main and the L2 work it submitted have
// finished. An error raised in main or in an L2 function is returned as a
// *Failure whose message contains the original one. New threads print and
// load like th.
//
// limits, when given, bounds the new threads as a Loader does (the step
// limit and wall-clock watchdog of the calling test): an L2 function that
// never returns must not hang kernbench test. Its Src.Env is where
// ./ccl.yaml is looked for.
func RunL3(mainFn starlark.Callable, th *starlark.Thread, sets []string, embedded fs.FS, limits ...*script.Loader) error {
	var env script.Env
	if len(limits) > 0 && limits[0] != nil {
		env = limits[0].Src.Env
	}
	cfg, _, err := target.LoadConfig(env, "", sets, embedded)
	if err != nil {
		return err
	}
	newThread := func(name string) *starlark.Thread {
		if len(limits) > 0 && limits[0] != nil {
			l := *limits[0]
			n := l.NewThread(name)
			n.Print, n.Load = th.Print, th.Load
			return n
		}
		return &starlark.Thread{Name: name, Print: th.Print, Load: th.Load}
	}
	opts := Options{}
	if len(limits) > 0 && limits[0] != nil {
		opts.MaxMemory = limits[0].MaxMemory
	}
	_, err = runL3Once("run_l3", mainFn, cfg, newThread, opts)
	return err
}

// l3Bench is an L3 bench's run: main(orch) as the L3 host process, the
// L2 work it submits as further processes.
type l3Bench struct {
	p         *plan
	mainFn    starlark.Callable
	newThread func(string) *starlark.Thread

	hub     *l3l2.Hub
	rt      *orch.Runtime
	stats   tl.Stats
	mainEnd sim.Time
}

func runL3Once(file string, mainFn starlark.Callable, cfg *config.Config, newThread func(string) *starlark.Thread, opts Options) (*report.Result, error) {
	p := &plan{opts: opts, world: 1}
	return simulate(p, cfg, cfg.Defaults, &l3Bench{p: p, mainFn: mainFn, newThread: newThread})
}

// setUp puts the L3-L2 hub on the machine.
func (b *l3Bench) setUp(w *world) error {
	set := w.set
	bp := machine.Sleep
	if set.Backpressure == "poll" {
		bp = machine.Poll
	}
	hub, err := l3l2.NewHub(w.m, l3l2.Options{Backpressure: bp, PollInterval: sim.Time(set.PollIntervalNs) * sim.Nanosecond})
	if err != nil {
		w.s.Close()
		return report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	b.hub = hub
	b.rt = &orch.Runtime{Hub: hub, NewThread: b.newThread, KernelKey: kernelKey, Stats: &b.stats, OnError: func(proc *sim.Proc, err error) { b.stop(w, proc, err) }}
	// L2 calls return None/False on failure, also when the run ended
	// under them: a script looping on them must be cancelled to unwind.
	w.cancelBlocked = true
	return nil
}

// stop ends the run at a process's error.
func (b *l3Bench) stop(w *world, proc *sim.Proc, err error) {
	if err != nil && !errors.Is(err, sim.ErrKilled) {
		w.s.Stop(&failure.ProcError{Proc: proc.Name, Err: err})
	}
}

// spawn starts main(orch).
func (b *l3Bench) spawn(w *world) {
	th := b.newThread("l3 main")
	proc := w.s.Spawn("l3 main", func(proc *sim.Proc) {
		orch.SetProc(th, proc)
		_, err := starlark.Call(th, b.mainFn, starlark.Tuple{orch.New(b.rt)}, nil)
		b.mainEnd = w.s.Now()
		b.stop(w, proc, script.Stopped(th, err))
	})
	proc.Data = th
}

func (b *l3Bench) failure(_ *world, err error) error { return failure.L3(err) }

// finish releases the hub's regions and reports L2 failures nobody saw and
// work main left queued; the row is the simulated time and the operation
// counts of the kernels launched from L2.
func (b *l3Bench) finish(w *world, runErr error) (*report.Result, error) {
	hub, p := b.hub, b.p
	var unfinished []string
	var unseen error
	if runErr == nil {
		unfinished = hub.Unfinished()
		unseen = hub.UnseenPoison()
	}
	hub.ReleaseAll()
	if runErr != nil {
		return nil, runErr
	}
	if unseen != nil {
		// An L2 failure nobody saw must not end the run with exit 0
		// (its kind's status, 4).
		return nil, report.WithKind(errkind.Of(unseen), &report.Failure{Rank: -1, Msg: unseen.Error(), Err: unseen})
	}
	if len(unfinished) > 0 {
		// Work still queued when main returned is dropped without a
		// trace: say so, and fail under --strict.
		msg := "L3 main returned with unfinished work: " + strings.Join(unfinished, "; ")
		if p.opts.Strict {
			return nil, report.WithKind(errkind.Unfinished, &report.Failure{Rank: -1, Msg: msg + " (--strict)"})
		}
		if p.opts.Stderr != nil {
			fmt.Fprintf(p.opts.Stderr, "kernbench: warning: %s\n", msg)
		}
	}
	// The run ends when main and the last L2 process have returned (later
	// events are bookkeeping such as the watchdog's check).
	end := max(b.mainEnd, b.rt.L2End)
	stats := b.stats
	res := &report.Result{DType: "-", RedOp: "-", SimTimeNs: end.Ns(), Events: w.s.Events(), Verified: true, Unfinished: unfinished,
		Ops: report.OpCounts{Send: stats.Send, Recv: stats.Recv, Load: stats.Load, Store: stats.Store, Math: stats.Math}}
	res.Faults = report.FaultUses(w.m, end)
	if p.opts.Detail && end > 0 {
		res.Busiest = report.Busiest(w.m, end, 8)
	}
	return res, nil
}

// export: an L3 bench exports nothing.
func (b *l3Bench) export(*world, *report.Result) error { return nil }
