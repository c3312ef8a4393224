package ccl

import (
	"testing"

	"kernbench"
)

// BenchmarkRingAllreduce64 measures simulated IPCQ messages per second of
// wall time for ring_allreduce at 64 ranks (messages = sends).
func BenchmarkRingAllreduce64(b *testing.B) {
	var sends int64
	for b.Loop() {
		rep, err := Run("ring_allreduce", Options{
			Embedded: kernbench.Files, WorldSize: 64, Sets: []string{"system.sips=2"},
			Counts: []int64{1 << 16},
		})
		if err != nil {
			b.Fatal(err)
		}
		sends += rep.Results[0].Ops.Send
	}
	b.ReportMetric(float64(sends)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(sends)/float64(b.N), "msgs/op")
}
