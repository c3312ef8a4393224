package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The loop's bookkeeping, pinned case by case: what Pending and Events
// count (the loop counts what it takes and daemons count themselves),
// which time a stall reports (noted per instant), a second Run (after a
// stop, after a completed run), SetJitter's refusal, and jitter (under
// which the direct-mapped index of pending buckets stays empty).

// jitterQueue is a Sim with jitter on, for the reference cascades.
func jitterQueue(seed uint64) *Sim {
	s := New()
	s.SetJitter(seed)
	return s
}

// Rule (docs/architecture.md, engine/sim, --jitter-seed: jitter permutes
// processes only): hardware events under jitter fire in exactly (time,
// sequence) order, for the cascades the unjittered queue is checked with:
// many events per time, times that share an entry of recent (under jitter
// every bucket lives in the overflow table) and times that differ in high
// bits.
func TestJitterKeepsHardwareEventsInTimeSequenceOrder(t *testing.T) {
	var colliding []Time // ascending, all in recent entry 0
	for at := Time(0); len(colliding) < 40; at++ {
		if recentSlot(at) == 0 {
			colliding = append(colliding, at)
		}
	}
	delays := []Time{0, 1, 63, 64, 65, 4095, 4096, 1 << 20, 3 << 30, 1 << 40, Horizon / 16}
	cases := []struct {
		name  string
		start func(rng *rand.Rand) Time
		next  func(rng *rand.Rand, now Time) Time
	}{
		{"few delays",
			func(rng *rand.Rand) Time { return Time(rng.IntN(3)) },
			func(rng *rand.Rand, now Time) Time { return now + Time(rng.IntN(4)) }},
		{"colliding times",
			func(rng *rand.Rand) Time { return colliding[rng.IntN(3)] },
			func(rng *rand.Rand, now Time) Time {
				first := 0
				for colliding[first] < now {
					first++
				}
				return colliding[first+rng.IntN(min(4, len(colliding)-first))]
			}},
		{"high bits",
			func(rng *rand.Rand) Time { return delays[rng.IntN(len(delays))] },
			func(rng *rand.Rand, now Time) Time { return now + delays[rng.IntN(len(delays))] }},
	}
	for _, c := range cases {
		for seed := uint64(1); seed <= 20; seed++ {
			want := cascade(seed, &listQueue{}, 5, 6, c.start, c.next)
			s := jitterQueue(seed)
			got := cascade(seed, s, 5, 6, c.start, c.next)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s, seed %d: firing order under jitter (-reference +jittered):\n%s", c.name, seed, diff)
			}
			for i, b := range s.recent {
				if b != &noInstant {
					t.Fatalf("%s, seed %d: under jitter recent[%d] holds the bucket of %v", c.name, seed, i, b.at)
				}
			}
			if s.Pending() != 0 || s.Events() != uint64(len(got)) {
				t.Errorf("%s, seed %d: %d pending, %d events; want 0 and %d", c.name, seed, s.Pending(), s.Events(), len(got))
			}
		}
	}
}

// Pending is the events scheduled and not yet taken (a firing event is
// taken; a jittered wake-up counts like any event; a daemon's check too,
// until it fires), Events the work events taken (not the daemons').
func TestPendingAndEventsCountScheduledTakenAndWork(t *testing.T) {
	for _, seed := range []uint64{0, 3} {
		s := New()
		s.SetJitter(seed)
		var seen []string
		note := func(tag string) Handler {
			return HandlerFunc(func() { seen = append(seen, fmt.Sprintf("%s %d/%d", tag, s.Pending(), s.Events())) })
		}
		s.WaitWatchdog(40) // checks at 10, 20, … while other events are pending
		d := &daemon{s: s}
		d.check = func() { seen = append(seen, fmt.Sprintf("daemon %d/%d", s.Pending(), s.Events())) }
		s.At(5, d)
		s.At(5, note("a"))
		s.At(5, note("b"))
		s.Spawn("p", func(p *Proc) {
			seen = append(seen, fmt.Sprintf("p %d/%d", s.Pending(), s.Events()))
			_ = p.Sleep(12) // 12 is not passed in place: the check at 10 is first
			seen = append(seen, fmt.Sprintf("p@%v %d/%d", s.Now(), s.Pending(), s.Events()))
		})
		if got, want := s.Pending(), 5; got != want {
			t.Errorf("seed %d: %d pending before the run, want %d (a check, a daemon, a, b and p's start)", seed, got, want)
		}
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		// At 0: p's start (the check at 10, the daemon, a and b
		// pending); at 5: the daemon (not work), a, b (p's wake-up at 12
		// pending too); at 10: the check (it reschedules); at 12: p, with
		// the check at 20 pending.
		want := []string{"p 4/1", "daemon 4/1", "a 3/2", "b 2/3", "p@0.012ns 1/4"}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("seed %d: pending/events seen by the events (-want +got):\n%s", seed, diff)
		}
		if s.Pending() != 0 || s.Events() != 4 || s.Now() != 20 {
			t.Errorf("seed %d: after the run %d pending, %d events, now %v; want 0, 4 and 20ps (the last check)", seed, s.Pending(), s.Events(), s.Now())
		}
	}
}

