package admit

import (
	"strings"
	"testing"

	"kernbench/starlark/errkind"
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
