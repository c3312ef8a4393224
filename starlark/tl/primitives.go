package tl

import (
	"fmt"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/engine/prims"
	"kernbench/starlark/errkind"
)

// The fused primitives (MSCCL's rrs, rrc, rrcs, rcs; NCCL's
// recvReduceSend, recvReduceCopy, recvReduceCopySend, recvCopySend) work on
// buffers of any length. The buffer is cut like tl.send cuts it (pieces of
// slot_size bytes, the last one shorter) and every piece goes through the
// same operations a hand-written kernel issues for one message, on the same
// resources, pipelined in Go:
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

// fusedCall is one call of a fused primitive.
type fusedCall struct {
	name   string             // "tl.recv_reduce_send", …
	in     *machine.QueuePair // receiving direction
	local  *Ptr               // reduced with what arrives (nil: no reduction)
	dst    *Ptr               // where the result is stored (nil: nowhere)
	out    *machine.QueuePair // forwarding direction (nil: not forwarded)
	final  bool               // divide by world_size when redop is avg
	piece  int64              // bytes per message at most
	origin any                // the Starlark position, for hazard reports
	site   syntax.Position    // the call site of its writes (callSite)
}

// origins are the boxed positions of a kernel's recent fused primitive
// calls (a kernel calls them from a few sites, over and over).
type origins struct {
	pos  [8]syntax.Position
	v    [8]any
	next int
}

// sites are the boxed positions of a kernel's recent writes (as
// origins: a write noted allocates nothing for its site).
type sites struct {
	pos  [8]syntax.Position
	v    [8]prims.Site
	next int
}

// box returns pos as a prims.Site, the same value for every write from
// pos while it is among the recent sites.
func (s *sites) box(pos syntax.Position) prims.Site {
	for i := range s.pos {
		if s.pos[i] == pos && s.v[i] != nil {
			return s.v[i]
		}
	}
	v := prims.Site(pos)
	s.pos[s.next], s.v[s.next] = pos, v
	s.next = (s.next + 1) % len(s.pos)
	return v
}

// origin returns pos boxed as a message's origin, the same value for
// every call from pos while it is among the recent sites.
func (k *Kernel) origin(pos syntax.Position) any {
	o := &k.origins
	for i := range o.pos {
		if o.pos[i] == pos && o.v[i] != nil {
			return o.v[i]
		}
	}
	v := any(pos)
	o.pos[o.next], o.v[o.next] = pos, v
	o.next = (o.next + 1) % len(o.pos)
	return v
}

// fusedArgs are a fused primitive's arguments as UnpackArgs fills them.
type fusedArgs struct {
	inDir, outDir        string
	local, dst, prefetch PtrArg
	pieceV               starlark.Value
	final                bool
}

// primitiveSpec says which arguments a fused primitive takes.
type primitiveSpec struct {
	name                        string
	local, dst, out, finalParam bool
}

// unpackPairs appends starlark.UnpackArgs' name and destination pairs
// for the primitive's parameters, into a's fields, to buf.
func (spec primitiveSpec) unpackPairs(buf []any, a *fusedArgs) []any {
	buf = append(buf, "in_dir", &a.inDir)
	if spec.local {
		buf = append(buf, "local", &a.local)
	}
	if spec.dst {
		buf = append(buf, "dst", &a.dst)
	}
	if spec.out {
		buf = append(buf, "out_dir", &a.outDir)
	}
	if spec.finalParam {
		buf = append(buf, "final?", &a.final)
	}
	return append(buf, "piece_bytes?", &a.pieceV, "prefetch?", &a.prefetch)
}

// fusedParam is a parameter of a fused primitive: its name, whether it
// may be left out, and how a value is kept (false: the value is not of
// the parameter's type, and UnpackArgs says so).
type fusedParam struct {
	name     string
	optional bool
	set      func(a *fusedArgs, v starlark.Value) bool
}

// fusedSig is a fused primitive's parameters in signature order (the
// order of the UnpackArgs pairs).
type fusedSig []fusedParam

func setDir(dst *string, v starlark.Value) bool {
	s, ok := v.(starlark.String)
	*dst = string(s)
	return ok
}

