package sim

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A partitioned run fires the same events in the same order whatever the
// number of threads K (the partitions are the machine's, K only decides
// which goroutine runs them), and the order within an instant is the one
// partition.go states: within a partition, scheduling order, where a
// message is scheduled at the barrier after the window it was sent in,
// and messages of a barrier in (sending partition, order of sending).

// firing is one event of a synthetic workload: where, when, what.
type firing struct {
	At   Time
	Part int
	What string
}

// synth is a synthetic multi-partition workload: chains of hardware-like
// events that reschedule themselves (at the same instant, later, or in
// another partition as a message, often exactly the lookahead later so
// that several arrive at one instant), processes that sleep (in place
// when they can) and park until a chain wakes them.
type synth struct {
	g      *Partitioned // nil: one plain Sim (sims[0])
	sims   []*Sim
	logs   [][]firing
	parked [][]*Proc // per partition, processes waiting for a chain
	look   Time
}

// chain is a handler that moves from partition to partition: only the
// partition it is in touches it.
type chain struct {
	w    *synth
	part int
	name string
	rng  uint64
	left int
	hops int
}

func (c *chain) rand() uint64 {
	c.rng = c.rng*6364136223846793005 + 1442695040888963407
	return c.rng >> 33
}

func (c *chain) Fire() {
	w, s := c.w, c.w.sims[c.part]
	now := s.Now()
	w.logs[c.part] = append(w.logs[c.part], firing{now, c.part, fmt.Sprintf("%s#%d", c.name, c.left)})
	if c.left == 0 {
		return
	}
	c.left--
	switch r := c.rand(); r % 5 {
	case 0:
		s.At(now, c) // the same instant, after what is scheduled there
	case 1:
		s.At(now+Time(r%40), c)
	case 2, 3:
		// A message, mostly exactly the lookahead later.
		delay := w.look + []Time{0, 0, 0, 1, 13}[r/5%5]
		if w.g == nil || len(w.sims) == 1 {
			s.At(now+delay, c)
			return
		}
		dst := (c.part + 1 + int(r/25)%(len(w.sims)-1)) % len(w.sims)
		from := w.g.Partition(c.part)
		c.part = dst
		c.hops++
		from.Send(dst, now+delay, c)
	case 4:
		// Wake the partition's parked processes, then go on.
		for _, p := range w.parked[c.part] {
			p.Wake()
		}
		w.parked[c.part] = w.parked[c.part][:0]
		s.At(now+Time(r%7), c)
	}
}

// newSynth builds the workload on parts partitions with the given
// lookahead (parts 0: on one plain Sim, which a one-partition run must
// equal).
func newSynth(t *testing.T, parts int, look Time, seed uint64) *synth {
	return newJitteredSynth(t, parts, look, seed, 0)
}

// newJitteredSynth is newSynth with jitter (a partitioned run only).
func newJitteredSynth(t *testing.T, parts int, look Time, seed, jitter uint64) *synth {
	w := &synth{look: look}
	n := max(parts, 1)
	if parts > 0 {
		g, err := NewPartitioned(parts, look)
		if err != nil {
			t.Fatal(err)
		}
		g.SetJitter(jitter)
		w.g = g
		for _, p := range g.Partitions() {
			w.sims = append(w.sims, p.Sim)
		}
	} else {
		w.sims = []*Sim{New()}
	}
	w.logs = make([][]firing, n)
	w.parked = make([][]*Proc, n)
	for part := range n {
		for i := range 3 {
			c := &chain{w: w, part: part, name: fmt.Sprintf("c%d.%d", part, i), rng: seed + uint64(part*7+i), left: 60}
			w.sims[part].At(Time(i)*look/2, c)
		}
		for i := range 2 {
			name := fmt.Sprintf("p%d.%d", part, i)
			body := func(p *Proc) {
				rng := seed ^ uint64(part*31+i)
				for k := range 25 {
					rng = rng*6364136223846793005 + 1442695040888963407
					s := p.Sim()
					if rng>>60 == 0 {
						w.parked[part] = append(w.parked[part], p)
						p.Wait, p.WaitSince = "a chain", s.Now()
						if p.Park() != nil {
							return
						}
						p.Wait = nil
					} else if p.Sleep(Time(rng>>33)%(2*look)) != nil {
						return
					}
					w.logs[part] = append(w.logs[part], firing{s.Now(), part, fmt.Sprintf("%s@%d", name, k)})
				}
			}
			if w.g != nil {
				w.g.Spawn(part, name, body)
			} else {
				w.sims[0].Spawn(name, body)
			}
		}
	}
	return w
}

