package ccl

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"kernbench/engine/machine"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

// The memory guard (--max-memory). Host memory is what a run can run out
// of long before its simulated machine does: the simulated memory of the
// bench's buffers, the pre-run image phase 2 keeps, the op_log (a record
// per data operation), per-rank state and what the kernels keep in their
// Starlark values. Before a run hostmem's estimate is compared with the
// limit here (over it: exit 2, naming what would fit); during the run
// hostmem's guard, installed below, ends a run whose process passes the
// limit with exit 3 instead of the Go runtime's fatal error. This file is
// the glue: what of the plan and the world the guard needs.

// memRun is what the host-memory estimate knows of a run of count
// elements per rank (hostmem.Run): the collective's buffers and bus bytes
// at this size and world, and the run's modes. A timing-only run's
// estimate reads none of the collective's figures: they are left out.
func (p *plan) memRun(count int64) hostmem.Run {
	r := hostmem.Run{World: p.world, TimingOnly: p.opts.TimingOnly, Verify: p.opts.Verify, KeepsLog: p.opts.OpLog != nil || p.opts.ExportChakra != nil, InPlace: p.opts.InPlace}
	if !p.opts.TimingOnly {
		sz := int64(p.dt.Size())
		r.SendBytes, r.RecvBytes = hostmem.SatMul(p.coll.sendCount(count, p.world), sz), hostmem.SatMul(p.coll.recvCount(count, p.world), sz)
		r.CountBytes = hostmem.SatMul(count, sz)
		r.BusFactor = p.coll.BusFactor(p.world)
		r.Alltoall, r.KeepsRecv = p.coll.Name == "alltoall", p.coll.KeepsRecv()
	}
	return r
}

// estimateMemory is the configuration's estimate for one size: count
// elements per rank, rg the installed receive rings.
func (p *plan) estimateMemory(count int64, rg hostmem.Rings) hostmem.Estimate {
	return hostmem.Configured(p.memRun(count), rg)
}

// estimateCounted is the estimate for one size from a probe's counts c.
func (p *plan) estimateCounted(count int64, rg hostmem.Rings, c *hostmem.Counts) hostmem.Estimate {
	return hostmem.Counted(p.memRun(count), rg, c)
}

// probeFunc makes a size's probe: a --timing-only run of count elements
// per rank at world ranks that counts (estimateCounted) and prints and
// writes nothing.
type probeFunc func(world int, count int64) (*hostmem.Counts, error)

// probeShare: a run whose configuration's estimate is over 1/probeShare of
// the limit is counted by a probe before it is admitted. A --timing-only
// run's configuration cannot tell what its kernels keep, which is all it
// holds: it is at 0.3 of the peak for kernels that keep a view and a
// handle per piece (ring_allreduce_manual at 128 ranks × 256K); such a
// run is counted from over 1/timingProbeShare of the limit.
const (
	probeShare       = 2
	timingProbeShare = 8
)

