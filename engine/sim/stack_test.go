package sim

import (
	"runtime"
	"testing"
)

// A process of SpawnDeep has a 16 KiB stack from its start, grown while it
// is a few frames deep: parked processes hold that much stack each even
// when they never went deep. One of Spawn keeps the stack Go starts it
// with. Either way the run is the same.
func TestSpawnDeepGrowsTheStackAsTheProcessStarts(t *testing.T) {
	const procs = 256
	for _, deep := range []bool{false, true} {
		s := New()
		spawn := s.Spawn
		if deep {
			spawn = s.SpawnDeep
		}
		var ends []Time
		for i := range procs {
			spawn("p", func(p *Proc) {
				if p.Sleep(Time(i)) == nil && p.Park() == nil {
					ends = append(ends, s.Now())
				}
			})
		}
		before := stackInuse()
		s.At(Time(procs), HandlerFunc(func() {
			held := stackInuse() - before
			if grown := held >= procs*12<<10; grown != deep { // (a margin below 16 KiB)
				t.Errorf("deep %v: %d parked processes hold %d KiB of stack", deep, procs, held>>10)
			}
			for _, p := range s.procs {
				p.Wake()
			}
		}))
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		if len(ends) != procs || ends[0] != Time(procs) {
			t.Errorf("deep %v: %d processes ended, first at %v", deep, len(ends), ends)
		}
		s.Close()
	}
}

func stackInuse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.StackInuse)
}
