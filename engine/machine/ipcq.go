package machine

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"kernbench/engine/dtype"
	"kernbench/engine/oplog"
	"kernbench/engine/sim"
	"kernbench/engine/topology"
)

// Backpressure is how a blocked send or recv waits (sleep or poll).
type Backpressure uint8

const (
	Sleep Backpressure = iota + 1 // wake exactly at the pointer update
	Poll                          // re-check every poll interval
)

// IPCQConfig is the IPCQ geometry and behaviour of a process group.
type IPCQConfig struct {
	BufferKind   Space
	Backpressure Backpressure
	PollInterval sim.Time
	NSlots       int
	SlotSize     int64
	CreditBytes  int64
	Overhead     sim.Time // ipcq_overhead_ns: what tl.send costs the caller
	// StagingKind is the memory of each kernel's private staging ring and
	// landing slots, which the fused primitives take on first use (0:
	// TCM, the PE's own; HBM when an MSCCL schedule's thread blocks need
	// more than TCM holds). The group allocates nothing there itself.
	StagingKind Space
}

// Link is one installed direction of a rank: its peer and the peer's
// reverse direction (from topology validation).
type Link struct {
	Dir      string
	Peer     int
	PeerDir  string
	RecvOnly bool
}

// MsgMeta travels with a message (piggybacked on the DMA token).
type MsgMeta struct {
	NBytes int64
	DType  uint8 // the sender's element type (engine/dtype value), 0 = raw
	Count  int64
	Seq    uint64 // sender_seq
	// Origin is the caller's description of where the send was issued
	// (the Starlark position), for hazard reports; opaque to the engine.
	Origin any
}

// QueuePair is one direction of one rank's PE_IPCQ: its pointers, its
// own rx ring and the peer endpoint it sends to.
//
// The fields are laid out by who touches them per message, in 64-byte
// lines (the object is 576 bytes, a size class that starts on a line): a
// direction that sends uses the first three lines, one that receives the
// next two, and the names, waits and route come last. At a thousand ranks
// each message touches the sender's and the receiver's queue pair after
// other ranks have run, so every line it needs is a cache miss; in
// declaration order the fields a message needs were spread over all eight.
// The fillers (Rank, Peer, RecvOnly, Dir) are cold fields put where they
// keep a group from straddling a line.
type QueuePair struct {
	// Sender side: Send, a send's completion, a credit's arrival.
	peer          *QueuePair
	ep            *Endpoint
	MyHead        uint64 // messages this side has sent on Dir
	PeerTailCache uint64 // messages the peer has consumed from its rx ring (credits)
	// InFlight is the number of this side's sends whose DMA has not completed.
	InFlight     int
	inflightHead int
	sendWaiter   *sim.Proc
	flushWaiter  *sim.Proc

	// inflight are this side's sends whose DMA has not completed, in issue
	// order, from inflightHead on: their sources must not be written
	// (SendBufferHazard). DMAs mostly complete in order, so a completion
	// moves the head on instead of shifting the rest down.
	inflight []*Message
	// sendFrom is the memory the last send left from and sendPath its
	// route into the peer's rx ring (read by every send).
	sendPath Path
	sendFrom *Memory
	Rank     int

	// sentWaiters wait for one of this side's sends to complete (a
	// primitive about to rewrite a staging buffer a send still reads).
	sentWaiters []*sim.Proc
	// held are sends whose DMA has completed but that the peer has not
	// taken and no flush has covered, in issue order (Group.HoldSends).
	held     []*Message
	Peer     int
	RecvOnly bool

	// Receiver side: a delivery, a receive, a credit's return.
	MyTail        uint64 // messages this side has received on Dir
	PeerHeadCache uint64 // messages the peer has delivered into our rx ring
	recvWaiter    *sim.Proc
	creditHead    int
	creditDelay   sim.Time
	// Slots are the rx ring's slots: what each holds and how often it was
	// delivered into.
	Slots []RxSlot

	Rx      Region   // n_slots × slot_size in buffer_kind memory
	credits []uint64 // in-flight credit values, in issue order, from creditHead
	Dir     string

	PeerDir string

	// Sending is the size in bytes of the buffer whose messages the send
	// side is issuing (a tl.send or tl.send_async of several slot-sized
	// messages), set by that call while it runs; 0 when nobody said
	// (a single message, a fused primitive). A deadlock report compares it with the ring the send
	// waits on: a send larger than one ring waits for a receive.
	Sending int64

	SendWait, RecvWait, FlushWait WaitInfo
	// moreFlushers are the flushes of this side waiting besides
	// flushWaiter: the rank's threads may flush one direction at once.
	moreFlushers []*sim.Proc
	// freed counts the messages of this side whose slots are free again,
	// in order: taken and, when copied out, copied (Credit returns it).
	freed uint64
	// recvStep and sendStep are the waits of a blocking receive (WaitRecv)
	// and of a blocking send's credit (Send): each side has one waiter at
	// a time, and the process keeps a pointer to its wait while it lasts.
	recvStep, sendStep StepWait
	_                  [7]uint64 // to 576 bytes
}

// RxSlot is one slot of a queue pair's rx ring: the message it holds and
// its generation. Each is one 64-byte line, so a delivery and the
// receive that takes it touch one line per slot instead of three arrays.
type RxSlot struct {
	Meta MsgMeta
	// Gen counts deliveries into the slot; a return_slot Ptr remembers
	// its generation so a later overwrite can be recognised (StaleSlot).
	Gen uint64
	// arrived: delivered but not yet published (in-order delivery).
	arrived bool
	// copying: taken to be copied out (copy_to_dst, a fused primitive's
	// inbox) and the copy is not done: the slot is not free, and no
	// credit may cover it (CopyDone).
	copying bool
}

// Peer returns the peer's queue pair for the reverse direction.
func (q *QueuePair) PeerQP() *QueuePair { return q.peer }

// WaitInfo describes a blocked IPCQ operation for deadlock reports.
type WaitInfo struct {
	Op string // "send", "recv", "recv(any)", "flush"
	QP *QueuePair
	EP *Endpoint
}

// String is the wait with its rank, peer and the pointers that explain
// it: "rank 0 send E -> rank 1: my_head=8 peer_tail_cache=0 n_slots=8
// (ring full)". A recv(any) gives every direction's receive pointers.
func (w *WaitInfo) String() string {
	rank := w.EP.Rank
	if w.QP != nil {
		rank = w.QP.Rank
	}
	return fmt.Sprintf("rank %d %s", rank, w.Detail())
}

// Detail is String without the rank, for a report whose entry names the
// rank already: "send E -> rank 1: my_head=8 peer_tail_cache=0 n_slots=8
// (ring full)".
func (w *WaitInfo) Detail() string {
	n := w.EP.g.Cfg.NSlots
	if w.QP == nil {
		if w.Op != "recv(any)" || len(w.EP.QPs) == 0 {
			return w.Op
		}
		parts := make([]string, len(w.EP.QPs))
		for i, q := range w.EP.QPs {
			parts[i] = fmt.Sprintf("%s <- rank %d my_tail=%d peer_head_cache=%d", q.Dir, q.Peer, q.MyTail, q.PeerHeadCache)
		}
		return fmt.Sprintf("recv(any): %s; n_slots=%d (no data)", strings.Join(parts, ", "), n)
	}
	q := w.QP
	switch w.Op {
	case "send":
		size := ""
		if q.Sending > 0 {
			size = fmt.Sprintf(", a %d-byte send", q.Sending)
		}
		return fmt.Sprintf("send %s -> rank %d: my_head=%d peer_tail_cache=%d n_slots=%d (ring full%s)", q.Dir, q.Peer, q.MyHead, q.PeerTailCache, n, size)
	case "recv":
		return fmt.Sprintf("recv %s <- rank %d: my_tail=%d peer_head_cache=%d n_slots=%d (no data)", q.Dir, q.Peer, q.MyTail, q.PeerHeadCache, n)
	}
	return fmt.Sprintf("%s %s: %d send(s) in flight", w.Op, q.Dir, q.InFlight)
}

