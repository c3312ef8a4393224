package ccl

// The world of one simulated size: simulation, machine, placed ranks and
// installed queue pairs, the ranks' processes, the pre-run image and phase 2.

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"go.starlark.net/starlark"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/engine/sim"
	"kernbench/engine/trace"
	"kernbench/starlark/errkind"
	"kernbench/starlark/failure"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/hostmem/admit"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
	"kernbench/starlark/tl"
	"kernbench/starlark/wiring"
)

// world is one simulation's machine and (once installed) its process group.
type world struct {
	// s is the one Sim of a run that is not partitioned; parts the
	// partitions of one that is (threads.go): exactly one is set.
	s        *sim.Sim
	parts    *sim.Partitioned
	prints   *prints // a partitioned run's print output (nil: none)
	m        *machine.Machine
	sys      config.System // the machine description (neighbors(location=, machine=))
	set      config.Settings
	g        *machine.Group
	trace    *trace.Recorder
	traceOut io.Writer
	oplogOut io.Writer // --oplog: written by phase2, or by run when the run failed
	dump     io.Writer
	warn     io.Writer // warnings (stderr); may be nil
	// verifies: phase 2 runs (--verify), so snapshot keeps the pre-run
	// image; keptImage: it did.
	verifies, keptImage bool
	// atPhase2 runs as phase 2 starts (from onKeepPreRun, tests only).
	atPhase2 func()
	// releaseHeap gives up the GC headroom taken for the image (snapshot).
	releaseHeap func()
	// releaseGuard ends the world's registration with the memory guard.
	releaseGuard func()
	// outOfMemory is the guard's error when the run holds held bytes
	// (nil: no limit).
	outOfMemory func(held int64) error
	// outOfMemoryAt is outOfMemory at a time of the run's.
	outOfMemoryAt func(at sim.Time, held int64) error
	// memoryLimit is the --max-memory the guard holds the run to (0: none).
	memoryLimit int64
	// spent is each rank's kernel process time by activity (spawn).
	spent [][sim.MaxActivities]sim.Time
	// finish is each rank's kernel return time (spawn): the end of a run
	// that succeeded (result, the pointer dump), which the simulator clock
	// is not (the watchdog's last check comes after it).
	finish []sim.Time
	// procNote adds a line about a blocked process to deadlock reports
	// (an MSCCL run names the step each thread block is at).
	procNote func(p *sim.Proc) string
	// cancelBlocked: run cancels the Starlark threads of the processes
	// still blocked before unwinding them (an L3 bench: L2 calls return
	// None/False on failure, also when the run ended under them, so a
	// script looping on them would otherwise never unwind).
	cancelBlocked bool
	// closers are what a bench holds for the run's length (atClose).
	closers []func()
}

// atClose has close call f, before what close releases of its own
// (closers in the reverse order of their calls).
func (w *world) atClose(f func()) { w.closers = append(w.closers, f) }

// close ends the world's hold on the collector's settings.
func (w *world) close() {
	if w.m != nil {
		// Nothing reads the memories any more: their slices go to the
		// next size of the sweep (plan.bufs).
		w.m.ReleaseBuffers()
	}
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	w.closers = nil
	if w.releaseHeap != nil {
		w.releaseHeap()
		w.releaseHeap = nil
	}
	if w.releaseGuard != nil {
		w.releaseGuard()
		w.releaseGuard = nil
	}
}

// manyTraceEvents is where a trace gets slow to open: the run says so.
var manyTraceEvents = 1_000_000 // a variable for tests

// writeTrace writes the trace, after a warning when it is very large.
func (w *world) writeTrace() error {
	if n := w.trace.Len(); n > manyTraceEvents && w.warn != nil {
		fmt.Fprintf(w.warn, "kernbench: warning: the trace has %d events (over a million; a viewer may be slow to open it): --trace-ranks LIST and --trace-kinds LIST keep fewer\n", n)
	}
	return w.trace.WriteJSON(w.traceOut)
}

// writeFailedOplog writes the op_log of a failed run, the operations up
// to the failure: the run's other outputs (--trace, --dot) explain a
// failure too, and an empty --oplog file would look like a run that did
// nothing. Phase 2, which writes it for a finished run, is not reached.
func (w *world) writeFailedOplog(failure error) error {
	if failure == nil || w.oplogOut == nil || w.m.Log == nil {
		return failure
	}
	// A write error is not reported: the run's own failure is what the
	// user needs to see.
	_ = w.m.Log.WriteJSONLines(w.oplogOut)
	return failure
}

