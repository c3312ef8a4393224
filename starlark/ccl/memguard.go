package ccl

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

// The memory guard (--max-memory). Host memory is what a run can run out
// of long before its simulated machine does: the simulated memory of the
// bench's buffers, the pre-run image phase 2 keeps, the op_log (a record
// per data operation), per-rank state and what the kernels keep in their
// Starlark values. Before a run the estimate below is compared with the
// limit (over it: exit 2, naming what would fit); during the run a Go soft
// memory limit keeps the collector working near it, and a heap that
// passes the limit anyway ends the run with exit 3 instead of the Go
// runtime's fatal error.

// MemoryEstimate is the expected peak host memory of one simulation, by
// part, in bytes.
type MemoryEstimate struct {
	Data    int64 `json:"data"`    // simulated memory behind the bench's buffers
	Image   int64 `json:"image"`   // the pre-run image a verified run keeps for phase 2
	Rings   int64 `json:"rings"`   // IPCQ receive rings (backed as messages land)
	Scratch int64 `json:"scratch"` // the kernels' tl.alloc buffers and staging slots (counted only)
	OpLog   int64 `json:"oplog"`   // op_log records
	Phase2  int64 `json:"phase2"`  // per record: the replay's working set (verified runs)
	Ranks   int64 `json:"ranks"`   // per-rank machine, process and interpreter state
	Kernels int64 `json:"kernels"` // what the kernels keep in Starlark values: views, handles
	Runtime int64 `json:"runtime"` // the program itself and the collector's headroom
	// Basis says where the algorithm's part came from: "counted" (a
	// --timing-only probe of the same run counted its operations and
	// what its kernels keep) or "configuration" (bounds from the
	// collective, the topology's rings and the size alone).
	Basis string `json:"basis"`
	// Configured is the configuration's estimate of a counted one, and
	// Counts what the probe counted.
	Configured int64         `json:"configured,omitempty"`
	Counts     *MemoryCounts `json:"counts,omitempty"`
}

// Total is the estimate's sum.
func (e MemoryEstimate) Total() int64 {
	t := int64(0)
	for _, n := range []int64{e.Data, e.Image, e.Rings, e.Scratch, e.OpLog, e.Phase2, e.Ranks, e.Kernels, e.Runtime} {
		t = sat(t, n)
	}
	return t
}

func (e MemoryEstimate) String() string {
	s := fmt.Sprintf("%s (%s)", hostmem.FormatBytes(e.Total()), e.parts())
	if e.Basis == basisCounted {
		s += fmt.Sprintf(", counted by a --timing-only probe (from the configuration alone: %s)", hostmem.FormatBytes(e.Configured))
	}
	return s
}

// parts lists the estimate's nonzero parts.
func (e MemoryEstimate) parts() string {
	var parts []string
	for _, p := range []struct {
		name string
		n    int64
	}{{"simulated memory", e.Data}, {"pre-run image", e.Image}, {"IPCQ rings", e.Rings}, {"tl.alloc", e.Scratch}, {"op_log", e.OpLog}, {"phase 2", e.Phase2},
		{"ranks", e.Ranks}, {"kernel state", e.Kernels}, {"runtime", e.Runtime}} {
		if p.n > 0 {
			parts = append(parts, p.name+" "+hostmem.FormatBytes(p.n))
		}
	}
	return strings.Join(parts, ", ")
}

const (
	basisCounted       = "counted"
	basisConfiguration = "configuration"
)

