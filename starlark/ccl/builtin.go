package ccl

// The builtin collective bench as a bench: the algorithm's kernel on
// every rank over the collective's buffers (bench.go), checked against
// the collective's reference. MSCCL schedules (their runner kernel) and
// the mock (an untimed world) run through it.

import (
	"runtime"

	"go.starlark.net/starlark"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/failure"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/hostmem/admit"
	"kernbench/starlark/mscclio"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
	"kernbench/starlark/tl"
	"kernbench/starlark/wiring"
)

// collectiveBench is one size of the builtin bench.
type collectiveBench struct {
	p            *plan
	cfg          *config.Config
	tgt          *target.Target
	loader       *script.Loader
	kernel, hook starlark.Callable
	count        int64

	est   hostmem.Estimate // the admitted estimate (-v: Result.HostMemory)
	buf   *buffers
	stats []tl.Stats
	rec   *mscclio.Recorder // --export-msccl

	// What probeFirst made before the world was built, for setUp: the
	// world's directions (links, or linksErr: their failure; haveLinks
	// says either is set) and the probes run, by world and count.
	links     [][]machine.Link
	linksErr  error
	haveLinks bool
	probed    map[probeOf]probeResult
}

// probeOf is a probe's world and count per rank; probeResult what it
// counted, or its failure.
type probeOf struct {
	world int
	count int64
}

type probeResult struct {
	counts *hostmem.Counts
	err    error
}

// simulateOnce simulates one size of the builtin collective bench.
func simulateOnce(p *plan, cfg *config.Config, tgt *target.Target, loader *script.Loader, kernel, hook starlark.Callable, count int64) (*report.Result, error) {
	return simulate(p, cfg, tgt.Settings, &collectiveBench{p: p, cfg: cfg, tgt: tgt, loader: loader, kernel: kernel, hook: hook, count: count})
}

// setUp installs the queue pairs, admits the size (the host-memory
// estimate, with a probe run when it is near the limit) and fills the
// buffers.
func (b *collectiveBench) setUp(w *world) error {
	p, count := b.p, b.count
	w.procNote = p.procNote
	if !p.opts.TimingOnly {
		w.m.UseBuffers(p.bufs)
	}
	var err error
	if b.haveLinks {
		err = b.linksErr
		if err == nil {
			err = w.installLinks(p, b.tgt, b.links)
		}
		b.links = nil
	} else {
		err = w.install(p, b.tgt, b.loader, b.hook)
	}
	if err != nil {
		return err
	}
	if err := checkFits(p, w.m, count); err != nil {
		return refusedInSweep(p, err)
	}
	if err := checkSpace(p, w.m, count); err != nil {
		return refusedInSweep(p, err)
	}
	if b.est, err = p.checkMemory(count, admit.Rings(w.g), b.probe); err != nil {
		return err
	}
	b.probed = nil
	w.atClose(p.budget.Acquire(b.est.Total()))
	b.buf, err = newBuffers(p, w.m, count)
	return err
}

// probe is the size's probe (admit.Probe): a --timing-only run of count
// elements per rank at world ranks, silent, that counts what it holds;
// one probeFirst ran already is not run again.
func (b *collectiveBench) probe(world int, count int64) (*hostmem.Counts, error) {
	at := probeOf{world, count}
	if r, ok := b.probed[at]; ok {
		return r.counts, r.err
	}
	p := b.p
	q := *p
	q.opts = silent(p.opts)
	q.opts.TimingOnly, q.opts.Verify, q.opts.ProbeMemory, q.opts.probe = true, false, false, true
	q.budget, q.world, q.opts.scaledProbe = nil, world, world != p.world
	res, err := simulateOnce(&q, b.cfg, b.tgt, quiet(b.loader, q.opts), b.kernel, b.hook, count)
	// What the probe held is collected before the run allocates, and its
	// pages stay with the runtime for the run, which is larger than its
	// probes and reuses them: returned (debug.FreeOSMemory), they were
	// faulted in again, and a first touch is most of a large run's
	// system time (docs/performance.md, "Set-up at scale"). A memory
	// guard that finds the process over its limit still returns them
	// (hostmem.Settle, TurnGuard).
	runtime.GC()
	var c *hostmem.Counts
	if err == nil {
		c = res.Counts
	}
	if b.probed != nil {
		b.probed[at] = probeResult{c, err}
	}
	return c, err
}