// OpDone returns the credit of a copy_to_dst receive when the copy out of
// its slot completes (the queue pair is the copy's Watcher).
func (q *QueuePair) OpDone(op *MemOp) { q.ep.g.CopyDone(q, op.Seq) }

// Summary is the wait without the ranks and pointers that make each rank's
// wait its own ("recv W, no data"): deadlock reports group ranks whose
// waits and positions are the same.
func (w *WaitInfo) Summary() string {
	if w.QP == nil {
		return w.Op
	}
	switch w.Op {
	case "send":
		return fmt.Sprintf("send %s, ring full", w.QP.Dir)
	case "recv":
		return fmt.Sprintf("recv %s, no data", w.QP.Dir)
	}
	return fmt.Sprintf("%s %s, sends in flight", w.Op, w.QP.Dir)
}

// Endpoint is one rank's PE_IPCQ: its queue pairs sorted by direction.
type Endpoint struct {
	Rank       int
	PE         *PE
	QPs        []*QueuePair
	lastPolled int
	anyWaiter  *sim.Proc
	moreAny    []*sim.Proc // receives from any direction besides anyWaiter (threads)
	AnyWait    WaitInfo
	g          *Group
	// sim is the simulation of the endpoint's SIP (its PE's), loc its
	// local state: its pool of messages is the SIP's, reused by the next
	// send of any of its queue pairs, latest first (the message a
	// delivery has just touched is still in the cache, where one kept for
	// its own queue pair's next send would have gone cold while every
	// other rank ran: its clear and fill were 4 last-level misses of 78
	// per message at 256 ranks).
	sim *sim.Sim
	loc *local
}

// Group is the process group the endpoint belongs to.
func (e *Endpoint) Group() *Group { return e.g }

// QP returns the queue pair for dir, or nil.
func (e *Endpoint) QP(dir string) *QueuePair {
	for _, q := range e.QPs {
		if q.Dir == dir {
			return q
		}
	}
	return nil
}

// Directions lists installed directions, sorted.
func (e *Endpoint) Directions() []string {
	out := make([]string, len(e.QPs))
	for i, q := range e.QPs {
		out[i] = q.Dir
	}
	return out
}

// Group is an installed IPCQ process group: one endpoint per rank.
type Group struct {
	M   *Machine
	Cfg IPCQConfig
	EPs []*Endpoint

	// Paranoid re-checks every queue pair's pointer relations (I2) after
	// each delivery and credit: costly, for --check and tests.
	Paranoid bool

	// HoldSends keeps a send in flight for InFlightReading after its DMA
	// completed, until the receiver takes the message or a flush of the
	// sender covers it. On the untimed mock machine DMAs complete at once,
	// so hazards are judged on the order of operations instead: a kernel
	// that rewrites a send's source before either is wrong on a timed
	// machine too, whenever the DMA is slower.
	HoldSends bool

	// cubeEPs lists the endpoints of each cube (by global cube index):
	// the ranks whose sends may read that cube's SRAM. Built at install,
	// so a hazard check touches only the ranks that can matter instead of
	// all of them (the check runs per piece; a scan over every rank made
	// its cost grow with the world size).
	cubeEPs map[int][]*Endpoint

	// Hooks observe message traffic (op_log, CCL trace). Optional.
	OnSend    func(q *QueuePair, meta MsgMeta, at sim.Time)
	OnDeliver func(q *QueuePair, msg *Message)
	OnRecv    func(q *QueuePair, meta MsgMeta, slot Region, at sim.Time)
}

// InitError is an init-time failure of a process group.
type InitError struct{ Msg string }

func (e *InitError) Error() string { return e.Msg }

// RingFitError says a rank's rx rings do not fit the memory they go in.
// It states the facts only: what to change is said by whoever knows the
// settings behind cfg (the run, which tries the changes it suggests).
type RingFitError struct {
	Rank     int
	Mem      *Memory
	Dirs     int   // the rank's directions, one rx ring each
	NSlots   int   // slots per ring
	SlotSize int64 // bytes per slot
	Free     int64 // bytes of Mem free before the rank's rings
}

// Need is the bytes the rank's rings take.
func (e *RingFitError) Need() int64 { return int64(e.Dirs) * int64(e.NSlots) * e.SlotSize }

func (e *RingFitError) Error() string {
	return fmt.Sprintf("rank %d: the rx rings do not fit in %v: %d direction(s) × %d slots × %d bytes = %d bytes needed, %d free of %d",
		e.Rank, e.Mem, e.Dirs, e.NSlots, e.SlotSize, e.Need(), e.Free, e.Mem.Capacity)
}

// Install builds the queue pairs of links[rank] for every placed rank and
// allocates each rank's rx rings in cfg.BufferKind memory.
func (m *Machine) Install(links [][]Link, cfg IPCQConfig) (*Group, error) {
	if len(links) != len(m.Ranks) {
		return nil, fmt.Errorf("ipcq: %d neighbour tables for %d ranks", len(links), len(m.Ranks))
	}
	if cfg.NSlots < 1 || cfg.SlotSize < 1 {
		return nil, &InitError{fmt.Sprintf("ipcq: n_slots and slot_size must be >= 1 (got %d, %d)", cfg.NSlots, cfg.SlotSize)}
	}
	if cfg.Backpressure == Poll && cfg.PollInterval <= 0 {
		return nil, &InitError{fmt.Sprintf("ipcq: poll_interval_ns must be > 0 in poll mode (got %v)", cfg.PollInterval)}
	}
	g := &Group{M: m, Cfg: cfg, EPs: make([]*Endpoint, 0, len(m.Ranks))}
	var ls []Link // a rank's links by direction (one buffer for all)
	for r, pe := range m.Ranks {
		ep := &Endpoint{Rank: r, PE: pe, g: g, lastPolled: -1, sim: pe.dma.sim, loc: m.localOf(pe.Sip)}
		ep.AnyWait = WaitInfo{Op: "recv(any)", EP: ep}
		ls = append(ls[:0], links[r]...)
		slices.SortFunc(ls, func(a, b Link) int { return strings.Compare(a.Dir, b.Dir) })
		ep.QPs = make([]*QueuePair, 0, len(ls))
		var mem *Memory
		switch cfg.BufferKind {
		case TCM:
			mem = pe.TCM
		case HBM:
			mem = pe.HBM
		case SRAM:
			mem = pe.SRAM
		default:
			return nil, fmt.Errorf("ipcq: unknown buffer_kind %v", cfg.BufferKind)
		}
		ring := int64(cfg.NSlots) * cfg.SlotSize
		for _, l := range ls {
			off, err := mem.Alloc(ring)
			if err != nil {
				return nil, &RingFitError{Rank: r, Mem: mem, Dirs: len(ls), NSlots: cfg.NSlots, SlotSize: cfg.SlotSize,
					Free: mem.Capacity - mem.Used() + ringsSoFar(ep, ring)}
			}
			q := &QueuePair{Rank: r, Dir: l.Dir, Peer: l.Peer, PeerDir: l.PeerDir, RecvOnly: l.RecvOnly,
				Rx: Region{mem, off, ring}, Slots: make([]RxSlot, cfg.NSlots), ep: ep}
			q.SendWait = WaitInfo{Op: "send", QP: q, EP: ep}
			q.RecvWait = WaitInfo{Op: "recv", QP: q, EP: ep}
			q.FlushWait = WaitInfo{Op: "flush", QP: q, EP: ep}
			ep.QPs = append(ep.QPs, q)
		}
		g.EPs = append(g.EPs, ep)
	}
	g.cubeEPs = make(map[int][]*Endpoint)
	for _, ep := range g.EPs {
		g.cubeEPs[ep.PE.Cube] = append(g.cubeEPs[ep.PE.Cube], ep)
	}
	// Wire each queue pair to its peer's reverse direction.
	for _, ep := range g.EPs {
		for _, q := range ep.QPs {
			if q.Peer < 0 || q.Peer >= len(g.EPs) {
				return nil, &InitError{fmt.Sprintf("ipcq: rank %d %s -> rank %d is out of range", q.Rank, q.Dir, q.Peer)}
			}
			q.peer = g.EPs[q.Peer].QP(q.PeerDir)
			if q.peer == nil {
				return nil, &InitError{fmt.Sprintf("ipcq: rank %d %s -> rank %d, but rank %d has no direction %q", q.Rank, q.Dir, q.Peer, q.Peer, q.PeerDir)}
			}
			// Credits travel from this side back to the sender (the peer).
			q.creditDelay = m.PEToPE(ep.PE, g.EPs[q.Peer].PE).IdleTime(cfg.CreditBytes)
		}
	}
	return g, nil
}