// checkMemory refuses a size whose estimate is over opts.MaxMemory (exit
// 2), naming what would fit. The failure wraps a *Refusal, which a sweep
// of several sizes makes that size's row (Options.RefusedAsRows). probe,
// when not nil, counts the run (see estimateCounted) when its
// configuration's estimate is over half the limit (an eighth for a
// --timing-only run), or always with Options.ProbeMemory.
func (p *plan) checkMemory(count int64, rg hostmem.Rings, probe probeFunc) (hostmem.Estimate, error) {
	limit := p.opts.MaxMemory
	e := p.estimateMemory(count, rg)
	estimate := func(q *plan) hostmem.Estimate { return q.estimateMemory(count, rg) }
	share := int64(probeShare)
	if p.opts.TimingOnly {
		share = timingProbeShare
	}
	// A probe is not probed: it is a --timing-only run, which would count
	// itself by a probe of itself, and so on.
	if probe != nil && !p.opts.probe && (p.opts.ProbeMemory || limit > 0 && e.Total() > limit/share) && p.probeFits(count, rg) {
		c, err := p.countRun(count, probe)
		switch k := errkind.Of(err); {
		case c != nil:
			conf := e.Total()
			e = p.estimateCounted(count, rg, c)
			e.Configured = conf
			estimate = func(q *plan) hostmem.Estimate { return q.estimateCounted(count, rg, c) }
		case k == errkind.MemoryLimit || k == errkind.HostMemory:
			// The probe holds less than the run: neither fits.
			return e, p.probeRefused(count, e, err)
		}
		// Any other failure of the probe (a kernel that reads values
		// fails without them) leaves the configuration's estimate; the
		// run reports its own failure.
	}
	if limit <= 0 || e.Total() <= limit {
		return e, nil
	}
	ref := &report.Refusal{Kind: errkind.MemoryLimit.Name, Estimate: e.Total(), Limit: limit}
	var alts []string
	try := func(flag string, mod func(q *plan)) int64 {
		q := *p
		mod(&q)
		t := estimate(&q).Total()
		fit := "fits"
		if t > limit {
			fit = "too large too"
		}
		alts = append(alts, fmt.Sprintf("%s (about %s: %s)", flag, hostmem.FormatBytes(t), fit))
		return t
	}
	if !p.opts.TimingOnly {
		ref.TimingOnly = try("--timing-only", func(q *plan) { q.opts.TimingOnly = true })
		if p.opts.Verify {
			try("--verify-data=false", func(q *plan) { q.opts.Verify = false })
		}
	}
	// The largest power-of-two buffer (whole elements) that fits.
	sz := int64(p.dt.Size())
	fitBytes := int64(-1)
	for b := int64(1) << 40; b >= sz; b /= 2 {
		if b/sz < count && p.estimateMemory(b/sz, rg).Total() <= limit {
			fitBytes = b / sz * sz
			break
		}
	}
	if fitBytes > 0 {
		alts = append(alts, fmt.Sprintf("--bytes %s or smaller (about %s)", flagSize(fitBytes), hostmem.FormatBytes(p.estimateMemory(fitBytes/sz, rg).Total())))
	} else {
		alts = append(alts, "a smaller --bytes (none fits at this world size)")
	}
	lt := hostmem.LimitText(limit, p.opts.MaxMemoryIsDefault)
	parts := e.Parts()
	if e.Basis == hostmem.BasisCounted {
		parts += "; " + e.CountedBy()
	}
	ref.Message = fmt.Sprintf("this run (%s per rank buffer) needs about %s of host memory (%s), over --max-memory %s; alternatives: %s; or raise --max-memory",
		flagSize(hostmem.SatMul(count, sz)), hostmem.FormatBytes(e.Total()), parts, lt, strings.Join(alts, ", "))
	ref.Reason = fmt.Sprintf("needs about %s of host memory, over --max-memory %s; ", hostmem.FormatBytes(e.Total()), lt)
	switch {
	case p.opts.TimingOnly:
		ref.Reason += "raise --max-memory"
	case ref.TimingOnly <= limit:
		ref.Reason += fmt.Sprintf("--timing-only runs it (about %s)", hostmem.FormatBytes(ref.TimingOnly))
	default:
		ref.Reason += fmt.Sprintf("too large for --timing-only too (about %s): raise --max-memory", hostmem.FormatBytes(ref.TimingOnly))
	}
	return e, report.WithKind(errkind.MemoryLimit, &report.Failure{Rank: -1, Msg: ref.Message, Err: ref})
}

// countRun counts a size with probe: under 1024 ranks by a --timing-only
// run of itself (the same operations and kernel values without bytes, in
// little memory); from 1024 ranks, where that costs about what a
// --timing-only run of the size costs (minutes at 4096 ranks, and a
// timing-only run would pay it twice), by probes of a sixteenth and a
// quarter of its world (hostmem.ScaledWorlds) with the same chunk per
// peer, extrapolated (hostmem.Extrapolate: about 1/16 of the run's work
// for a ring's p² messages; docs/architecture.md has the runs it was
// measured on). When a smaller world does not run (a topology or
// placement it does not fit), the run itself is the probe.
func (p *plan) countRun(count int64, probe probeFunc) (*hostmem.Counts, error) {
	w1, w2, ok := hostmem.ScaledWorlds(p.world)
	if !ok {
		return probe(p.world, count)
	}
	c1, err := probe(w1, p.scaledCount(count, w1))
	if err != nil {
		if k := errkind.Of(err); k == errkind.MemoryLimit || k == errkind.HostMemory {
			return nil, err
		}
		return probe(p.world, count)
	}
	c2, err := probe(w2, p.scaledCount(count, w2))
	if err != nil {
		if k := errkind.Of(err); k == errkind.MemoryLimit || k == errkind.HostMemory {
			return nil, err
		}
		return probe(p.world, count)
	}
	return hostmem.Extrapolate(w1, c1, w2, c2, p.world), nil
}

