package ccl

import (
	"slices"

	"kernbench/engine/machine"
	"kernbench/starlark/report"
)

// disconnected says how a run's messages left the ranks apart: the
// groups of ranks they joined (a message joins its sender and receiver),
// when there are several, with the directions used (sent or received
// on) and those never used; nil when they joined every rank (or no group was installed). A
// collective needs data to cross between every two ranks, so a wrong
// result with groups is explained by them: a ring kernel's E/W on a
// mesh_2d go round each row, and the rows never meet.
func disconnected(g *machine.Group) *report.Disconnected {
	if g == nil || len(g.EPs) < 2 {
		return nil
	}
	n := len(g.EPs)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	used, installed := map[string]bool{}, map[string]bool{}
	for r, ep := range g.EPs {
		for _, q := range ep.QPs {
			installed[q.Dir] = true
			if q.MyTail > 0 {
				used[q.Dir] = true
			}
			if q.MyHead == 0 || q.Peer < 0 || q.Peer >= n {
				continue
			}
			used[q.Dir] = true
			if a, b := find(r), find(q.Peer); a != b {
				parent[max(a, b)] = min(a, b)
			}
		}
	}
	byRoot := map[int]int{} // a group's root → its index in groups
	var groups [][]int
	for r := range n {
		root := find(r)
		i, ok := byRoot[root]
		if !ok {
			i = len(groups)
			byRoot[root] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	if len(groups) < 2 {
		return nil
	}
	d := &report.Disconnected{Groups: groups, Used: []string{}, Unused: []string{}}
	for dir := range installed {
		if used[dir] {
			d.Used = append(d.Used, dir)
		} else {
			d.Unused = append(d.Unused, dir)
		}
	}
	slices.Sort(d.Used)
	slices.Sort(d.Unused)
	return d
}