func ringsSoFar(ep *Endpoint, ring int64) int64 { return int64(len(ep.QPs)) * ring }

// What a process does while its simulated time passes (sim.Proc.Activity),
// for the report of where a rank's time went.
const (
	ActOther  uint8 = iota // not classified (thread joins, events, sleeps)
	ActSend                // issuing sends: per-message overhead, waiting for credits
	ActRecv                // waiting for a message to arrive
	ActMemory              // waiting for loads, stores, copies and the math before them
	ActFlush               // waiting for sends' DMAs to finish reading their source
	NumActivities
)

// IPCQError is a failure of an IPCQ call with an exact kind
// (IpcqInvalidDirection, IpcqMessageTooLarge, …).
type IPCQError struct {
	Kind string
	Msg  string
}

func (e *IPCQError) Error() string { return e.Kind + ": " + e.Msg }

// Lookup returns rank's queue pair for dir or an IpcqInvalidDirection error.
func (g *Group) Lookup(rank int, dir string, sending bool) (*QueuePair, error) {
	ep := g.EPs[rank]
	q := ep.QP(dir)
	if q == nil {
		installed := ep.Directions()
		hint := ""
		if near := topology.NearestDirection(dir, installed); near != "" {
			hint = fmt.Sprintf("; did you mean %q?", near)
		}
		return nil, &IPCQError{"IpcqInvalidDirection", fmt.Sprintf("rank %d has no direction %q (installed: %s%s)", rank, dir, strings.Join(installed, ", "), hint)}
	}
	if sending && q.RecvOnly {
		return nil, &IPCQError{"IpcqInvalidDirection", fmt.Sprintf("rank %d direction %q is receive-only in this topology (installed: %s)", rank, dir, strings.Join(ep.Directions(), ", "))}
	}
	return q, nil
}

// LookupRecv is Lookup for a receive on dir (tl.recv, tl.recv_async, a
// fused primitive's in_dir): it also refuses a direction whose
// other end is receive-only (ring_1d_unidir's E: the peer's W may not
// send), on which nothing can ever arrive, as IpcqInvalidDirection; a
// receive there used to wait until the deadlock detector stopped the run.
func (g *Group) LookupRecv(rank int, dir string) (*QueuePair, error) {
	q, err := g.Lookup(rank, dir, false)
	if err != nil {
		return nil, err
	}
	if q.peer != nil && q.peer.RecvOnly {
		var recv []string
		for _, o := range g.EPs[rank].QPs {
			if o.peer == nil || !o.peer.RecvOnly {
				recv = append(recv, o.Dir)
			}
		}
		hint := ""
		if len(recv) > 0 {
			hint = "; receive on " + strings.Join(recv, " or ")
		}
		return nil, &IPCQError{"IpcqInvalidDirection", fmt.Sprintf("rank %d direction %q is send-only in this topology: its other end, rank %d's %q, is receive-only, so nothing arrives on it%s", rank, dir, q.Peer, q.PeerDir, hint)}
	}
	return q, nil
}

// Message is one IPCQ send in flight: an IpcqDmaToken on vc_comm.
type Message struct {
	Q    *QueuePair // sender side
	Meta MsgMeta
	Src  Region
	Dst  Region
	Slot int
	Xfer Transfer
	_    [6]uint64 // to 320 bytes, a size class that starts on a cache line
}

// Send implements tl.send on p for rank's queue pair q (docs/architecture.md,
// IPCQ). It blocks while the peer's ring is full, queues the DMA on vc_comm,
// and returns after ipcq_overhead_ns.
func (g *Group) Send(p *sim.Proc, q *QueuePair, src Region, meta MsgMeta) error {
	return g.SendNoting(p, q, src, meta, nil)
}

// Poster is told when a send's message is queued on DMA, before the
// send's overhead has passed (SendNoting).
type Poster interface{ Posted() }

// SendNoting is Send that calls posted.Posted() (when posted is not nil)
// as soon as the message is queued, in the instant its DMA starts: from
// then on the message reads its source as an in-flight send, and a
// receiver may take it before the overhead has passed.
func (g *Group) SendNoting(p *sim.Proc, q *QueuePair, src Region, meta MsgMeta, posted Poster) error {
	if src.N > g.Cfg.SlotSize {
		return &IPCQError{"IpcqMessageTooLarge", fmt.Sprintf("rank %d send %s: %d bytes exceed slot_size %d", q.Rank, q.Dir, src.N, g.Cfg.SlotSize)}
	}
	if w := &q.sendStep; !w.Credit(p, q) { // no credit: wait
		if err := w.block(p); err != nil {
			return err
		}
	}
	prev := g.post(p, q, src, meta) // restored when the overhead has passed (no defer: a send's cost)
	if posted != nil {
		posted.Posted()
	}
	err := p.Sleep(g.Cfg.Overhead)
	p.Doing(prev)
	return err
}

// noCredit reports whether q's sender has no credit: its peer's ring
// holds n_slots messages it has not freed (my_head − peer_tail_cache =
// n_slots), so a send waits.
func (q *QueuePair) noCredit() bool {
	return q.MyHead-q.PeerTailCache >= uint64(q.ep.g.Cfg.NSlots)
}

// post issues the message of a send that has its credit and sets p's
// activity to sending, returning the previous one.
func (g *Group) post(p *sim.Proc, q *QueuePair, src Region, meta MsgMeta) (prev uint8) {
	n := uint64(g.Cfg.NSlots)
	slot := int(q.MyHead % n)
	meta.Seq = q.MyHead
	meta.NBytes = src.N
	peer := q.peer
	var msg *Message
	if n := len(q.ep.loc.freeMsgs); n > 0 {
		msg = q.ep.loc.freeMsgs[n-1]
		q.ep.loc.freeMsgs = q.ep.loc.freeMsgs[:n-1]
	} else {
		msg = &Message{}
	}
	if q.sendFrom != src.Mem {
		// Sends of a direction mostly leave from one memory (a staging
		// ring, a buffer): the route is looked up once for it.
		q.sendFrom, q.sendPath = src.Mem, g.M.MemToMem(src.Mem, peer.Rx.Mem)
	}
	// Filled in place (a literal was built aside and copied in whole,
	// twice the stores, per message): every field but the transfer's is
	// set here, so only the transfer is cleared.
	msg.Xfer = Transfer{}
	msg.Q, msg.Meta, msg.Src, msg.Dst, msg.Slot = q, meta, src, peer.Rx.Sub(int64(slot)*g.Cfg.SlotSize, src.N), slot
	msg.Xfer.Path, msg.Xfer.N, msg.Xfer.VC, msg.Xfer.Owner = q.sendPath, src.N, VCComm, msg
	if g.M.Trace != nil {
		msg.Xfer.Label = fmt.Sprintf("send %s #%d -> rank %d", q.Dir, meta.Seq, q.Peer)
	}
	g.M.submitDMA(q.ep.PE, &msg.Xfer) // Submit's DMA case (inlined: one call less per message)
	q.pushInflight(msg)
	src.Mem.addSendReading(src)
	prev = p.Account(ActSend) // (Doing in the process; a step charges the time so far)
	if g.OnSend != nil {
		g.OnSend(q, msg.Meta, p.Sim().Now())
	}
	q.MyHead++
	q.InFlight++
	if tr := g.M.TraceOf(q.ep.PE); tr != nil {
		tr.Counter(q.ep.PE.ID+1, "credits in use "+q.Dir, p.Sim().Now(), float64(q.MyHead-q.PeerTailCache))
	}
	return prev
}

