package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type logger struct {
	s   *Sim
	log *[]string
	tag string
}

func (l logger) Fire() { *l.log = append(*l.log, fmt.Sprintf("%v %s", l.s.Now(), l.tag)) }

// Rule (docs/architecture.md, engine/sim): events fire in (time, scheduling
// sequence) order.
func TestEventsOrderedByTimeThenSequence(t *testing.T) {
	s := New()
	var log []string
	s.At(20, logger{s, &log, "c"})
	s.At(10, logger{s, &log, "a"})
	s.At(20, logger{s, &log, "d"})
	s.At(10, logger{s, &log, "b"})
	s.At(5, HandlerFunc(func() { s.At(10, logger{s, &log, "e (scheduled at 5)"}) }))
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	want := []string{"0.01ns a", "0.01ns b", "0.01ns e (scheduled at 5)", "0.02ns c", "0.02ns d"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("firing order (-want +got):\n%s", diff)
	}
}

func TestTimeString(t *testing.T) {
	for _, tc := range []struct {
		t    Time
		want string
	}{{0, "0ns"}, {1, "0.001ns"}, {1500, "1.5ns"}, {2 * Microsecond, "2000ns"}, {123456, "123.456ns"}} {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("Time(%d).String() = %q, want %q", int64(tc.t), got, tc.want)
		}
	}
}

// Rule (docs/architecture.md, engine/sim, --jitter-seed): the order in which
// processes resume at one instant is a reproducible permutation per seed;
// hardware events of the instant keep FIFO order and run first; seed 0 is
// FIFO for everything.
func TestJitterIsReproducible(t *testing.T) {
	run := func(seed uint64) []string {
		s := New()
		s.SetJitter(seed)
		var log []string
		for i := 0; i < 8; i++ {
			s.Spawn(fmt.Sprint("p", i), func(p *Proc) { log = append(log, fmt.Sprintf("%v %s", s.Now(), p.Name)) })
		}
		for i := 0; i < 3; i++ {
			s.At(0, logger{s, &log, fmt.Sprint("hw", i)})
		}
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		return log
	}
	if diff := cmp.Diff(run(42), run(42)); diff != "" {
		t.Errorf("same seed, different order (-first +second):\n%s", diff)
	}
	fifo := run(0)
	want := []string{"0ns p0", "0ns p1", "0ns p2", "0ns p3", "0ns p4", "0ns p5", "0ns p6", "0ns p7", "0ns hw0", "0ns hw1", "0ns hw2"}
	if diff := cmp.Diff(want, fifo); diff != "" {
		t.Errorf("seed 0 is not FIFO (-want +got):\n%s", diff)
	}
	differs := false
	for seed := uint64(1); seed < 10; seed++ {
		got := run(seed)
		if diff := cmp.Diff([]string{"0ns hw0", "0ns hw1", "0ns hw2"}, got[:3]); diff != "" {
			t.Errorf("seed %d: hardware events not first and in order (-want +got):\n%s", seed, diff)
		}
		differs = differs || !cmp.Equal(got[3:], want[:8])
	}
	if !differs {
		t.Error("no jitter seed in 1..9 changed the order of 8 same-time processes")
	}
}

// rearmer is a Late handler that, as engine/l3l2's timer does, re-arms
// at the next pending time whenever it fires, until stop says so; it
// logs its fires and gives up (stopping the run) after limit of them.
type rearmer struct {
	s     *Sim
	log   *[]string
	fires int
	limit int
	stop  *bool
}

func (r *rearmer) Late() {}

func (r *rearmer) Fire() {
	*r.log = append(*r.log, fmt.Sprintf("%v timer", r.s.Now()))
	if r.fires++; r.fires >= r.limit {
		r.s.Stop(errors.New("the timer re-armed at its own instant without end"))
		return
	}
	if !*r.stop {
		r.s.At(r.s.NextEventTime(), r)
	}
}

