package machine

import (
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
type Transfer struct {
	Path  Path
	N     int64
	VC    VC
	Owner Completer

	// Label names the transfer in the trace ("send E #3", "fetch", …).
	Label string

	Issued   sim.Time // when it was submitted
	Started  sim.Time // when its channel began injecting it
	Finished sim.Time // when its data effect happened

	eng       *dmaEngine
	injects   bool  // leaves the PE through its NoC up-link (set at submit)
	remaining int64 // injection work left, in ps × weight sum
	pathEnd   sim.Time
	next      *Transfer
	sim       *sim.Sim
}

// Fire is the transfer's completion event.
func (t *Transfer) Fire() {
	t.Finished = t.sim.Now()
	t.Owner.Complete(t)
}

// dmaEngine is a PE's DMA with two virtual channels. Each channel serves its
// transfers in order; when both channels inject into the PE's NoC up-link
// its time is shared between them in proportion to vc_weights (generalised
// processor sharing, the fluid limit of chunk-by-chunk weighted round-robin:
// every completion is within one chunk of the chunk-level model). A
// transfer's injection takes its path's bottleneck time when it runs alone,
// so an idle path costs exactly T(path, n). The path is booked when the
// transfer starts injecting; it completes at max(path booking end,
// injection end + path latency).
//
// Events: one per transfer for its injection end and one for its
// completion; no event per chunk.
type dmaEngine struct {
	m       *Machine
	pe      *PE
	sim     *sim.Sim
	weights [2]int64
	total   int64
	head    [2]*Transfer
	tail    [2]*Transfer
	last    sim.Time // remaining counters are exact as of this time
	nextAt  sim.Time // time of the live engine event (sim.Never if none)
}

func newDMAEngine(s *sim.Sim, compute, comm int64) *dmaEngine {
	return &dmaEngine{sim: s, weights: [2]int64{compute, comm}, total: compute + comm, nextAt: sim.Never}
}

// rate is the injection progress per picosecond of a channel's head. The
// channels split the PE's injection link (its NoC up-link) by weight when
// both heads inject into it [D8: "the same link is shared, its bandwidth
// split between the two channels"]; a transfer that stays inside the PE
// (own HBM to registers, say) does not take a share from the other.
func (e *dmaEngine) rate(v VC) int64 {
	h, o := e.head[v], e.head[1-v]
	if h == nil || o == nil || !h.injects || !o.injects {
		return e.total
	}
	return e.weights[v]
}

// injects reports whether path leaves the PE through its NoC up-link.
func (e *dmaEngine) injects(path Path) bool {
	for _, r := range path {
		if r == e.pe.NocUp {
			return true
		}
	}
	return false
}

// advance brings the remaining work of both heads up to now.
func (e *dmaEngine) advance(now sim.Time) {
	if dt := int64(now - e.last); dt > 0 {
		r0, r1 := e.rate(0), e.rate(1)
		if h := e.head[0]; h != nil {
			h.remaining = progress(h.remaining, r0, dt)
		}
		if h := e.head[1]; h != nil {
			h.remaining = progress(h.remaining, r1, dt)
		}
	}
	e.last = now
}

// progress is what remains of rem after dt picoseconds at rate r, without
// overflow of r·dt (a saturated remaining time meets a long interval only
// in runs the watchdog ends).
func progress(rem, r, dt int64) int64 {
	if r != 0 && dt > max(rem, 0)/r+1 {
		return min(rem, 0)
	}
	return rem - r*dt
}

func (e *dmaEngine) submit(t *Transfer) {
	now := e.sim.Now()
	e.advance(now)
	t.Issued = now
	t.injects = e.injects(t.Path)
	v := t.VC
	if e.tail[v] == nil {
		e.head[v], e.tail[v] = t, t
		e.start(t, now)
	} else {
		e.tail[v].next = t
		e.tail[v] = t
	}
	e.reschedule()
}

func (e *dmaEngine) start(t *Transfer, now sim.Time) {
	t.Started = now
	t.remaining = int64(sim.Mul(t.Path.Service(t.N), e.total))
	t.pathEnd = t.Path.book(now, now, t.N, e, t.VC)
}

// reschedule makes sure an engine event exists at the earliest injection end.
func (e *dmaEngine) reschedule() {
	next := sim.Never
	for v := VC(0); v < 2; v++ {
		if h := e.head[v]; h != nil {
			r := e.rate(v)
			rem := max(h.remaining, 0)
			at := sim.Add(e.last, sim.Time(rem/r+min(rem%r, 1)))
			next = min(next, at)
		}
	}
	if next != e.nextAt && next != sim.Never {
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
	e.advance(now)
	for v := VC(0); v < 2; v++ {
		for h := e.head[v]; h != nil && h.remaining <= 0; h = e.head[v] {
			e.head[v] = h.next
			if h.next == nil {
				e.tail[v] = nil
			}
			h.next = nil
			if tr := e.m.Trace; tr != nil {
				tid, track := trace.TidVCCompute, "vc_compute"
				if v == VCComm {
					tid, track = trace.TidVCComm, "vc_comm"
				}
				label := h.Label
				if label == "" {
					label = track
				}
				tr.Slice(e.pe.ID+1, tid, track, label, h.Started, now, map[string]any{"bytes": h.N})
			}
			done := max(h.pathEnd, sim.Add(now, h.Path.Latency()))
			e.sim.At(done, h)
			if n := e.head[v]; n != nil {
				e.start(n, now)
			}
		}
	}
	e.reschedule()
}
