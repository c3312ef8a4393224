package prims

import (
	"errors"
	"strings"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
)

// The fused primitives (MSCCL's rrs, rrc, rrcs, rcs; NCCL's
// recvReduceSend, recvReduceCopy, recvReduceCopySend, recvCopySend) work on
// buffers of any length. The buffer is cut like tl.send cuts it (pieces of
// slot_size bytes, the last one shorter) and every piece goes through the
// same operations a hand-written kernel issues for one message, on the same
// resources, pipelined in Go (pipeline.go):
//
//   - the local operand's pieces are fetched up to n_slots ahead;
//   - piece i is received: a slot in the PE's own TCM is taken (its credit
//     returns at once) and fetched directly; a slot elsewhere is first
//     copied into a TCM inbox (its credit returns after the copy);
//   - it is combined with the local piece on the math unit (redop; avg
//     accumulates as a sum and is divided by world_size when final);
//   - it is stored into dst (asynchronously) and, when forwarded, into a
//     TCM staging slot, whose send is issued one piece later, once that
//     store is done, so piece i+1's receive and math overlap piece i's
//     store.
//
// The calls return when the last piece has been sent; stores into dst may
// still be under way, and any later operation of the kernel on dst (and
// the kernel's end, and tl.flush()) waits for them.

// Call is one call of a fused primitive.
type Call struct {
	Name   string             // "tl.recv_reduce_send", …
	In     *machine.QueuePair // receiving direction
	Local  *View              // reduced with what arrives (nil: no reduction)
	Dst    *View              // where the result is stored (nil: nowhere)
	Out    *machine.QueuePair // forwarding direction (nil: not forwarded)
	Final  bool               // divide by world_size when redop is avg
	Piece  int64              // bytes per message at most
	Origin any                // the script position, for hazard reports
}

// NewCall returns the kernel's call record, cleared, for a call of the
// primitive name from origin (a kernel's calls run one at a time: the
// record is reused). The running primitive's write site is forgotten.
func (k *Kernel) NewCall(name string, origin any) *Call {
	c := &k.call
	*c = Call{Name: name, Origin: origin}
	k.FusedSite = nil
	return c
}

// Running is the fused primitive call under way (InFused), or nil.
func (k *Kernel) Running() *Call {
	if !k.InFused {
		return nil
	}
	return &k.call
}

// operand is the buffer that fixes a call's element type and length.
func (c *Call) operand() *View {
	if c.Local != nil {
		return c.Local
	}
	return c.Dst
}

// RunFused executes a fused primitive on the calling process. What the
// call holds (its direction sides, its local operand, the window of its
// loads) is given back on every return without defers: with the pieces'
// many returns they were not open-coded, and each call's deferreturn
// walked the stack (a thousand instructions).
func (k *Kernel) RunFused(c *Call) error {
	k.InFused = true
	err := k.runFusedHolding(c)
	k.InFused = false
	return err
}

// runFusedHolding takes the call's sides and operand, runs its pieces and
// gives them back.
func (k *Kernel) runFusedHolding(c *Call) error {
	releaseIn, err := k.UseSide(c.In, false, c.Name, c.Origin)
	if err != nil {
		return err
	}
	var releaseOut, doneReading func()
	if c.Out != nil {
		if releaseOut, err = k.UseSide(c.Out, true, c.Name, c.Origin); err != nil {
			releaseIn()
			return err
		}
	}
	if c.Local != nil {
		doneReading = k.readingOperand(c.Local.Reg, c.Name, c.Origin)
	}
	err = k.runPieces(c)
	if c.Local != nil {
		clear(k.window) // the loads of the window are recycled or abandoned
		doneReading()
	}
	if releaseOut != nil {
		releaseOut()
	}
	releaseIn()
	return err
}

// newTileBuf takes ownership of a piece's bytes data while its stores
// copy them (nil under timing-only: no owner; see TileBuf).
func (k *Kernel) newTileBuf(data []byte) *TileBuf { return k.tileBufs.New(k.PE, data) }

// SendDeferred sends the deferred piece, if any.
func (k *Kernel) SendDeferred() error {
	if k.deferred == nil {
		return nil
	}
	d, ss := k.storedDeferred()
	err := k.G.SendStored(k.Proc, ss)
	k.deferredSent(d, err)
	return err
}

// storedDeferred takes the deferred piece and its send of the staging
// slot (Deferred.Take).
func (k *Kernel) storedDeferred() (*Deferred, *machine.StoredSend) {
	d := k.deferred
	k.deferred = nil
	return d, d.Take(k.M, &k.Counts.Send) // (Send: Message's count)
}

// deferredSent finishes the send of d (err: its outcome): the trace's
// flow, and the send side given up.
func (k *Kernel) deferredSent(d *Deferred, err error) {
	if err == nil {
		k.flowStart(d.Send.Q)
	}
	d.Sent()
}

// Prefetch issues the loads of v's first n_slots pieces of piece bytes,
// for the fused primitive that will take v as its local operand.
func (k *Kernel) Prefetch(fn string, v *View, piece int64) error {
	g := k.G
	per := piece / int64(v.DT.Size())
	if per == 0 {
		return nil
	}
	// A piece already loading is not loaded again. Only loads issued
	// before this call can be one (the ones it issues are of distinct
	// pieces), and only if one overlaps v: one scan of the queue for the
	// call instead of one per piece.
	again := k.prefetched.Overlaps(v.Reg)
	for i := int64(0); i < int64(g.Cfg.NSlots) && i*per < v.Count; i++ {
		n := min(per, v.Count-i*per)
		reg := v.SubRegion(i*per, n)
		if again && k.takePrefetched(reg) != nil {
			continue
		}
		h, err := k.fetchPiece(fn, v, reg, n)
		if err != nil {
			return err
		}
		k.prefetched.Push(reg, h)
	}
	return nil
}