// probeFirst runs the probes the size's memory admission will ask for
// (checkMemory in setUp) before the world is built (newWorld's
// beforeBuild, mp the machine's parameters), and keeps what they count
// for it. A probe's looks (tl.Retention) are full collections, which mark
// all the process holds: run while the world was set up they marked it
// too, 300 MB at 65,536 ranks, at each of 24 looks. The admission's
// decision needs the world's receive rings, which follow from its
// directions (admit.LinkRings), resolved here once for setUp's install.
// A run whose rings or buffers will not fit its simulated memory, and one
// with a system.placement (Place checks it), are left to setUp, which
// refuses them before any probe; so are runs with no limit to check.
func (b *collectiveBench) probeFirst(mp machine.Params) {
	p := b.p
	if p.opts.probe || p.opts.MaxMemory <= 0 && !p.opts.ProbeMemory || mp.Placement != nil {
		return
	}
	b.links, b.linksErr = neighborLinks(p, b.tgt, b.loader, b.hook, b.cfg.System)
	b.haveLinks = true
	if b.linksErr != nil {
		return
	}
	icfg, err := wiring.IPCQConfig(b.tgt.Settings)
	if err != nil || !b.fitsBeforePlace(mp, icfg) {
		return
	}
	b.probed = map[probeOf]probeResult{}
	// The estimate is setUp's to make: this one only runs the probes.
	_, _ = p.checkMemory(b.count, admit.LinkRings(b.links, icfg), b.probe)
}

// fitsBeforePlace says whether every rank's receive rings (icfg) and
// bench buffers fit its memories of mp, as Install, checkFits and
// checkSpace will find once the ranks are placed; false also where it
// cannot tell (rings or buffers in a cube's shared SRAM).
func (b *collectiveBench) fitsBeforePlace(mp machine.Params, icfg machine.IPCQConfig) bool {
	p := b.p
	capacity := func(s machine.Space) int64 {
		switch s {
		case machine.TCM:
			return mp.Tcm.Capacity
		case machine.HBM:
			return mp.Hbm.Capacity
		}
		return -1
	}
	ringCap, dataCap := capacity(icfg.BufferKind), capacity(p.dataSpace)
	if ringCap < 0 || dataCap < 0 {
		return false
	}
	sz := int64(p.dt.Size())
	sc, rc := hostmem.SatMul(p.coll.sendCount(b.count, p.world), sz), hostmem.SatMul(p.coll.recvCount(b.count, p.world), sz)
	need := hostmem.SatAdd(sc, rc)
	if p.opts.InPlace {
		need = max(sc, rc)
	}
	ring := hostmem.SatMul(int64(icfg.NSlots), icfg.SlotSize)
	for _, ls := range b.links {
		rings := hostmem.SatMul(int64(len(ls)), ring)
		used := int64(0)
		if icfg.BufferKind == p.dataSpace {
			used = rings
		}
		if rings > ringCap || hostmem.SatAdd(used, need) > dataCap {
			return false
		}
	}
	return true
}

