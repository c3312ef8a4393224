package ccl

import (
	"math"
	"runtime/debug"
	"testing"

	"kernbench"

	"kernbench/engine/machine"
	"kernbench/starlark/hostmem"
)

// gcPercentNow is the process's GC percent (reading it sets it: set back).
func gcPercentNow() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// An unverified run holds its simulated memory to the end as a verified
// one does: the collector keeps hostmem's headroom for it, not Go's 100 %
// (a kernel that allocates much, rd_allreduce 8 × 16M, doubled the memory
// before a collection), and the memory estimate counts that headroom. The
// GC percent is asked of the installed settings.
func TestUnverifiedRunHoldsLargeHeap(t *testing.T) {
	t.Setenv("GOGC", "") // the environment's GOGC would win
	percent := 100
	hostmem.Install(hostmem.Settings{SetGCPercent: func(p int) int { old := percent; percent = p; return old }})
	t.Cleanup(func() { hostmem.Install(hostmem.Settings{}) })
	var held int
	afterPhase1 = func(*machine.Machine) { held = percent }
	defer func() { afterPhase1 = nil }()
	// 8 ranks × 2 × 16 MiB: 256 MiB of buffers, the smallest held.
	if _, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 8, Sizes: []int64{16 << 20}}); err != nil {
		t.Fatal(err)
	}
	if want := hostmem.GCPercent(256 << 20); held > want {
		t.Errorf("while the unverified run simulated, the GC percent was %d, want at most %d (the headroom of its 256 MiB of buffers)", held, want)
	}
	if percent != 100 {
		t.Errorf("after the run the GC percent is %d, want the 100 it had before", percent)
	}
}

// A program that installs no settings (a library user, these tests) keeps
// its process-wide settings through a run that holds large blocks under a
// limit: the soft memory limit and the GC percent are the ones it had.
func TestRunChangesNoProcessSettings(t *testing.T) {
	t.Setenv("GOGC", "")
	hostmem.Install(hostmem.Settings{})
	type settings struct {
		Limit   int64
		Percent int
	}
	before := settings{debug.SetMemoryLimit(-1), gcPercentNow()}
	var during settings
	afterPhase1 = func(*machine.Machine) { during = settings{debug.SetMemoryLimit(-1), gcPercentNow()} }
	defer func() { afterPhase1 = nil }()
	if _, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 8, Sizes: []int64{16 << 20}, Verify: true, MaxMemory: math.MaxInt64 / 2}); err != nil {
		t.Fatal(err)
	}
	if during != before {
		t.Errorf("during the run the process's settings were %+v, want the %+v it had", during, before)
	}
}
