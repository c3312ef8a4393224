package machine

import (
	"fmt"

	"kernbench/engine/oplog"
	"kernbench/engine/sim"
)

// OpKind names a memory operation.
type OpKind uint8

const (
	OpFetch OpKind = iota + 1
	OpStore
	OpCopy
)

func (k OpKind) String() string {
	switch k {
	case OpFetch:
		return "fetch"
	case OpStore:
		return "store"
	case OpCopy:
		return "copy"
	}
	return "op"
}

// MemOp is one fetch, store or copy issued by a PE. Its data effect happens
// at completion: a fetch captures the source bytes then, a store or copy
// writes the destination then.
type MemOp struct {
	// The fields are grouped by when they are touched: the first line by
	// the completion (the data effect, the watcher, the waiter), the
	// issue and a check of whether a recorded operation is still under
	// way (gen and Done, a kernel's issued writes), the second by the
	// data effect, a recycle and a fetched tile's reader, then the
	// transfer (whose first line its completion touches), then what only
	// the issue and the op_log read. At a thousand ranks an operation is a
	// cache miss away when it completes.
	Kind   OpKind
	Done   bool
	direct bool
	// gen counts the operation's recycles (see Gen).
	gen    uint64
	waiter *sim.Proc
	// Watcher, when set, is told in the event loop right after the data
	// effect (a slot read's staleness check, a copy_to_dst receive's
	// credit return, a stored tile's buffer release): a hook on a value
	// the caller already has, so an operation costs no closure.
	Watcher OpWatcher
	Data    []byte // fetch: the loaded bytes (valid when Done); store: bytes to write

	Src, Dst Region
	m        *Machine
	// TileID is the fetched tile (fetch) or the stored tile (store) in the
	// op_log's tile dataflow; 0 when no log is kept.
	TileID int64

	Xfer Transfer

	PE      *PE
	startAt sim.Time
	// Name overrides the op_log name (e.g. "recv" for copy_to_dst).
	Name string
	// Dir and Seq identify the message of a copy_to_dst recv (set with
	// Name; the last line, which no other operation touches).
	Dir string
	Seq uint64
	// Origin is the issuing call (Machine.OriginOf; a witnessed run only).
	Origin string
	// w is the wait of a blocking Wait (one waiter at a time; the process
	// keeps a pointer to it while it lasts). With it the operation is 384
	// bytes, a size class that starts on a cache line.
	w StepWait
}

// Gen is the operation's generation: it changes when the operation is
// recycled, so a reference kept beside it (a kernel's list of issued
// writes) can tell that the operation it recorded completed and the
// object now stands for a later one.
func (op *MemOp) Gen() uint64 { return op.gen }

// OpWatcher is told when a memory operation completes.
type OpWatcher interface {
	OpDone(op *MemOp)
}

// newOp returns a cleared operation, reusing a recycled one; a fetch
// keeps the recycled operation's buffer for its bytes, other kinds hand
// it back to the pool.
func (m *Machine) newOp(pe *PE, kind OpKind) *MemOp {
	if l := pe.loc; len(l.freeOps) > 0 {
		n := len(l.freeOps)
		op := l.freeOps[n-1]
		l.freeOps = l.freeOps[:n-1]
		if kind != OpFetch && cap(op.Data) > 0 {
			l.putBuffer(op.Data)
			op.Data = nil
		}
		op.Kind = kind
		return op
	}
	return &MemOp{Kind: kind}
}

// Recycle hands back a completed operation that nothing refers to any
// more, for a later Fetch, Store or Copy to reuse. keepData says whether
// its Data buffer may be reused too (false while a tile still holds a
// fetch's bytes or a store's source). Operations still under way are left
// alone.
func (m *Machine) Recycle(op *MemOp, keepData bool) {
	if op == nil || !op.Done || op.waiter != nil {
		return
	}
	var data []byte
	if keepData {
		data = op.Data[:0]
	}
	// Cleared field by field, leaving out what every issue sets again
	// (Kind, PE, m, direct) and what is already clear (waiter, the
	// padding): the whole 384 bytes were half again the stores, for the
	// three operations of a fused primitive's piece.
	op.Done, op.Watcher, op.Data = false, nil, data
	op.Src, op.Dst = Region{}, Region{}
	op.gen++
	op.TileID, op.startAt = 0, 0
	op.Xfer = Transfer{}
	if op.Name != "" { // Dir and Seq are set only with it
		op.Name, op.Dir, op.Seq = "", "", 0
	}
	l := op.PE.loc
	l.freeOps = append(l.freeOps, op)
}

// Complete applies the data effect and wakes a waiter.
func (op *MemOp) Complete(*Transfer) {
	// A timing-only machine's memories have no bytes (Bytes is nil), so
	// these move nothing and a fetched tile carries its length only.
	switch op.Kind {
	case OpFetch:
		src := op.Src.View()
		if src != nil && cap(op.Data) < len(src) {
			op.Data = op.PE.loc.buffer(int64(len(src)))
		}
		if len(src) > 0 || len(op.Data) > 0 { // else op.Data stays as it is (timing-only)
			op.Data = append(op.Data[:0], src...)
		}
	case OpStore:
		op.Dst.WriteFrom(op.Data)
	case OpCopy:
		op.Dst.WriteFrom(op.Src.View())
	}
	op.Done = true
	if l := op.m.LogOf(op.PE); l != nil {
		op.record(l)
	}
	if op.Watcher != nil {
		op.Watcher.OpDone(op)
	}
	if w := op.waiter; w != nil {
		op.waiter = nil
		w.Wake()
	}
}

