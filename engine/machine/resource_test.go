package machine

import (
	"math/rand/v2"
	"testing"

	"kernbench/engine/sim"
)

// refHold and refResource are the booking model written out plainly: every
// hold that has not ended is kept, and t moves to the end of any blocking
// hold it meets until none is met.
type refHold struct {
	source       int // 0: no DMA engine
	vc           VC
	start, until sim.Time
}

type refResource struct {
	bw    int64
	lat   sim.Time
	holds []refHold
}

func (r *refResource) free(source int, vc VC, t, d, now sim.Time) sim.Time {
	var kept []refHold
	for _, h := range r.holds {
		if h.until > now {
			kept = append(kept, h)
		}
	}
	r.holds = kept
	for moved := true; moved; {
		moved = false
		for _, h := range r.holds {
			sibling := source != 0 && h.source == source && h.vc != vc
			if !sibling && h.start < sim.Add(t, max(d, 1)) && t < h.until {
				t, moved = h.until, true
			}
		}
	}
	return t
}

func refBook(path []*refResource, now, t sim.Time, n int64, source int, vc VC) sim.Time {
	head, lastIn := t, t
	for _, r := range path {
		d := (&Resource{BytesPerUs: r.bw}).Xfer(n)
		start := r.free(source, vc, head, d, now)
		until := sim.Add(start, d)
		if until > start {
			r.holds = append(r.holds, refHold{source, vc, start, until})
		}
		head = sim.Add(start, r.lat)
		lastIn = sim.Add(max(until, lastIn), r.lat)
	}
	return lastIn
}

// randomResources are n resources, each with a bandwidth drawn from bws
// and a latency of 0 to lats-1 times 700 ps, and their plain models.
func randomResources(rng *rand.Rand, n int, bws []int64, lats int) ([]*Resource, []*refResource) {
	res := make([]*Resource, n)
	ref := make([]*refResource, n)
	for i := range res {
		bw := bws[rng.IntN(len(bws))]
		lat := sim.Time(rng.IntN(lats)) * 700
		res[i] = &Resource{BytesPerUs: bw, Latency: lat}
		ref[i] = &refResource{bw: bw, lat: lat}
	}
	return res, ref
}

// Rule (docs/architecture.md, engine/machine): links and memory ports are
// shared deterministically, FIFO between sources, the two VCs of a PE not
// blocking each other. TestBookMatchesFixpointModel books random transfers of
// random sources and channels, at random times, on random paths over a few
// shared resources, and compares every arrival with the plain model: the
// one-pass search, the hold tags and the shortcuts of Path.book must not
// change a time.
func TestBookMatchesFixpointModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 200 {
		nres := 1 + rng.IntN(5)
		res, ref := randomResources(rng, nres, []int64{0, 1000, 32_000, 64_000, 128_000}, 3)
		engines := []*dmaEngine{nil, {key: 1}, {key: 2}, {key: 3}}
		now := sim.Time(0)
		for op := range 300 {
			// Steps of picoseconds to a few transfer times, so that
			// bookings meet, abut and leave gaps.
			now += sim.Time(rng.IntN(3)) * sim.Time(rng.IntN(4000))
			at := now + sim.Time(rng.IntN(2))*sim.Time(rng.IntN(4000))
			var path Path
			var refPath []*refResource
			for range 1 + rng.IntN(4) {
				i := rng.IntN(nres)
				path, refPath = append(path, res[i]), append(refPath, ref[i])
			}
			// Often put now or the head a picosecond around the end of a
			// booking: the edges of every shortcut.
			var ends []sim.Time
			for _, r := range refPath {
				for _, h := range r.holds {
					ends = append(ends, h.until)
				}
			}
			if len(ends) > 0 && rng.IntN(2) == 0 {
				e := ends[rng.IntN(len(ends))] + sim.Time(rng.IntN(3)-1)
				if rng.IntN(2) == 0 {
					now = max(now, e)
				}
				at = max(now, e)
			}
			n := []int64{0, 1, 64, 256, 2048}[rng.IntN(5)]
			src := rng.IntN(len(engines))
			vc := VC(rng.IntN(2))
			// tracing (or faults that act on each booking) takes book's
			// general loop (bookSlow): both must agree with the model
			// (these resources have no faults).
			tracing := rng.IntN(4) == 0
			got, service := path.book(now, at, n, engines[src], vc, tracing)
			want := refBook(refPath, now, at, n, src, vc)
			if got != want {
				t.Fatalf("trial %d op %d: book(now %v, t %v, n %d, source %d, %v, tracing %v) = %v, want %v", trial, op, now, at, n, src, vc, tracing, got, want)
			}
			if s := path.Service(n); service != s {
				t.Fatalf("trial %d op %d: book's service %v, want Path.Service %v", trial, op, service, s)
			}
		}
	}
}

// A kernel whose tile math never waits for its results books its PE's
// math unit ever further ahead within one instant; each booking used to
// scan every hold booked before it, so a million of them took hours. The
// shortcuts that make them cheap (older holds dropped only once their
// array is full, a booking inside a span covered by engine-less holds
// placed at its end) must not change a time: bookings at a few instants,
// with heads anywhere from now to past the last hold, agree with the
// plain model.
func TestBookAheadAtOneInstantMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := range 30 {
		nres := 1 + rng.IntN(2)
		res, ref := randomResources(rng, nres, []int64{1000, 32_000}, 2)
		engines := []*dmaEngine{nil, {key: 1}}
		now, last := sim.Time(0), sim.Time(0)
		for op := range 400 {
			if rng.IntN(100) == 0 {
				// Time moves on, at times past some holds.
				now += sim.Time(rng.IntN(200_000))
			}
			at := now
			if span := last - now; span > 0 && rng.IntN(4) != 0 {
				at = now + sim.Time(rng.Int64N(int64(span)+1000))
			}
			src := 0
			if rng.IntN(8) == 0 {
				src = 1 // now and then a DMA booking among the math
			}
			vc := VC(rng.IntN(2))
			i := rng.IntN(nres)
			n := []int64{0, 64, 256, 2048}[rng.IntN(4)]
			got, _ := Path{res[i]}.book(now, at, n, engines[src], vc, false)
			want := refBook([]*refResource{ref[i]}, now, at, n, src, vc)
			if got != want {
				t.Fatalf("trial %d op %d: book(now %v, t %v, n %d, source %d, %v) = %v, want %v", trial, op, now, at, n, src, vc, got, want)
			}
			last = max(last, got)
		}
	}
}
