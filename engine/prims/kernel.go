package prims

import (
	"fmt"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/engine/sim"
	"kernbench/engine/trace"
)

// Counts are a rank's operations (for the report's "ops") and the memory
// its kernel took for itself.
type Counts struct {
	Send, Recv, Load, Store, Math int64
	// AllocBytes and Allocs are the kernel's tl.alloc buffers and
	// staging slots (bytes, and how many), for the host memory estimate.
	AllocBytes, Allocs int64
}

// Face is what the script's side of a kernel tells its engine side: the
// call site of a write being issued, for the hazard reports that name it.
type Face interface {
	WriteSite() Site
}

// Kernel is one rank's kernel (or one of its threads) on the machine:
// the engine side of starlark/tl's Kernel, which is its first field. It
// is the rank's hazard tracker (issued writes, sends still reading their
// sources, stores under way), its handle pool, its threads' arbiter
// (direction sides, local operands being read) and the host of its fused
// primitives' pipeline (staging ring, prefetched loads, deferred piece).
type Kernel struct {
	// The fields a message's piece of a fused primitive touches come
	// first, in the fewest cache lines (TestKernelPieceFieldsFirst): at a
	// hundred ranks and more a rank's kernel is a cache miss away
	// whenever its rank handles a message. What one call uses follows;
	// what threads and reports use is last.
	M      *machine.Machine
	G      *machine.Group // may be nil when no IPCQ group is installed
	PE     *machine.PE
	Proc   *sim.Proc
	Counts *Counts
	// root is the rank's kernel when this is a thread (nil for the
	// kernel itself); the root holds what threads share.
	root  *Kernel
	Rank  int
	World int

	RedOp dtype.RedOp
	// InFused is set while a fused primitive runs (its writes are all
	// from the call's site, FusedSite).
	InFused bool
	// StepsOff makes the process do every wait of the fused primitives'
	// pipelines, as without steps (tests: the reference run the steps are
	// compared with). (Beside InFused: the flags share a word.)
	StepsOff bool
	// deferred is the last forwarded piece of a fused primitive, sent by
	// the next primitive or before any other operation of the kernel
	// (&deferredBuf, or nil).
	deferred *Deferred
	pipeline *pieceRun // the pieces of the running primitive call
	// Handles are the recycled loads (the last recycled first), shared
	// by the kernels of a run when their creator sets one pool for all.
	Handles *LoadPool
	// pendingWrites are stores the fused primitives issued into their dst
	// and did not wait for (so the next call starts at once). Any later
	// operation of this kernel on an overlapping range waits for them
	// first, and so does the kernel's end.
	pendingWrites Stores

	// deferredBuf is the deferred piece's storage, reused piece after
	// piece so that a piece allocates nothing.
	deferredBuf Deferred
	// writes (on the root only) are the rank's tl.store/copy (and _async)
	// writes that may not be done: a second write into an overlapping
	// range before the first is done races (WriteWriteHazard), and so
	// does a read of what a tl.store_async or tl.copy_async not waited
	// for still writes (PendingStoreHazard).
	writes Writes
	// issuingSends (on the root only) are the rank's buffer sends, from
	// any thread, that may not have issued every message yet: their
	// sources must not be written (SendBufferHazard).
	issuingSends IssuingSends
	// Only on the root: the number of threads spawned so far, the
	// direction sides in use and the local operands being read.
	nthreads int
	sides    Sides
	reading  OperandReads
	// prefetched are tl.prefetch loads waiting for their primitive.
	prefetched PrefetchQueue
	// call is a fused primitive call's record, reused call after call (a
	// kernel's calls run one at a time; RunFused keeps nothing of it).
	call Call
	// scratch is the fused primitives' TCM (staging ring, inbox).
	scratch Scratch

	// Reused by the fused primitives from call to call: the window of
	// local-operand loads, the dst stores of a call and the bytes of
	// completed tiles.
	window   []*Load
	stores   []*machine.MemOp
	tileBufs TileBufs
	// FusedSite is the running fused primitive's call site, once one of
	// its writes needed it (the face sets it; cleared per call).
	FusedSite Site
	// Face names the sites of writes (nil: none are named).
	Face Face
	// NoteAlloc, when set on the root, is told the bytes of every tile
	// the kernel or its threads are about to allocate, and may refuse
	// them with an error (the host-memory guard).
	NoteAlloc func(n int64) error

	allocs []machine.Region // (root only) tl.alloc buffers and scratch
	// asyncSends are the kernel's tl.send_async calls not yet joined.
	asyncSends []*Send
	// Thread is this thread's number on its rank (0 for the kernel),
	// ThreadName its name ("thread 1 (worker)").
	Thread     int
	ThreadName string
	// threads are, on the root, every thread spawned on the rank (a
	// write by any of them discards the others' prefetched loads).
	threads []*Kernel
	// SliceStart is when the traced operation in progress began.
	SliceStart sim.Time
}

