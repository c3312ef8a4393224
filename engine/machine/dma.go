package machine

import (
	"fmt"
	"slices"

	"kernbench/engine/oplog"
	"kernbench/engine/sim"
	"kernbench/engine/trace"
)

// VC is a DMA virtual channel.
type VC uint8

const (
	VCCompute VC = iota // loads, stores, copies through DMA
	VCComm              // IPCQ sends
)

func (v VC) String() string {
	if v == VCComm {
		return "vc_comm"
	}
	return "vc_compute"
}

// Completer receives the completion of a transfer at its completion time.
type Completer interface {
	// Complete runs in the event loop at the moment the transfer's last
	// byte has arrived; it applies the data effect.
	Complete(t *Transfer)
}

// Transfer is one DMA (or direct TCM) transfer.
//
// The fields are grouped by when they are touched: the first line by the
// completion (Fire) and the submit, the second by the engine while the
// transfer injects; the trace's label is last. At a thousand ranks a
// transfer is a cache miss away when its completion fires, so the fewer
// lines it needs then, the fewer misses per message.
type Transfer struct {
	Owner    Completer
	sim      *sim.Sim
	Finished sim.Time // when its data effect happened
	Path     Path
	N        int64

	at      sim.Time // see done
	done    int64    // bytes injected by time at (a chunk boundary when shared)
	service sim.Time // the bottleneck's Xfer of all N bytes, the whole transfer's injection time alone (set when it starts)
	// bottleneck is the path's slowest timed resource (nil: untimed), whose
	// Xfer is the path's Service (set at submit).
	bottleneck *Resource
	latency    sim.Time // the path's Latency (set at submit)
	pathEnd    sim.Time
	next       *Transfer
	Issued     sim.Time // when it was submitted

	Started sim.Time // when its channel began injecting it
	VC      VC
	injects bool // leaves the PE through its NoC up-link (set at submit)

	// Label names the transfer in the trace ("send E #3", "fetch", …).
	Label string
}

// Fire is the transfer's completion event.
func (t *Transfer) Fire() {
	t.Finished = t.sim.Now()
	t.Owner.Complete(t)
}

// dmaEngine is a PE's DMA with two virtual channels. Each channel serves its
// transfers in order, a transfer as a run of vc_chunk_size chunks (its last
// one partial). When both channels' current transfers inject into the PE's
// NoC up-link they take turns on it chunk by chunk, weighted round-robin
// (docs/architecture.md, DMA virtual channels): a round is
// vc_weights[compute] chunks of vc_compute, then vc_weights[comm] chunks of
// vc_comm; a channel whose transfer ends within its turn goes on with its
// next transfer, and a channel with nothing left gives the link to the other.
// When the link goes from one user to two, the chunk in flight finishes and a
// new round starts with vc_compute, unless the link had one user for no time
// at all (a channel's last transfer ended and its next one is submitted in
// that same instant, after the engine's event): then the round goes on where
// it was, as it does for a next transfer submitted before the event. A
// transfer that does not inject (own HBM to registers, say) runs alongside
// and takes no turn.
//
// Chunk k of a transfer takes Service(end of chunk) − Service(start of
// chunk) on its path: the times of its chunks add up to exactly
// Service(n), so a transfer alone injects in its path's bottleneck time and
// an idle path costs exactly T(path, n). The path is booked when the
// transfer starts injecting; it completes at max(path booking end,
// injection end + path latency).
//
// Events: one per transfer for its injection end and one for its
// completion, no event per chunk. While the set of busy channels stays the
// same the round-robin is periodic, so the next injection end is arithmetic
// on whole turns from the last point where that set changed (the anchor).
//
// The fields are in three cache lines (the engine is 192 bytes, a size
// class that starts on a line): what every submit, injection end and
// completion reads and writes, the channels' path caches, then the
// round-robin state and the configuration. At a thousand ranks the engine
// is a cache miss away whenever a message reaches its rank; laid out in
// four lines with the caches straddling two, it cost a line more.
type dmaEngine struct {
	sim    *sim.Sim
	m      *Machine
	key    uint64 // tags the engine's holds on resources (holdTag): pe.ID+1
	head   [2]*Transfer
	tail   [2]*Transfer
	nextAt sim.Time // time of the live engine event (sim.Never if none)

	// scanned is scan's answer for the path each channel submitted last:
	// a channel mostly submits along one path (a direction's sends, a
	// PE's loads from one memory), so most submits need no scan.
	scanned [2]scannedPath

	// shared: both heads inject, and their progress is the round-robin
	// from anchor, where head[v].done are chunk boundaries, it is turn's
	// turn and turn has served served < weights[turn] chunks of it.
	// Otherwise each head injects on its own from (at, done).
	shared bool
	turn   VC
	// nextVC is the channel whose head ends at nextAt (next's answer when
	// nextAt was set): the heads do not change between then and the
	// engine event, so the event need not ask next again.
	nextVC  VC
	anchor  sim.Time
	served  int64
	weights [2]int64
	chunk   int64
	pe      *PE
	// soloAt is when the link last went from two users to one; turn and
	// served keep the round-robin's position then, so that a second user
	// back in that same instant goes on with the round (share).
	soloAt sim.Time
}

