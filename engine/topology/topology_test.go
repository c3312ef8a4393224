package topology

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

type dirs = map[string]int

func TestBuiltin(t *testing.T) {
	tests := []struct {
		name      string
		worldSize int
		meshShape []int
		want      *Topology
	}{
		{"ring_1d", 1, nil, &Topology{Name: "ring_1d", Maps: []map[string]int{{}}}},
		// Size 2: E and W both reach the other rank; they are two queue pairs.
		{"ring_1d", 2, nil, &Topology{Name: "ring_1d", Maps: []map[string]int{
			{"E": 1, "W": 1}, {"E": 0, "W": 0},
		}}},
		{"ring_1d", 4, nil, &Topology{Name: "ring_1d", Maps: []map[string]int{
			{"E": 1, "W": 3}, {"E": 2, "W": 0}, {"E": 3, "W": 1}, {"E": 0, "W": 2},
		}}},
		// mesh_shape is ignored by every topology but mesh_2d.
		{"ring_1d", 3, []int{7, 7}, &Topology{Name: "ring_1d", Maps: []map[string]int{
			{"E": 1, "W": 2}, {"E": 2, "W": 0}, {"E": 0, "W": 1},
		}}},
		{"ring_1d_unidir", 1, nil, &Topology{Name: "ring_1d_unidir", Maps: []map[string]int{{}}}},
		{"ring_1d_unidir", 3, nil, &Topology{
			Name:     "ring_1d_unidir",
			Maps:     []map[string]int{{"E": 1, "W": 2}, {"E": 2, "W": 0}, {"E": 0, "W": 1}},
			RecvOnly: []map[string]bool{{"W": true}, {"W": true}, {"W": true}},
		}},
		{"mesh_2d", 1, nil, &Topology{Name: "mesh_2d", Maps: []map[string]int{{}}}},
		{"mesh_2d", 1, []int{1, 1}, &Topology{Name: "mesh_2d", Maps: []map[string]int{{}}}},
		// 2×2: both directions of each dimension reach the same peer.
		{"mesh_2d", 4, nil, &Topology{Name: "mesh_2d", Maps: []map[string]int{
			{"N": 2, "S": 2, "W": 1, "E": 1},
			{"N": 3, "S": 3, "W": 0, "E": 0},
			{"N": 0, "S": 0, "W": 3, "E": 3},
			{"N": 1, "S": 1, "W": 2, "E": 2},
		}}},
		{"mesh_2d", 9, nil, &Topology{Name: "mesh_2d", Maps: []map[string]int{
			{"N": 6, "S": 3, "W": 2, "E": 1},
			{"N": 7, "S": 4, "W": 0, "E": 2},
			{"N": 8, "S": 5, "W": 1, "E": 0},
			{"N": 0, "S": 6, "W": 5, "E": 4},
			{"N": 1, "S": 7, "W": 3, "E": 5},
			{"N": 2, "S": 8, "W": 4, "E": 3},
			{"N": 3, "S": 0, "W": 8, "E": 7},
			{"N": 4, "S": 1, "W": 6, "E": 8},
			{"N": 5, "S": 2, "W": 7, "E": 6},
		}}},
		{"mesh_2d", 6, []int{2, 3}, &Topology{Name: "mesh_2d", Maps: []map[string]int{
			{"N": 3, "S": 3, "W": 2, "E": 1},
			{"N": 4, "S": 4, "W": 0, "E": 2},
			{"N": 5, "S": 5, "W": 1, "E": 0},
			{"N": 0, "S": 0, "W": 5, "E": 4},
			{"N": 1, "S": 1, "W": 3, "E": 5},
			{"N": 2, "S": 2, "W": 4, "E": 3},
		}}},
		// A dimension of size 1 has no directions.
		{"mesh_2d", 3, []int{1, 3}, &Topology{Name: "mesh_2d", Maps: []map[string]int{
			{"W": 2, "E": 1}, {"W": 0, "E": 2}, {"W": 1, "E": 0},
		}}},
		{"mesh_2d", 3, []int{3, 1}, &Topology{Name: "mesh_2d", Maps: []map[string]int{
			{"N": 2, "S": 1}, {"N": 0, "S": 2}, {"N": 1, "S": 0},
		}}},
		{"mesh_2d", 2, []int{1, 2}, &Topology{Name: "mesh_2d", Maps: []map[string]int{
			{"W": 1, "E": 1}, {"W": 0, "E": 0},
		}}},
		{"tree_binary", 1, nil, &Topology{Name: "tree_binary", Maps: []map[string]int{{}}}},
		{"tree_binary", 2, nil, &Topology{Name: "tree_binary", Maps: []map[string]int{
			{"child_left": 1}, {"parent": 0},
		}}},
		{"tree_binary", 6, nil, &Topology{Name: "tree_binary", Maps: []map[string]int{
			{"child_left": 1, "child_right": 2},
			{"parent": 0, "child_left": 3, "child_right": 4},
			{"parent": 0, "child_left": 5},
			{"parent": 1},
			{"parent": 1},
			{"parent": 2},
		}}},
		{"none", 3, nil, &Topology{Name: "none", Maps: []map[string]int{{}, {}, {}}}},
		{"custom", 2, nil, &Topology{Name: "custom", Maps: []map[string]int{{}, {}}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d/%v", tt.name, tt.worldSize, tt.meshShape), func(t *testing.T) {
			got, err := Builtin(tt.name, tt.worldSize, tt.meshShape, 1)
			if err != nil {
				t.Fatalf("Builtin: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Builtin mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuiltinErrors(t *testing.T) {
	tests := []struct {
		name      string
		worldSize int
		meshShape []int
		want      string
	}{
		{"torus", 4, nil, `unknown topology "torus": want one of ring_1d, ring_1d_unidir, mesh_2d, tree_binary, full_mesh, none, custom; did you mean "mesh_2d"?`},
		{"hypercube", 4, nil, `unknown topology "hypercube": want one of ring_1d, ring_1d_unidir, mesh_2d, tree_binary, full_mesh, none, custom`},
		{"", 4, nil, `unknown topology "": want one of ring_1d, ring_1d_unidir, mesh_2d, tree_binary, full_mesh, none, custom`},
		{"ring_1d", 0, nil, "ring_1d: got world_size 0, want at least 1"},
		{"custom", -3, nil, "custom: got world_size -3, want at least 1"},
		{"mesh_2d", -1, []int{1, 1}, "mesh_2d: got world_size -1, want at least 1"},
		{"mesh_2d", 8, []int{2, 3}, "mesh_2d: mesh_shape [2, 3] has 6 ranks, world_size is 8"},
		{"mesh_2d", 4, []int{4, 4}, "mesh_2d: mesh_shape [4, 4] has 16 ranks, world_size is 4"},
		{"mesh_2d", 6, []int{2, 3, 1}, "mesh_2d: mesh_shape [2, 3, 1] has 3 dimensions, want 2 ([R, C])"},
		{"mesh_2d", 6, []int{}, "mesh_2d: mesh_shape [] has 0 dimensions, want 2 ([R, C])"},
		{"mesh_2d", 4, []int{0, 4}, "mesh_2d: mesh_shape [0, 4] has a dimension below 1"},
		{"mesh_2d", 4, []int{-2, -2}, "mesh_2d: mesh_shape [-2, -2] has a dimension below 1"},
	}
	for _, tt := range tests {
		got, err := Builtin(tt.name, tt.worldSize, tt.meshShape, 1)
		if err == nil {
			t.Errorf("Builtin(%q, %d, %v) = %v, want error %q", tt.name, tt.worldSize, tt.meshShape, got, tt.want)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("Builtin(%q, %d, %v) error:\ngot  %s\nwant %s", tt.name, tt.worldSize, tt.meshShape, err, tt.want)
		}
	}
}

// TestBuiltinValidates generates every builtin for world sizes 1..17 (and
// every mesh_shape that fits) and checks that it passes Validate and has the
// shape its name promises.
func TestBuiltinValidates(t *testing.T) {
	for _, name := range names {
		for p := 1; p <= 17; p++ {
			shapes := [][]int{nil}
			if name == "mesh_2d" {
				for r := 1; r <= p; r++ {
					if p%r == 0 {
						shapes = append(shapes, []int{r, p / r})
					}
				}
			}
			for _, shape := range shapes {
				topo, err := Builtin(name, p, shape, 1)
				if err != nil {
					t.Errorf("Builtin(%s, %d, %v): %v", name, p, shape, err)
					continue
				}
				pairing, err := Validate(topo)
				if err != nil {
					t.Errorf("Validate(Builtin(%s, %d, %v)): %v", name, p, shape, err)
					continue
				}
				checkShape(t, topo, pairing, shape)
			}
		}
	}
}

// checkShape checks the structure each builtin promises, independently of
// how the generator computes it.
func checkShape(t *testing.T, topo *Topology, pairing Pairing, shape []int) {
	t.Helper()
	p := len(topo.Maps)
	where := fmt.Sprintf("%s/%d/%v", topo.Name, p, shape)
	switch topo.Name {
	case "ring_1d", "ring_1d_unidir":
		if p == 1 {
			if len(topo.Maps[0]) != 0 {
				t.Errorf("%s: rank 0 has directions %v, want none", where, topo.Maps[0])
			}
			return
		}
		// Following E from rank 0 visits every rank once, W undoes E.
		seen := make([]bool, p)
		r := 0
		for range p {
			if seen[r] {
				t.Errorf("%s: E walk revisits rank %d", where, r)
				return
			}
			seen[r] = true
			e := topo.Maps[r]["E"]
			if w := topo.Maps[e]["W"]; w != r {
				t.Errorf("%s: rank %d E -> %d, whose W -> %d", where, r, e, w)
			}
			r = e
		}
		if r != 0 {
			t.Errorf("%s: E walk of %d steps ends at %d, want 0", where, p, r)
		}
		for r, ps := range pairing {
			for _, pr := range ps {
				wantRecvOnly := topo.Name == "ring_1d_unidir" && pr.Dir == "W"
				if pr.RecvOnly != wantRecvOnly {
					t.Errorf("%s: rank %d %s RecvOnly = %v, want %v", where, r, pr.Dir, pr.RecvOnly, wantRecvOnly)
				}
			}
		}
	case "mesh_2d":
		rows, cols := 0, 0
		if shape != nil {
			rows, cols = shape[0], shape[1]
		} else {
			// The most square factorisation, rows <= cols.
			for r := 1; r*r <= p; r++ {
				if p%r == 0 {
					rows, cols = r, p/r
				}
			}
		}
		for r, m := range topo.Maps {
			want := 0
			if rows > 1 {
				want += 2
			}
			if cols > 1 {
				want += 2
			}
			if len(m) != want {
				t.Errorf("%s: rank %d has %d directions %v, want %d", where, r, len(m), m, want)
			}
			// E/W stay in the row, N/S stay in the column.
			for _, d := range []string{"E", "W"} {
				if peer, ok := m[d]; ok && peer/cols != r/cols {
					t.Errorf("%s: rank %d %s -> %d leaves the row", where, r, d, peer)
				}
			}
			for _, d := range []string{"N", "S"} {
				if peer, ok := m[d]; ok && peer%cols != r%cols {
					t.Errorf("%s: rank %d %s -> %d leaves the column", where, r, d, peer)
				}
			}
		}
		// Walking E comes back after cols steps, walking S after rows.
		for _, walk := range []struct {
			dir  string
			size int
		}{{"E", cols}, {"S", rows}} {
			if walk.size == 1 {
				continue
			}
			for start := range p {
				r := start
				for step := 1; step <= walk.size; step++ {
					r = topo.Maps[r][walk.dir]
					if r == start && step != walk.size {
						t.Errorf("%s: %s walk from %d returns after %d steps, want %d", where, walk.dir, start, step, walk.size)
						break
					}
				}
				if r != start {
					t.Errorf("%s: %s walk from %d ends at %d after %d steps", where, walk.dir, start, r, walk.size)
				}
			}
		}
	case "full_mesh":
		// A direction r<peer> to every other rank, paired with r<rank>.
		for r, ps := range pairing {
			if len(ps) != p-1 {
				t.Errorf("%s: rank %d has %d directions, want %d", where, r, len(ps), p-1)
			}
			for _, pr := range ps {
				if pr.Dir != MeshPeerDir(pr.Peer) || pr.PeerDir != MeshPeerDir(r) {
					t.Errorf("%s: rank %d %s -> %d pairs with %s, want r%d -> r%d", where, r, pr.Dir, pr.Peer, pr.PeerDir, pr.Peer, r)
				}
			}
		}
	case "tree_binary":
		children := 0
		for r, m := range topo.Maps {
			if _, ok := m["parent"]; ok == (r == 0) {
				t.Errorf("%s: rank %d has parent = %v", where, r, ok)
			}
			for _, d := range []string{"child_left", "child_right"} {
				if _, ok := m[d]; ok {
					children++
				}
			}
			// The parent chain reaches the root.
			for hops, a := 0, r; a != 0; hops++ {
				if hops > p {
					t.Errorf("%s: rank %d never reaches the root", where, r)
					break
				}
				a = topo.Maps[a]["parent"]
			}
		}
		if children != p-1 {
			t.Errorf("%s: %d child directions, want %d", where, children, p-1)
		}
	case "none", "custom":
		for r, ps := range pairing {
			if len(ps) != 0 {
				t.Errorf("%s: rank %d has pairs %v, want none", where, r, ps)
			}
		}
	default:
		t.Errorf("%s: no shape check for this topology", where)
	}
}

func TestBuiltinPairing(t *testing.T) {
	tests := []struct {
		name      string
		worldSize int
		meshShape []int
		want      Pairing
	}{
		// E of one rank pairs with W of the other: two queue pairs.
		{"ring_1d", 2, nil, Pairing{
			{{"E", 1, "W", false}, {"W", 1, "E", false}},
			{{"E", 0, "W", false}, {"W", 0, "E", false}},
		}},
		{"ring_1d_unidir", 2, nil, Pairing{
			{{"E", 1, "W", false}, {"W", 1, "E", true}},
			{{"E", 0, "W", false}, {"W", 0, "E", true}},
		}},
		{"ring_1d_unidir", 3, nil, Pairing{
			{{"E", 1, "W", false}, {"W", 2, "E", true}},
			{{"E", 2, "W", false}, {"W", 0, "E", true}},
			{{"E", 0, "W", false}, {"W", 1, "E", true}},
		}},
		{"mesh_2d", 2, []int{2, 1}, Pairing{
			{{"N", 1, "S", false}, {"S", 1, "N", false}},
			{{"N", 0, "S", false}, {"S", 0, "N", false}},
		}},
		{"tree_binary", 3, nil, Pairing{
			{{"child_left", 1, "parent", false}, {"child_right", 2, "parent", false}},
			{{"parent", 0, "child_left", false}},
			{{"parent", 0, "child_right", false}},
		}},
		{"none", 2, nil, Pairing{{}, {}}},
	}
	for _, tt := range tests {
		topo, err := Builtin(tt.name, tt.worldSize, tt.meshShape, 1)
		if err != nil {
			t.Fatalf("Builtin(%s, %d, %v): %v", tt.name, tt.worldSize, tt.meshShape, err)
		}
		got, err := Validate(topo)
		if err != nil {
			t.Fatalf("Validate(%s, %d): %v", tt.name, tt.worldSize, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Validate(%s, %d) pairing mismatch (-want +got):\n%s", tt.name, tt.worldSize, diff)
		}
	}
}

func TestClone(t *testing.T) {
	orig, err := Builtin("ring_1d_unidir", 3, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	orig.Maps = append(orig.Maps, nil)
	orig.RecvOnly = append(orig.RecvOnly, nil)
	want := &Topology{
		Name:     "ring_1d_unidir",
		Maps:     []map[string]int{{"E": 1, "W": 2}, {"E": 2, "W": 0}, {"E": 0, "W": 1}, nil},
		RecvOnly: []map[string]bool{{"W": true}, {"W": true}, {"W": true}, nil},
	}
	c := orig.Clone()
	if diff := cmp.Diff(want, c); diff != "" {
		t.Fatalf("Clone mismatch (-want +got):\n%s", diff)
	}
	c.Maps[0]["E"] = 9
	delete(c.Maps[1], "W")
	c.RecvOnly[2]["E"] = true
	c.Maps[3] = dirs{"x": 1}
	if diff := cmp.Diff(want, orig); diff != "" {
		t.Errorf("editing the clone changed the original (-want +got):\n%s", diff)
	}
	if got := (*Topology)(nil).Clone(); got != nil {
		t.Errorf("nil Clone = %v, want nil", got)
	}
	if got := (&Topology{Name: "none"}).Clone(); got.Maps != nil || got.RecvOnly != nil {
		t.Errorf("Clone of empty topology = %+v, want nil slices", got)
	}
}

func TestRequiresNeighborsHook(t *testing.T) {
	for _, name := range names {
		if got, want := RequiresNeighborsHook(name), name == "custom"; got != want {
			t.Errorf("RequiresNeighborsHook(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestReverse(t *testing.T) {
	tests := []struct {
		dir  string
		want string
		ok   bool
	}{
		{"E", "W", true},
		{"W", "E", true},
		{"N", "S", true},
		{"S", "N", true},
		{"child_left", "parent", true},
		{"child_right", "parent", true},
		{"parent", "", false}, // whichever child of the parent points back
		{"x0", "", false},
		{"e", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := Reverse(tt.dir)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Reverse(%q) = %q, %v, want %q, %v", tt.dir, got, ok, tt.want, tt.ok)
		}
	}
}

// TestChannels: with channels K every builtin topology installs K
// directions per neighbour (d, d_1, ... d_{K-1}), and channel c of a
// direction pairs with channel c of the direction it pairs with at K = 1.
func TestChannels(t *testing.T) {
	for _, name := range names {
		for _, p := range []int{2, 3, 4, 9} {
			one, err := Builtin(name, p, nil, 1)
			if err != nil {
				continue // mesh_2d at non-square sizes
			}
			onePairs, err := Validate(one)
			if err != nil {
				t.Fatalf("%s/%d: %v", name, p, err)
			}
			for _, k := range []int{1, 2, 4} {
				topo, err := Builtin(name, p, nil, k)
				if err != nil {
					t.Fatalf("Builtin(%s, %d, nil, %d): %v", name, p, k, err)
				}
				pairs, err := Validate(topo)
				if err != nil {
					t.Fatalf("Validate(Builtin(%s, %d, nil, %d)): %v", name, p, k, err)
				}
				var want [][]Pair
				for r := range onePairs {
					var ps []Pair
					for _, pr := range onePairs[r] {
						for c := range k {
							ps = append(ps, Pair{ChannelDir(pr.Dir, c), pr.Peer, ChannelDir(pr.PeerDir, c), pr.RecvOnly})
						}
					}
					slices.SortFunc(ps, func(x, y Pair) int { return strings.Compare(x.Dir, y.Dir) })
					want = append(want, ps)
				}
				if diff := cmp.Diff(want, [][]Pair(pairs), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s/%d channels %d: pairing (-want +got):\n%s", name, p, k, diff)
				}
			}
		}
	}
}

func TestChannelNames(t *testing.T) {
	for _, tt := range []struct {
		dir  string
		base string
		c    int
	}{
		{"E", "E", 0}, {"E_1", "E", 1}, {"child_left_12", "child_left", 12}, {"child_left", "child_left", 0},
		{"r3_2", "r3", 2}, {"x_0", "x_0", 0}, {"x_01", "x_01", 0}, {"_1", "_1", 0}, {"a_", "a_", 0},
		{"a_1x", "a_1x", 0}, {"a_-1", "a_-1", 0}, {"a_99999999999999999999", "a_99999999999999999999", 0},
	} {
		base, c := SplitChannel(tt.dir)
		if base != tt.base || c != tt.c {
			t.Errorf("SplitChannel(%q) = %q, %d; want %q, %d", tt.dir, base, c, tt.base, tt.c)
		}
		if c > 0 && ChannelDir(base, c) != tt.dir {
			t.Errorf("ChannelDir(%q, %d) = %q, want %q", base, c, ChannelDir(base, c), tt.dir)
		}
	}
	// Pairing a large topology splits every direction name: one without a
	// channel number costs no allocation.
	if n := testing.AllocsPerRun(100, func() { SplitChannel("child_left") }); n != 0 {
		t.Errorf("SplitChannel(%q) allocates %v objects", "child_left", n)
	}
	if _, err := Builtin("ring_1d", 4, nil, 0); err == nil || !strings.Contains(err.Error(), "channels 0") {
		t.Errorf("channels 0: got %v, want an error naming it", err)
	}
}

// TestChannelValidation (invariant I3): a custom map whose channels do not pair one to one
// is rejected with a message naming the unpaired direction.
func TestChannelValidation(t *testing.T) {
	topo := &Topology{Name: "custom", Maps: []map[string]int{
		{"E": 1, "E_1": 1, "W": 1, "W_1": 1},
		{"E": 0, "E_1": 0, "W": 0, "W_2": 0},
	}}
	_, err := Validate(topo)
	if err == nil {
		t.Fatal("Validate succeeded, want an unpaired-channel error")
	}
	for _, want := range []string{"rank 0 E_1 -> 1, but rank 1 points back at 0 with E, E_1, W, W_2, want W_1", "rank 1 W_2 -> 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error\n%v\nwant it to contain %q", err, want)
		}
	}
}

// Without mesh_shape, mesh_2d takes the most square factorisation of the
// world size (rows <= cols).
func TestMeshDimsDefault(t *testing.T) {
	for _, tc := range []struct{ p, rows, cols int }{
		{1, 1, 1}, {2, 1, 2}, {4, 2, 2}, {6, 2, 3}, {7, 1, 7}, {8, 2, 4}, {12, 3, 4}, {16, 4, 4}, {18, 3, 6}, {32, 4, 8},
	} {
		rows, cols, err := MeshDims(tc.p, nil)
		if err != nil || rows != tc.rows || cols != tc.cols {
			t.Errorf("MeshDims(%d, nil) = %d, %d, %v; want %d, %d", tc.p, rows, cols, err, tc.rows, tc.cols)
		}
	}
}

func TestRankRanges(t *testing.T) {
	for _, tc := range []struct {
		ranks []int
		want  string
	}{
		{nil, ""}, {[]int{3}, "3"}, {[]int{0, 1, 2, 3}, "0-3"}, {[]int{9, 7, 8, 0, 2, 1, 5}, "0-2, 5, 7-9"}, {[]int{0, 2, 4}, "0, 2, 4"},
	} {
		if got := RankRanges(tc.ranks); got != tc.want {
			t.Errorf("RankRanges(%v) = %q, want %q", tc.ranks, got, tc.want)
		}
	}
}