// placing, when set (tests only), is told the world newWorld places the
// ranks of, and whether it is a memory probe's.
var placing func(world int, probe bool)

// newWorld builds a fresh simulation and machine and places the ranks:
// on partitions, one per SIP, when the bench is partitionable and the
// machine has several SIPs (modeOf), else on one Sim. beforeBuild, when
// not nil, is called once the machine and the world passed their checks,
// before the Sims (one per SIP on partitions) and the machine are made.
func newWorld(p *plan, cfg *config.Config, set config.Settings, partitionable bool, beforeBuild func(machine.Params)) (*world, error) {
	mp := wiring.MachineParams(cfg.System, set)
	mp.Untimed = p.opts.Untimed
	if err := wiring.CheckFaults(cfg.System, mp); err != nil {
		return nil, report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	mode := modeOf(p.opts, mp, partitionable, p.world)
	var s *sim.Sim
	var parts *sim.Partitioned
	var m *machine.Machine
	var err error
	maxTime := sim.Time(set.MaxSimTimeNs) * sim.Nanosecond
	if mode.parts {
		// The machine and the world are refused (as below) before a Sim
		// is made for each SIP with ranks.
		if _, err := machine.New(nil, mp); err != nil {
			return nil, report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
		}
		if err := mp.Holds(p.world); err != nil {
			return nil, report.WithKind(errkind.Init, &report.Failure{Rank: -1, Msg: p.opts.inOptionTerms(err.Error()), Err: err})
		}
		if err := admit.World(p.world, p.topology, set.Channels, p.opts.MaxMemory, p.opts.MaxMemoryIsDefault); err != nil {
			return nil, err
		}
		if beforeBuild != nil {
			beforeBuild(mp)
		}
		sips := mp.UsedSips(p.world)
		if parts, err = sim.NewPartitioned(len(sips), mp.Lookahead()); err == nil {
			err = parts.SetThreads(mode.threads)
		}
		if err != nil {
			return nil, report.WithKind(errkind.Internal, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
		}
		parts.SetJitter(p.opts.JitterSeed)
		parts.MaxTime = maxTime
		for _, pt := range parts.Partitions() {
			pt.Sim.InstantLimit = instantLimit(mp)
		}
		m, err = machine.NewPartitionedOn(parts, mp, sips)
	} else {
		s = sim.New()
		s.SetJitter(p.opts.JitterSeed)
		s.MaxTime = maxTime
		s.InstantLimit = instantLimit(mp)
		m, err = machine.New(s, mp)
	}
	if err != nil {
		return nil, report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	if err := mp.Holds(p.world); err != nil {
		return nil, report.WithKind(errkind.Init, &report.Failure{Rank: -1, Msg: p.opts.inOptionTerms(err.Error()), Err: err})
	}
	if err := admit.World(p.world, p.topology, set.Channels, p.opts.MaxMemory, p.opts.MaxMemoryIsDefault); err != nil {
		return nil, err
	}
	if parts == nil && beforeBuild != nil {
		// (One Sim and a machine of no ranks yet: made before the
		// checks, as they were before beforeBuild.)
		beforeBuild(mp)
	}
	if placing != nil {
		placing(p.world, p.opts.probe)
	}
	if err := m.Place(p.world); err != nil {
		return nil, report.WithKind(errkind.Init, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	if p.opts.TimingOnly {
		m.SetTimingOnly()
	} else if p.opts.Verify || p.opts.OpLog != nil || p.opts.ExportChakra != nil {
		if parts != nil {
			// A log per SIP, merged by time after the run (mergeOutputs).
			err = m.SplitLogs()
			if err == nil && p.opts.witness {
				err = m.WitnessSplitLogs()
			}
			if err != nil {
				return nil, report.WithKind(errkind.Internal, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
			}
		} else {
			m.Log = &oplog.Log{}
			if p.opts.witness {
				m.Log.Witness()
			}
		}
		if p.opts.witness {
			tl.WatchOrigins(m)
		}
	}
	w := &world{s: s, parts: parts, m: m, sys: cfg.System, set: set, traceOut: p.opts.Trace, oplogOut: p.opts.OpLog, dump: p.opts.DumpPointers, warn: p.opts.Stderr,
		verifies: p.opts.Verify}
	w.installGuard(p.opts.MaxMemory, p.opts.MaxMemoryIsDefault)
	if p.opts.Trace != nil {
		w.trace = trace.New()
		var pids []int
		if p.opts.TraceRanks != nil {
			pids = []int{}
			for _, r := range p.opts.TraceRanks {
				if r < 0 || r >= len(m.Ranks) {
					return nil, report.WithKind(errkind.Usage, &report.Failure{Rank: -1,
						Msg: fmt.Sprintf("--trace-ranks: rank %d is not in this run of %d rank(s)", r, len(m.Ranks))})
				}
				pids = append(pids, m.Ranks[r].ID+1)
			}
		}
		w.trace.Only(pids, p.opts.TraceKinds)
		m.EnableTrace(w.trace)
		if parts != nil {
			if err := m.SplitTrace(); err != nil {
				return nil, report.WithKind(errkind.Internal, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
			}
		}
	}
	if parts != nil && (p.opts.Stderr != nil && !p.opts.silent || p.opts.CCLTrace != nil) {
		w.prints = newPrints(len(parts.Partitions()))
		parts.AtBarrier = w.prints.flush
	}
	return w, nil
}

// now is the simulated time: the one Sim's, or the latest partition's.
func (w *world) now() sim.Time {
	if w.parts != nil {
		return w.parts.Now()
	}
	return w.s.Now()
}

// events is the number of events the run fired.
func (w *world) events() uint64 {
	if w.parts != nil {
		return w.parts.Events()
	}
	return w.s.Events()
}

// blocked lists the processes that have not finished (Sim.Blocked).
func (w *world) blocked() []*sim.Proc {
	if w.parts != nil {
		return w.parts.Blocked()
	}
	return w.s.Blocked()
}

// mergeOutputs makes a partitioned run's one op_log and trace of its
// SIPs' (merged by time: the same for every number of threads), once the
// run is over.
func (w *world) mergeOutputs() error {
	if w.parts == nil {
		return nil
	}
	if w.m.Logging() {
		if err := w.m.MergeSplitLogs(); err != nil {
			return report.WithKind(errkind.Internal, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
		}
	}
	if w.trace != nil {
		tr, err := w.m.MergedTrace()
		if err != nil {
			return report.WithKind(errkind.Internal, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
		}
		w.trace = tr
	}
	return nil
}

// snapshot starts keeping the initial memory image (phase 2 starts from
// it), copy-on-first-write: phase 1 copies a block of memory only before
// first writing it, so what the run only reads costs no copy. Verified or
// not, it tells the collector the large blocks the run holds (gc.go).
func (w *world) snapshot() {
	var n int64
	for _, mem := range w.m.Mems {
		n += mem.Size()
	}
	if !w.m.Logging() || !w.verifies {
		// The memory alone lives until the run is done: without the tighter
		// headroom a kernel that allocates much (rd_allreduce 8 × 16M
		// --verify-data=false) doubled it before the collector ran.
		w.releaseHeap = hostmem.HoldLargeHeap(n)
		return
	}
	w.m.KeepPreRun()
	w.keptImage = true
	if onKeepPreRun != nil {
		w.atPhase2 = onKeepPreRun(w.m)
	}
	// The saved blocks (at most a copy of the memory) and the memory live
	// until phase 2 is done.
	w.releaseHeap = hostmem.HoldLargeHeap(2 * n)
}

// onKeepPreRun, when set (tests only), runs when a world starts keeping
// its pre-run image; the function it returns runs as phase 2 starts.
var onKeepPreRun func(m *machine.Machine) (atPhase2 func())

// phase2 replays the op_log on the initial image and compares the result
// with phase 1's memory; it fills Phase2Match and, on a mismatch, Phase2.
func (w *world) phase2(p *plan, res *report.Result) error {
	if w.m.Log == nil {
		return nil
	}
	if p.opts.OpLog != nil {
		if err := w.m.Log.WriteJSONLines(p.opts.OpLog); err != nil {
			return report.WithKind(errkind.IO, &report.Failure{Rank: -1, Msg: fmt.Sprintf("--oplog: %v", err), Err: err})
		}
	}
	if !p.opts.Verify || !w.keptImage {
		return nil
	}
	// The replay runs on the saved blocks themselves (nothing needs them
	// afterwards) over the live memory, which it only reads: no copies.
	if w.atPhase2 != nil {
		w.atPhase2()
	}
	ov := w.m.PreRunOverlay()
	w.m.DropPreRun()
	match := true
	if w.memoryLimit > 0 {
		w.m.Log.Guard = hostmem.TurnGuard(w.memoryLimit, true, w.outOfMemory)
	}
	var oom *hostmem.OutOfMemoryError
	if msg := w.m.Log.CheckCausality(); msg != "" {
		match = false
		res.Phase2 = msg
	} else if err := w.m.Log.ReplayOverlay(ov); errors.As(err, &oom) {
		// The host-memory guard, not a mismatch: the run stops as in
		// phase 1 (exit 3).
		return report.WithKind(errkind.HostMemory, &report.Failure{Rank: -1, Msg: "phase 2 (the replay of the op_log): " + err.Error(), Err: err})
	} else if err != nil {
		match = false
		res.Phase2 = err.Error()
	} else if mm := ov.CompareLog(w.m.Log); mm != nil {
		match = false
		res.Phase2, res.Mismatch = mm.String(), mm
	}
	res.Phase2Match = &match
	return nil
}

// install resolves the topology and installs the IPCQ group (init_process_group).
func (w *world) install(p *plan, tgt *target.Target, loader *script.Loader, hook starlark.Callable) error {
	links, err := neighborLinks(p, tgt, loader, hook, w.sys)
	if err != nil {
		return err
	}
	return w.installLinks(p, tgt, links)
}

// neighborLinks resolves the topology of p's world on the machine sys:
// every rank's directions (wiring.NeighborTables, the module's
// neighbors() included), or the run's failure.
func neighborLinks(p *plan, tgt *target.Target, loader *script.Loader, hook starlark.Callable, sys config.System) ([][]machine.Link, error) {
	spec := wiring.MapSpec{File: tgt.File, Hook: hook, Params: p.params, Sys: sys}
	spec.Shape(p.topology, p.world, tgt.Settings)
	links, _, err := wiring.NeighborTables(spec, loader.NewThread("init"))
	if err != nil {
		// The message says which call failed (neighbors(r, w, ...) of which
		// file) before the Starlark traceback, as a kernel's error names
		// its rank: the traceback alone began "Traceback".
		f := report.WithKind(errkind.Init, &report.Failure{Rank: -1, Msg: script.Format(err), Err: err})
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			f.Msg, f.Detail, f.Backtrace = err.Error(), script.Traceback(ee), script.Backtrace(ee)
		}
		return nil, failure.StepLimit(f)
	}
	return links, nil
}

// installLinks installs the IPCQ group of links, the world's directions
// (neighborLinks).
func (w *world) installLinks(p *plan, tgt *target.Target, links [][]machine.Link) error {
	icfg, err := wiring.IPCQConfig(tgt.Settings)
	if err != nil {
		return report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	icfg.StagingKind = tgt.Staging
	if p.opts.Untimed {
		icfg.Overhead, icfg.Backpressure = 0, machine.Sleep
	}
	if w.g, err = w.m.Install(links, icfg); err != nil {
		return report.WithKind(errkind.Init, &report.Failure{Rank: -1, Msg: tgt.File + ": " + err.Error(), Err: err})
	}
	w.g.Paranoid = p.opts.Check
	// Nothing takes time in the mock: a send stays in flight for the
	// hazard checks until its receiver takes it or the sender flushes.
	w.g.HoldSends = p.opts.Untimed
	if out := p.opts.CCLTrace; out != nil {
		line := func(q *machine.QueuePair, op string, meta machine.MsgMeta, at sim.Time) {
			s := fmt.Sprintf("t=%v rank=%d op=%s dir=%s nbytes=%d seq=%d peer=%d\n", at, q.Rank, op, q.Dir, meta.NBytes, meta.Seq, q.Peer)
			if w.prints != nil {
				// A partitioned run's partitions take turns by window:
				// the lines go out with its prints, in time order.
				w.prints.add(w.m.RankPartition(q.Rank).ID, at, out, s)
				return
			}
			io.WriteString(out, s)
		}
		w.g.OnSend = func(q *machine.QueuePair, meta machine.MsgMeta, at sim.Time) { line(q, "send", meta, at) }
		w.g.OnRecv = func(q *machine.QueuePair, meta machine.MsgMeta, _ machine.Region, at sim.Time) {
			line(q, "recv", meta, at)
		}
	}
	return nil
}

// run simulates to the end; failed turns the error that ended a failed
// run into its failure (the bench's; the memory watch's stop is the
// guard's first).
func (w *world) run(failed func(error) error) error {
	limit := sim.Time(w.set.DeadlockTimeoutNs) * sim.Nanosecond
	var err error
	if w.parts != nil {
		w.parts.WaitWatchdog(limit)
		err = w.parts.Run()
		w.prints.flush() // (the lines of the window a stop ended)
		err = w.memoryAtReturn(err)
	} else {
		w.s.WaitWatchdog(limit)
		err = w.s.Run()
	}
	if merr := w.mergeOutputs(); merr != nil {
		return merr
	}
	var runFailure error
	if err != nil {
		// Read the blocked processes' state before Close unwinds them.
		runFailure = failed(w.memoryStop(err))
	} else if w.g != nil {
		if err := w.g.CheckQuiescent(); err != nil {
			var u *machine.UnreceivedError
			if errors.As(err, &u) {
				runFailure = failure.Unreceived(u)
			} else {
				runFailure = report.WithKind(errkind.Invariant, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
			}
		}
	}
	if w.g != nil && w.dump != nil {
		if runFailure == nil && len(w.finish) > 0 {
			fmt.Fprintf(w.dump, "# queue pair pointers at t=%v, when the last kernel returned\n", slices.Max(w.finish))
		} else {
			// The failure's message says when; the clock may have moved
			// past it to the watchdog check that found it.
			fmt.Fprintln(w.dump, "# queue pair pointers when the run stopped")
		}
		w.g.DumpPointers(w.dump)
	}
	if w.cancelBlocked {
		for _, p := range w.blocked() {
			if th, ok := p.Data.(*starlark.Thread); ok {
				script.Cancel(th, "the simulation ended")
			}
		}
	}
	if w.parts != nil {
		w.parts.Close()
	} else {
		w.s.Close()
	}
	if w.trace != nil {
		// Written even when the run failed: the timeline up to the failure
		// is what explains it (blocked operations end when the run ended).
		if werr := w.writeTrace(); werr != nil && runFailure == nil {
			return report.WithKind(errkind.IO, &report.Failure{Rank: -1, Msg: fmt.Sprintf("--trace: %v", werr), Err: werr})
		}
	}
	return w.writeFailedOplog(runFailure)
}

// instantLimit is the simulation's bound on the events of one instant
// (sim.InstantLimit): none on the untimed mock's machine, where every
// event is at time 0.
func instantLimit(mp machine.Params) uint64 {
	if mp.Untimed {
		return 0
	}
	return sim.DefaultInstantLimit
}

// spawn starts one process per rank running body; a body error stops the
// simulation. Each rank's finish time is noted in w.finish as it ends.
func (w *world) spawn(n int, loader *script.Loader, body func(r int, th *starlark.Thread, p *sim.Proc) error) {
	finish := make([]sim.Time, n)
	w.finish = finish
	w.spent = make([][sim.MaxActivities]sim.Time, n)
	for r := 0; r < n; r++ {
		name := "rank " + strconv.Itoa(r)
		th := loader.NewThread(name)
		w.bufferPrints(th, r)
		body := func(proc *sim.Proc) {
			err := body(r, th, proc)
			s := proc.Sim() // (its SIP's on partitions)
			finish[r] = s.Now()
			w.spent[r] = proc.Spent
			if err == nil && w.outOfMemory != nil {
				if oom := w.checkAtReturn(s.Now()); oom != nil {
					s.Stop(oom)
					return
				}
			}
			if err != nil && !errors.Is(err, sim.ErrKilled) {
				s.Stop(&failure.RankError{Rank: r, Proc: proc, Err: err})
			}
		}
		// A kernel's Starlark frames take its stack past 8 KiB.
		var proc *sim.Proc
		if w.parts != nil {
			proc = w.parts.SpawnDeep(w.m.RankPartition(r).ID, name, body)
		} else {
			proc = w.s.SpawnDeep(name, body)
		}
		proc.Data = th
	}
}

// bufferPrints sends the print lines of th, a thread of rank's kernel, to
// its SIP's buffer in a partitioned run (prints).
func (w *world) bufferPrints(th *starlark.Thread, rank int) {
	if w.prints == nil {
		return
	}
	pe := w.m.Ranks[rank]
	part := w.m.RankPartition(rank).ID
	script.SetPrintSink(th, func(out io.Writer, line string) {
		w.prints.add(part, pe.Sim().Now(), out, line)
	})
}
