// Package tl is the Starlark face of one rank's PE: the `tl` object passed
// to every kernel, and the Ptr and Tile values it works with. Every builtin
// is registered once, in a starlark/registry table (TL, PtrTable,
// TileTable: name, signature, doc, function), from which `kernbench docs`
// writes the reference and the stubs.
package tl

import (
	"fmt"
	"slices"
	"sort"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/engine/prims"
	"kernbench/engine/sim"
	"kernbench/starlark/registry"
)

// Stats counts a rank's operations (for the report's "ops") and the
// interpreter work behind them: Starlark steps of the kernel and its
// threads, and tl builtin calls.
type Stats struct {
	Send, Recv, Load, Store, Math int64
	Steps, Calls                  int64
	// AllocBytes and Allocs are the kernel's tl.alloc buffers and
	// staging slots (bytes, and how many), for the host memory estimate.
	AllocBytes, Allocs int64
	// TileBytes are the bytes of the tiles tl calls gave the kernel (a
	// fetch, a wait, a reduction): the garbage that fills the collector's
	// headroom when the run moves bytes.
	TileBytes int64
	// Retained, when set (the estimate's probe), follows the views and
	// handles the kernel is given; shared by the ranks of a simulation.
	Retained *Retention
}

// Observer sees every data operation (the op_log and traces hook in here).
type Observer interface {
	Marker(k *Kernel, name string, args starlark.Tuple)
}

// Kernel is one rank's execution context and its `tl` value.
type Kernel struct {
	// The fields a message's piece of a fused primitive touches come
	// first, in the fewest cache lines: the object's first eight
	// (TestKernelPieceFieldsFirst; a Kernel is 1 176 bytes, in the
	// 1 280-byte size class, whose objects start on a line). At a hundred
	// ranks and more a rank's kernel is a cache miss away whenever its
	// rank handles a message; ordered by topic, the fields a piece needs
	// were spread over twelve of the kernel's twenty lines. What one call
	// uses follows; what reports, threads and tracing use is last.
	M     *machine.Machine
	G     *machine.Group // may be nil when no IPCQ group is installed
	PE    *machine.PE
	Proc  *sim.Proc
	Stats *Stats
	// root is the rank's kernel when this is a tl.spawn thread (nil for
	// the kernel itself); the root holds what threads share.
	root  *Kernel
	Rank  int
	World int

	RedOp dtype.RedOp
	// inFused is set while a fused primitive runs (callSite: its writes
	// are all from the call's site, fusedCallBuf.site).
	inFused bool
	// deferred is the last forwarded piece of a fused primitive, sent by
	// the next primitive or before any other operation of the kernel
	// (&deferredBuf, or nil).
	deferred *prims.Deferred
	pipeline *pieceRun // the pieces of the running primitive call
	// Handles are the recycled handles (the last recycled first),
	// shared by the kernels of a run when their creator sets one pool
	// for all (New gives a kernel without one a pool of its own;
	// tl.spawn threads share their parent's).
	Handles *HandlePool
	// pendingWrites are stores the fused primitives issued into their dst
	// and did not wait for (so the next call starts at once). Any later
	// operation of this kernel on an overlapping range waits for them
	// first, and so does the kernel's end (Finish).
	pendingWrites prims.Stores

	// deferredBuf is the deferred piece's storage, reused piece after
	// piece so that a piece allocates nothing.
	deferredBuf prims.Deferred
	// writes (on the root only) are the rank's tl.store/copy (and _async)
	// writes that may not be done: a second write into an overlapping
	// range before the first is done races (WriteWriteHazard), and so
	// does a read of what a tl.store_async or tl.copy_async not waited
	// for still writes (PendingStoreHazard).
	writes prims.Writes
	// issuingSends (on the root only) are the rank's tl.send_async calls,
	// from any thread, that may not have issued every message yet: their
	// sources must not be written (SendBufferHazard).
	issuingSends prims.IssuingSends
	// Only on the root: the number of threads spawned so far, the
	// direction sides in use and the local operands being read.
	nthreads int
	sides    prims.Sides
	reading  prims.OperandReads
	// prefetched are tl.prefetch loads waiting for their primitive.
	prefetched prims.PrefetchQueue
	_          [8]byte // (fusedCallBuf starts a line)
	// fusedCallBuf is a fused primitive call's record, reused call after
	// call (a kernel's calls run one at a time; runFused keeps nothing
	// of the record).
	fusedCallBuf fusedCall
	// scratch is the fused primitives' TCM (staging ring, inbox).
	scratch prims.Scratch

	// Reused by the fused primitives from call to call: the window of
	// local-operand loads, the dst stores of a call and the bytes of
	// completed tiles.
	window   []*prims.Load
	stores   []*machine.MemOp
	tileBufs prims.TileBufs
	// fusedArgs and fusedPairs are a fused primitive call's argument
	// slots, reused call after call.
	fusedArgs  fusedArgs
	fusedPairs []any
	origins    origins
	// writeSites box the sites of writes; fusedSite is the running fused
	// primitive's, once one of its writes needed it (site).
	writeSites sites
	fusedSite  prims.Site

	EP  *machine.Endpoint
	Obs Observer

	allocs []machine.Region
	// asyncSends are the kernel's tl.send_async calls not yet joined.
	asyncSends []*sendHandle
	// MaxSteps is this kernel's Starlark step budget (0: none): the
	// rank's --max-steps, and for a tl.spawn thread what its spawner had
	// left when it spawned it, so a chain of spawns is bounded as one
	// thread is.
	MaxSteps uint64
	// NewThread makes the Starlark thread of a tl.spawn thread (the
	// runner's loader thread: print, load, step limit); nil: a plain one.
	NewThread func(name string, k *Kernel) *starlark.Thread
	// NoteAlloc, when set, is told the bytes of every tile the kernel or
	// its threads are about to allocate, and may refuse them with an
	// error (the host-memory guard).
	NoteAlloc func(n int64) error
	// Fail ends the run with a thread's error (the runner attributes it to
	// the rank); nil: the simulation is stopped with it.
	Fail func(err error)
	// Rec, when set, sees every tl call of the kernel and its threads.
	Rec Recorder

	// thread is this thread's number on its rank (0 for the kernel).
	thread     int
	threadName string
	// children are the threads this kernel or thread spawned.
	children []*threadHandle
	// threadKernels are, on the root, every thread spawned on the rank
	// (a write by any of them discards the others' prefetched loads).
	threadKernels []*Kernel
	// attrs are the kernel's attribute values (its bound builtins and
	// fields), by their index in attrIndex.
	attrs []starlark.Value
	// sliceStart is when the traced operation in progress began.
	sliceStart sim.Time
}