// defaultVCChunkSize is ccl.yaml's default vc_chunk_size.
const defaultVCChunkSize = 256

func newDMAEngine(s *sim.Sim, key uint64, compute, comm, chunk int64) *dmaEngine {
	return &dmaEngine{sim: s, key: key, weights: [2]int64{compute, comm}, chunk: chunk, nextAt: sim.Never, soloAt: sim.Never}
}

// scannedPath is scan's answer for the path whose first element is at
// first and that has n resources (32 bytes, so that both channels' fit in
// one line). Holding a pointer into the path's array keeps the array
// alive, so no other path can take its address, and paths are never
// changed once made: the same first element and length are the same path.
type scannedPath struct {
	first   **Resource
	n       int32
	injects bool
	slowest *Resource
	latency sim.Time
}

// holds reports whether c is the answer for path.
func (c *scannedPath) holds(path Path) bool {
	return len(path) > 0 && int(c.n) == len(path) && c.first == &path[0]
}

// rescan scans t's path for channel v's cache c.
func (e *dmaEngine) rescan(t *Transfer, c *scannedPath) {
	c.first, c.n = nil, 0
	if len(t.Path) > 0 {
		c.first, c.n = &t.Path[0], int32(len(t.Path))
	}
	c.injects, c.slowest, c.latency = e.scan(t.Path)
	t.injects, t.bottleneck, t.latency = c.injects, c.slowest, c.latency
}

// scan reports whether path leaves the PE through its NoC up-link, the
// path's slowest timed resource (nil if none; see Path.slowest) and its
// Latency.
func (e *dmaEngine) scan(path Path) (injects bool, slowest *Resource, latency sim.Time) {
	return slices.Contains(path, e.pe.NocUp), path.slowest(), path.Latency()
}

// injectTime is the injection time of bytes [from, to) of t: a difference
// of its path's bottleneck times (Path.Service, through the resource that
// sets it), so that consecutive chunks add up exactly.
func injectTime(t *Transfer, from, to int64) sim.Time {
	if to <= from {
		return 0
	}
	if t.bottleneck == nil {
		return 0 // an untimed path
	}
	end := t.service // the Xfer of N: to is N but at a chunk end inside t
	if to != t.N {
		end = t.bottleneck.Xfer(to)
	}
	if end == sim.Never || from <= 0 {
		return end // Xfer(0) is 0
	}
	return end - t.bottleneck.Xfer(from)
}

// chunksLeft is how many chunks t still has to inject.
func (e *dmaEngine) chunksLeft(t *Transfer) int64 {
	left := t.N - t.done
	if left <= 0 {
		return 0
	}
	return left/e.chunk + min(left%e.chunk, 1)
}