// Rule (docs/architecture.md, engine/sim, --jitter-seed and sim.Late):
// under jitter a Late handler fires after every process
// wake-up of its instant, those scheduled after it included, so that a
// handler re-arming at the next pending time lets the instant end; without
// jitter it fires in scheduling order.
func TestLateFiresAfterTheInstantsWakeUps(t *testing.T) {
	run := func(seed uint64) ([]string, error) {
		s := New()
		s.SetJitter(seed)
		var log []string
		stop := false
		s.At(5, &rearmer{s: s, log: &log, limit: 100, stop: &stop})
		for i := 0; i < 3; i++ {
			s.Spawn(fmt.Sprint("p", i), func(p *Proc) {
				if err := p.Sleep(5); err != nil {
					return
				}
				log = append(log, fmt.Sprintf("%v %s", s.Now(), p.Name))
				if p.Name == "p2" {
					stop = true
				}
			})
		}
		err := s.Run()
		s.Close()
		return log, err
	}
	for seed := uint64(1); seed < 4; seed++ {
		log, err := run(seed)
		if err != nil {
			t.Fatalf("seed %d: %v (log %v)", seed, err, log)
		}
		if len(log) != 4 || log[3] != "0.005ns timer" {
			t.Errorf("seed %d: %v, want the three wake-ups at 0.005ns, then the timer once", seed, log)
		}
	}
	log, err := run(0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0.005ns timer", "0.005ns p0", "0.005ns p1", "0.005ns p2", "0.005ns timer"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("without jitter (-want +got):\n%s", diff)
	}
}

// Sleep's in-place clock advance gives the same times as a real switch.
func TestSleepFastPathMatchesEventPath(t *testing.T) {
	trace := func(withNeighbour bool) []Time {
		s := New()
		var times []Time
		s.Spawn("sleeper", func(p *Proc) {
			for i := 0; i < 5; i++ {
				if err := p.Sleep(Time(3 + i)); err != nil {
					return
				}
				times = append(times, s.Now())
			}
		})
		if withNeighbour {
			// A process that keeps events pending forces real switches.
			s.Spawn("ticker", func(p *Proc) {
				for i := 0; i < 40; i++ {
					_ = p.Sleep(1)
				}
			})
		}
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		return times
	}
	if diff := cmp.Diff(trace(true), trace(false)); diff != "" {
		t.Errorf("sleep times differ with and without other events (-switched +in-place):\n%s", diff)
	}
}

func TestParkWake(t *testing.T) {
	s := New()
	var waiter *Proc
	var woke Time
	waiter = s.Spawn("waiter", func(p *Proc) {
		if err := p.Park(); err != nil {
			t.Error(err)
		}
		woke = s.Now()
	})
	s.At(50, HandlerFunc(func() { waiter.Wake() }))
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if woke != 50 {
		t.Errorf("woke at %v, want 50ps", woke)
	}
}

// Rule (docs/architecture.md, Invariants and failures, stall): queue empty
// while processes wait → StallError listing them; blocked calls return
// ErrKilled only after Close.
func TestStallIsReportedWithBlockedProcesses(t *testing.T) {
	s := New()
	var parkErr error
	s.Spawn("a", func(p *Proc) {
		p.Wait, p.WaitSince = "recv W", s.Now()
		parkErr = p.Park()
	})
	s.Spawn("b", func(p *Proc) { _ = p.Sleep(5) })
	err := s.Run()
	var stall *StallError
	if !errors.As(err, &stall) {
		t.Fatalf("Run = %v, want *StallError", err)
	}
	if len(stall.Blocked) != 1 || stall.Blocked[0].Name != "a" || stall.Blocked[0].Wait != "recv W" {
		t.Errorf("blocked = %v, want [a waiting in recv W]", stall.Blocked)
	}
	if parkErr != nil {
		t.Errorf("blocked process already unwound before Close: %v", parkErr)
	}
	s.Close()
	if !errors.Is(parkErr, ErrKilled) {
		t.Errorf("after Close, Park returned %v, want ErrKilled", parkErr)
	}
}

// Rule (docs/architecture.md, Invariants and failures, watchdog):
// max_sim_time_ns stops a run that never ends.
func TestWatchdogStopsRunawaySimulation(t *testing.T) {
	s := New()
	s.MaxTime = 1000
	s.Spawn("spin", func(p *Proc) {
		for {
			if p.Sleep(7) != nil {
				return
			}
		}
	})
	err := s.Run()
	defer s.Close()
	var wd *WatchdogError
	if !errors.As(err, &wd) {
		t.Fatalf("Run = %v, want *WatchdogError", err)
	}
	if s.Now() > 1000 {
		t.Errorf("clock passed the limit: %v", s.Now())
	}
}