// outcome is what a run shows: every firing in merged order, each
// partition's own, the error and the counts.
type outcome struct {
	Merged   []firing
	Parts    [][]firing
	Err      string
	Blocked  []string
	Events   uint64
	Windows  uint64
	Messages uint64
	Now      Time
}

func (w *synth) run(t *testing.T, threads int) outcome {
	t.Helper()
	var err error
	var o outcome
	if w.g != nil {
		if e := w.g.SetThreads(threads); e != nil {
			t.Fatal(e)
		}
		err = w.g.Run()
		defer w.g.Close()
		o.Events, o.Windows, o.Messages, o.Now = w.g.Events(), w.g.Windows(), w.g.Messages(), w.g.Now()
	} else {
		err = w.sims[0].Run()
		defer w.sims[0].Close()
		o.Events, o.Now = w.sims[0].Events(), w.sims[0].Now()
	}
	if err != nil {
		o.Err = err.Error()
		var stall *StallError
		if errors.As(err, &stall) {
			for _, p := range stall.Blocked {
				o.Blocked = append(o.Blocked, p.String())
			}
		}
	}
	o.Parts = w.logs
	o.Merged = MergeByTime(w.logs, func(f firing) Time { return f.At })
	return o
}

// Rule (partition.go, Model): the run is the same for every K.
func TestPartitionedRunIsTheSameForEveryK(t *testing.T) {
	for _, c := range []struct {
		parts int
		look  Time
		seed  uint64
	}{
		{1, 100, 1}, {2, 100, 2}, {3, 50, 3}, {4, 100, 4}, {5, 7, 5}, {8, 500, 6}, {4, 1, 7},
	} {
		t.Run(fmt.Sprintf("parts=%d/look=%d/seed=%d", c.parts, c.look, c.seed), func(t *testing.T) {
			want := newSynth(t, c.parts, c.look, c.seed).run(t, 1)
			if want.Events < 100 || len(want.Merged) < 100 || c.parts > 1 && (want.Messages < 50 || want.Windows < 10) {
				t.Fatalf("the workload fired %d events, %d messages in %d windows: too few to mean anything", want.Events, want.Messages, want.Windows)
			}
			t.Logf("%d events, %d messages, %d windows", want.Events, want.Messages, want.Windows)
			for _, k := range []int{1, 2, 3, 4, 8} {
				for run := range 2 {
					got := newSynth(t, c.parts, c.look, c.seed).run(t, k)
					if d := cmp.Diff(want, got); d != "" {
						t.Errorf("K=%d, run %d differs from K=1 (-K=1 +K=%d):\n%s", k, run, k, d)
					}
				}
			}
		})
	}
}

// A run of one partition is the plain Sim's, event for event.
func TestOnePartitionIsThePlainSim(t *testing.T) {
	for seed := range uint64(4) {
		want := newSynth(t, 0, 100, seed).run(t, 1)
		got := newSynth(t, 1, 100, seed).run(t, 1)
		got.Windows = 0
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("seed %d: one partition differs from the plain Sim (-plain +partitioned):\n%s", seed, d)
		}
	}
}

// rec is a handler that logs its name in its partition.
type rec struct {
	w    *synth
	part int
	name string
	then func()
}

func (r *rec) Fire() {
	s := r.w.sims[r.part]
	r.w.logs[r.part] = append(r.w.logs[r.part], firing{s.Now(), r.part, r.name})
	if r.then != nil {
		r.then()
	}
}