// A stopped simulation stays stopped: a second Run after a watchdog stop
// returns the same error at once and fires nothing (the event past the
// limit stays pending, the clock at the limit).
func TestRunAfterAWatchdogStopFiresNothing(t *testing.T) {
	s := New()
	s.MaxTime = 100
	fired := 0
	s.At(50, HandlerFunc(func() { fired++ }))
	s.At(150, HandlerFunc(func() { fired++ }))
	first := s.Run()
	var wd *WatchdogError
	if !errors.As(first, &wd) || wd.Next != 150 || wd.Horizon {
		t.Fatalf("Run = %v, want a *WatchdogError at max_sim_time with 150ps next", first)
	}
	second := s.Run()
	if second != first || fired != 1 || s.Now() != 100 || s.Pending() != 1 || s.Events() != 1 {
		t.Errorf("second Run = %v (first %v), %d fired, now %v, %d pending, %d events; want the same error, 1, 100ps, 1, 1", second, first, fired, s.Now(), s.Pending(), s.Events())
	}
}

// A Run after one that completed goes on with the events scheduled since:
// the Guard's first turn counts from the new Run (before its
// GuardEvery-th event), and a stall in it with no work, only daemon
// checks, is reported at the last work of the run before.
func TestSecondRunCountsAndStallsFromItsOwnStart(t *testing.T) {
	s := New()
	s.At(7, HandlerFunc(func() {}))
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < GuardEvery; i++ {
		s.At(Time(10+i), HandlerFunc(func() {}))
	}
	var at []uint64
	s.Guard = func() error { at = append(at, s.Events()); return nil }
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1 + GuardEvery - 1}; !cmp.Equal(at, want) {
		t.Errorf("the guard ran after %v events, want %v (its first turn before the run's GuardEvery-th event)", at, want)
	}
	s.Guard = nil

	// A third run: a process parks at once (its start is work, at the
	// last instant's time), then only watchdog checks follow.
	last := s.Now()
	s.Spawn("parked", func(p *Proc) { _ = p.Park() })
	s.WaitWatchdog(1000)
	err := s.Run()
	defer s.Close()
	var se *StallError
	if !errors.As(err, &se) {
		t.Fatalf("Run = %v, want *StallError", err)
	}
	if se.At != last || s.Now() <= last {
		t.Errorf("stalled at %v, now %v; want at %v (the parked process's start), the clock past it (the checks)", se.At, s.Now(), last)
	}
}

// Rule (docs/architecture.md, Invariants and failures, stall): the stall time
// is the last instant with work whichever event of the instant came first: a
// check before the work (both at 25 here), work before a check, or a jittered
// wake-up.
func TestStallIsAtTheLastInstantWithWork(t *testing.T) {
	for _, seed := range []uint64{0, 9} {
		for _, wake := range []Time{25, 30} {
			s := New()
			s.SetJitter(seed)
			s.WaitWatchdog(100) // checks at 25, 50, 75 while anything is pending
			s.Spawn("p", func(p *Proc) {
				_ = p.Park() // woken by an event, not in place
				_ = p.Park() // then for good
			})
			s.Spawn("waker", func(p *Proc) {
				_ = p.Sleep(1)
				s.procs[0].WakeAt(wake)
			})
			err := s.Run()
			var se *StallError
			if !errors.As(err, &se) {
				t.Fatalf("seed %d, wake at %v: Run = %v, want *StallError", seed, wake, err)
			}
			if se.At != wake || s.Now() <= wake {
				t.Errorf("seed %d: stall at %v (now %v), want at %v, the wake-up, with checks after it", seed, se.At, s.Now(), wake)
			}
			s.Close()
		}
	}
}

