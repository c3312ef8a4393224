package ccl

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// waitEdge is "rank From waits for rank To" (because of Why).
type waitEdge struct {
	From, To int
	Why      string
}

// waitGraph builds the wait-for graph of blocked processes: a blocked recv
// waits for its peer's send, a blocked send for its peer's recv (credits),
// a round-robin recv for every installed peer.
func waitGraph(blocked []*sim.Proc) []waitEdge {
	var edges []waitEdge
	for _, p := range blocked {
		w, ok := p.Wait.(*machine.WaitInfo)
		if !ok {
			continue
		}
		switch {
		case w.QP != nil && (w.Op == "send" || w.Op == "recv"):
			edges = append(edges, waitEdge{From: w.QP.Rank, To: w.QP.Peer, Why: w.Op + " " + w.QP.Dir})
		case w.Op == "recv(any)":
			for _, q := range w.EP.QPs {
				edges = append(edges, waitEdge{From: w.EP.Rank, To: q.Peer, Why: "recv(any) " + q.Dir})
			}
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].From != edges[j].From {
			return edges[i].From < edges[j].From
		}
		if edges[i].To != edges[j].To {
			return edges[i].To < edges[j].To
		}
		return edges[i].Why < edges[j].Why
	})
	return edges
}

// findCycle returns one cycle of the graph as a rank sequence (first rank
// repeated at the end), or nil. Deterministic: searches from the smallest
// rank, following edges in sorted order.
func findCycle(edges []waitEdge) []int {
	adj := map[int][]int{}
	var nodes []int
	for _, e := range edges {
		if _, ok := adj[e.From]; !ok {
			nodes = append(nodes, e.From)
		}
		adj[e.From] = append(adj[e.From], e.To)
	}
	sort.Ints(nodes)
	state := map[int]int{} // 0 new, 1 on stack, 2 done
	var stack []int
	var cycle []int
	var visit func(n int) bool
	visit = func(n int) bool {
		state[n] = 1
		stack = append(stack, n)
		for _, m := range adj[n] {
			if state[m] == 1 {
				for i, s := range stack {
					if s == m {
						cycle = append(append([]int(nil), stack[i:]...), m)
						return true
					}
				}
			}
			if state[m] == 0 && visit(m) {
				return true
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = 2
		return false
	}
	for _, n := range nodes {
		if state[n] == 0 && visit(n) {
			return cycle
		}
	}
	return nil
}

func inCycle(cycle []int, from, to int) bool {
	for i := 0; i+1 < len(cycle); i++ {
		if cycle[i] == from && cycle[i+1] == to {
			return true
		}
	}
	return false
}

// describeWaitGraph renders the graph as text with the cycle marked.
func describeWaitGraph(edges []waitEdge) string {
	if len(edges) == 0 {
		return ""
	}
	cycle := findCycle(edges)
	var b strings.Builder
	b.WriteString("wait-for graph (A -> B: rank A waits for rank B):\n")
	for _, e := range edges {
		mark := ""
		if inCycle(cycle, e.From, e.To) {
			mark = "   <- cycle"
		}
		fmt.Fprintf(&b, "  rank %d -> rank %d  (%s)%s\n", e.From, e.To, e.Why, mark)
	}
	if cycle != nil {
		parts := make([]string, len(cycle))
		for i, r := range cycle {
			parts[i] = fmt.Sprintf("rank %d", r)
		}
		fmt.Fprintf(&b, "cycle: %s", strings.Join(parts, " -> "))
	} else {
		b.WriteString("no cycle: a process waits for one that is blocked elsewhere or finished")
	}
	return b.String()
}

// writeDOT writes the wait-for graph in Graphviz DOT, cycle edges in red.
func writeDOT(w io.Writer, edges []waitEdge) error {
	cycle := findCycle(edges)
	var b strings.Builder
	b.WriteString("digraph waitfor {\n  rankdir=LR;\n  node [shape=box];\n")
	seen := map[int]bool{}
	for _, e := range edges {
		for _, n := range []int{e.From, e.To} {
			if !seen[n] {
				seen[n] = true
				fmt.Fprintf(&b, "  r%d [label=\"rank %d\"];\n", n, n)
			}
		}
	}
	for _, e := range edges {
		attr := fmt.Sprintf("label=%q", e.Why)
		if inCycle(cycle, e.From, e.To) {
			attr += ", color=red, penwidth=2"
		}
		fmt.Fprintf(&b, "  r%d -> r%d [%s];\n", e.From, e.To, attr)
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}
