package topology

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// doubling returns recursive-doubling maps: rank r's xk peer is r^(1<<k).
func doubling(p int) []map[string]int {
	m := make([]map[string]int, p)
	for r := range p {
		m[r] = dirs{}
		for k := 0; 1<<k < p; k++ {
			m[r][fmt.Sprintf("x%d", k)] = r ^ 1<<k
		}
	}
	return m
}

func TestValidateCustom(t *testing.T) {
	tests := []struct {
		name string
		maps []map[string]int
		want Pairing
	}{
		{"doubling 1", doubling(1), Pairing{{}}},
		{"doubling 2", doubling(2), Pairing{
			{{"x0", 1, "x0", false}},
			{{"x0", 0, "x0", false}},
		}},
		{"doubling 4", doubling(4), Pairing{
			{{"x0", 1, "x0", false}, {"x1", 2, "x1", false}},
			{{"x0", 0, "x0", false}, {"x1", 3, "x1", false}},
			{{"x0", 3, "x0", false}, {"x1", 0, "x1", false}},
			{{"x0", 2, "x0", false}, {"x1", 1, "x1", false}},
		}},
		// A custom name pairs with the unique custom direction pointing back.
		{"next/prev ring of 3", []map[string]int{
			{"next": 1, "prev": 2}, {"next": 2, "prev": 0}, {"next": 0, "prev": 1},
		}, Pairing{
			{{"next", 1, "prev", false}, {"prev", 2, "next", false}},
			{{"next", 2, "prev", false}, {"prev", 0, "next", false}},
			{{"next", 0, "prev", false}, {"prev", 1, "next", false}},
		}},
		// Builtin and custom names between the same two ranks pair apart.
		{"mixed names between two ranks", []map[string]int{
			{"E": 1, "fwd": 1}, {"W": 0, "back": 0},
		}, Pairing{
			{{"E", 1, "W", false}, {"fwd", 1, "back", false}},
			{{"W", 0, "E", false}, {"back", 0, "fwd", false}},
		}},
		// A ring of 4 with a skip link across: builtin plus one custom pair.
		{"ring with chord", []map[string]int{
			{"E": 1, "W": 3, "chord": 2}, {"E": 2, "W": 0}, {"E": 3, "W": 1, "chord": 0}, {"E": 0, "W": 2},
		}, Pairing{
			{{"E", 1, "W", false}, {"W", 3, "E", false}, {"chord", 2, "chord", false}},
			{{"E", 2, "W", false}, {"W", 0, "E", false}},
			{{"E", 3, "W", false}, {"W", 1, "E", false}, {"chord", 0, "chord", false}},
			{{"E", 0, "W", false}, {"W", 2, "E", false}},
		}},
		{"nil maps", []map[string]int{nil, nil}, Pairing{{}, {}}},
	}
	for _, tt := range tests {
		got, err := Validate(&Topology{Name: "custom", Maps: tt.maps})
		if err != nil {
			t.Errorf("%s: Validate: %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: pairing mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
	for _, p := range []int{8, 16} {
		if _, err := Validate(&Topology{Name: "custom", Maps: doubling(p)}); err != nil {
			t.Errorf("doubling %d: %v", p, err)
		}
	}
}

// TestValidateRecvOnly checks that receive-only marks reach the pairing and
// that marks for directions a neighbors() hook removed are ignored.
func TestValidateRecvOnly(t *testing.T) {
	topo := &Topology{
		Name:     "ring_1d_unidir",
		Maps:     []map[string]int{{"a": 1}, {"b": 0}},
		RecvOnly: []map[string]bool{{"W": true}, {"W": true, "b": true}},
	}
	want := Pairing{{{"a", 1, "b", false}}, {{"b", 0, "a", true}}}
	got, err := Validate(topo)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pairing mismatch (-want +got):\n%s", diff)
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name string
		topo *Topology
		want string
	}{
		{
			// Every kind of problem at once, each listed, sorted by rank
			// and direction.
			name: "all at once",
			topo: &Topology{Name: "custom", Maps: []map[string]int{
				{"E": 1, "self": 0, "far": 7, "neg": -1},
				{"1bad": 2},
				{"x0": 3, "y": 1},
				{"x0": 2, "x1": 2},
			}},
			want: `topology "custom" (world_size 4): inconsistent neighbour map:
  rank 0 E -> 1, but rank 1 has no direction pointing back at 0
  rank 0 far -> 7, but rank 7 is out of range [0, 4)
  rank 0 neg -> -1, but rank -1 is out of range [0, 4)
  rank 0 self -> 0 is a self-loop
  rank 1 direction "1bad" is not an identifier
  rank 2 x0 -> 3, but rank 3 has 2 directions pointing at 2 (x0, x1)
  rank 3 x0 -> 2, but rank 2 x0 -> 3 could pair with 2 directions of rank 3 (x0, x1)
  rank 3 x1 -> 2, but rank 2 x0 -> 3 could pair with 2 directions of rank 3 (x0, x1)`,
		},
		{
			// The seed's "pop W on odd ranks" hook breaks I3.
			name: "ring with W popped on odd ranks",
			topo: &Topology{Name: "ring_1d", Maps: []map[string]int{
				{"E": 1, "W": 3}, {"E": 2}, {"E": 3, "W": 1}, {"E": 0},
			}},
			want: `topology "ring_1d" (world_size 4): inconsistent neighbour map:
  rank 0 E -> 1, but rank 1 has no direction pointing back at 0
  rank 2 E -> 3, but rank 3 has no direction pointing back at 2`,
		},
		{
			// The seed's skip ring {"E": rank+2} needs a W back.
			name: "skip ring without W",
			topo: &Topology{Name: "none", Maps: []map[string]int{
				{"E": 2}, {"E": 3}, {"E": 0}, {"E": 1},
			}},
			want: `topology "none" (world_size 4): inconsistent neighbour map:
  rank 0 E -> 2, but rank 2 points back at 0 with E, want W
  rank 1 E -> 3, but rank 3 points back at 1 with E, want W
  rank 2 E -> 0, but rank 0 points back at 2 with E, want W
  rank 3 E -> 1, but rank 1 points back at 3 with E, want W`,
		},
		{
			name: "two children point at one parent",
			topo: &Topology{Name: "tree_binary", Maps: []map[string]int{
				{"child_left": 1, "child_right": 1}, {"parent": 0},
			}},
			want: `topology "tree_binary" (world_size 2): inconsistent neighbour map:
  rank 0 child_left -> 1, but rank 1 parent -> 0 could pair with 2 directions of rank 0 (child_left, child_right)
  rank 0 child_right -> 1, but rank 1 parent -> 0 could pair with 2 directions of rank 0 (child_left, child_right)
  rank 1 parent -> 0, but rank 0 has 2 directions pointing at 1 (child_left, child_right)`,
		},
		{
			name: "parent answered by a ring name",
			topo: &Topology{Name: "custom", Maps: []map[string]int{
				{"E": 1}, {"parent": 0},
			}},
			want: `topology "custom" (world_size 2): inconsistent neighbour map:
  rank 0 E -> 1, but rank 1 points back at 0 with parent, want W
  rank 1 parent -> 0, but rank 0 points back at 1 with E, want child_left or child_right`,
		},
		{
			name: "custom name answered by a builtin name",
			topo: &Topology{Name: "custom", Maps: []map[string]int{
				{"x0": 1}, {"W": 0},
			}},
			want: `topology "custom" (world_size 2): inconsistent neighbour map:
  rank 0 x0 -> 1, but rank 1 points back at 0 with W, want a custom name
  rank 1 W -> 0, but rank 0 points back at 1 with x0, want E`,
		},
		{
			// Custom names in a ring of 2 cannot be paired unambiguously;
			// builtin E/W can (see the ring_1d pairing test).
			name: "custom names in a ring of 2",
			topo: &Topology{Name: "custom", Maps: []map[string]int{
				{"next": 1, "prev": 1}, {"next": 0, "prev": 0},
			}},
			want: `topology "custom" (world_size 2): inconsistent neighbour map:
  rank 0 next -> 1, but rank 1 has 2 directions pointing at 0 (next, prev)
  rank 0 prev -> 1, but rank 1 has 2 directions pointing at 0 (next, prev)
  rank 1 next -> 0, but rank 0 has 2 directions pointing at 1 (next, prev)
  rank 1 prev -> 0, but rank 0 has 2 directions pointing at 1 (next, prev)`,
		},
		{
			name: "E twice answered by one W",
			topo: &Topology{Name: "custom", Maps: []map[string]int{
				{"E": 1, "W": 1}, {"W": 0},
			}},
			want: `topology "custom" (world_size 2): inconsistent neighbour map:
  rank 0 W -> 1, but rank 1 points back at 0 with W, want E`,
		},
		{
			// A bad name still pairs; only the name is reported.
			name: "bad names",
			topo: &Topology{Name: "custom", Maps: []map[string]int{
				{"a\nb": 1, "": 2}, {"x": 0}, {},
			}},
			want: `topology "custom" (world_size 3): inconsistent neighbour map:
  rank 0 "" -> 2, but rank 2 has no direction pointing back at 0
  rank 0 direction "" is not an identifier
  rank 0 direction "a\nb" is not an identifier`,
		},
		{
			name: "world size 0",
			topo: &Topology{Name: "custom"},
			want: `topology "custom": got world_size 0, want at least 1`,
		},
		{
			name: "receive-only entries for another world size",
			topo: &Topology{Name: "ring_1d_unidir", Maps: []map[string]int{{}, {}}, RecvOnly: []map[string]bool{nil}},
			want: `topology "ring_1d_unidir" (world_size 2): got 1 receive-only entries, want 2`,
		},
	}
	for _, tt := range tests {
		before := tt.topo.Clone()
		got, err := Validate(tt.topo)
		if err == nil {
			t.Errorf("%s: Validate = %v, want error", tt.name, got)
			continue
		}
		if got != nil {
			t.Errorf("%s: Validate returned pairing %v with its error, want nil", tt.name, got)
		}
		if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
			t.Errorf("%s: error mismatch (-want +got):\n%s", tt.name, diff)
		}
		if diff := cmp.Diff(before, tt.topo); diff != "" {
			t.Errorf("%s: Validate changed its input (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestValidationErrorProblems(t *testing.T) {
	topo := &Topology{Name: "ring_1d", Maps: []map[string]int{{"E": 1, "W": 1}, {"E": 0}}}
	_, err := Validate(topo)
	var verr *ValidationError
	if !errors.As(fmt.Errorf("init_process_group: %w", err), &verr) {
		t.Fatalf("Validate error %v is not a *ValidationError", err)
	}
	want := &ValidationError{Topology: "ring_1d", WorldSize: 2, Problems: []Problem{
		{0, "E", "rank 0 E -> 1, but rank 1 points back at 0 with E, want W"},
	}}
	if diff := cmp.Diff(want, verr); diff != "" {
		t.Errorf("ValidationError mismatch (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(err.Error(), `topology "ring_1d" (world_size 2): inconsistent neighbour map:`) {
		t.Errorf("error %q lacks the header", err)
	}
}

// Validating a large topology costs a few allocations per rank (a 65,536-rank
// tree is validated as every run of it starts): a pair of single directions
// pairs without the tables several directions need, and one buffer sorts
// every rank's directions. It was 13 per rank.
func TestValidateAllocationsPerRank(t *testing.T) {
	const p = 1024
	tp, err := Builtin("tree_binary", p, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(5, func() {
		if _, err := Validate(tp); err != nil {
			t.Fatal(err)
		}
	}); n/p > 7 {
		t.Errorf("Validate of a %d-rank tree allocates %.1f objects per rank, want at most 7", p, n/p)
	}
}
