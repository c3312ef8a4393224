package sim

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// twoWaits is what the processes of stepRun do between two points of
// their loop: wait for a wake-up, then for another (the waker of each is
// scheduled just before it), then sleep. It is either the process's own
// code (Park, Park, Sleep) or a step continuing on the event loop
// (ParkStep, Repark, Continue).
type twoWaits struct {
	s     *Sim
	log   *[]string
	wakes int // wake-ups seen in this round
	delay Time
	sleep Time
}

func (w *twoWaits) Step(p *Proc) {
	w.wakes++
	*w.log = append(*w.log, fmt.Sprintf("%v %s woke %d", w.s.Now(), p.Name, w.wakes))
	if w.wakes == 1 {
		p.Account(2)
		w.s.At(w.s.Now()+w.delay, HandlerFunc(p.Wake))
		p.Repark()
		return
	}
	p.Account(3)
	p.Continue(w.sleep)
}

// stepRun runs 6 processes through rounds of two waits and a sleep, with
// delays that vary by process and round (some sleeps pass in place, some
// need an event), optionally beside a ticker that keeps events pending,
// and returns everything observable: the log, the time per activity and
// the count of events.
func stepRun(t *testing.T, jitter uint64, ticker, steps bool) []string {
	t.Helper()
	s := New()
	s.SetJitter(jitter)
	var log []string
	var procs []*Proc
	for i := 0; i < 6; i++ {
		procs = append(procs, s.Spawn(fmt.Sprint("p", i), func(p *Proc) {
			w := &twoWaits{s: s, log: &log}
			for r := 0; r < 5; r++ {
				w.wakes = 0
				w.delay = Time((i*7+r*3)%4) * 2
				w.sleep = Time((i+r)%3) * 3
				p.Doing(1)
				s.At(s.Now()+Time((i+r)%2)*5, HandlerFunc(p.Wake))
				if steps {
					if err := p.ParkStep(w); err != nil {
						t.Error(err)
						return
					}
				} else {
					for k := 0; k < 2; k++ {
						if err := p.Park(); err != nil {
							t.Error(err)
							return
						}
						w.wakes++
						log = append(log, fmt.Sprintf("%v %s woke %d", s.Now(), p.Name, w.wakes))
						if k == 0 {
							p.Doing(2)
							s.At(s.Now()+w.delay, HandlerFunc(p.Wake))
						}
					}
					p.Doing(3)
					if err := p.Sleep(w.sleep); err != nil {
						t.Error(err)
						return
					}
				}
				p.Doing(0)
				log = append(log, fmt.Sprintf("%v %s round %d done", s.Now(), p.Name, r))
			}
		}))
	}
	if ticker {
		s.Spawn("ticker", func(p *Proc) {
			for i := 0; i < 80; i++ {
				_ = p.Sleep(1)
			}
		})
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		log = append(log, fmt.Sprintf("%s spent %v", p.Name, p.Spent))
	}
	return append(log, fmt.Sprintf("%d events", s.Events()))
}

// Rule (docs/architecture.md, engine/sim): events fire in (time, sequence)
// order, and jitter permutes process wake-ups only. A step fires exactly
// where the process's resumption would have: the same times, the same order
// (under jitter too: the queue holds the process, permuted like any wake-up),
// the same time per activity and the same count of events, whether the final
// sleep passes in place or not.
func TestParkStepRunsLikeTheProcess(t *testing.T) {
	for _, ticker := range []bool{false, true} {
		for _, jitter := range []uint64{0, 1, 2, 3, 42} {
			want := stepRun(t, jitter, ticker, false)
			got := stepRun(t, jitter, ticker, true)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ticker %v, jitter %d: steps differ from the process's own waits (-process +steps):\n%s", ticker, jitter, diff)
			}
		}
	}
}

// Rule (docs/architecture.md, Invariants and failures, stall): a process
// parked for a step is blocked like any other: a stall lists it with what it
// waits for, and Close makes ParkStep return ErrKilled without firing the
// step.
func TestParkStepStallAndClose(t *testing.T) {
	s := New()
	stepped := false
	var got error
	s.Spawn("waiter", func(p *Proc) {
		p.Wait = "a wake-up that never comes"
		got = p.ParkStep(stepFunc(func(*Proc) { stepped = true }))
	})
	err := s.Run()
	var se *StallError
	if !errors.As(err, &se) || len(se.Blocked) != 1 || se.Blocked[0].Wait != "a wake-up that never comes" {
		t.Fatalf("Run() = %v, want a StallError naming the waiter's wait", err)
	}
	s.Close()
	if !errors.Is(got, ErrKilled) || stepped {
		t.Errorf("after Close: ParkStep returned %v (want ErrKilled), step fired: %v", got, stepped)
	}
}

// Rule (docs/architecture.md, engine/sim, simulated-time watchdog): a chain
// waiting on its own sleep (SleepStep) when the watchdog stops the run
// unwinds too: Close makes ParkStep return ErrKilled and the pending step
// does not fire again.
func TestParkStepSleepingChainUnwindsAtWatchdog(t *testing.T) {
	s := New()
	s.MaxTime = 10 * Nanosecond
	steps := 0
	var got error
	s.Spawn("sleeper", func(p *Proc) {
		s.After(Nanosecond, p) // the wake-up that starts the chain
		got = p.ParkStep(stepFunc(func(p *Proc) {
			steps++
			if p.SleepStep(Microsecond) { // past the watchdog: an event
				t.Error("a sleep past the watchdog passed in place")
			}
		}))
	})
	var we *WatchdogError
	if err := s.Run(); !errors.As(err, &we) {
		t.Fatalf("Run() = %v, want a WatchdogError", err)
	}
	s.Close()
	if !errors.Is(got, ErrKilled) || steps != 1 {
		t.Errorf("after Close: ParkStep returned %v (want ErrKilled), steps %d (want 1)", got, steps)
	}
}

type stepFunc func(*Proc)

func (f stepFunc) Step(p *Proc) { f(p) }
