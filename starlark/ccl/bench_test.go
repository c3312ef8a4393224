package ccl

import (
	"fmt"
	"kernbench/starlark/hostmem"
	"runtime"
	"testing"

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
