package ccl

import (
	"errors"
	"fmt"
	"kernbench/starlark/report"
	"math"
	"strings"
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
	longTest(t)
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

// hier_allreduce is correct wherever every cube in use holds the same
// number of ranks (one cube, two, three, four; ranks spread by placement),
// for ragged counts, in place and out of place.
func TestHierAllreduce(t *testing.T) {
	for _, tc := range []struct {
		world int
		sets  []string
	}{
		{1, nil}, {2, nil}, {5, nil}, {8, nil}, {16, nil}, {24, nil}, {32, nil},
		{8, []string{"system.placement=[0,8,16,24,1,9,17,25]"}},
		{4, []string{"system.sips=2", "system.cubes_per_sip=1", "system.pes_per_cube=2"}},
	} {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("world=%d/%v/in_place=%v", tc.world, tc.sets, inPlace), func(t *testing.T) {
				t.Parallel()
				rep := runVerified(t, "hier_allreduce", Options{WorldSize: tc.world, Sets: tc.sets, InPlace: inPlace,
					Counts: []int64{0, 1, 37, 5000}, RedOp: "avg", DType: "f32"})
				checkCorrect(t, rep)
			})
		}
	}
	t.Run("unequal cubes", func(t *testing.T) {
		_, err := Run("hier_allreduce", Options{Embedded: kernbench.Files, WorldSize: 12, Counts: []int64{16}})
		var f *report.Failure
		if !errors.As(err, &f) || f.ErrorKind().Status != report.ExitUsage || !strings.Contains(f.Msg, "cubes hold [8, 4] ranks") {
			t.Errorf("world 12: got %v, want an init error (exit %d) naming the cube sizes", err, report.ExitUsage)
		}
	})
	t.Run("faster than the flat ring across cubes", func(t *testing.T) {
		flat := simTime(t, "ring_allreduce", 32, 4<<20)
		hier := simTime(t, "hier_allreduce", 32, 4<<20)
		t.Logf("32 ranks × 4 MiB: ring_allreduce %.0f ns, hier_allreduce %.0f ns: %.3f×", flat, hier, flat/hier)
		if flat/hier < 1.2 {
			t.Errorf("hier_allreduce %.0f ns vs ring_allreduce %.0f ns: want at least 1.2× faster", hier, flat)
		}
	})
}