// StoredSend is a send of a slot that a store is still filling (a fused
// primitive's forwarded piece): it waits for the store, then sends. Its
// waits continue on the event loop (sim.Proc.AwaitStep) instead of
// resuming the process for each: SendStored resumes the process once,
// when the send's overhead has passed, and a caller that is itself a
// chain of steps (a fused primitive's pipeline) starts it with
// StartStored and goes on from its own step when Advance says the send is
// done. Its waits for the store and for a credit are the ones the
// blocking calls drive (MemOp.Wait, Send), in the same homes (the store's
// StepWait, the sending side's), so the run is the one of waiting for the
// store and then calling Send, event for event.
type StoredSend struct {
	Store *MemOp
	Q     *QueuePair
	Src   Region
	Meta  MsgMeta
	// Stored runs once the store is done, before the send (on the loop or
	// in the process).
	Stored func()

	g     *Group
	phase uint8 // what the parked process waits for: stepStore, stepCredit, stepOverhead
	outer uint8 // the activity of the send's caller
}

// The waits of a StoredSend.
const (
	stepStore uint8 = iota
	stepCredit
	stepOverhead
)

// SendStored waits for ss.Store, calls ss.Stored, and sends ss.Src as
// Send does. It returns when the send's overhead has passed.
func (g *Group) SendStored(p *sim.Proc, ss *StoredSend) error {
	if !g.StoredSteps(ss) {
		// A send too large is Send's error.
		if err := ss.Store.Wait(p); err != nil {
			return err
		}
		ss.Stored()
		return g.Send(p, ss.Q, ss.Src, ss.Meta)
	}
	if g.StartStored(p, ss) {
		return nil
	}
	err := p.AwaitStep(ss)
	p.Wait = nil
	p.Doing(ss.outer)
	return err
}

// StoredSteps reports whether ss's waits can be steps: the message fits a
// slot (else Send's error is the outcome).
func (g *Group) StoredSteps(ss *StoredSend) bool {
	return ss.Src.N <= g.Cfg.SlotSize
}

// StartStored begins ss (StoredSteps must hold), in the process or in a
// step of its chain: true means the send is done (the store was, a credit
// was there and the overhead passed in place); false, that the process
// waits, and that its wake-ups go to ss.Advance until that returns true
// (from the process: sim.Proc.AwaitStep).
func (g *Group) StartStored(p *sim.Proc, ss *StoredSend) (sent bool) {
	ss.g = g
	ss.outer = p.Activity
	ss.phase = stepStore
	if op := ss.Store; !op.w.Load(p, op) {
		return false
	}
	return ss.stored(p)
}

// stored goes on once the store is done: Stored, then the wait for a
// credit, then the message (true: the send is done).
func (ss *StoredSend) stored(p *sim.Proc) bool {
	ss.Stored()
	ss.phase = stepCredit
	if q := ss.Q; !q.sendStep.Credit(p, q) {
		return false
	}
	return ss.post(p)
}

// post issues the message, which has its store and credit, and lets the
// send's overhead pass (true: it passed in place, the send is done).
func (ss *StoredSend) post(p *sim.Proc) bool {
	g := ss.g
	g.post(p, ss.Q, ss.Src, ss.Meta)
	ss.phase = stepOverhead
	if !p.SleepStep(g.Cfg.Overhead) {
		return false
	}
	p.Account(ss.outer) // (Send's return: the overhead is charged to sending)
	return true
}

// Advance continues ss at a wake-up of the process, where the process's
// own wait would have gone on, and reports whether the send is done.
func (ss *StoredSend) Advance(p *sim.Proc) (sent bool) {
	switch ss.phase {
	case stepStore:
		if !ss.Store.w.Woken(p) {
			return false
		}
		return ss.stored(p)
	case stepCredit:
		if !ss.Q.sendStep.Woken(p) {
			return false
		}
		return ss.post(p)
	}
	p.Account(ss.outer) // the overhead has passed
	return true
}

// Step continues SendStored's chain; the process resumes once the send is
// done.
func (ss *StoredSend) Step(p *sim.Proc) {
	if ss.Advance(p) {
		p.ResumeNow()
	}
}

// StepWait is the one implementation of a process's wait for a memory
// operation (MemOp.Wait), a message (WaitRecv) or a credit to send (Send),
// in either backpressure mode, as steps (sim.Proc.AwaitStep): Load, Recv
// and Credit begin the wait, in the process or in a step (true: there is
// nothing to wait for, or, polling, the sleeps passed in place up to the
// end), and at each wake-up (or, polling, at the end of each poll
// interval that did not pass in place) Woken continues it and returns
// true once it is over. A chain of steps (a fused primitive's pipeline)
// calls Woken from its own step; a blocking call (and StoredSend) begins
// the wait in the StepWait of what it waits on (the MemOp's, the queue
// pair side's: each has one waiter at a time) and drives it to its end
// (block), so that the process resumes once, when the wait is over. The
// process's Wait and activity are set as the wait goes (deadlock reports
// and the time report read them).
type StepWait struct {
	op *MemOp
	q  *QueuePair
	// prev is the activity of the wait's caller, restored at the end.
	prev uint8
	// credit: the wait on q is for a credit (else for a message); poll:
	// it sleeps a poll interval at a time (backpressure Poll; else it is
	// a registration with q's waker).
	credit, poll bool
}

// Load begins waiting for op.
func (w *StepWait) Load(p *sim.Proc, op *MemOp) (done bool) {
	if op.Done {
		return true // (this much inlines)
	}
	w.load(p, op)
	return false
}

func (w *StepWait) load(p *sim.Proc, op *MemOp) {
	w.op = op
	w.prev = p.Account(ActMemory)
	w.awaitOp(p)
}

// awaitOp registers p as the operation's waiter and waits.
func (w *StepWait) awaitOp(p *sim.Proc) {
	op := w.op
	op.waiter = p
	p.Wait, p.WaitSince = op, p.Sim().Now()
	p.Repark()
}

// Recv begins waiting for q's next message: parked until the message
// wakes p (Sleep), or sleeping a poll interval at a time until it is
// there (Poll).
func (w *StepWait) Recv(p *sim.Proc, q *QueuePair) (ready bool) {
	if q.Ready() {
		return true // (this much inlines)
	}
	return w.onQueue(p, q, false)
}

// Credit begins waiting for a credit to send on q (its peer's ring holds
// n_slots messages it has not freed): parked until a credit wakes p, or
// polling.
func (w *StepWait) Credit(p *sim.Proc, q *QueuePair) (ready bool) {
	if !q.noCredit() {
		return true
	}
	return w.onQueue(p, q, true)
}

// onQueue begins a wait on q for a credit (Credit) or a message (Recv).
func (w *StepWait) onQueue(p *sim.Proc, q *QueuePair, credit bool) bool {
	w.q, w.credit = q, credit
	if credit {
		w.prev = p.Account(ActSend)
		p.Wait = &q.SendWait
	} else {
		w.prev = p.Account(ActRecv)
		p.Wait = &q.RecvWait
	}
	p.WaitSince = p.Sim().Now()
	if q.ep.g.Cfg.Backpressure == Poll {
		w.poll = true
		return w.Woken(p) // (the first poll interval)
	}
	w.poll = false
	w.register(p)
	return false
}