// Spawn sets t up as a new thread of k's rank (t's launch fields are the
// caller's) and returns its number on the rank.
func (k *Kernel) Spawn(t *Kernel) int {
	root := k.root0()
	root.nthreads++
	t.root, t.Thread, t.StepsOff = root, root.nthreads, k.StepsOff
	root.threads = append(root.threads, t)
	return t.Thread
}

// root0 is the rank's kernel (k itself, or the root of thread k).
func (k *Kernel) root0() *Kernel {
	if k.root != nil {
		return k.root
	}
	return k
}

// Threads reports whether the rank has spawned a thread.
func (k *Kernel) Threads() bool { return k.root0().nthreads > 0 }

// Tid is the trace track of this kernel or thread on its PE.
func (k *Kernel) Tid() int { return trace.TidKernel + k.Thread*trace.TidThreadStride }

// Track names this kernel or thread in reports.
func (k *Kernel) Track() string {
	if k.Thread == 0 {
		return "kernel"
	}
	return k.ThreadName
}

// FlowKey names message seq sent by rank on dir in the trace's flows.
func FlowKey(rank int, dir string, seq uint64) string {
	return fmt.Sprintf("%d/%s/%d", rank, dir, seq)
}

// flowEnd ends in the trace the flow of q's message seq, received now
// (untraced: no call, this much inlines).
func (k *Kernel) flowEnd(q *machine.QueuePair, seq uint64) {
	if k.M.Trace != nil {
		k.FlowEnd(q, seq)
	}
}

// FlowEnd is flowEnd in a traced run.
func (k *Kernel) FlowEnd(q *machine.QueuePair, seq uint64) {
	if tr := k.M.TraceOf(k.PE); tr != nil {
		tr.FlowEnd(FlowKey(q.Peer, q.PeerDir, seq), k.PE.ID+1, k.Tid(), k.SliceStart)
	}
}

// flowStart begins the trace's flow of the message just sent on q
// (untraced: no call, this much inlines).
func (k *Kernel) flowStart(q *machine.QueuePair) {
	if k.M.Trace != nil {
		k.traceFlowStart(q)
	}
}

func (k *Kernel) traceFlowStart(q *machine.QueuePair) {
	k.M.TraceOf(k.PE).FlowStart(FlowKey(k.Rank, q.Dir, q.MyHead-1), k.PE.ID+1, k.Tid(), k.SliceStart)
}

// DrainWrites waits for every store this kernel left under way.
func (k *Kernel) DrainWrites() error { return k.pendingWrites.Drain(k.M, k.Proc) }

// Settle waits until no store this kernel left under way writes into
// reg, so that an operation on reg sees (or overwrites) the stored data.
func (k *Kernel) Settle(reg machine.Region) error {
	if len(k.pendingWrites) == 0 {
		// Nothing left under way (a reduce-scatter's primitives store
		// nothing): no call (this much inlines, every load asks).
		return nil
	}
	return k.pendingWrites.Settle(k.M, k.Proc, reg)
}

// settleInProcess reports whether Settle(reg) would wait, in a step of a
// fused primitive's pipeline, where only the process can (ErrInProcess).
func (k *Kernel) settleInProcess(reg machine.Region) bool {
	if len(k.pendingWrites) == 0 || k.PE.Sim().Running() == k.Proc { // (onLoop, by hand: this much inlines)
		return false
	}
	return k.pendingWrites.WouldWait(reg)
}

// Release frees the kernel's tl.alloc and scratch memory (once the sends
// that read it are done) and forgets what it left for later.
func (k *Kernel) Release() {
	for i := len(k.allocs) - 1; i >= 0; i-- {
		r := k.allocs[i]
		r.Mem.FreeAfterSends(r.Off, r.N) // (its sends may be on their way)
	}
	k.allocs = nil
	k.scratch = Scratch{}
	k.deferred, k.prefetched, k.asyncSends = nil, PrefetchQueue{}, nil
}

// HasDeferred reports whether a forwarded piece waits to be sent.
func (k *Kernel) HasDeferred() bool { return k.deferred != nil }

