package machine

import (
	"kernbench/engine/sim"
	"kernbench/engine/trace"
	"math/bits"
)

// Resource is one serial piece of the fabric: a directed link or a memory
// port. It has a bandwidth, a latency and a reservation horizon.
//
// Timing model (docs/architecture.md, "fabric"): a transfer of n bytes
// books every resource of its path in order. On resource i it starts when
// its head arrives and the resource is free, occupies it for n/bandwidth_i,
// and its last byte cannot leave before it arrived from resource i-1. On an
// idle path this gives exactly Σ latency + n / min bandwidth; under
// contention transfers are served first come, first served per resource,
// which equals chunk-by-chunk FIFO service when each source's chunks are
// queued together. Per-PE interleaving of the two DMA virtual channels
// happens before the path (see dma.go).
type Resource struct {
	// What a booking reads and writes is the first 64 bytes, one cache
	// line (Resource is 192 bytes, a size class that starts on a line): a
	// path's resources are a cache miss each per transfer at a thousand
	// ranks. The older holds are in the second line, read only under
	// contention; the trace and the names after them.
	BytesPerUs int64 // bandwidth in bytes per microsecond (GB/s × 1000)
	Latency    sim.Time
	// The holds are the bookings that may not have ended yet: newest, the
	// latest booking's, and older. A hold that ended by now blocks nothing
	// (no booking starts before now), so those are dropped lazily: newest
	// is overwritten once over, older's are dropped when a booking next
	// searches them. A DMA engine's two virtual channels do not wait for
	// each other's bookings (the engine's arbiter already shares its
	// injection between them); all other bookings are served in time
	// order without overlapping.
	//
	// Most bookings find newest over and the older holds over by their
	// head: they read and write only this line, while a slice of holds
	// would cost a second line (its array) per booking.
	newest hold
	// olderEnd is at or after the end of every older hold: once it has
	// passed, older is empty but for holds that are over.
	olderEnd sim.Time

	// Statistics for reports and the trace.
	Bytes    int64
	BusyTime sim.Time

	older []hold // holds booked before newest (some may be over)
	// coverStart, when not 0, is 1 + the start of a span up to olderEnd
	// whose every instant is inside an older hold without an engine (tag
	// 0: math, direct PE access), which blocks every booking but a tag-1
	// one: such a booking whose head is in the span starts at olderEnd,
	// found without searching older. A unit booked back to back ahead of
	// now (tile math on one operand, over and over, at one instant) made
	// each search longer than the last.
	coverStart sim.Time
	// olderBuf is older's first array (machine.resource), until more
	// than two holds pile up: a booking under contention mostly finds one
	// older hold, and in an array of its own that hold was a cache line
	// more per booking at a thousand ranks.
	olderBuf [2]hold
	rare     *resourceRare // its trace and fault (nil: neither)
	Name     string
	Kind     string // pe_noc, ucie, pcie, tcm, sram, hbm, math
	// sip is the SIP the resource belongs to: a PE's links, ports and
	// math unit are its SIP's, a UCIe link its cubes', a PCIe link the
	// SIP it joins to the host. A transfer split at the SIP boundary
	// (Params.SplitAtSIP) books each SIP's resources in turn.
	sip int32
	_   [4]byte // to 192 bytes, a size class that starts on a line
}

// resourceRare is what few resources have, out of Resource's lines.
type resourceRare struct {
	trace *trace.Recorder // links only, when tracing
	// fault is the resource's jitter or stop (faults.go), which act on
	// each booking; nil without one.
	fault *resourceFault
	// charged counts the bytes of accesses charged at the resource's
	// bandwidth and latency without booking it (ChargeFor: an L3/L2
	// region's), which Bytes leaves out.
	charged int64
}

// trace is the recorder of r's use (nil: none).
func (r *Resource) trace() *trace.Recorder {
	if r.rare == nil {
		return nil
	}
	return r.rare.trace
}