// register makes p the waiter that q's next delivery (or credit) wakes,
// and waits.
func (w *StepWait) register(p *sim.Proc) {
	if w.credit {
		w.q.sendWaiter = p
	} else {
		w.q.recvWaiter = p
	}
	p.Repark()
}

// end ends the wait: the caller goes on.
func (w *StepWait) end(p *sim.Proc) {
	w.op, w.q = nil, nil
	p.Wait = nil
	p.Account(w.prev)
}

// Woken continues the wait at a wake-up of the process (polling, at the
// end of a poll interval; at the start of the wait too): true when it is
// over (the caller goes on), false when the process waits on.
func (w *StepWait) Woken(p *sim.Proc) (over bool) {
	q := w.q
	switch {
	case q == nil:
		if !w.op.Done {
			w.awaitOp(p)
			return false
		}
	case w.poll:
		g := q.ep.g
		if w.credit {
			for q.noCredit() {
				if !p.SleepStep(g.Cfg.PollInterval) {
					return false // the interval's end fires the step
				}
			}
		} else {
			for !q.Ready() {
				if !p.SleepStep(g.Cfg.PollInterval) {
					return false
				}
			}
		}
	case w.credit && q.noCredit(), !w.credit && !q.Ready():
		w.register(p)
		return false
	}
	w.end(p)
	return true
}

// Step continues a blocking call's wait (block): the process resumes when
// it is over.
func (w *StepWait) Step(p *sim.Proc) {
	if w.Woken(p) {
		p.ResumeNow()
	}
}

// block drives a begun wait to its end in the process: its wake-ups are
// w's steps, and the process resumes once, when the wait is over. (w
// escapes to the process: it lives in the object waited on, never on the
// stack.)
func (w *StepWait) block(p *sim.Proc) error {
	err := p.AwaitStep(w)
	if err != nil {
		// The run ended while p waited: undo what the end would have.
		w.op, w.q = nil, nil
		p.Wait = nil
		p.Doing(w.prev)
	}
	return err
}

// Complete is the DMA completion of a message: in one step [I6] the bytes
// land in the peer's slot and the peer's peer_head_cache is raised, waking
// its receiver. Deliveries are published in sender order.
func (msg *Message) Complete(*Transfer) {
	q := msg.Q
	peer := q.peer
	g := q.ep.g
	msg.arrive(msg.Src.View()) // (no bytes under timing-only)
	q.InFlight--
	if h := q.inflightHead; h < len(q.inflight) && q.inflight[h] == msg {
		// The oldest send (DMAs mostly complete in order): dropInflight's
		// first case, without its call.
		q.inflight[h] = nil
		if q.inflightHead = h + 1; q.inflightHead == len(q.inflight) {
			q.inflight, q.inflightHead = q.inflight[:0], 0
		}
		msg.Src.Mem.sendRead()
	} else if q.dropInflight(msg) {
		msg.Src.Mem.sendRead()
	}
	if g.HoldSends && peer.MyTail <= msg.Meta.Seq {
		held := *msg
		q.held = append(q.held, &held)
		msg.Src.Mem.addSendReading(msg.Src)
	}
	msg.delivered(g, q, peer)
	q.wakeSenders()
	// The message is done: observers have seen it, nobody else holds it.
	q.ep.loc.freeMsgs = append(q.ep.loc.freeMsgs, msg)
	if g.Paranoid {
		g.scan()
	}
}

// arrive is the receiver's side of a delivery (Complete on one Sim,
// deliverFar on the receiver's SIP): data, the source's bytes (nil under
// timing-only), goes into the rx slot, and the slot is published to the
// receiver's peer_head_cache in sender order. Overwriting a slot that an
// unfinished send is forwarding (zero-copy from a return_slot Ptr) would
// change what that send delivers: StaleSlot. (When no send reads near
// the slot, the common case, there is no scan and no call.)
func (msg *Message) arrive(data []byte) {
	q := msg.Q
	peer := q.peer
	if msg.Dst.Mem.sendsMayRead(msg.Dst) {
		if m := q.ep.g.inFlightReading(msg.Dst, false); m != nil && m != msg {
			peer.ep.sim.Stop(&IPCQError{"StaleSlot", fmt.Sprintf("rank %d's send %s #%d overwrites rx slot %d of rank %d direction %s while rank %d's send %s #%d%s still reads it (forward a copy, or send it before receiving %d more messages)",
				q.Rank, q.Dir, msg.Meta.Seq, msg.Slot, peer.Rank, peer.Dir, m.Q.Rank, m.Q.Dir, m.Meta.Seq, originText(m.Meta.Origin), len(peer.Slots))})
		}
	}
	msg.Dst.WriteFrom(data)
	rs := &peer.Slots[msg.Slot]
	rs.Meta = msg.Meta
	rs.Gen++
	if msg.Meta.Seq != peer.PeerHeadCache {
		rs.arrived = true // published when the messages before it are
		return
	}
	// The next message in sender order (almost always): published at
	// once, then any later ones that arrived before it. A slot marked
	// arrived holds the message of the sequence number it is at (at most
	// n_slots are in flight past my_tail, and publishing clears the
	// mark), so the walk needs no bound but the ring's size: not the
	// sender's my_head, which the receiver's SIP does not see.
	peer.PeerHeadCache++
	n := uint64(len(peer.Slots))
	for k := 1; k < len(peer.Slots) && peer.Slots[peer.PeerHeadCache%n].arrived; k++ {
		peer.Slots[peer.PeerHeadCache%n].arrived = false
		peer.PeerHeadCache++
	}
}

// wakeSenders wakes what waits on q's sends completing (both halves'
// sender side: Complete, sentNear): its sent-waiters, and its flushes
// once nothing is in flight.
func (q *QueuePair) wakeSenders() {
	for i, w := range q.sentWaiters {
		q.sentWaiters[i] = nil
		w.Wake()
	}
	q.sentWaiters = q.sentWaiters[:0]
	if q.InFlight == 0 && q.flushWaiter != nil {
		wakeShared(&q.flushWaiter, &q.moreFlushers)
	}
}

// delivered is what both halves of a delivery do once the bytes are in
// the slot (Complete on one Sim, deliverFar on the receiver's SIP): log
// and trace the delivery, tell the observer, wake the receiver.
func (msg *Message) delivered(g *Group, q, peer *QueuePair) {
	if l := g.M.epLog(peer.ep); l != nil {
		r := &oplog.Record{Rank: q.Rank, Kind: oplog.KindIPCQ, Name: "send", TStart: msg.Xfer.Issued, TEnd: msg.Xfer.Finished,
			Src: msg.Src.Addr(), SrcSp: msg.Src.Mem.Space.Log(), Dst: msg.Dst.Addr(), DstSp: msg.Dst.Mem.Space.Log(),
			NBytes: msg.Src.N, DType: dtype.DType(msg.Meta.DType), Count: msg.Meta.Count, Dir: q.Dir, SenderSeq: msg.Meta.Seq}
		if l.Witnessed() {
			r.Produced = msg.Dst.View()
			if msg.Meta.Origin != nil {
				r.Origin = fmt.Sprintf("rank %d's send %s #%d at %v", q.Rank, q.Dir, msg.Meta.Seq, msg.Meta.Origin)
			}
		}
		l.Add(r)
	}
	if tr := g.M.TraceOf(peer.ep.PE); tr != nil {
		pid := peer.ep.PE.ID + 1
		tr.Instant(pid, tr.RxTid(pid, peer.Dir), fmt.Sprintf("deliver #%d from rank %d", msg.Meta.Seq, q.Rank), msg.Xfer.Finished, map[string]any{"bytes": msg.Src.N, "slot": msg.Slot})
	}
	if g.OnDeliver != nil {
		g.OnDeliver(q, msg)
	}
	if w := peer.recvWaiter; w != nil {
		peer.recvWaiter = nil
		w.Wake()
	}
	if peer.ep.anyWaiter != nil {
		wakeShared(&peer.ep.anyWaiter, &peer.ep.moreAny)
	}
}

