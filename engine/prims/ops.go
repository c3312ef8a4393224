package prims

import (
	"errors"
	"fmt"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// The plain operations of a kernel (tl.fetch, store, copy, recv, send and
// their _async forms) as the machine does them, with the rank's hazard
// checks and bookkeeping; the fused primitives issue their pieces'
// operations through the same methods.

// FetchLoad issues the load of v into a private load of the pool (a
// fused primitive's: a view of a dozen words, passed by pointer).
func (k *Kernel) FetchLoad(fn string, v *View) (*Load, error) {
	l := k.Handles.New()
	l.Src = *v
	return k.FetchSrc(fn, l)
}

// fetchPiece issues the load of the piece reg (n elements) of v, its
// view made in the load (a sub-view built aside would be copied in).
func (k *Kernel) fetchPiece(fn string, v *View, reg machine.Region, n int64) (*Load, error) {
	l := k.Handles.New()
	l.Src = *v
	l.Src.Reg, l.Src.Count = reg, n
	return k.FetchSrc(fn, l)
}

// FetchSrc issues the load of l.Src into l, whose source the caller has
// filled in place (a fused primitive's received slot is built there, not
// built aside and copied in).
func (k *Kernel) FetchSrc(fn string, l *Load) (*Load, error) {
	reg := l.Src.Reg
	if err := k.CheckPendingRead(fn, reg); err != nil {
		return nil, err
	}
	if err := k.Settle(reg); err != nil {
		return nil, err
	}
	k.Counts.Load++
	op := k.M.Fetch(k.PE, reg)
	if l := k.M.LogOf(k.PE); l != nil {
		op.TileID = l.NewTile()
	}
	l.Kind, l.Op = "fetch", op
	l.WatchSlot(k.Rank)
	return l, nil
}

// Store issues the store of t into v once t's math is done, with every
// hazard check.
func (k *Kernel) Store(fn string, v *View, t *Tile) (*machine.MemOp, error) {
	return k.storeChecked(fn, v.Reg, v.DT, v.Count, t, true)
}

// storeChecked is Store into reg, a view of count elements of dt (a
// fused primitive's piece of dst, which is no View); checkWW=false leaves
// out the write-write check, for a caller that knows it cannot fire.
func (k *Kernel) storeChecked(fn string, reg machine.Region, dt dtype.DType, count int64, t *Tile, checkWW bool) (*machine.MemOp, error) {
	if err := k.CheckWrite(fn, reg); err != nil {
		return nil, err
	}
	if checkWW {
		if err := k.CheckWriteWrite(fn, reg); err != nil {
			return nil, err
		}
	}
	if err := k.Settle(reg); err != nil {
		return nil, err
	}
	k.DropPrefetched(reg)
	if dt != t.DT {
		return nil, errorf(KindDtypeMismatch, "%s: rank %d: tile is %s, ptr is %s", fn, k.Rank, t.DT, dt)
	}
	if count != t.Count {
		return nil, errorf(KindOutOfBounds, "%s: rank %d: tile has %d elements, ptr has %d", fn, k.Rank, t.Count, count)
	}
	// The store starts when the tile's math is done; the caller does not
	// wait for that (store_async) unless it waits for the handle.
	k.Counts.Store++
	op := k.M.StoreAt(k.PE, reg, t.Data, t.Ready)
	op.TileID = t.ID
	k.noteWrite(fn, op)
	return op, nil
}

// Copy issues the copy of l.Src into dst (same dtype and count), its
// operation l's, after every hazard check.
func (k *Kernel) Copy(fn string, dst *View, l *Load) error {
	src := &l.Src
	if dst.DT != src.DT {
		return errorf(KindDtypeMismatch, "%s: rank %d: dst is %s, src is %s", fn, k.Rank, dst.DT, src.DT)
	}
	if dst.Count != src.Count {
		return errorf(KindOutOfBounds, "%s: rank %d: dst has %d elements, src has %d", fn, k.Rank, dst.Count, src.Count)
	}
	if err := src.CheckSlot(k.Rank, "copy src"); err != nil {
		return err
	}
	if err := k.CheckPendingRead(fn, src.Reg); err != nil {
		return err
	}
	if err := k.CheckWrite(fn, dst.Reg); err != nil {
		return err
	}
	if err := k.CheckWriteWrite(fn, dst.Reg); err != nil {
		return err
	}
	if err := k.Settle(src.Reg); err != nil {
		return err
	}
	if err := k.Settle(dst.Reg); err != nil {
		return err
	}
	k.DropPrefetched(dst.Reg)
	l.Kind, l.Op = "copy", k.M.Copy(k.PE, dst.Reg, src.Reg)
	k.noteWrite(fn, l.Op)
	return nil
}

// fullMessage is the size of a full message of dt elements: slot_size
// rounded down to whole elements (tl.send cuts a buffer so; a slot_size of
// 6 carries one f32 per message, and a 4-byte message is not the last).
func fullMessage(slotSize int64, dt dtype.DType) int64 {
	sz := int64(dt.Size())
	return slotSize / sz * sz
}

// MessageType is the dtype of a message (u8 when its sender named none).
func MessageType(meta *machine.MsgMeta) dtype.DType {
	dt := dtype.DType(meta.DType)
	if !dt.Valid() {
		dt = dtype.U8
	}
	return dt
}

// RecvInto receives messages of q into consecutive parts of dst until
// dst is full or a message shorter than a full one ends the sender's
// buffer (tl.send of a buffer: full slots, then the rest). Each message's
// copy out of its slot is issued as soon as it arrives and its credit
// returns when that copy completes, so the sender refills the ring while
// earlier copies are still under way. It returns the view of dst that was
// written.
func (k *Kernel) RecvInto(fn string, q *machine.QueuePair, dst *View, at any) (View, error) {
	release, err := k.UseSide(q, false, fn, at)
	if err != nil {
		return View{}, err
	}
	defer release()
	g := k.G
	if err := k.Settle(dst.Reg); err != nil {
		return View{}, err
	}
	k.DropPrefetched(dst.Reg)
	var got int64 // bytes received so far
	var pending []*machine.MemOp
	for {
		if got > 0 {
			if err := g.WaitRecv(k.Proc, q); err != nil {
				return View{}, err
			}
		}
		meta := q.Slots[q.MyTail%uint64(g.Cfg.NSlots)].Meta
		dt := MessageType(&meta)
		if dst.DT != dt {
			return View{}, errorf(KindDtypeMismatch, "rank %d recv %s: the message carries %s, dst is %s", k.Rank, q.Dir, dt, dst.DT)
		}
		if meta.NBytes > dst.Reg.N-got {
			if got == 0 {
				return View{}, errorf(KindOutOfBounds, "rank %d recv %s: the message has %d bytes, dst holds %d", k.Rank, q.Dir, meta.NBytes, dst.Reg.N)
			}
			return View{}, errorf(KindOutOfBounds, "rank %d recv %s: message #%d has %d bytes, %d of dst's %d are left", k.Rank, q.Dir, meta.Seq, meta.NBytes, dst.Reg.N-got, dst.Reg.N)
		}
		if got > 0 {
			k.flowEnd(q, meta.Seq)
		}
		part := dst.Reg.Sub(got, meta.NBytes)
		if err := k.CheckWrite(fn, part); err != nil {
			return View{}, err
		}
		r := g.Take(q, false)
		k.Counts.Recv++
		op := k.M.Copy(k.PE, part, r.Slot)
		op.Name, op.Dir, op.Seq = "recv", q.Dir, meta.Seq
		got += meta.NBytes
		if got == dst.Reg.N || meta.NBytes < fullMessage(g.Cfg.SlotSize, dt) {
			// The last message: wait for every copy, then return its credit.
			pending = append(pending, op)
			for _, op := range pending {
				if err := op.Wait(k.Proc); err != nil {
					return View{}, err
				}
			}
			g.CopyDone(q, meta.Seq)
			break
		}
		op.Watcher = q // its credit returns when the copy completes
		pending = append(pending, op)
	}
	out := *dst
	out.Count = got / int64(dst.DT.Size())
	out.Reg = dst.SubRegion(0, out.Count)
	out.Dir = q.Dir
	return out, nil
}

// SendBufferOn sends src on q as ceil(nbytes / piece) messages (one empty
// message for an empty src), each a normal IPCQ message, and returns when
// the last one has been issued.
func (k *Kernel) SendBufferOn(q *machine.QueuePair, src *View, piece int64, origin any) error {
	release, err := k.UseSide(q, true, "tl.send", origin)
	if err != nil {
		return err
	}
	defer release()
	if err := k.PrepareSend(q, src); err != nil {
		return err
	}
	root := k.root0()
	if root.nthreads == 0 {
		// No other thread can write src while this one sends it.
		return SendBuffer(k, k.Proc, q, src.Reg, src.DT, src.Count, piece, origin, nil)
	}
	// Another thread could: the part not sent yet is noted as a
	// tl.send_async's is (SendBufferHazard for a write into it; such a
	// write silently changed what arrived).
	s := &Send{Q: q, Unissued: src.Reg, Origin: origin, Blocking: true}
	root.issuingSends = append(root.issuingSends, s)
	err = SendBuffer(k, k.Proc, q, src.Reg, src.DT, src.Count, piece, origin, s)
	s.Done = true
	return err
}

// SendAsync starts s, a send of src on q issued by a process of its own
// message by message as credits allow; the caller goes on at once and
// joins it with JoinSends (or s.Join). The caller has checked the send
// (PrepareSend).
func (k *Kernel) SendAsync(s *Send, q *machine.QueuePair, src *View, piece int64, origin any) error {
	release, err := k.UseSide(q, true, "tl.send_async", origin)
	if err != nil {
		return err
	}
	s.Q, s.Unissued, s.Origin = q, src.Reg, origin
	k.asyncSends = append(k.asyncSends, s)
	root := k.root0()
	root.issuingSends = append(root.issuingSends, s)
	v := *src
	k.M.Spawn(k.PE, fmt.Sprintf("rank %d tl.send_async(%q) issued at %v", k.Rank, q.Dir, origin), func(p *sim.Proc) {
		s.Err = SendBuffer(k, p, q, v.Reg, v.DT, v.Count, piece, origin, s)
		s.Done = true
		release()
		if s.Err != nil && !errors.Is(s.Err, sim.ErrKilled) {
			p.Sim().Stop(fmt.Errorf("rank %d: tl.send_async issued at %v: %w", k.Rank, origin, s.Err))
		}
		if w := s.Waiter; w != nil {
			s.Waiter = nil
			w.Wake()
		}
	})
	return nil
}

// PrepareSend checks a send of src on q before its first message: the
// source is a live slot, no store of the kernel is still writing it, and
// no tl.send_async of the kernel is still sending on q.
func (k *Kernel) PrepareSend(q *machine.QueuePair, src *View) error {
	if err := src.CheckSlot(k.Rank, "send src"); err != nil {
		return err
	}
	if err := k.CheckSendSide(q); err != nil {
		return err
	}
	if err := k.CheckPendingRead("tl.send", src.Reg); err != nil {
		return err
	}
	return k.Settle(src.Reg)
}

// CheckSendSide rejects a send on q while a tl.send_async of this kernel
// is still issuing messages on it (their order would be undefined).
func (k *Kernel) CheckSendSide(q *machine.QueuePair) error {
	for _, s := range k.asyncSends {
		if s.Q == q && !s.Done {
			return errorf(KindDirectionInUse, "rank %d send %s: the send side of %s is still used by the tl.send_async issued at %v; tl.wait(its handle) first", k.Rank, q.Dir, q.Dir, s.Origin)
		}
	}
	return nil
}

// JoinSends waits for the kernel's async sends on q (every direction
// when q is nil).
func (k *Kernel) JoinSends(q *machine.QueuePair) error {
	live := k.asyncSends[:0]
	for _, s := range k.asyncSends {
		if q == nil || s.Q == q {
			if err := s.Join(k.Proc); err != nil {
				return err
			}
		}
		if !s.Done {
			live = append(live, s)
		}
	}
	clear(k.asyncSends[len(live):])
	k.asyncSends = live
	return nil
}

// Message issues one IPCQ message of reg on q (at most slot_size) from
// process p (Messenger). For a tracked send s, rest is the part of its
// source still unissued once this message is queued: it is noted then,
// not when the send's overhead has passed, for by then a peer may have
// taken the message and sent back what it was waiting for (a write into
// the message's range that is no hazard).
func (k *Kernel) Message(p *sim.Proc, q *machine.QueuePair, reg machine.Region, dt dtype.DType, count int64, origin any, s *Send, rest machine.Region) error {
	k.Counts.Send++
	var posted machine.Poster
	if s != nil {
		s.Rest, posted = rest, s
	}
	if err := k.G.SendNoting(p, q, reg, machine.MsgMeta{DType: uint8(dt), Count: count, Origin: origin}, posted); err != nil {
		return err
	}
	k.flowStart(q)
	return nil
}

// Recv receives on q (nil: the next direction of ep with a message,
// round-robin) one message as its rx slot itself (dst nil: read in
// place, valid until the ring wraps) or, into dst, as many messages as
// fill it (RecvInto).
func (k *Kernel) Recv(fn string, q *machine.QueuePair, ep *machine.Endpoint, dst *View, at any) (View, error) {
	g := k.G
	if q != nil {
		release, err := k.UseSide(q, false, fn, at)
		if err != nil {
			return View{}, err
		}
		defer release()
		if err := g.WaitRecv(k.Proc, q); err != nil {
			return View{}, err
		}
	} else {
		var err error
		if q, err = g.WaitAny(k.Proc, ep); err != nil {
			return View{}, err
		}
	}
	meta := q.Slots[q.MyTail%uint64(g.Cfg.NSlots)].Meta
	dt := MessageType(&meta)
	k.flowEnd(q, meta.Seq)
	if dst != nil {
		return k.RecvInto(fn, q, dst, at)
	}
	r := g.Take(q, true)
	k.Counts.Recv++
	v := View{Reg: r.Slot, DT: dt, Count: meta.Count, Rank: k.Rank, Dir: q.Dir, Slot: SlotRef{Q: q, Idx: r.Idx, Gen: r.Gen}}
	v.Reg.N = meta.Count * int64(dt.Size())
	return v, nil
}

// Operand is an operand of Reduce: a tile of kernel By (a combination is
// costed on its first operand's kernel), or a view being loaded.
type Operand struct {
	Tile *Tile
	By   *Kernel
	load *Load
}

// LoadOperand issues the load of v as an operand of Reduce (both
// operands' loads are issued before either is waited for, so they
// overlap).
func (k *Kernel) LoadOperand(fn string, v *View) (Operand, error) {
	l := &Load{Src: *v}
	if _, err := k.FetchSrc(fn, l); err != nil {
		return Operand{}, err
	}
	return Operand{By: k, load: l}, nil
}

// tile is o's tile, once its load is done.
func (k *Kernel) tile(o *Operand) (*Tile, error) {
	if o.load == nil {
		return o.Tile, nil
	}
	if err := o.load.Op.Wait(k.Proc); err != nil {
		return nil, err
	}
	t := &Tile{}
	if err := o.load.Loaded(t); err != nil {
		return nil, err
	}
	return t, nil
}

// Reduce stores a op b into dst, as load, load, math, store, and returns
// once dst is written (tl.reduce).
func (k *Kernel) Reduce(fn string, dst *View, op dtype.Op, a, b Operand) error {
	ta, err := k.tile(&a)
	if err != nil {
		return err
	}
	tb, err := k.tile(&b)
	if err != nil {
		return err
	}
	var t Tile
	if err := a.By.Combine(&t, op, ta, tb, fn, nil); err != nil {
		return err
	}
	st, err := k.Store(fn, dst, &t)
	if err != nil {
		return err
	}
	waited := new(bool) // (the write's entry holds it, as a handle's)
	k.AttachDone(st, waited)
	if err := st.Wait(k.Proc); err != nil {
		return err
	}
	*waited = true
	return nil
}
