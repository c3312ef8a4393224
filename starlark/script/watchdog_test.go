package script

import (
	"runtime"
	"sync/atomic"
	"testing"

	"go.starlark.net/starlark"
)

// A watchdog must not keep the threads it watches alive: a thread's locals
// hold a kernel's machine, and a --timeout sweep kept every finished
// size's machine until the sweep ended. Threads nothing else holds are
// collected; one still held is cancelled when the limit passes.
func TestWatchdogDoesNotKeepThreads(t *testing.T) {
	w := ManualWatchdog("--timeout 1h")
	defer w.Stop()
	l := &Loader{Watchdog: w}
	const n = 200
	var freed atomic.Int64
	for range n {
		th := l.NewThread("t")
		state := new([1 << 16]byte) // what a kernel's locals hold
		th.SetLocal("state", state)
		runtime.AddCleanup(state, func(*atomic.Int64) { freed.Add(1) }, &freed)
	}
	kept := l.NewThread("kept")
	// Cleanups run on their own goroutine after the collection that found
	// the object unreachable: collect until they have run, a bounded
	// number of times (no clock).
	for i := 0; i < 100 && freed.Load() < n; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if got := freed.Load(); got < n {
		t.Errorf("%d of %d finished threads' state collected; the watchdog keeps the others alive", got, n)
	}
	w.Fire()
	_, err := starlark.ExecFile(kept, "x.star", "x = 1\n", nil)
	if err = Stopped(kept, err); !IsTimeout(err) {
		t.Errorf("a thread still held is not cancelled when the limit passes: got %v", err)
	}
	runtime.KeepAlive(kept)
}

// A memory watch cancels its threads, those watched after it fired too,
// and marks their errors ErrMemory, not ErrTimeout.
func TestMemoryWatch(t *testing.T) {
	w := NewMemoryWatch(nil)
	l := &Loader{MemoryWatch: w}
	before := l.NewThread("before")
	w.FireMemory("out of memory: test")
	after := l.NewThread("after")
	for _, th := range []*starlark.Thread{before, after} {
		_, err := starlark.ExecFile(th, "x.star", "x = 1\n", nil)
		err = Stopped(th, err)
		if !IsMemory(err) || IsTimeout(err) {
			t.Errorf("%s: got %v, want an error marked ErrMemory", th.Name, err)
		}
	}
}
