package topology

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Pair is one end of a queue pair, seen from the rank that owns it.
type Pair struct {
	Dir      string // the direction on this rank
	Peer     int    // the rank at the other end
	PeerDir  string // the direction on Peer that is the other end
	RecvOnly bool   // this end may only receive (Topology.RecvOnly)
}

// Pairing holds, per rank, that rank's queue-pair ends sorted by direction
// name. It is an involution: the pair of a pair is the pair itself.
type Pairing [][]Pair

// Problem is one (rank, direction) that breaks the neighbour map.
type Problem struct {
	Rank int
	Dir  string
	// Msg is the whole line, e.g.
	// "rank 0 E -> 1, but rank 1 has no direction pointing back at 0".
	Msg string
}

// ValidationError lists every problem Validate found in a neighbour map, so
// a user fixes them all in one go.
type ValidationError struct {
	Topology  string
	WorldSize int
	Problems  []Problem // sorted by rank, direction, message
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "topology %q (world_size %d): inconsistent neighbour map:", e.Topology, e.WorldSize)
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Msg)
	}
	return b.String()
}

// Reverse returns the reverse of a builtin direction name with a single
// reverse: E↔W, N↔S, child_left and child_right → parent. It reports false
// for custom names and for "parent", whose reverse is whichever child
// direction of the parent points back (see the Pairing from Validate).
func Reverse(dir string) (string, bool) {
	if r := reverses(dir); len(r) == 1 {
		return r[0], true
	}
	return "", false
}

// reverses returns the directions that may pair with a builtin name (on
// the same channel), or nil for a custom name.
func reverses(dir string) []string {
	base, c := SplitChannel(dir)
	r := baseReverses(base)
	if c > 0 {
		for i := range r {
			r[i] = ChannelDir(r[i], c)
		}
	}
	return r
}

func baseReverses(dir string) []string {
	switch dir {
	case "E":
		return []string{"W"}
	case "W":
		return []string{"E"}
	case "N":
		return []string{"S"}
	case "S":
		return []string{"N"}
	case "parent":
		return []string{"child_left", "child_right"}
	case "child_left", "child_right":
		return []string{"parent"}
	}
	return nil
}

// canPair reports whether d on one rank and e on its peer may be the two ends
// of one queue pair: builtin names by the fixed reverse rules (channel by
// channel), custom names only with custom names. The relation is symmetric.
func canPair(d, e string) bool {
	rd, re := reverses(d), reverses(e)
	if rd == nil || re == nil {
		return rd == nil && re == nil
	}
	return slices.Contains(rd, e)
}

// Validate checks invariant I3: every direction d of rank A with peer B
// names a rank in [0, world_size) other than A, is an identifier, and pairs
// with exactly one direction of B pointing back at A that is the reverse of
// d (see the package documentation for the reverse rules). It returns every
// problem at once as a *ValidationError, or the Pairing when there is none.
// t must not be nil; Validate does not modify it.
func Validate(t *Topology) (Pairing, error) {
	p := len(t.Maps)
	if p < 1 {
		return nil, fmt.Errorf("topology %q: got world_size 0, want at least 1", t.Name)
	}
	if t.RecvOnly != nil && len(t.RecvOnly) != p {
		return nil, fmt.Errorf("topology %q (world_size %d): got %d receive-only entries, want %d",
			t.Name, p, len(t.RecvOnly), p)
	}

	// Check each direction on its own and keep the edges that may pair.
	type edge struct {
		lo, hi, from int
		dir          string
	}
	var problems []Problem
	var edges []edge
	var dirs []string // a rank's directions, sorted (one buffer for all)
	for a, m := range t.Maps {
		dirs = slices.AppendSeq(dirs[:0], maps.Keys(m))
		slices.Sort(dirs)
		for _, d := range dirs {
			b := m[d]
			if !isIdent(d) {
				problems = append(problems, Problem{a, d, fmt.Sprintf("rank %d direction %q is not an identifier", a, d)})
			}
			switch {
			case b < 0 || b >= p:
				problems = append(problems, Problem{a, d, fmt.Sprintf("rank %d %s -> %d, but rank %d is out of range [0, %d)", a, show(d), b, b, p)})
			case b == a:
				problems = append(problems, Problem{a, d, fmt.Sprintf("rank %d %s -> %d is a self-loop", a, show(d), b)})
			default:
				edges = append(edges, edge{min(a, b), max(a, b), a, d})
			}
		}
	}

	// Pair up the directions between each two ranks.
	slices.SortFunc(edges, func(x, y edge) int {
		return cmp.Or(cmp.Compare(x.lo, y.lo), cmp.Compare(x.hi, y.hi), cmp.Compare(x.from, y.from), strings.Compare(x.dir, y.dir))
	})
	pairing := make(Pairing, p)
	for r, m := range t.Maps {
		pairing[r] = make([]Pair, 0, len(m))
	}
	for i := 0; i < len(edges); {
		a, b := edges[i].lo, edges[i].hi
		var da, db []string
		for ; i < len(edges) && edges[i].lo == a && edges[i].hi == b; i++ {
			if edges[i].from == a {
				da = append(da, edges[i].dir)
			} else {
				db = append(db, edges[i].dir)
			}
		}
		pairs, probs := pairBetween(a, b, da, db)
		problems = append(problems, probs...)
		for _, pr := range pairs {
			pairing[a] = append(pairing[a], Pair{pr[0], b, pr[1], t.recvOnly(a, pr[0])})
			pairing[b] = append(pairing[b], Pair{pr[1], a, pr[0], t.recvOnly(b, pr[1])})
		}
	}

	if len(problems) > 0 {
		slices.SortFunc(problems, func(x, y Problem) int {
			return cmp.Or(cmp.Compare(x.Rank, y.Rank), strings.Compare(x.Dir, y.Dir), strings.Compare(x.Msg, y.Msg))
		})
		return nil, &ValidationError{Topology: t.Name, WorldSize: p, Problems: problems}
	}
	for _, ps := range pairing {
		slices.SortFunc(ps, func(x, y Pair) int { return strings.Compare(x.Dir, y.Dir) })
	}
	return pairing, nil
}

