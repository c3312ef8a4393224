package mscclio

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/msccl"
	"kernbench/engine/topology"
)

// The neighbour map has one direction per (peer, channel) a thread block
// uses, on both ends, named g<peer>[_<chan>], and it validates.
func TestNeighbors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("../../testdata/msccl", "allreduce_ring_ch2_4.xml"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := msccl.Parse("ring.xml", data)
	if err != nil {
		t.Fatal(err)
	}
	maps := Neighbors(a)
	want := []map[string]int{
		{"g1": 1, "g1_1": 1, "g3": 3, "g3_1": 3},
		{"g0": 0, "g0_1": 0, "g2": 2, "g2_1": 2},
		{"g1": 1, "g1_1": 1, "g3": 3, "g3_1": 3},
		{"g0": 0, "g0_1": 0, "g2": 2, "g2_1": 2},
	}
	if diff := cmp.Diff(want, maps); diff != "" {
		t.Errorf("neighbour maps (-want +got):\n%s", diff)
	}
	if _, err := topology.Validate(&topology.Topology{Name: "custom", Maps: maps}); err != nil {
		t.Error(err)
	}
}
