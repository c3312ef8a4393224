package prims

import (
	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// pieceRun is a fused primitive call's pipeline of pieces, written as a
// state machine so that the process's steps (sim.Proc.AwaitStep) can
// drive it as well as the process: each of its waits (a message, a copy
// into the inbox, a load, a forwarded piece's send) ends in a step on the
// event loop that goes on to the next wait, and the process resumes once,
// when the call is over, instead of at every wait (a resumption is two
// coroutine switches, about 440 instructions; the 64-rank ring resumed
// its processes 1.7 times per message). The steps do exactly what the
// process would have done at the same place in the event order, so the
// run is the same event for event.
//
// A few waits need the process: the blocking calls that are not steps (a
// store of the kernel into the range a piece loads, a send still reading
// a staging slot). A step that reaches one (ErrInProcess) resumes the
// process, which does that state again, blocking, and then goes on itself
// until the next wait. The steps serve every run: in the backpressure
// mode Poll a wait for a message or a credit sleeps a poll interval at a
// time in steps (SleepStep) as the process would; a step records the
// trace's flows the process would; and in a kernel with threads a
// deferred piece takes the send side (UseSide) in a step as in the
// process (it never waits for it: a side in use by another thread is an
// error, the same one). Tests turn the steps off (Kernel.StepsOff) for the
// reference run.
type pieceRun struct {
	// What a piece touches is in the first five cache lines (the
	// pipeline is a cache miss away per line whenever its rank handles a
	// message, at a hundred ranks and more); what a call or a rare wait
	// uses is last.
	k *Kernel
	c *Call
	// at is what the pipeline does next (the wait it is in, when parked).
	at pieceState
	// steps: the waits are steps (see above); inboxSteps: so is the wait
	// for a message's copy out of a ring outside TCM (copyIn).
	steps, inboxSteps bool

	dt             dtype.DType
	per            int64 // elements per piece
	pieces, total  int64 // the call's pieces and elements
	window, issued int64 // local operand loads in flight at most; issued so far
	i              int64 // the piece under way
	checkDstWW     bool  // each dst store is checked for WriteWriteHazard
	holdSide       bool  // a deferred piece holds the send side (threads)
	// prefetch are the local operand's loads, by piece modulo window.
	prefetch []*Load
	// cur is piece i's received slot load, next piece i+1's when it was
	// taken early, lh piece i's local operand load.
	cur, next, lh *Load
	// data is piece i's result tile (the received and local tiles it is
	// combined from are made and used at once: atLocalLoaded).
	data   Tile
	owner  *TileBuf
	stores []*machine.MemOp
	// staged is piece i's staging slot and stagedStore the store filling
	// it, deferred once the piece before is sent.
	staged      machine.Region
	stagedStore *machine.MemOp
	// sending is the deferred piece whose send is under way.
	sending *Deferred
	wait    machine.StepWait
	// inbox is where a message outside TCM is being copied to, copying
	// the copy and copied the message's bytes.
	inbox   *View
	copying *machine.MemOp
	copied  int64
	err     error
	// handedOver counts, by state, the steps that handed the pipeline
	// over to the process (ErrInProcess): tests check that a run takes
	// the rare waits they compare.
	handedOver [atOver]uint32
	_          [2]uint64 // to 384 bytes, whole lines
}

// pieceState is where a pipeline stands. A state does its part of a
// piece (without waiting, or blocking without steps) and begins the wait
// that the next state follows.
type pieceState uint8

const (
	// atPiece begins piece i: the window's local operand loads, then,
	// unless piece i was taken early, its message (after the deferred
	// piece is sent when the message is not there: the next piece may
	// depend on it).
	atPiece pieceState = iota
	// atFirstSent: the deferred piece sent before waiting is out.
	atFirstSent
	// atArrived: piece i's message is there: it is taken and its load
	// issued.
	atArrived
	// atCopied: piece i's copy into the inbox is done (rings outside TCM,
	// with steps): its load is issued.
	atCopied
	// atTaken: piece i+1 is taken early when it has arrived (the loads of
	// consecutive pieces overlap), and piece i's load waited for.
	atTaken
	// atNextCopied: piece i+1's copy into the inbox is done: its load is
	// issued, and piece i's load waited for.
	atNextCopied
	// atLoaded: piece i's load is done; with a local operand, its load is
	// waited for.
	atLoaded
	// atLocalLoaded: both loads are done: the piece is combined.
	atLocalLoaded
	// atStoreDst: the result is stored into dst.
	atStoreDst
	// atStage: the result is stored into a staging slot and the piece
	// before it sent.
	atStage
	// atForwarded: the piece before is out; this one is deferred.
	atForwarded
	// atOver: the call is over (err is its result).
	atOver
)

// runPieces receives, combines, stores and forwards the call's pieces.
func (k *Kernel) runPieces(c *Call) error {
	pr := k.pipeline
	if pr == nil {
		pr = &pieceRun{k: k}
		k.pipeline = pr
	}
	if err := pr.begin(c); err != nil {
		return err
	}
	for pr.advance() {
		// Parked: the steps go on until the call is over or a state
		// needs the process (advance then takes over again).
		if err := k.Proc.AwaitStep(pr); err != nil {
			pr.end()
			return err
		}
	}
	err := pr.err
	pr.end()
	return err
}

// Step continues the pipeline at a wake-up of the process.
func (pr *pieceRun) Step(p *sim.Proc) {
	var over bool
	if pr.sending != nil {
		over = pr.sending.Send.Advance(p)
	} else {
		over = pr.wait.Woken(p)
	}
	if !over || pr.advance() {
		return // waiting on
	}
	p.ResumeNow()
}

// begin checks the call and sets the pipeline up for its first piece.
func (pr *pieceRun) begin(c *Call) error {
	k := pr.k
	g := k.G
	ref := c.operand()
	dt := ref.DT
	per, err := PieceElems(c.Name, k.Rank, dt, c.Piece)
	if err != nil {
		return err
	}
	// Whether each piece's store into dst is checked against the rank's
	// other writes (WriteWriteHazard). The pieces are disjoint, and a
	// write found done now stays done: when no write of the rank into dst
	// is pending now and no other thread can write, no piece's check can
	// fire, and the per-piece scans of the issued writes are left out.
	// Whether the rank has threads, once per call: the count only grows,
	// and with none at the start no other process of the rank can spawn
	// one during the call.
	//
	// dst is not checked against the sends still reading it here: each
	// piece is, when it is stored (storeChecked), for that is when its
	// bytes are written. A piece is stored after its message arrived, which
	// may be causally after the send that reads the range has completed
	// (receiving in place into the chunk one's own send read, from the
	// peer that received that send): checking the whole dst as the call
	// began reported a hazard no order of events can produce.
	threads := k.Threads()
	// dst is checked against the sends still reading it piece by piece,
	// as each piece is stored (storeChecked), not as a whole up front:
	// a send of the rank whose source overlaps dst may well be done by
	// the time the piece it overlaps arrives (receiving in place what a
	// peer sends back once it took our send), and a check of the whole
	// dst at the call refused such a kernel, in timed runs and the mock.
	checkDstWW := false
	if c.Dst != nil {
		checkDstWW = threads || k.root0().writes.PendingInto(c.Dst.Reg) != nil
	}
	if c.Local != nil {
		if c.Local.SlotStale() { // the name is built only for the error
			return c.Local.CheckSlot(k.Rank, c.Name+" local")
		}
	}
	// A piece is its range and element count, worked out where it is
	// used: a piece allocates nothing in Go, and a whole Ptr (a dozen
	// words to copy) is built only where one is kept, in a load's handle.
	pr.c, pr.dt, pr.per, pr.total = c, dt, per, ref.Count
	pr.pieces = Pieces(ref.Count, per)
	pr.i, pr.issued, pr.at, pr.err = 0, 0, atPiece, nil
	pr.checkDstWW = checkDstWW
	// Whether a deferred piece must hold the send side (other threads may
	// want it).
	pr.holdSide = threads
	// (A deferred piece fits a slot, as every piece does: pieceBytes.)
	// (A run naming each operation's call, WatchOrigins, has the process
	// do every wait, so that the call issuing an operation is the running
	// process's: the run is the same event for event.)
	pr.steps = !k.StepsOff && k.M.OriginOf == nil
	pr.inboxSteps = pr.steps && c.In.Rx.Mem != k.PE.TCM
	// Local operand pieces in flight, a window of n_slots (the first ones
	// may have been issued by tl.prefetch).
	pr.window = int64(g.Cfg.NSlots)
	if c.Local != nil {
		if int64(cap(k.window)) < pr.window {
			k.window = make([]*Load, pr.window)
		}
		pr.prefetch = k.window[:pr.window] // cleared by runFusedHolding
	}
	pr.stores = k.stores[:0]
	return nil
}

// end forgets what the call referred to.
func (pr *pieceRun) end() {
	pr.c, pr.prefetch, pr.cur, pr.next, pr.lh, pr.owner, pr.sending, pr.stagedStore = nil, nil, nil, nil, nil, nil, nil, nil
	pr.inbox, pr.copying = nil, nil
	// Of the tile only the bytes are let go (the rest are values and
	// this kernel; a whole tile is 8 words to clear per call).
	pr.data.Data = nil
}

// advance runs the pipeline from its state until it waits (true: the
// process is parked, its wake-ups step the pipeline) or the call is over
// or, in a step, a state needs the process (false).
func (pr *pieceRun) advance() (waiting bool) {
	k, c := pr.k, pr.c
	for {
		switch pr.at {
		case atPiece:
			if pr.i == pr.pieces {
				pr.finish()
				return false
			}
			if c.Local != nil && pr.issued < pr.pieces { // (no call once all are issued)
				if err := pr.issueWindow(); err != nil {
					return pr.fail(err)
				}
			}
			// (The piece's tiles are set whole before they are read:
			// Load.Loaded, Kernel.Combine.)
			pr.cur, pr.next = pr.next, nil
			if pr.cur != nil {
				pr.at = atTaken
				continue
			}
			// Never wait while holding a deferred send: the piece waited
			// for may depend on it.
			if !c.In.Ready() && k.deferred != nil {
				pr.at = atFirstSent
				if sent, err := pr.sendDeferred(); err != nil {
					return pr.fail(err)
				} else if !sent {
					return true
				}
				continue
			}
			pr.at = atArrived
			if stop, ret := pr.settle(pr.awaitMessage()); stop {
				return ret
			}
		case atFirstSent:
			if pr.sending != nil {
				pr.sent()
			}
			pr.at = atArrived
			if stop, ret := pr.settle(pr.awaitMessage()); stop {
				return ret
			}
		case atArrived:
			cur, waiting, err := pr.take(pr.i, atCopied)
			if err != nil {
				return pr.fail(err)
			} else if cur == nil {
				if waiting {
					return true
				}
				continue
			}
			pr.cur = cur
			pr.at = atTaken
		case atCopied:
			cur, err := pr.copiedIn()
			if err != nil {
				return pr.fail(err)
			}
			pr.cur = cur
			pr.at = atTaken
		case atTaken:
			if pr.i+1 < pr.pieces && c.In.Ready() {
				next, waiting, err := pr.take(pr.i+1, atNextCopied)
				if err != nil {
					return pr.fail(err)
				} else if next == nil {
					if waiting {
						return true
					}
					continue
				}
				pr.next = next
			}
			pr.at = atLoaded
			if stop, ret := pr.settle(pr.awaitLoad(pr.cur)); stop {
				return ret
			}
		case atNextCopied:
			next, err := pr.copiedIn()
			if err != nil {
				return pr.fail(err)
			}
			pr.next = next
			pr.at = atLoaded
			if stop, ret := pr.settle(pr.awaitLoad(pr.cur)); stop {
				return ret
			}
		case atLoaded:
			if c.Local == nil {
				if err := pr.cur.Loaded(&pr.data); err != nil {
					return pr.fail(err)
				}
				// The loaded bytes are what gets stored: the tile keeps them.
				k.Recycle(pr.cur, false)
				pr.cur = nil
				pr.storing()
				continue
			}
			// Piece i's received tile is made once the local one is
			// loaded too (below), from the same completed load; its
			// StaleSlot error, found at the load's completion, ends the
			// call now, as before any wait for the local load.
			if pr.cur.Stale != nil {
				return pr.fail(pr.cur.Stale)
			}
			w := pr.i % pr.window
			pr.lh = pr.prefetch[w]
			pr.prefetch[w] = nil
			pr.at = atLocalLoaded
			if stop, ret := pr.settle(pr.awaitLoad(pr.lh)); stop {
				return ret
			}
		case atLocalLoaded:
			// The two tiles are combined at once: they live on the stack
			// (the event loop's, shared by every rank's steps), not in the
			// pipeline, two cache lines of a rank fewer per piece.
			var in, lv Tile
			if err := pr.cur.Loaded(&in); err != nil {
				return pr.fail(err)
			}
			if err := pr.lh.Loaded(&lv); err != nil {
				return pr.fail(err)
			}
			if err := k.Combine(&pr.data, k.RedOp.Pairwise(), &in, &lv, c.Name, k.PE.Buffer(in.NBytes())); err != nil {
				return pr.fail(err)
			}
			// Both loads are consumed: their operations and bytes are
			// reused by later loads.
			k.Recycle(pr.cur, true)
			k.Recycle(pr.lh, true)
			pr.cur, pr.lh = nil, nil
			if c.Final && k.RedOp == dtype.Avg {
				in := pr.data
				// In place (into in's own bytes): nothing is allocated, so
				// nothing can be refused.
				pr.data, _ = k.Scalar(&in, dtype.Div, float64(k.World), int64(k.World), false, in.Data)
			}
			pr.storing()
		case atStoreDst:
			if c.Dst != nil {
				n := PieceCount(pr.i, pr.per, pr.total)
				reg := c.Dst.SubRegion(pr.i*pr.per, n)
				if k.settleInProcess(reg) {
					return pr.fail(ErrInProcess)
				}
				op, err := k.storeChecked(c.Name, reg, pr.dt, n, &pr.data, pr.checkDstWW)
				if err != nil {
					return pr.fail(err)
				}
				pr.owner.Watch(op)
				pr.stores = append(pr.stores, op)
			}
			pr.at = atStage
		case atStage:
			if c.Out == nil {
				pr.owner.Release()
				pr.i++
				pr.at = atPiece
				continue
			}
			slot, err := k.StagingSlot(c.Name, pr.dt, pr.data.Count)
			if err != nil {
				return pr.fail(err)
			}
			op := k.storeStaging(slot, &pr.data)
			pr.owner.Watch(op)
			pr.owner.Release() // the piece's last store is issued
			// Piece i-1 goes out now, piece i once piece i+1 has been
			// combined (or before the kernel next blocks or does
			// anything but another primitive).
			pr.at = atForwarded
			pr.staged, pr.stagedStore = slot, op
			if k.deferred != nil {
				if sent, err := pr.sendDeferred(); err != nil {
					return pr.fail(err)
				} else if !sent {
					return true
				}
			}
		case atForwarded:
			if pr.sending != nil {
				pr.sent()
			}
			if err := pr.deferPiece(); err != nil {
				return pr.fail(err)
			}
			pr.i++
			pr.at = atPiece
		case atOver:
			return false
		}
	}
}

// settle ends a step that began a wait (awaitMessage, awaitLoad): an
// error ends the call (fail), a wait still pending returns to the event
// loop (advance's true); stop false: the step goes on at once.
func (pr *pieceRun) settle(waiting bool, err error) (stop, ret bool) {
	if err != nil {
		return true, pr.fail(err)
	}
	return waiting, true
}

// fail ends the call with err, or, for ErrInProcess, leaves the state to
// be done again by the process (advance's false).
func (pr *pieceRun) fail(err error) bool {
	if err == ErrInProcess {
		pr.handedOver[pr.at]++
		return false
	}
	pr.err, pr.at = err, atOver
	return false
}

// take takes piece j's message, which is there, and issues its load (h);
// from a ring outside TCM with steps it begins the message's copy into
// the inbox instead (h nil), going on at copied once the copy is done
// (waiting: the process waits for it, a step continues).
func (pr *pieceRun) take(j int64, copied pieceState) (h *Load, waiting bool, err error) {
	count := PieceCount(j, pr.per, pr.total)
	if pr.inboxSteps {
		pr.at = copied
		waiting, err = pr.copyIn(count)
		return nil, waiting, err
	}
	h, err = pr.k.startPiece(pr.c, pr.dt, count)
	return h, false, err
}

// finish ends the call: the stores into dst finish on their own, the next
// call starts at once, and whatever touches dst later waits for them
// (settle).
func (pr *pieceRun) finish() {
	k := pr.k
	k.pendingWrites.Add(pr.stores)
	clear(pr.stores)
	k.stores = pr.stores[:0]
	pr.at = atOver
}

// issueWindow issues the local operand's loads up to a window of pieces
// ahead of piece i (tl.prefetch may have issued the first ones).
func (pr *pieceRun) issueWindow() error {
	k, c := pr.k, pr.c
	for c.Local != nil && pr.issued < pr.pieces && pr.issued < pr.i+pr.window {
		n := PieceCount(pr.issued, pr.per, pr.total)
		reg := c.Local.SubRegion(pr.issued*pr.per, n)
		h := k.takePrefetched(reg)
		if h == nil {
			if k.settleInProcess(reg) {
				return ErrInProcess
			}
			var err error
			if h, err = k.fetchPiece(c.Name, c.Local, reg, n); err != nil {
				return err
			}
		}
		pr.prefetch[pr.issued%pr.window] = h
		pr.issued++
	}
	return nil
}

// awaitMessage waits for c.In's next message: true when the process is
// parked for it (a step continues), false when it is there.
func (pr *pieceRun) awaitMessage() (waiting bool, err error) {
	k, q := pr.k, pr.c.In
	if q.Ready() {
		return false, nil
	}
	if pr.steps {
		return !pr.wait.Recv(k.Proc, q), nil
	}
	return false, k.G.WaitRecv(k.Proc, q)
}

// awaitLoad waits for the load h: true when the process is parked for it
// (a step continues), false when it is done.
func (pr *pieceRun) awaitLoad(h *Load) (waiting bool, err error) {
	if h.Op.Done {
		return false, nil
	}
	if pr.steps {
		return !pr.wait.Load(pr.k.Proc, h.Op), nil
	}
	return false, h.Op.Wait(pr.k.Proc)
}

// storing goes on to store the result; its bytes go back to the
// machine's pool once its stores have copied them (none under
// timing-only).
func (pr *pieceRun) storing() {
	pr.owner = pr.k.newTileBuf(pr.data.Data) // nil under timing-only
	pr.at = atStoreDst
}

// sendDeferred sends the deferred piece: with steps it begins the send
// (false: the process waits for it, its wake-ups advance the send), else
// it blocks.
func (pr *pieceRun) sendDeferred() (sent bool, err error) {
	k := pr.k
	if !pr.steps {
		return true, k.SendDeferred()
	}
	d, ss := k.storedDeferred()
	if k.G.StartStored(k.Proc, ss) {
		k.deferredSent(d, nil)
		return true, nil
	}
	pr.sending = d
	return false, nil
}

// sent ends the deferred piece's send, which its steps completed.
func (pr *pieceRun) sent() {
	pr.k.deferredSent(pr.sending, nil)
	pr.sending = nil
}

// deferPiece makes piece i the deferred piece, sent by the next piece or
// before the kernel next blocks or does anything but another primitive.
func (pr *pieceRun) deferPiece() error {
	k, c := pr.k, pr.c
	// The deferred piece keeps the send side in use until it is sent,
	// which may be after this call.
	var release func() // nil: one thread, nothing to arbitrate (no UseSide call, no call to release)
	if pr.holdSide {
		var err error
		if release, err = k.UseSide(c.Out, true, c.Name, c.Origin); err != nil {
			return err
		}
	}
	d := &k.deferredBuf
	d.Defer(pr.stagedStore, c.Out, pr.staged, pr.dt, pr.data.Count, c.Origin, release)
	k.deferred = d
	pr.stagedStore = nil
	return nil
}

// copyIn begins the copy of c.In's next message (there), a piece of
// count elements, into the next TCM inbox, as startPiece's RecvInto does
// for a buffer of one message, with its wait for the copy a step (false:
// the copy is done); copiedIn ends it. The call holds c.In's receive
// side throughout (runFusedHolding), so RecvInto's UseSide, which never
// fails for the side's own holder, is left out; the inbox is the
// kernel's private TCM, which no store of the kernel writes: its settle
// never waits.
func (pr *pieceRun) copyIn(count int64) (waiting bool, err error) {
	k, c, g, q := pr.k, pr.c, pr.k.G, pr.c.In
	meta, err := NextPiece(c.In, c.Name, k.Rank, pr.dt, count)
	if err != nil {
		return false, err
	}
	k.flowEnd(q, meta.Seq) // (startPiece's)
	inbox, err := k.inboxFor(c.Name, pr.dt, meta.Count)
	if err != nil {
		return false, err
	}
	if err := k.Settle(inbox.Reg); err != nil {
		return false, err
	}
	k.DropPrefetched(inbox.Reg)
	part := inbox.Reg.Sub(0, meta.NBytes)
	if err := k.CheckWrite(c.Name, part); err != nil {
		return false, err
	}
	r := g.Take(q, false)
	k.Counts.Recv++
	op := k.M.Copy(k.PE, part, r.Slot)
	op.Name, op.Dir, op.Seq = "recv", q.Dir, r.Meta.Seq
	pr.inbox, pr.copying, pr.copied = inbox, op, r.Meta.NBytes
	return !op.Done && !pr.wait.Load(k.Proc, op), nil
}

// copiedIn ends copyIn once the copy is done: the message's credit
// returns and the inbox's load is issued.
func (pr *pieceRun) copiedIn() (*Load, error) {
	k, q := pr.k, pr.c.In
	k.G.CopyDone(q, pr.copying.Seq) // (the copy's message: its slot is free)
	out := pr.inbox
	out.Count = pr.copied / int64(out.DT.Size())
	out.Reg = out.SubRegion(0, out.Count)
	out.Dir = q.Dir
	pr.inbox, pr.copying = nil, nil
	return k.FetchLoad(pr.c.Name, out)
}

// HandOvers are how often the steps of a kernel's fused primitives
// handed the pipeline over to the process, by the wait only the process
// can do: a store into the local operand's piece to load (Window), into
// the received slot to load (Slot), into the dst piece to store (Dst), or
// a send still reading the staging slot to fill (Staging). Tests check
// that a run takes the rare waits they compare.
type HandOvers struct{ Window, Slot, Dst, Staging int }

// HandOvers counts the hand-overs of k's pipeline so far.
func (k *Kernel) HandOvers() HandOvers {
	pr := k.pipeline
	if pr == nil {
		return HandOvers{}
	}
	h := &pr.handedOver
	return HandOvers{int(h[atPiece]), int(h[atArrived] + h[atTaken]), int(h[atStoreDst]), int(h[atStage])}
}