// tracedOps are the tl operations drawn on the kernel track.
var tracedOps = map[string]bool{"send": true, "send_async": true, "recv": true, "wait": true, "flush": true, "fetch": true, "store": true, "copy": true, "reduce": true,
	"recv_reduce_send": true, "recv_reduce_copy": true, "recv_reduce_copy_send": true, "recv_copy_send": true, "recv_copy": true, "signal": true}

// keepsDeferredSend are the builtins that leave a fused primitive's
// deferred send for later: the primitives themselves (which send it after
// their first piece, or before they block) and operations that neither
// block nor touch memory. tl.spawn is not one: the primitive returned
// "when its last piece has been sent", so a thread spawned next must not
// send on the direction ahead of that piece.
var keepsDeferredSend = map[string]bool{
	"recv_reduce_send": true, "recv_reduce_copy": true, "recv_reduce_copy_send": true, "recv_copy_send": true, "recv_copy": true, "prefetch": true,
	"done": true, "program_id": true, "directions": true, "peer": true, "ready": true, "zeros": true, "full": true, "maximum": true, "minimum": true, "time": true, "alloc": true, "event": true,
}

// threadKernelKey is the Starlark thread-local naming the kernel whose tl
// builtins the thread last called (Ptr.tolist waits for its stores).
const threadKernelKey = "kernbench.tl.kernel"

var _ starlark.HasAttrs = (*Kernel)(nil)