// Jitter is the latency jitter a fault gives r's bookings (each adds up
// to it, drawn per booking); 0 without one.
func (r *Resource) Jitter() sim.Time {
	if f := r.fault(); f != nil {
		return f.Jitter
	}
	return 0
}

// fault is r's fault that acts on each booking (nil: none).
func (r *Resource) fault() *resourceFault {
	if r.rare == nil {
		return nil
	}
	return r.rare.fault
}

// rareOf is r.rare, made at the first need.
func (r *Resource) rareOf() *resourceRare {
	if r.rare == nil {
		r.rare = new(resourceRare)
	}
	return r.rare
}

// Xfer is the occupancy of n bytes on r, rounded up to a picosecond.
func (r *Resource) Xfer(n int64) sim.Time {
	if n <= 0 || r.BytesPerUs == 0 { // 0: an untimed (mock) machine
		return 0
	}
	if n < maxPlainXfer {
		return plainXfer(n, r.BytesPerUs)
	}
	// n·10⁶ overflows int64 from about 9.2 TB: compute in 128 bits and
	// saturate, so a huge transfer takes "forever" (the watchdog ends the
	// run) instead of a wrapped, negative time.
	hi, lo := bits.Mul64(uint64(n), 1_000_000)
	lo, carry := bits.Add64(lo, uint64(r.BytesPerUs-1), 0)
	hi += carry
	if hi >= uint64(r.BytesPerUs) {
		return sim.Never
	}
	q, _ := bits.Div64(hi, lo, uint64(r.BytesPerUs))
	if q > uint64(sim.Never) {
		return sim.Never
	}
	return sim.Time(q)
}

// maxPlainXfer bounds the byte counts whose n·10⁶ + bandwidth fits in 64
// bits, for which Xfer is one plain division (plainXfer).
const maxPlainXfer = 1 << 43

// plainXfer is Xfer of 0 < n < maxPlainXfer bytes at bw > 0 bytes/µs.
func plainXfer(n, bw int64) sim.Time {
	return sim.Time((uint64(n)*1_000_000 + uint64(bw-1)) / uint64(bw))
}

// BandwidthGBps is the bandwidth in GB/s (bytes per ns).
func (r *Resource) BandwidthGBps() float64 { return float64(r.BytesPerUs) / 1000 }

// Path is an ordered list of resources a transfer crosses.
type Path []*Resource

// Latency is Σ latency over the path.
func (p Path) Latency() sim.Time {
	var l sim.Time
	for _, r := range p {
		l += r.Latency
	}
	return l
}

// Bottleneck is the slowest resource's bandwidth in bytes/µs (0 for an empty path).
func (p Path) Bottleneck() int64 {
	var b int64
	for _, r := range p {
		if b == 0 || r.BytesPerUs < b {
			b = r.BytesPerUs
		}
	}
	return b
}

// IdleTime is T(path, n) = Σ latency + n / min bandwidth, computed as the
// booking would on an idle path (each term rounded up to a picosecond).
func (p Path) IdleTime(n int64) sim.Time {
	return sim.Add(p.Latency(), p.Service(n))
}

// ChargeFor is IdleTime for an access charged by its time without
// booking the path (an L3/L2 region's), noted on each resource as bytes
// charged, so that a report of the resource's use (a fault's) does not
// say nothing went through it.
func (p Path) ChargeFor(n int64) sim.Time {
	for _, r := range p {
		r.rareOf().charged += n
	}
	return p.IdleTime(n)
}

// Service is the time n bytes occupy the bottleneck of the path: the
// largest Xfer over its resources, which is the Xfer of the slowest timed
// one (Xfer never grows with bandwidth; an untimed resource takes 0), so
// one division serves the whole path.
func (p Path) Service(n int64) sim.Time {
	if r := p.slowest(); r != nil {
		return r.Xfer(n)
	}
	return 0
}

// slowest is the path's timed resource of least bandwidth (nil if none).
func (p Path) slowest() *Resource {
	var slowest *Resource
	for _, r := range p {
		if r.BytesPerUs != 0 && (slowest == nil || r.BytesPerUs < slowest.BytesPerUs) {
			slowest = r
		}
	}
	return slowest
}