// scaledCount is the count per rank at world ranks whose chunk per peer is
// that of count at the plan's world: the same for a collective whose
// buffers grow with the world (allgather, reduce_scatter, alltoall), the
// world's share of it otherwise, a whole number of elements per rank.
func (p *plan) scaledCount(count int64, world int) int64 {
	if p.coll.SendMul || p.coll.RecvMul {
		return count
	}
	n := count / int64(p.world) * int64(world)
	if count%int64(p.world) != 0 {
		n = count * int64(world) / int64(p.world)
	}
	return max(1, n)
}

// probeFits says whether the probe of a size may run: the
// configuration's estimate of it (a --timing-only run) is within the
// limit. One that is not is no help: the run is checked with the
// configuration's estimate, whose refusal says --timing-only does not fit
// either. A --timing-only run, whose configuration cannot tell what it
// holds, and a run whose probes are of smaller worlds
// (hostmem.ScaledWorlds), which hold less than its own --timing-only run,
// are probed unless that estimate is over probeReach times the limit:
// then no count could admit them, and their probes could take long (a
// 16384-rank ring × 256M probed at 4096 ranks × 64M for minutes).
func (p *plan) probeFits(count int64, rg hostmem.Rings) bool {
	if p.opts.MaxMemory <= 0 {
		return true
	}
	q := *p
	q.opts.TimingOnly = true
	conf := q.estimateMemory(count, rg).Total()
	if _, _, scaled := hostmem.ScaledWorlds(p.world); p.opts.TimingOnly || scaled {
		return conf/probeReach <= p.opts.MaxMemory
	}
	return conf <= p.opts.MaxMemory
}

// probeReach: the configuration's estimate of a --timing-only run is at
// most 2.4 times its peak on the shipped algorithms
// (ring_allreduce_unidir at 512 ranks × 4K).
const probeReach = 4

// probeRefused is the refusal of a size whose probe passed the limit
// (err): the run would hold more than its probe.
func (p *plan) probeRefused(count int64, e hostmem.Estimate, err error) error {
	limit := p.opts.MaxMemory
	lt := hostmem.LimitText(limit, p.opts.MaxMemoryIsDefault)
	ref := &report.Refusal{Kind: errkind.MemoryLimit.Name, Estimate: e.Total(), Limit: limit, TimingOnly: limit + 1}
	held := ""
	var oom *hostmem.OutOfMemoryError
	if errors.As(err, &oom) {
		held = fmt.Sprintf(" (it held %s at t=%v)", hostmem.FormatBytes(oom.Held), oom.At)
	}
	// What the probe was: a run that moves bytes holds more than its
	// --timing-only probe; a --timing-only run as much as a probe of
	// itself, more than the probes of smaller worlds.
	probe := "its --timing-only probe, which holds less,"
	if _, _, scaled := hostmem.ScaledWorlds(p.world); p.opts.TimingOnly && !scaled {
		probe = "a probe of it (the same --timing-only run)"
	}
	ref.Message = fmt.Sprintf("this run (%s per rank buffer) does not fit --max-memory %s: %s passed it%s; "+
		"alternatives: a smaller --bytes or --world-size, or raise --max-memory", flagSize(hostmem.SatMul(count, int64(p.dt.Size()))), lt, probe, held)
	ref.Reason = fmt.Sprintf("its --timing-only probe passed --max-memory %s: raise --max-memory", lt)
	return report.WithKind(errkind.MemoryLimit, &report.Failure{Rank: -1, Msg: ref.Message, Err: ref})
}

