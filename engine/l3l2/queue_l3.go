package l3l2

import (
	"errors"
	"fmt"

	"kernbench/engine/sim"
)

// QueueState is the state of an L3 queue handle.
type QueueState uint8

// Queue states.
const (
	QueueLive QueueState = iota + 1
	QueueReleased
	QueuePoisonedLocal  // a local failure; the initiator abort flag was set
	QueuePoisonedRemote // the peer abort flag was observed after a timeout
)

func (s QueueState) String() string {
	switch s {
	case QueueLive:
		return "LIVE"
	case QueueReleased:
		return "RELEASED"
	case QueuePoisonedLocal:
		return "POISONED_LOCAL"
	case QueuePoisonedRemote:
		return "POISONED_REMOTE"
	}
	return fmt.Sprintf("QueueState(%d)", uint8(s))
}

// Queue is the L3 (initiator) side of an SPSC message queue:
// orch.create_worker_chip_queue. It produces on the input direction and
// consumes the output direction, using the region primitives underneath
// (every payload, descriptor and counter access is one PCIe transfer,
// charged to the calling process).
//
// Errors: *ArgError for malformed calls (never poison), *TimeoutError for
// an expired blocking call (not poison), and *QueueError for protocol
// failures; State tells whether the queue was poisoned. After poison every
// normal operation returns the first error; Free stays valid.
type Queue struct {
	h       *Hub
	region  *Region
	pt      *port
	layout  Layout
	binding Binding
	state   QueueState
	first   error

	// Input is queue.input (L3 produces), Output is queue.output (L3
	// consumes).
	Input  *QueueInput
	Output *QueueOutput

	inHead, inTail       uint64 // monotonic descriptor counters
	inPayHead, inPayTail uint64 // monotonic arena byte cursors
	stopPublished        bool

	outHead, outTail uint64
	outPayHead       uint64
	outActive        *Message
}

// QueueInput is queue.input: L3 enqueues messages for L2.
type QueueInput struct{ q *Queue }

// QueueOutput is queue.output: L3 peeks, reads and releases L2's messages.
type QueueOutput struct{ q *Queue }

// Message is an output message handle on L3. It stays active until
// released; while active, TryPeek returns the same handle.
type Message struct {
	Seq           uint64
	Opcode        Opcode
	PayloadOffset uint64
	NBytes        uint64
	owner         *Queue
}

// CreateQueue creates a queue for chip worker: one region sized by the
// layout of (depth, inputArena, outputArena) with 384 counter bytes, and
// the binding L2 decodes. Invalid sizes are an *ArgError.
func (h *Hub) CreateQueue(worker int, depth, inputArena, outputArena uint64) (*Queue, error) {
	const op = "create_worker_chip_queue"
	l, err := NewLayout(depth, inputArena, outputArena)
	if err != nil {
		return nil, argErr(op, "%v", err)
	}
	r, err := h.CreateRegion(worker, l.PayloadBytes, l.CounterBytes)
	if err != nil {
		return nil, err
	}
	d := r.Descriptor()
	q := &Queue{h: h, region: r, pt: r.pt, layout: l, state: QueueLive,
		binding: Binding{
			MagicVersion: QueueMagicVersion, SessionInstanceIDBits: h.opts.SessionID, TransactionID: r.ID(),
			PayloadBase: d.PayloadBase, PayloadBytes: d.PayloadBytes, CounterBase: d.CounterBase, CounterBytes: d.CounterBytes,
			Depth: depth, InputArenaBytes: inputArena, OutputArenaBytes: outputArena,
		}}
	q.Input, q.Output = &QueueInput{q}, &QueueOutput{q}
	h.queues = append(h.queues, q)
	return q, nil
}

// Layout is queue.layout.
func (q *Queue) Layout() Layout { return q.layout }

// Binding is the binding whatever the state (for Go code and tests).
func (q *Queue) Binding() Binding { return q.binding }

// Region is queue.region, the compatibility projector over the same
// memory. Queue authority stays on the queue.
func (q *Queue) Region() *Region { return q.region }