// signature lists spec's parameters.
func (spec primitiveSpec) signature() fusedSig {
	sig := fusedSig{{name: "in_dir", set: func(a *fusedArgs, v starlark.Value) bool { return setDir(&a.inDir, v) }}}
	if spec.local {
		sig = append(sig, fusedParam{name: "local", set: func(a *fusedArgs, v starlark.Value) bool { a.local.v = v; return true }})
	}
	if spec.dst {
		sig = append(sig, fusedParam{name: "dst", set: func(a *fusedArgs, v starlark.Value) bool { a.dst.v = v; return true }})
	}
	if spec.out {
		sig = append(sig, fusedParam{name: "out_dir", set: func(a *fusedArgs, v starlark.Value) bool { return setDir(&a.outDir, v) }})
	}
	if spec.finalParam {
		sig = append(sig, fusedParam{name: "final", optional: true, set: func(a *fusedArgs, v starlark.Value) bool {
			b, ok := v.(starlark.Bool)
			a.final = bool(b)
			return ok
		}})
	}
	return append(sig,
		fusedParam{name: "piece_bytes", optional: true, set: func(a *fusedArgs, v starlark.Value) bool { a.pieceV = v; return true }},
		fusedParam{name: "prefetch", optional: true, set: func(a *fusedArgs, v starlark.Value) bool { a.prefetch.v = v; return true }})
}

// unpack fills a from plain arguments, as UnpackArgs would, and reports
// whether it could; anything else (which UnpackArgs rejects) is left to
// UnpackArgs. It saves a call most of its work: building the pairs,
// trimming the optional marks off every name for every keyword, the
// conversions through interfaces.
func (sig fusedSig) unpack(a *fusedArgs, args starlark.Tuple, kw []starlark.Tuple) bool {
	if len(args) > len(sig) {
		return false
	}
	var given uint32
	for i, v := range args {
		if !sig[i].set(a, v) {
			return false
		}
		given |= 1 << i
	}
next:
	for _, item := range kw {
		name := string(item[0].(starlark.String))
		for i := range sig {
			if sig[i].name != name {
				continue
			}
			if given&(1<<i) != 0 || !sig[i].set(a, item[1]) {
				return false
			}
			given |= 1 << i
			continue next
		}
		return false
	}
	for i := range sig {
		if !sig[i].optional && given&(1<<i) == 0 {
			return false
		}
	}
	return true
}

func builtinFused(spec primitiveSpec) func(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	sig := spec.signature()
	return func(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		// The arguments unpack into the kernel's reused slots: a call
		// allocates nothing for them (a primitive runs once per few
		// messages, and its allocations were most of a message's).
		a := &k.fusedArgs
		*a = fusedArgs{pieceV: starlark.None}
		if !sig.unpack(a, args, kw) {
			// Anything but plain arguments (a wrong type, an unknown,
			// repeated or missing one) goes through UnpackArgs, for its
			// errors.
			*a = fusedArgs{pieceV: starlark.None}
			pairs := spec.unpackPairs(k.fusedPairs[:0], a)
			k.fusedPairs = pairs
			err := starlark.UnpackArgs(b.Name(), args, kw, pairs...)
			clear(pairs)
			if err != nil {
				return nil, err
			}
		}
		inDir, outDir, local, dst, prefetch, pieceV, final := a.inDir, a.outDir, a.local, a.dst, a.prefetch, a.pieceV, a.final
		*a = fusedArgs{}
		g, err := k.group(b.Name())
		if err != nil {
			return nil, err
		}
		c := &k.fusedCallBuf
		// The call's position is decoded from the line table once: it is
		// the call site of the pieces' writes and, boxed once per site,
		// the origin of their messages (boxing allocated per call).
		site := th.CallFrame(1).Pos
		writeSite := site
		if d, ok := k.Proc.Data.(*starlark.Thread); !ok || d != th {
			writeSite = k.lookupCallSite() // what callSite finds otherwise
		}
		*c = fusedCall{name: b.Name(), final: final, origin: k.origin(site), site: writeSite}
		k.fusedSite = nil
		if c.piece, err = k.pieceBytes(b.Name(), pieceV); err != nil {
			return nil, err
		}
		if c.in, err = g.LookupRecv(k.Rank, inDir); err != nil {
			return nil, err
		}
		if spec.out {
			if c.out, err = g.Lookup(k.Rank, outDir, true); err != nil {
				return nil, err
			}
			if err := k.checkSendSide(c.out); err != nil {
				return nil, err
			}
		}
		if spec.local {
			if c.local, err = local.Ptr(b.Name(), "local"); err != nil {
				return nil, err
			}
		}
		if spec.dst {
			if c.dst, err = dst.Dst(b.Name(), "dst"); err != nil {
				return nil, err
			}
		}
		if c.local != nil && c.dst != nil {
			if c.local.DT != c.dst.DT {
				return nil, errorf(errkind.DtypeMismatch, "%s: rank %d: local is %s, dst is %s", b.Name(), k.Rank, c.local.DT, c.dst.DT)
			}
			if c.local.Count != c.dst.Count {
				return nil, errorf(errkind.OutOfBounds, "%s: rank %d: local has %d elements, dst has %d", b.Name(), k.Rank, c.local.Count, c.dst.Count)
			}
		}
		if prefetch.Given() {
			// The next primitive's local operand starts loading first, as a
			// tl.prefetch call just before this one would (one call less).
			next, err := prefetch.Ptr(b.Name(), "prefetch")
			if err != nil {
				return nil, err
			}
			if err := k.prefetch(b.Name(), next, c.piece); err != nil {
				return nil, err
			}
		}
		return starlark.None, k.runFused(c)
	}
}

