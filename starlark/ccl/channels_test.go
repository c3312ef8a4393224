package ccl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/engine/topology"
	"kernbench/starlark/report"
)

// Invariant I3 with channels: with channels: K every builtin topology installs K directions per
// neighbour, d, d_1, … d_{K-1}, and channel c of d is one queue pair with
// channel c of d's reverse on the peer: a message sent on E_2 arrives on the
// peer's W_2 (ring_1d, mesh_2d; K = 1, 2, 4). testdata/channel_handshake.star
// sends rank*100 + i on its i-th direction and records what each of its
// directions received.
func TestChannelsPairOneToOne(t *testing.T) {
	reverse := map[string]string{"E": "W", "W": "E", "N": "S", "S": "N"}
	for _, tc := range []struct {
		topology string
		world    int
		shape    string
	}{
		{"ring_1d", 2, ""}, {"ring_1d", 3, ""}, {"ring_1d", 5, ""},
		{"mesh_2d", 4, ""}, {"mesh_2d", 9, ""}, {"mesh_2d", 6, "[2, 3]"},
		{"full_mesh", 2, ""}, {"full_mesh", 5, ""},
	} {
		for _, k := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/world=%d/%s/channels=%d", tc.topology, tc.world, tc.shape, k), func(t *testing.T) {
				t.Parallel()
				sets := []string{fmt.Sprintf("defaults.channels=%d", k)}
				var shape []int
				if tc.shape != "" {
					sets = append(sets, "defaults.mesh_shape="+tc.shape)
					shape = []int{2, 3}
				}
				rep, err := Run("testdata/channel_handshake.star", Options{Embedded: kernbench.Files, WorldSize: tc.world,
					Topology: tc.topology, Counts: []int64{64}, Sets: sets, KeepOutputs: true})
				if err != nil {
					t.Fatal(err)
				}
				topo, err := topology.Builtin(tc.topology, tc.world, shape, k)
				if err != nil {
					t.Fatal(err)
				}
				sorted := func(r int) []string {
					var ds []string
					for d := range topo.Maps[r] {
						ds = append(ds, d)
					}
					slices.Sort(ds)
					return ds
				}
				out := rep.Results[0].Outputs
				for r := range tc.world {
					var got, want []string
					for i, d := range sorted(r) {
						base, c := topology.SplitChannel(d)
						peer := topo.Maps[r][d]
						back := topology.ChannelDir(reverse[base], c)
						if tc.topology == "full_mesh" {
							back = topology.ChannelDir(topology.MeshPeerDir(r), c)
						}
						want = append(want, fmt.Sprintf("%s <- rank %d %s", d, peer, back))
						v := int(math.Float32frombits(binary.LittleEndian.Uint32(out[r][4*i:])))
						got = append(got, fmt.Sprintf("%s <- rank %d %s", d, v/100, sorted(v / 100)[v%100]))
					}
					perNeighbour := map[string]int{"ring_1d": 2, "mesh_2d": 4, "full_mesh": tc.world - 1}[tc.topology]
					if len(want) != perNeighbour*k {
						t.Errorf("rank %d has %d directions, want %d per neighbour direction", r, len(want), k)
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("rank %d: which peer direction each direction receives from (-want +got):\n%s", r, diff)
					}
				}
				if rep.Results[0].Ops.Send != int64(tc.world*len(sorted(0))) {
					t.Errorf("sends = %d, want one per direction", rep.Results[0].Ops.Send)
				}
			})
		}
	}
}

// ring_allreduce_bidir runs 2K rings on K channels and stays correct for
// every K, world size and ragged count, in place and out of place.
func TestRingAllreduceBidirChannels(t *testing.T) {
	for _, k := range []int{2, 4} {
		for _, world := range []int{1, 2, 3, 4, 7, 8, 12} {
			t.Run(fmt.Sprintf("channels=%d/world=%d", k, world), func(t *testing.T) {
				t.Parallel()
				for _, inPlace := range []bool{false, true} {
					rep := runVerified(t, "ring_allreduce_bidir", Options{WorldSize: world, InPlace: inPlace, RedOp: "avg",
						Counts: []int64{0, 1, 3, 37, 5000}, Sets: []string{fmt.Sprintf("defaults.channels=%d", k)}})
					checkCorrect(t, rep)
				}
			})
		}
	}
}

// full_mesh installs a direction to every other rank; when their rx rings
// do not fit in buffer_kind memory the init error (exit 2) says how much
// is needed and the settings that run it, each tried (fixes.go).
func TestFullMeshRingsDoNotFit(t *testing.T) {
	_, err := Run("testdata/channel_handshake.star", Options{Embedded: kernbench.Files, WorldSize: 64, Topology: "full_mesh",
		Counts: []int64{64}, Sets: []string{"system.sips=2"}})
	var f *report.Failure
	if !errors.As(err, &f) || f.ErrorKind().Status != report.ExitUsage {
		t.Fatalf("got %v, want an init error with exit status %d", err, report.ExitUsage)
	}
	for _, want := range []string{"63 direction(s) × 8 slots × 4096 bytes = 2064384 bytes needed", "(each was tried): --set defaults.buffer_kind=hbm, --set defaults.n_slots=4, --set defaults.slot_size=2048"} {
		if !strings.Contains(f.Msg, want) {
			t.Errorf("init error %q does not say %q", f.Msg, want)
		}
	}
	rep, err := Run("testdata/channel_handshake.star", Options{Embedded: kernbench.Files, WorldSize: 64, Topology: "full_mesh",
		Counts: []int64{64}, Sets: []string{"system.sips=2", "defaults.buffer_kind=hbm"}})
	if err != nil {
		t.Fatalf("with buffer_kind hbm: %v", err)
	}
	if got := rep.Results[0].Ops.Send; got != 64*63 {
		t.Errorf("sends = %d, want 64 × 63", got)
	}
}