// How the estimate is made. What depends on the algorithm (how many
// messages and data operations it makes, so op_log records; what its
// kernels keep alive in Starlark values: a table of p piece views per
// rank, a list of every store handle) differs by more than 1.5² between
// the shipped algorithms of one topology, and only running the algorithm
// tells. So the estimate has two forms:
//
//   - from the configuration alone (estimateMemory): the collective's
//     buffers, the rings, and bounds on messages and kernel state from
//     the topology's reach. It is what a run far below the limit (under
//     half of it) and every --timing-only run is checked with: no run
//     pays for a probe it does not need.
//   - counted (estimateCounted): when the configuration's estimate of a
//     run that moves bytes is over half the limit, a --timing-only run of
//     the same size (the probe: the same operations, messages and kernel
//     values without bytes, in little memory and the time of a
//     --timing-only run) counts the data operations, the tl.alloc bytes,
//     the tiles' bytes and, at its peak, the views and handles the
//     kernels still hold (tl.Retention), and the estimate is made from
//     those counts. A probe that passes the limit itself refuses
//     the run; one that fails otherwise (a kernel that reads values) leaves
//     the configuration's estimate.
//
// The figures are expectations of the peak resident set (VmHWM, what
// /usr/bin/time reports and the guard samples), calibrated on the shipped
// algorithms (TestMemoryEstimateMatchesPeak; docs/architecture.md lists
// the measured runs), not bounds. Go 1.26, amd64.
const (
	// runtimeBytes: what a small run of the binary holds (hostmem).
	runtimeBytes = hostmem.RuntimeBytes
	// perRankBytes, perQPBytes: a rank's PE resources, its kernel's
	// coroutine stack and Starlark thread, and each of its queue pairs
	// (the directions of the neighbor map: 2 a rank on a ring, about
	// log2 p for recursive doubling); mostly stacks and fixed structures,
	// which the collector's headroom does not grow.
	perRankBytes = 30 << 10
	perQPBytes   = 6 << 10
	// viewBytes, handleBytes: a Ptr view a kernel holds, and an operation
	// handle with the operation and tile it keeps; handleBytePercent:
	// the share of the bytes a held handle's operation moves that a run
	// which moves bytes keeps with it.
	viewBytes         = 150
	handleBytes       = 590
	handleBytePercent = 22
	// scratchPercent: the share of the tl.alloc bytes a run backs.
	scratchPercent = 100
	// The collector's headroom as garbage fills it: garbagePercent over
	// what the kernels keep (the interpreter's garbage), tileGarbagePercent
	// of the bytes of the tiles given to kernels (with the reductions'
	// results, which are not counted), recordGarbagePercent over the
	// op_log and the replay.
	garbagePercent       = 100
	tileGarbagePercent   = 170
	recordGarbagePercent = 30
	// kernelHeadroomBytes, kernelHeadroomPercent: the interpreter's
	// garbage stops filling Go's 100 % once what the kernels keep is
	// large (ring_allreduce_manual at 1024 ranks, --timing-only: 932 MiB
	// live, 1.38 GiB of heap): at most 64 MiB and 40 % of it.
	kernelHeadroomBytes   = 64 << 20
	kernelHeadroomPercent = 40
	// perStepBytes: the configuration's figure for what a kernel keeps
	// per step of its algorithm (estimateMessages' steps, 8 × reach): a
	// ring's tables of p chunk views, send and recv, hold 2 views per 4
	// steps; ring_allreduce_manual's piece tables 16 and a store handle
	// per message (ring_allreduce at 1024 ranks × 4K, --timing-only:
	// 618 MiB, ring_allreduce_manual 1.5 GiB).
	perStepBytes = 100
	// recordsPerMsg bounds the records a message costs (send, recv,
	// loads, stores, math): -v measures 4.0 (alltoall) to 6.0
	// (ring_reduce_scatter, mesh_allreduce) on the shipped algorithms.
	recordsPerMsg = 6.0
	// minPieceBytes: the smallest piece a shipped algorithm cuts a chunk
	// into (ring_allreduce_manual; estimateMessages).
	minPieceBytes = 512
	// stepsPerReach bounds an algorithm's steps by the reach of its
	// neighbor map (estimateMessages).
	stepsPerReach = 8
	// recordsPerRank: the bench's own records (host writes of the inputs).
	recordsPerRank = 16
	// logRecordBytes: an op_log record as the log keeps it, compact and
	// pointer-free (-v prints the measured figure).
	logRecordBytes = 120
	// phase2PerRecord: per record, the replay's working set (its record
	// order, tile tables).
	phase2PerRecord = 66
)

