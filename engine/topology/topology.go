package topology

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"kernbench/engine/spelling"
)

// Spec is one builtin topology: its name, the directions it installs (as
// the documentation describes them) and its generator.
type Spec struct {
	Name string
	// Directions describes rank r's directions, in Markdown (the author
	// guide's topology table shows exactly this text).
	Directions string
	// NeedsHook: the algorithm module must define neighbors() (see
	// RequiresNeighborsHook).
	NeedsHook bool
	// build installs the directions into t.Maps (one empty map per rank);
	// rows × cols is mesh_2d's shape.
	build func(t *Topology, rows, cols int)
	// degree is the most directions build installs on one rank of a
	// world of worldSize ranks, before channels (0: the hook decides).
	degree func(worldSize int) int
}

// Degree is the most directions the builtin topology name installs on
// one rank of a world of worldSize ranks with channels channels, known
// before the world is built (a full_mesh of 5000 ranks has 25 million
// directions: its set-up alone passes any memory limit); 0 for an
// unknown name or a topology whose neighbors() hook decides.
func Degree(name string, worldSize, channels int) int64 {
	spec, ok := lookup(name)
	if !ok || spec.degree == nil {
		return 0
	}
	return int64(spec.degree(worldSize)) * int64(max(1, channels))
}

// table lists the builtin topologies, in the order messages and the
// documentation show them. Config validation, the CLI's help and the
// documentation are derived from it (a test in cmd/kernbench checks them).
var table = []Spec{
	{Name: "ring_1d", Directions: "`E` → r+1, `W` → r−1 (mod world_size)",
		build: func(t *Topology, _, _ int) { ring(t.Maps) }, degree: func(int) int { return 2 }},
	{Name: "ring_1d_unidir", Directions: "`E` → r+1 to send, `W` ← r−1 to receive",
		build: ringUnidir, degree: func(int) int { return 2 }},
	{Name: "mesh_2d", Directions: "ranks row by row on a rows × cols torus: `N`/`S` → row ∓ 1, `W`/`E` → column ∓ 1 (the most square rows × cols for the world size, 8 → 2 × 4, or `mesh_shape: [R, C]`)",
		build: func(t *Topology, rows, cols int) { mesh(t.Maps, rows, cols) }, degree: func(int) int { return 4 }},
	{Name: "tree_binary", Directions: "`parent`, `child_left`, `child_right` (heap order, root 0)",
		build: treeBinary, degree: func(int) int { return 3 }},
	{Name: "full_mesh", Directions: "`r<j>` → rank j for every other rank j",
		build: fullMesh, degree: func(w int) int { return w - 1 }},
	{Name: "none", Directions: "whatever your `neighbors()` returns (Step 4)",
		build: func(*Topology, int, int) {}}, // empty maps: neighbors() builds them
	{Name: "custom", Directions: "whatever your `neighbors()` returns (Step 4)", NeedsHook: true,
		build: func(*Topology, int, int) {}},
}

// Table is the builtin topologies, in the order messages and the
// documentation show them (a copy: the table is read-only).
func Table() []Spec { return slices.Clone(table) }

// Names lists the topology names a ccl.yaml algorithm entry may use, in the
// order of Table.
func Names() []string { return slices.Clone(names) }

var names = func() []string {
	out := make([]string, len(table))
	for i, s := range table {
		out[i] = s.Name
	}
	return out
}()

// lookup finds a topology of Table by name.
func lookup(name string) (Spec, bool) {
	i := slices.IndexFunc(table, func(s Spec) bool { return s.Name == name })
	if i < 0 {
		return Spec{}, false
	}
	return table[i], true
}

// ChannelDir is the name of channel c of a builtin direction: the name
// itself for channel 0, name_c for c >= 1 (E, E_1, E_2, ...). Each channel
// is its own queue pair with its own rx ring.
func ChannelDir(dir string, c int) string {
	if c == 0 {
		return dir
	}
	return dir + "_" + strconv.Itoa(c)
}

