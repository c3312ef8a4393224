package ccl

import (
	"fmt"
	"math"
	"testing"

	"kernbench"
)

// simTime runs target once without verification (timing comparisons only)
// and returns its simulated time in ns.
func simTime(t *testing.T, target string, world int, bytes int64, sets ...string) float64 {
	t.Helper()
	rep, err := Run(target, Options{Embedded: kernbench.Files, WorldSize: world, Sizes: []int64{bytes}, Sets: sets})
	if err != nil {
		t.Fatalf("Run(%s, world %d, %d bytes): %v", target, world, bytes, err)
	}
	return rep.Results[0].SimTimeNs
}

// ring_allreduce on the fused primitives is as fast as the same ring written
// message by message (ring_allreduce_manual): within 1 % at 8 and 32 ranks
// (one cube, four cubes) for 1 MiB and 4 MiB.
func TestRingAllreducePrimitivesMatchManual(t *testing.T) {
	for _, world := range []int{8, 32} {
		for _, bytes := range []int64{1 << 20, 4 << 20} {
			t.Run(fmt.Sprintf("world=%d/bytes=%d", world, bytes), func(t *testing.T) {
				t.Parallel()
				manual := simTime(t, "ring_allreduce_manual", world, bytes)
				prims := simTime(t, "ring_allreduce", world, bytes)
				t.Logf("manual %.0f ns, primitives %.0f ns (%+.2f %%)", manual, prims, 100*(prims-manual)/manual)
				if math.Abs(prims-manual) > 0.01*manual {
					t.Errorf("ring_allreduce %.0f ns, ring_allreduce_manual %.0f ns: differ by more than 1 %%", prims, manual)
				}
			})
		}
	}
}

// ring_allreduce_bidir uses both ways of every ring link: where the ring
// crosses cubes (32 ranks on four cubes, one ucie link each way between
// neighbouring cubes) it is at least 20 % faster than the one-way ring, and
// on one cube, where the PE's NoC up-link is the limit, it is never slower.
func TestRingAllreduceBidirFaster(t *testing.T) {
	for _, tc := range []struct {
		world   int
		bytes   int64
		speedup float64 // one-way time / bidirectional time, at least
	}{
		{32, 4 << 20, 1.2},
		{32, 1 << 20, 1.2},
		{8, 4 << 20, 1},
		{8, 1 << 20, 1},
		{8, 64 << 10, 1},
	} {
		t.Run(fmt.Sprintf("world=%d/bytes=%d", tc.world, tc.bytes), func(t *testing.T) {
			t.Parallel()
			one := simTime(t, "ring_allreduce", tc.world, tc.bytes)
			bidir := simTime(t, "ring_allreduce_bidir", tc.world, tc.bytes)
			t.Logf("ring_allreduce %.0f ns, ring_allreduce_bidir %.0f ns: %.3f×", one, bidir, one/bidir)
			if one/bidir < tc.speedup {
				t.Errorf("ring_allreduce_bidir %.0f ns vs ring_allreduce %.0f ns: speed-up %.3f, want at least %.2f", bidir, one, one/bidir, tc.speedup)
			}
		})
	}
}
