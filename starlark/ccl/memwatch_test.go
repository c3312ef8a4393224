package ccl

import (
	"errors"
	"runtime/debug"
	"strings"
	"testing"

	"kernbench"
	"kernbench/engine/machine"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
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
	var f *report.Failure
	if !errors.As(err, &f) || f.ErrorKind() != errkind.HostMemory || !strings.Contains(f.Msg, "phase 2 (the replay of the op_log): out of memory") {
		t.Fatalf("got %v, want phase 2 stopped by the memory guard (OutOfMemory, exit 3)", err)
	}
	if len(ballast) == 0 {
		t.Fatal("phase 2 did not start")
	}
}