// Alloc takes n bytes of mem for the kernel's lifetime, zeroed (logged
// as such), counted among the kernel's allocations.
func (k *Kernel) Alloc(mem *machine.Memory, n int64) (machine.Region, error) {
	off, err := mem.Alloc(n)
	if err != nil {
		return machine.Region{}, err
	}
	reg := machine.Region{Mem: mem, Off: off, N: n}
	root := k.root0()
	root.allocs = append(root.allocs, reg)
	k.Counts.AllocBytes += n
	k.Counts.Allocs++
	LogWrite(k.M, k.Rank, "alloc", reg, true)
	return reg, nil
}

// LogWrite records bytes written into memory outside any simulated
// operation (allocation zeroing, host writes), so phase 2 can replay them.
func LogWrite(m *machine.Machine, rank int, name string, reg machine.Region, zero bool) {
	l := m.RankLog(rank)
	if l == nil {
		return
	}
	now := m.RankSim(rank).Now()
	r := &oplog.Record{Rank: rank, Kind: oplog.KindMemory, Name: name, TStart: now, TEnd: now,
		Dst: reg.Addr(), DstSp: reg.Mem.Space.Log(), NBytes: reg.N}
	if !zero {
		r.Data = append([]byte(nil), reg.View()...)
	}
	if l.Witnessed() {
		r.Produced = reg.View()
		if m.OriginOf != nil {
			r.Origin = m.OriginOf(m.RankSim(rank))
		}
	}
	l.Add(r)
}

// Recycle hands a private load whose operation has completed (a fused
// primitive's) back for reuse (LoadPool.Recycle).
func (k *Kernel) Recycle(l *Load, keepData bool) { k.Handles.Recycle(k.M, l, keepData) }

// noRelease is UseSide's release when there is nothing to arbitrate.
func noRelease() {}

// UseSide marks q's send or receive side as used by this thread's
// operation op (at) until the returned release is called; another live
// thread using it is a DirectionInUse error naming both. Uses by the
// same thread nest: the side is free when each has been released.
func (k *Kernel) UseSide(q *machine.QueuePair, send bool, op string, at any) (release func(), err error) {
	root := k.root0()
	if root.nthreads == 0 {
		return noRelease, nil // one thread: nothing to arbitrate
	}
	release, u := root.sides.Use(q, send, k, op, at)
	if u != nil {
		return nil, u.InUseError(k.Rank, k.Track(), q, send, op, at, u.By.(*Kernel).Track())
	}
	return release, nil
}

// readingOperand registers a primitive's local operand as being read
// until done.
func (k *Kernel) readingOperand(reg machine.Region, op string, at any) (done func()) {
	root := k.root0()
	if root.nthreads == 0 {
		return noRelease
	}
	return root.reading.Add(k, reg, op, at)
}

// checkOperandWrite rejects a write into a local operand that a primitive
// of another thread is still reading.
func (k *Kernel) checkOperandWrite(fn string, dst machine.Region) error {
	if !k.root0().reading.Any() {
		return nil // no thread's primitive reads an operand (inlined: every write asks)
	}
	return k.scanOperandReads(fn, dst)
}

func (k *Kernel) scanOperandReads(fn string, dst machine.Region) error {
	if r := k.root0().reading.Conflict(k, dst); r != nil {
		return r.HazardError(fn, k.Rank, k.Track(), dst, r.By.(*Kernel).Track())
	}
	return nil
}

// CheckPendingRead refuses a read of reg (a send's source, a fetch, a
// copy's source) while a tl.store_async or tl.copy_async of the rank
// that was not waited for still writes an overlapping range: what is
// read would depend on which finishes first.
func (k *Kernel) CheckPendingRead(fn string, reg machine.Region) error {
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
	return k.root0().writes.ReadHazard(fn, k.Rank, reg, k.M.Params.Untimed)
}

// CheckWriteWrite refuses a write into dst while an earlier write of the
// rank into an overlapping range is not done (Writes.WriteHazard): the
// result would be a race, not a program.
func (k *Kernel) CheckWriteWrite(fn string, dst machine.Region) error {
	return k.root0().writes.WriteHazard(fn, k.Rank, dst, k)
}

// noteWrite records a write issued by fn (see CheckWriteWrite).
func (k *Kernel) noteWrite(fn string, op *machine.MemOp) {
	if op.Done {
		return
	}
	k.root0().writes.Note(fn, op, k.site(), k.M.Params.Untimed, k)
}