// Rule (partition.go, Model): the order within an instant, case by case.
func TestPartitionedSameInstantOrder(t *testing.T) {
	const L = 10
	type step struct {
		part int
		at   Time
		name string
		// send, when set, sends a message named send to partition dst at
		// time sendAt instead of a local event.
		dst    int
		sendAt Time
		send   string
	}
	cases := []struct {
		name  string
		parts int
		steps []step // scheduled before the run, in this order
		want  []string
	}{
		{
			name:  "a local event scheduled before the barrier fires before a message of its instant",
			parts: 2,
			steps: []step{
				{part: 0, at: 0, name: "send", dst: 1, sendAt: 10, send: "msg"},
				{part: 1, at: 5, name: "local", dst: 1, sendAt: 10, send: ""},
			},
			want: []string{"0@0 send", "1@5 local", "1@10 local-later", "1@10 msg"},
		},
		{
			name:  "messages of one instant fire in sending partition order, then sending order",
			parts: 4,
			steps: []step{
				{part: 3, at: 0, name: "s3", dst: 0, sendAt: 10, send: "from3"},
				{part: 1, at: 0, name: "s1a", dst: 0, sendAt: 10, send: "from1a"},
				{part: 2, at: 0, name: "s2", dst: 0, sendAt: 10, send: "from2"},
				{part: 1, at: 0, name: "s1b", dst: 0, sendAt: 10, send: "from1b"},
			},
			want: []string{"1@0 s1a", "1@0 s1b", "2@0 s2", "3@0 s3", "0@10 from1a", "0@10 from1b", "0@10 from2", "0@10 from3"},
		},
		{
			name:  "a message sent in a later window fires after one of an earlier window, same instant",
			parts: 3,
			steps: []step{
				{part: 2, at: 25, name: "late", dst: 0, sendAt: 35, send: "from-late"},
				{part: 1, at: 0, name: "early", dst: 0, sendAt: 35, send: "from-early"},
			},
			want: []string{"1@0 early", "2@25 late", "0@35 from-early", "0@35 from-late"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want []string
			for _, k := range []int{1, 2, 4} {
				w := newEmpty(t, c.parts, L)
				for _, st := range c.steps {
					st := st
					r := &rec{w: w, part: st.part, name: st.name}
					if st.send != "" {
						r.then = func() {
							w.g.Partition(st.part).Send(st.dst, st.sendAt, &rec{w: w, part: st.dst, name: st.send})
						}
					} else {
						// A local event at sendAt, scheduled at st.at.
						r.then = func() {
							w.sims[st.part].At(st.sendAt, &rec{w: w, part: st.part, name: st.name + "-later"})
						}
					}
					w.sims[st.part].At(st.at, r)
				}
				if err := w.g.SetThreads(k); err != nil {
					t.Fatal(err)
				}
				if err := w.g.Run(); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, f := range MergeByTime(w.logs, func(f firing) Time { return f.At }) {
					got = append(got, fmt.Sprintf("%d@%d %s", f.Part, f.At, f.What))
				}
				if k == 1 {
					want = got
					if d := cmp.Diff(c.want, got); d != "" {
						t.Errorf("K=1 (-want +got):\n%s", d)
					}
				} else if d := cmp.Diff(want, got); d != "" {
					t.Errorf("K=%d differs from K=1 (-K=1 +K=%d):\n%s", k, k, d)
				}
			}
		})
	}
}

// newEmpty is a synth with no work, for hand-built cases.
func newEmpty(t *testing.T, parts int, look Time) *synth {
	g, err := NewPartitioned(parts, look)
	if err != nil {
		t.Fatal(err)
	}
	w := &synth{g: g, look: look, logs: make([][]firing, parts), parked: make([][]*Proc, parts)}
	for _, p := range g.Partitions() {
		w.sims = append(w.sims, p.Sim)
	}
	return w
}

// Rule (partition.go, Model): a sleep passes in place only before the
// window's end, where a message may arrive (in place past it, the
// message would be in the partition's past).
func TestPartitionedSleepStopsAtTheWindowEnd(t *testing.T) {
	for _, k := range []int{1, 2} {
		w := newEmpty(t, 2, 10)
		w.g.Spawn(1, "sleeper", func(p *Proc) {
			if p.Sleep(25) == nil {
				w.logs[1] = append(w.logs[1], firing{p.Sim().Now(), 1, "woke"})
			}
		})
		w.sims[0].At(3, &rec{w: w, part: 0, name: "send", then: func() {
			w.g.Partition(0).Send(1, 13, &rec{w: w, part: 1, name: "msg"})
		}})
		if err := w.g.SetThreads(k); err != nil {
			t.Fatal(err)
		}
		if err := w.g.Run(); err != nil {
			t.Fatal(err)
		}
		want := [][]firing{{{3, 0, "send"}}, {{13, 1, "msg"}, {25, 1, "woke"}}}
		if d := cmp.Diff(want, w.logs); d != "" {
			t.Errorf("K=%d (-want +got):\n%s", k, d)
		}
	}
}

// stopper stops its partition's Sim with an error naming it.
type stopper struct {
	s    *Sim
	name string
}

