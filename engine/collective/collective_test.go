package collective

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// nccl-tests' busbw factors (PERFORMANCE.md of nccl-tests) for 4 ranks.
func TestBusFactor(t *testing.T) {
	want := map[string]float64{
		"allreduce": 1.5, "reduce_scatter": 0.75, "allgather": 0.75,
		"broadcast": 1, "reduce": 1, "alltoall": 0.75,
	}
	got := map[string]float64{}
	for _, c := range table {
		got[c.Name] = c.BusFactor(4)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BusFactor(4) (-want +got):\n%s", diff)
	}
	if _, ok := Lookup("all_reduce"); ok {
		t.Error(`Lookup("all_reduce") found a collective`)
	}
}