// estimateMemory is the configuration's estimate for one size: count
// elements per rank, rg the installed receive rings.
func (p *plan) estimateMemory(count int64, rg rings) MemoryEstimate {
	steps := int64(0)
	if rg.QPs > 0 {
		steps = stepsPerReach * int64(max(1, rg.Reach))
	}
	e := p.bufferParts(count, rg)
	e.Basis = basisConfiguration
	e.Ranks = p.rankBytes(rg)
	e.Kernels = satMul(int64(p.world), satMul(steps, perStepBytes))
	if !p.opts.TimingOnly {
		// Kernels that reduce through work buffers of their own (mesh,
		// recursive doubling) allocate up to their buffers again.
		e.Scratch = e.Data
	}
	if !p.opts.TimingOnly && (p.opts.Verify || p.opts.OpLog != nil) {
		p.recordParts(&e, p.estimateRecords(count, rg))
	}
	p.headroom(&e)
	return e
}

// estimateCounted is the estimate for one size from a probe's counts c.
func (p *plan) estimateCounted(count int64, rg rings, c *MemoryCounts) MemoryEstimate {
	e := p.bufferParts(count, rg)
	e.Basis = basisCounted
	e.Counts = c
	e.Ranks = p.rankBytes(rg)
	e.Kernels = sat(satMul(c.RetainedViews, viewBytes), satMul(c.RetainedHandles, handleBytes))
	moves := !p.opts.TimingOnly
	var records int64
	if moves {
		e.Rings = sat(e.Rings, p.ringGrowth(rg))
		// The bytes the held handles' operations move stay with them.
		e.Kernels = sat(e.Kernels, c.RetainedHandleBytes/100*handleBytePercent)
		e.Scratch = c.AllocBytes / 100 * scratchPercent
		if p.opts.Verify || p.opts.OpLog != nil {
			p.recordParts(&e, sat(sat(c.Ops, c.Allocs), satMul(int64(p.world), recordsPerRank)))
			records = sat(e.OpLog, e.Phase2)
		}
		if p.opts.Verify && p.coll.Name == "alltoall" {
			// alltoall's replay holds its recv buffers' blocks: every
			// block is written by pieces from many ranks.
			e.Phase2 = sat(e.Phase2, satMul(satMul(p.coll.recvCount(count, p.world), int64(p.dt.Size())), int64(p.world)))
		}
	}
	// The collector's headroom is what garbage fills of it: the
	// interpreter's, in proportion to what the kernels keep; with bytes
	// moved, the tiles the kernels were given and dropped (the pipelined
	// primitives recycle theirs) and the op_log's growth; at most gc.go's.
	head := min(e.Kernels/100*garbagePercent, sat(kernelHeadroomBytes, e.Kernels/100*kernelHeadroomPercent))
	if moves {
		head = sat(head, sat(c.TileBytes/100*tileGarbagePercent, records/100*recordGarbagePercent))
		held := sat(e.Data, e.Rings)
		if p.opts.Verify {
			held = sat(held, held)
		}
		head = min(head, (e.Total()-e.Runtime)/100*int64(hostmem.GCPercent(held)))
	}
	e.Runtime = sat(e.Runtime, head)
	return e
}

// ringGrowth is what the memory holding the rings leaves behind as it
// grows: a PE's memory grows by doubling as its rings are installed
// (65536 KiB of TCM for 32768 KiB of rings, mesh_allreduce at 256 ranks)
// and the arrays it leaves stay resident until collected. Measured: half
// the rings again, but no more than the room the memory has left to grow
// into (alltoall at 32 ranks fills its 1 MiB TCMs with rings: twice them
// put it at 1.7 times its peak; mesh_allreduce and rd_allreduce at 128
// and 256 ranks × 4K peaked at 1.6 times their estimate without any).
func (p *plan) ringGrowth(rg rings) int64 {
	ring := satMul(int64(rg.QPs), satMul(int64(rg.NSlots), rg.SlotSize))
	if rg.Room <= 0 || p.world <= 0 {
		return ring / 2
	}
	perPE := ring / int64(p.world)
	return satMul(max(0, min(perPE/2, rg.Room-perPE)), int64(p.world))
}