// after is t's injected bytes once k more chunks are through (k ≤ chunksLeft
// keeps k·chunk below N − done: no overflow).
func (e *dmaEngine) after(t *Transfer, k int64) int64 {
	if k >= e.chunksLeft(t) {
		return max(t.N, t.done)
	}
	return t.done + k*e.chunk
}

func ceilDiv(a, b int64) int64 { return a/b + min(a%b, 1) }

func (e *dmaEngine) submit(t *Transfer) {
	now := e.sim.Now()
	t.Issued = now
	v := t.VC
	if c := &e.scanned[v]; c.holds(t.Path) {
		t.injects, t.bottleneck, t.latency = c.injects, c.slowest, c.latency
	} else {
		e.rescan(t, c)
	}
	if e.tail[v] != nil {
		// Queued behind the channel's head: the heads, and so every
		// injection end, stay as they are.
		e.tail[v].next = t
		e.tail[v] = t
		return
	}
	e.head[v], e.tail[v] = t, t
	e.start(t, now)
	if o := e.head[1-v]; o != nil && o.injects && t.injects {
		e.share(now)
	}
	e.reschedule()
}

// start starts t injecting at now, its channel's head: its path is
// booked now (submit and Fire, the two places a transfer starts).
func (e *dmaEngine) start(t *Transfer, now sim.Time) {
	t.Started, t.at, t.done = now, now, 0
	slow := e.m.slowBooking
	if e.m.splitAtSIP && !slow {
		slow = t.Path.splitIndex() > 0 // (bookSlow splits it)
	}
	t.pathEnd, t.service = t.Path.book(now, now, t.N, e, t.VC, slow)
}

// startSplit is Path.book of p, the path of channel vc's head (start is
// the one booking on behalf of an engine), when p crosses into another
// SIP at resource i and the machine splits such transfers
// (Params.SplitAtSIP, which makes every booking take bookSlow): it books
// the segment before i, the head's own SIP's, and sends the rest to the
// far SIP, to be booked there when the head reaches it. That is the rule
// of a partitioned run (engine/sim, partition.go), where only a
// resource's own SIP books it. On an idle path the times are the whole
// path's; under contention a far resource serves transfers in the order
// their heads reach it, not in the order they were issued.
//
// It returns the head's arrival at the boundary for the path's end (a
// bound the completion cannot come before) and the whole path's
// service. The two sides are objects that only exchange messages
// (Machine.post), each due at least the lookahead after it is sent:
//
//   - the far side (crossFar) goes to the far SIP at the head's arrival,
//     books the far segment there and sends its end back (crossEnd);
//   - the near side (crossNear) stands in for the transfer's owner until
//     the completion, at the later of the bound its injection end
//     scheduled and the far end's arrival;
//   - an IPCQ message's completion has a half on each side: at the
//     injection end the near side sends the far side the completion's
//     other bound (injection end + path latency) with a copy of the
//     source's bytes (crossInjected, Machine.injected), and the far side
//     delivers into the receiver's slot at the later of the two bounds,
//     the completion's time on both sides (Message.deliverFar); the
//     near side then does the sender's half (Message.sentNear).
func (e *dmaEngine) startSplit(p Path, i int, now sim.Time, n int64, vc VC, tag uint64) (arrival, service sim.Time) {
	head, lastIn, _ := p[:i].bookFrom(now, now, now, n, e, tag)
	if b := p.slowest(); b != nil {
		service = b.Xfer(n) // (book's: Xfer never grows with bandwidth)
	}
	t, m := e.head[vc], e.m
	sip, home := int(p[i].sip), int(p[0].sip)
	loc := m.localOf(home)
	near, far := loc.newCrossNear(), loc.newCrossFar()
	*near = crossNear{t: t, e: e, owner: t.Owner, far: far, home: home, farSip: sip, end: -1}
	*far = crossFar{sim: m.sipSim(sip), sip: sip, home: home, near: near, path: p[i:], n: n, tag: tag, lastIn: lastIn, source: e, end: -1, due: -1}
	if msg, ok := t.Owner.(*Message); ok {
		near.msg = msg
		far.deliver = true
		far.msg = *msg // (the far side's copy: it never reads the sender's)
		far.msg.Xfer.Owner, far.msg.Xfer.next = nil, nil
	} else if m.parts != nil {
		// Its completion would touch the far SIP's memory from this one.
		panic(fmt.Sprintf("internal error: %v crosses SIPs in a partitioned run, which has no plan for it yet", t.Owner))
	}
	t.Owner = near
	if lastIn == sim.Never {
		// A stop fault holds the transfer in the near segment (bookFrom):
		// it never leaves it, so its head never reaches the far SIP and
		// the far side is not sent (the head's time, the stopped
		// resource's start, may be within the lookahead). The near side
		// waits for the far end for ever, as a stopped transfer does.
		return head, service
	}
	m.post(home, sip, head, far)
	return head, service
}