// startPiece takes the next message of c.In, which must be there and
// carry count elements of dt, and issues its load. A slot in the PE's
// own TCM is loaded in place (the load is direct and done long before the
// sender can reuse the slot its credit frees); a slot in HBM or SRAM is
// first copied into a TCM inbox (the credit returns after the copy), as a
// recv(dst=) into a landing buffer. A step of the pipeline takes a slot
// outside TCM with copyIn instead, whose wait for the copy is a step, so
// here that copy blocks in the process only (without steps); in a step, a
// store still under way into the slot to load is ErrInProcess, found
// before anything is taken.
func (k *Kernel) startPiece(c *Call, dt dtype.DType, count int64) (*Load, error) {
	g, q := k.G, c.In
	meta, err := NextPiece(q, c.Name, k.Rank, dt, count)
	if err != nil {
		return nil, err
	}
	inTCM := q.Rx.Mem == k.PE.TCM
	if inTCM && len(k.pendingWrites) > 0 && k.settleInProcess(q.Rx.Sub(int64(q.MyTail%uint64(g.Cfg.NSlots))*g.Cfg.SlotSize, meta.NBytes)) {
		return nil, ErrInProcess // (the slot's region, as TakeSlot makes it)
	}
	k.flowEnd(q, meta.Seq)
	if inTCM {
		slot, idx, gen := g.TakeSlot(q, true)
		k.Counts.Recv++
		// The slot's view is set in the load field by field (a literal
		// is built aside and copied in).
		h := k.Handles.New()
		src := &h.Src
		src.Reg, src.DT, src.Count, src.Rank, src.Dir = slot, dt, meta.Count, k.Rank, ""
		src.Reg.N = meta.Count * int64(dt.Size())
		src.Slot.Q, src.Slot.Idx, src.Slot.Gen, src.Lease = q, idx, gen, nil
		return k.FetchSrc(c.Name, h)
	}
	inbox, err := k.inboxFor(c.Name, dt, meta.Count)
	if err != nil {
		return nil, err
	}
	got, err := k.RecvInto(c.Name, q, inbox, c.Origin)
	if err != nil {
		return nil, err
	}
	return k.FetchLoad(c.Name, &got)
}

// inboxFor returns the next TCM landing view of count elements to receive
// a slot into (Scratch.NextInbox).
func (k *Kernel) inboxFor(fn string, dt dtype.DType, count int64) (*View, error) {
	s := &k.scratch
	if !s.HasInbox() {
		reg, err := k.allocScratch(fn, 2*k.G.Cfg.SlotSize)
		if err != nil {
			return nil, err
		}
		s.SetInbox(reg, k.G.Cfg.SlotSize)
	}
	reg := s.NextInbox()
	reg.N = count * int64(dt.Size())
	return &View{Reg: reg, DT: dt, Count: count, Rank: k.Rank}, nil
}

// StagingSlot returns the next TCM staging slot, sized for count
// elements of dt, once no send still reads it (a region, not a view: the
// piece's store and send need no more); see Staging.
func (k *Kernel) StagingSlot(fn string, dt dtype.DType, count int64) (machine.Region, error) {
	s := &k.scratch
	size := k.G.Cfg.SlotSize
	if !s.Staging.Ready() {
		reg, err := k.allocScratch(fn, int64(k.G.Cfg.NSlots+2)*size)
		if err != nil {
			return machine.Region{}, err
		}
		s.Staging.Set(reg)
	}
	return s.Staging.Slot(k.G, k.Proc, size, count*int64(dt.Size()))
}

// storeStaging issues the store of a forwarded piece t into its staging
// slot (sized for it by construction). It is Store without the hazard
// checks, none of which can fire on the staging ring: it is the kernel's
// private TCM, which no view of the program reaches (so no operand,
// tl.send_async source, pending dst store or prefetched load overlaps
// it); StagingSlot has already waited for the sends reading the slot; and
// the store of the slot's previous piece was waited for before that piece
// was sent (SendDeferred), n_slots + 2 pieces ago. For the same reason the
// store is not noted among the writes that later writes are checked
// against. The checks and the note were about 5 % of the 64-rank
// timing-only ring's instructions.
func (k *Kernel) storeStaging(slot machine.Region, t *Tile) *machine.MemOp {
	k.Counts.Store++
	op := k.M.StoreAt(k.PE, slot, t.Data, t.Ready)
	op.TileID = t.ID
	return op
}

// ErrNoStagingRoom is the cause of the OutOfMemory error of a fused
// primitive that finds no room for its staging slots: the run then names
// the settings (buffer_kind, n_slots, slot_size) with which it completes.
var ErrNoStagingRoom = errors.New("no room for the staging slots")

// allocScratch takes n bytes of the PE's TCM (or the group's StagingKind
// memory) for the kernel's lifetime.
func (k *Kernel) allocScratch(fn string, n int64) (machine.Region, error) {
	mem := ScratchMemory(k.PE, k.G.Cfg.StagingKind)
	reg, err := k.Alloc(mem, n)
	if err != nil {
		// The settings that make room (the rx rings elsewhere, fewer or
		// smaller slots) are named by the run, which tries each of them
		// (ErrNoStagingRoom); the code changes are named here.
		name := strings.ToUpper(mem.Space.String())
		e := errorf(KindOutOfMemory, "%s: rank %d: the primitive needs %d bytes of %s for its staging slots (%v); free %s (smaller tl.alloc buffers) or forward with tl.send",
			fn, k.Rank, n, name, err, name).(*Error)
		e.Cause = ErrNoStagingRoom
		return machine.Region{}, e
	}
	return reg, nil
}