func (st *stopper) Fire() { st.s.Stop(errors.New(st.name)) }

// Rule (partition.go, Stops): the run ends with the earliest stop, ties
// to the lower partition, whichever goroutine got there first.
func TestPartitionedEarliestStopWins(t *testing.T) {
	cases := []struct {
		name  string
		stops []Time // per partition, -1: none
		want  string
	}{
		{"a later partition stops first", []Time{35, 30, -1}, "p1"},
		{"a tie goes to the lower partition", []Time{-1, 30, 30}, "p1"},
		{"stops in different windows", []Time{500, 30, 31}, "p1"},
		{"one stop", []Time{-1, -1, 7}, "p2"},
	}
	for _, c := range cases {
		for _, k := range []int{1, 2, 3} {
			w := newEmpty(t, len(c.stops), 100)
			for part, at := range c.stops {
				if at >= 0 {
					w.sims[part].At(at, &stopper{w.sims[part], fmt.Sprintf("p%d", part)})
				}
				// Work around the stops, so that partitions run on.
				for i := range 20 {
					w.sims[part].At(Time(i*10), &rec{w: w, part: part, name: "tick"})
				}
			}
			if err := w.g.SetThreads(k); err != nil {
				t.Fatal(err)
			}
			err := w.g.Run()
			if err == nil || err.Error() != c.want {
				t.Errorf("%s, K=%d: got %v, want %s", c.name, k, err, c.want)
			}
			w.g.Close()
		}
	}
}

// Rule (partition.go, Stops): a deadlock is no pending event and no
// message anywhere while processes are blocked, listed in the order they
// were spawned across partitions, at the last work of any partition.
func TestPartitionedStall(t *testing.T) {
	for _, k := range []int{1, 2} {
		w := newEmpty(t, 3, 10)
		for _, part := range []int{2, 0, 1} {
			w.g.Spawn(part, fmt.Sprintf("waits-in-%d", part), func(p *Proc) {
				if p.Sleep(Time(part*40)) != nil {
					return
				}
				_ = p.Park()
			})
		}
		if err := w.g.SetThreads(k); err != nil {
			t.Fatal(err)
		}
		err := w.g.Run()
		var stall *StallError
		if !errors.As(err, &stall) {
			t.Fatalf("K=%d: got %v, want a stall", k, err)
		}
		var names []string
		for _, p := range stall.Blocked {
			names = append(names, p.String())
		}
		want := []string{"waits-in-2(#0)", "waits-in-0(#1)", "waits-in-1(#2)"}
		if d := cmp.Diff(want, names); d != "" || stall.At != 80 {
			t.Errorf("K=%d: stall at %v (want 80ns), blocked (-want +got):\n%s", k, stall.At, d)
		}
		w.g.Close()
	}
}

// endless keeps its partition busy for ever.
type endless struct{ s *Sim }

func (e *endless) Fire() { e.s.After(7, e) }

// Rule (partition.go, Stops): the watchdogs are the coordinator's: no
// window passes MaxTime, and a process waiting too long in one partition
// is found while another keeps working.
func TestPartitionedWatchdogs(t *testing.T) {
	for _, k := range []int{1, 2} {
		w := newEmpty(t, 2, 10)
		w.g.MaxTime = 1000
		w.sims[1].At(0, &endless{w.sims[1]})
		if err := w.g.SetThreads(k); err != nil {
			t.Fatal(err)
		}
		err := func() error { defer w.g.Close(); return w.g.Run() }()
		var wd *WatchdogError
		if !errors.As(err, &wd) || wd.Limit != 1000 || wd.Next != 1001 || w.g.Now() != 1000 {
			t.Errorf("K=%d: got %v (next %v, now %v), want the watchdog at 1000 with the next event at 1001", k, err, wd, w.g.Now())
		}

		w = newEmpty(t, 2, 10)
		w.g.Spawn(0, "waiter", func(p *Proc) {
			p.Wait, p.WaitSince = "nothing", p.Sim().Now()
			_ = p.Park()
		})
		w.sims[1].At(0, &endless{w.sims[1]})
		w.g.WaitWatchdog(400)
		if err := w.g.SetThreads(k); err != nil {
			t.Fatal(err)
		}
		err = func() error { defer w.g.Close(); return w.g.Run() }()
		var wt *WaitTimeoutError
		if !errors.As(err, &wt) || wt.Proc.Name != "waiter" || len(wt.Blocked) != 1 || w.g.Now() < 400 {
			t.Errorf("K=%d: got %v, want the waiter's wait timeout", k, err)
		}
	}
}