// pairBetween pairs the directions da of rank a pointing at b with the
// directions db of b pointing at a (both sorted). A direction pairs with a
// partner when each is the other's only candidate; every direction left
// over is a problem.
func pairBetween(a, b int, da, db []string) (pairs [][2]string, problems []Problem) {
	if len(da) == 1 && len(db) == 1 && canPair(da[0], db[0]) {
		// The common case, one direction each way (what the rest finds
		// for it, without its tables: a tree of 65,536 ranks has 65,535
		// such pairs).
		return [][2]string{{da[0], db[0]}}, nil
	}
	candA := make([][]int, len(da)) // candA[i]: indices into db that may pair with da[i]
	candB := make([][]int, len(db))
	// Custom names carry no reverse rule; where several could pair, those
	// on the same channel (r3_1 with r5_1 in a full_mesh of 2 channels)
	// are preferred.
	sameChannel := func(i, j int) bool {
		_, ci := SplitChannel(da[i])
		_, cj := SplitChannel(db[j])
		return ci == cj
	}
	hasSame := func(i int, fromA bool) bool {
		for k := range max(len(da), len(db)) {
			if fromA && k < len(db) && canPair(da[i], db[k]) && sameChannel(i, k) ||
				!fromA && k < len(da) && canPair(da[k], db[i]) && sameChannel(k, i) {
				return true
			}
		}
		return false
	}
	for i, d := range da {
		for j, e := range db {
			if canPair(d, e) && (sameChannel(i, j) || !hasSame(i, true) && !hasSame(j, false)) {
				candA[i] = append(candA[i], j)
				candB[j] = append(candB[j], i)
			}
		}
	}
	for i, d := range da {
		if len(candA[i]) == 1 && len(candB[candA[i][0]]) == 1 {
			pairs = append(pairs, [2]string{d, db[candA[i][0]]})
			continue
		}
		problems = append(problems, unpaired(a, d, b, da, db, candA[i], candB))
	}
	for j, e := range db {
		if len(candB[j]) == 1 && len(candA[candB[j][0]]) == 1 {
			continue // paired above
		}
		problems = append(problems, unpaired(b, e, a, db, da, candB[j], candA))
	}
	return pairs, problems
}

// unpaired explains why direction d of rank x (pointing at y) found no
// partner. dx and dy are the directions of x towards y and of y towards x,
// cand the indices into dy that could pair with d, and dyCand the same
// for every element of dy (indices into dx).
func unpaired(x int, d string, y int, dx, dy []string, cand []int, dyCand [][]int) Problem {
	head := fmt.Sprintf("rank %d %s -> %d, but ", x, show(d), y)
	var why string
	switch {
	case len(dy) == 0:
		why = fmt.Sprintf("rank %d has no direction pointing back at %d", y, x)
	case len(cand) == 0:
		want := "a custom name"
		if r := reverses(d); r != nil {
			want = strings.Join(r, " or ")
		}
		why = fmt.Sprintf("rank %d points back at %d with %s, want %s", y, x, showList(dy), want)
	case len(cand) > 1:
		why = fmt.Sprintf("rank %d has %d directions pointing at %d (%s)", y, len(dy), x, showList(dy))
	default:
		// d's only candidate is claimed by several directions of x.
		j := cand[0]
		claims := make([]string, len(dyCand[j]))
		for k, i := range dyCand[j] {
			claims[k] = dx[i]
		}
		why = fmt.Sprintf("rank %d %s -> %d could pair with %d directions of rank %d (%s)",
			y, show(dy[j]), x, len(claims), x, showList(claims))
	}
	return Problem{x, d, head + why}
}

func (t *Topology) recvOnly(rank int, dir string) bool {
	return t.RecvOnly != nil && t.RecvOnly[rank][dir]
}

// isIdent reports whether s matches [A-Za-z_][A-Za-z0-9_]*.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		letter := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// show prints a direction name as is, or quoted when it is not an
// identifier so that odd names cannot break the message apart.
func show(dir string) string {
	if isIdent(dir) {
		return dir
	}
	return strconv.Quote(dir)
}

func showList(dirs []string) string {
	shown := make([]string, len(dirs))
	for i, d := range dirs {
		shown[i] = show(d)
	}
	return strings.Join(shown, ", ")
}

// Capped is Error with only the problems of the first ranks ranks (in rank
// order), then a line "and N more at M more ranks" for the rest.
func (e *ValidationError) Capped(ranks int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "topology %q (world_size %d): inconsistent neighbour map:", e.Topology, e.WorldSize)
	seen := map[int]bool{}
	var restProblems int
	restRanks := map[int]bool{}
	for _, p := range e.Problems {
		if !seen[p.Rank] && len(seen) >= ranks {
			restProblems++
			restRanks[p.Rank] = true
			continue
		}
		seen[p.Rank] = true
		b.WriteString("\n  ")
		b.WriteString(p.Msg)
	}
	if restProblems > 0 {
		fmt.Fprintf(&b, "\n  and %d more at %d more rank(s)", restProblems, len(restRanks))
	}
	return b.String()
}
