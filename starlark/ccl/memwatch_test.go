package ccl

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench"
	"kernbench/engine/machine"
	"kernbench/starlark/errkind"
	"kernbench/starlark/script"
)

// Phase 2 replays the op_log in Go, where the simulation's event loop
// (which reads the memory guard in phase 1) does not run: its tiles grew
// the heap until the Go runtime's fatal error. The replay asks the guard,
// and a run over --max-memory there stops as in phase 1 (OutOfMemory,
// exit 3). The memory is made to pass the limit as phase 2 starts.
func TestPhase2AsksTheMemoryGuard(t *testing.T) {
	var ballast []byte
	onKeepPreRun = func(*machine.Machine) func() {
		return func() {
			ballast = make([]byte, 256<<20)
			for i := 0; i < len(ballast); i += 4096 {
				ballast[i] = 1
			}
		}
	}
	t.Cleanup(func() { onKeepPreRun, ballast = nil, nil })
	// The guard holds the process's resident set: what earlier tests
	// left mapped goes back to the system first, so that phase 1 runs
	// well under the limit.
	debug.FreeOSMemory()
	_, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 4, Sizes: []int64{64 << 10}, Verify: true, MaxMemory: 128 << 20})
	var f *Failure
	if !errors.As(err, &f) || f.ErrorKind() != errkind.HostMemory || !strings.Contains(f.Msg, "phase 2 (the replay of the op_log): out of memory") {
		t.Fatalf("got %v, want phase 2 stopped by the memory guard (OutOfMemory, exit 3)", err)
	}
	if len(ballast) == 0 {
		t.Fatal("phase 2 did not start")
	}
}

// The default --max-memory is at most half the address space an
// RLIMIT_AS leaves (room), and the memory figure when there is no limit.
func TestDefaultUnderAddressSpace(t *testing.T) {
	for _, c := range []struct {
		name        string
		limit, room int64
		want        int64
		fromAS      bool
	}{
		{"no address-space limit", 8 << 30, 0, 8 << 30, false},
		{"the limit leaves more than twice the memory", 8 << 30, 32 << 30, 8 << 30, false},
		{"ulimit -v 3G leaves 1.5 GiB", 16 << 30, 1536 << 20, 768 << 20, true},
		{"no memory figure", 0, 4 << 30, 2 << 30, true},
		{"nothing left", 16 << 30, 1, 1, true},
	} {
		got, fromAS := underAddressSpace(c.limit, c.room)
		if got != c.want || fromAS != c.fromAS {
			t.Errorf("%s: underAddressSpace(%d, %d) = %d, %v; want %d, %v", c.name, c.limit, c.room, got, fromAS, c.want, c.fromAS)
		}
	}
}

// The error of a run the memory watch stopped names the sample that
// passed the limit, not a later one: by the time the simulation reports
// it, the sampler may have read less (the stopped thread's values are
// garbage), and the message said "holds 2.9 GiB of host memory, over
// --max-memory 3.0 GiB".
func TestMemoryStopNamesTheSampleOverTheLimit(t *testing.T) {
	const limit = 3 << 30
	_, release := watchMemory(limit, false)
	defer release()
	checkWatches(limit + 50<<20)
	memGuard.held.Store(limit - 100<<20) // a later, lower sample
	var got int64
	w := &world{outOfMemory: func(held int64) error { got = held; return errors.New("out of memory") }}
	_ = w.memoryStop(fmt.Errorf("thread cancelled: %w", script.ErrMemory))
	if got != limit+50<<20 {
		t.Errorf("the error names %s held, want %s (the sample over --max-memory %s)", FormatBytes(got), FormatBytes(limit+50<<20), FormatBytes(limit))
	}
}

// The simulation's guard samples by the run's own progress, not by a
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
			m := &machine.Machine{}
			if tc.timingOnly {
				m.SetTimingOnly()
			}
			var stopped int64
			w := &world{m: m, outOfMemory: func(held int64) error { stopped = held; return errors.New("out of memory") }}
			limit := sampleMemory() + 64*mib
			guard := w.guardTurns(limit, false)
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
	limit := max(sampleMemory()+64*mib, runtimeBytes)
	watch, release := watchMemory(limit, false)
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