// SplitChannel is the inverse of ChannelDir: "E_2" → ("E", 2), "E" →
// ("E", 0). A name without a numeric suffix (or with a suffix that starts
// with 0) is channel 0 of itself.
func SplitChannel(dir string) (base string, c int) {
	i := strings.LastIndexByte(dir, '_')
	if i <= 0 || i == len(dir)-1 || dir[i+1] == '0' {
		return dir, 0
	}
	// Most names with an underscore have no number after it ("child_left"):
	// they are told apart without Atoi's error, an allocation per call
	// (pairing a 65,536-rank tree's directions made 76,000 of them).
	for j, c := range []byte(dir[i+1:]) {
		if (c < '0' || c > '9') && (j > 0 || c != '+') { // (Atoi takes a sign)
			return dir, 0
		}
	}
	n, err := strconv.Atoi(dir[i+1:])
	if err != nil || n < 1 {
		return dir, 0
	}
	return dir[:i], n
}

// MeshPeerDir is full_mesh's direction towards peer: "r<peer>".
func MeshPeerDir(peer int) string { return "r" + strconv.Itoa(peer) }

// Topology is the neighbour map of every rank of a process group.
type Topology struct {
	// Name is the topology name from Names; it appears in error messages.
	Name string
	// Maps holds, per rank, direction name → peer rank. A nil entry is a
	// rank with no directions.
	Maps []map[string]int
	// RecvOnly holds, per rank, the directions that may only receive
	// (ring_1d_unidir's W). RecvOnly itself and any of its entries may be
	// nil; when non-nil it has one entry per rank.
	RecvOnly []map[string]bool
}

// Clone returns a deep copy of t, so a neighbors() hook can edit the maps
// without touching the original.
func (t *Topology) Clone() *Topology {
	if t == nil {
		return nil
	}
	c := &Topology{Name: t.Name}
	if t.Maps != nil {
		c.Maps = make([]map[string]int, len(t.Maps))
		for i, m := range t.Maps {
			c.Maps[i] = maps.Clone(m)
		}
	}
	if t.RecvOnly != nil {
		c.RecvOnly = make([]map[string]bool, len(t.RecvOnly))
		for i, m := range t.RecvOnly {
			c.RecvOnly[i] = maps.Clone(m)
		}
	}
	return c
}

// RequiresNeighborsHook reports whether the named topology needs the
// algorithm module to define neighbors(): only "custom" does ("none" starts
// from the same empty maps but leaves the hook optional).
func RequiresNeighborsHook(name string) bool {
	s, ok := lookup(name)
	return ok && s.NeedsHook
}

// MaxChannels bounds channels: a direction per channel per neighbour is an
// rx ring each, so a few are plenty.
const MaxChannels = 64

// Builtin returns the builtin neighbour maps of every rank for the named
// topology. meshShape is nil or [R, C] and is read only by mesh_2d.
// channels (>= 1) installs that many directions per neighbour, named by
// ChannelDir. See the package documentation for the ring_1d_unidir and
// size-2 decisions.
func Builtin(name string, worldSize int, meshShape []int, channels int) (*Topology, error) {
	spec, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown topology %q: want one of %s%s", name, strings.Join(names, ", "), spelling.Hint(name, names))
	}
	if worldSize < 1 {
		return nil, fmt.Errorf("%s: got world_size %d, want at least 1", name, worldSize)
	}
	if channels < 1 || channels > MaxChannels {
		return nil, fmt.Errorf("%s: got channels %d, want 1 to %d", name, channels, MaxChannels)
	}
	var rows, cols int
	if name == "mesh_2d" {
		var err error
		if rows, cols, err = MeshDims(worldSize, meshShape); err != nil {
			return nil, err
		}
	}
	t := &Topology{Name: name, Maps: make([]map[string]int, worldSize)}
	for r := range t.Maps {
		t.Maps[r] = map[string]int{}
	}
	spec.build(t, rows, cols)
	if channels > 1 {
		for r, m := range t.Maps {
			wide := make(map[string]int, len(m)*channels)
			for d, peer := range m {
				for c := range channels {
					wide[ChannelDir(d, c)] = peer
				}
			}
			t.Maps[r] = wide
			if t.RecvOnly != nil {
				ro := map[string]bool{}
				for d, v := range t.RecvOnly[r] {
					for c := range channels {
						ro[ChannelDir(d, c)] = v
					}
				}
				t.RecvOnly[r] = ro
			}
		}
	}
	return t, nil
}

