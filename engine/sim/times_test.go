package sim

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// Rule (docs/architecture.md, engine/sim): events fire in (time, sequence)
// order; this checks the structure that finds the next time. The pending
// times (the radix heap, with recent and overflow finding a time's bucket)
// agree with a map and a sorted key list under random finds, placements and
// takes of the earliest time, as the run loop makes them (a time is placed at
// or after the last one taken). The times placed mix short delays (times
// sharing a radix bin, which fall apart on a take), delays that differ in
// high bits only, times far in the future and the saturated Horizon and
// Never; many pending times make recent collide into overflow.
func TestPendingTimesMatchMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	s := New()
	ref := map[Time]*bucket{}
	var order []Time // ref's times, ascending
	sawOverflow, sawRebase, restarts := false, false, 0
	delay := func() Time {
		switch rng.IntN(8) {
		case 0:
			return Time(rng.IntN(4))
		case 1:
			return Time(rng.IntN(64)) << (6 * rng.IntN(11)) & Never // one base-64 digit
		case 2:
			return Time(1) << rng.IntN(63) // one bit, up to the highest
		case 3:
			return Time(rng.Uint64N(uint64(Never-s.now) + 1)) // anywhere ahead
		case 4:
			return Horizon - s.now + Time(rng.IntN(3)) - 1
		case 5:
			return Never - s.now - Time(rng.IntN(2))
		default:
			return Time(rng.IntN(4096)) * Time(1+rng.IntN(3))
		}
	}
	for step := 0; step < 300000; step++ {
		if rng.IntN(3) == 0 && len(ref) > 0 {
			earliest := order[0]
			order = order[1:]
			if got := s.NextEventTime(); got != earliest {
				t.Fatalf("step %d: NextEventTime = %v, want %v", step, got, earliest)
			}
			// As the run loop takes the next instant.
			if b := s.times.bins[func() uint { k, v := s.times.lowest(); return k<<6 | v }()]; b.link != nil {
				sawRebase = true
			}
			// As the loop ends a window or stops at the limit: a stop
			// before the earliest time takes nothing.
			if b := s.times.popUntil(earliest - 1); b != nil {
				t.Fatalf("step %d: popUntil(%v) took the bucket of %v", step, earliest-1, b.at)
			}
			var b *bucket
			if rng.IntN(2) == 0 {
				b = s.times.pop()
			} else {
				b = s.times.popUntil(Add(earliest, Time(rng.IntN(2))))
			}
			if b != ref[earliest] || b.at != earliest {
				t.Fatalf("step %d: took the bucket of %v, want %v", step, b.at, earliest)
			}
			s.retire(s.cur)
			s.cur = b
			s.now = b.at
			delete(ref, earliest)
			if s.now > Horizon {
				// Start again: from here on nearly every time saturates.
				s, ref, order = New(), map[Time]*bucket{}, nil
				restarts++
			}
			continue
		}
		at := Add(s.now, max(0, delay()))
		if s.cur.at == at {
			continue // the current instant's bucket (At appends to it)
		}
		// As At finds a time's bucket.
		b := s.recent[recentSlot(at)]
		if b == nil || b.at != at {
			b = s.bucketAt(at)
		}
		if want := ref[at]; want != nil && b != want {
			t.Fatalf("step %d: the bucket of %v is %p, want the pending %p", step, at, b, want)
		}
		if b.at != at {
			t.Fatalf("step %d: looking up %v gave the bucket of %v", step, at, b.at)
		}
		if ref[at] == nil {
			i, _ := slices.BinarySearch(order, at)
			order = slices.Insert(order, i, at)
		}
		ref[at] = b
		if err := s.times.checkBins(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if s.times.n != len(ref) {
			t.Fatalf("step %d: %d pending times, want %d", step, s.times.n, len(ref))
		}
		if s.overflow.n > 0 {
			sawOverflow = true
		}
		if step%97 == 0 {
			// overflowAt counts overflow's buckets by their entry.
			var want [1 << recentBits]uint32
			for _, b := range s.overflow.slots {
				if b != nil {
					want[recentSlot(b.at)]++
				}
			}
			if want != s.overflowAt {
				t.Fatalf("step %d: overflowAt does not count overflow's buckets by entry", step)
			}
		}
		// Keep the pending times to a few hundred.
		for len(ref) > 300 {
			earliest := order[0]
			order = order[1:]
			b := s.times.pop()
			if b.at != earliest {
				t.Fatalf("step %d: took %v, want %v", step, b.at, earliest)
			}
			s.retire(s.cur)
			s.cur, s.now = b, b.at
			delete(ref, earliest)
		}
	}
	if !sawOverflow || !sawRebase || restarts < 10 {
		t.Fatalf("overflow used %v, a shared radix bin taken %v, %d runs past the Horizon: the test does not cover them", sawOverflow, sawRebase, restarts)
	}
	t.Logf("%d restarts", restarts)
}