// deliverFar is the receiver's half of Complete for a message whose
// transfer crossed SIPs with SplitAtSIP, on the receiver's SIP at the
// completion: msg is the far side's copy of the sender's message (it
// reads only the sender's fixed fields: rank, direction, peer) and data
// the source's bytes the sender copied at the injection end (nil under
// timing-only).
func (msg *Message) deliverFar(data []byte) {
	q := msg.Q
	peer := q.peer
	g := q.ep.g
	msg.arrive(data)
	msg.delivered(g, q, peer)
}

// sentNear is the sender's half of Complete for a message whose transfer
// crossed SIPs with SplitAtSIP, on the sender's SIP at the completion:
// the send is no longer in flight (its source may be written again), and
// its flushes and sent-waiters wake. (HoldSends and Paranoid, the
// untimed mock's and --check's, split nothing.)
func (msg *Message) sentNear() {
	q := msg.Q
	q.InFlight--
	if q.dropInflight(msg) {
		msg.Src.Mem.sendRead()
	}
	q.wakeSenders()
	q.ep.loc.freeMsgs = append(q.ep.loc.freeMsgs, msg)
}

// pushInflight appends a send to the in-flight ones, reusing the room
// of completed ones when the slice is full.
func (q *QueuePair) pushInflight(msg *Message) {
	if len(q.inflight) == cap(q.inflight) && q.inflightHead > 0 {
		n := copy(q.inflight, q.inflight[q.inflightHead:])
		clear(q.inflight[n:])
		q.inflight, q.inflightHead = q.inflight[:n], 0
	}
	q.inflight = append(q.inflight, msg)
}

// liveInflight are the sends whose DMA has not completed, in issue order.
func (q *QueuePair) liveInflight() []*Message { return q.inflight[q.inflightHead:] }

// dropInflight removes msg from the in-flight sends (almost always the
// first: DMAs complete in order) and reports whether it was there.
func (q *QueuePair) dropInflight(msg *Message) bool {
	for i := q.inflightHead; i < len(q.inflight); i++ {
		if q.inflight[i] != msg {
			continue
		}
		if i == q.inflightHead {
			q.inflight[i] = nil
			q.inflightHead++
			if q.inflightHead == len(q.inflight) {
				q.inflight, q.inflightHead = q.inflight[:0], 0
			}
		} else {
			copy(q.inflight[i:], q.inflight[i+1:])
			q.inflight[len(q.inflight)-1] = nil
			q.inflight = q.inflight[:len(q.inflight)-1]
		}
		return true
	}
	return false
}

// Received is the result of a recv: the slot (or dst after copy_to_dst).
type Received struct {
	Q    *QueuePair
	Meta MsgMeta
	Slot Region
	Gen  uint64 // the slot's generation at receipt (StaleSlot checks)
	Idx  int
}

// Ready reports whether q has a message to receive.
func (q *QueuePair) Ready() bool { return q.PeerHeadCache > q.MyTail }

// WaitRecv blocks until q has a message.
func (g *Group) WaitRecv(p *sim.Proc, q *QueuePair) error {
	if w := &q.recvStep; !w.Recv(p, q) {
		return w.block(p)
	}
	return nil
}

// WaitAny blocks until some direction of ep has a message and returns the
// first ready one round-robin from the direction after the last polled.
func (g *Group) WaitAny(p *sim.Proc, ep *Endpoint) (*QueuePair, error) {
	if len(ep.QPs) == 0 {
		return nil, &IPCQError{"IpcqInvalidDirection", fmt.Sprintf("rank %d has no installed directions to receive from", ep.Rank)}
	}
	var found *QueuePair
	pick := func() bool {
		k := len(ep.QPs)
		for i := 1; i <= k; i++ {
			q := ep.QPs[(ep.lastPolled+i+k)%k]
			if q.Ready() {
				ep.lastPolled = (ep.lastPolled + i + k) % k
				found = q
				return true
			}
		}
		return false
	}
	if err := g.waitShared(p, pick, &ep.anyWaiter, &ep.moreAny, &ep.AnyWait); err != nil {
		return nil, err
	}
	return found, nil
}

// Take consumes the next message of q (which must be Ready) and returns its
// slot. With creditNow the credit is returned at once (return_slot);
// otherwise the caller returns it with Credit after copying the slot out.
func (g *Group) Take(q *QueuePair, creditNow bool) Received {
	slot, idx, gen := g.TakeSlot(q, creditNow)
	return Received{Q: q, Meta: q.Slots[idx].Meta, Slot: slot, Gen: gen, Idx: idx}
}

// TakeSlot is Take for a caller that needs the slot, its index and its
// generation only (a fused primitive's receive, once per message; the
// message's metadata stays in q.Slots[idx] until the credit returns):
// Received is a dozen words to copy.
func (g *Group) TakeSlot(q *QueuePair, creditNow bool) (slot Region, idx int, gen uint64) {
	n := uint64(g.Cfg.NSlots)
	idx = int(q.MyTail % n)
	meta := &q.Slots[idx].Meta
	gen = q.Slots[idx].Gen
	// I7 (and I6 behind it): a slot visible through peer_head_cache holds
	// exactly the message the pointer says, and I1: it is taken once.
	if q.PeerHeadCache <= q.MyTail || meta.Seq != q.MyTail || gen == 0 {
		q.ep.sim.Stop(&InvariantError{"I7", fmt.Sprintf("rank %d recv %s: slot %d holds seq %d (generation %d), expected seq %d with peer_head_cache=%d > my_tail=%d",
			q.Rank, q.Dir, idx, meta.Seq, gen, q.MyTail, q.PeerHeadCache, q.MyTail)})
	}
	slot = q.Rx.Sub(int64(idx)*g.Cfg.SlotSize, meta.NBytes)
	q.Slots[idx].copying = !creditNow
	q.MyTail++
	if len(q.peer.held) > 0 { // (no closure to make otherwise)
		q.peer.release(func(m *Message) bool { return m.Meta.Seq < q.MyTail })
	}
	if l := g.M.epLog(q.ep); l != nil && creditNow {
		now := q.ep.sim.Now()
		l.Add(&oplog.Record{Rank: q.Rank, Kind: oplog.KindIPCQ, Name: "recv", TStart: now, TEnd: now, RecvMode: oplog.ReturnSlot,
			Src: slot.Addr(), SrcSp: slot.Mem.Space.Log(), NBytes: meta.NBytes, DType: dtype.DType(meta.DType), Count: meta.Count, Dir: q.Dir, SenderSeq: meta.Seq})
	}
	if g.OnRecv != nil {
		g.OnRecv(q, *meta, slot, q.ep.sim.Now())
	}
	if creditNow {
		g.Credit(q)
	}
	return slot, idx, gen
}

// Credit returns the credit for every message q has consumed whose slot
// is free: after the fast path delay T(path B→A, ipcq_credit_size_bytes)
// the sender's peer_tail_cache becomes that count and a blocked send
// wakes. A message taken to be copied out holds its slot (and every
// later one's credit) until CopyDone: the credit of an earlier copy used
// to cover it, and the sender refilled a slot whose copy still read it.
func (g *Group) Credit(q *QueuePair) {
	n := uint64(len(q.Slots))
	for q.freed < q.MyTail && !q.Slots[q.freed%n].copying {
		q.freed++
	}
	if g.M.splitAtSIP && q.ep.PE.Sip != q.peer.ep.PE.Sip {
		g.postCredit(q)
		return
	}
	q.credits = append(q.credits, q.freed)
	q.ep.sim.After(q.creditDelay, (*creditEvent)(q))
}

