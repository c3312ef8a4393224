package ccl

import (
	"errors"
	"fmt"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
)

// asTheCLI makes the runs of a benchmark change the process's settings
// as kernbench's do (hostmem.ProcessSettings: the collector's headroom,
// the soft limit, populated buffers), so that it measures what a command
// costs.
func asTheCLI(b *testing.B) {
	hostmem.Install(hostmem.ProcessSettings())
	b.Cleanup(func() { hostmem.Install(hostmem.Settings{}) })
}

// BenchmarkRingAllreduce64 measures simulated IPCQ messages per second of
// wall time for the shipped Starlark ring allreduce at 64 ranks (2 SIPs),
// messages = sends, phase 1 only (no verification), plus allocations, and
// the interpreter work (Starlark steps and tl builtin calls) per message:
// ring_allreduce on the fused primitives against ring_allreduce_manual, the
// same ring written message by message. Each op is a whole run: config,
// machine, topology, bench buffers, simulation.
func BenchmarkRingAllreduce64(b *testing.B) {
	asTheCLI(b)
	for _, algo := range []string{"ring_allreduce", "ring_allreduce_manual"} {
		for _, count := range []int64{1 << 14, 1 << 19} {
			b.Run(fmt.Sprintf("%s/count=%d", algo, count), func(b *testing.B) {
				var sends, steps, calls, runs int64
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for b.Loop() {
					runs++
					rep, err := Run(algo, Options{
						Embedded: kernbench.Files, WorldSize: 64, Sets: []string{"system.sips=2"},
						Counts: []int64{count}, Detail: true,
					})
					if err != nil {
						b.Fatal(err)
					}
					r := rep.Results[0]
					sends += r.Ops.Send
					steps += r.Interp.Steps
					calls += r.Interp.BuiltinCalls
				}
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(sends)/float64(runs), "msgs/op")
				b.ReportMetric(float64(steps)/float64(sends), "steps/msg")
				b.ReportMetric(float64(calls)/float64(sends), "calls/msg")
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(sends), "allocs/msg")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(sends), "B/msg")
			})
		}
	}
}

// BenchmarkRingTimingOnly measures the --timing-only job of the performance
// targets: ring_allreduce with 4 KiB messages, N × 32 KiB per rank, whole
// run (config, machine, simulation), no bytes moved. ns/op over msgs/op
// is the time per simulated send (the benchmark reads no clock itself).
func BenchmarkRingTimingOnly(b *testing.B) {
	asTheCLI(b)
	for _, world := range []int{64, 256} {
		b.Run(fmt.Sprintf("N=%d", world), func(b *testing.B) {
			var sends, runs int64
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				runs++
				rep, err := Run("ring_allreduce", Options{
					Embedded: kernbench.Files, WorldSize: world,
					Sets:   []string{fmt.Sprintf("system.sips=%d", (world+31)/32)},
					Counts: []int64{int64(world) * 32 * 1024 / 4}, TimingOnly: true,
				})
				if err != nil {
					b.Fatal(err)
				}
				sends += rep.Results[0].Ops.Send
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(sends)/float64(runs), "msgs/op")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(sends), "allocs/msg")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(sends), "B/msg")
		})
	}
}

// BenchmarkRingVerified64 is the verified job of the performance targets:
// ring_allreduce at 64 ranks × 2 MiB (4 KiB messages), data moved, the
// reference check and the phase-2 replay included.
func BenchmarkRingVerified64(b *testing.B) {
	asTheCLI(b)
	var sends, runs int64
	for b.Loop() {
		runs++
		rep, err := Run("ring_allreduce", Options{
			Embedded: kernbench.Files, WorldSize: 64, Sets: []string{"system.sips=2"},
			Counts: []int64{1 << 19}, Verify: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		if r := rep.Results[0]; r.Wrong != 0 || r.Phase2Match == nil || !*r.Phase2Match {
			b.Fatalf("wrong %d, phase2 %v", r.Wrong, r.Phase2Match)
		}
		sends += rep.Results[0].Ops.Send
	}
	b.ReportMetric(float64(sends)/float64(runs), "msgs/op")
}

// Bench buffers that do not all fit their simulated memories are refused
// before any of them is backed with host memory: the run names the buffer
// that does not fit, as the allocation itself would, and the process
// allocates no more than the set-up around it (a 1 GiB sendbuf and the
// reference's 1 GiB of sums came first, and a process that had freed
// that much before spent seconds clearing it again).
func TestBuffersThatDoNotFitAreRefusedBeforeBacking(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		count int64
		want  string
	}{
		{"hbm, the second buffer", Options{WorldSize: 2}, 1 << 28,
			"bench: rank 0 recvbuf (268435456 × f32) does not fit: hbm[pe 0]: cannot allocate 1073741824 bytes (capacity 1073741824, 1073741824 in use); use a smaller --count or --bytes (or a larger system.memory.hbm.capacity)"},
		{"sram shared by a cube's ranks", Options{WorldSize: 8, DataSpace: "sram"}, 1 << 18,
			"bench: rank 4 sendbuf (262144 × f32) does not fit: sram[cube 0]: cannot allocate 1048576 bytes (capacity 8388608, 8388608 in use); try --data-space hbm or a smaller --count or --bytes"},
		{"in place, sram", Options{WorldSize: 8, DataSpace: "sram", InPlace: true}, 1 << 19,
			"bench: rank 4 buffer (524288 × f32) does not fit: sram[cube 0]: cannot allocate 2097152 bytes (capacity 8388608, 8388608 in use); try --data-space hbm or a smaller --count or --bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.Embedded, o.Verify, o.Counts = kernbench.Files, true, []int64{tt.count}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Run("ring_allreduce", o)
			runtime.ReadMemStats(&after)
			var f *report.Failure
			if !errors.As(err, &f) {
				t.Fatalf("got %v, want a Failure", err)
			}
			if diff := cmp.Diff([]any{"OutOfMemory", tt.want}, []any{f.ErrorKind().Name, f.Msg}); diff != "" {
				t.Errorf("kind, message (-want +got):\n%s", diff)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
				t.Errorf("the refused run allocated %d bytes of host memory, want at most 64 MiB (nothing for its buffers)", got)
			}
		})
	}
}
