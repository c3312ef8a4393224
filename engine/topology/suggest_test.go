package topology

import "testing"

func TestNearestDirection(t *testing.T) {
	ring := []string{"E", "W"}
	tree := []string{"left", "parent", "right"}
	for _, tc := range []struct {
		dir       string
		installed []string
		want      string
	}{
		{"Ee", ring, "E"},
		{"e", ring, "E"},
		{"WW", ring, "W"},
		{"N", ring, ""}, // one letter for another: another topology, not a typo
		{"EW", ring, ""},
		{"W_1", ring, ""}, // a channel of W: channels, not spelling
		{"E_2", []string{"E", "E_1", "W", "W_1"}, ""},
		{"parnet", tree, "parent"},
		{"Parent", tree, "parent"},
		{"rigth", tree, "right"},
		{"up", tree, ""},
		{"x3", []string{"x0", "x1", "x2"}, ""}, // as close to each
		{"r32", []string{"r0", "r2", "r3", "r31"}, ""},
		{"", ring, ""},
		{"east", ring, "E"}, // the compass written out
		{"WEST", ring, "W"},
		{"North", []string{"E", "N", "S", "W"}, "N"},
		{"south", ring, ""},                        // S is not installed: no other letter instead
		{"East", []string{"east", "west"}, "east"}, // a custom map's own names first
	} {
		if got := NearestDirection(tc.dir, tc.installed); got != tc.want {
			t.Errorf("NearestDirection(%q, %q) = %q, want %q", tc.dir, tc.installed, got, tc.want)
		}
	}
}
