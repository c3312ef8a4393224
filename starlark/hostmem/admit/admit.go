// Package admit decides whether a run may start under --max-memory, its
// one job: before a world is built (its ranks and directions alone) and
// before a size runs (the full estimate of starlark/hostmem, counted by a
// probe run near the limit), a run over the limit is refused (exit 2)
// with what would fit. The guard during the run is hostmem's.
package admit

import (
	"errors"
	"fmt"
	"strings"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"kernbench/starlark/tl"
)

// Modes are the modes of a run its estimate depends on, which a
// refusal's alternatives change.
type Modes struct{ TimingOnly, Verify bool }

// Run is what the admission knows of a run.
type Run struct {
	ElemSize int64 // bytes per element
	Modes    Modes
	// Of is the estimate's view of the run at count elements per rank in
	// modes m (its buffers, bus bytes and modes).
	Of             func(count int64, m Modes) hostmem.Run
	Limit          int64 // --max-memory; 0 = none
	LimitIsDefault bool  // Limit is hostmem's default, not the user's
	// ProbeAlways counts every size with a probe, not only one near the
	// limit (KERNBENCH_MEMORY_PROBE=always).
	ProbeAlways bool
	// World is the run's ranks; GrowsWithWorld: its buffers grow with
	// the world (allgather, reduce_scatter, alltoall), so a probe of a
	// smaller world keeps its count per rank (scaledCount).
	World          int
	GrowsWithWorld bool
	// IsProbe: this run is itself a probe, which is never probed: it is a
	// --timing-only run, which would count itself by a probe of itself,
	// and so on.
	IsProbe bool
}

// configured is the configuration's estimate at count in modes m.
func (r Run) configured(count int64, rg hostmem.Rings, m Modes) hostmem.Estimate {
	return hostmem.Configured(r.Of(count, m), rg)
}

// Probe is a size's probe: a --timing-only run of count elements per
// rank at world ranks that counts what it holds (hostmem.Counted) and
// prints and writes nothing.
type Probe func(world int, count int64) (*hostmem.Counts, error)

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