// postCredit is Credit's return across SIPs when the machine splits
// transfers there: a message to the sender's SIP carrying the credit and
// what its I2 check reads of the receiver (my_tail when the credit left:
// it only grows, so the check is the same), so that the sender's side
// never reads the receiver's queue pair (engine/sim, partition.go).
func (g *Group) postCredit(q *QueuePair) {
	c := q.ep.loc.newCreditMsg()
	*c = creditMsg{s: q.peer, v: q.freed, tail: q.MyTail}
	g.M.post(q.ep.PE.Sip, q.peer.ep.PE.Sip, sim.Add(q.ep.sim.Now(), q.creditDelay), c)
}

// creditMsg is a credit on its way to the sender's SIP.
type creditMsg struct {
	s       *QueuePair // the sender's side
	v, tail uint64     // the credit; the receiver's my_tail when it left
}

func (l *local) newCreditMsg() *creditMsg {
	if k := len(l.freeCredits); k > 0 {
		c := l.freeCredits[k-1]
		l.freeCredits = l.freeCredits[:k-1]
		return c
	}
	return &creditMsg{}
}

// Fire applies the credit on the sender's side.
func (c *creditMsg) Fire() {
	s, v, tail := c.s, c.v, c.tail
	*c = creditMsg{}
	s.ep.loc.freeCredits = append(s.ep.loc.freeCredits, c)
	s.applyCredit(v, tail)
}

// CopyDone frees the slot of message seq of q, taken to be copied out
// (Take with creditNow false), once the copy is done, and returns the
// credit.
func (g *Group) CopyDone(q *QueuePair, seq uint64) {
	q.Slots[seq%uint64(len(q.Slots))].copying = false
	g.Credit(q)
}

type creditEvent QueuePair

// Fire applies the oldest in-flight credit of the queue pair.
func (c *creditEvent) Fire() {
	q := (*QueuePair)(c)
	v := q.credits[q.creditHead]
	q.creditHead++
	if q.creditHead == len(q.credits) {
		q.credits, q.creditHead = q.credits[:0], 0
	}
	q.peer.applyCredit(v, q.MyTail)
}

// applyCredit is a credit v arriving at the sender's side s, the
// receiver's my_tail being tail (creditEvent.Fire on one SIP, reading
// it from the receiver's queue pair; creditMsg across SIPs, carrying it).
// I2: pointers only move forward; a credit never passes the receiver's
// tail nor the sender's head.
func (s *QueuePair) applyCredit(v, tail uint64) {
	if v < s.PeerTailCache || v > tail || v > s.MyHead {
		s.ep.sim.Stop(&InvariantError{"I2", fmt.Sprintf("rank %d %s: credit %d with peer_tail_cache=%d, receiver my_tail=%d, sender my_head=%d",
			s.Rank, s.Dir, v, s.PeerTailCache, tail, s.MyHead)})
	}
	if v > s.PeerTailCache {
		s.PeerTailCache = v
	}
	if tr := s.ep.g.M.TraceOf(s.ep.PE); tr != nil {
		tr.Counter(s.ep.PE.ID+1, "credits in use "+s.Dir, s.ep.sim.Now(), float64(s.MyHead-s.PeerTailCache))
	}
	if w := s.sendWaiter; w != nil {
		s.sendWaiter = nil
		w.Wake()
	}
	if g := s.ep.g; g.Paranoid {
		g.scan()
	}
}

// scan checks I2 on every queue pair (the --check mode).
func (g *Group) scan() {
	for _, ep := range g.EPs {
		for _, q := range ep.QPs {
			p := q.peer
			if !(q.MyTail <= q.PeerHeadCache && q.PeerHeadCache <= p.MyHead && p.PeerTailCache <= q.MyTail && p.MyHead-p.PeerTailCache <= uint64(g.Cfg.NSlots)) {
				q.ep.sim.Stop(&InvariantError{"I2", fmt.Sprintf("rank %d %s: my_tail=%d peer_head_cache=%d; rank %d %s: my_head=%d peer_tail_cache=%d (n_slots %d)",
					q.Rank, q.Dir, q.MyTail, q.PeerHeadCache, p.Rank, p.Dir, p.MyHead, p.PeerTailCache, g.Cfg.NSlots)})
				return
			}
		}
	}
}

// Flush blocks until every send of q (or of every direction when q is nil)
// has completed its DMA.
func (g *Group) Flush(p *sim.Proc, ep *Endpoint, q *QueuePair) error {
	qs := ep.QPs
	if q != nil {
		qs = []*QueuePair{q}
	}
	for _, q := range qs {
		if err := g.waitFlushed(p, q); err != nil {
			return err
		}
		q.dropHeld()
	}
	return nil
}

// waitFlushed blocks p until q has no send in flight.
func (g *Group) waitFlushed(p *sim.Proc, q *QueuePair) error {
	return g.waitShared(p, func() bool { return q.InFlight == 0 }, &q.flushWaiter, &q.moreFlushers, &q.FlushWait)
}

// waitShared blocks p until cond holds, a condition that several
// processes of a rank (its kernel and its threads) may wait for at once,
// a flush of one direction or a receive from any: polling every poll
// interval, or parked, the first waiter in slot and the others in more
// (one slot kept only the last waiter, and the others were never woken),
// until wakeShared wakes them all. These waits have no step form (no
// chain of steps waits for them), so this is their only one.
func (g *Group) waitShared(p *sim.Proc, cond func() bool, slot **sim.Proc, more *[]*sim.Proc, info *WaitInfo) error {
	if cond() { // (once: WaitAny's condition picks a direction)
		return nil
	}
	p.Wait, p.WaitSince = info, p.Sim().Now()
	act := ActFlush
	if info.Op != "flush" {
		act = ActRecv
	}
	prev := p.Doing(act)
	var err error
	for err == nil && !cond() {
		if g.Cfg.Backpressure == Poll {
			err = p.Sleep(g.Cfg.PollInterval)
			continue
		}
		switch *slot {
		case nil:
			*slot = p
		case p:
		default:
			*more = append(*more, p)
		}
		err = p.Park()
	}
	p.Doing(prev)
	p.Wait = nil
	return err
}

// wakeShared wakes the processes waitShared parked in slot and more.
func wakeShared(slot **sim.Proc, more *[]*sim.Proc) {
	if w := *slot; w != nil {
		*slot = nil
		w.Wake()
	}
	for i, w := range *more {
		(*more)[i] = nil
		w.Wake()
	}
	*more = (*more)[:0]
}

// dropHeld forgets every held send of q.
func (q *QueuePair) dropHeld() {
	if len(q.held) == 0 {
		// (Held sends are the untimed mock's, on one Sim: a partitioned
		// run's receiver reads len(held) of its sender, in another
		// partition, so this writes nothing then.)
		return
	}
	for _, m := range q.held {
		m.Src.Mem.sendRead()
	}
	clear(q.held)
	q.held = q.held[:0]
}

// release drops the held sends of q for which done is true.
func (q *QueuePair) release(done func(*Message) bool) {
	if len(q.held) == 0 {
		return
	}
	live := q.held[:0]
	for _, m := range q.held {
		if !done(m) {
			live = append(live, m)
		} else {
			m.Src.Mem.sendRead()
		}
	}
	clear(q.held[len(live):])
	q.held = live
}

// WaitUnread blocks p until no unfinished send of the group reads reg, so
// reg may be rewritten without a SendBufferHazard.
func (g *Group) WaitUnread(p *sim.Proc, reg Region) error {
	if !reg.Mem.sendsMayRead(reg) {
		return nil // no send reads this range: nothing to wait for or release
	}
	g.releaseReading(reg)
	for {
		m := g.inFlightReading(reg, false)
		if m == nil {
			return nil
		}
		q := m.Q
		q.sentWaiters = append(q.sentWaiters, p)
		p.Wait, p.WaitSince = &q.FlushWait, p.Sim().Now()
		prev := p.Doing(ActFlush)
		err := p.Park()
		p.Doing(prev)
		p.Wait = nil
		if err != nil {
			return err
		}
	}
}