// String describes the operation in deadlock and watchdog reports.
func (op *MemOp) String() string {
	name := op.Name
	if name == "" {
		name = op.Kind.String()
	}
	switch op.Kind {
	case OpFetch:
		return fmt.Sprintf("%s %v on %v", name, op.Src, op.PE)
	case OpStore:
		return fmt.Sprintf("%s %v on %v", name, op.Dst, op.PE)
	}
	return fmt.Sprintf("%s %v -> %v on %v", name, op.Src, op.Dst, op.PE)
}

// Wait blocks p until the operation completed: the wait is a StepWait
// (its one implementation) driven to its end.
func (op *MemOp) Wait(p *sim.Proc) error {
	if op.Done {
		return nil // (this much inlines: a fused primitive's piece waits for three operations)
	}
	return op.wait(p)
}

func (op *MemOp) wait(p *sim.Proc) error {
	w := &op.w
	w.Load(p, op)
	return w.block(p)
}

func (m *Machine) issue(op *MemOp, path Path, n int64, direct bool) *MemOp {
	op.m = m
	op.direct = direct
	// The operation is new or recycled, so its transfer is clear: only
	// the fields that matter are set (a literal cleared it once more).
	op.Xfer.Path, op.Xfer.N, op.Xfer.VC, op.Xfer.Owner = path, n, VCCompute, op
	if m.Trace != nil {
		op.Xfer.Label = op.Kind.String()
	}
	if m.OriginOf != nil {
		op.Origin = m.OriginOf(op.PE.dma.sim)
	}
	now := op.PE.dma.sim.Now()
	if op.startAt > now {
		op.PE.dma.sim.At(op.startAt, op)
		return op
	}
	m.Submit(op.PE, &op.Xfer, direct)
	return op
}

// Fire issues a deferred operation at its start time.
func (op *MemOp) Fire() { op.m.Submit(op.PE, &op.Xfer, op.direct) }

// StoreAt is Store issued at time at (>= now) without blocking the caller:
// a tile's math finishes at at, and the store follows it.
func (m *Machine) StoreAt(pe *PE, dst Region, data []byte, at sim.Time) *MemOp {
	op := m.newOp(pe, OpStore)
	op.PE, op.Dst, op.Data, op.startAt = pe, dst, data, at
	if dst.Mem == pe.TCM {
		return m.issue(op, pe.tcmPath, dst.N, true)
	}
	return m.issue(op, m.PEToMem(pe, dst.Mem), dst.N, false)
}

// Fetch loads src into pe. Own TCM is read directly; anything else goes
// through the PE's DMA on vc_compute.
func (m *Machine) Fetch(pe *PE, src Region) *MemOp {
	op := m.newOp(pe, OpFetch)
	op.PE, op.Src = pe, src
	if src.Mem == pe.TCM {
		return m.issue(op, pe.tcmPath, src.N, true)
	}
	return m.issue(op, m.MemToPE(src.Mem, pe), src.N, false)
}

// Store writes data (len == dst.N) from pe into dst.
func (m *Machine) Store(pe *PE, dst Region, data []byte) *MemOp {
	op := m.newOp(pe, OpStore)
	op.PE, op.Dst, op.Data = pe, dst, data
	if dst.Mem == pe.TCM {
		return m.issue(op, pe.tcmPath, dst.N, true)
	}
	return m.issue(op, m.PEToMem(pe, dst.Mem), dst.N, false)
}

// Copy copies src to dst (same length) on pe's behalf: directly when both are
// in pe's own TCM, otherwise by DMA on vc_compute.
func (m *Machine) Copy(pe *PE, dst, src Region) *MemOp {
	op := m.newOp(pe, OpCopy)
	op.PE, op.Src, op.Dst = pe, src, dst
	if src.Mem == pe.TCM && dst.Mem == pe.TCM {
		return m.issue(op, pe.tcmCopyPath, src.N, true)
	}
	return m.issue(op, m.MemToMem(src.Mem, dst.Mem), src.N, false)
}

// MathReady books pe's math unit for an elementwise operation over n bytes
// whose operands are ready at t, and returns when the result is ready.
func (m *Machine) MathReady(pe *PE, t sim.Time, n int64) sim.Time {
	now := pe.dma.sim.Now()
	if pe.mathPath == nil {
		m.makeMath(pe)
	}
	ready, _ := pe.mathPath.book(now, max(t, now), n, nil, 0, m.slowBooking)
	return ready
}

func (op *MemOp) record(l *oplog.Log) {
	r := &oplog.Record{Rank: op.PE.Rank, Kind: oplog.KindMemory, Name: op.Kind.String(),
		TStart: op.Xfer.Issued, TEnd: op.Xfer.Finished}
	switch op.Kind {
	case OpFetch:
		r.Src, r.SrcSp, r.NBytes, r.TileOut = op.Src.Addr(), op.Src.Mem.Space.Log(), op.Src.N, op.TileID
	case OpStore:
		r.Dst, r.DstSp, r.NBytes, r.TileA = op.Dst.Addr(), op.Dst.Mem.Space.Log(), op.Dst.N, op.TileID
	case OpCopy:
		r.Src, r.SrcSp, r.Dst, r.DstSp, r.NBytes = op.Src.Addr(), op.Src.Mem.Space.Log(), op.Dst.Addr(), op.Dst.Mem.Space.Log(), op.Src.N
	}
	if op.Name != "" {
		r.Name = op.Name
	}
	if op.Name == "recv" {
		r.Kind, r.RecvMode, r.Dir, r.SenderSeq = oplog.KindIPCQ, oplog.CopyToDst, op.Dir, op.Seq
	}
	if l.Witnessed() {
		r.Origin = op.Origin
		if op.Kind == OpFetch {
			r.Produced = op.Data
		} else {
			r.Produced = op.Dst.View()
		}
	}
	l.Add(r)
}