// AttachDone attaches waited, the waited flag of the handle a kernel got
// for op, to op's entry in the issued writes if op was a tl.*_async call.
func (k *Kernel) AttachDone(op *machine.MemOp, waited *bool) {
	k.root0().writes.Attach(op, waited)
}

// NoteReceiveInto records dst as written by fn, a receive that happens
// only when its handle is waited for (tl.recv_async): until then a read
// of dst reads what the receive will overwrite (PendingStoreHazard) and a
// write into it races with it (WriteWriteHazard), in a timed run as in
// the mock. waited is the handle's waited flag. It returns the
// operation that stands for the receive among the rank's writes; the
// receive sets its Done before it writes dst (its own write is no race).
func (k *Kernel) NoteReceiveInto(fn string, dst machine.Region, waited *bool) *machine.MemOp {
	op := &machine.MemOp{Dst: dst}
	k.root0().writes.Note(fn, op, k.site(), k.M.Params.Untimed, k)
	k.root0().writes.Attach(op, waited)
	return op
}

// site is the call site of a write being issued: a fused primitive's,
// boxed once per call (each of its pieces' writes takes it: this much
// inlines), or what the face names.
func (k *Kernel) site() Site {
	if k.InFused && k.FusedSite != nil {
		return k.FusedSite
	}
	if k.Face == nil {
		return nil
	}
	return k.Face.WriteSite()
}

// CheckWrite rejects a write into a range an unfinished send still
// reads, or that a primitive of another thread reads as its local
// operand. It is called as the write is issued (a fused primitive: per
// piece), never ahead of it.
func (k *Kernel) CheckWrite(fn string, dst machine.Region) error {
	if err := k.checkOperandWrite(fn, dst); err != nil {
		return err
	}
	if k.G == nil {
		return nil
	}
	// A tl.send_async reads its source message by message as credits
	// allow: a write into a part it has not issued yet changes what is
	// sent, in any thread of the rank.
	if root := k.root0(); len(root.issuingSends) > 0 { // (none issuing: no scan, no call)
		if err := k.checkIssuingSends(fn, dst); err != nil {
			return err
		}
	}
	if !dst.SendsMayRead() {
		return nil // no send reads near dst (the common case): no scan, no call
	}
	return InFlightHazard(k.G, fn, k.Rank, dst)
}

// checkIssuingSends is CheckWrite's check against the rank's buffer
// sends still issuing (IssuingSends.WriteHazard).
func (k *Kernel) checkIssuingSends(fn string, dst machine.Region) error {
	return k.root0().issuingSends.WriteHazard(fn, k.Rank, dst)
}

// takePrefetched returns and forgets a tl.prefetch load of exactly reg.
func (k *Kernel) takePrefetched(reg machine.Region) *Load {
	h, _ := k.prefetched.Take(reg).(*Load)
	return h
}

// DropPrefetched forgets tl.prefetch loads that a write to reg makes stale.
func (k *Kernel) DropPrefetched(reg machine.Region) {
	if k.prefetched.Len() == 0 && k.root == nil && k.nthreads == 0 {
		return // none waiting, no other thread (this much inlines: every store asks)
	}
	k.dropPrefetchedInRank(reg)
}

// dropPrefetchedInRank discards the loads overlapping reg that any
// thread of the rank prefetched: a write by one thread into another's
// prefetched operand left that thread's primitive with the old bytes.
func (k *Kernel) dropPrefetchedInRank(reg machine.Region) {
	root := k.root0()
	root.prefetched.Drop(reg)
	for _, t := range root.threads {
		t.prefetched.Drop(reg)
	}
}

// AllocView is count elements of d in the PE's memory sp (its TCM or
// HBM, or its cube's SRAM), zeroed, for the kernel's lifetime (tl.alloc).
func (k *Kernel) AllocView(fn string, count int, d dtype.DType, sp machine.Space) (View, error) {
	mem := map[machine.Space]*machine.Memory{machine.TCM: k.PE.TCM, machine.HBM: k.PE.HBM, machine.SRAM: k.PE.SRAM}[sp]
	if int64(count) > mem.Capacity/int64(d.Size()) {
		return View{}, errorf(KindOutOfMemory, "%s: rank %d: %v: cannot allocate %d × %s (capacity %d bytes)", fn, k.Rank, mem, count, d, mem.Capacity)
	}
	reg, err := k.Alloc(mem, int64(count)*int64(d.Size()))
	if err != nil {
		return View{}, errorf(KindOutOfMemory, "%s: rank %d: %v", fn, k.Rank, err)
	}
	return View{Reg: reg, DT: d, Count: int64(count), Rank: k.Rank}, nil
}
