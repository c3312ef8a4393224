package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Rule (model.md §1): events fire in (time, sequence) order; this checks
// the structure that finds the next time. The pending times (the sorted
// near array and the far heap) agree with a
// map and a sorted key list under random finds, insertions and pops of
// the earliest time (clustered times make repeated hits, insertions at
// both ends and in the middle; up to a few thousand pending times
// overflow into the far heap).
func TestPendingTimesMatchMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	s := New()
	ref := map[Time]*bucket{}
	var order []Time // ref's times, ascending
	sawFar := false
	for step := 0; step < 200000; step++ {
		if rng.IntN(3) == 0 && len(ref) > 0 {
			earliest := order[0]
			order = order[1:]
			// As the run loop takes the next instant.
			if len(s.times) == 0 {
				s.refillNear()
			}
			b := s.popTime()
			if b != ref[earliest] || b.at != earliest {
				t.Fatalf("step %d: popped the bucket of %v, want %v", step, b.at, earliest)
			}
			delete(ref, earliest)
			// Recycle it as the run loop does.
			s.cur = b
			s.retire()
			continue
		}
		at := Time(rng.IntN(4096)) * Time(1+rng.IntN(3))
		b := s.bucketAt(at)
		if want := ref[at]; want != nil && b != want {
			t.Fatalf("step %d: bucketAt(%v) = %p, want the pending %p", step, at, b, want)
		}
		if b.at != at {
			t.Fatalf("step %d: bucketAt(%v) returned the bucket of %v", step, at, b.at)
		}
		if ref[at] == nil {
			i, _ := slices.BinarySearch(order, at)
			order = slices.Insert(order, i, at)
		}
		ref[at] = b
		if n := len(s.times) + len(s.far); n != len(ref) {
			t.Fatalf("step %d: %d pending times, want %d", step, n, len(ref))
		}
		if len(s.far) > 0 {
			sawFar = true
			if len(s.times) > 0 && s.times[0].at >= s.far[0].at {
				t.Fatalf("step %d: near time %v is not before the far heap's earliest %v", step, s.times[0].at, s.far[0].at)
			}
		}
	}
	if !sawFar {
		t.Fatal("no time went to the far heap: the test does not cover it")
	}
	for i := 1; i < len(s.times); i++ {
		if s.times[i-1].at <= s.times[i].at {
			t.Fatalf("pending times out of order at %d: %v then %v", i, s.times[i-1].at, s.times[i].at)
		}
	}
}