// The wait watchdog's daemons do not keep a finished run alive.
func TestPartitionedWaitWatchdogEnds(t *testing.T) {
	w := newEmpty(t, 2, 10)
	w.sims[0].At(5000, &rec{w: w, part: 0, name: "last"})
	w.g.WaitWatchdog(400)
	if err := w.g.Run(); err != nil {
		t.Fatal(err)
	}
	if ev := w.g.Events(); ev != 1 {
		t.Errorf("%d events, want 1 (daemons are not work)", ev)
	}
}

// A message within the lookahead is an engine bug, on any K.
func TestPartitionedSendWithinLookaheadPanics(t *testing.T) {
	for _, k := range []int{1, 2} {
		w := newEmpty(t, 2, 10)
		w.sims[0].At(3, &rec{w: w, part: 0, name: "send", then: func() {
			w.g.Partition(0).Send(1, 12, &rec{w: w, part: 1, name: "msg"})
		}})
		if err := w.g.SetThreads(k); err != nil {
			t.Fatal(err)
		}
		got := func() (r any) {
			defer func() { r = recover() }()
			_ = w.g.Run()
			return nil
		}()
		msg := fmt.Sprint(got)
		if pp, ok := got.(*PartitionPanic); ok {
			msg = fmt.Sprint(pp.Value)
		}
		if want := "internal error: partition 0 sent a message for 0.012ns at 0.003ns, within the lookahead 0.01ns"; msg != want {
			t.Errorf("K=%d: panic %q, want %q", k, msg, want)
		}
	}
}

func TestNewPartitionedRefuses(t *testing.T) {
	for _, c := range []struct {
		parts int
		look  Time
		want  string
	}{
		{0, 10, "0 partitions"},
		{2, 0, "lookahead 0ns"},
	} {
		if _, err := NewPartitioned(c.parts, c.look); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewPartitioned(%d, %v): %v, want an error with %q", c.parts, c.look, err, c.want)
		}
	}
	g, _ := NewPartitioned(2, 10)
	if err := g.SetThreads(0); err == nil {
		t.Error("SetThreads(0) accepted")
	}
	if err := g.SetThreads(9); err != nil || g.Threads() != 2 {
		t.Errorf("SetThreads(9) on 2 partitions: %v, %d threads, want 2", err, g.Threads())
	}
}