// State is LIVE, RELEASED, POISONED_LOCAL or POISONED_REMOTE.
func (q *Queue) State() QueueState { return q.state }

// Err is the first error that poisoned the queue, or nil.
func (q *Queue) Err() error { return q.first }

// ChipTaskArgScalars returns the ten binding scalars for L2.
func (q *Queue) ChipTaskArgScalars() ([]uint64, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	return q.binding.Scalars(), nil
}

// Free releases the queue handle and its region handle (logically).
// Idempotent and valid in every state.
func (q *Queue) Free() {
	q.state = QueueReleased
	q.region.Free()
}

func (q *Queue) qerr(kind QueueErrorKind, op, format string, args ...any) *QueueError {
	return &QueueError{Kind: kind, Op: op, Session: q.binding.SessionInstanceIDBits, Transaction: q.binding.TransactionID, Msg: fmt.Sprintf(format, args...)}
}

// usable rejects use of a queue that is not live (never poisons).
func (q *Queue) usable() error {
	switch q.state {
	case QueueReleased:
		return errors.New("SPSC queue has been released")
	case QueuePoisonedLocal, QueuePoisonedRemote:
		return q.first
	}
	if q.region.state != RegionLive {
		return fmt.Errorf("SPSC queue expired: its region is %v", q.region.state)
	}
	return nil
}

// poison records a local failure: the queue becomes POISONED_LOCAL and the
// initiator abort flag is set for the peer. The first error wins.
func (q *Queue) poison(p *sim.Proc, kind QueueErrorKind, op, format string, args ...any) error {
	e := q.qerr(kind, op, format, args...)
	if q.state != QueueLive {
		return e
	}
	q.state, q.first = QueuePoisonedLocal, e
	if err := q.pt.notify(p, q.counterAddr(InitiatorAbortOffset), 1, NotifySet, "l3_signal_notify"); err != nil {
		e.Msg += fmt.Sprintf(" (initiator abort notify failed: %v)", err)
	}
	return e
}

// failed maps a failure of a primitive after the queue started mutating
// shared state to ENDPOINT_ERROR poison (the process being killed is
// passed through).
func (q *Queue) failed(p *sim.Proc, op string, err error) error {
	if errors.Is(err, sim.ErrKilled) {
		return err
	}
	return q.poison(p, QueueEndpointError, op, "%v", err)
}

func (q *Queue) counterAddr(off uint64) uint64 { return q.region.st.counters.Addr() + off }

// refresh reconstructs a local monotonic value from its counter.
func (q *Queue) refresh(p *sim.Proc, op string, off uint64, local *uint64) error {
	res, err := q.pt.test(p, q.counterAddr(off), low32(*local), WaitNE)
	if err != nil {
		return q.failed(p, op, err)
	}
	if !res.Matched {
		return nil
	}
	v, ok := reconstruct(res.Observed, *local, q.layout.Depth)
	if !ok {
		return q.poison(p, QueueInvalidDescriptor, op, "counter reconstruction failed (local %d, observed low 32 bits %d)", *local, res.Observed)
	}
	*local = v
	return nil
}

func (q *Queue) readDesc(p *sim.Proc, op string, off uint64) (desc, error) {
	b, err := q.pt.readPayload(p, off, DescriptorBytes)
	if err != nil {
		return desc{}, q.failed(p, op, err)
	}
	return decodeDesc(b), nil
}

// writeDesc writes the descriptor fields, then its seq word.
func (q *Queue) writeDesc(p *sim.Proc, op string, off, seq uint64, opcode Opcode, payOff, n uint64) error {
	if err := q.pt.writePayload(p, off+8, descFields(opcode, payOff, n), "l3_desc_write"); err != nil {
		return q.failed(p, op, err)
	}
	if err := q.pt.writePayload(p, off, seqWord(seq), "l3_desc_seq"); err != nil {
		return q.failed(p, op, err)
	}
	return nil
}

