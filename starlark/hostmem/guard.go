package hostmem

import (
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
)

// The run-time guard. While runs with a limit are active, the Go soft
// memory limit is 90 % of the smallest of them (the collector works harder
// near it; where the installed Settings set it, as cmd/kernbench's do),
// and the memory the process holds is sampled at points the run
// itself determines, never by a clock (a ticker's samples came late on a
// loaded machine, and where a run stopped depended on it):
//
//   - by Starlark's steps (script.NewMemoryWatch, pollMemory): a watched
//     thread polls every 64 steps, and every 16 while each poll finds a
//     new garbage collection; the first poll after a collection samples.
//     Collections are started by what the run allocates (near the soft
//     limit, by every allocation), so a thread that allocates fast polls
//     often and one that does not hardly ever samples. This watches the
//     Starlark that allocates without yielding to the simulation (a
//     module's top level, a kernel's lists and strings, Tile math). A
//     cleanup run after each collection was tried first: it runs when
//     the scheduler gets to it, and under load a string doubled in a
//     loop reached a gigabyte before one did.
//   - at the simulation's guard turns (every sim.GuardEvery events, and
//     every 64 records and each math record of phase 2's replay;
//     TurnGuard): the first turn after a collection, and every
//     dataSampleTurns-th turn of a run that holds bytes (its stores touch
//     fresh pages without allocating) or every sparseSampleTurns-th of a
//     timing-only run or a replay.
//   - when a rank's kernel returns (Sample, from starlark/ccl): a kernel
//     of a few steps that sends nothing reaches neither of the above.
//
// A sample reads /proc/self/statm through a file kept open, into a buffer
// on the stack (about 1 µs; a fresh open costs 8 µs); a poll that finds
// no new collection costs about 7 ns. docs/instructions.sh counts 0.4 %
// more instructions than with a ticker on its timing-only ring, 0.3 % on
// a verified 16-rank ring of 1 MiB and 0.9 % on ring_allreduce_manual at
// 16 ranks × 256K (830,000 Starlark steps). A cadence of 16 steps cost 9
// % there; one of 128 steps let a string doubled in a loop (12 steps a
// turn) double ten times between polls. Under --max-memory 128M the
// bad-input cases stop at a peak of 277 MB (a string doubled in a loop:
// once more past the limit), 140 MB (lists of 32 MB) and 187 MB (tiles
// of 16 MB), the same at every run (/usr/bin/time).
//
// Sampling only ever ends runs: what a run simulates is the same with or
// without it. Both the limit and the sample are the process's: runs side
// by side in one process (-j, or the CLI tests' in-process commands) are
// measured together, which is why those tests run a command with
// --max-memory alone. The soft limit composes with HoldLargeHeap's GC
// percent: the collector runs at whichever of the two triggers first.

var memGuard struct {
	sync.Mutex
	limits []int64      // of active runs
	saved  int64        // the soft limit before the first of them
	set    Settings     // the settings installed as the first of them registered
	held   atomic.Int64 // the last sample
}

// How many guard turns pass between two samples when no collection ran
// between them. A run that holds bytes (dataSampleTurns) writes them
// without allocating: its stores touch fresh pages, which no collection
// sees. A timing-only run, and a replay (sparseSampleTurns), grows by
// allocating, which the collections see: for them it is a backstop.
const (
	dataSampleTurns   = 4
	sparseSampleTurns = 16
)

// GuardRun registers a run with a limit (the soft limit, where the
// installed Settings allow it) and returns the function that ends the
// registration. A limit <= 0 registers nothing.
func GuardRun(limit int64) (release func()) {
	if limit <= 0 {
		return func() {}
	}
	memGuard.Lock()
	defer memGuard.Unlock()
	if len(memGuard.limits) == 0 {
		memGuard.set = installed()
		if memGuard.set.SetMemoryLimit != nil {
			memGuard.saved = memGuard.set.SetMemoryLimit(-1)
		}
		memGuard.held.Store(sampleMemory())
	}
	memGuard.limits = append(memGuard.limits, limit)
	setSoftLimit()
	var once sync.Once
	return func() {
		once.Do(func() {
			memGuard.Lock()
			defer memGuard.Unlock()
			for i, l := range memGuard.limits {
				if l == limit {
					memGuard.limits = append(memGuard.limits[:i], memGuard.limits[i+1:]...)
					break
				}
			}
			if len(memGuard.limits) == 0 {
				if memGuard.set.SetMemoryLimit != nil {
					memGuard.set.SetMemoryLimit(memGuard.saved)
				}
				return
			}
			setSoftLimit()
		})
	}
}

func setSoftLimit() {
	if memGuard.set.SetMemoryLimit == nil {
		return
	}
	soft := int64(math.MaxInt64)
	for _, l := range memGuard.limits {
		soft = min(soft, l/10*9)
	}
	memGuard.set.SetMemoryLimit(min(soft, memGuard.saved))
}

