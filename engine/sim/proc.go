package sim

import (
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
)

// ErrKilled is returned by a blocking call when the run ended (deadlock,
// watchdog or another process's error) while the process was waiting. The
// process must unwind and return.
var ErrKilled = errors.New("simulation ended while this process was blocked")

// Proc is a simulated process: a coroutine that runs only when the event loop
// resumes it and gives control back by blocking (Sleep, Park).
type Proc struct {
	// The fields every switch, sleep, wait and step touch come first and
	// fill two cache lines (Proc's size, 192 bytes, is a 64-byte-aligned
	// size class): at a thousand ranks a process is a cache miss away each
	// time its rank handles a message, and a layout in declaration order
	// spread them over three or four lines. A step (ParkStep) touches the
	// first two only; a coroutine switch also the third (next, yield).
	sim *Sim
	// step, while set, receives the process's wake-ups instead of its
	// coroutine (ParkStep); since is when the time spent suspended was
	// last charged to Spent.
	step  Stepper
	since Time

	done, killed bool
	parked       bool
	// Timed marks a wait governed by its own timeout, exempt from the
	// deadlock watchdog.
	Timed bool
	// Activity is what the process does while simulated time passes for
	// it (an index the blocking layer chooses; 0 = unclassified), and
	// Spent accumulates that time per activity: every picosecond of a
	// process's life is spent suspended in Sleep or Park, so Spent sums
	// to the time it ran for.
	Activity uint8

	// Wait describes what a blocked process waits for (for deadlock
	// reports); WaitSince is when it started waiting. Set by Park's caller.
	Wait      any
	WaitSince Time
	Spent     [MaxActivities]Time

	next  func() (struct{}, bool)
	yield func(struct{}) bool
	ID    int
	Name  string
	// Data is the owner's per-process state (e.g. the Starlark thread).
	Data any
	stop func()
}

// Stepper continues a parked process's work on the event loop (see
// ParkStep).
type Stepper interface{ Step(p *Proc) }

// MaxActivities bounds Proc.Activity.
const MaxActivities = 8

// Doing sets the process's activity and returns the previous one, to
// restore when the blocking call returns.
func (p *Proc) Doing(a uint8) (prev uint8) {
	prev, p.Activity = p.Activity, a
	return prev
}

// Spawn creates a process that starts at the current time (after events
// already scheduled for now).
func (s *Sim) Spawn(name string, body func(p *Proc)) *Proc { return s.spawn(name, false, body) }

// SpawnDeep is Spawn for a body that runs a deep call stack (a Starlark
// kernel, whose interpreter frames are kilobytes each): the process's
// coroutine grows its stack to 16 KiB as it starts, while the copy is
// cheap (growStack). It changes nothing the simulation does.
func (s *Sim) SpawnDeep(name string, body func(p *Proc)) *Proc { return s.spawn(name, true, body) }

func (s *Sim) spawn(name string, deep bool, body func(p *Proc)) *Proc {
	p := &Proc{sim: s, Name: name, ID: len(s.procs)}
	seq := func(yield func(struct{}) bool) {
		p.yield = yield
		if deep {
			growStack()
		}
		body(p)
	}
	p.next, p.stop = iter.Pull(seq)
	s.procs = append(s.procs, p)
	s.At(s.now, p)
	return p
}

// Sim returns the simulation p belongs to.
func (p *Proc) Sim() *Sim { return p.sim }

// Done reports whether the process body returned.
func (p *Proc) Done() bool { return p.done }

// Fire resumes the coroutine (the event loop is the only caller).
func (p *Proc) Fire() {
	if p.done {
		return
	}
	if st := p.step; st != nil {
		// A wait of a chain (ParkStep) ended: the chain goes on here, in
		// the place of the queue the process's resumption had.
		p.parked = false
		st.Step(p)
		return
	}
	p.resume()
}