func (q *Queue) publish(p *sim.Proc, op string, off, value uint64) error {
	if err := q.pt.notify(p, q.counterAddr(off), low32(value), NotifySet, "l3_signal_notify"); err != nil {
		return q.failed(p, op, err)
	}
	return nil
}

// blocking runs try until it makes progress, waiting on the counter at off
// to move away from *local between attempts. When the timeout passes, the
// peer abort flag is sampled: set, the queue is POISONED_REMOTE
// (REMOTE_ABORTED, without setting the own flag); clear, the call returns a
// *TimeoutError and the queue stays live.
func (q *Queue) blocking(p *sim.Proc, op string, timeout sim.Time, off uint64, local *uint64, try func() (bool, error)) error {
	if timeout <= 0 {
		return argErr(op, "blocking queue calls need a finite positive timeout (got %v)", timeout)
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
			_, moved, err := q.pt.wait(p, op, q.counterAddr(off), low32(*local), WaitNE, deadline-now)
			if err != nil {
				return q.failed(p, op, err)
			}
			if moved {
				continue
			}
		}
		res, err := q.pt.test(p, q.counterAddr(PeerAbortOffset), 1, WaitGE)
		if err != nil {
			return q.failed(p, op, err)
		}
		if res.Matched {
			e := q.qerr(QueueRemoteAborted, OpTimeout, "remote abort (peer abort flag set)")
			if q.state == QueueLive {
				q.state, q.first = QueuePoisonedRemote, e
			}
			return e
		}
		return &TimeoutError{Op: "SPSC queue " + op, Timeout: timeout}
	}
}

// ---------------------------------------------------------------------------
// Input: L3 produces.

func (in *QueueInput) validate(op string, data []byte, opcode Opcode) error {
	switch opcode {
	case OpData, OpError:
	case OpStop:
		if len(data) != 0 {
			return argErr(op, "STOP must be zero-byte")
		}
	default:
		return argErr(op, "input opcode must be DATA or ERROR (got %v)", opcode)
	}
	return nil
}

// TryEnqueue publishes one message if there is room: false (no error) for
// ring or arena backpressure, for a payload larger than the arena, and once
// the queue is stopped (STOP published), which never poisons. Use OpData or
// OpError (STOP goes through TryRequestStop).
func (in *QueueInput) TryEnqueue(p *sim.Proc, data []byte, opcode Opcode) (bool, error) {
	const op = OpInputTryEnqueue
	if opcode == OpStop {
		return false, argErr(op, "STOP is sent with request_stop")
	}
	if err := in.validate(op, data, opcode); err != nil {
		return false, err
	}
	return in.q.tryEnqueue(p, op, data, opcode)
}

// Enqueue publishes one message, waiting up to timeout (> 0) for room. A
// payload larger than the input arena can never fit, and a stopped queue
// (STOP published) takes no more input: both are an *ArgError, raised at
// once and without poisoning.
func (in *QueueInput) Enqueue(p *sim.Proc, data []byte, opcode Opcode, timeout sim.Time) error {
	const op = "input.enqueue"
	if opcode == OpStop {
		return argErr(op, "STOP is sent with request_stop")
	}
	return in.enqueue(p, op, data, opcode, timeout)
}

func (in *QueueInput) enqueue(p *sim.Proc, op string, data []byte, opcode Opcode, timeout sim.Time) error {
	q := in.q
	if err := in.validate(op, data, opcode); err != nil {
		return err
	}
	if q.stopPublished {
		if err := q.usable(); err != nil {
			return err
		}
		return argErr(op, "the queue is stopped: request_stop has sent STOP, so no more input can be enqueued")
	}
	if uint64(len(data)) > q.layout.InputArenaBytes {
		return argErr(op, "payload of %d bytes exceeds the input arena (%d bytes)", len(data), q.layout.InputArenaBytes)
	}
	return q.blocking(p, op, timeout, InputDescHeadOffset, &q.inHead, func() (bool, error) {
		return q.tryEnqueue(p, op, data, opcode)
	})
}