func TestMergeByTime(t *testing.T) {
	type ev struct {
		at   Time
		name string
	}
	parts := [][]ev{
		{{0, "a0"}, {5, "a5"}, {5, "a5b"}, {9, "a9"}},
		{},
		{{5, "c5"}, {6, "c6"}},
		{{0, "d0"}, {9, "d9"}},
	}
	var got []string
	for _, e := range MergeByTime(parts, func(e ev) Time { return e.at }) {
		got = append(got, e.name)
	}
	want := []string{"a0", "d0", "a5", "a5b", "c5", "c6", "a9", "d9"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// An event that calls NotWork is the engine's bookkeeping: Events leaves
// it out, and a stall's time is that of the last work.
func TestNotWorkIsNotCounted(t *testing.T) {
	s := New()
	s.At(5, HandlerFunc(func() {}))
	s.At(9, HandlerFunc(func() { s.NotWork() }))
	s.Spawn("p", func(p *Proc) {
		_ = p.Sleep(2)
		_ = p.Park()
	})
	err := s.Run()
	var stall *StallError
	if !errors.As(err, &stall) || stall.At != 5 || s.Events() != 2 {
		t.Errorf("got %v, %d events; want a stall at 5ps and 2 events (the start, the one at 5; the sleep passes in place)", err, s.Events())
	}
	s.Close()
}

// Rule (partition.go, audit: host-memory guard): the Guard runs between
// windows once GuardEvery events have passed since its last call, and
// its error ends the run there, at the same event for every K.
func TestPartitionedGuard(t *testing.T) {
	var want uint64
	for _, k := range []int{1, 2, 4} {
		w := newSynth(t, 4, 100, 9)
		calls := 0
		w.g.Guard = func() error {
			calls++
			if calls == 3 {
				return errors.New("host memory")
			}
			return nil
		}
		if err := w.g.SetThreads(k); err != nil {
			t.Fatal(err)
		}
		err := w.g.Run()
		w.g.Close()
		if err == nil || err.Error() != "host memory" {
			t.Fatalf("K=%d: got %v, want the guard's error", k, err)
		}
		ev := w.g.Events()
		if ev < 2*GuardEvery {
			t.Errorf("K=%d: stopped after %d events, before the guard's third turn", k, ev)
		}
		if k == 1 {
			want = ev
		} else if ev != want {
			t.Errorf("K=%d: stopped after %d events, K=1 after %d", k, ev, want)
		}
	}
}

// Rule (SetJitter): under jitter a partitioned run is still the same for
// every K (a stream per partition), and jitter changes the run.
func TestPartitionedJitterIsTheSameForEveryK(t *testing.T) {
	plain := newSynth(t, 3, 100, 11).run(t, 1)
	var want outcome
	for _, k := range []int{1, 2, 3} {
		got := newJitteredSynth(t, 3, 100, 11, 42).run(t, k)
		if k == 1 {
			want = got
			if cmp.Equal(plain.Merged, got.Merged) {
				t.Error("jitter changed nothing: the workload has no same-instant wake-ups to permute")
			}
			continue
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("K=%d differs from K=1 under jitter (-K=1 +K=%d):\n%s", k, k, d)
		}
	}
}

// Rule (partition.go, Partition.Spawn): processes spawned during a run
// (a kernel's threads) are numbered by their partition alone and listed
// in Blocked after those spawned before the run, in (time of spawning,
// partition, order of spawning): the same for every K. Each partition's
// first process spawns children at staggered times and in bursts at one
// instant, every child parks, and the stall lists them.
func TestPartitionSpawnDuringTheRun(t *testing.T) {
	const parts = 3
	var want []string
	for _, k := range []int{1, 2, 3} {
		w := newEmpty(t, parts, 10)
		for part := range parts {
			w.g.Spawn(part, fmt.Sprintf("main%d", part), func(p *Proc) {
				me := w.g.Partition(part)
				for i := range 4 {
					if p.Sleep(Time(5+part*(i%2)*5)) != nil {
						return
					}
					for j := range 1 + i%2 {
						me.Spawn(fmt.Sprintf("child%d.%d.%d", part, i, j), func(c *Proc) { _ = c.Park() })
					}
				}
				_ = p.Park()
			})
		}
		if err := w.g.SetThreads(k); err != nil {
			t.Fatal(err)
		}
		err := w.g.Run()
		var stall *StallError
		if !errors.As(err, &stall) {
			t.Fatalf("K=%d: got %v, want a stall", k, err)
		}
		var names []string
		for _, p := range stall.Blocked {
			names = append(names, p.String())
		}
		w.g.Close()
		if want == nil {
			want = names
			if len(names) != parts+parts*6 || names[0] != "main0(#0)" || names[parts] != "child0.0.0(#3)" {
				t.Fatalf("K=1: blocked %v", names)
			}
			continue
		}
		if d := cmp.Diff(want, names); d != "" {
			t.Errorf("K=%d blocked (-K=1 +K=%d):\n%s", k, k, d)
		}
	}
}

// Rule (partition.go, workers): a waiter at the barrier returns only once
// its condition holds, also when a wake-up meant for its previous wait
// reaches it (a waker held up between making that condition true and its
// rouse). Here that waker rouses the waiter as it parks, before its
// condition holds; the condition holds from the second look after.
func TestWaiterIgnoresAStaleWakeUp(t *testing.T) {
	for _, spin := range []int{0, 1} {
		w := waiter{wake: make(chan struct{}, 1)}
		looks, staleAt := 0, 0
		ready := func() bool {
			looks++
			if staleAt == 0 && w.parked.Load() {
				staleAt = looks
				w.rouse() // the held-up waker of the previous wait
				return false
			}
			return staleAt != 0 && looks >= staleAt+2
		}
		w.await(spin, ready)
		if staleAt == 0 || looks < staleAt+2 {
			t.Errorf("spin %d: await returned after %d looks (the stale wake-up came at look %d), while its condition did not hold", spin, looks, staleAt)
		}
		if w.parked.Load() {
			t.Errorf("spin %d: await returned with parked raised", spin)
		}
		if len(w.wake) != 0 {
			t.Errorf("spin %d: a wake-up is left in the channel", spin)
		}
	}
}