// crossFar is a split transfer's far side: a message to the far SIP
// that books the far segment when the transfer's head gets there, and,
// for an IPCQ message, the receiver's half of its completion. It
// carries what it needs and never reads the transfer or the near side.
type crossFar struct {
	sim    *sim.Sim // the far SIP's clock
	sip    int      // the far SIP
	home   int      // the issuing SIP
	near   *crossNear
	path   Path // the far segment
	n      int64
	tag    uint64
	lastIn sim.Time // when the last byte leaves the near segment
	// source is the issuing engine, for a stop fault's note of the PE
	// it stalls (its PE, set when the machine is built, never changes).
	source *dmaEngine
	end    sim.Time // when the last byte leaves the far segment (-1: not booked yet)
	// deliver: the transfer is an IPCQ message, msg the far side's copy
	// of it; due is the injection end's bound (-1: not arrived yet) and
	// data the source's bytes copied then.
	deliver bool
	due     sim.Time
	data    []byte
	msg     Message
}

// Fire books the far segment at the head's arrival and sends the far end
// back, then delivers when the injection end's bound has arrived too; a
// second Fire is the delivery at the later of the two bounds. Its events
// are bookkeeping (the completion is counted on the issuing side).
func (c *crossFar) Fire() {
	s := c.sim
	s.NotWork()
	if c.end >= 0 {
		c.deliverNow()
		return
	}
	now := s.Now()
	_, c.end, _ = c.path.bookFrom(now, now, c.lastIn, c.n, c.source, c.tag)
	m := c.source.m
	loc := m.localOf(c.sip)
	back := loc.newCrossEnd()
	*back = crossEnd{near: c.near, end: c.end}
	m.post(c.sip, c.home, c.end, back)
	if !c.deliver {
		*c = crossFar{}
		loc.freeFar = append(loc.freeFar, c)
		return
	}
	c.ready()
}

// ready delivers at the later of the far end and the injection end's
// bound once both are known (now, or in a Fire then).
func (c *crossFar) ready() {
	if c.end < 0 || c.due < 0 {
		return
	}
	s := c.sim
	if at := max(c.end, c.due); at > s.Now() {
		s.At(at, c)
		return
	}
	c.deliverNow()
}

// deliverNow is the receiver's half of the message's completion.
func (c *crossFar) deliverNow() {
	loc := c.source.m.localOf(c.sip)
	c.msg.Xfer.Finished = c.sim.Now()
	c.msg.deliverFar(c.data)
	loc.putBuffer(c.data)
	*c = crossFar{}
	loc.freeFar = append(loc.freeFar, c)
}

// crossInjected is the injection end's bound and the source's bytes on
// their way to the far side.
type crossInjected struct {
	far  *crossFar
	due  sim.Time
	data []byte
}