// TryRequestStop publishes STOP if there is room (false otherwise, and
// false once STOP is published).
func (q *Queue) TryRequestStop(p *sim.Proc) (bool, error) {
	return q.tryEnqueue(p, "try_request_stop", nil, OpStop)
}

// RequestStop publishes STOP, waiting up to timeout for room. It returns
// once STOP is published; it does not wait for L2 to exit. A second
// RequestStop is the *ArgError of a stopped queue, as Enqueue.
func (q *Queue) RequestStop(p *sim.Proc, timeout sim.Time) error {
	return q.Input.enqueue(p, "request_stop", nil, OpStop, timeout)
}

// tryEnqueue is the producer sequence: refresh the head (replaying released
// descriptors to advance the payload head), reserve ring and arena space,
// write the payload, the descriptor fields, the seq, and publish the tail.
func (q *Queue) tryEnqueue(p *sim.Proc, op string, data []byte, opcode Opcode) (bool, error) {
	if err := q.usable(); err != nil {
		return false, err
	}
	if q.stopPublished {
		return false, nil // stopped: input is refused locally, never poison
	}
	l := q.layout
	n := uint64(len(data))
	if n > l.InputArenaBytes {
		return false, nil
	}
	old := q.inHead
	if err := q.refresh(p, op, InputDescHeadOffset, &q.inHead); err != nil {
		return false, err
	}
	if err := replayReleased(l, "input", l.InputDescOffset, l.InputArenaOffset, l.InputArenaBytes, old, q.inHead, &q.inPayHead,
		func(off uint64) (desc, error) { return q.readDesc(p, op, off) },
		func(format string, args ...any) error {
			return q.poison(p, QueueInvalidDescriptor, op, format, args...)
		}); err != nil {
		return false, err
	}
	if q.inTail-q.inHead >= l.Depth {
		return false, nil // ring full
	}
	payOff, next, ok := place(q.inPayHead, q.inPayTail, n, l.InputArenaOffset, l.InputArenaBytes)
	if !ok {
		return false, nil // arena full
	}
	if n > 0 {
		if err := q.pt.writePayload(p, payOff, data, "l3_payload_write"); err != nil {
			return false, q.failed(p, op, err)
		}
	}
	if err := q.writeDesc(p, op, l.slotOffset(l.InputDescOffset, q.inTail), q.inTail+1, opcode, payOff, n); err != nil {
		return false, err
	}
	q.inTail++
	q.inPayTail = next
	if err := q.publish(p, op, InputDescTailOffset, q.inTail); err != nil {
		return false, err
	}
	if opcode == OpStop {
		q.stopPublished = true
	}
	return true, nil
}

// ---------------------------------------------------------------------------
// Output: L3 consumes.

// TryPeek returns the active output message, or the next published one
// (validated), or nil when the output queue is empty.
func (out *QueueOutput) TryPeek(p *sim.Proc) (*Message, error) {
	q := out.q
	const op = OpOutputTryPeek
	if err := q.usable(); err != nil {
		return nil, err
	}
	if q.outActive != nil {
		return q.outActive, nil
	}
	if err := q.refresh(p, op, OutputDescTailOffset, &q.outTail); err != nil {
		return nil, err
	}
	if q.outTail == q.outHead {
		return nil, nil
	}
	l := q.layout
	d, err := q.readDesc(p, op, l.slotOffset(l.OutputDescOffset, q.outHead))
	if err != nil {
		return nil, err
	}
	if d.seq != q.outHead+1 {
		return nil, q.poison(p, QueueInvalidDescriptor, op, "output descriptor seq mismatch (seq %d, want %d)", d.seq, q.outHead+1)
	}
	switch Opcode(d.opcode) {
	case OpData, OpError:
	case OpStop:
		return nil, q.poison(p, QueueInvalidDescriptor, op, "STOP on the output queue")
	default:
		return nil, q.poison(p, QueueInvalidDescriptor, op, "invalid output opcode %v", Opcode(d.opcode))
	}
	if d.nbytes == 0 {
		if d.offset != 0 {
			return nil, q.poison(p, QueueInvalidDescriptor, op, "zero-byte descriptor uses nonzero payload offset %d", d.offset)
		}
	} else {
		if !payloadInArena(d.offset, d.nbytes, l.OutputArenaOffset, l.OutputArenaBytes) {
			return nil, q.poison(p, QueueInvalidDescriptor, op, "output payload [%d, +%d) outside the output arena", d.offset, d.nbytes)
		}
		if want := expectedOffset(q.outPayHead, d.nbytes, l.OutputArenaOffset, l.OutputArenaBytes); d.offset != want {
			return nil, q.poison(p, QueueInvalidDescriptor, op, "payload replay offset mismatch (offset %d, want %d)", d.offset, want)
		}
	}
	q.outActive = &Message{Seq: d.seq, Opcode: Opcode(d.opcode), PayloadOffset: d.offset, NBytes: d.nbytes, owner: q}
	return q.outActive, nil
}