// Check refuses a size of count elements per rank, rg the installed
// receive rings, whose estimate is over the limit (exit 2), naming what
// would fit. The failure wraps a *report.Refusal, which a sweep of
// several sizes makes that size's row. probe, when not nil, counts the
// run (hostmem.Counted, countRun) when its configuration's estimate is
// over half the limit (an eighth for a --timing-only run), or always with
// ProbeAlways; a probe is not probed (IsProbe).
func (r Run) Check(count int64, rg hostmem.Rings, probe Probe) (hostmem.Estimate, error) {
	limit := r.Limit
	e := r.configured(count, rg, r.Modes)
	estimate := func(m Modes) hostmem.Estimate { return r.configured(count, rg, m) }
	share := int64(probeShare)
	if r.Modes.TimingOnly {
		share = timingProbeShare
	}
	if probe != nil && !r.IsProbe && (r.ProbeAlways || limit > 0 && e.Total() > limit/share) && r.probeFits(count, rg) {
		c, err := r.countRun(count, probe)
		switch k := errkind.Of(err); {
		case c != nil:
			conf := e.Total()
			e = hostmem.Counted(r.Of(count, r.Modes), rg, c)
			e.Configured = conf
			estimate = func(m Modes) hostmem.Estimate { return hostmem.Counted(r.Of(count, m), rg, c) }
		case k == errkind.MemoryLimit || k == errkind.HostMemory:
			// The probe holds less than the run: neither fits.
			return e, r.probeRefused(count, e, err)
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
	try := func(flag string, mod func(m *Modes)) int64 {
		m := r.Modes
		mod(&m)
		t := estimate(m).Total()
		fit := "fits"
		if t > limit {
			fit = "too large too"
		}
		alts = append(alts, fmt.Sprintf("%s (about %s: %s)", flag, hostmem.FormatBytes(t), fit))
		return t
	}
	if !r.Modes.TimingOnly {
		ref.TimingOnly = try("--timing-only", func(m *Modes) { m.TimingOnly = true })
		if r.Modes.Verify {
			try("--verify-data=false", func(m *Modes) { m.Verify = false })
		}
	}
	// The largest power-of-two buffer (whole elements) that fits.
	sz := r.ElemSize
	fitBytes := int64(-1)
	for b := int64(1) << 40; b >= sz; b /= 2 {
		if b/sz < count && r.configured(b/sz, rg, r.Modes).Total() <= limit {
			fitBytes = b / sz * sz
			break
		}
	}
	if fitBytes > 0 {
		alts = append(alts, fmt.Sprintf("--bytes %s or smaller (about %s)", config.FormatSize(fitBytes), hostmem.FormatBytes(r.configured(fitBytes/sz, rg, r.Modes).Total())))
	} else {
		alts = append(alts, "a smaller --bytes (none fits at this world size)")
	}
	lt := hostmem.LimitText(limit, r.LimitIsDefault)
	parts := e.Parts()
	if e.Basis == hostmem.BasisCounted {
		parts += "; " + e.CountedBy()
	}
	ref.Message = fmt.Sprintf("this run (%s per rank buffer) needs about %s of host memory (%s), over --max-memory %s; alternatives: %s; or raise --max-memory",
		config.FormatSize(hostmem.SatMul(count, sz)), hostmem.FormatBytes(e.Total()), parts, lt, strings.Join(alts, ", "))
	ref.Reason = fmt.Sprintf("needs about %s of host memory, over --max-memory %s; ", hostmem.FormatBytes(e.Total()), lt)
	switch {
	case r.Modes.TimingOnly:
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
func (r Run) countRun(count int64, probe Probe) (*hostmem.Counts, error) {
	w1, w2, ok := hostmem.ScaledWorlds(r.World)
	if !ok {
		return probe(r.World, count)
	}
	c1, err := probe(w1, r.scaledCount(count, w1))
	if err != nil {
		if k := errkind.Of(err); k == errkind.MemoryLimit || k == errkind.HostMemory {
			return nil, err
		}
		return probe(r.World, count)
	}
	c2, err := probe(w2, r.scaledCount(count, w2))
	if err != nil {
		if k := errkind.Of(err); k == errkind.MemoryLimit || k == errkind.HostMemory {
			return nil, err
		}
		return probe(r.World, count)
	}
	return hostmem.Extrapolate(w1, c1, w2, c2, r.World), nil
}

// scaledCount is the count per rank at world ranks whose chunk per peer is
// that of count at the run's world: the same for a collective whose
// buffers grow with the world (GrowsWithWorld), the world's share of it
// otherwise, a whole number of elements per rank.
func (r Run) scaledCount(count int64, world int) int64 {
	if r.GrowsWithWorld {
		return count
	}
	n := count / int64(r.World) * int64(world)
	if count%int64(r.World) != 0 {
		n = count * int64(world) / int64(r.World)
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
func (r Run) probeFits(count int64, rg hostmem.Rings) bool {
	if r.Limit <= 0 {
		return true
	}
	m := r.Modes
	m.TimingOnly = true
	conf := r.configured(count, rg, m).Total()
	if _, _, scaled := hostmem.ScaledWorlds(r.World); r.Modes.TimingOnly || scaled {
		return conf/probeReach <= r.Limit
	}
	return conf <= r.Limit
}

// probeReach: the configuration's estimate of a --timing-only run is at
// most 2.4 times its peak on the shipped algorithms
// (ring_allreduce_unidir at 512 ranks × 4K).
const probeReach = 4

// probeRefused is the refusal of a size whose probe passed the limit
// (err): the run would hold more than its probe.
func (r Run) probeRefused(count int64, e hostmem.Estimate, err error) error {
	limit := r.Limit
	lt := hostmem.LimitText(limit, r.LimitIsDefault)
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
	if _, _, scaled := hostmem.ScaledWorlds(r.World); r.Modes.TimingOnly && !scaled {
		probe = "a probe of it (the same --timing-only run)"
	}
	ref.Message = fmt.Sprintf("this run (%s per rank buffer) does not fit --max-memory %s: %s passed it%s; "+
		"alternatives: a smaller --bytes or --world-size, or raise --max-memory", config.FormatSize(hostmem.SatMul(count, r.ElemSize)), lt, probe, held)
	ref.Reason = fmt.Sprintf("its --timing-only probe passed --max-memory %s: raise --max-memory", lt)
	return report.WithKind(errkind.MemoryLimit, &report.Failure{Rank: -1, Msg: ref.Message, Err: ref})
}

// Rings is g's installed receive rings, as the estimate takes them.
func Rings(g *machine.Group) hostmem.Rings {
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
	r.Reach = reach(len(g.EPs), func(rank int, send func(peer int)) {
		for _, q := range g.EPs[rank].QPs {
			if !q.RecvOnly {
				send(q.Peer)
			}
		}
	})
	return r
}

// LinkRings is the receive rings installing links with cfg makes (a ring
// a direction; machine.Install), as Rings takes them once installed but
// for Room, left unknown: what the memory admission decides from the
// configuration's estimate (whether to count the run by probes, and
// which) does not read it.
func LinkRings(links [][]machine.Link, cfg machine.IPCQConfig) hostmem.Rings {
	r := hostmem.Rings{NSlots: cfg.NSlots, SlotSize: cfg.SlotSize}
	for _, ls := range links {
		r.QPs += len(ls)
	}
	r.Reach = reach(len(links), func(rank int, send func(peer int)) {
		for _, l := range links[rank] {
			if !l.RecvOnly {
				send(l.Peer)
			}
		}
	})
	return r
}

// reach is the eccentricity of rank 0 of n in the graph of send
// directions, sends calling send for each peer a rank sends to
// (breadth-first; ranks it cannot reach do not count).
func reach(n int, sends func(rank int, send func(peer int))) int {
	if n == 0 {
		return 0
	}
	dist := make([]int, n)
	for i := range dist {
		dist[i] = -1
	}
	dist[0] = 0
	far := 0
	queue := []int{0}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		sends(r, func(peer int) {
			if peer < 0 || peer >= n || dist[peer] >= 0 {
				return
			}
			dist[peer] = dist[r] + 1
			far = max(far, dist[peer])
			queue = append(queue, peer)
		})
	}
	return far
}

// Counts is what a run's operation counts and its ranks' statistics tell
// the estimate (Result.Counts).
func Counts(ops report.OpCounts, stats []tl.Stats) *hostmem.Counts {
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