// rankBytes is the ranks' fixed state: per rank and per queue pair.
func (p *plan) rankBytes(rg rings) int64 {
	return sat(satMul(int64(p.world), perRankBytes), satMul(int64(rg.QPs), perQPBytes))
}

// bufferParts are the parts that follow from the collective and the
// rings alone: the bench's buffers, the pre-run image, the rings.
func (p *plan) bufferParts(count int64, rg rings) MemoryEstimate {
	e := MemoryEstimate{Runtime: runtimeBytes}
	if p.opts.TimingOnly {
		return e // no byte is backed and no op_log kept
	}
	sz := int64(p.dt.Size())
	sc, rc := p.coll.sendCount(count, p.world), p.coll.recvCount(count, p.world)
	per := satMul(sat(sc, rc), sz)
	if p.opts.InPlace {
		per = satMul(max(sc, rc), sz)
	}
	e.Data = satMul(per, int64(p.world))
	e.Rings = satMul(int64(rg.QPs), satMul(int64(rg.NSlots), rg.SlotSize))
	if p.opts.Verify {
		// The pre-run image keeps a block that phase 1 writes as it was
		// before: a block of one repeated 8-byte pattern (a recv buffer's
		// sentinel, a zeroed ring or scratch) as that pattern, any other
		// in full. Written blocks with other contents: the inputs of an
		// in-place buffer. reduce's reference also keeps the recv
		// buffers' pre-run bytes.
		if p.opts.InPlace {
			e.Image = e.Data
		}
		if p.coll.KeepsRecv() {
			e.Image = sat(e.Image, satMul(satMul(rc, sz), int64(p.world)))
		}
	}
	return e
}

// recordParts sets the op_log and phase 2 parts for records records.
func (p *plan) recordParts(e *MemoryEstimate, records int64) {
	e.OpLog = satMul(records, logRecordBytes)
	if p.opts.Verify {
		// The replay lets a block go once the last record writing it is
		// applied: what it holds grows with the records, not with the
		// buffers.
		e.Phase2 = satMul(records, phase2PerRecord)
	}
}

// headroom adds the collector's headroom over what is live: gc.go's while
// the run holds its large blocks (twice them when verified, the image),
// Go's 100 % for a heap under 256 MiB; without bytes, 100 % of what the
// kernels keep (the ranks' state is mostly stacks, which it does not
// grow).
func (p *plan) headroom(e *MemoryEstimate) {
	if p.opts.TimingOnly {
		e.Runtime = sat(e.Runtime, e.Kernels)
		return
	}
	held := sat(e.Data, e.Rings)
	if p.opts.Verify {
		held = sat(held, held)
	}
	live := e.Total() - e.Runtime
	e.Runtime = sat(e.Runtime, live/100*int64(hostmem.GCPercent(held)))
}

// estimateRecords bounds the op_log records of a run from above: every
// rank's messages (estimateMessages) at recordsPerMsg records each, plus
// the bench's own records per rank.
func (p *plan) estimateRecords(count int64, rg rings) int64 {
	if rg.QPs == 0 || rg.SlotSize <= 0 {
		return 0
	}
	r := (p.estimateMessages(count, rg)*recordsPerMsg + recordsPerRank) * float64(p.world)
	if r > math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return int64(r)
}