// Peek waits up to timeout (> 0) for an output message.
func (out *QueueOutput) Peek(p *sim.Proc, timeout sim.Time) (*Message, error) {
	q := out.q
	var m *Message
	err := q.blocking(p, "output.peek", timeout, OutputDescTailOffset, &q.outTail, func() (bool, error) {
		var err error
		m, err = out.TryPeek(p)
		return m != nil, err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (q *Queue) isActive(m *Message) bool {
	a := q.outActive
	return a != nil && m == a && m.owner == q && m.Seq == a.Seq && m.Opcode == a.Opcode && m.PayloadOffset == a.PayloadOffset && m.NBytes == a.NBytes
}

// Read copies the payload of the active message m to the host. A handle
// that is not the active one is an *ArgError (no poison).
func (out *QueueOutput) Read(p *sim.Proc, m *Message) ([]byte, error) {
	q := out.q
	const op = OpOutputRead
	if err := q.usable(); err != nil {
		return nil, err
	}
	if !q.isActive(m) {
		return nil, argErr(op, "%s: output handle is not active", QueueOwnership)
	}
	if m.NBytes == 0 {
		return []byte{}, nil
	}
	b, err := q.pt.readPayload(p, m.PayloadOffset, m.NBytes)
	if err != nil {
		return nil, q.failed(p, op, err)
	}
	return b, nil
}

// Release completes the active message m and publishes the output head.
// Releasing any other handle poisons the queue (OWNERSHIP).
func (out *QueueOutput) Release(p *sim.Proc, m *Message) error {
	q := out.q
	const op = OpOutputRelease
	if err := q.usable(); err != nil {
		return err
	}
	if !q.isActive(m) {
		return q.poison(p, QueueOwnership, op, "output handle is not active")
	}
	if m.NBytes > 0 {
		q.outPayHead = advanceCursor(q.outPayHead, m.NBytes, q.layout.OutputArenaBytes)
	}
	q.outHead++
	q.outActive = nil
	return q.publish(p, op, OutputDescHeadOffset, q.outHead)
}

// Dequeue is Peek, Read and Release in one call.
func (out *QueueOutput) Dequeue(p *sim.Proc, timeout sim.Time) (*Message, []byte, error) {
	m, err := out.Peek(p, timeout)
	if err != nil {
		return nil, nil, err
	}
	return out.readRelease(p, m)
}

// TryDequeue is TryPeek, Read and Release; nil when the queue is empty.
func (out *QueueOutput) TryDequeue(p *sim.Proc) (*Message, []byte, error) {
	m, err := out.TryPeek(p)
	if err != nil || m == nil {
		return nil, nil, err
	}
	return out.readRelease(p, m)
}

func (out *QueueOutput) readRelease(p *sim.Proc, m *Message) (*Message, []byte, error) {
	b, err := out.Read(p, m)
	if err != nil {
		return nil, nil, err
	}
	if err := out.Release(p, m); err != nil {
		return nil, nil, err
	}
	return m, b, nil
}