// primitiveBuiltins are the fused primitives' entries in the tl table.
func primitiveBuiltins() []Builtin {
	const pieces = " Works on buffers of any length, cut into pieces of slot_size (or piece_bytes) bytes like tl.send; piece i is combined and forwarded as soon as it has arrived while piece i+1 may still be on the wire. The sender's buffer must have the same length and dtype."
	const final = " final=True divides by world_size when the redop is avg (the last reduction of an allreduce)."
	const prefetch = " prefetch=ptr first starts loading ptr as tl.prefetch(ptr) would (the next primitive's local operand), saving a call."
	return []Builtin{
		{Name: "recv_reduce_send", Sig: "recv_reduce_send(in_dir, local, out_dir, piece_bytes=None, prefetch=None)",
			Doc: "Receive a buffer from in_dir, combine it with local (the run's redop) and send the result on out_dir (MSCCL rrs)." + pieces + prefetch,
			Fn:  builtinFused(primitiveSpec{local: true, out: true})},
		{Name: "recv_reduce_copy", Sig: "recv_reduce_copy(in_dir, local, dst, final=False, piece_bytes=None, prefetch=None)",
			Doc: "Receive a buffer from in_dir, combine it with local and store the result into dst (MSCCL rrc; dst may be local)." + final + pieces + prefetch,
			Fn:  builtinFused(primitiveSpec{local: true, dst: true, finalParam: true})},
		{Name: "recv_reduce_copy_send", Sig: "recv_reduce_copy_send(in_dir, local, dst, out_dir, final=False, piece_bytes=None, prefetch=None)",
			Doc: "Receive a buffer from in_dir, combine it with local, store the result into dst and send it on out_dir (MSCCL rrcs; dst may be local)." + final + pieces + prefetch,
			Fn:  builtinFused(primitiveSpec{local: true, dst: true, out: true, finalParam: true})},
		{Name: "prefetch", Sig: "prefetch(local, piece_bytes=None)",
			Doc: "Start loading the first n_slots pieces of local, the local operand of a fused primitive called later, so that its first pieces are ready when it starts (the next step of a pipeline). The loads are used by the first primitive whose local operand begins with the same pieces; a write to local before that discards them.",
			Fn:  builtinPrefetch},
		{Name: "recv_copy", Sig: "recv_copy(in_dir, dst, piece_bytes=None, prefetch=None)",
			Doc: "Receive a buffer from in_dir into dst the way the fused primitives do: each piece is loaded from its slot (the credit returns at once when the rings are in this PE's TCM) and stored into dst, and the call returns while the last stores finish (later reads of dst wait for them; a later write into dst is a WriteWriteHazard until tl.flush()). tl.recv(dir, dst=) instead copies every slot by DMA and returns when the copies are done (MSCCL r)." + pieces + prefetch,
			Fn:  builtinFused(primitiveSpec{dst: true})},
		{Name: "recv_copy_send", Sig: "recv_copy_send(in_dir, dst, out_dir, piece_bytes=None, prefetch=None)",
			Doc: "Receive a buffer from in_dir, store it into dst and send it on out_dir (MSCCL rcs)." + pieces + prefetch,
			Fn:  builtinFused(primitiveSpec{dst: true, out: true})},
	}
}