// estimateMessages is an upper bound on the messages one rank sends, for
// the shipped algorithms and others built like them:
//
//   - steps: at most 8 × the reach of the neighbor map, the hops from
//     rank 0 to the farthest rank (a bidirectional ring of p ranks reaches
//     p/2; ring_allreduce_bidir's two rings take 4(p - 1) steps, the
//     plain ring 2(p - 1); recursive doubling reaches log2 p). A step
//     sends at least one message however small its chunk (1024 ranks ×
//     4K: 2 × 1023 messages of one f32 each, where the bus bytes fill two
//     slots).
//   - pieces: a step pipelines at most n_slots pieces of its chunk, or
//     slot_size ones when the chunk is over n_slots slots; and no shipped
//     algorithm cuts a piece, but a step's last, under 512 bytes
//     (ring_allreduce_manual; the pipelined primitives cut 1 KiB) nor,
//     up to half a slot, under buffer / p / (2 × n_slots)
//     (ring_allreduce_bidir pipelines half chunks).
//
// Two bounds follow, and the smaller holds: n_slots messages per step, or
// the collective's bus bytes (BusFactor × buffer) in slot_size messages
// and a partly filled one per step, the tighter for large chunks; or the
// bus bytes spread over the steps in pieces of that floor, rounded up per
// step, the tighter for the rest (256 ranks × 1M: 4096 messages per rank
// where the first gives 9216; ring_allreduce sends 2040,
// ring_allreduce_manual 4080). Neither assumes a step moves buffer / p:
// the hierarchical algorithms move larger chunks (mesh_allreduce's rows).
// An alltoall is counted apart: it sends a chunk to every other rank in
// messages of at most a slot; with d < p - 1 directions per rank each is
// relayed over about p/d hops (the ring relay: p(p - 1)/2 chunks per
// rank).
//
// TestEstimateMessagesBoundsShippedAlgorithms pins the bound against the
// shipped algorithms.
func (p *plan) estimateMessages(count int64, rg rings) float64 {
	if rg.QPs == 0 || rg.SlotSize <= 0 {
		return 0
	}
	world := float64(p.world)
	elems := max(p.coll.sendCount(count, p.world), p.coll.recvCount(count, p.world))
	sz, slot, nslots := float64(p.dt.Size()), float64(rg.SlotSize), float64(rg.NSlots)
	steps := stepsPerReach * float64(max(1, rg.Reach))
	if p.coll.Name == "alltoall" {
		dirs := float64(rg.QPs) / world
		return (world-1)*max(1, math.Ceil(float64(count)*sz/slot))*max(1, world/dirs) + steps
	}
	bus := p.coll.BusFactor(p.world) * float64(elems) * sz
	full := math.Ceil(bus / slot)
	chunk := float64(elems) * sz / world
	bySteps := max(full, steps*nslots)
	if chunk >= slot {
		bySteps += steps // a partly filled last message per step
	}
	floor := max(minPieceBytes, min(slot/2, chunk/(2*nslots)))
	byBytes := steps * max(1, math.Ceil(bus/steps/floor))
	return min(bySteps, byBytes)
}

func sat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// probeFunc makes a size's probe: a --timing-only run of it that counts
// (estimateCounted) and prints and writes nothing.
type probeFunc func() (*MemoryCounts, error)

// probeShare: a run whose configuration's estimate is over 1/probeShare of
// the limit is counted by a probe before it is admitted.
const probeShare = 2