type hold struct {
	start, until sim.Time
	// tag is the booking's DMA engine and channel (holdTag); bookings
	// without an engine (direct PE access, math) share tag 0. Holds keep
	// no pointer, so storing one needs no write barrier and the collector
	// does not scan them.
	tag uint64
}

// holdTag is the tag of source's bookings on channel vc.
func holdTag(source *dmaEngine, vc VC) uint64 {
	if source == nil {
		return 0
	}
	return source.key<<1 | uint64(vc)
}

// siblingTag is the tag of the holds that do not block a booking tagged
// tag: the other virtual channel of the same DMA engine (none without an
// engine: noTag matches no hold).
func siblingTag(tag uint64) uint64 {
	if tag == 0 {
		return noTag
	}
	return tag ^ 1
}

const noTag = ^uint64(0)

// free is the earliest time at or after t when a booking can hold r for d
// without overlapping a booking that blocks it (all but those tagged
// sibling, see siblingTag), searching the older holds (the caller has
// moved a live newest hold there). Bookings are served in time order, so
// a transfer may use an idle gap before a booking made earlier for a later
// time (what chunk-by-chunk service would do). Holds that ended by now are
// dropped: no booking can start before now.
//
// The other virtual channel of the same DMA engine (sibling) does not
// block: the engine's arbiter already shares the injection between them.
// Everything else, including the same channel's earlier transfers, is
// served in time order.
func (r *Resource) free(sibling uint64, t, d, now sim.Time) sim.Time {
	holds := r.older
	// The answer is the least t' >= t whose [t', t'+d) meets no blocking
	// hold: moving t to the end of a hold it meets never passes that
	// answer, so any visiting order reaches it. One pass drops the holds
	// that are over and moves t; then the holds are visited round and
	// round only until all of them have been seen in a row without
	// moving t. A hold that ends by t, or a sibling's, never blocks a
	// later t: only those seen starting after t+d (ahead) need another
	// look when t moves.
	span := max(d, 1)
	end := sim.Add(t, span)
	k, quiet, ahead := 0, 0, -1 // ahead: the last such hold's index
	for i := range holds {
		h := holds[i]
		if h.until <= now {
			continue
		}
		if k != i {
			holds[k] = h
		}
		k++
		if t < h.until && h.tag != sibling {
			if h.start < end {
				t = h.until
				end = sim.Add(t, span)
				quiet = k - 1 - ahead // ahead+1 … k-1 (h itself) stay clear
				continue
			}
			ahead = k - 1
		}
		quiet++
	}
	if k != len(holds) {
		r.older = r.older[:k]
		holds = holds[:k]
	}
	for i := 0; quiet < k; i++ {
		if i == k {
			i = 0
		}
		h := &holds[i]
		if h.start < end && t < h.until && h.tag != sibling {
			t = h.until
			end = sim.Add(t, span)
			quiet = 1
		} else {
			quiet++
		}
	}
	return t
}

// maxOlder is how many older holds a booking that needs no search lets
// pile up before dropping those that are over.
const maxOlder = 3

