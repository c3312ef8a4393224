package sim

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A process of SpawnDeep has a 16 KiB stack from its start, grown while it
// is a few frames deep: parked processes hold that much stack each even
// when they never went deep. The run is the same as with Spawn.
func TestSpawnDeepGrowsTheStackAsTheProcessStarts(t *testing.T) {
	const procs = 256
	// No collection while the processes are parked: it would halve the
	// stacks of those that use little of them.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var runs [2][]Time
	for i, deep := range []bool{false, true} {
		s := New()
		spawn := s.Spawn
		if deep {
			spawn = s.SpawnDeep
		}
		for j := range procs {
			spawn("p", func(p *Proc) {
				if p.Sleep(Time(j)) == nil && p.Park() == nil {
					runs[i] = append(runs[i], s.Now())
				}
			})
		}
		before := stackInuse()
		s.At(Time(procs), HandlerFunc(func() {
			// (A margin below 16 KiB: the runtime counts stacks by span.)
			if held := stackInuse() - before; deep && held < procs*12<<10 {
				t.Errorf("%d parked processes of SpawnDeep hold %d KiB of stack, want 16 each", procs, held>>10)
			}
			for _, p := range s.procs {
				p.Wake()
			}
		}))
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if len(runs[0]) != procs {
		t.Errorf("%d of %d processes ended", len(runs[0]), procs)
	}
	if diff := cmp.Diff(runs[0], runs[1]); diff != "" {
		t.Errorf("SpawnDeep's run differs from Spawn's (-Spawn +SpawnDeep):\n%s", diff)
	}
}

func stackInuse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.StackInuse)
}