// checkMemory refuses a size whose estimate is over opts.MaxMemory (exit
// 2), naming what would fit. The failure wraps a *Refusal, which a sweep
// of several sizes makes that size's row (Options.RefusedAsRows). probe,
// when not nil, counts the run (see estimateCounted) when its
// configuration's estimate is over half the limit, or always with
// Options.ProbeMemory.
func (p *plan) checkMemory(count int64, rg rings, probe probeFunc) (MemoryEstimate, error) {
	limit := p.opts.MaxMemory
	e := p.estimateMemory(count, rg)
	estimate := func(q *plan) MemoryEstimate { return q.estimateMemory(count, rg) }
	if probe != nil && (p.opts.ProbeMemory || !p.opts.TimingOnly && limit > 0 && e.Total() > limit/probeShare) && p.probeFits(count, rg) {
		c, err := probe()
		switch k := errkind.Of(err); {
		case c != nil:
			conf := e.Total()
			e = p.estimateCounted(count, rg, c)
			e.Configured = conf
			estimate = func(q *plan) MemoryEstimate { return q.estimateCounted(count, rg, c) }
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
	ref := &Refusal{Kind: errkind.MemoryLimit.Name, Estimate: e.Total(), Limit: limit}
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
	parts := e.parts()
	if e.Basis == basisCounted {
		parts += "; counted by a --timing-only probe"
	}
	ref.Message = fmt.Sprintf("this run (%s per rank buffer) needs about %s of host memory (%s), over --max-memory %s; alternatives: %s; or raise --max-memory",
		flagSize(satMul(count, sz)), hostmem.FormatBytes(e.Total()), parts, lt, strings.Join(alts, ", "))
	ref.Reason = fmt.Sprintf("needs about %s of host memory, over --max-memory %s; ", hostmem.FormatBytes(e.Total()), lt)
	switch {
	case p.opts.TimingOnly:
		ref.Reason += "raise --max-memory"
	case ref.TimingOnly <= limit:
		ref.Reason += fmt.Sprintf("--timing-only runs it (about %s)", hostmem.FormatBytes(ref.TimingOnly))
	default:
		ref.Reason += fmt.Sprintf("too large for --timing-only too (about %s): raise --max-memory", hostmem.FormatBytes(ref.TimingOnly))
	}
	return e, WithKind(errkind.MemoryLimit, &Failure{Rank: -1, Msg: ref.Message, Err: ref})
}

// probeFits says whether the probe of a size may run: the
// configuration's estimate of it (a --timing-only run) is within the
// limit. One that is not is no help: the run is checked with the
// configuration's estimate, whose refusal says --timing-only does not fit
// either.
func (p *plan) probeFits(count int64, rg rings) bool {
	q := *p
	q.opts.TimingOnly = true
	return p.opts.MaxMemory <= 0 || q.estimateMemory(count, rg).Total() <= p.opts.MaxMemory
}

// probeRefused is the refusal of a size whose probe passed the limit
// (err): the run would hold more than its probe.
func (p *plan) probeRefused(count int64, e MemoryEstimate, err error) error {
	limit := p.opts.MaxMemory
	lt := hostmem.LimitText(limit, p.opts.MaxMemoryIsDefault)
	ref := &Refusal{Kind: errkind.MemoryLimit.Name, Estimate: e.Total(), Limit: limit, TimingOnly: limit + 1}
	held := ""
	var oom *hostmem.OutOfMemoryError
	if errors.As(err, &oom) {
		held = fmt.Sprintf(" (it held %s at t=%v)", hostmem.FormatBytes(oom.Held), oom.At)
	}
	ref.Message = fmt.Sprintf("this run (%s per rank buffer) does not fit --max-memory %s: its --timing-only probe, which holds less, passed it%s; "+
		"alternatives: a smaller --bytes or --world-size, or raise --max-memory", flagSize(satMul(count, int64(p.dt.Size()))), lt, held)
	ref.Reason = fmt.Sprintf("its --timing-only probe passed --max-memory %s: raise --max-memory", lt)
	return WithKind(errkind.MemoryLimit, &Failure{Rank: -1, Msg: ref.Message, Err: ref})
}

// Refusal is a size the memory guard refused before it ran: its
// host-memory estimate is over --max-memory. A run of one size fails with
// it (exit 2); in a sweep of several (Options.RefusedAsRows) it is that
// size's row, Result.Refused, and the other sizes run.
type Refusal struct {
	Kind string `json:"kind"` // errkind's name: OutOfMemory
	// Reason is the refusal in one line, as the table's row gives it: the
	// estimate, the limit, and what reaches the size (--timing-only, or
	// a larger limit).
	Reason string `json:"reason"`
	// Message is the refusal as a run of that one size reports it: the
	// estimate's parts and every alternative.
	Message  string `json:"message"`
	Estimate int64  `json:"estimate_bytes"`
	Limit    int64  `json:"max_memory_bytes"`
	// TimingOnly is the size's estimate with --timing-only; 0 when the run
	// is timing-only already.
	TimingOnly int64 `json:"timing_only_estimate_bytes,omitempty"`
}

func (r *Refusal) Error() string { return r.Message }

// Reachable says whether --timing-only would run the size under the same
// limit.
func (r *Refusal) Reachable() bool { return r.TimingOnly > 0 && r.TimingOnly <= r.Limit }

// memBudget shares --max-memory between the sizes a -j sweep simulates at
// once: each was checked against the whole limit alone, so together they
// could pass it and end the sweep at the run-time guard. A size starts
// once its estimate fits next to those running; one that fits alone
// always starts, at the latest when the others are done. Only when sizes
// run changes, never what they report.
type memBudget struct {
	mu      sync.Mutex
	freed   *sync.Cond
	limit   int64
	used    int64
	waiting int // sizes waiting in acquire
}

func newMemBudget(limit int64) *memBudget {
	if limit <= 0 {
		return nil
	}
	b := &memBudget{limit: limit}
	b.freed = sync.NewCond(&b.mu)
	return b
}

// acquire waits until n more bytes fit (or nothing else runs) and returns
// the function that gives them back. A nil budget admits everything.
func (b *memBudget) acquire(n int64) (release func()) {
	if b == nil {
		return func() {}
	}
	b.mu.Lock()
	for b.used > 0 && b.used > b.limit-n {
		b.waiting++
		b.freed.Wait()
		b.waiting--
	}
	b.used += n
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.used -= n
		b.mu.Unlock()
		b.freed.Broadcast()
	}
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

// OpLogCost is what the op_log of a run cost (-v): its records, their
// host bytes each (the Record, its pointer and the data it carries) and
// records per message sent.
type OpLogCost struct {
	Records           int64   `json:"records"`
	BytesPerRecord    float64 `json:"bytes_per_record"`
	RecordsPerMessage float64 `json:"records_per_message,omitempty"`
}

func opLogCost(l *oplog.Log, sent int64) *OpLogCost {
	if l == nil || l.Len() == 0 {
		return nil
	}
	n := int64(l.Len())
	c := &OpLogCost{Records: n, BytesPerRecord: float64(l.HostBytes()) / float64(n)}
	if sent > 0 {
		c.RecordsPerMessage = float64(n) / float64(sent)
	}
	return c
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
	return w.outOfMemory(hostmem.Held())
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

// rings are a group's installed receive rings.
type rings struct {
	QPs      int // queue pairs, one ring each
	NSlots   int
	SlotSize int64
	// Reach is the most hops a message from rank 0 needs to reach a rank
	// over the installed directions (0: no direction sends anywhere).
	Reach int
	// Room is the capacity of the memory a rank's rings are in (0:
	// unknown).
	Room int64
}

func ringsOf(g *machine.Group) rings {
	if g == nil {
		return rings{}
	}
	r := rings{NSlots: g.Cfg.NSlots, SlotSize: g.Cfg.SlotSize}
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

// MemoryCounts are what a run's host memory grows with, counted as it
// runs (the same with --timing-only or not).
type MemoryCounts struct {
	// Ops are the data operations (op_log records but the bench's own).
	Ops int64 `json:"ops"`
	// AllocBytes, Allocs: the kernels' tl.alloc buffers and staging slots.
	AllocBytes int64 `json:"alloc_bytes"`
	Allocs     int64 `json:"allocs"`
	// TileBytes: the tiles tl calls gave the kernels (tl.Stats).
	TileBytes int64 `json:"tile_bytes"`
	// RetainedViews, RetainedHandles: the views and handles the kernels
	// held at the peak (a probe only: tl.Retention).
	RetainedViews       int64 `json:"retained_views,omitempty"`
	RetainedHandles     int64 `json:"retained_handles,omitempty"`
	RetainedHandleBytes int64 `json:"retained_handle_bytes,omitempty"`
}

func countsOf(ops OpCounts, stats []tl.Stats) *MemoryCounts {
	c := &MemoryCounts{Ops: ops.Send + ops.Recv + ops.Load + ops.Store + ops.Math}
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
