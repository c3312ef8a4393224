package l3l2

import (
	"errors"
	"fmt"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// QueueEndpoint is the L2 (peer) side of an SPSC queue:
// l2.spsc_queue_endpoint(binding, max_inflight). It consumes the input
// direction and produces the output direction through local HBM accesses
// charged to the calling process.
//
// Every failure is the endpoint's first, terminal error (Err): later
// operations return it. Methods return nil, that sticky *QueueError (the
// Starlark layer returns False/None and exposes it through error()), or an
// *ArgError for a malformed call that touched nothing (raised, no poison).
// A nil handle with a nil error is ordinary no-progress.
type QueueEndpoint struct {
	h       *Hub
	st      *regionState
	pt      *port
	layout  Layout
	binding Binding
	window  uint64
	live    bool
	err     *QueueError
	// aborted: the first error set the peer abort flag (a poison, not an
	// init or argument error).
	aborted bool

	in  *EndpointInput
	out *EndpointOutput
}

// EndpointInput is endpoint.input(): L2 consumes L3's messages.
type EndpointInput struct {
	e *QueueEndpoint
	// active holds acquired, not yet physically released inputs in FIFO
	// (seq) order: at most window DATA/ERROR entries plus one STOP.
	active       []*inputEntry
	activeNonStp uint64
	head, tail   uint64 // physically released / observed published
	acquire      uint64 // acquired so far
	payHead      uint64 // arena cursor of the physically released prefix
	payAcquire   uint64 // arena cursor of the acquired prefix
	stopObserved bool
	drained      bool
}

type inputEntry struct {
	h         InputHandle
	completed bool
}

// EndpointOutput is endpoint.output(): L2 produces messages for L3.
type EndpointOutput struct {
	e              *QueueEndpoint
	head, tail     uint64 // observed released / published
	payHead, payTl uint64 // arena cursors
	active         *Reservation
}

// InputHandle is an acquired input message. Its payload view stays valid
// until the handle is released.
type InputHandle struct {
	Seq           uint64
	Opcode        Opcode
	PayloadOffset uint64
	NBytes        uint64
	view          machine.Region
	owner         *QueueEndpoint
}

// Reservation is the one active output reservation: NBytes of the output
// arena at PayloadOffset, to fill and publish.
type Reservation struct {
	Seq           uint64
	PayloadOffset uint64
	NBytes        uint64
	view          machine.Region
	owner         *QueueEndpoint
	valid         bool
}

// QueueEndpoint builds the L2 endpoint of binding b with an input window
// of maxInflight DATA/ERROR handles (1 ≤ maxInflight ≤ depth; STOP has one
// extra slot). Init failures leave the endpoint not live with an error and
// never set the abort flag: BAD_DESCRIPTOR for a binding that fails
// validation or names no region of this machine, BAD_ARGUMENT for sizes
// that differ from the layout or from the region's spans, or a window out
// of range.
func (h *Hub) QueueEndpoint(b Binding, maxInflight uint64) *QueueEndpoint {
	e := &QueueEndpoint{h: h, binding: b, window: maxInflight}
	e.in = &EndpointInput{e: e}
	e.out = &EndpointOutput{e: e}
	if err := b.Validate(); err != nil {
		e.setErr(QueueBadDescriptor, OpInit, "%v", err)
		return e
	}
	l, _ := b.Layout() // Validate checked it
	e.layout = l
	d := Descriptor{MagicVersion: RegionMagicVersion, RegionID: b.TransactionID, PayloadBase: b.PayloadBase,
		PayloadBytes: b.PayloadBytes, CounterBase: b.CounterBase, CounterBytes: b.CounterBytes}
	st := h.resolve(d)
	if st == nil {
		e.setErr(QueueBadDescriptor, OpInit, "binding ranges are not inside an allocated region of this machine")
		return e
	}
	if b.PayloadBytes != l.PayloadBytes || b.CounterBytes != l.CounterBytes {
		e.setErr(QueueBadArgument, OpInit, "binding sizes (payload %d, counters %d) do not match the layout (payload %d, counters %d)",
			b.PayloadBytes, b.CounterBytes, l.PayloadBytes, l.CounterBytes)
		return e
	}
	if b.PayloadBase != st.payload.Addr() || b.PayloadBytes != uint64(st.payload.N) ||
		b.CounterBase != st.counters.Addr() || b.CounterBytes != uint64(st.counters.N) {
		e.setErr(QueueBadArgument, OpInit, "binding does not match the region's view spans")
		return e
	}
	if maxInflight < 1 || maxInflight > l.Depth {
		e.setErr(QueueBadArgument, OpInit, "invalid input window max_inflight=%d (want 1..%d)", maxInflight, l.Depth)
		return e
	}
	if prev := st.endpoint; prev != nil && prev.Live() {
		// Two live consumers of one SPSC queue would both peek and
		// release the same messages: the second is refused.
		e.setErr(QueueOwnership, OpInit, "the binding already has a live endpoint (one endpoint per queue)")
		return e
	}
	e.st, e.pt = st, localPort(st)
	st.endpoint = e
	e.live = true
	return e
}

// Live reports whether the endpoint was built and has no error.
func (e *QueueEndpoint) Live() bool { return e.live && e.err == nil }

// Err is the first error, or nil while healthy (error().kind == "NONE").
func (e *QueueEndpoint) Err() *QueueError { return e.err }

// Layout is endpoint.layout().
func (e *QueueEndpoint) Layout() Layout { return e.layout }

// Binding is the binding the endpoint was built from.
func (e *QueueEndpoint) Binding() Binding { return e.binding }

// MaxInflight is the input window.
func (e *QueueEndpoint) MaxInflight() uint64 { return e.window }

// Input and Output are endpoint.input() and endpoint.output().
func (e *QueueEndpoint) Input() *EndpointInput   { return e.in }
func (e *QueueEndpoint) Output() *EndpointOutput { return e.out }

func (e *QueueEndpoint) setErr(kind QueueErrorKind, op, format string, args ...any) error {
	if e.err == nil {
		e.live = false
		e.err = &QueueError{Kind: kind, Op: op, Session: e.binding.SessionInstanceIDBits, Transaction: e.binding.TransactionID, Msg: fmt.Sprintf(format, args...)}
	}
	return e.err
}

// poison records a local failure (first error wins) and, for the first
// one, sets the peer abort flag so L3 can see it.
func (e *QueueEndpoint) poison(p *sim.Proc, kind QueueErrorKind, op, format string, args ...any) error {
	first := e.err == nil
	err := e.setErr(kind, op, format, args...)
	if first && kind != QueueRemoteAborted {
		e.aborted = true
		if nerr := e.pt.notify(p, e.counterAddr(PeerAbortOffset), 1, NotifySet, "l2_signal_notify"); nerr != nil {
			e.err.Msg += fmt.Sprintf(" (abort notify failed: %v)", nerr)
		}
	}
	return err
}

func (e *QueueEndpoint) failed(p *sim.Proc, op string, err error) error {
	if errors.Is(err, sim.ErrKilled) {
		return err
	}
	return e.poison(p, QueueEndpointError, op, "%v", err)
}

func (e *QueueEndpoint) sticky() error {
	if e.err != nil {
		return e.err
	}
	return nil
}

func (e *QueueEndpoint) counterAddr(off uint64) uint64 { return e.st.counters.Addr() + off }

func (e *QueueEndpoint) refresh(p *sim.Proc, op string, off uint64, local *uint64) error {
	res, err := e.pt.test(p, e.counterAddr(off), low32(*local), WaitNE)
	if err != nil {
		return e.failed(p, op, err)
	}
	if !res.Matched {
		return nil
	}
	v, ok := reconstruct(res.Observed, *local, e.layout.Depth)
	if !ok {
		return e.poison(p, QueueInvalidDescriptor, op, "counter reconstruction failed (local %d, observed low 32 bits %d)", *local, res.Observed)
	}
	*local = v
	return nil
}

func (e *QueueEndpoint) readDesc(p *sim.Proc, op string, off uint64) (desc, error) {
	b, err := e.pt.readPayload(p, off, DescriptorBytes)
	if err != nil {
		return desc{}, e.failed(p, op, err)
	}
	return decodeDesc(b), nil
}

func (e *QueueEndpoint) publish(p *sim.Proc, op string, off, value uint64) error {
	if err := e.pt.notify(p, e.counterAddr(off), low32(value), NotifySet, "l2_signal_notify"); err != nil {
		return e.failed(p, op, err)
	}
	return nil
}

// blocking is the L2 form of a blocking call: timeout 0 is a live
// no-attempt; otherwise try runs until progress, waiting on the counter at
// off between attempts. When the timeout passes the initiator abort flag is
// sampled: set, the endpoint records REMOTE_ABORTED (op timeout) without
// setting its own flag; clear, the call returns no progress.
func (e *QueueEndpoint) blocking(p *sim.Proc, op string, timeout sim.Time, off uint64, local *uint64, try func() (bool, error)) error {
	if err := e.sticky(); err != nil {
		return err
	}
	if !e.live {
		return e.setErr(QueueBadArgument, OpInit, "endpoint is not live")
	}
	if timeout < 0 {
		return argErr(op, "negative timeout %v", timeout)
	}
	if timeout == 0 {
		return nil
	}
	if p == nil {
		return argErr(op, "a blocking call needs a simulated process")
	}
	deadline := deadlineAfter(p.Sim().Now(), timeout)
	for {
		ok, err := try()
		if err != nil || ok {
			return err
		}
		if now := p.Sim().Now(); now < deadline {
			_, moved, err := e.pt.wait(p, op, e.counterAddr(off), low32(*local), WaitNE, deadline-now)
			if err != nil {
				return e.failed(p, op, err)
			}
			if moved {
				continue
			}
		}
		res, err := e.pt.test(p, e.counterAddr(InitiatorAbortOffset), 1, WaitGE)
		if err != nil {
			return e.failed(p, OpTimeout, err)
		}
		if res.Matched {
			return e.poison(p, QueueRemoteAborted, OpTimeout, "remote abort (initiator abort flag set)")
		}
		return nil
	}
}

func (e *QueueEndpoint) ready() error {
	if err := e.sticky(); err != nil {
		return err
	}
	if !e.live {
		return e.setErr(QueueBadArgument, OpInit, "endpoint is not live")
	}
	return nil
}

// ---------------------------------------------------------------------------
// Input: L2 consumes.

// TryPeek acquires the next input message: nil (no error) when none is
// published, when the window is full (max_inflight > 1), or in draining
// mode after STOP. With max_inflight 1, a second DATA/ERROR peek while a
// handle is active is OWNERSHIP poison; STOP may still be acquired into
// its extra slot. A descriptor published after STOP is INVALID_DESCRIPTOR.
func (in *EndpointInput) TryPeek(p *sim.Proc) (*InputHandle, error) {
	e := in.e
	const op = OpInputTryPeek
	if err := e.ready(); err != nil {
		return nil, err
	}
	l := e.layout
	if err := e.refresh(p, op, InputDescTailOffset, &in.tail); err != nil {
		return nil, err
	}
	if in.stopObserved {
		if in.tail != in.acquire {
			return nil, e.poison(p, QueueInvalidDescriptor, op, "input descriptor published after STOP")
		}
		return nil, nil
	}
	if in.tail == in.acquire {
		return nil, nil
	}
	if in.tail-in.head > l.Depth || in.acquire < in.head || in.acquire > in.tail {
		return nil, e.poison(p, QueueInvalidDescriptor, op, "input descriptor state invalid (head %d, acquired %d, tail %d)", in.head, in.acquire, in.tail)
	}
	d, err := e.readDesc(p, op, l.slotOffset(l.InputDescOffset, in.acquire))
	if err != nil {
		return nil, err
	}
	if d.seq != in.acquire+1 {
		return nil, e.poison(p, QueueInvalidDescriptor, op, "input descriptor seq mismatch (seq %d, want %d)", d.seq, in.acquire+1)
	}
	opcode := Opcode(d.opcode)
	switch opcode {
	case OpData, OpError, OpStop:
	default:
		return nil, e.poison(p, QueueInvalidDescriptor, op, "invalid input opcode %v", opcode)
	}
	if opcode == OpStop && (d.offset != 0 || d.nbytes != 0) {
		return nil, e.poison(p, QueueInvalidDescriptor, op, "STOP descriptor must be zero-byte")
	}
	counts := opcode != OpStop
	if counts && in.activeNonStp >= e.window {
		if e.window == 1 {
			return nil, e.poison(p, QueueOwnership, op, "input handle already active (max_inflight 1)")
		}
		return nil, nil // window full: no progress
	}
	if uint64(len(in.active)) >= e.window+1 {
		return nil, e.poison(p, QueueOwnership, op, "input window state full")
	}
	var view machine.Region
	if d.nbytes == 0 {
		if d.offset != 0 {
			return nil, e.poison(p, QueueInvalidDescriptor, op, "zero-byte descriptor uses nonzero payload offset %d", d.offset)
		}
		view = e.st.payload.Sub(0, 0)
	} else {
		if !payloadInArena(d.offset, d.nbytes, l.InputArenaOffset, l.InputArenaBytes) {
			return nil, e.poison(p, QueueInvalidDescriptor, op, "input payload [%d, +%d) outside the input arena", d.offset, d.nbytes)
		}
		if want := expectedOffset(in.payAcquire, d.nbytes, l.InputArenaOffset, l.InputArenaBytes); d.offset != want {
			return nil, e.poison(p, QueueInvalidDescriptor, op, "payload replay offset mismatch (offset %d, want %d)", d.offset, want)
		}
		in.payAcquire = advanceCursor(in.payAcquire, d.nbytes, l.InputArenaBytes)
		view = e.st.payload.Sub(int64(d.offset), int64(d.nbytes))
	}
	ent := &inputEntry{h: InputHandle{Seq: d.seq, Opcode: opcode, PayloadOffset: d.offset, NBytes: d.nbytes, view: view, owner: e}}
	in.active = append(in.active, ent)
	if counts {
		in.activeNonStp++
	}
	in.acquire++
	if opcode == OpStop {
		in.stopObserved = true
		if in.tail != in.acquire {
			return nil, e.poison(p, QueueInvalidDescriptor, op, "input descriptor published after STOP")
		}
	}
	h := ent.h
	return &h, nil
}

// Peek is TryPeek waiting up to timeout; timeout 0 is a live no-attempt.
func (in *EndpointInput) Peek(p *sim.Proc, timeout sim.Time) (*InputHandle, error) {
	var h *InputHandle
	err := in.e.blocking(p, "input.peek", timeout, InputDescTailOffset, &in.tail, func() (bool, error) {
		var err error
		h, err = in.TryPeek(p)
		return h != nil, err
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// entry finds the active, not yet released entry a handle names, checking
// every field (a mutated handle does not match).
func (in *EndpointInput) entry(h *InputHandle) *inputEntry {
	if h == nil || h.owner != in.e || h.Seq <= in.head {
		return nil
	}
	i := h.Seq - in.head - 1
	if i >= uint64(len(in.active)) {
		return nil
	}
	ent := in.active[i]
	a := ent.h
	if a.Seq != h.Seq || a.Opcode != h.Opcode || a.PayloadOffset != h.PayloadOffset || a.NBytes != h.NBytes || a.view != h.view {
		return nil
	}
	return ent
}

// View is the live payload view of an active handle (a zero-length view
// for zero-byte messages).
func (in *EndpointInput) View(h *InputHandle) (machine.Region, error) {
	if err := in.e.ready(); err != nil {
		return machine.Region{}, err
	}
	ent := in.entry(h)
	if ent == nil || ent.completed {
		return machine.Region{}, argErr("input.view", "input handle is not active")
	}
	return ent.h.view, nil
}

// Operations named by stale-view errors: a use of an input view after its
// handle was released, or of an output view after its reservation was
// published.
const (
	OpInputView  = "input.view"
	OpOutputView = "output.view"
)

// ViewStale is nil while h is active (its view may be used), else the
// stale-view error: an OWNERSHIP QueueError naming input.view. A released
// handle's payload bytes belong to later messages, so a view kept past
// release would show them (a kernel's receive slot raises StaleSlot for
// the same mistake). It does not poison the queue.
func (in *EndpointInput) ViewStale(h *InputHandle) error {
	if ent := in.entry(h); ent != nil && !ent.completed {
		return nil
	}
	e := in.e
	return &QueueError{Kind: QueueOwnership, Op: OpInputView, Session: e.binding.SessionInstanceIDBits, Transaction: e.binding.TransactionID,
		Msg: fmt.Sprintf("stale view: input handle seq %d was released; its payload now belongs to later messages (read or copy it before releasing)", h.Seq)}
}

// Read copies the payload of an active handle (a local HBM read).
func (in *EndpointInput) Read(p *sim.Proc, h *InputHandle) ([]byte, error) {
	e := in.e
	if err := e.ready(); err != nil {
		return nil, err
	}
	ent := in.entry(h)
	if ent == nil || ent.completed {
		return nil, argErr("input.read", "input handle is not active")
	}
	if h.NBytes == 0 {
		return []byte{}, nil
	}
	b, err := e.pt.readPayload(p, h.PayloadOffset, h.NBytes)
	if err != nil {
		return nil, e.failed(p, "input.read", err)
	}
	return b, nil
}

// Release completes h logically. The shared input head advances only over
// the completed FIFO prefix, so a handle released before an earlier one
// stays physically owned until the earlier one is released too. Releasing
// a handle that is not active, was mutated or was already released is
// OWNERSHIP poison.
func (in *EndpointInput) Release(p *sim.Proc, h *InputHandle) error {
	e := in.e
	const op = OpInputRelease
	if err := e.ready(); err != nil {
		return err
	}
	ent := in.entry(h)
	if ent == nil {
		return e.poison(p, QueueOwnership, op, "input handle is not active")
	}
	if ent.completed {
		return e.poison(p, QueueOwnership, op, "input handle already released")
	}
	ent.completed = true
	l := e.layout
	for len(in.active) > 0 && in.active[0].completed {
		a := in.active[0].h
		if a.NBytes != 0 {
			if want := expectedOffset(in.payHead, a.NBytes, l.InputArenaOffset, l.InputArenaBytes); a.PayloadOffset != want {
				return e.poison(p, QueueInvalidDescriptor, op, "payload replay offset mismatch (offset %d, want %d)", a.PayloadOffset, want)
			}
			in.payHead = advanceCursor(in.payHead, a.NBytes, l.InputArenaBytes)
		}
		in.head++
		if a.Opcode != OpStop {
			in.activeNonStp--
		} else {
			in.drained = true
		}
		in.active[0] = nil
		in.active = in.active[1:]
		if err := e.publish(p, op, InputDescHeadOffset, in.head); err != nil {
			return err
		}
	}
	return nil
}

// Drained reports whether STOP has been physically released (every input
// before it was released too).
func (in *EndpointInput) Drained() bool { return in.drained }

// ---------------------------------------------------------------------------
// Output: L2 produces.

// TryReserve reserves nbytes of the output arena and the next ring slot:
// nil (no error) when the ring or the arena is full or nbytes exceeds the
// arena (docs/l3l2.md: plain no-progress). A second reservation while one is
// active is OWNERSHIP poison.
func (out *EndpointOutput) TryReserve(p *sim.Proc, nbytes uint64) (*Reservation, error) {
	e := out.e
	const op = OpOutputTryReserve
	if err := e.ready(); err != nil {
		return nil, err
	}
	l := e.layout
	if out.active != nil {
		return nil, e.poison(p, QueueOwnership, op, "output reservation already active")
	}
	if nbytes > l.OutputArenaBytes {
		return nil, nil
	}
	old := out.head
	if err := e.refresh(p, op, OutputDescHeadOffset, &out.head); err != nil {
		return nil, err
	}
	if err := replayReleased(l, "output", l.OutputDescOffset, l.OutputArenaOffset, l.OutputArenaBytes, old, out.head, &out.payHead,
		func(off uint64) (desc, error) { return e.readDesc(p, op, off) },
		func(format string, args ...any) error {
			return e.poison(p, QueueInvalidDescriptor, op, format, args...)
		}); err != nil {
		return nil, err
	}
	if out.tail-out.head >= l.Depth {
		return nil, nil // ring full
	}
	payOff, next, ok := place(out.payHead, out.payTl, nbytes, l.OutputArenaOffset, l.OutputArenaBytes)
	if !ok {
		return nil, nil // arena full
	}
	view := e.st.payload.Sub(0, 0)
	if nbytes > 0 {
		view = e.st.payload.Sub(int64(payOff), int64(nbytes))
	}
	out.payTl = next
	out.active = &Reservation{Seq: out.tail + 1, PayloadOffset: payOff, NBytes: nbytes, view: view, owner: e, valid: true}
	r := *out.active
	return &r, nil
}

// Reserve is TryReserve waiting up to timeout for room; timeout 0 is a
// live no-attempt. nbytes larger than the whole arena can never succeed:
// it is BAD_ARGUMENT (terminal, no abort flag, as init's), as a blocking
// L3 enqueue of such a payload is a bad argument, rather than a None with
// error kind NONE that looks like backpressure.
func (out *EndpointOutput) Reserve(p *sim.Proc, nbytes uint64, timeout sim.Time) (*Reservation, error) {
	var r *Reservation
	if err := out.e.ready(); err != nil {
		return nil, err
	}
	if nbytes > out.e.layout.OutputArenaBytes {
		return nil, out.e.setErr(QueueBadArgument, "output.reserve", "reservation of %d bytes is larger than the output arena (%d bytes): it can never fit", nbytes, out.e.layout.OutputArenaBytes)
	}
	err := out.e.blocking(p, "output.reserve", timeout, OutputDescHeadOffset, &out.head, func() (bool, error) {
		var err error
		r, err = out.TryReserve(p, nbytes)
		return r != nil, err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (out *EndpointOutput) isActive(r *Reservation) bool {
	a := out.active
	return a != nil && r != nil && r.valid && r.owner == out.e && r.Seq == a.Seq && r.PayloadOffset == a.PayloadOffset && r.NBytes == a.NBytes && r.view == a.view
}

// ViewStale is nil while r is the active reservation, else the stale-view
// error (OWNERSHIP, output.view): after publish the payload is L3's
// message, and writing through the old view would change what L3 receives.
func (out *EndpointOutput) ViewStale(r *Reservation) error {
	if out.isActive(r) {
		return nil
	}
	e := out.e
	return &QueueError{Kind: QueueOwnership, Op: OpOutputView, Session: e.binding.SessionInstanceIDBits, Transaction: e.binding.TransactionID,
		Msg: fmt.Sprintf("stale view: output reservation seq %d is no longer active (published); writing through it would change a sent message", r.Seq)}
}

// View is the live view of the active reservation's payload span, for a
// PE kernel to write into.
func (out *EndpointOutput) View(r *Reservation) (machine.Region, error) {
	if err := out.e.ready(); err != nil {
		return machine.Region{}, err
	}
	if !out.isActive(r) {
		return machine.Region{}, argErr("output.view", "reservation is not active")
	}
	return r.view, nil
}

// Write copies data into the active reservation at offset (a local HBM
// write).
func (out *EndpointOutput) Write(p *sim.Proc, r *Reservation, data []byte, offset uint64) error {
	e := out.e
	if err := e.ready(); err != nil {
		return err
	}
	if !out.isActive(r) {
		return argErr("output.write", "reservation is not active")
	}
	if end := offset + uint64(len(data)); end < offset || end > r.NBytes {
		return argErr("output.write", "write [%d, +%d) exceeds the reservation of %d bytes", offset, len(data), r.NBytes)
	}
	if len(data) == 0 {
		return nil
	}
	if err := e.pt.writePayload(p, r.PayloadOffset+offset, data, "l2_payload_write"); err != nil {
		return e.failed(p, "output.write", err)
	}
	return nil
}

// Publish writes the descriptor of the active reservation (fields, then
// seq) and publishes the output tail. Publishing an unknown, stale,
// already published or another endpoint's reservation is OWNERSHIP poison;
// an opcode other than DATA/ERROR (STOP included) is INVALID_DESCRIPTOR.
func (out *EndpointOutput) Publish(p *sim.Proc, r *Reservation, opcode Opcode) error {
	e := out.e
	const op = OpOutputPublish
	if err := e.ready(); err != nil {
		return err
	}
	if !out.isActive(r) {
		return e.poison(p, QueueOwnership, op, "unknown output reservation")
	}
	switch opcode {
	case OpData, OpError:
	case OpStop:
		return e.poison(p, QueueInvalidDescriptor, op, "STOP on the output queue")
	default:
		return e.poison(p, QueueInvalidDescriptor, op, "invalid output opcode %v", opcode)
	}
	l := e.layout
	slot := l.slotOffset(l.OutputDescOffset, out.tail)
	if err := e.pt.writePayload(p, slot+8, descFields(opcode, r.PayloadOffset, r.NBytes), "l2_desc_write"); err != nil {
		return e.failed(p, op, err)
	}
	if err := e.pt.writePayload(p, slot, seqWord(r.Seq), "l2_desc_seq"); err != nil {
		return e.failed(p, op, err)
	}
	out.tail++
	out.active.valid = false
	out.active = nil
	r.valid = false
	return e.publish(p, op, OutputDescTailOffset, out.tail)
}