// book reserves the path for n bytes whose head enters at t (>= now) on
// behalf of source and returns the time the last byte arrives at the far
// end, and the largest occupancy of a resource: the path's Service(n)
// (Xfer never grows with bandwidth).
//
// slow says every booking takes the general path (Machine.slowBooking: a
// trace, or faults that act on each booking), so that neither check sits
// on the booking's cache line.
func (p Path) book(now, t sim.Time, n int64, source *dmaEngine, vc VC, slow bool) (arrival, service sim.Time) {
	tag := holdTag(source, vc)
	if slow || n >= maxPlainXfer {
		return p.bookSlow(now, t, n, source, tag)
	}
	if len(p) == 1 {
		// Most bookings are of one resource (a PE's own TCM, its math
		// unit): no loop state to carry. The last byte arrives at until
		// plus the latency (until >= start >= t).
		r := p[0]
		if bw := r.BytesPerUs; bw > 0 && n > 0 {
			service = plainXfer(n, bw)
		}
		start := t
		if r.newest.until > now || r.olderEnd > t {
			start = r.wait(t, service, now, tag)
		}
		until := sim.Add(start, service)
		if until > start {
			r.newest = hold{start, until, tag}
		}
		r.Bytes += n
		r.BusyTime = sim.Add(r.BusyTime, service)
		return sim.Add(until, r.Latency), service
	}
	head := t   // when the head reaches resource i
	lastIn := t // when the last byte reaches resource i from upstream
	// Resources of a path often share a bandwidth (both PE NoC links,
	// memory ports of one kind): the occupancy is computed once per run
	// of equal bandwidths.
	bw, d := int64(-1), sim.Time(0)
	for _, r := range p {
		if r.BytesPerUs != bw {
			bw = r.BytesPerUs
			d = 0 // an untimed (mock) machine, or no bytes
			if bw > 0 && n > 0 {
				d = plainXfer(n, bw) // r.Xfer(n) without a call
			}
			service = max(service, d)
		}
		start := head
		// The common case without a call: newest is over and so are
		// the older holds by head (r is free at head).
		if r.newest.until > now || r.olderEnd > head {
			start = r.wait(head, d, now, tag)
		}
		until := sim.Add(start, d) // saturating: times never wrap
		if until > start {
			r.newest = hold{start, until, tag}
		}
		r.Bytes += n
		r.BusyTime = sim.Add(r.BusyTime, d)
		lastIn = sim.Add(max(until, lastIn), r.Latency)
		head = sim.Add(start, r.Latency)
	}
	return lastIn, service
}

// wait is when a booking tagged tag whose head reaches r at head can hold
// r for d. A live newest hold joins the older ones, so that the booking
// can take newest's place.
func (r *Resource) wait(head, d, now sim.Time, tag uint64) sim.Time {
	if r.olderEnd <= now {
		// The older holds are all over: at most newest can block, and
		// it becomes the only older hold.
		r.older = r.older[:0] // stores only the length
		h := r.newest
		if h.until <= now {
			return head
		}
		r.older = append(r.older, h)
		r.olderEnd = h.until
		r.coverStart = 0
		if h.tag == 0 {
			r.coverStart = h.start + 1
		}
		r.newest = hold{}
		if head < h.until && h.tag != siblingTag(tag) && h.start < sim.Add(head, max(d, 1)) {
			return h.until
		}
		return head
	}
	if h := r.newest; h.until > now {
		r.older = append(r.older, h)
		r.cover(h)
		r.olderEnd = max(r.olderEnd, h.until)
		r.newest = hold{}
	}
	if head < r.olderEnd {
		if c := r.coverStart; c != 0 && head >= c-1 && tag != 1 {
			return r.olderEnd
		}
		return r.free(siblingTag(tag), head, d, now)
	}
	if len(r.older) > maxOlder && len(r.older) == cap(r.older) {
		// (Once older's array is full: a resource booked ever further
		// ahead within one instant, a kernel's tile math that never
		// waits for its results, has nothing over to drop, and a scan
		// at every booking made those bookings quadratic.)
		r.dropOver(now)
	}
	return head
}

// bookSlow is book for a traced machine, one with faults that act on each
// booking (jitter, a stop), one that splits transfers at SIP boundaries
// (dmaEngine.startSplit), or a huge transfer (n·10⁶ past 64 bits), which
// Xfer computes in 128 bits.
func (p Path) bookSlow(now, t sim.Time, n int64, source *dmaEngine, tag uint64) (arrival, service sim.Time) {
	if source != nil && source.m != nil && source.m.splitAtSIP {
		if i := p.splitIndex(); i > 0 {
			return source.startSplit(p, i, now, n, VC(tag&1), tag)
		}
	}
	_, arrival, service = p.bookFrom(now, t, t, n, source, tag)
	return arrival, service
}

