package script

import (
	"io"
	"sync"
	"time"
	"weak"

	"go.starlark.net/starlark"
)

// timeoutReason starts the cancel reason of a wall-clock timeout (the
// message users see; IsTimeout reads the typed cause, not this text).
const timeoutReason = "wall-clock timeout"

// Watchdog cancels every Starlark thread it watches once a wall-clock limit
// has passed. The step limit cannot stop everything: a loop that squares
// an ever larger integer is one step per iteration while each step takes
// longer and longer. A cancelled thread stops at its next step.
// A nil *Watchdog watches nothing.
type Watchdog struct {
	mu      sync.Mutex
	threads []watched
	reason  string // "" until the limit passed
	what    string // names the limit in the reason
	timer   *time.Timer
	// cause is what a cancelled thread's error is marked with: ErrTimeout,
	// or ErrMemory for a memory watch.
	cause error
	// poll, on a memory watch, is what its threads call every so many
	// steps (stepSchedule): it samples the memory when a garbage
	// collection ran since the thread's last poll (seen is the thread's
	// note of it), fires the watch when the sample is over the limit, and
	// reports whether a collection had run.
	poll func(seen *uint64) bool
}

// NewWatchdog starts a watchdog that fires after d; what names the limit in
// the error ("--timeout 10s"). d <= 0 is no limit (nil).
func NewWatchdog(d time.Duration, what string) *Watchdog {
	if d <= 0 {
		return nil
	}
	w := &Watchdog{what: what, cause: ErrTimeout}
	w.timer = time.AfterFunc(d, w.Fire)
	return w
}

// ManualWatchdog is a watchdog with no clock: its limit passes only when
// Fire is called. Tests use it, so that where a script is stopped never
// depends on how fast a loaded machine runs it.
func ManualWatchdog(what string) *Watchdog { return &Watchdog{what: what, cause: ErrTimeout} }

// NewMemoryWatch is a watchdog with no clock for the host-memory limit:
// FireMemory cancels its threads, their errors marked with ErrMemory.
// Its threads call poll as they run (every 256 steps, every 16 while
// each poll reports a collection); poll may be nil.
func NewMemoryWatch(poll func(seen *uint64) bool) *Watchdog {
	return &Watchdog{cause: ErrMemory, poll: poll}
}

// FireMemory cancels the watched threads, and every thread watched from
// now on, with reason (what the memory limit's error says). A nil
// *Watchdog has no threads.
func (w *Watchdog) FireMemory(reason string) {
	if w == nil {
		return
	}
	w.fire(reason)
}

// FireOnWrite is a writer that passes w's limit at every write: given as
// a script's print output, it stops the script at a print the test chose.
func (w *Watchdog) FireOnWrite() io.Writer { return firingWriter{w} }

type firingWriter struct{ w *Watchdog }

func (f firingWriter) Write(b []byte) (int, error) {
	f.w.Fire()
	return len(b), nil
}

// Fire passes the limit now: the watched threads are cancelled as when the
// time is up, and so is every thread watched from now on. Tests use it to
// stop a script at a point they choose rather than when a clock says.
// A nil *Watchdog has no limit to pass.
func (w *Watchdog) Fire() {
	if w == nil {
		return
	}
	w.fire(timeoutReason + ": stopped after " + w.what)
}

func (w *Watchdog) fire(reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reason != "" {
		return
	}
	w.reason = reason
	for _, t := range w.threads {
		t.cancel(w.cause, w.reason)
	}
	w.threads = nil
}

// Watch adds th; after the limit passed, th is cancelled at once.
func (w *Watchdog) Watch(th *starlark.Thread) {
	if w == nil {
		return
	}
	rec := record(th)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reason != "" {
		cancelRecorded(th, rec, w.cause, w.reason)
		return
	}
	if len(w.threads) >= 64 && len(w.threads) == cap(w.threads) {
		// Forget the threads collected since (sweeps make new ones per
		// size): the list stays about as long as the threads alive.
		k := 0
		for _, t := range w.threads {
			if t.th.Value() != nil {
				w.threads[k] = t
				k++
			}
		}
		clear(w.threads[k:])
		w.threads = w.threads[:k]
	}
	w.threads = append(w.threads, watched{weak.Make(th), rec})
}

// watched is a thread and its cancel record, read when it is watched: the
// timer's goroutine must not read the thread's locals. The thread is held
// weakly: a thread nothing else holds can never run again, so it needs no
// cancelling, and holding it kept its locals alive (a kernel's thread
// holds its machine: a --timeout sweep kept every finished size's machine
// until the sweep ended, a -j 2 sweep with --max-memory 6G reached 9.7 GB).
type watched struct {
	th  weak.Pointer[starlark.Thread]
	rec *cancelRecord
}

func (t watched) cancel(cause error, reason string) {
	if th := t.th.Value(); th != nil {
		cancelRecorded(th, t.rec, cause, reason)
	}
}

// Stop releases the timer; threads already cancelled stay cancelled.
func (w *Watchdog) Stop() {
	if w == nil {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Lock()
	w.threads = nil
	w.mu.Unlock()
}