// Fire hands the bound and the bytes to the far side.
func (c *crossInjected) Fire() {
	far, due, data := c.far, c.due, c.data
	far.sim.NotWork()
	*c = crossInjected{}
	// (Freed into the pool of the SIP it arrived at, as the other messages.)
	loc := far.source.m.localOf(far.sip)
	loc.freeInjected = append(loc.freeInjected, c)
	far.due, far.data = due, data
	far.ready()
}

// crossEnd is the far end on its way back to the issuing side.
type crossEnd struct {
	near *crossNear
	end  sim.Time
}

// Fire hands the far end to the near side.
func (c *crossEnd) Fire() {
	near, end := c.near, c.end
	loc := near.e.m.localOf(near.home)
	*c = crossEnd{}
	loc.freeEnds = append(loc.freeEnds, c)
	near.farEnd(end)
}

// crossNear stands in for a split transfer's owner on the issuing SIP
// until it completes: the completion needs both the bound the injection
// end scheduled (Complete) and the far end (farEnd, crossEnd's message),
// and fires at the later of the two.
type crossNear struct {
	t     *Transfer
	e     *dmaEngine
	owner Completer // the transfer's own
	// msg is the owner when it is an IPCQ message (its far half is far's,
	// the SIP farSip's: the near side only sends it messages).
	msg          *Message
	far          *crossFar
	home, farSip int      // the issuing SIP, the far one
	end          sim.Time // the far end (-1: its message has not arrived)
	bound        bool     // the injection end's bound has fired
}

// injected is the injection end of the near side's transfer (from the
// engine's hook, Machine.endHook): an IPCQ message sends the far side
// the completion's other bound and the source's bytes.
func (c *crossNear) injected(now sim.Time) {
	if c.msg == nil {
		return
	}
	t, m := c.t, c.e.m
	loc := m.localOf(c.home)
	var data []byte
	if src := c.msg.Src.View(); src != nil {
		data = loc.buffer(int64(len(src)))
		copy(data, src)
	}
	k := loc.newCrossInjected()
	due := sim.Add(now, t.latency)
	*k = crossInjected{far: c.far, due: due, data: data}
	m.post(c.home, c.farSip, due, k)
}

// Complete is the transfer's completion at the bound its injection end
// scheduled: it hands the transfer back to its owner when the far end
// has arrived (at or before now), else waits for it.
func (c *crossNear) Complete(t *Transfer) {
	if c.end < 0 {
		c.bound = true
		c.e.sim.NotWork() // (the completion is the far end's event)
		return
	}
	c.done()
}

// farEnd is the far end's arrival, at that end.
func (c *crossNear) farEnd(end sim.Time) {
	if !c.bound {
		c.end = end
		c.e.sim.NotWork() // (the completion is the bound's event)
		return
	}
	c.t.Finished = end
	c.done()
}

// done hands the transfer back to its owner, which completes it now (an
// IPCQ message: the sender's half).
func (c *crossNear) done() {
	t, loc, msg := c.t, c.e.m.localOf(c.home), c.msg
	t.Owner = c.owner
	*c = crossNear{}
	loc.freeNear = append(loc.freeNear, c)
	if msg != nil {
		msg.sentNear()
		return
	}
	t.Owner.Complete(t)
}

