package topology

import (
	"maps"
	"slices"
)

// ImplyReceiveEnds completes one-way links in t, as a neighbors() hook
// leaves them: when rank A has a direction d pointing at B and B has no
// direction of d's reverse name, B gets the receiving end of d under that
// name (E → W, W → E, N → S, S → N, child_left and child_right →
// parent, per channel), marked receive-only as in ring_1d_unidir. So the
// skip ring {"E": (rank + 2) % world_size} gives every rank E to rank+2 and
// a receive-only W from rank-2.
//
// Nothing is installed when it would hide a mistake, and Validate then
// reports the link: d has no single reverse (a custom name, or parent), B
// already has a direction of that name, or several one-way links would give
// B the same name. It returns the number of ends installed.
func ImplyReceiveEnds(t *Topology) int {
	p := len(t.Maps)
	type end struct {
		rank int
		dir  string
	}
	claims := map[end][]int{} // implied end on B -> the ranks A that imply it
	for a, m := range t.Maps {
		for _, d := range slices.Sorted(maps.Keys(m)) {
			b := m[d]
			if b < 0 || b >= p || b == a {
				continue
			}
			rev, ok := Reverse(d)
			if !ok {
				continue
			}
			if _, taken := t.Maps[b][rev]; taken {
				continue
			}
			e := end{b, rev}
			claims[e] = append(claims[e], a)
		}
	}
	ends := slices.SortedFunc(maps.Keys(claims), func(x, y end) int {
		if x.rank != y.rank {
			return x.rank - y.rank
		}
		return compareStrings(x.dir, y.dir)
	})
	n := 0
	for _, e := range ends {
		if len(claims[e]) != 1 {
			continue
		}
		if t.Maps[e.rank] == nil {
			t.Maps[e.rank] = map[string]int{}
		}
		t.Maps[e.rank][e.dir] = claims[e][0]
		if t.RecvOnly == nil {
			t.RecvOnly = make([]map[string]bool, p)
		}
		if t.RecvOnly[e.rank] == nil {
			t.RecvOnly[e.rank] = map[string]bool{}
		}
		t.RecvOnly[e.rank][e.dir] = true
		n++
	}
	return n
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