// TurnGuard is a guard for a simulation's turns (sim.Sim.Guard) or a
// replay's (oplog.Log.Guard): each gets its own, which samples at its
// first turn (phase 2 begins after the pre-run image was kept), then at
// the turns the run-time guard's comment lists, every
// dataSampleTurns-th, or with sparse (a timing-only run, a replay) every
// sparseSampleTurns-th. A replay writes into blocks the pre-run image
// already holds: what it adds, it allocates (tiles), so it samples as a
// timing-only run does. Over limit, the guard returns over's error for
// the figure held.
func TurnGuard(limit int64, sparse bool, over func(held int64) error) func() error {
	every := dataSampleTurns
	if sparse {
		every = sparseSampleTurns
	}
	turn := 0
	seen := collectionsSoFar()
	return func() error {
		collections := collectionsSoFar()
		due := turn%every == 0 || collections != seen
		turn++
		if !due {
			return nil
		}
		seen = collections
		h := sampleMemory()
		memGuard.held.Store(h)
		if h <= limit {
			return nil
		}
		// Part of what the runtime holds may be garbage or freed pages
		// not yet returned (an earlier size's image): collect and return
		// them before calling the run out of memory.
		debug.FreeOSMemory()
		h = sampleMemory()
		memGuard.held.Store(h)
		if h <= limit {
			return nil
		}
		return over(h)
	}
}

// Settle is called as a run with this limit starts: when the process is
// over the limit already, it collects and returns what the runtime holds
// unused (an earlier run's garbage, a sweep's larger size), as TurnGuard
// does before calling a run out of memory. A sample taken later where
// no such retry can be made (Sample, when a kernel returns) then counts
// this run's memory, not an earlier one's. One sample (about 1 µs) when
// the process is under the limit.
func Settle(limit int64) {
	h := sampleMemory()
	if h > limit {
		debug.FreeOSMemory()
		h = sampleMemory()
	}
	memGuard.held.Store(h)
}

// Held is the figure a run the memory watch stopped reports: the largest
// sample that fired a watch while watches were registered, or the last
// sample if that is larger. A sample read later may be lower than the one
// that fired, and under the limit (the stopped thread's values are
// garbage by then).
func Held() int64 {
	return max(memGuard.held.Load(), memWatches.fired.Load())
}

// OutOfMemoryError ends a run whose host memory passed --max-memory.
type OutOfMemoryError struct {
	At       sim.Time
	Messages uint64
	Held     int64
	Limit    int64
	// DefaultLimit: Limit is DefaultMaxMemory, no --max-memory was given.
	DefaultLimit bool
	// Try lists what would hold less, for the run's mode (a timing-only
	// run keeps no bytes, so --timing-only is no help to it).
	Try string
	// Asked, when > 0, is the tile refused (AllocRefused): Held and it
	// together pass the limit.
	Asked int64
}

// ErrorKind is errkind.HostMemory (exit 3, as a run stopped by a limit).
func (e *OutOfMemoryError) ErrorKind() *errkind.Kind { return errkind.HostMemory }

func (e *OutOfMemoryError) Error() string {
	try := e.Try
	if try == "" {
		try = tryVerified
	}
	asked := ""
	if e.Asked > 0 {
		asked = fmt.Sprintf(" with the %s tile a kernel asked for next", FormatBytes(e.Asked))
	}
	return fmt.Sprintf("out of memory at t=%v, %d messages simulated: the run holds %s of host memory, over --max-memory %s%s; "+
		"try %s, or raise --max-memory", e.At, e.Messages, FormatBytes(e.Held), LimitText(e.Limit, e.DefaultLimit), asked, try)
}

// TryLessMemory is what an OutOfMemoryError of a run in this mode
// suggests: what its mode lacks, and the kernels' own values. The event
// loop's guard and a kernel's memory watch see the same memory, and
// either may be first to find it over the limit: both suggest the same.
func TryLessMemory(timingOnly, verified bool) string {
	switch {
	case timingOnly:
		return tryTimingOnly + tryKernelState
	case !verified:
		return tryUnverified + tryKernelState
	}
	return tryVerified + tryKernelState
}

// What an OutOfMemoryError suggests, by the run's mode.
const (
	tryVerified   = "--timing-only, a smaller --bytes or --verify-data=false"
	tryUnverified = "--timing-only or a smaller --bytes"
	tryTimingOnly = "a smaller --bytes or --world-size (a timing-only run keeps no data: its memory is per-rank and per-message state)"
	// tryKernelState: what no flag shrinks.
	tryKernelState = "; the memory may also be what the kernel's own code keeps (lists, strings, tiles it holds): keep less there"
)
