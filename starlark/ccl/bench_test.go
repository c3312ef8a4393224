package ccl

import (
	"fmt"
	"runtime"
	"testing"

	"kernbench"
)

// BenchmarkRingAllreduce64 measures simulated IPCQ messages per second of
// wall time for the shipped Starlark ring_allreduce at 64 ranks (2 SIPs),
// messages = sends, phase 1 only (no verification), plus allocations per
// message. Each op is a whole run: config, machine, topology, bench
// buffers, simulation.
func BenchmarkRingAllreduce64(b *testing.B) {
	for _, count := range []int64{1 << 14, 1 << 18} {
		b.Run(fmt.Sprintf("count=%d", count), func(b *testing.B) {
			var sends int64
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				rep, err := Run("ring_allreduce", Options{
					Embedded: kernbench.Files, WorldSize: 64, Sets: []string{"system.sips=2"},
					Counts: []int64{count},
				})
				if err != nil {
					b.Fatal(err)
				}
				sends += rep.Results[0].Ops.Send
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(sends)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(sends), "allocs/msg")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(sends), "B/msg")
		})
	}
}