// resume switches to the coroutine until it blocks again.
func (p *Proc) resume() {
	if p.sim.running != nil {
		panic("internal error: a process resumed another process directly")
	}
	p.parked = false
	p.sim.running = p
	p.sim.resumed++
	_, ok := p.next()
	p.sim.running = nil
	if !ok {
		p.done = true
	}
}

// suspend hands control back to the loop; false means the run is over.
func (p *Proc) suspend() error {
	p.since = p.sim.now
	ok := p.yield(struct{}{})
	p.Spent[p.Activity] += p.sim.now - p.since
	if !ok || p.killed {
		return ErrKilled
	}
	return nil
}

// Sleep advances the process by d. When no other event can happen before
// now+d, the clock is advanced in place without a coroutine switch: the
// result is identical because nothing else could have observed the interval.
func (p *Proc) Sleep(d Time) error {
	if d < 0 {
		panic("internal error: negative sleep")
	}
	s := p.sim
	t := Add(s.now, d)
	if s.passesInPlace(t) {
		p.Spent[p.Activity] += t - s.now
		s.now = t
		return nil
	}
	s.At(t, p)
	return p.suspend()
}

// passesInPlace reports whether a process's sleep until t may move the
// clock there in place, without an event (Sleep, SleepStep): no other
// event comes before t, t is within the run's limit and the run goes on,
// so nothing could observe the interval; in a partition's window
// (runUntil), t is also before the window's end, where a message from
// another partition may arrive.
func (s *Sim) passesInPlace(t Time) bool {
	return t < s.NextEventTime() && t <= s.limit() && s.stopErr == nil && t < s.bound
}

// Park blocks until Wake. Set Wait/WaitSince before parking for reports.
func (p *Proc) Park() error {
	p.parked = true
	return p.suspend()
}

// ParkStep parks p like Park, but its wake-ups (Wake, WakeAt) fire
// step.Step on the event loop instead of resuming the coroutine, exactly
// where the resumption would have fired (the same place in the queue,
// counted as an event and permuted under jitter like one: the queue holds
// the process itself). A step does on the loop what the process would
// have done next, without the two coroutine switches of a resumption
// (about 440 instructions), and then waits again (Repark, after
// registering p with its waker) or ends in Continue. The step keeps the
// process's Wait and Activity up to date (deadlock reports and the time
// report read them) and must not run Starlark (the process's thread is
// suspended).
func (p *Proc) ParkStep(step Stepper) error {
	p.parked = true
	return p.AwaitStep(step)
}

// AwaitStep (in the process) suspends p after it began its next wait the
// way a step does, and hands its wake-ups to step as ParkStep does: the
// wait is a registration with its waker (then Repark first: ParkStep) or
// a sleep that SleepStep could not pass in place. It returns when a step
// resumes the coroutine (ResumeNow, Continue). A chain that may begin
// its waits in the process or in a step (Account, SleepStep and Repark
// work in both) is written once.
func (p *Proc) AwaitStep(step Stepper) error {
	p.step = step
	err := p.suspend()
	p.step = nil
	return err
}

// Repark (in a step, or in the process before AwaitStep) waits for the
// next wake-up, which fires the step.
func (p *Proc) Repark() { p.parked = true }

// Account (in a step) charges the time since the process suspended (or
// since the last Account) to its current activity, then sets activity a
// and returns the previous one, as Doing does in the process. In the
// process it is Doing (the suspension charges the time).
func (p *Proc) Account(a uint8) (prev uint8) {
	if s := p.sim; s.running != p {
		now := s.now
		p.Spent[p.Activity] += now - p.since
		p.since = now
	}
	prev, p.Activity = p.Activity, a
	return prev
}

// SleepStep (in a step) lets d pass for the process as its own Sleep(d)
// would: in place when no other event can happen first (true: the step
// goes on at once, at now+d), else by firing the step again at now+d. In
// the process it is Sleep's in-place case, or the event that AwaitStep
// then waits for.
func (p *Proc) SleepStep(d Time) bool {
	s := p.sim
	t := Add(s.now, d)
	if s.passesInPlace(t) {
		// (In a step, the next Account, or the resumed suspend, charges
		// the time since the last Account, the sleep included, to the
		// current activity.)
		if s.running == p {
			p.Spent[p.Activity] += t - s.now
		}
		s.now = t
		return true
	}
	s.At(t, p)
	return false
}

