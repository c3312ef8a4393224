package hostmem

import (
	"errors"
	"kernbench/starlark/script"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// A run that outgrows --max-memory is told what would hold less in its
// own mode: --timing-only is no help to a timing-only run, and
// --verify-data=false none to an unverified one.
func TestOutOfMemorySuggestsWhatTheModeLacks(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		timingOnly, verified bool
		want                 string
	}{
		{"verified", false, true, tryVerified},
		{"unverified", false, false, tryUnverified},
		{"timing-only", true, false, tryTimingOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&OutOfMemoryError{Limit: 1 << 20, Try: TryLessMemory(tc.timingOnly, tc.verified)}).Error()
			if !strings.Contains(got, "try "+tc.want+tryKernelState+", or raise --max-memory") {
				t.Errorf("message %q does not suggest %q", got, tc.want)
			}
		})
	}
}

// A run stopped by the default limit says the figure is the default, so a
// user who never gave --max-memory knows where it comes from; a limit the
// user gave is named as given.
func TestOutOfMemoryNamesTheDefaultLimit(t *testing.T) {
	def := (&OutOfMemoryError{Limit: 1 << 30, DefaultLimit: true}).Error()
	if !strings.Contains(def, "over --max-memory 1.0 GiB (the default: 80% of the machine's memory, cgroup limit included);") {
		t.Errorf("default limit: message %q does not say it is the default", def)
	}
	given := (&OutOfMemoryError{Limit: 1 << 30}).Error()
	if !strings.Contains(given, "over --max-memory 1.0 GiB;") {
		t.Errorf("given limit: message %q does not name it as given", given)
	}
}

// The error of a run the memory watch stopped names the sample (Held) that
// passed the limit, not a later one: by the time the simulation reports
// it, the sampler may have read less (the stopped thread's values are
// garbage), and the message said "holds 2.9 GiB of host memory, over
// --max-memory 3.0 GiB".
func TestMemoryStopNamesTheSampleOverTheLimit(t *testing.T) {
	const limit = 3 << 30
	_, release := Watch(limit, false)
	defer release()
	checkWatches(limit + 50<<20)
	memGuard.held.Store(limit - 100<<20) // a later, lower sample
	if got := Held(); got != limit+50<<20 {
		t.Errorf("the error names %s held, want %s (the sample over --max-memory %s)", FormatBytes(got), FormatBytes(limit+50<<20), FormatBytes(limit))
	}
}

// The simulation's guard (TurnGuard) samples by the run's own progress, not by a
// clock: a run that holds bytes at least every dataSampleTurns-th turn
// (its stores touch fresh pages, which no collection sees), a
// timing-only run every sparseSampleTurns-th. Memory outside the Go heap (fresh mapped
// pages, written here) grows the resident set without a collection.
func TestGuardTurnsSampleWithoutAClock(t *testing.T) {
	if residentBytes(os.ReadFile) == 0 {
		t.Skip("no /proc/self/statm: the held figure is the runtime's")
	}
	const mib = 1 << 20
	for _, tc := range []struct {
		name       string
		timingOnly bool
		within     int // turns after the memory grew
	}{
		{"a run that holds bytes", false, dataSampleTurns},
		{"a timing-only run", true, sparseSampleTurns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.FreeOSMemory()
			var stopped int64
			limit := sampleMemory() + 64*mib
			guard := TurnGuard(limit, tc.timingOnly, func(held int64) error { stopped = held; return errors.New("out of memory") })
			if err := guard(); err != nil {
				t.Fatalf("first turn, under the limit: %v", err)
			}
			b, release := untouchedBytes(t, 128*mib)
			defer release()
			for i := 0; i < len(b); i += os.Getpagesize() {
				b[i] = 1
			}
			turns := 0
			for ; turns < tc.within && stopped == 0; turns++ {
				_ = guard()
			}
			if stopped <= limit {
				t.Fatalf("128 MiB written past a limit 64 MiB above the resident set: not stopped within %d turns", tc.within)
			}
		})
	}
}

// Starlark that allocates without yielding to a simulation is watched by
// its own polls (pollMemory), which sample after a collection: a watched
// thread whose process passes the limit stops at a later step, its error
// marked script.ErrMemory. The script collects a thousand times (gc()):
// a count of collections, not a clock, says the watch never fired.
func TestCollectionsSampleForTheMemoryWatch(t *testing.T) {
	if residentBytes(os.ReadFile) == 0 {
		t.Skip("no /proc/self/statm: the held figure is the runtime's")
	}
	const mib = 1 << 20
	debug.FreeOSMemory()
	limit := max(sampleMemory()+64*mib, RuntimeBytes)
	watch, release := Watch(limit, false)
	defer release()
	b, unmap := untouchedBytes(t, int(limit))
	defer unmap()
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	loader := &script.Loader{MaxSteps: 10_000_000, MemoryWatch: watch}
	th := loader.NewThread("watched")
	gc := starlark.NewBuiltin("gc", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		runtime.GC()
		return starlark.None, nil
	})
	_, err := starlark.ExecFileOptions(&syntax.FileOptions{}, th, "watched.star", "def f():\n    for i in range(1000):\n        gc()\nf()\n", starlark.StringDict{"gc": gc})
	if err = script.Stopped(th, err); !script.IsMemory(err) {
		t.Fatalf("got %v, want the thread stopped by the memory watch", err)
	}
}