// flagSize writes n as a size flag takes it (64K, 1M).
func flagSize(n int64) string {
	for _, u := range []struct {
		s string
		n int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return fmt.Sprintf("%d%s", n/u.n, u.s)
		}
	}
	return strconv.FormatInt(n, 10)
}

// installGuard makes the world's simulation, and its phase 2, stop when
// the process passes limit (hostmem's run-time guard).
func (w *world) installGuard(limit int64, defaultLimit bool) {
	w.releaseGuard = hostmem.GuardRun(limit)
	if limit <= 0 {
		return
	}
	w.memoryLimit = limit
	try := hostmem.TryLessMemory(w.m.TimingOnly, w.verifies)
	w.outOfMemory = func(held int64) error {
		return &hostmem.OutOfMemoryError{At: w.s.Now(), Messages: w.messages(), Held: held, Limit: limit, DefaultLimit: defaultLimit, Try: try}
	}
	w.s.Guard = hostmem.TurnGuard(limit, w.m.TimingOnly, w.outOfMemory)
}

// memoryStop is err, the error that ended a simulation, unless the memory
// watch caused it (a process's Starlark thread cancelled over the limit):
// then the simulation's own guard error, which says when the run stopped
// and what to try for its mode, as when the event loop finds the run over
// the limit.
func (w *world) memoryStop(err error) error {
	if w.outOfMemory == nil || !script.IsMemory(err) {
		return err
	}
	stop := w.outOfMemory(hostmem.Held())
	var refused *hostmem.AllocRefused
	if e, ok := stop.(*hostmem.OutOfMemoryError); ok && errors.As(err, &refused) {
		// A tile refused before it was allocated: what the run held then,
		// and the tile.
		e.Held, e.Asked = refused.Held, refused.Bytes
	}
	return stop
}

// messages is the number of messages sent so far.
func (w *world) messages() uint64 {
	var n uint64
	if w.g != nil {
		for _, ep := range w.g.EPs {
			for _, q := range ep.QPs {
				n += q.MyHead
			}
		}
	}
	return n
}

// ringsOf is g's installed receive rings, as the estimate takes them.
func ringsOf(g *machine.Group) hostmem.Rings {
	if g == nil {
		return hostmem.Rings{}
	}
	r := hostmem.Rings{NSlots: g.Cfg.NSlots, SlotSize: g.Cfg.SlotSize}
	for _, ep := range g.EPs {
		r.QPs += len(ep.QPs)
	}
	if len(g.EPs) > 0 {
		if pe := g.EPs[0].PE; pe != nil {
			switch g.Cfg.BufferKind {
			case machine.TCM:
				r.Room = pe.TCM.Capacity
			case machine.HBM:
				r.Room = pe.HBM.Capacity
			}
		}
	}
	r.Reach = reach(g)
	return r
}

// reach is the eccentricity of rank 0 in the graph of send directions
// (breadth-first; ranks it cannot reach do not count).
func reach(g *machine.Group) int {
	if len(g.EPs) == 0 {
		return 0
	}
	dist := make([]int, len(g.EPs))
	for i := range dist {
		dist[i] = -1
	}
	dist[0] = 0
	far := 0
	queue := []int{0}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		for _, q := range g.EPs[r].QPs {
			if q.RecvOnly || q.Peer < 0 || q.Peer >= len(dist) || dist[q.Peer] >= 0 {
				continue
			}
			dist[q.Peer] = dist[r] + 1
			far = max(far, dist[q.Peer])
			queue = append(queue, q.Peer)
		}
	}
	return far
}

func countsOf(ops report.OpCounts, stats []tl.Stats) *hostmem.Counts {
	c := &hostmem.Counts{Ops: ops.Send + ops.Recv + ops.Load + ops.Store + ops.Math}
	for _, s := range stats {
		c.AllocBytes += s.AllocBytes
		c.Allocs += s.Allocs
		c.TileBytes += s.TileBytes
	}
	if len(stats) > 0 && stats[0].Retained != nil {
		r := stats[0].Retained
		c.RetainedViews, c.RetainedHandles, c.RetainedHandleBytes = r.PeakViews, r.PeakHandles, r.PeakHandleBytes
	}
	return c
}
