package hostmem

import (
	"fmt"
	"math"
	"strings"
	"sync"
)

// Run is what the memory estimate knows of one run of one size: plain
// figures ccl reads off its plan (the collective's buffers at this size,
// its bus bytes, the run's modes).
type Run struct {
	World int
	// SendBytes, RecvBytes: one rank's send and recv buffers.
	SendBytes, RecvBytes int64
	// CountBytes: the size as given, count × the element's size (for an
	// alltoall, the chunk a rank sends each peer).
	CountBytes int64
	// BusFactor: the collective's bus bytes per buffer byte at World ranks.
	BusFactor float64
	// Alltoall: every rank sends a chunk to every other, relayed over the
	// directions it has.
	Alltoall bool
	// KeepsRecv: the reference keeps the recv buffers' pre-run bytes
	// (reduce).
	KeepsRecv bool
	// The run's modes: no bytes moved (--timing-only), phase 2 replays the
	// op_log (--verify-data), the op_log is written out (--oplog), one
	// buffer for send and recv (--in-place).
	TimingOnly, Verify, KeepsLog, InPlace bool
}

// Rings are a group's installed receive rings.
type Rings struct {
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

// Estimate is the expected peak host memory of one simulation, by
// part, in bytes.
type Estimate struct {
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
	Configured int64   `json:"configured,omitempty"`
	Counts     *Counts `json:"counts,omitempty"`
}

// Total is the estimate's sum.
func (e Estimate) Total() int64 {
	t := int64(0)
	for _, n := range []int64{e.Data, e.Image, e.Rings, e.Scratch, e.OpLog, e.Phase2, e.Ranks, e.Kernels, e.Runtime} {
		t = SatAdd(t, n)
	}
	return t
}

func (e Estimate) String() string {
	s := fmt.Sprintf("%s (%s)", FormatBytes(e.Total()), e.Parts())
	if e.Basis == BasisCounted {
		s += fmt.Sprintf(", %s (from the configuration alone: %s)", e.CountedBy(), FormatBytes(e.Configured))
	}
	return s
}

// CountedBy says how a counted estimate was counted: by a probe of the
// run, or by probes of smaller worlds (Extrapolate).
func (e Estimate) CountedBy() string {
	if e.Counts != nil && len(e.Counts.ProbeWorlds) == 2 {
		return fmt.Sprintf("counted by --timing-only probes at %d and %d ranks", e.Counts.ProbeWorlds[0], e.Counts.ProbeWorlds[1])
	}
	return "counted by a --timing-only probe"
}

// Parts lists the estimate's nonzero parts.
func (e Estimate) Parts() string {
	var parts []string
	for _, p := range []struct {
		name string
		n    int64
	}{{"simulated memory", e.Data}, {"pre-run image", e.Image}, {"IPCQ rings", e.Rings}, {"tl.alloc", e.Scratch}, {"op_log", e.OpLog}, {"phase 2", e.Phase2},
		{"ranks", e.Ranks}, {"kernel state", e.Kernels}, {"runtime", e.Runtime}} {
		if p.n > 0 {
			parts = append(parts, p.name+" "+FormatBytes(p.n))
		}
	}
	return strings.Join(parts, ", ")
}

// What an estimate's Basis says.
const (
	BasisCounted       = "counted"
	BasisConfiguration = "configuration"
)

// How the estimate is made. What depends on the algorithm (how many
// messages and data operations it makes, so op_log records; what its
// kernels keep alive in Starlark values: a table of p piece views per
// rank, a list of every store handle) differs by more than 1.5² between
// the shipped algorithms of one topology, and only running the algorithm
// tells. So the estimate has two forms:
//
//   - from the configuration alone (Configured): the collective's
//     buffers, the rings, and bounds on messages and kernel state from
//     the topology's reach. It is what a run far below the limit (under
//     half of it; an eighth for a --timing-only run, which it can put at
//     0.3 of its peak) is checked with: no run pays for a probe it does
//     not need.
//   - counted (Counted): when the configuration's estimate of a
//     run that moves bytes is over half the limit, a --timing-only run of
//     the same size (the probe: the same operations, messages and kernel
//     values without bytes, in little memory and the time of a
//     --timing-only run) counts the data operations, the tl.alloc bytes,
//     the tiles' bytes and, at its peak, the views and handles the
//     kernels still hold (tl.Retention), and the estimate is made from
//     those counts. A --timing-only run over an eighth of the limit is
//     counted too. From 1024 ranks the probes are of two smaller worlds,
//     whose counts are extrapolated (ScaledWorlds, Extrapolate): a probe
//     of the run itself would cost what a timing-only run of it costs,
//     twice the run for a timing-only one. A probe that passes
//     the limit itself refuses the run; one that fails otherwise (a
//     kernel that reads values) leaves the configuration's estimate.
//
// The figures are expectations of the peak resident set (VmHWM, what
// /usr/bin/time reports and the guard samples), calibrated on the shipped
// algorithms (TestMemoryEstimateMatchesPeak, TestEstimateNearMeasuredPeaks;
// docs/architecture.md lists the measured runs), not bounds. Go 1.26,
// amd64.
const (
	// perRankBytes, perQPBytes: a rank's PE resources, its kernel's
	// coroutine stack and Starlark thread, and each of its queue pairs
	// (the directions of the neighbor map: 2 a rank on a ring, about
	// log2 p for recursive doubling); mostly stacks and fixed structures,
	// which the collector's headroom does not grow.
	perRankBytes = 30 << 10
	perQPBytes   = 6 << 10
	// ViewBytes, HandleBytes: a Ptr view a kernel holds, and an operation
	// handle with the operation and tile it keeps (what a probe's
	// tl.Retention counts them at); handleBytePercent:
	// the share of the bytes a held handle's operation moves that a run
	// which moves bytes keeps with it. HandleBytes is what a held handle
	// is live, measured where the handles are most of what the kernels
	// keep: ring_allreduce_manual at 1024 ranks × 4K, --timing-only, 932
	// MiB live for 2.11 M views and 1.97 M handles (336 bytes a handle);
	// fitted over ring_allreduce_manual (64 × 256K and 1M, 256 × 4K) and
	// custom_mesh (64, 128 and 256 × 1M), --timing-only, with the
	// headroom of handleGarbagePercent: 350 to 560, 400.
	ViewBytes         = 150
	HandleBytes       = 400
	handleBytePercent = 22
	// scratchPercent: the share of the tl.alloc bytes a run backs.
	scratchPercent = 100
	// The collector's headroom as garbage fills it: garbagePercent over
	// what the kernels keep (the interpreter's garbage), but
	// handleGarbagePercent over the handles they hold: kernels hold
	// handles as they go (a store handle per message), so the live heap
	// grows to its peak and the last collection's goal, twice what was
	// live at it, lies half-way between the peak and twice it on average
	// (ring_allreduce_manual at 1024 ranks, --timing-only: 932 MiB live,
	// 1.38 GiB of heap); a table of views is built as a kernel starts and
	// the garbage made around it fills the headroom; tileGarbagePercent
	// of the bytes of the tiles given to kernels (with the reductions'
	// results, which are not counted), recordGarbagePercent over the
	// op_log and the replay.
	garbagePercent       = 100
	handleGarbagePercent = 50
	// opGarbageBytes: the garbage a data operation makes, which fills Go's
	// headroom over the ranks' state (their stacks and structures) once
	// the run makes as much: mesh_allreduce at 1024 ranks × 4K,
	// --timing-only, 764 K operations, peaks at 205 MiB, 137 MiB of heap
	// for 65 MiB live at most; tree_allreduce at 1024 ranks, a few
	// operations a rank, peaks at 55 MiB.
	opGarbageBytes       = 100
	tileGarbagePercent   = 170
	recordGarbagePercent = 30
	// perStepBytes: the configuration's figure for what a kernel keeps
	// per step of its algorithm (Messages' steps, 8 × reach): a
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
	// into (ring_allreduce_manual; Messages).
	minPieceBytes = 512
	// stepsPerReach bounds an algorithm's steps by the reach of its
	// neighbor map (Messages).
	stepsPerReach = 8
	// recordsPerRank: the bench's own records (host writes of the inputs).
	recordsPerRank = 16
	// LogRecordBytes: an op_log record as the log keeps it, compact and
	// pointer-free (-v prints the measured figure).
	LogRecordBytes = 120
	// phase2PerRecord: per record, the replay's working set (its record
	// order, tile tables).
	phase2PerRecord = 66
)

// Configured is the configuration's estimate of run r, rg its installed
// receive rings.
func Configured(r Run, rg Rings) Estimate {
	steps := int64(0)
	if rg.QPs > 0 {
		steps = stepsPerReach * int64(max(1, rg.Reach))
	}
	e := bufferParts(r, rg)
	e.Basis = BasisConfiguration
	e.Ranks = rankBytes(r, rg)
	// Per step, not per message: a kernel that keeps a view and a handle
	// per piece (ring_allreduce_manual) keeps 30 times what one on the
	// fused primitives does at the same messages (32 ranks × 64M,
	// --timing-only: 851 MiB against ring_allreduce's 28 MiB), and a
	// figure per piece between them would refuse the fused algorithms'
	// large timing-only runs at ten times what they hold; the run-time
	// guard stops a timing-only run this admits and that passes the limit.
	e.Kernels = SatMul(int64(r.World), SatMul(steps, perStepBytes))
	if !r.TimingOnly {
		// Kernels that reduce through work buffers of their own (mesh,
		// recursive doubling) allocate up to their buffers again.
		e.Scratch = e.Data
	}
	if !r.TimingOnly && (r.Verify || r.KeepsLog) {
		recordParts(r, &e, estimateRecords(r, rg))
	}
	headroom(r, &e)
	return e
}

// Counted is the estimate of run r from its probe's counts c.
func Counted(r Run, rg Rings, c *Counts) Estimate {
	e := bufferParts(r, rg)
	e.Basis = BasisCounted
	e.Counts = c
	e.Ranks = rankBytes(r, rg)
	e.Kernels = SatAdd(SatMul(c.RetainedViews, ViewBytes), SatMul(c.RetainedHandles, HandleBytes))
	moves := !r.TimingOnly
	var records int64
	if moves {
		e.Rings = SatAdd(e.Rings, ringGrowth(r, rg))
		// The bytes the held handles' operations move stay with them.
		e.Kernels = SatAdd(e.Kernels, c.RetainedHandleBytes/100*handleBytePercent)
		e.Scratch = c.AllocBytes / 100 * scratchPercent
		if r.Verify || r.KeepsLog {
			recordParts(r, &e, SatAdd(SatAdd(c.Ops, c.Allocs), SatMul(int64(r.World), recordsPerRank)))
			records = SatAdd(e.OpLog, e.Phase2)
		}
		if r.Verify && r.Alltoall {
			// alltoall's replay holds its recv buffers' blocks: every
			// block is written by pieces from many ranks.
			e.Phase2 = SatAdd(e.Phase2, SatMul(r.RecvBytes, int64(r.World)))
		}
	}
	// The collector's headroom is what garbage fills of it: the
	// interpreter's, in proportion to what the kernels keep (half over
	// the handles they gather as they go); with bytes moved, the tiles the
	// kernels were given and dropped (the pipelined primitives recycle
	// theirs) and the op_log's growth; at most GCPercent's.
	handles := SatMul(c.RetainedHandles, HandleBytes)
	head := SatAdd((e.Kernels-handles)/100*garbagePercent, handles/100*handleGarbagePercent)
	// The garbage the operations make (their handles, tiles and the
	// interpreter's values) fills the headroom over the ranks' state too,
	// stacks included (Go's goal counts them), once there is enough of it.
	head = SatAdd(head, min(e.Ranks, SatMul(c.Ops, opGarbageBytes)))
	if moves {
		head = SatAdd(head, SatAdd(c.TileBytes/100*tileGarbagePercent, records/100*recordGarbagePercent))
		held := SatAdd(e.Data, e.Rings)
		if r.Verify {
			held = SatAdd(held, held)
		}
		// The collector's goal is a share of what was live at the last
		// collection: of what grows through the run (the op_log, the
		// replay, the handles and the bytes they keep) half on average,
		// as for handles above (ring_allreduce_manual at 64 ranks × 256K,
		// verified: 139 MiB live, 50 MiB over it at the peak, where the
		// garbage of its tiles alone is 80 MiB).
		grows := SatAdd(SatAdd(e.OpLog, e.Phase2), SatAdd(handles, c.RetainedHandleBytes/100*handleBytePercent))
		head = min(head, (e.Total()-e.Runtime-grows/2)/100*int64(GCPercent(held)))
	}
	e.Runtime = SatAdd(e.Runtime, head)
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
func ringGrowth(r Run, rg Rings) int64 {
	ring := SatMul(int64(rg.QPs), SatMul(int64(rg.NSlots), rg.SlotSize))
	if rg.Room <= 0 || r.World <= 0 {
		return ring / 2
	}
	perPE := ring / int64(r.World)
	return SatMul(max(0, min(perPE/2, rg.Room-perPE)), int64(r.World))
}

// rankBytes is the ranks' fixed state: per rank and per queue pair.
func rankBytes(r Run, rg Rings) int64 {
	return SatAdd(SatMul(int64(r.World), perRankBytes), SatMul(int64(rg.QPs), perQPBytes))
}

// bufferParts are the parts that follow from the collective and the
// rings alone: the bench's buffers, the pre-run image, the rings.
func bufferParts(r Run, rg Rings) Estimate {
	e := Estimate{Runtime: RuntimeBytes}
	if r.TimingOnly {
		return e // no byte is backed and no op_log kept
	}
	per := SatAdd(r.SendBytes, r.RecvBytes)
	if r.InPlace {
		per = max(r.SendBytes, r.RecvBytes)
	}
	e.Data = SatMul(per, int64(r.World))
	e.Rings = SatMul(int64(rg.QPs), SatMul(int64(rg.NSlots), rg.SlotSize))
	if r.Verify {
		// The pre-run image keeps a block that phase 1 writes as it was
		// before: a block of one repeated 8-byte pattern (a recv buffer's
		// sentinel, a zeroed ring or scratch) as that pattern, any other
		// in full. Written blocks with other contents: the inputs of an
		// in-place buffer. reduce's reference also keeps the recv
		// buffers' pre-run bytes.
		if r.InPlace {
			e.Image = e.Data
		}
		if r.KeepsRecv {
			e.Image = SatAdd(e.Image, SatMul(r.RecvBytes, int64(r.World)))
		}
	}
	return e
}

// recordParts sets the op_log and phase 2 parts for records records.
func recordParts(r Run, e *Estimate, records int64) {
	e.OpLog = SatMul(records, LogRecordBytes)
	if r.Verify {
		// The replay lets a block go once the last record writing it is
		// applied: what it holds grows with the records, not with the
		// buffers.
		e.Phase2 = SatMul(records, phase2PerRecord)
	}
}

// headroom adds the collector's headroom over what is live: gc.go's while
// the run holds its large blocks (twice them when verified, the image),
// Go's 100 % for a heap under 256 MiB; without bytes, 100 % of what the
// kernels keep (the ranks' state is mostly stacks, which it does not
// grow).
func headroom(r Run, e *Estimate) {
	if r.TimingOnly {
		e.Runtime = SatAdd(e.Runtime, e.Kernels)
		return
	}
	held := SatAdd(e.Data, e.Rings)
	if r.Verify {
		held = SatAdd(held, held)
	}
	live := e.Total() - e.Runtime
	e.Runtime = SatAdd(e.Runtime, live/100*int64(GCPercent(held)))
}

// estimateRecords bounds the op_log records of a run from above: every
// rank's messages (Messages) at recordsPerMsg records each, plus
// the bench's own records per rank.
func estimateRecords(r Run, rg Rings) int64 {
	if rg.QPs == 0 || rg.SlotSize <= 0 {
		return 0
	}
	n := (Messages(r, rg)*recordsPerMsg + recordsPerRank) * float64(r.World)
	if n > math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return int64(n)
}

// Messages is an upper bound on the messages one rank sends, for
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
func Messages(r Run, rg Rings) float64 {
	if rg.QPs == 0 || rg.SlotSize <= 0 {
		return 0
	}
	world := float64(r.World)
	elemBytes := float64(max(r.SendBytes, r.RecvBytes))
	slot, nslots := float64(rg.SlotSize), float64(rg.NSlots)
	steps := stepsPerReach * float64(max(1, rg.Reach))
	if r.Alltoall {
		dirs := float64(rg.QPs) / world
		return (world-1)*max(1, math.Ceil(float64(r.CountBytes)/slot))*max(1, world/dirs) + steps
	}
	bus := r.BusFactor * elemBytes
	full := math.Ceil(bus / slot)
	chunk := elemBytes / world
	bySteps := max(full, steps*nslots)
	if chunk >= slot {
		bySteps += steps // a partly filled last message per step
	}
	floor := max(minPieceBytes, min(slot/2, chunk/(2*nslots)))
	byBytes := steps * max(1, math.Ceil(bus/steps/floor))
	return min(bySteps, byBytes)
}

// Counts are what a run's host memory grows with, counted as it
// runs (the same with --timing-only or not).
type Counts struct {
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
	// ProbeWorlds: the worlds of the probes these counts were
	// extrapolated from (Extrapolate); none when a probe of the run
	// itself counted them.
	ProbeWorlds []int `json:"probe_worlds,omitempty"`
}

// Budget shares --max-memory between the sizes a -j sweep simulates at
// once: each was checked against the whole limit alone, so together they
// could pass it and end the sweep at the run-time guard. A size starts
// once its estimate fits next to those running; one that fits alone
// always starts, at the latest when the others are done. Only when sizes
// run changes, never what they report.
type Budget struct {
	mu      sync.Mutex
	freed   *sync.Cond
	limit   int64
	used    int64
	waiting int // sizes waiting in acquire
}

func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return nil
	}
	b := &Budget{limit: limit}
	b.freed = sync.NewCond(&b.mu)
	return b
}