// The radix heap gives back any set of distinct times, placed in any
// order at or after the last one taken, earliest first, also after
// rebaseAll moves its base down (as the watchdog does when it puts the
// time it took back).
func TestRadixTimesTakeEarliestFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var r radixTimes
	pending := map[Time]bool{}
	var want []Time
	now := Time(0)
	for step := 0; step < 200000; step++ {
		switch op := rng.IntN(10); {
		case op < 5 && len(pending) < 500 || len(pending) == 0:
			at := now + Time(rng.Int64N(1<<uint(rng.IntN(63))))
			if at < now { // wrapped past Never
				at = Never
			}
			if pending[at] {
				continue
			}
			pending[at] = true
			i, _ := slices.BinarySearch(want, at)
			want = slices.Insert(want, i, at)
			r.push(&bucket{at: at})
		case op < 9:
			if got := r.min(); got != want[0] {
				t.Fatalf("step %d: min = %v, want %v", step, got, want[0])
			}
			b := r.pop()
			if b.at != want[0] || b.link != nil {
				t.Fatalf("step %d: took %v (linked %v), want %v", step, b.at, b.link != nil, want[0])
			}
			delete(pending, b.at)
			want = want[1:]
			now = b.at
		default:
			// Back to an earlier base, as after a watchdog stop.
			base := now
			if len(want) > 0 {
				base = want[0] - Time(rng.Int64N(int64(want[0]-now)+1))
			}
			r.rebaseAll(base)
			now = base
		}
		if r.n != len(pending) {
			t.Fatalf("step %d: %d pending, want %d", step, r.n, len(pending))
		}
		if step%64 == 0 {
			if err := r.checkBins(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	}
	if r.min() == Never && len(pending) > 0 && !pending[Never] {
		t.Fatal("min is Never with times pending")
	}
}

// checkBins reports the first pending time outside its bin (see push), a
// bitmap bit that disagrees with its bin, or a wrong count.
func (r *radixTimes) checkBins() error {
	n := 0
	for i, b := range r.bins {
		if (b != nil) != (r.usedBins[i>>6]>>(i&63)&1 == 1) {
			return fmt.Errorf("bin %d: its bit in usedBins is wrong", i)
		}
		for ; b != nil; b = b.link {
			n++
			if b.at < r.last {
				return fmt.Errorf("bin %d holds %d, earlier than last %d", i, b.at, r.last)
			}
			k := (bits.Len64(uint64(b.at^r.last)|1) - 1) / 6
			if want := 64*k + int(b.at>>(6*k))&63; want != i {
				return fmt.Errorf("bin %d holds %d (last %d), which belongs in bin %d", i, b.at, r.last, want)
			}
		}
	}
	for k, u := range r.usedBins {
		if (u != 0) != (r.used>>k&1 == 1) {
			return fmt.Errorf("digit %d: its bit in used is wrong", k)
		}
	}
	if n != r.n {
		return fmt.Errorf("%d pending, %d in the bins", r.n, n)
	}
	return nil
}

// A bin that falls apart on a take spreads its times a digit at a time:
// here a bin of digit 2 whose earliest time shares its digit-1 value with
// others (they spread again, into digit 0) while the rest stay in bins of
// digit 1. Every take gives the earliest time and leaves every other
// pending time in its bin relative to it (see push).
func TestRadixTimesSpreadBinByDigit(t *testing.T) {
	var r radixTimes
	const d1, d2 = 64, 64 * 64
	// All in the bin of digit 2, value 1 (relative to last 0).
	times := []Time{
		d2 + 5*d1 + 9, d2 + 5*d1 + 3, d2 + 5*d1 + 40, // the earliest's digit-1 value
		d2 + 7*d1, d2 + 7*d1 + 1, d2 + 63*d1 + 63, d2 + 6*d1 + 2,
	}
	for _, at := range times {
		r.push(&bucket{at: at})
	}
	if k, v := r.lowest(); k != 2 || v != 1 || r.used != 1<<2 {
		t.Fatalf("the times are in bin (%d, %d), used %b; want all in (2, 1)", k, v, r.used)
	}
	want := slices.Sorted(slices.Values(times))
	for i, at := range want {
		b := r.pop()
		if b.at != at || b.link != nil {
			t.Fatalf("take %d: %v (linked %v), want %v", i, b.at, b.link != nil, at)
		}
		if err := r.checkBins(); err != nil {
			t.Fatalf("after taking %v: %v", at, err)
		}
		if i == 0 && (r.usedBins[0] != 1<<9|1<<40 || r.usedBins[1] != 1<<6|1<<7|1<<63) {
			t.Fatalf("after the first take: digit 0 bins %b, digit 1 bins %b", r.usedBins[0], r.usedBins[1])
		}
	}
	if r.n != 0 || r.used != 0 {
		t.Fatalf("%d pending, used %b after taking every time", r.n, r.used)
	}
}