// Builtin documents and implements one tl function: an entry of tl's
// method table (its Fn gets the kernel the builtin is bound to).
type Builtin = registry.Method[*Kernel]

// Attribute documents a plain tl attribute (its value is computed once,
// when the kernel's tl is made).
type Attribute = registry.Field[*Kernel]

// Attributes are tl's attributes, for the reference (a copy).
func Attributes() []Attribute { return slices.Clone(tlAttributes) }

// Attributes lists tl's value attributes.
var tlAttributes = []Attribute{
	{Name: "rank", Type: "int", Doc: "This rank's index in the process group.", Get: func(k *Kernel) starlark.Value { return starlark.MakeInt(k.Rank) }},
	{Name: "world_size", Type: "int", Doc: "Number of ranks in the process group.", Get: func(k *Kernel) starlark.Value { return starlark.MakeInt(k.World) }},
	{Name: "slot_size", Type: "int", Doc: "Bytes per IPCQ message at most (the rx slot size in force).", Get: func(k *Kernel) starlark.Value { return starlark.MakeInt64(k.slotSize()) }},
	{Name: "n_slots", Type: "int", Doc: "IPCQ ring depth per direction (messages in flight at most).", Get: func(k *Kernel) starlark.Value { return starlark.MakeInt(k.nSlots()) }},
	{Name: "buffer_kind", Type: "str", Doc: `Where this rank's IPCQ rx rings live ("tcm", "hbm", "sram"); a kernel that reads received slots in place may copy them out first when they are not in its own TCM.`, Get: func(k *Kernel) starlark.Value {
		if k.G == nil {
			return starlark.None
		}
		return starlark.String(k.G.Cfg.BufferKind.String())
	}},
	{Name: "machine", Type: "struct", Doc: "The machine: struct(sips, cubes_per_sip, pes_per_cube, world_size); with tl.location, what a hierarchical algorithm needs instead of hard-coded cube sizes.", Get: func(k *Kernel) starlark.Value {
		p := k.M.Params
		return MachineValue(p.Sips, p.CubesPerSip, p.PesPerCube, k.World)
	}},
	{Name: "channels", Type: "int", Doc: `Channels per neighbour the topology installed (ccl.yaml channels:, default 1); channel c of direction d is tl.channel(d, c).`, Get: func(k *Kernel) starlark.Value { return starlark.MakeInt(k.channels()) }},
	{Name: "redop", Type: "str", Doc: `The collective's reduction ("sum", "prod", "max", "min", "avg"); pass it to tl.reduce, which accumulates "avg" as a sum (divide by world_size at the end).`, Get: func(k *Kernel) starlark.Value { return starlark.String(k.RedOp.String()) }},
}

// Builtins are tl's functions, for the reference (a copy).
func Builtins() []Builtin { return slices.Clone(tlBuiltins) }

// Builtins is the registration table of tl's functions, sorted by name.
var tlBuiltins []Builtin

// tlTable is tl's method and field table: one shared builtin per function,
// bound to each kernel's tl (the functions run through callTL).
var tlTable *registry.Table[*Kernel]

func init() {
	tlBuiltins = append(append(append(kernelBuiltins(), primitiveBuiltins()...), locationBuiltins()...), eventBuiltins()...)
	sort.Slice(tlBuiltins, func(i, j int) bool { return tlBuiltins[i].Name < tlBuiltins[j].Name })
	methods := make([]Builtin, len(tlBuiltins))
	for i, b := range tlBuiltins {
		methods[i] = b
		methods[i].Fn = callTL(b)
	}
	tlTable = registry.New("tl", "tl.", tlAttributes, methods)
	attrIndex = make(map[string]int, len(tlBuiltins)+len(tlAttributes)+1)
	for i, b := range tlBuiltins {
		attrIndex[b.Name] = i
	}
	for i, a := range tlAttributes {
		attrIndex[a.Name] = len(tlBuiltins) + i
	}
	// "load" is a Starlark keyword, so tl.load cannot be written; getattr(tl,
	// "load") still finds the fetch builtin.
	attrIndex["load"] = attrIndex["fetch"]
}