// spawn calls kernel(sendbuf, recvbuf, rank, world_size, tl=tl, **params)
// on every rank.
func (b *collectiveBench) spawn(w *world) {
	p, loader := b.p, b.loader
	b.stats = make([]tl.Stats, p.world)
	stats := b.stats
	b.buf.keepSentinels(w)
	if p.opts.ExportMSCCL != nil {
		b.rec = mscclio.NewRecorder(p.world)
	}
	// One pool of recycled handles for all ranks: the handle a rank's
	// load reuses is the one recycled last, still in cache. On partitions
	// each SIP has its own (its ranks run on its partition's thread).
	handles := []*tl.HandlePool{{}}
	if w.m.Partitioned() {
		for range w.m.Params.Sips - 1 {
			handles = append(handles, &tl.HandlePool{})
		}
	}
	if p.opts.probe {
		r := tl.NewRetention(hostmem.ViewBytes, hostmem.HandleBytes)
		if p.opts.scaledProbe {
			r.Fine(p.world)
		}
		w.atClose(r.Close)
		for i := range stats {
			stats[i].Retained = r
		}
	}
	w.spawn(p.world, loader, func(r int, th *starlark.Thread, proc *sim.Proc) error {
		pool := handles[0]
		if len(handles) > 1 {
			pool = handles[w.m.Ranks[r].Sip]
		}
		kt := &tl.Kernel{M: w.m, G: w.g, EP: w.g.EPs[r], PE: w.m.Ranks[r], Rank: r, World: p.world, RedOp: p.red, Stats: &stats[r], Proc: proc, Handles: pool, MaxSteps: p.opts.MaxSteps,
			NewThread: func(name string, t *tl.Kernel) *starlark.Thread {
				th := loader.NewThread(name)
				w.bufferPrints(th, r)
				th.SetLocal(kernelKey, t)
				th.SetLocal(tl.ViewsKey, t)
				return th
			},
			// (The rank's Sim: its SIP's partition on partitions, where
			// a stop ends the run at the window's barrier.)
			Fail: func(err error) { w.m.RankSim(r).Stop(&failure.RankError{Rank: r, Err: err}) }}
		stats[r].InstantCalls = tl.InstantCallLimit(b.buf.send[r].Reg.N+b.buf.recv[r].Reg.N, p.opts.MaxSteps)
		if loader.MemoryWatch != nil {
			// Tiles are refused before they pass --max-memory.
			kt.NoteAlloc = hostmem.NoteAlloc
		}
		if b.rec != nil {
			kt.Rec = b.rec
		}
		k := tl.New(kt)
		th.SetLocal(kernelKey, k)
		th.SetLocal(tl.ViewsKey, k)
		args := starlark.Tuple{b.buf.send[r], b.buf.recv[r], starlark.MakeInt(r), starlark.MakeInt(p.world)}
		kw := append(append([]starlark.Tuple(nil), p.params...), starlark.Tuple{starlark.String("tl"), k})
		_, err := starlark.Call(th, b.kernel, args, kw)
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
		duringPhase1(w.m, b.buf.send)
	}
}

func (b *collectiveBench) failure(w *world, err error) error {
	return failure.Sim(err, w.procNote, w.faultsHeld())
}

// finish checks every rank's recv buffer against the reference.
func (b *collectiveBench) finish(w *world, runErr error) (*report.Result, error) {
	if runErr != nil {
		return nil, runErr
	}
	p := b.p
	if afterPhase1 != nil {
		afterPhase1(w.m)
	}
	b.buf.keepInputs(w)
	res := w.result(p, b.count, b.stats)
	if p.opts.Detail {
		est := b.est
		res.HostMemory = &est
	}
	if p.opts.Verify && !p.opts.TimingOnly {
		b.buf.verify(res)
		if res.Wrong > 0 {
			res.Disconnected = disconnected(w.g)
		}
	} else if b.count > 0 {
		// Nothing checks this run's data, but a collective whose
		// messages leave the ranks in groups cannot be right: say so
		// rather than print a plausible time for a wrong kernel.
		res.Disconnected = disconnected(w.g)
	}
	if p.opts.KeepOutputs && !p.opts.TimingOnly {
		for _, r := range b.buf.recv {
			res.Outputs = append(res.Outputs, append([]byte(nil), r.Reg.View()...))
		}
	}
	return res, nil
}

func (b *collectiveBench) export(w *world, res *report.Result) error {
	if b.rec != nil {
		if err := exportMSCCL(b.rec, b.p, b.buf, w.g, b.count, b.p.opts.ExportMSCCL); err != nil {
			return err
		}
	}
	if b.p.opts.ExportChakra != nil {
		return exportChakra(b.p, w, res)
	}
	return nil
}

// duringPhase1, when set (tests only), runs before the kernels start,
// e.g. to schedule a change of memory behind the op_log's back.
var duringPhase1 func(m *machine.Machine, send []*tl.Ptr)

// afterPhase1, when set (tests only), runs on the machine after the kernels
// and before the checks, e.g. to change memory behind the op_log's back.
var afterPhase1 func(m *machine.Machine)