// operand is the buffer that fixes a call's element type and length.
func (c *fusedCall) operand() *Ptr {
	if c.local != nil {
		return c.local
	}
	return c.dst
}

// runFused executes a fused primitive on the calling process. What the
// call holds (its direction sides, its local operand, the window of its
// loads) is given back on every return without defers: with the pieces'
// many returns they were not open-coded, and each call's deferreturn
// walked the stack (a thousand instructions).
func (k *Kernel) runFused(c *fusedCall) error {
	k.inFused = true // (c is k.fusedCallBuf: callSite takes c.site from there)
	err := k.runFusedHolding(c)
	k.inFused = false
	return err
}

// runFusedHolding takes the call's sides and operand, runs its pieces and
// gives them back.
func (k *Kernel) runFusedHolding(c *fusedCall) error {
	releaseIn, err := k.useSide(c.in, false, c.name, c.origin)
	if err != nil {
		return err
	}
	var releaseOut, doneReading func()
	if c.out != nil {
		if releaseOut, err = k.useSide(c.out, true, c.name, c.origin); err != nil {
			releaseIn()
			return err
		}
	}
	if c.local != nil {
		doneReading = k.readingOperand(c.local.Reg, c.name, c.origin)
	}
	err = k.runPieces(c)
	if c.local != nil {
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
// copy them (nil under timing-only: no owner; see prims.TileBuf).
func (k *Kernel) newTileBuf(data []byte) *prims.TileBuf { return k.tileBufs.New(k.M, data) }

// sendDeferred sends the deferred piece, if any.
func (k *Kernel) sendDeferred() error {
	if k.deferred == nil {
		return nil
	}
	d, ss := k.storedDeferred()
	err := k.G.SendStored(k.Proc, ss)
	k.deferredSent(d, err)
	return err
}

// storedDeferred takes the deferred piece and its send of the staging
// slot (prims.Deferred.Take).
func (k *Kernel) storedDeferred() (*prims.Deferred, *machine.StoredSend) {
	d := k.deferred
	k.deferred = nil
	return d, d.Take(k.M, &k.Stats.Send) // (Send: messenger.Message's count)
}

// deferredSent finishes the send of d (err: its outcome): the trace's
// flow, and the send side given up.
func (k *Kernel) deferredSent(d *prims.Deferred, err error) {
	if tr := k.M.Trace; tr != nil && err == nil {
		q := d.Send.Q
		tr.FlowStart(flowKey(k.Rank, q.Dir, q.MyHead-1), k.PE.ID+1, k.tid(), k.sliceStart)
	}
	d.Sent()
}

// takePrefetched returns and forgets a tl.prefetch load of exactly reg.
func (k *Kernel) takePrefetched(reg machine.Region) *prims.Load {
	h, _ := k.prefetched.Take(reg).(*prims.Load)
	return h
}

// dropPrefetched forgets tl.prefetch loads that a write to reg makes stale.
func (k *Kernel) dropPrefetched(reg machine.Region) {
	if k.prefetched.Len() == 0 && k.root == nil && k.nthreads == 0 {
		return // none waiting, no other thread (this much inlines: every store asks)
	}
	k.dropPrefetchedInRank(reg)
}

// dropPrefetchedInRank discards the loads overlapping reg that any
// thread of the rank prefetched: a write by one thread into another's
// prefetched operand left that thread's primitive with the old bytes.
func (k *Kernel) dropPrefetchedInRank(reg machine.Region) {
	root := k.rootKernel()
	root.prefetched.Drop(reg)
	for _, t := range root.threadKernels {
		t.prefetched.Drop(reg)
	}
}

func builtinPrefetch(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var local PtrArg
	var pieceV starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kw, "local", &local, "piece_bytes?", &pieceV); err != nil {
		return nil, err
	}
	p, err := local.Ptr(b.Name(), "local")
	if err != nil {
		return nil, err
	}
	piece, err := k.pieceBytes(b.Name(), pieceV)
	if err != nil {
		return nil, err
	}
	return starlark.None, k.prefetch(b.Name(), p, piece)
}

// prefetch issues the loads of p's first n_slots pieces of piece bytes,
// for the fused primitive that will take p as its local operand.
func (k *Kernel) prefetch(fn string, p *Ptr, piece int64) error {
	g := k.G
	per := piece / int64(p.DT.Size())
	if per == 0 {
		return nil
	}
	// A piece already loading is not loaded again. Only loads issued
	// before this call can be one (the ones it issues are of distinct
	// pieces), and only if one overlaps p: one scan of the queue for the
	// call instead of one per piece.
	again := k.prefetched.Overlaps(p.Reg)
	for i := int64(0); i < int64(g.Cfg.NSlots) && i*per < p.Count; i++ {
		n := min(per, p.Count-i*per)
		reg := p.SubRegion(i*per, n)
		if again && k.takePrefetched(reg) != nil {
			continue
		}
		h, err := k.fetchPiece(fn, p, reg, n)
		if err != nil {
			return err
		}
		k.prefetched.Push(reg, h)
	}
	return nil
}

// fetchPiece issues the load of the piece reg (n elements) of p, its Ptr
// made in the load's handle (p.sub would build it aside and copy it).
func (k *Kernel) fetchPiece(fn string, p *Ptr, reg machine.Region, n int64) (*prims.Load, error) {
	h := k.Handles.New()
	h.Src = p.View
	h.Src.Reg, h.Src.Count = reg, n
	return k.fetchSrc(fn, h)
}

// startPiece takes the next message of c.in, which must be there and
// carry count elements of dt, and issues its load. A slot in the PE's
// own TCM is loaded in place (the load is direct and done long before the
// sender can reuse the slot its credit frees); a slot in HBM or SRAM is
// first copied into a TCM inbox (the credit returns after the copy), as a
// recv(dst=) into a landing buffer. A step of the pipeline takes a slot
// outside TCM with copyIn instead, whose wait for the copy is a step, so
// here that copy blocks in the process only (without steps); in a step, a
// store still under way into the slot to load is prims.ErrInProcess, found
// before anything is taken.
func (k *Kernel) startPiece(c *fusedCall, dt dtype.DType, count int64) (*prims.Load, error) {
	g, q := k.G, c.in
	meta, err := prims.NextPiece(q, c.name, k.Rank, dt, count)
	if err != nil {
		return nil, err
	}
	inTCM := q.Rx.Mem == k.PE.TCM
	if inTCM && len(k.pendingWrites) > 0 && k.settleInProcess(q.Rx.Sub(int64(q.MyTail%uint64(g.Cfg.NSlots))*g.Cfg.SlotSize, meta.NBytes)) {
		return nil, prims.ErrInProcess // (the slot's region, as TakeSlot makes it)
	}
	if tr := k.M.Trace; tr != nil {
		tr.FlowEnd(flowKey(q.Peer, q.PeerDir, meta.Seq), k.PE.ID+1, k.tid(), k.sliceStart)
	}
	if inTCM {
		slot, idx, gen := g.TakeSlot(q, true)
		k.Stats.Recv++
		// The slot's Ptr is set in the handle field by field (a literal
		// is built aside and copied in).
		h := k.Handles.New()
		src := &h.Src
		src.Reg, src.DT, src.Count, src.Rank, src.Dir = slot, dt, meta.Count, k.Rank, ""
		src.Reg.N = meta.Count * int64(dt.Size())
		src.Slot.Q, src.Slot.Idx, src.Slot.Gen, src.Lease = q, idx, gen, nil
		return k.fetchSrc(c.name, h)
	}
	inbox, err := k.inboxFor(c.name, dt, meta.Count)
	if err != nil {
		return nil, err
	}
	got, err := k.recvInto(c.name, q, inbox, c.origin)
	if err != nil {
		return nil, err
	}
	return k.fetchLoad(c.name, got)
}

// inboxFor returns the next TCM landing view of count elements to receive
// a slot into (prims.Scratch.NextInbox).
func (k *Kernel) inboxFor(fn string, dt dtype.DType, count int64) (*Ptr, error) {
	s := &k.scratch
	if !s.HasInbox() {
		reg, err := k.allocScratch(fn, 2*k.G.Cfg.SlotSize)
		if err != nil {
			return nil, err
		}
		s.SetInbox(reg, k.G.Cfg.SlotSize)
	}
	return NewPtr(s.NextInbox(), dt, count, k.Rank), nil
}

// stagingSlot returns the next TCM staging slot, sized for count
// elements of dt, once no send still reads it (a region, not a Ptr: the
// piece's store and send need no more, and a Ptr is a dozen words to
// copy); see prims.Staging.
func (k *Kernel) stagingSlot(fn string, dt dtype.DType, count int64) (machine.Region, error) {
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
// slot (sized for it by construction). It is storeOp without
// the hazard checks, none of which can fire on the staging ring: it is the
// kernel's private TCM, which no Ptr of the program reaches (so no
// operand, tl.send_async source, pending dst store or prefetched load
// overlaps it); stagingSlot has already waited for the sends reading the
// slot; and the store of the slot's previous piece was waited for before
// that piece was sent (sendDeferred), n_slots + 2 pieces ago. For the
// same reason the store is not noted among the writes that later writes
// are checked against. The checks and the note were about 5 % of the
// 64-rank timing-only ring's instructions.
func (k *Kernel) storeStaging(slot machine.Region, t *Tile) *machine.MemOp {
	k.Stats.Store++
	op := k.M.StoreAt(k.PE, slot, t.Data, t.Ready)
	op.TileID = t.ID
	return op
}

// allocScratch takes n bytes of the PE's TCM (or the group's StagingKind
// memory) for the kernel's lifetime.
func (k *Kernel) allocScratch(fn string, n int64) (machine.Region, error) {
	mem := prims.ScratchMemory(k.PE, k.G.Cfg.StagingKind)
	off, err := mem.Alloc(n)
	if err != nil {
		// The settings that make room (the rx rings elsewhere, fewer or
		// smaller slots) are named by the run, which tries each of them
		// (ErrNoStagingRoom); the code changes are named here.
		name := strings.ToUpper(mem.Space.String())
		e := errorf(errkind.TLOutOfMemory, "%s: rank %d: the primitive needs %d bytes of %s for its staging slots (%v); free %s (smaller tl.alloc buffers) or forward with tl.send",
			fn, k.Rank, n, name, err, name).(*Error)
		e.cause = ErrNoStagingRoom
		return machine.Region{}, e
	}
	reg := machine.Region{Mem: mem, Off: off, N: n}
	k.rootKernel().allocs = append(k.rootKernel().allocs, reg)
	k.Stats.AllocBytes += n
	k.Stats.Allocs++
	LogWrite(k.M, k.Rank, "alloc", reg, true)
	return reg, nil
}

// scalar is t op s, costed and logged like a tile-by-scalar expression.
func (t *Tile) scalar(op dtype.Op, f float64, i int64, right bool) (starlark.Value, error) {
	out, err := t.scalarValue(op, f, i, right, nil)
	if err != nil {
		return nil, fmt.Errorf("Tile %s: %w", op, err)
	}
	return &out, nil
}

// scalarValue is scalar into a tile backed by buf when it is large enough
// (buf may be t's own bytes: the operation is elementwise).
func (t *Tile) scalarValue(op dtype.Op, f float64, i int64, right bool, buf []byte) (Tile, error) {
	out, err := t.likeValue(buf)
	if err != nil {
		return out, err
	}
	if out.Data != nil {
		dtype.BinaryScalar(op, t.DT, out.Data, t.Data, f, i, right)
	}
	out.Ready = t.k.mathReady(t.Ready, out.NBytes())
	t.k.logMath(&out, op.String(), t, nil, func(r *oplog.Record) { r.Scalar, r.ScalarI, r.Left = f, i, right })
	return out, nil
}