// SetJitter is refused once an event was scheduled, and once an instant
// ran even with nothing left pending (the order of what was queued would
// be a mix); before that it is allowed, seed 0 included.
func TestSetJitterOnlyBeforeTheFirstEvent(t *testing.T) {
	panics := func(f func()) (p bool) {
		defer func() { p = recover() != nil }()
		f()
		return false
	}
	s := New()
	if panics(func() { s.SetJitter(5); s.SetJitter(0); s.SetJitter(7) }) {
		t.Error("SetJitter panicked on a fresh simulation")
	}
	s.At(3, HandlerFunc(func() {}))
	if !panics(func() { s.SetJitter(1) }) {
		t.Error("SetJitter with an event pending did not panic")
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if s.Pending() != 0 {
		t.Fatalf("%d pending after the run", s.Pending())
	}
	if !panics(func() { s.SetJitter(1) }) {
		t.Error("SetJitter after a run did not panic")
	}
}

// Rule (docs/architecture.md, Invariants and failures, stall): a sleep that
// passes in place, without an event, is work too: a process that sleeps 10
// and then 30 in place and parks for good froze at 40, not at its start (0),
// and the report's time is not before the time its blocked process says it
// began to wait.
func TestStallCountsSleepsPassedInPlace(t *testing.T) {
	for _, watchdog := range []bool{false, true} {
		s := New()
		if watchdog {
			s.WaitWatchdog(1000) // checks after the sleeps: they still pass in place
		}
		var since Time
		s.Spawn("p", func(p *Proc) {
			_ = p.Sleep(10)
			_ = p.Sleep(30)
			since = s.Now()
			_ = p.Park()
		})
		err := s.Run()
		var se *StallError
		if !errors.As(err, &se) {
			t.Fatalf("watchdog %v: Run = %v, want *StallError", watchdog, err)
		}
		if since != 40 || se.At != 40 {
			t.Errorf("watchdog %v: parked at %v, stall reported at %v; want both at 40 (the sleeps passed in place are work)", watchdog, since, se.At)
		}
		s.Close()
	}
}

// sameInstant re-schedules itself at the current time, forever (the shape
// of the L3/L2 timer that re-armed at its own instant under jitter).
type sameInstant struct{ s *Sim }

func (h *sameInstant) Fire() { h.s.At(h.s.Now(), h) }

// Rule (docs/architecture.md, engine/sim, Stops: the bound on events at
// one instant, which the simulated-time watchdog max_sim_time_ns cannot
// see, as time stands still): a cascade of events at one instant past the
// limit stops the run with a *StuckInstantError at that instant; as many
// events at one instant as the limit, and any number of events spread
// over instants, run to the end; 0 is no limit.
func TestInstantLimitEndsACascadeAtOneInstant(t *testing.T) {
	s := New()
	s.InstantLimit = 1000
	s.At(7, HandlerFunc(func() {}))
	s.At(9, &sameInstant{s})
	err := s.Run()
	var stuck *StuckInstantError
	if !errors.As(err, &stuck) {
		t.Fatalf("Run: %v, want a *StuckInstantError", err)
	}
	if stuck.At != 9 || stuck.Events <= 1000 || stuck.Events > 1000+GuardEvery {
		t.Errorf("stuck at %v after %d events, want 9 and just past 1000", stuck.At, stuck.Events)
	}

	// As many as the limit at one instant, and many more spread over
	// instants, are a run like any other.
	s = New()
	s.InstantLimit = 1000
	for i := 0; i < 1000; i++ {
		s.At(5, HandlerFunc(func() {}))
	}
	n := 0
	var tick HandlerFunc
	tick = func() {
		if n++; n < 10000 {
			s.After(1, tick)
		}
	}
	s.At(6, tick)
	if err := s.Run(); err != nil {
		t.Errorf("Run: %v, want none", err)
	}
	if got := s.Events(); got != 11000 {
		t.Errorf("%d events, want 11000", got)
	}

	// No limit.
	s = New()
	h := 0
	var again HandlerFunc
	again = func() {
		if h++; h < 5000 {
			s.At(s.Now(), again)
		}
	}
	s.At(1, again)
	if err := s.Run(); err != nil || h != 5000 {
		t.Errorf("Run without a limit: %v after %d events, want none after 5000", err, h)
	}
}
