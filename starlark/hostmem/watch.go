package hostmem

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"kernbench/starlark/script"
)

// The memory guard's watch over Starlark. The simulation's guard
// (TurnGuard) is read by the event loop between events; Starlark code
// that allocates without yielding to it (a module's top level, a
// neighbors() hook, a kernel building large lists or strings, Tile math,
// a chain of tl.spawn) never reached it, and the process died at the Go
// runtime's fatal error. A memory watch is a script.Watchdog whose threads
// poll it as they step (pollMemory) and are cancelled when a sample is
// over the run's limit: each thread stops at its next step, its error
// marked script.ErrMemory, kind OutOfMemory (exit 3), as the simulation's
// guard.

// memWatch is one run's watch and its limit.
type memWatch struct {
	limit     int64
	isDefault bool
	w         *script.Watchdog
}

var memWatches struct {
	sync.Mutex
	list []*memWatch
	// fired is the largest sample that fired a watch while watches were
	// registered: the figure a stopped run reports (Held), as the sample
	// it reads later may be lower and under the limit.
	fired atomic.Int64
}

// Watch registers a memory watch for a run with this limit and returns
// it (for script.Loader.MemoryWatch) and the function that ends it;
// isDefault says the limit is DefaultMaxMemory (the message says so).
// The run is registered with the guard meanwhile (GuardRun), and its
// Starlark polls while it runs, before and after the simulation. A limit
// below what the program itself holds (RuntimeBytes, the estimate's
// floor: such a limit refuses every size before it runs, which is how the
// estimate is read, --max-memory 1K) gets no watch, nor does no limit
// (<= 0).
func Watch(limit int64, isDefault bool) (*script.Watchdog, func()) {
	if limit < RuntimeBytes {
		return nil, func() {}
	}
	releaseGuard := GuardRun(limit)
	mw := &memWatch{limit: limit, isDefault: isDefault, w: script.NewMemoryWatch(pollMemory)}
	memWatches.Lock()
	if len(memWatches.list) == 0 {
		memWatches.fired.Store(0)
	}
	memWatches.list = append(memWatches.list, mw)
	memWatches.Unlock()
	var once sync.Once
	return mw.w, func() {
		once.Do(func() {
			memWatches.Lock()
			if i := slices.Index(memWatches.list, mw); i >= 0 {
				memWatches.list = slices.Delete(memWatches.list, i, i+1)
			}
			memWatches.Unlock()
			releaseGuard()
		})
	}
}

// checkWatches fires the watches whose limit the sample held passes. It
// does not first collect and return what the runtime holds unused, as
// the simulation's guard does: the soft limit (90 %) keeps the collector
// working already, so a sample over the limit is live memory, and a
// collection of a large heap takes long enough for the script to make its
// next, larger allocation (a string doubled, a list repeated) past what
// the system grants (under ulimit -v, a fatal error).
func checkWatches(held int64) {
	memWatches.Lock()
	defer memWatches.Unlock()
	for _, mw := range memWatches.list {
		if held > mw.limit {
			if held > memWatches.fired.Load() {
				memWatches.fired.Store(held)
			}
			mw.fire(held)
		}
	}
}

// smallestWatch is the smallest limit of the memory watches registered
// (ok false when there is none).
func smallestWatch() (limit int64, isDefault, ok bool) {
	memWatches.Lock()
	defer memWatches.Unlock()
	for _, mw := range memWatches.list {
		if !ok || mw.limit < limit {
			limit, isDefault, ok = mw.limit, mw.isDefault, true
		}
	}
	return limit, isDefault, ok
}

// fire cancels the watch's threads: the run holds held bytes.
func (mw *memWatch) fire(held int64) {
	mw.w.FireMemory(fmt.Sprintf("out of memory: the run holds %s of host memory, over --max-memory %s; try a smaller --bytes or --world-size, or raise --max-memory",
		FormatBytes(held), LimitText(mw.limit, mw.isDefault)))
}