// Rule (docs/architecture.md, Invariants and failures, wait timeout): one
// untimed wait longer than the deadlock timeout stops the run even while
// other processes keep events flowing (poll).
func TestWaitWatchdogCatchesLongWait(t *testing.T) {
	s := New()
	s.Spawn("stuck", func(p *Proc) {
		p.Wait, p.WaitSince = "send E", s.Now()
		for {
			if p.Sleep(10) != nil { // polling: never parked, still waiting
				return
			}
		}
	})
	s.WaitWatchdog(1000)
	err := s.Run()
	defer s.Close()
	var wt *WaitTimeoutError
	if !errors.As(err, &wt) {
		t.Fatalf("Run = %v, want *WaitTimeoutError", err)
	}
	if wt.Proc.Name != "stuck" {
		t.Errorf("watchdog named %s, want stuck", wt.Proc.Name)
	}
	if s.Now() > 1500 {
		t.Errorf("caught at %v, want within limit + limit/4 + poll", s.Now())
	}
}

// The wait watchdog never keeps a finished simulation alive.
func TestWaitWatchdogDoesNotExtendRun(t *testing.T) {
	s := New()
	s.Spawn("short", func(p *Proc) { _ = p.Sleep(10) })
	s.WaitWatchdog(1000)
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if s.Now() > 250 {
		t.Errorf("run ended at %v, want right after the last real event (one watchdog period at most)", s.Now())
	}
}

