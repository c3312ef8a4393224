package ccl

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

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
			memGuard.held.Store(sampleMemory())
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
