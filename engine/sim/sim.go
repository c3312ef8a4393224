// Package sim is kernbench's deterministic discrete-event core: an exact
// integer clock, an event queue ordered by (time, sequence), and simulated
// processes that run as coroutines (iter.Pull) switched only by the loop.
//
// It knows nothing about the machine or about Starlark; engine/machine builds
// the accelerator on top of it and starlark/… runs scripts as processes.
package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Time is simulated time in picoseconds. Integer time keeps every run exact
// and reproducible: there is no accumulated floating-point error.
type Time int64

// Units of Time.
const (
	Picosecond  Time = 1
	Nanosecond  Time = 1000
	Microsecond Time = 1000 * Nanosecond
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
)

// Never is a time later than any event.
const Never Time = 1<<63 - 1

// Horizon is the latest simulated time a run may reach, 2^62 ps (about 53
// days). Every time and duration the engine computes is at most Never and
// sums saturate (Add), so the clock can never wrap; an event beyond the
// horizon (or beyond MaxTime) stops the run with a *WatchdogError instead
// of firing. Configured limits (max_sim_time_ns) stay below it.
const Horizon Time = 1 << 62

// Add is a + b for non-negative times, saturating at Never instead of
// wrapping around to a negative time.
func Add(a, b Time) Time {
	// Two times in [0, Never] sum to at most 2·Never, which wraps to a
	// negative number exactly when it passes Never.
	if s := a + b; s >= 0 {
		return s
	}
	return Never
}

// Mul is d × n for a non-negative duration and count, saturating at Never.
func Mul(d Time, n int64) Time {
	if n != 0 && d > Never/Time(n) {
		return Never
	}
	return d * Time(n)
}

// Ns converts t to (possibly fractional) nanoseconds for reports.
func (t Time) Ns() float64 { return float64(t) / float64(Nanosecond) }