// Issue 13 (1): simulated time never wraps. Sleeps whose sum passes int64
// saturate and stop the run at the horizon (no MaxTime) or at MaxTime,
// instead of going backwards or panicking.
func TestTimeNeverWraps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxTime Time
		want    Time
		horizon bool
	}{
		{"no watchdog", 0, Horizon, true},
		{"watchdog", 5 * Second, 5 * Second, false},
		{"watchdog beyond the horizon", Never, Horizon, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			s.MaxTime = tc.maxTime
			s.Spawn("long", func(p *Proc) {
				for p.Sleep(Never/3) == nil {
				}
			})
			s.Spawn("other", func(p *Proc) { // keeps the event path busy too
				for p.Sleep(Second) == nil {
				}
			})
			err := s.Run()
			defer s.Close()
			var wd *WatchdogError
			if !errors.As(err, &wd) {
				t.Fatalf("Run = %v, want *WatchdogError", err)
			}
			got := struct {
				Limit, Now Time
				Horizon    bool
			}{wd.Limit, s.Now(), wd.Horizon}
			want := struct {
				Limit, Now Time
				Horizon    bool
			}{tc.want, tc.want, tc.horizon}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("watchdog (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddMulSaturate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want Time
	}{
		{"add", Add(3, 4), 7},
		{"add at the edge", Add(Never-1, 1), Never},
		{"add past the edge", Add(Never-1, 2), Never},
		{"add Never", Add(Horizon, Never), Never},
		{"add Never to Never", Add(Never, Never), Never},
		{"add to Never", Add(Never, 0), Never},
		{"add the largest sum that fits", Add(Never-Horizon, Horizon), Never},
		{"add zeros", Add(0, 0), 0},
		{"mul", Mul(3, 4), 12},
		{"mul by 0", Mul(Never, 0), 0},
		{"mul past the edge", Mul(Horizon, 2), Never},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// A process's Spent splits its whole life by the activity set while it was
// suspended: sleeps (also those that advance the clock without a switch)
// and parks, and sums to the time it ran for.
func TestSpentSplitsAProcessLife(t *testing.T) {
	s := New()
	var waiter *Proc
	var end Time
	waiter = s.Spawn("waiter", func(p *Proc) {
		p.Doing(1)
		_ = p.Sleep(100) // nothing else pending: the clock moves in place
		prev := p.Doing(2)
		_ = p.Park() // woken at 250 by the event below
		p.Doing(prev)
		_ = p.Sleep(30)
		end = s.Now()
	})
	s.At(250, HandlerFunc(func() { waiter.Wake() }))
	s.At(400, HandlerFunc(func() {}))
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	want := [MaxActivities]Time{1: 100 + 30, 2: 150}
	if diff := cmp.Diff(want, waiter.Spent); diff != "" {
		t.Errorf("Spent (-want +got):\n%s", diff)
	}
	var sum Time
	for _, d := range waiter.Spent {
		sum += d
	}
	if sum != end {
		t.Errorf("Spent sums to %v, the process ran until %v", sum, end)
	}
}

// A Guard is asked every GuardEvery events; its error stops the run
// there, and a guard that never objects changes nothing.
func TestGuardStopsOnlyWhenItObjects(t *testing.T) {
	run := func(guard func(s *Sim) func() error) (fired uint64, calls int, err error) {
		s := New()
		for i := 0; i < 10*GuardEvery; i++ {
			s.At(Time(i), HandlerFunc(func() {}))
		}
		if guard != nil {
			g := guard(s)
			s.Guard = func() error { calls++; return g() }
		}
		err = s.Run()
		return s.Events(), calls, err
	}
	stop := errors.New("over the limit")
	fired, calls, err := run(func(s *Sim) func() error {
		return func() error {
			if s.Events() >= 3*GuardEvery {
				return stop
			}
			return nil
		}
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Run = %v, want the guard's error", err)
	}
	// The guard objects at its fourth call (after 3×GuardEvery-1 events).
	if diff := cmp.Diff([]any{uint64(4*GuardEvery - 1), 4}, []any{fired, calls}); diff != "" {
		t.Errorf("events fired, guard calls (-want +got):\n%s", diff)
	}
	quiet, _, err := run(func(*Sim) func() error { return func() error { return nil } })
	none, _, err2 := run(nil)
	if err != nil || err2 != nil || quiet != none || none != 10*GuardEvery {
		t.Errorf("a guard that never objects: %d events (err %v), without a guard %d (err %v), want %d", quiet, err, none, err2, 10*GuardEvery)
	}
}

// Rule (docs/architecture.md, engine/sim), for events scheduled for the
// current instant (they join the instant's bucket while it drains): they fire
// after every event of that instant scheduled earlier, in scheduling order,
// and before later instants; the order is the one (time, sequence) gives.
func TestEventsForTheCurrentInstantKeepSequenceOrder(t *testing.T) {
	s := New()
	var log []string
	now := func(tag string, then ...Handler) Handler {
		return HandlerFunc(func() {
			log = append(log, fmt.Sprintf("%v %s", s.Now(), tag))
			for _, h := range then {
				s.At(s.Now(), h)
			}
		})
	}
	s.At(10, now("a", now("a1", now("a1x")), now("a2")))
	s.At(10, now("b", now("b1")))
	s.At(11, now("c"))
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	want := []string{"0.01ns a", "0.01ns b", "0.01ns a1", "0.01ns a2", "0.01ns b1", "0.01ns a1x", "0.011ns c"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("firing order (-want +got):\n%s", diff)
	}
}

// Rule (docs/architecture.md, engine/sim), against a reference: the time
// buckets fire a random cascade of events (several per time, some for the
// current instant, some for times already pending, processes sleeping in
// place) in exactly the order a plain (time, sequence) priority queue gives.
func TestBucketsMatchTimeSequenceOrder(t *testing.T) {
	// Few distinct delays: many events share a time.
	matchesListQueue(t, 200, func(seed uint64, q eventQueue) []string {
		return cascade(seed, q, 5, 6,
			func(rng *rand.Rand) Time { return Time(rng.IntN(3)) },
			func(rng *rand.Rand, now Time) Time { return now + Time(rng.IntN(4)) })
	})
}

// matchesListQueue runs the cascade run makes for seeds 1 to 20 on a Sim
// and on the reference listQueue and fails at the first difference in
// firing order (or a cascade of fewer than minEvents events: too small to
// tell).
func matchesListQueue(t *testing.T, minEvents int, run func(seed uint64, q eventQueue) []string) {
	t.Helper()
	for seed := uint64(1); seed <= 20; seed++ {
		got := run(seed, New())
		if len(got) < minEvents {
			t.Fatalf("seed %d: only %d events fired", seed, len(got))
		}
		want := run(seed, &listQueue{})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d: firing order (-reference +buckets):\n%s", seed, diff)
		}
	}
}

// eventQueue is what cascade needs of a simulation.
type eventQueue interface {
	At(Time, Handler)
	Now() Time
	Run() error
}

// cascade runs a seeded random cascade on q and logs "time id" per event:
// the same random choices on any queue, so two queues' logs agree exactly
// when they fire the events in the same order. roots events of the given
// depth start at start(rng); each event schedules one to three children at
// next(rng, now).
func cascade(seed uint64, q eventQueue, roots, depth int, start func(rng *rand.Rand) Time, next func(rng *rand.Rand, now Time) Time) []string {
	var log []string
	rng := rand.New(rand.NewPCG(seed, 7))
	id := 0
	var spawn func(depth int) Handler
	spawn = func(depth int) Handler {
		me := id
		id++
		return HandlerFunc(func() {
			log = append(log, fmt.Sprintf("%v #%d", q.Now(), me))
			if depth == 0 {
				return
			}
			for k := rng.IntN(3); k >= 0; k-- {
				q.At(next(rng, q.Now()), spawn(depth-1))
			}
		})
	}
	for i := 0; i < roots; i++ {
		q.At(start(rng), spawn(depth))
	}
	if err := q.Run(); err != nil {
		panic(err)
	}
	return log
}

// listQueue is the definition the queue must follow: a list fired in
// (time, sequence) order, the least first.
type listQueue struct {
	now   Time
	seq   int
	queue []listEvent
}

type listEvent struct {
	at  Time
	seq int
	h   Handler
}

func (q *listQueue) At(t Time, h Handler) {
	q.seq++
	q.queue = append(q.queue, listEvent{t, q.seq, h})
}

func (q *listQueue) Now() Time { return q.now }

func (q *listQueue) Run() error {
	for len(q.queue) > 0 {
		best := 0
		for i, e := range q.queue {
			if e.at < q.queue[best].at || e.at == q.queue[best].at && e.seq < q.queue[best].seq {
				best = i
			}
		}
		e := q.queue[best]
		q.queue = append(q.queue[:best], q.queue[best+1:]...)
		q.now = e.at
		e.h.Fire()
	}
	return nil
}

// Rule (docs/architecture.md, engine/sim), for the bucket index (Sim.recent
// and its overflow): events at times that share an entry of recent, and at
// times whose buckets were recycled for later times, still fire in exactly
// (time, sequence) order. Every time here maps to the same entry, so all but
// one pending time's bucket live in the overflow table, and a lookup may find
// a recycled bucket's entry.
func TestCollidingTimesKeepTimeSequenceOrder(t *testing.T) {
	var times []Time // ascending, all in recent entry 0
	for at := Time(0); len(times) < 40; at++ {
		if recentSlot(at) == 0 {
			times = append(times, at)
		}
	}
	matchesListQueue(t, 100, func(seed uint64, q eventQueue) []string {
		return cascade(seed, q, 4, 7,
			func(rng *rand.Rand) Time { return times[rng.IntN(3)] },
			func(rng *rand.Rand, now Time) Time {
				// The times from now on (now itself included).
				first := 0
				for times[first] < now {
					first++
				}
				return times[first+rng.IntN(min(4, len(times)-first))]
			})
	})
}

// Rule (docs/architecture.md, engine/sim), for the radix heap (Sim.times):
// delays that differ only in high bits, that share low ones, and times far in
// the future fire in exactly (time, sequence) order. Times sharing a radix
// bin fall apart when the earliest of them is taken; far times keep their
// bins while the earlier ones drain.
func TestHighBitTimesKeepTimeSequenceOrder(t *testing.T) {
	delays := []Time{0, 1, 63, 64, 65, 4095, 4096, 1 << 20, 1<<20 + 1, 3 << 30, 1 << 40, 1<<40 + 64, Horizon / 16}
	matchesListQueue(t, 200, func(seed uint64, q eventQueue) []string {
		return cascade(seed, q, 6, 6,
			func(rng *rand.Rand) Time { return delays[rng.IntN(len(delays))] },
			func(rng *rand.Rand, now Time) Time { return now + delays[rng.IntN(len(delays))] })
	})
}

// Rule (docs/architecture.md, engine/sim; the watchdog): events at and beyond
// the Horizon (times that saturated at Never among them) never fire, the run
// stops at the limit with the earliest of them as Next, and they stay
// pending: an event then scheduled at the limit comes first.
func TestEventsPastTheHorizonStayPending(t *testing.T) {
	s := New()
	var fired []Time
	log := HandlerFunc(func() { fired = append(fired, s.Now()) })
	for _, at := range []Time{Never, Horizon + 1, 5, Add(Horizon, Never), Horizon, 1 << 61, Never - 1} {
		s.At(at, log)
	}
	var wd *WatchdogError
	if err := s.Run(); !errors.As(err, &wd) {
		t.Fatalf("Run = %v, want *WatchdogError", err)
	}
	if want := []Time{5, 1 << 61, Horizon}; !slices.Equal(fired, want) {
		t.Errorf("fired at %v, want %v", fired, want)
	}
	if wd.Next != Horizon+1 || s.Now() != Horizon {
		t.Errorf("stopped at %v before %v, want at %v before %v", s.Now(), wd.Next, Horizon, Horizon+1)
	}
	if s.Pending() != 4 || s.NextEventTime() != Horizon+1 {
		t.Errorf("%d pending, the next at %v; want 4, the next at %v", s.Pending(), s.NextEventTime(), Horizon+1)
	}
	s.At(s.Now(), log)
	if s.NextEventTime() != Horizon {
		t.Errorf("after scheduling at now, the next event is at %v, want %v", s.NextEventTime(), Horizon)
	}
}

// A stop takes effect before the next event: the events after the one
// that stopped the run stay pending, and a run stopped before it starts
// fires nothing.
func TestStopEndsTheRunBeforeTheNextEvent(t *testing.T) {
	s := New()
	var log []string
	stop := errors.New("stop")
	s.At(1, logger{s, &log, "a"})
	s.At(2, HandlerFunc(func() { log = append(log, "stop"); s.Stop(stop) }))
	s.At(2, logger{s, &log, "b"})
	s.At(3, logger{s, &log, "c"})
	if err := s.Run(); !errors.Is(err, stop) {
		t.Fatalf("Run = %v, want the stop error", err)
	}
	if want := []string{"0.001ns a", "stop"}; !slices.Equal(log, want) {
		t.Errorf("fired %q, want %q", log, want)
	}
	if s.Events() != 2 || s.Pending() != 2 {
		t.Errorf("%d events fired, %d pending; want 2 and 2", s.Events(), s.Pending())
	}

	s = New()
	log = nil
	s.At(0, logger{s, &log, "a"})
	s.Stop(stop)
	if err := s.Run(); !errors.Is(err, stop) || len(log) != 0 || s.Pending() != 1 {
		t.Errorf("stopped before the run: Run = %v, fired %q, %d pending; want the stop error, nothing fired, 1 pending", err, log, s.Pending())
	}
}

// Rule (docs/architecture.md, Invariants and failures, stall): a stall is
// reported at the time of the last simulated work, not at a later watchdog
// check, and watchdog checks (daemon events) are not counted as events.
func TestStallIsAtTheLastWorkNotAtAWatchdogCheck(t *testing.T) {
	s := New()
	s.WaitWatchdog(100) // checks at 25, 50 (then nothing is pending)
	s.Spawn("p", func(p *Proc) {
		_ = p.Sleep(30) // an event: the check at 25 comes first
		_ = p.Park()    // Wait unset: the watchdog does not time it out
	})
	err := s.Run()
	var se *StallError
	if !errors.As(err, &se) {
		t.Fatalf("Run = %v, want *StallError", err)
	}
	if se.At != 30 || s.Now() != 50 || s.Events() != 2 || s.Pending() != 0 {
		t.Errorf("stall at %v, now %v, %d events, %d pending; want at 30ps, now 50ps, 2 events (start, wake-up), 0 pending", se.At, s.Now(), s.Events(), s.Pending())
	}
	s.Close()
}

// Rule (Sim.Stop: the run ends at the next loop iteration): a Guard that
// stops the run itself, instead of returning the error, stops it before
// the next event as a returned error does.
func TestStopFromTheGuardEndsTheRunAtOnce(t *testing.T) {
	s := New()
	for i := 0; i < 4*GuardEvery; i++ {
		s.At(Time(i), HandlerFunc(func() {}))
	}
	stop := errors.New("stopped by the guard")
	calls := 0
	s.Guard = func() error {
		calls++
		s.Stop(stop)
		return nil
	}
	if err := s.Run(); !errors.Is(err, stop) {
		t.Fatalf("Run = %v, want the guard's stop", err)
	}
	if s.Events() != GuardEvery-1 || calls != 1 || s.Pending() != 3*GuardEvery+1 {
		t.Errorf("%d events, %d guard calls, %d pending; want %d, 1 and %d", s.Events(), calls, s.Pending(), GuardEvery-1, 3*GuardEvery+1)
	}
}