// ringUnidir is ring_1d with W receive-only on every rank.
func ringUnidir(t *Topology, _, _ int) {
	ring(t.Maps)
	if len(t.Maps) > 1 {
		t.RecvOnly = make([]map[string]bool, len(t.Maps))
		for r := range t.RecvOnly {
			t.RecvOnly[r] = map[string]bool{"W": true}
		}
	}
}

// treeBinary installs the heap-ordered binary tree rooted at rank 0.
func treeBinary(t *Topology, _, _ int) {
	worldSize := len(t.Maps)
	for r := range worldSize {
		if r > 0 {
			t.Maps[r]["parent"] = (r - 1) / 2
		}
		if c := 2*r + 1; c < worldSize {
			t.Maps[r]["child_left"] = c
		}
		if c := 2*r + 2; c < worldSize {
			t.Maps[r]["child_right"] = c
		}
	}
}

// fullMesh installs MeshPeerDir(peer) towards every other rank.
func fullMesh(t *Topology, _, _ int) {
	worldSize := len(t.Maps)
	for r := range worldSize {
		for peer := range worldSize {
			if peer != r {
				t.Maps[r][MeshPeerDir(peer)] = peer
			}
		}
	}
}

// ring installs E=(r+1)%p and W=(r-1+p)%p on every rank; a single rank has
// no neighbours.
func ring(m []map[string]int) {
	p := len(m)
	if p == 1 {
		return
	}
	for r := range p {
		m[r]["E"] = (r + 1) % p
		m[r]["W"] = (r - 1 + p) % p
	}
}

// SizeError is a builtin topology that does not admit a world size (a
// mesh_shape of another size): not a mistake in a module checked over a
// range of sizes.
type SizeError struct{ msg string }

func (e *SizeError) Error() string { return e.msg }

// MeshDims is the rows × cols of mesh_2d for a world size: mesh_shape
// when given, else the most square factorisation (rows <= cols: 8 → 2 × 4,
// a prime p → 1 × p, a ring).
func MeshDims(worldSize int, meshShape []int) (rows, cols int, err error) {
	if meshShape == nil {
		r := max(1, isqrt(worldSize))
		for worldSize%r != 0 {
			r--
		}
		return r, worldSize / r, nil
	}
	if len(meshShape) != 2 {
		return 0, 0, fmt.Errorf("mesh_2d: mesh_shape %s has %d dimensions, want 2 ([R, C])", shapeString(meshShape), len(meshShape))
	}
	rows, cols = meshShape[0], meshShape[1]
	if rows < 1 || cols < 1 {
		return 0, 0, fmt.Errorf("mesh_2d: mesh_shape %s has a dimension below 1", shapeString(meshShape))
	}
	if worldSize%rows != 0 || worldSize/rows != cols { // rows*cols could overflow
		return 0, 0, &SizeError{fmt.Sprintf("mesh_2d: mesh_shape %s has %d ranks, world_size is %d", shapeString(meshShape), rows*cols, worldSize)}
	}
	return rows, cols, nil
}

// mesh installs N, S, W, E with wrap-around on a rows×cols grid where
// rank = row*cols + col. A dimension of size 1 has no directions; in a
// dimension of size 2 both directions reach the same peer.
func mesh(m []map[string]int, rows, cols int) {
	for r := range m {
		row, col := r/cols, r%cols
		if rows > 1 {
			m[r]["N"] = (row-1+rows)%rows*cols + col
			m[r]["S"] = (row+1)%rows*cols + col
		}
		if cols > 1 {
			m[r]["W"] = row*cols + (col-1+cols)%cols
			m[r]["E"] = row*cols + (col+1)%cols
		}
	}
}

// isqrt returns the largest s with s*s <= n for n >= 0.
func isqrt(n int) int {
	s := int(math.Sqrt(float64(n)))
	for s*s > n {
		s--
	}
	for (s+1)*(s+1) <= n {
		s++
	}
	return s
}

// shapeString formats a shape the way ccl.yaml writes it: [2, 3].
func shapeString(shape []int) string {
	parts := make([]string, len(shape))
	for i, v := range shape {
		parts[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