// String formats t in nanoseconds with picosecond precision.
func (t Time) String() string {
	ns, ps := int64(t)/1000, int64(t)%1000
	if ps < 0 {
		ps = -ps
	}
	if ps == 0 {
		return fmt.Sprintf("%dns", ns)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%03d", ns, ps), "0") + "ns"
}

// Handler is something the event loop can fire. Hardware models implement it
// on long-lived objects so that scheduling an event allocates nothing.
type Handler interface{ Fire() }

// Late is a Handler that, under jitter, fires after every other event of
// its instant, process wake-ups included, instead of before them as
// other hardware events do: a timer that re-arms itself at the next
// pending time (engine/l3l2's) would otherwise run before the wake-ups
// of its instant for ever. Without jitter it fires in scheduling order,
// as any event.
type Late interface {
	Handler
	Late()
}

// HandlerFunc adapts a function to Handler (convenient off the hot path).
type HandlerFunc func()

// Fire calls f.
func (f HandlerFunc) Fire() { f() }

// Sim is one simulation: clock, event queue and processes.
//
// Events fire in (time, scheduling sequence) order. Without jitter the
// queue keeps one FIFO bucket per distinct pending time, in scheduling
// order, and orders the distinct times: events of one time append to
// their bucket in sequence order, so draining buckets in time order fires
// them in exactly (time, sequence) order, while the ordering only sees
// each distinct time once. Ranks of a symmetric collective do the same
// work at the same instants, so a time holds several events (3 to 13 in
// the ring benchmarks) and most events cost an append. The distinct
// times are ordered by a radix heap (see radixTimes): simulated time
// never goes back, so a time can be binned by the highest digit in which
// it differs from the last one taken; placing a new time is a push on a
// list, and taking the next instant rarely moves another. A sorted array
// (a binary search and a memory move per new time, about 250
// instructions with a few dozen pending times) and a 4-ary heap with a
// hash index cost more. Under jitter a bucket also keeps the instant's
// process wake-ups apart, ordered by their random keys (see SetJitter).
type Sim struct {
	now Time
	// cur is the bucket of the current instant while the clock stands at
	// cur.at: events scheduled for now append to it and fire after the
	// ones already there (they were scheduled earlier). It stays in the
	// index (recent or overflow) until it retires, so that At finds it as
	// any other pending bucket. Before the first instant it is a drained
	// bucket of no time, the Sim's own, in its entry of recent (New), so
	// that the loop and At need no nil test, and the loop retires it as
	// any other when the first instant begins (no test per instant).
	cur *bucket
	// times orders the other pending buckets by time.
	times radixTimes
	// recent and overflow find a pending bucket by its time: a bucket is
	// in recent, direct-mapped by its time (recentSlot), unless another
	// pending bucket held its entry when it was made; then it is in
	// overflow. The ranks of a collective schedule their events at the
	// same few dozen pending times in turn, so most events find their
	// bucket in recent without a search, and a time found in neither
	// (overflow is mostly empty) is new. A bucket keeps its place until
	// it retires (the current one included); a new bucket takes only an
	// empty entry, and a retiring one leaves its entry empty. An empty
	// entry holds noInstant (no time matches it), so a lookup needs no
	// nil test, and under jitter every entry stays empty, so that At's
	// common case needs no jitter test.
	recent   [1 << recentBits]*bucket
	overflow timeIndex
	// overflowAt counts the buckets in overflow by their entry in
	// recent: a new time whose entry counts none is not in overflow
	// without a search (a long-pending time that collided, such as a
	// watchdog's, would otherwise make every new time search it).
	overflowAt [1 << recentBits]uint32
	// free lists the recycled buckets (retire), through their link.
	free *bucket
	// scheduled and taken count the events ever scheduled and taken to
	// fire: the others are pending (Pending). Of those taken, daemons
	// were daemon events and the others work (Events). The loop only
	// counts what it takes: keeping a count of pending events, and
	// testing each event for a daemon, cost it instructions per event.
	scheduled, taken, daemons uint64
	jitter                    *rand.Rand
	// checkAt is the value of taken at which the loop next checks: the
	// Guard's turn, every GuardEvery events, or a stop (Stop sets it to
	// taken), so that the loop tests one count per event instead of both.
	checkAt uint64
	// workBy is Events when lastWork was last brought up to date: the
	// loop notes the time of work per instant, not per event (noteWork).
	workBy uint64
	// InstantLimit bounds the events one instant fires (0: none): a run
	// past it stops with a *StuckInstantError. No model fires more than a
	// few per process at one instant, and a kernel's own loop at one
	// instant is mostly bounded before it, by its count of calls
	// (starlark/tl): an endless cascade of events at one time is a loop
	// of spawns or an engine bug (a timer that re-armed at its own
	// instant under jitter took a process to 21 GB before the host-memory
	// guard), which this ends in seconds.
	// The untimed mock, where every event is at time 0, sets none.
	InstantLimit uint64
	// turnAt is the current instant's time at the last Guard turn, and
	// turnEvents how many events have fired at it since (checkInstant).
	turnAt     Time
	turnEvents uint64
	// runLimit is the limit of the running loop (limit): a field, as a
	// local the loop would reload it after every event.
	runLimit Time
	// stopAt is the latest time the running loop takes an instant of
	// without a closer look: the earlier of runLimit and the last time
	// before the window's end (bound), so that the loop tests each
	// instant against one time.
	stopAt Time
	// resumed counts coroutine resumptions (a cost the process steps
	// avoid: Resumptions).
	resumed uint64
	// lastWork is the time of the last event that was simulated work (not
	// a watchdog check): when a stalled system froze. The loop brings it
	// up to date when an instant ends and when it stops (noteWork).
	lastWork Time
	// bound is the end of the window a partition runs (runUntil): no
	// event at or after it fires, and no sleep passes it in place. Never
	// outside a window (Run).
	bound Time

	procs   []*Proc
	running *Proc
	// stopErr ends the run at the next loop iteration (first error wins).
	stopErr error
	// MaxTime is the simulated-time watchdog (0 = none): the run stops with
	// a *WatchdogError when the next event would pass it.
	MaxTime Time
	// Guard, when set, is called every GuardEvery events; an error it
	// returns stops the run. It must only read state outside the
	// simulation (a host-memory ceiling): it may end a run, never change
	// what the run simulates.
	Guard func() error
}

// bucket is the FIFO of events pending at one time, from head on. Under
// jitter, process wake-ups go to procs instead, sorted by their random
// keys from procsHead on, and fire after every other event of the
// instant (including those scheduled while the instant's processes run).
type bucket struct {
	at        Time
	link      *bucket // the next pending bucket in its bin of Sim.times
	evs       []Handler
	head      int
	procs     []jittered
	procsHead int
}

// jittered is a process wake-up with its random key (jitter only).
type jittered struct {
	key uint64
	h   Handler
}

// daemon is a daemon event (a watchdog check): it fires in order like
// any other but is not counted as simulated work. It counts itself as it
// fires, so that the loop need not tell it apart from work (a type test
// per event), and a bucket's events stay plain handlers.
type daemon struct {
	s     *Sim
	check func()
}

// Fire counts the event as a daemon's and runs the check.
func (d *daemon) Fire() {
	d.s.daemons++
	d.check()
}

// GuardEvery is how many events pass between two calls of Sim.Guard.
const GuardEvery = 256

// New returns an empty simulation at time 0.
func New() *Sim {
	s := &Sim{cur: &bucket{at: retiredAt}, bound: Never}
	for i := range s.recent {
		s.recent[i] = &noInstant
	}
	s.recent[recentSlot(retiredAt)] = s.cur // (where retire looks for it)
	return s
}

// SetJitter makes the order in which processes resume at the same instant
// a reproducible pseudo-random permutation (schedule exploration); hardware
// events of that instant run first, in scheduling order. Seed 0 restores
// plain FIFO order for everything. It is called before the first event
// is scheduled (the order of events already queued would be a mix).
func (s *Sim) SetJitter(seed uint64) {
	if s.Pending() > 0 || s.taken > 0 {
		panic("internal error: SetJitter after events were scheduled")
	}
	if seed == 0 {
		s.jitter = nil
		return
	}
	s.jitter = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Now is the current simulated time.
func (s *Sim) Now() Time { return s.now }

// Events is the number of events fired so far.
func (s *Sim) Events() uint64 { return s.taken - s.daemons }

// NotWork (in a handler) counts the event that fires as the engine's own
// bookkeeping, as a daemon's: Events leaves it out, so that a run counts
// the same events however the engine splits its work (a transfer's
// crossing into another SIP, engine/machine).
func (s *Sim) NotWork() { s.daemons++ }

// Resumptions is the number of times a process's coroutine was resumed
// (its start included): each is two coroutine switches, which a wait
// continued in a step (ParkStep) does without.
func (s *Sim) Resumptions() uint64 { return s.resumed }

// At schedules h to fire at time t (t >= Now).
func (s *Sim) At(t Time, h Handler) {
	if t < s.now {
		s.pastPanic(t)
	}
	// The common case: t's bucket is in recent (never under jitter, see
	// bucketAt), so that neither a nil entry nor jitter needs a test
	// there.
	b := s.recent[recentSlot(t)]
	if b.at != t {
		b = s.bucketAt(t)
		if s.jitter != nil && s.jittered(b, h) {
			return
		}
	}
	s.scheduled++
	b.evs = append(b.evs, h)
}

// jittered adds h to b as a jittered wake-up if it is a process, and
// reports whether it did.
func (s *Sim) jittered(b *bucket, h Handler) bool {
	// Jitter permutes which runnable process goes next: process
	// resumptions at one instant run in a seeded random order, after the
	// instant's hardware events (which keep their FIFO order, as hardware
	// completing within an instant would).
	var key uint64
	switch h.(type) {
	case *Proc:
		key = 1<<63 | s.jitter.Uint64()>>1
	case Late:
		// After the instant's wake-ups, the ones scheduled later too
		// (equal keys keep their order).
		key = math.MaxUint64
	default:
		return false
	}
	s.scheduled++
	b.addProc(jittered{key, h})
	return true
}

// recentBits is log2 of the size of Sim.recent: 1024 entries keep the
// few dozen pending times of the ring benchmarks mostly apart, so that
// overflow is mostly empty (64-rank timing-only ring: 256 entries cost
// 8 M instructions more, 2048 save 2 M).
const recentBits = 10

// recentSlot is t's entry in Sim.recent (Fibonacci hashing: times that
// differ only in high bits, multiples of a nanosecond, still spread).
func recentSlot(t Time) uint64 { return uint64(t) * 0x9e3779b97f4a7c15 >> (64 - recentBits) }

// retiredAt is the time of a recycled bucket: earlier than any event.
const retiredAt Time = -1

// noInstant is the empty entry of Sim.recent: a drained bucket of no
// time that is never recycled, filled or taken.
var noInstant = bucket{at: retiredAt}

// pastPanic reports a scheduling bug (out of line: formatting the message
// in At would cost every event a larger frame).
func (s *Sim) pastPanic(t Time) {
	panic(fmt.Sprintf("internal error: event scheduled in the past (%v < %v)", t, s.now))
}

// addProc inserts a jittered wake-up in key order (buckets are small:
// an insertion is cheaper than a heap, and jitter is for exploration).
func (b *bucket) addProc(j jittered) {
	i := len(b.procs)
	b.procs = append(b.procs, j)
	for i > b.procsHead && b.procs[i-1].key > j.key {
		b.procs[i] = b.procs[i-1]
		i--
	}
	b.procs[i] = j
}

// next takes the bucket's next event (it has one).
func (b *bucket) next() Handler {
	if b.head < len(b.evs) {
		h := b.evs[b.head]
		// Drop the handler as it fires: a recycled bucket may wait long
		// on the free list, and this costs less than clearing the slice
		// there.
		b.evs[b.head] = nil
		b.head++
		return h
	}
	h := b.procs[b.procsHead].h
	if b.procsHead++; b.procsHead == len(b.procs) {
		// The last wake-up: the list starts again empty (wake-ups added
		// at this instant later sort among themselves), so that retire
		// need not look at procs.
		clear(b.procs)
		b.procs, b.procsHead = b.procs[:0], 0
	}
	return h
}

// drained reports whether every event of the bucket has fired.
func (b *bucket) drained() bool { return b.head == len(b.evs) && b.procsHead == len(b.procs) }

// bucketAt returns the bucket of time t (>= now), the current one or a
// pending one, making it if t has none (t > now, or t == now after a
// sleep moved the clock in place). Its entry i in Sim.recent
// (recentSlot) does not hold it.
func (s *Sim) bucketAt(t Time) *bucket {
	i := recentSlot(t)
	if s.overflowAt[i] != 0 {
		if b := s.overflow.get(t); b != nil {
			return b
		}
	}
	b := s.newBucket(t)
	if r := &s.recent[i]; *r == &noInstant && s.jitter == nil {
		*r = b
	} else {
		s.overflow.put(b)
		s.overflowAt[i]++
	}
	s.times.push(b)
	return b
}

// newBucket takes a recycled bucket (or makes one) for time t (its link
// is set as times places it).
func (s *Sim) newBucket(t Time) *bucket {
	b := s.free
	if b != nil {
		s.free = b.link
	} else {
		b = &bucket{}
	}
	b.at = t
	return b
}

// retire drops b, the drained bucket of the instant that ended, from
// the index and recycles it (the caller makes the next one current).
func (s *Sim) retire(b *bucket) {
	if r := &s.recent[recentSlot(b.at)]; *r == b {
		*r = &noInstant
	} else {
		s.unoverflow(b)
	}
	// (The loop dropped the fired handlers from evs, and next emptied
	// procs.)
	b.evs, b.head = b.evs[:0], 0
	b.link = s.free
	s.free = b
}

// After schedules h to fire d after now.
func (s *Sim) After(d Time, h Handler) { s.At(Add(s.now, d), h) }

// NextEventTime is the time of the earliest pending event, or Never.
func (s *Sim) NextEventTime() Time {
	if c := s.cur; !c.drained() {
		return c.at
	}
	return s.times.min()
}

// Pending reports the number of scheduled events.
func (s *Sim) Pending() int { return int(s.scheduled - s.taken) }

// unoverflow drops b from overflow (out of line: retire stays small
// enough to inline in the loop).
//
//go:noinline
func (s *Sim) unoverflow(b *bucket) {
	s.overflow.remove(b.at)
	s.overflowAt[recentSlot(b.at)]--
}

// Stop ends the run with err at the next loop iteration. The first error wins.
func (s *Sim) Stop(err error) {
	if s.stopErr == nil {
		s.stopErr = err
		s.checkAt = s.taken // Run checks before the next event
	}
}

// Err is the error the run was stopped with, if any.
func (s *Sim) Err() error { return s.stopErr }

// limit is the time no event may pass: MaxTime, or the Horizon when
// MaxTime is unset or beyond it.
func (s *Sim) limit() Time {
	if s.MaxTime <= 0 || s.MaxTime > Horizon {
		return Horizon
	}
	return s.MaxTime
}

// Run fires events until none remain or the run is stopped. It returns the
// stop error, a *WatchdogError, or a *StallError when processes are still
// blocked with nothing left that could wake them.
//
// Blocked processes stay suspended so that their state (what they wait for,
// their script position) can be reported; call Close when done.
//
// In a partition's window (runUntil) it returns nil once the next event
// is at or after the window's end, and the coordinator judges the stop.
func (s *Sim) Run() error {
	s.runLimit = s.limit()
	s.stopAt = s.runLimit
	if s.bound != Never {
		s.stopAt = min(s.stopAt, s.bound-1)
	}
	// The Guard's first turn comes before the GuardEvery-th event.
	s.checkAt = s.taken + GuardEvery - 1
	if s.stopErr != nil {
		s.checkAt = s.taken
	}
	for {
		if s.taken == s.checkAt {
			// A stop, or the Guard's turn.
			if s.stopErr != nil {
				break
			}
			s.checkAt = s.taken + GuardEvery
			if s.InstantLimit != 0 && s.checkInstant() {
				break
			}
			if s.Guard != nil {
				if err := s.Guard(); err != nil {
					s.Stop(err)
				}
				// (Also when the Guard called Stop itself: Stop set
				// checkAt to now, which the count passes at the next
				// event, and the run would not stop.)
				if s.stopErr != nil {
					break
				}
			}
		}
		// The current instant's bucket, in scheduling order (the common
		// case first: a hardware event or an unjittered wake-up).
		c := s.cur
		var h Handler
		if i := uint(c.head); i < uint(len(c.evs)) {
			h = c.evs[i]
			// Drop the handler as it fires (see next).
			c.evs[i] = nil
			c.head++
		} else if c.procsHead != len(c.procs) {
			h = c.next() // (jitter: the instant's wake-ups)
		} else {
			next := s.times.popUntil(s.stopAt)
			if next == nil {
				// (Out of the common path: the tests popUntil made
				// in one, apart.)
				if s.times.n == 0 {
					break
				}
				if s.bound != Never && s.times.min() >= s.bound {
					break // the window's end (runUntil)
				}
				// The next event is past the limit.
				next = s.times.pop()
				limit := s.runLimit
				// next stays pending, and times is based on now
				// again (an event may still be scheduled at now).
				s.times.push(next)
				s.times.rebaseAll(limit)
				s.noteWork() // (before the clock jumps to the limit)
				s.now = limit
				s.Stop(&WatchdogError{Limit: limit, Horizon: limit != s.MaxTime, Next: next.at, Blocked: s.Blocked()})
				break
			}
			s.noteWork() // (before the clock moves on)
			s.retire(c)
			// The next instant: its bucket becomes the current one (a
			// bucket holds at least the event that made it). The clock
			// moves only here: while an instant's events fire, now is
			// its time (Sleep advances the clock in place only when
			// nothing is pending before its end).
			c = next
			s.cur = c
			s.now = c.at
			if len(c.evs) != 0 {
				h = c.evs[0]
				c.evs[0] = nil // (see next)
				c.head = 1
			} else {
				h = c.next() // (jitter: wake-ups only)
			}
		}
		s.taken++
		h.Fire()
	}
	s.noteWork() // (unless the limit's stop noted it already; nothing before the first instant)
	if s.bound != Never {
		return nil // a window's end (runUntil)
	}
	if s.stopErr != nil {
		return s.stopErr
	}
	if blocked := s.Blocked(); len(blocked) > 0 {
		// The system froze after its last piece of work (the clock may have
		// moved on through watchdog checks since).
		return &StallError{At: s.lastWork, Blocked: blocked}
	}
	return nil
}

// checkInstant (at a Guard turn, every GuardEvery events) counts the
// events fired at the current instant, in turns: time never goes back,
// so an instant that stands at two turns fired every event between them.
// It stops the run when they pass InstantLimit (and reports it). Counted
// at the turns, not as instants begin, the bound costs the loop nothing
// per instant.
//
//go:noinline
func (s *Sim) checkInstant() bool {
	if at := s.cur.at; at != s.turnAt {
		s.turnAt, s.turnEvents = at, 0
		return false
	}
	if s.turnEvents += GuardEvery; s.turnEvents <= s.InstantLimit {
		return false
	}
	s.Stop(&StuckInstantError{At: s.now, Events: s.turnEvents, Limit: s.InstantLimit})
	return true
}

// noteWork brings lastWork up to date as the current instant ends, when
// it was work (its events raised Events; a daemon's do not): the work went
// on until now, the instant's time or later when a process slept in place
// after its events (Sleep, SleepStep move the clock without an event, and
// only in an instant of work: daemons resume no process). The loop calls
// it before the clock moves on.
func (s *Sim) noteWork() {
	if work := s.Events(); work != s.workBy {
		s.lastWork = s.now
		s.workBy = work
	}
}

// Close unwinds coroutines that never finished so no goroutine leaks. Their
// blocking calls return ErrKilled.
func (s *Sim) Close() {
	for _, p := range s.procs {
		if !p.done && p.stop != nil {
			p.killed = true
			p.stop()
			p.done = true
		}
	}
}

// Blocked lists live processes that have started and not finished, in
// creation order.
func (s *Sim) Blocked() []*Proc {
	var out []*Proc
	for _, p := range s.procs {
		if !p.done {
			out = append(out, p)
		}
	}
	return out
}

// Running is the process whose coroutine is executing, or nil in an event
// handler (a ParkStep step included: it runs on the loop, not in the
// process, and so must not run code that asks which process runs).
func (s *Sim) Running() *Proc { return s.running }

// StallError: the event queue drained while processes were still blocked
// (a deadlock: nothing can ever wake them).
type StallError struct {
	At      Time
	Blocked []*Proc
}

func (e *StallError) Error() string {
	return fmt.Sprintf("deadlock at t=%v: no pending events while %d process(es) are blocked", e.At, len(e.Blocked))
}

// DefaultInstantLimit is the InstantLimit of a timed run: 2^25 events
// at one instant, a few seconds of a cascade; a ring of 256 ranks fires
// at most a few hundred at one instant of a partition.
const DefaultInstantLimit = 1 << 25

// StuckInstantError: more than InstantLimit events fired at one instant
// (an engine bug, or a kernel's threads spawning threads without end:
// its other loops at one instant are bounded by their calls first).
type StuckInstantError struct {
	At            Time
	Events, Limit uint64
}

func (e *StuckInstantError) Error() string {
	return fmt.Sprintf("the simulation fired %d events at t=%v without simulated time advancing, past the %d one instant allows: something schedules events at one instant without end (a kernel spawning threads in a loop, or a kernbench bug: please report it)", e.Events, e.At, e.Limit)
}

// WatchdogError: the simulated-time limit was reached: the next event is
// later than MaxTime, or (Horizon) later than the simulator's Horizon.
type WatchdogError struct {
	Limit   Time
	Horizon bool // Limit is the simulator's Horizon, not MaxTime
	Next    Time // time of the event that would have passed Limit (Never: beyond any representable time)
	Blocked []*Proc
}

func (e *WatchdogError) Error() string {
	if e.Horizon {
		return fmt.Sprintf("simulated-time watchdog: the run would pass the simulator's maximum time (%v) with %d process(es) unfinished", e.Limit, len(e.Blocked))
	}
	return fmt.Sprintf("simulated-time watchdog: the run passed max_sim_time_ns (%v) with %d process(es) unfinished", e.Limit, len(e.Blocked))
}