// Acquire waits until n more bytes fit (or nothing else runs) and returns
// the function that gives them back. A nil budget admits everything.
func (b *Budget) Acquire(n int64) (release func()) {
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

// SetUpBytes is the estimate's part for the ranks of a world and their
// directions (a rank's and a direction's set-up costs), before any
// buffer: what setting up the world holds.
func SetUpBytes(ranks, directions int64) int64 {
	return SatAdd(SatMul(ranks, perRankBytes), SatMul(directions, perDirectionSetUp))
}

// perDirectionSetUp is the host memory one installed direction takes
// while a world is set up: a full_mesh of 1000 ranks (999,000
// directions) peaked at 2.30 GB against 0.53 GB for a ring of as many
// ranks (/usr/bin/time -f %M kernbench run ring_allreduce --topology
// full_mesh --world-size 1000 --set system.sips=32 --timing-only --bytes
// 4K), about 1.8 KB a direction.
const perDirectionSetUp = 2 << 10

// ScaledWorlds are the smaller worlds whose probes a run of world ranks
// is counted from (Extrapolate): a sixteenth and a quarter of it, up to
// maxScaledProbeWorld for the larger; ok false under 1024 ranks, where
// the sixteenth would be under minScaledProbeWorld and a probe of the run
// itself costs a minute at most. A factor of 4 keeps a square mesh_2d
// square and a 1:2 one 1:2 (custom_mesh at 256 ranks, 16 × 16,
// extrapolated from 4 × 8 and 8 × 8, came out at 0.69 of its peak).
func ScaledWorlds(world int) (small, large int, ok bool) {
	large = min(world/4, maxScaledProbeWorld)
	return large / 4, large, world/16 >= minScaledProbeWorld
}

// maxScaledProbeWorld: from 16,384 ranks the probes are of 1024 and 4096
// ranks, not of a sixteenth and a quarter of the world. The probe of a
// quarter costs a quarter of the run where its work grows as the world
// (a tree: at 65,536 ranks, --timing-only runs of 4096 and 16,384 ranks
// take 1.6 s of user CPU and 0.5 s of system next to the run's 5.8 s and
// 1.5 s), and at that size the ranks' fixed state, which the probes do
// not count, is most of the estimate (that tree: 2.6 of 2.8 GiB); what
// its kernels keep, from probes of 1024 and 4096 ranks, is within 0.1 %
// of the count from 4096 and 16,384.
const maxScaledProbeWorld = 4096

// minScaledProbeWorld: below 64 ranks what a shipped algorithm keeps
// does not grow yet as it does at scale (ring_allreduce's kernels keep
// 257 views in all at 16 ranks, 7479 at 64 and 126262 at 256, about
// 2p² from 64 on: a fit over 16 and 64 put 256 at 1.7 times its views).
const minScaledProbeWorld = 64

// Extrapolate is what a run of world ranks counts, from the counts c1
// and c2 of probes of the same run at w1 < w2 ranks, each with the same
// chunk a rank sends a peer: every count is taken to grow as a power of
// the world, w^b, with b fitted to the two probes (between 0 and 3: a
// ring's kernels keep p views each, p² in all; a tree's a few, p in
// all; an alltoall over a ring relays p² chunks a rank). What the
// kernels keep cannot be told from the configuration (ring_allreduce
// and ring_allreduce_manual differ 30-fold at the same messages), but
// how it grows with the world follows from the algorithm's structure,
// which the smaller worlds share.
func Extrapolate(w1 int, c1 *Counts, w2 int, c2 *Counts, world int) *Counts {
	grow := func(a, b int64) int64 {
		if b <= 0 {
			return 0
		}
		exp := 1.0
		if a > 0 {
			exp = math.Log(float64(b)/float64(a)) / math.Log(float64(w2)/float64(w1))
		}
		exp = min(3, max(0, exp))
		n := float64(b) * math.Pow(float64(world)/float64(w2), exp)
		if n > math.MaxInt64/4 {
			return math.MaxInt64 / 4
		}
		return int64(n)
	}
	return &Counts{
		Ops:                 grow(c1.Ops, c2.Ops),
		AllocBytes:          grow(c1.AllocBytes, c2.AllocBytes),
		Allocs:              grow(c1.Allocs, c2.Allocs),
		TileBytes:           grow(c1.TileBytes, c2.TileBytes),
		RetainedViews:       grow(c1.RetainedViews, c2.RetainedViews),
		RetainedHandles:     grow(c1.RetainedHandles, c2.RetainedHandles),
		RetainedHandleBytes: grow(c1.RetainedHandleBytes, c2.RetainedHandleBytes),
		ProbeWorlds:         []int{w1, w2},
	}
}