// Unread reports whether WaitUnread(p, reg) would return at once: no
// unfinished send of the group reads reg. It releases the held sends
// reading reg as WaitUnread does, so a caller that must not block (a step
// of a process's chain) asks it instead and leaves the wait to the
// process only when there is one.
func (g *Group) Unread(reg Region) bool {
	if !reg.Mem.sendsMayRead(reg) {
		return true
	}
	g.releaseReading(reg)
	return g.inFlightReading(reg, false) == nil
}

// releaseReading counts the held sends reading reg as completed: waiting
// for the DMAs is all a timed machine could do.
func (g *Group) releaseReading(reg Region) {
	for _, ep := range g.readers(reg) {
		for _, q := range ep.QPs {
			q.release(func(m *Message) bool { return m.Src.Overlaps(reg) })
		}
	}
}

// readers are the endpoints whose sends can read reg's memory: the PE that
// owns a TCM or HBM slice, or the PEs of a cube sharing its SRAM.
func (g *Group) readers(reg Region) []*Endpoint {
	if reg.Mem.PE >= 0 {
		r := reg.Mem.owner.Rank
		if r < 0 || r >= len(g.EPs) {
			return nil
		}
		return g.EPs[r : r+1]
	}
	return g.cubeEPs[reg.Mem.Cube]
}

// InFlightReading returns an unfinished send whose source overlaps dst, or
// nil: writing dst now would change bytes the send has yet to read. With
// HoldSends, sends held after their DMA count as unfinished.
func (g *Group) InFlightReading(dst Region) *Message {
	return g.inFlightReading(dst, true)
}

func (g *Group) inFlightReading(dst Region, held bool) *Message {
	if !dst.Mem.sendsMayRead(dst) {
		return nil // the common case for a write: no send reads near it
	}
	for _, ep := range g.readers(dst) {
		for _, q := range ep.QPs {
			for _, m := range q.liveInflight() {
				if m.Src.Overlaps(dst) {
					return m
				}
			}
			if held {
				for _, m := range q.held {
					if m.Src.Overlaps(dst) {
						return m
					}
				}
			}
		}
	}
	return nil
}

func originText(o any) string {
	if o == nil {
		return ""
	}
	return fmt.Sprintf(" (issued at %v)", o)
}

// InvariantError is a broken simulation invariant (I1–I7,
// docs/architecture.md).
type InvariantError struct {
	Name string // "I1" … "I7"
	Msg  string
}

func (e *InvariantError) Error() string { return "invariant " + e.Name + " violated: " + e.Msg }

// CheckQuiescent checks invariants that must hold when a run has ended:
// I1 (every message sent was received exactly once: nothing is left in a
// ring, nothing in flight) and I2/I4 (pointer order, one buffer kind).
func (g *Group) CheckQuiescent() error {
	var problems []string
	var unreceived []Unreceived
	for _, ep := range g.EPs {
		for _, q := range ep.QPs {
			if q.Rx.Mem.Space != g.Cfg.BufferKind {
				problems = append(problems, fmt.Sprintf("I4: rank %d %s rx ring in %v, group buffer_kind %v", q.Rank, q.Dir, q.Rx.Mem.Space, g.Cfg.BufferKind))
			}
			if !(q.MyTail <= q.PeerHeadCache && q.PeerHeadCache <= q.peer.MyHead && q.peer.PeerTailCache <= q.MyTail) {
				problems = append(problems, fmt.Sprintf("I2: rank %d %s: my_tail=%d peer_head_cache=%d, peer my_head=%d peer_tail_cache=%d",
					q.Rank, q.Dir, q.MyTail, q.PeerHeadCache, q.peer.MyHead, q.peer.PeerTailCache))
			}
			if left := q.peer.MyHead - q.MyTail; left > 0 {
				u := Unreceived{Sender: q.Peer, SendDir: q.PeerDir, Receiver: q.Rank, RecvDir: q.Dir, Count: left, FirstSeq: q.MyTail}
				// Name the first unreceived send's position: it is the
				// line to look at (a missing recv pairs with it).
				if n := uint64(len(q.Slots)); n > 0 {
					if m := q.Slots[q.MyTail%n].Meta; m.Seq == q.MyTail && m.Origin != nil {
						u.FirstSentAt = fmt.Sprint(m.Origin)
					}
				}
				unreceived = append(unreceived, u)
				problems = append(problems, "I1: "+u.String())
			}
		}
	}
	if len(problems) > 0 {
		if len(unreceived) == len(problems) {
			// Only I1: the algorithm's mistake (a receive missing, a
			// send too many), which the engine did not break.
			return &UnreceivedError{Sends: unreceived} // (in the receivers' rank order)
		}
		sort.Strings(problems)
		return &InvariantError{Name: strings.SplitN(problems[0], ":", 2)[0], Msg: strings.Join(problems, "; ")}
	}
	return nil
}

// UnreceivedError is a run that ended with messages sent that no rank
// received (invariant I1 checked at the end): a kernel's mistake, a receive
// missing or a send too many, not the engine's. It was reported as an
// InvariantViolation, which says "a kernbench bug".
type UnreceivedError struct {
	Sends []Unreceived // one per queue pair that holds some
}

// Unreceived is one queue pair's messages sent and never received: who
// sent how many on which direction, who never received them on which,
// and the first of them (its sender_seq, and where it was sent: the line
// a missing receive pairs with). error.unreceived in --json.
type Unreceived struct {
	Sender   int    `json:"sender"`
	SendDir  string `json:"send_dir"`
	Receiver int    `json:"receiver"`
	RecvDir  string `json:"recv_dir"`
	Count    uint64 `json:"count"`
	FirstSeq uint64 `json:"first_seq"`
	// FirstSentAt is the first one's send (its Starlark position), ""
	// when the sender gave none.
	FirstSentAt string `json:"first_sent_at,omitempty"`
}

// String is u as one clause: "rank 0 sent 1 message(s) on E that rank 1
// never received on W (the first, #0, sent at f.star:3:16)".
func (u Unreceived) String() string {
	return fmt.Sprintf("rank %d sent %d message(s) on %s that rank %d never received on %s%s", u.Sender, u.Count, u.SendDir, u.Receiver, u.RecvDir, u.First())
}

// First is " (the first, #N, sent at POS)", "" when the position is not
// known.
func (u Unreceived) First() string {
	if u.FirstSentAt == "" {
		return ""
	}
	return fmt.Sprintf(" (the first, #%d, sent at %s)", u.FirstSeq, u.FirstSentAt)
}

// UnreceivedAdvice ends every report of messages never received.
const UnreceivedAdvice = "a receive is missing, or a send is one too many"

// Error is one line: the queue pair itself when there is one, otherwise
// how many messages on how many queue pairs (a report lists them grouped:
// starlark/failure).
func (e *UnreceivedError) Error() string {
	const rule = "messages sent and never received (invariant I1): "
	if len(e.Sends) == 1 {
		return rule + e.Sends[0].String() + ": " + UnreceivedAdvice
	}
	var n uint64
	for _, u := range e.Sends {
		n += u.Count
	}
	return fmt.Sprintf("%s%d message(s) on %d queue pair(s): %s", rule, n, len(e.Sends), UnreceivedAdvice)
}

// DumpPointers writes every queue pair's pointers, one line each, in rank
// and direction order (--dump-pointers, and deadlock reports).
func (g *Group) DumpPointers(w io.Writer) {
	for _, ep := range g.EPs {
		for _, q := range ep.QPs {
			fmt.Fprintf(w, "rank %d %-6s peer %d/%-6s my_head=%d my_tail=%d peer_head_cache=%d peer_tail_cache=%d in_flight=%d rx=%v\n",
				q.Rank, q.Dir, q.Peer, q.PeerDir, q.MyHead, q.MyTail, q.PeerHeadCache, q.PeerTailCache, q.InFlight, q.Rx)
		}
	}
}