// share switches to round-robin at time now, when the second channel's
// head starts injecting: a head already injecting finishes its chunk in
// flight, and the first round starts with vc_compute at the later of the two
// heads' chunk boundaries. If the link went from two users to one at now,
// it had one for no time: the round goes on from the position it had
// then, where the remaining head is at a chunk boundary (the engine's
// event re-anchored it at now), as the chunk-by-chunk model, which
// decides at each chunk's end, goes on with it.
func (e *dmaEngine) share(now sim.Time) {
	e.shared, e.anchor = true, now
	if e.soloAt != now {
		e.turn, e.served = VCCompute, 0
	} else if e.served >= e.weights[e.turn] {
		e.turn, e.served = 1-e.turn, 0
	}
	for _, h := range e.head {
		if h.at < now && h.done < h.N {
			// The first chunk boundary at or after now (binary search: the
			// chunk in flight is not known without it, and this runs once
			// per switch, not per chunk).
			lo, hi := int64(1), e.chunksLeft(h)
			for lo < hi {
				mid := lo + (hi-lo)/2
				if sim.Add(h.at, injectTime(h, h.done, e.after(h, mid))) >= now {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			end := e.after(h, lo)
			h.at = sim.Add(h.at, injectTime(h, h.done, end))
			h.done = end
		}
		e.anchor = max(e.anchor, h.at)
	}
}

// next is the channel whose head ends its injection first and when
// (sim.Never if both channels are idle; ties go to vc_compute).
func (e *dmaEngine) next() (VC, sim.Time) {
	if e.shared {
		v, at, _, _, _ := e.roundRobin()
		return v, at
	}
	v, first := VCCompute, sim.Never
	if h := e.head[VCCompute]; h != nil {
		first = h.aloneEnd()
	}
	if h := e.head[VCComm]; h != nil {
		if at := h.aloneEnd(); at < first {
			v, first = VCComm, at
		}
	}
	return v, first
}

// aloneEnd is when t's injection ends if it injects on its own from (at,
// done). The common case, a transfer not yet interrupted by sharing, is
// small enough to inline into next.
func (t *Transfer) aloneEnd() sim.Time {
	// at + service is injectTime(t, 0, N) from at; a negative sum has
	// wrapped (saturated by slowEnd).
	if end := t.at + t.service; t.done == 0 && end >= 0 {
		return end
	}
	return t.slowEnd()
}

// slowEnd is aloneEnd of a transfer that has injected done > 0 bytes, or
// whose end saturates.
func (t *Transfer) slowEnd() sim.Time { return sim.Add(t.at, injectTime(t, t.done, t.N)) }

// roundRobin runs the shared round-robin from the anchor to the first end
// of a head's injection: which channel's head ends, when, the other head's
// injected bytes then, and whose turn it is then with how many of its
// chunks served. Turns alternate a0 b0 a1 b1 … from the anchor, where a
// is the channel whose turn it is (a0 is the rest of its turn) and b the
// other; whole turns are counted, never single chunks.
func (e *dmaEngine) roundRobin() (fin VC, at sim.Time, other int64, turn VC, served int64) {
	a, b := e.turn, 1-e.turn
	ha, hb := e.head[a], e.head[b]
	// A head with nothing left (zero bytes, or its last chunk in flight
	// when the link became shared) ends at the anchor and takes no turn.
	if ha.done >= ha.N {
		return a, e.anchor, hb.done, a, e.served
	}
	if hb.done >= hb.N {
		return b, e.anchor, ha.done, a, e.served
	}
	ra, rb := e.chunksLeft(ha), e.chunksLeft(hb)
	wa, wb := e.weights[a], e.weights[b]
	p := wa - e.served // chunks left in a's current turn
	var ja int64       // the turn of a in which its head ends
	if ra > p {
		ja = ceilDiv(ra-p, wa)
	}
	jb := ceilDiv(rb, wb) - 1 // the turn of b in which its head ends
	if ja <= jb {
		// a ends first, after b's turns 0 … ja−1 (ja·wb < rb chunks).
		other = e.after(hb, ja*wb)
		served = ra - p - (ja-1)*wa
		if ja == 0 {
			served = e.served + ra
		}
		return a, sim.Add(sim.Add(e.anchor, injectTime(ha, ha.done, ha.N)), injectTime(hb, hb.done, other)), other, a, served
	}
	// b ends first, after a's turns 0 … jb (p + jb·wa < ra chunks).
	other = e.after(ha, p+jb*wa)
	return b, sim.Add(sim.Add(e.anchor, injectTime(ha, ha.done, other)), injectTime(hb, hb.done, hb.N)), other, b, rb - jb*wb
}

// reschedule makes sure an engine event exists at the earliest injection end.
func (e *dmaEngine) reschedule() {
	v, next := e.next()
	if next == sim.Never {
		return
	}
	// (When next is nextAt, the channel may still have changed: a tie
	// goes to vc_compute.)
	e.nextVC = v
	if next != e.nextAt {
		e.nextAt = next
		e.sim.At(next, e)
	}
}

// Fire is the engine's injection-end event. Stale events (superseded by a
// reschedule) find nextAt moved and do nothing.
func (e *dmaEngine) Fire() {
	now := e.sim.Now()
	if now != e.nextAt {
		return
	}
	e.nextAt = sim.Never
	// The heads are as they were when nextAt was set: nextVC's ends now.
	v := e.nextVC
	for {
		// Retire channel v's head, whose injection ends now, and start the
		// channel's next transfer (here, its only place: a call per
		// transfer less).
		h, o := e.head[v], e.head[1-v]
		if e.shared {
			// Re-anchor the round-robin here: a chunk boundary for both heads.
			_, _, other, turn, served := e.roundRobin()
			o.done, o.at = other, now
			e.anchor, e.turn, e.served = now, turn, served
		}
		h.done = max(h.N, h.done)
		e.head[v] = h.next
		if h.next == nil {
			e.tail[v] = nil
		}
		h.next = nil
		if e.m.endHook {
			e.injected(v, h, now)
		}
		e.sim.At(max(h.pathEnd, sim.Add(now, h.latency)), h)
		n := e.head[v]
		if n != nil {
			e.start(n, now) // the channel's next transfer
		}
		both := n != nil && o != nil && n.injects && o.injects
		switch {
		case both && e.shared:
			if e.served >= e.weights[e.turn] {
				e.turn, e.served = 1-e.turn, 0
			}
		case both:
			e.share(now)
		case e.shared:
			// Down to one user (or none): turn and served stay as the
			// re-anchoring left them, for share.
			e.shared, e.soloAt = false, now
		}
		var at sim.Time
		v, at = e.next()
		if at > now {
			// What reschedule would do, without computing next again.
			if at != sim.Never {
				e.nextAt, e.nextVC = at, v
				e.sim.At(at, e)
			}
			return
		}
	}
}

// traceEnd records the injection of h, channel v's head that ended now.
func (e *dmaEngine) traceEnd(v VC, h *Transfer, now sim.Time) {
	tid, track := trace.TidVCCompute, "vc_compute"
	if v == VCComm {
		tid, track = trace.TidVCComm, "vc_comm"
	}
	label := h.Label
	if label == "" {
		label = track
	}
	e.m.TraceOf(e.pe).Slice(e.pe.ID+1, tid, track, label, h.Started, now, map[string]any{"bytes": h.N})
}

// local is what a SIP keeps for itself: the pools of its memory
// operations, byte buffers, IPCQ messages, credits that crossed SIPs and
// the split transfers' sides and messages (each freed into the pool of
// the SIP it ends at). A partitioned run has one per SIP, touched by
// that SIP's partition only; a run on one Sim one for the machine
// (Machine.localOf).
type local struct {
	// log is the SIP's op_log in a partitioned run that split its logs
	// (SplitLogs); nil: the machine's (Machine.Log). trace is its
	// recorder in a partitioned run that split the trace (SplitTrace).
	log   *oplog.Log
	trace *trace.Recorder
	// freeOps are completed memory operations handed back with Recycle,
	// reused the last one first: the fused primitives issue several per
	// message, and reusing them keeps the garbage collector out of the
	// simulation's hot path. A slice rather than a list linked through
	// the operations: a link would sit in a line of the operation that
	// neither its issue nor its completion touches, one cache miss more
	// per recycle and reuse at a thousand ranks.
	freeOps []*MemOp
	// freeBufs are byte buffers of finished tiles (PutBuffer) and of
	// sent bytes' copies, reused by later loads, tile math and copies:
	// fresh memory costs a page fault per 4 KiB on first touch, which
	// dominated the data path.
	freeBufs     [][]byte
	freeMsgs     []*Message
	freeCredits  []*creditMsg
	freeNear     []*crossNear
	freeFar      []*crossFar
	freeEnds     []*crossEnd
	freeInjected []*crossInjected
}

// localOf is SIP sip's local state.
func (m *Machine) localOf(sip int) *local {
	if m.locals == nil {
		return &m.one
	}
	return m.locals[m.partIndex(sip)]
}

func (l *local) newCrossNear() *crossNear {
	if k := len(l.freeNear); k > 0 {
		c := l.freeNear[k-1]
		l.freeNear = l.freeNear[:k-1]
		return c
	}
	return &crossNear{}
}

func (l *local) newCrossFar() *crossFar {
	if k := len(l.freeFar); k > 0 {
		c := l.freeFar[k-1]
		l.freeFar = l.freeFar[:k-1]
		return c
	}
	return &crossFar{}
}

func (l *local) newCrossEnd() *crossEnd {
	if k := len(l.freeEnds); k > 0 {
		c := l.freeEnds[k-1]
		l.freeEnds = l.freeEnds[:k-1]
		return c
	}
	return &crossEnd{}
}

func (l *local) newCrossInjected() *crossInjected {
	if k := len(l.freeInjected); k > 0 {
		c := l.freeInjected[k-1]
		l.freeInjected = l.freeInjected[:k-1]
		return c
	}
	return &crossInjected{}
}

// buffer returns n bytes (contents undefined), reusing a buffer of the
// pool when one of the last four handed back is large enough.
func (l *local) buffer(n int64) []byte {
	for i := len(l.freeBufs) - 1; i >= 0 && i >= len(l.freeBufs)-4; i-- {
		if b := l.freeBufs[i]; int64(cap(b)) >= n {
			last := len(l.freeBufs) - 1
			l.freeBufs[i] = l.freeBufs[last]
			l.freeBufs[last] = nil
			l.freeBufs = l.freeBufs[:last]
			return b[:n]
		}
	}
	return make([]byte, n)
}

// putBuffer hands back bytes that nothing reads any more.
func (l *local) putBuffer(b []byte) {
	if cap(b) == 0 || len(l.freeBufs) >= maxFreeBufs {
		return
	}
	l.freeBufs = append(l.freeBufs, b[:0])
}

// injected is the engine's hook at the end of h's injection on channel
// v (Machine.endHook): the trace's slice, and a split transfer's message
// to its far side.
func (e *dmaEngine) injected(v VC, h *Transfer, now sim.Time) {
	if e.m.Trace != nil {
		e.traceEnd(v, h, now)
	}
	if near, ok := h.Owner.(*crossNear); ok {
		near.injected(now)
	}
}

// sipSim is the simulation SIP sip's events go to: its partition's in a
// partitioned run, else the machine's one Sim.
func (m *Machine) sipSim(sip int) *sim.Sim {
	if m.parts != nil {
		return m.part(sip).Sim
	}
	return m.Sim
}

// post sends h from SIP from to SIP to, to fire there at at: the one way
// a split transfer's or a credit's work on one SIP reaches another (a
// message of a partitioned run, engine/sim, partition.go, at least the
// lookahead after the sender's clock). On one Sim the message is
// scheduled at once, and the bound is checked all the same, so that
// every split run checks it.
func (m *Machine) post(from, to int, at sim.Time, h sim.Handler) {
	s := m.sipSim(from)
	if now := s.Now(); at < sim.Add(now, m.look) {
		panic(fmt.Sprintf("internal error: a message from SIP %d to SIP %d for %v at %v, within the lookahead %v", from, to, at, now, m.look))
	}
	if m.parts != nil {
		m.part(from).Send(m.partIndex(to), at, h)
		return
	}
	s.At(at, h)
}