// attrIndex numbers the names of a kernel's attributes (Kernel.attrs).
// One map serves every kernel: each tl call looks its name up, and a map
// per kernel was about six cache misses per call at a hundred ranks and
// more; this one stays cached, and a kernel's value is one line away.
var attrIndex map[string]int

// callTL wraps the function of b with what every tl call does: count it,
// note the thread's kernel, send a fused primitive's deferred piece first
// (unless b keeps it), show the call to a Recorder and draw it on the
// kernel's trace track. The choices that depend on b are made here, once;
// a call allocates nothing more than b itself.
func callTL(b Builtin) func(k *Kernel, th *starlark.Thread, sb *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	name, fn := b.Name, b.Fn
	keeps, traced := keepsDeferredSend[name], tracedOps[name]
	traceName := "tl." + name
	run := func(k *Kernel, th *starlark.Thread, sb *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if p := k.Proc; p != nil && p.Sim().Running() != p && p.Sim().Running() != nil {
			// Its operations would block the tl's own process from
			// inside another one's coroutine.
			return nil, fmt.Errorf("this tl is rank %d's %s and was called from another thread; a thread calls the tl tl.spawn gave it (fn's first argument)", k.Rank, k.track())
		}
		if !keeps && k.deferred != nil {
			// A fused primitive's last forwarded piece goes out before any
			// other operation (which could block on its receiver).
			if err := k.sendDeferred(); err != nil {
				return nil, err
			}
		}
		k.Stats.Calls++
		if th.Local(threadKernelKey) != k {
			th.SetLocal(threadKernelKey, k)
		}
		v, err := fn(k, th, sb, args, kw)
		if err != nil {
			return v, err
		}
		if t, ok := v.(*Tile); ok && t != nil {
			k.Stats.TileBytes += t.NBytes()
		}
		if r := k.Stats.Retained; r != nil {
			switch v := v.(type) {
			case *handle:
				if v != nil {
					r.noteHandle(v)
				}
			case *Ptr:
				if v != nil {
					r.noteView(v)
				}
			}
		}
		return v, err
	}
	call := func(k *Kernel, th *starlark.Thread, sb *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if k.Rec == nil {
			return run(k, th, sb, args, kw)
		}
		k.Rec.Call(k, name, args, kw, th.CallFrame(1).Pos)
		v, err := run(k, th, sb, args, kw)
		k.Rec.Return(k, name, args, kw, v, err)
		return v, err
	}
	if !traced {
		return call
	}
	return func(k *Kernel, th *starlark.Thread, sb *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if k.M.Trace == nil {
			return call(k, th, sb, args, kw)
		}
		// The kernel's track: one slice per operation that can take
		// simulated time (operations of one rank never overlap).
		start := k.M.Sim.Now()
		k.sliceStart = start
		v, err := call(k, th, sb, args, kw)
		k.M.Trace.Slice(k.PE.ID+1, k.tid(), k.track(), traceName, start, k.M.Sim.Now(), nil)
		return v, err
	}
}

// New makes the tl value for a kernel launch: tl's builtins bound to k.
func New(k *Kernel) *Kernel {
	if k.Stats == nil {
		k.Stats = &Stats{}
	}
	if k.Handles == nil {
		k.Handles = &HandlePool{}
	}
	// The attributes are made as the kernel first reads them (attr): a
	// kernel reads a handful of tl's fifty, and at tens of thousands of
	// ranks binding them all took more memory than the rest of a kernel.
	// Empty, not nil: New made this kernel.
	k.attrs = []starlark.Value{}
	return k
}

// bindAttr makes attribute i of the kernel on its first read (Attr
// returns the same value afterwards; the fields it reads are set before
// New).
func (k *Kernel) bindAttr(i int) starlark.Value {
	if len(k.attrs) == 0 {
		k.attrs = make([]starlark.Value, len(tlBuiltins)+len(tlAttributes))
	}
	var v starlark.Value
	if i < len(tlBuiltins) {
		v = tlTable.Builtin(tlBuiltins[i].Name).BindReceiver(k)
	} else {
		v = tlAttributes[i-len(tlBuiltins)].Get(k)
	}
	k.attrs[i] = v
	return v
}

