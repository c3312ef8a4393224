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
	Name       string
	Kind       string // pe_noc, ucie, pcie, tcm, sram, hbm, math
	BytesPerUs int64  // bandwidth in bytes per microsecond (GB/s × 1000)
	Latency    sim.Time
	// holds are the bookings that have not ended yet. A DMA engine's two
	// virtual channels do not wait for each other's bookings (the engine's
	// arbiter already shares its injection between them); all other
	// bookings are served in time order without overlapping.
	holds []hold

	trace *trace.Recorder // links only, when tracing

	// Statistics for reports and the trace.
	Bytes    int64
	BusyTime sim.Time
}

// Xfer is the occupancy of n bytes on r, rounded up to a picosecond.
func (r *Resource) Xfer(n int64) sim.Time {
	if n <= 0 || r.BytesPerUs == 0 { // 0: an untimed (mock) machine
		return 0
	}
	if uint64(n) < 1<<43 {
		// n·10⁶ + bandwidth fits in 64 bits: one plain division.
		return sim.Time((uint64(n)*1_000_000 + uint64(r.BytesPerUs-1)) / uint64(r.BytesPerUs))
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
	source       *dmaEngine // nil: direct PE access and math
	vc           VC
	start, until sim.Time
}

// free is the earliest time at or after t when source can hold r for d
// without overlapping another source's booking. Bookings are served in
// time order, so a transfer may use an idle gap before a booking made
// earlier for a later time (what chunk-by-chunk service would do). Holds
// that ended by now are dropped: no booking can start before now.
func (r *Resource) free(source *dmaEngine, vc VC, t, d, now sim.Time) sim.Time {
	if len(r.holds) == 0 {
		return t // idle: nothing to wait for (the common case)
	}
	k := 0
	for _, h := range r.holds {
		if h.until > now {
			r.holds[k] = h
			k++
		}
	}
	r.holds = r.holds[:k]
	for moved := true; moved; {
		moved = false
		for _, h := range r.holds {
			// The other virtual channel of the same DMA engine does not
			// block: the engine's arbiter already shares the injection
			// between them. Everything else, including the same channel's
			// earlier transfers, is served in time order.
			sibling := source != nil && h.source == source && h.vc != vc
			if !sibling && h.start < sim.Add(t, max(d, 1)) && t < h.until {
				t, moved = h.until, true
			}
		}
	}
	return t
}

func (r *Resource) hold(source *dmaEngine, vc VC, start, until sim.Time) {
	if until > start {
		r.holds = append(r.holds, hold{source, vc, start, until})
	}
}

// book reserves the path for n bytes whose head enters at t (>= now) on
// behalf of source and returns the time the last byte arrives at the far end.
func (p Path) book(now, t sim.Time, n int64, source *dmaEngine, vc VC) sim.Time {
	head := t   // when the head reaches resource i
	lastIn := t // when the last byte reaches resource i from upstream
	for _, r := range p {
		d := r.Xfer(n)
		start := r.free(source, vc, head, d, now)
		until := sim.Add(start, d) // saturating: times never wrap
		end := max(until, lastIn)
		r.hold(source, vc, start, until)
		if r.trace != nil && d > 0 {
			r.trace.Counter(trace.LinksPid, r.Name, start, 1)
			r.trace.Counter(trace.LinksPid, r.Name, until, 0)
		}
		r.Bytes += n
		r.BusyTime = sim.Add(r.BusyTime, d)
		head = sim.Add(start, r.Latency)
		lastIn = sim.Add(end, r.Latency)
	}
	return lastIn
}