// Continue (in a step) ends the chain with what the process's own
// Sleep(d) would have done: its coroutine resumes d from now, in place
// when no other event can happen first (Sleep's rule), else as an event.
func (p *Proc) Continue(d Time) {
	if p.SleepStep(d) {
		p.ResumeNow()
		return
	}
	p.step = nil // the event resumes the coroutine
}

// ResumeNow (in a step) ends the chain: the coroutine goes on at once,
// within the current event, as the process itself would have. The
// coroutine runs inside the call, so the step must return right after
// it (as after Continue) without touching its state.
func (p *Proc) ResumeNow() {
	p.step = nil
	p.resume()
}

// Parked reports whether the process is blocked in Park.
func (p *Proc) Parked() bool { return p.parked }

// Wake schedules a parked process to resume at the current time. Waking
// through the event queue (rather than switching directly) keeps the order of
// same-time activity defined by (time, sequence) alone.
func (p *Proc) Wake() {
	if !p.parked {
		return
	}
	p.parked = false
	p.sim.At(p.sim.now, p)
}

// WakeAt schedules a parked process to resume at time t.
func (p *Proc) WakeAt(t Time) {
	if !p.parked {
		return
	}
	p.parked = false
	p.sim.At(t, p)
}

func (p *Proc) String() string { return fmt.Sprintf("%s(#%d)", p.Name, p.ID) }

// WaitWatchdog stops the run with a *WaitTimeoutError when any process has
// been parked in an untimed wait for longer than limit. It checks every
// limit/4 (a process is waiting while its Wait is set, parked or polling)
// and reschedules itself only while other events are pending, so it
// never keeps a finished (or stalled) simulation alive.
func (s *Sim) WaitWatchdog(limit Time) {
	if limit <= 0 {
		return
	}
	period := limit / 4
	if period == 0 {
		period = 1
	}
	check := &daemon{s: s}
	check.check = func() {
		for _, p := range s.procs {
			if p.Wait != nil && !p.done && !p.Timed && s.now-p.WaitSince > limit {
				s.Stop(&WaitTimeoutError{Limit: limit, Proc: p, Blocked: s.Blocked()})
				return
			}
		}
		if s.Pending() > 0 {
			s.At(Add(s.now, period), check)
		}
	}
	s.At(Add(s.now, period), check)
}

// WaitTimeoutError: one untimed wait exceeded the deadlock timeout.
type WaitTimeoutError struct {
	Limit   Time
	Proc    *Proc
	Blocked []*Proc
}

func (e *WaitTimeoutError) Error() string {
	return fmt.Sprintf("deadlock: %s has waited longer than deadlock_timeout_ns (%v)", e.Proc.Name, e.Limit)
}

// growStack takes a frame of 12 KiB, so that the coroutine calling it,
// still a few frames deep, grows its stack to 16 KiB at once (Go's
// coroutines start at the average stack size in use, 8 KiB with Starlark
// kernels): grown later, deep in an interpreter's frames, the copy walks
// and adjusts every frame (at 65,536 ranks, 0.4 s of a 7 s run). What a
// Starlark kernel blocks in is about 6 KiB of frames, and a call into a
// helper function passes 8 KiB (every shipped algorithm's ranks end on
// 16 KiB stacks or more), so the stack would have grown anyway.
//
//go:noinline
func growStack() byte {
	var b [12 << 10]byte
	// Written and read at indexes the compiler cannot see, so that the
	// frame is not optimised away (and only read: partitions spawn on
	// several goroutines).
	i := stackIndex.Load()
	b[i] = 1
	return b[i^1]
}

// stackIndex is 0, loaded atomically so the compiler cannot know it.
var stackIndex atomic.Int64