func (k *Kernel) String() string        { return fmt.Sprintf("<tl rank=%d world_size=%d>", k.Rank, k.World) }
func (k *Kernel) Type() string          { return "tl" }
func (k *Kernel) Freeze()               {}
func (k *Kernel) Truth() starlark.Bool  { return true }
func (k *Kernel) Hash() (uint32, error) { return uint32(k.Rank), nil }
func (k *Kernel) Attr(name string) (starlark.Value, error) {
	if i, ok := attrIndex[name]; ok && k.attrs != nil { // (nil: a kernel New did not make)
		if i < len(k.attrs) && k.attrs[i] != nil {
			return k.attrs[i], nil
		}
		return k.bindAttr(i), nil
	}
	// The hint kernbench check gives for the same line.
	return nil, registry.NoSuchAttr("tl", name, k.AttrNames())
}
func (k *Kernel) AttrNames() []string {
	if k.attrs == nil {
		return []string{}
	}
	names := make([]string, 0, len(attrIndex))
	for n := range attrIndex {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Finish is called in the kernel's process when the kernel function has
// returned without error (otherwise Release): it sends a deferred piece,
// joins tl.send_async calls, waits for the stores still under way (the kernel is done
// when its data is in memory), then releases the kernel's memory.
func (k *Kernel) Finish() error {
	err := k.finishOps()
	k.Release()
	return err
}

// finishOps completes what a kernel or thread leaves under way: its
// deferred send, its tl.send_async calls, the threads it spawned and its
// stores.
func (k *Kernel) finishOps() error {
	err := k.sendDeferred()
	if err == nil {
		err = k.joinSends(nil)
	}
	for _, h := range k.children {
		if err == nil {
			_, err = k.joinThread(h)
		}
	}
	if err == nil {
		err = k.drainWrites()
	}
	return err
}

// drainWrites waits for every store this kernel left under way.
func (k *Kernel) drainWrites() error { return k.pendingWrites.Drain(k.M, k.Proc) }

// settle waits until no store this kernel left under way writes into reg,
// so that an operation on reg sees (or overwrites) the stored data.
func (k *Kernel) settle(reg machine.Region) error {
	if len(k.pendingWrites) == 0 {
		// Nothing left under way (a reduce-scatter's primitives store
		// nothing): no call (this much inlines, every load asks).
		return nil
	}
	return k.pendingWrites.Settle(k.M, k.Proc, reg)
}

// Release frees the kernel's tl.alloc scratch memory (called when the
// kernel returns).
func (k *Kernel) Release() {
	for i := len(k.allocs) - 1; i >= 0; i-- {
		r := k.allocs[i]
		r.Mem.FreeAfterSends(r.Off, r.N) // (its sends may be on their way)
	}
	k.allocs = nil
	k.scratch = prims.Scratch{}
	k.deferred, k.prefetched, k.asyncSends = nil, prims.PrefetchQueue{}, nil
}

func (k *Kernel) slotSize() int64 {
	if k.G == nil {
		return 0
	}
	return k.G.Cfg.SlotSize
}

func (k *Kernel) nSlots() int {
	if k.G == nil {
		return 0
	}
	return k.G.Cfg.NSlots
}

func (k *Kernel) mathReady(t sim.Time, n int64) sim.Time {
	k.Stats.Math++
	return k.M.MathReady(k.PE, t, n)
}

// logMath records a tile computed from a (and b, or a scalar) in the op_log.
func (k *Kernel) logMath(out *Tile, op string, a, b *Tile, fill func(*oplog.Record)) {
	l := k.M.Log
	if l == nil {
		return
	}
	out.ID = l.NewTile()
	r := &oplog.Record{Rank: k.Rank, Kind: oplog.KindMath, Name: "math", TStart: k.M.Sim.Now(), TEnd: out.Ready,
		Op: op, TileOut: out.ID, DType: out.DT, Count: out.Count, NBytes: out.NBytes()}
	if a != nil {
		r.TileA = a.ID
	}
	if b != nil {
		r.TileB = b.ID
	}
	if fill != nil {
		fill(r)
	}
	if l.Witnessed() {
		r.Produced = out.Data
		if k.M.OriginOf != nil {
			r.Origin = k.M.OriginOf()
		}
	}
	l.Add(r)
}

// logWrite records bytes written into memory outside any simulated
// operation (allocation zeroing, host writes), so phase 2 can replay them.
func LogWrite(m *machine.Machine, rank int, name string, reg machine.Region, zero bool) {
	l := m.Log
	if l == nil {
		return
	}
	now := m.Sim.Now()
	r := &oplog.Record{Rank: rank, Kind: oplog.KindMemory, Name: name, TStart: now, TEnd: now,
		Dst: reg.Addr(), DstSp: reg.Mem.Space.Log(), NBytes: reg.N}
	if !zero {
		r.Data = append([]byte(nil), reg.View()...)
	}
	if l.Witnessed() {
		r.Produced = reg.View()
		if m.OriginOf != nil {
			r.Origin = m.OriginOf()
		}
	}
	l.Add(r)
}

// issuedWrite is a write the rank issued (see prims.Writes).
type issuedWrite = prims.Write

// noteHandle attaches h, the handle a kernel got for op, to op's entry in
// the issued writes if op was a tl.*_async call.
func (k *Kernel) noteHandle(op *machine.MemOp, h *handle) {
	k.rootKernel().writes.Attach(op, &h.done)
}

// checkPendingRead refuses a read of reg (a send's source, a fetch, a copy's
// source) while a tl.store_async or tl.copy_async of the rank that was not
// waited for still writes an overlapping range: what is read would depend
// on which finishes first.
func (k *Kernel) checkPendingRead(fn string, reg machine.Region) error {
	if k.root == nil && k.writes.AsyncN == 0 {
		// No tl.store_async or tl.copy_async among the issued writes (the
		// fused primitives issue none): nothing to scan, and no call (this
		// much inlines, every load asks; a thread's kernel asks its
		// root's in the call).
		return nil
	}
	return k.scanPendingReads(fn, reg)
}

func (k *Kernel) scanPendingReads(fn string, reg machine.Region) error {
	return k.rootKernel().writes.ReadHazard(fn, k.Rank, reg, k.M.Params.Untimed)
}

// lookupCallSite is the Starlark position of the tl call running on k's
// thread (the caller of the builtin), or the zero position: a line-table
// decode, which a fused primitive does once per call.
func (k *Kernel) lookupCallSite() syntax.Position {
	if th, ok := k.Proc.Data.(*starlark.Thread); ok && th.CallStackDepth() > 1 {
		return th.CallFrame(1).Pos
	}
	return syntax.Position{}
}

// checkWriteWrite refuses a write into dst while an earlier write of the
// rank into an overlapping range is not done (prims.Writes.WriteHazard):
// the result would be a race, not a program.
func (k *Kernel) checkWriteWrite(fn string, dst machine.Region) error {
	return k.rootKernel().writes.WriteHazard(fn, k.Rank, dst)
}

// pendingWriteInto returns the first issued write of the rank that
// overlaps dst and is not done, or nil.
func (k *Kernel) pendingWriteInto(dst machine.Region) *issuedWrite {
	return k.rootKernel().writes.PendingInto(dst)
}

// noteWrite records a write issued by fn (see checkWriteWrite).
func (k *Kernel) noteWrite(fn string, op *machine.MemOp) {
	if op.Done {
		return
	}
	k.rootKernel().writes.Note(fn, op, k.site(), k.M.Params.Untimed)
}

// site is callSite as a prims.Site: a fused primitive's, boxed once per
// call (each of its pieces' writes takes it: this much inlines);
// another call's, boxed once per recent site (writeSites).
func (k *Kernel) site() prims.Site {
	if k.inFused && k.fusedSite != nil {
		return k.fusedSite
	}
	return k.boxSite()
}

func (k *Kernel) boxSite() prims.Site {
	if k.inFused {
		k.fusedSite = k.writeSites.box(k.fusedCallBuf.site)
		return k.fusedSite
	}
	return k.writeSites.box(k.lookupCallSite())
}