// bookFrom is bookSlow for a segment of a path whose head reaches its
// first resource at head and whose last byte reached it at lastIn (the
// segment before it; head and lastIn are t for a whole path): it returns
// when the head and the last byte leave the segment, and its largest
// occupancy.
func (p Path) bookFrom(now, head, lastIn sim.Time, n int64, source *dmaEngine, tag uint64) (headOut, arrival, service sim.Time) {
	for _, r := range p {
		d := r.Xfer(n)
		service = max(service, d)
		start := head
		if r.newest.until > now || r.olderEnd > head {
			start = r.wait(head, d, now, tag)
		}
		until := sim.Add(start, d)
		latency := r.Latency
		if f := r.fault(); f != nil {
			if f.Jitter > 0 {
				latency = sim.Add(latency, f.jitter())
			}
			if f.Stops && sim.Add(until, latency) > f.StopAt {
				// Not out of the resource by its stop: it never is, and
				// nothing after it gets through.
				f.stall(source)
				until, latency = sim.Never, 0
			}
		}
		if until > start {
			r.newest = hold{start, until, tag}
		}
		if rec := r.trace(); d > 0 && rec != nil && start < sim.Never {
			rec.Counter(trace.LinksPid, r.Name, start, 1)
			if until < sim.Never {
				// A transfer a stopped fault holds never ends: the
				// link stays busy to the trace's end (an end at Never,
				// 106 days, stretched the timeline to it).
				rec.Counter(trace.LinksPid, r.Name, until, 0)
			}
		}
		r.Bytes += n
		r.BusyTime = sim.Add(r.BusyTime, d)
		lastIn = sim.Add(max(until, lastIn), latency)
		head = sim.Add(start, latency)
	}
	return head, lastIn, service
}

// cover updates the covered span of the older holds for h, a live hold
// (until > start) joining them, before olderEnd takes in h's end. Holds
// dropped later ended by now, before any booking's head, so the span
// stays covered where it matters.
func (r *Resource) cover(h hold) {
	switch {
	case h.until <= r.olderEnd:
		// Within the older holds' reach: the span stays what it was.
	case h.tag != 0:
		r.coverStart = 0
	case r.coverStart != 0 && h.start <= r.olderEnd:
		r.coverStart = min(r.coverStart, h.start+1)
	default:
		// After a gap (or no span): h alone is covered.
		r.coverStart = h.start + 1
	}
}

// dropOver drops the older holds that ended by now.
func (r *Resource) dropOver(now sim.Time) {
	k := 0
	for _, h := range r.older {
		if h.until > now {
			r.older[k] = h
			k++
		}
	}
	r.older = r.older[:k]
}

// splitIndex is the index of the path's first resource of another SIP
// than its first's (0: the path stays in one SIP).
func (p Path) splitIndex() int {
	if len(p) == 0 {
		return 0
	}
	sip := p[0].sip
	for i, r := range p[1:] {
		if r.sip != sip {
			return i + 1
		}
	}
	return 0
}

// Lookahead is the least delay of anything one SIP does to another, the
// window of a partitioned run (engine/sim, partition.go); 0 when the
// machine has one SIP or takes no time (no window to run in parallel).
// Faults only add latency, so the configured latencies bound it:
//
//   - a split transfer's head reaches the far SIP after its source port
//     and the PCIe up-link at least (an SRAM source has no NoC hop);
//   - its far end comes after the PCIe down-link and the destination
//     port at least (the booking there tells the sender);
//   - its injection end reaches the far side a whole path's latency
//     later, at least both of the above;
//   - a credit returns after two NoC hops and two PCIe links
//     (Group.Credit's delay, the idle time of the PE-to-PE path).
func (p Params) Lookahead() sim.Time {
	if p.Untimed || p.Sips < 2 {
		return 0
	}
	port := min(p.Tcm.Latency, p.Sram.Latency, p.Hbm.Latency)
	return min(sim.Add(p.Pcie.Latency, port), sim.Mul(sim.Add(p.Pcie.Latency, p.PeNoc.Latency), 2))
}
