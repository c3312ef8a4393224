package script

import (
	"errors"
	"strings"
	"sync"
	"time"

	"go.starlark.net/starlark"
)

// timeoutMarker starts the cancel reason of a wall-clock timeout, so that
// IsTimeout can tell it from the step limit and other cancellations.
const timeoutMarker = "wall-clock timeout"

// Watchdog cancels every Starlark thread it watches once a wall-clock limit
// has passed. The step limit cannot stop everything: a loop that squares
// an ever larger integer is one step per iteration while each step takes
// longer and longer. A cancelled thread stops at its next step.
// A nil *Watchdog watches nothing.
type Watchdog struct {
	mu      sync.Mutex
	threads []*starlark.Thread
	reason  string // "" until the limit passed
	timer   *time.Timer
}

// NewWatchdog starts a watchdog that fires after d; what names the limit in
// the error ("--timeout 10s"). d <= 0 is no limit (nil).
func NewWatchdog(d time.Duration, what string) *Watchdog {
	if d <= 0 {
		return nil
	}
	w := &Watchdog{}
	w.timer = time.AfterFunc(d, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.reason = timeoutMarker + ": stopped after " + what
		for _, th := range w.threads {
			th.Cancel(w.reason)
		}
		w.threads = nil
	})
	return w
}

// Watch adds th; after the limit passed, th is cancelled at once.
func (w *Watchdog) Watch(th *starlark.Thread) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reason != "" {
		th.Cancel(w.reason)
		return
	}
	if len(w.threads) >= 1024 && len(w.threads) == cap(w.threads) {
		// Forget finished threads (sweeps make new ones per size).
		k := 0
		for _, t := range w.threads {
			if t.ExecutionSteps() == 0 || t.CallStackDepth() > 0 {
				w.threads[k] = t
				k++
			}
		}
		clear(w.threads[k:])
		w.threads = w.threads[:k]
	}
	w.threads = append(w.threads, th)
}

// Stop releases the timer; threads already cancelled stay cancelled.
func (w *Watchdog) Stop() {
	if w == nil {
		return
	}
	w.timer.Stop()
	w.mu.Lock()
	w.threads = nil
	w.mu.Unlock()
}

// IsTimeout reports whether err comes from a thread a Watchdog cancelled.
func IsTimeout(err error) bool {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		return strings.Contains(ee.Msg, timeoutMarker)
	}
	return err != nil && strings.Contains(err.Error(), timeoutMarker)
}
