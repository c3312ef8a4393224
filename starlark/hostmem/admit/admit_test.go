package admit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/engine/machine/machinetest"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
	"kernbench/starlark/wiring"
)

// A full_mesh world has world_size − 1 directions a rank: its set-up grows
// as the square of the world, and the check before set-up counts them (a
// 5000-rank full_mesh passed it on its ranks alone, 0.95 GiB under a
// 1 GiB limit, and died with a Go fatal error building 25 million
// directions). The same world as a ring is set up and estimated in full.
func TestWorldCheckCountsDirections(t *testing.T) {
	for _, tc := range []struct {
		topology string
		refused  bool
		fit      string
	}{
		{"full_mesh", true, "alone fit up to 710)"},
		{"ring_1d", false, ""},
	} {
		err := World(5000, tc.topology, 1, 1<<30, false)
		if got := err != nil; got != tc.refused {
			t.Errorf("%s: World = %v, want refused %v", tc.topology, err, tc.refused)
			continue
		}
		if err != nil && (errkind.Of(err) != errkind.MemoryLimit || !strings.Contains(err.Error(), tc.fit)) {
			t.Errorf("%s: %v, want a MemoryLimit refusal naming %q", tc.topology, err, tc.fit)
		}
	}
}

// LinkRings, the rings a world's directions will install, is what Rings
// reads off the group once installed, but for Room (left unknown): the
// memory admission's probes are decided from it before the world is
// built, and the decision must be the one the installed world gets.
// ring_1d_unidir has receive-only directions, which do not count for the
// reach; two channels double the queue pairs.
func TestLinkRingsAreTheInstalledRings(t *testing.T) {
	cfg := machine.IPCQConfig{BufferKind: machine.TCM, Backpressure: machine.Sleep, NSlots: 4, SlotSize: 256, CreditBytes: 16, PollInterval: sim.Nanosecond}
	for _, tc := range []struct {
		topology string
		world    int
		channels int
	}{
		{"ring_1d", 16, 1},
		{"ring_1d_unidir", 16, 1},
		{"ring_1d", 16, 2},
		{"mesh_2d", 32, 1},
		{"tree_binary", 32, 1},
		{"full_mesh", 8, 1},
	} {
		t.Run(fmt.Sprintf("%s/%d/%d", tc.topology, tc.world, tc.channels), func(t *testing.T) {
			spec := wiring.MapSpec{File: "t.star"}
			spec.Shape(tc.topology, tc.world, config.Settings{Channels: tc.channels})
			links, _, err := wiring.NeighborTables(spec, &starlark.Thread{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := machine.New(sim.New(), machinetest.Params(1, 4, 8))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Place(tc.world); err != nil {
				t.Fatal(err)
			}
			g, err := m.Install(links, cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := Rings(g)
			if want.Reach == 0 || want.QPs < tc.world {
				t.Fatalf("installed rings %+v: want a reach and a queue pair a rank at least", want)
			}
			want.Room = 0
			if diff := cmp.Diff(want, LinkRings(links, cfg)); diff != "" {
				t.Errorf("LinkRings (-installed +from the links):\n%s", diff)
			}
		})
	}
}
