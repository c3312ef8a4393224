// Package deadlock explains a run that stopped waiting: which processes
// are blocked in what (BlockedProcs, DescribeBlocked, grouped and bounded),
// who waits for whom (WaitGraph, FindCycle, WriteDOT), the hint for a ring
// of sends larger than the ring they fill (RingHint), and whether a wait
// past the deadlock timeout waits on a rank still working, slow rather
// than stuck (WaitsOnWork). It reads the simulation's processes and queue
// pairs and decides nothing about the run.
package deadlock

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/engine/topology"
)

// Edge is "rank From waits for rank To" (because of Why).
type Edge struct {
	From, To int
	Why      string
}

// WaitGraph builds the wait-for graph of blocked processes: a blocked recv
// waits for its peer's send, a blocked send for its peer's recv (credits),
// a round-robin recv for every installed peer.
func WaitGraph(blocked []*sim.Proc) []Edge {
	var edges []Edge
	for _, p := range blocked {
		w, ok := p.Wait.(*machine.WaitInfo)
		if !ok {
			continue
		}
		switch {
		case w.QP != nil && (w.Op == "send" || w.Op == "recv"):
			edges = append(edges, Edge{From: w.QP.Rank, To: w.QP.Peer, Why: w.Op + " " + w.QP.Dir})
		case w.Op == "recv(any)":
			for _, q := range w.EP.QPs {
				edges = append(edges, Edge{From: w.EP.Rank, To: q.Peer, Why: "recv(any) " + q.Dir})
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
	// A rank's kernel and its tl.send_async process waiting on one queue
	// pair are one wait of the rank: the graph is of ranks, each edge once.
	return slices.Compact(edges)
}

// FindCycle returns one cycle of the graph as a rank sequence (first rank
// repeated at the end), or nil. Deterministic: searches from the smallest
// rank, following edges in sorted order.
func FindCycle(edges []Edge) []int {
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

// DescribeWaitGraph renders the graph as text with its cycle (FindCycle)
// marked.
func DescribeWaitGraph(edges []Edge, cycle []int) string {
	if len(edges) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("wait-for graph (A -> B: rank A waits for rank B):\n")
	// A large graph keeps its first and last edges; the cycle line below
	// still names the cycle.
	for i, e := range edges {
		if len(edges) > maxListed && i >= maxListed-3 && i < len(edges)-2 {
			if i == maxListed-3 {
				fmt.Fprintf(&b, "  ... %d more edge(s)\n", len(edges)-maxListed+1)
			}
			continue
		}
		mark := ""
		if inCycle(cycle, e.From, e.To) {
			mark = "   <- cycle"
		}
		fmt.Fprintf(&b, "  rank %d -> rank %d  (%s)%s\n", e.From, e.To, e.Why, mark)
	}
	if cycle != nil {
		var parts []string
		for i, r := range cycle {
			if len(cycle) > maxListed && i >= maxListed-3 && i < len(cycle)-2 {
				if i == maxListed-3 {
					parts = append(parts, "...")
				}
				continue
			}
			parts = append(parts, fmt.Sprintf("rank %d", r))
		}
		fmt.Fprintf(&b, "cycle: %s", strings.Join(parts, " -> "))
		if len(cycle) > maxListed {
			fmt.Fprintf(&b, " (%d ranks)", len(cycle)-1)
		}
	} else {
		b.WriteString("no cycle: a process waits for one that is blocked elsewhere or finished")
	}
	return b.String()
}

// maxListed bounds the edges and cycle members a report lists one by one.
const maxListed = 16

// WriteDOT writes the wait-for graph in Graphviz DOT, cycle edges in red.
func WriteDOT(w io.Writer, edges []Edge) error {
	cycle := FindCycle(edges)
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

// summarizer is a wait that can describe itself without the rank-specific
// details (machine.WaitInfo).
type summarizer interface{ Summary() string }

// DescribeBlocked lists the blocked processes with what they wait for and
// where. Processes of several ranks in the same state (the same kind of
// wait at the same positions) are one entry, "ranks 4-63 (60): waiting in
// recv W, no data", so that a large deadlock stays readable, followed by
// their queue pairs' pointers, one line for the ranks whose pointers are
// the same and whose peers are at the same offset ("rank r in 4-63: recv
// W <- rank r-1: my_tail=0 peer_head_cache=0 n_slots=8"); a process alone
// in its state is listed with its full wait, pointers included. views are
// the processes as BlockedProcs describes them, in the same order.
func DescribeBlocked(blocked []*sim.Proc, views []BlockedProc, note func(p *sim.Proc) string) string {
	type group struct {
		procs []int // indices into blocked
		label string
		state string // summary of the wait and the stack, for grouping
		// thread: the group is threads of one rank running one function
		// ("rank 0 thread 7 (waiter)"), nums their numbers.
		thread bool
		nums   []int
	}
	byState := map[string]*group{}
	of := make([]*group, len(blocked))
	for i, p := range blocked {
		stack := stackLines(p)
		if note != nil {
			if n := note(p); n != "" {
				stack += "    " + n + "\n"
			}
		}
		state, label, num := "", "", 0
		thread := false
		if m := threadName.FindStringSubmatch(p.Name); m != nil {
			// Threads of a rank running one function in one wait at the
			// same positions are one entry too ("rank 0 threads 1-9999
			// (waiter) (9999)"): 20,000 threads wrote 2.6 MB.
			num, _ = strconv.Atoi(m[2])
			thread, label = true, fmt.Sprintf("rank %s threads %%s (%s)", m[1], m[3])
			state = "thread\n" + label + "\n" + clipText(fmt.Sprint(p.Wait)) + "\n" + stack
		} else if s, ok := p.Wait.(summarizer); ok {
			// Only ranks' own processes group ("rank N", or a rank's
			// tl.send_async: "rank N tl.send_async(...) issued at ...").
			if r, ok := procRank(p.Name); ok && !strings.Contains(p.Name, "thread") {
				label = strings.TrimPrefix(p.Name, fmt.Sprintf("rank %d", r))
				state = label + "\n" + s.Summary() + "\n" + stack
			}
		}
		if g := byState[state]; state != "" && g != nil {
			g.procs = append(g.procs, i)
			g.nums = append(g.nums, num)
			of[i] = g
			continue
		}
		g := &group{procs: []int{i}, state: state, label: label, thread: thread, nums: []int{num}}
		of[i] = g
		if state != "" {
			byState[state] = g
		}
	}
	// In the order of the blocked list: a group at its first member, and
	// the members of a group too small to shorten anything one by one
	// (two lines are as short as a group's). At most maxEntries entries:
	// the rest are counted.
	var b strings.Builder
	written := map[*group]bool{}
	entries, left, leftProcs := 0, 0, 0
	for i, p := range blocked {
		g := of[i]
		if len(g.procs) >= minGroup && written[g] {
			continue
		}
		written[g] = true
		if entries == maxEntries {
			left++
			if len(g.procs) >= minGroup {
				leftProcs += len(g.procs)
			} else {
				leftProcs++
			}
			continue
		}
		entries++
		var lines []string
		switch {
		case len(g.procs) < minGroup:
			fmt.Fprintf(&b, "  %s", clipText(p.Name))
			if p.Wait != nil {
				// The entry names the rank: a queue pair's wait without it.
				wait := fmt.Sprint(p.Wait)
				if d, ok := p.Wait.(interface{ Detail() string }); ok {
					wait = d.Detail()
				}
				fmt.Fprintf(&b, ": waiting in %s since t=%v", clipText(wait), p.WaitSince)
			}
		case g.thread:
			p = blocked[g.procs[0]]
			first, last := p.WaitSince, p.WaitSince
			for _, k := range g.procs {
				first, last = min(first, blocked[k].WaitSince), max(last, blocked[k].WaitSince)
			}
			fmt.Fprintf(&b, "  %s (%d): waiting in %s", fmt.Sprintf(g.label, topology.RankRanges(g.nums)), len(g.procs), clipText(fmt.Sprint(p.Wait)))
			writeSince(&b, first, last)
		default:
			p = blocked[g.procs[0]]
			ranks := make([]int, len(g.procs))
			members := make([]*BlockedProc, len(g.procs))
			first, last := p.WaitSince, p.WaitSince
			for j, k := range g.procs {
				q := blocked[k]
				ranks[j], _ = procRank(q.Name)
				members[j] = &views[k]
				first, last = min(first, q.WaitSince), max(last, q.WaitSince)
			}
			fmt.Fprintf(&b, "  ranks %s (%d)%s: waiting in %s", topology.RankRanges(ranks), len(ranks), g.label, p.Wait.(summarizer).Summary())
			writeSince(&b, first, last)
			lines = pointerLines(members)
		}
		b.WriteByte('\n')
		b.WriteString(stackLines(p))
		if note != nil {
			if n := note(p); n != "" {
				fmt.Fprintf(&b, "    %s\n", n)
			}
		}
		for _, l := range lines {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	if left > 0 {
		fmt.Fprintf(&b, "  ... %d more process(es) in %d more entr%s, not shown\n", leftProcs, left, map[bool]string{true: "y", false: "ies"}[left == 1])
	}
	return b.String()
}

func writeSince(b *strings.Builder, first, last sim.Time) {
	if first == last {
		fmt.Fprintf(b, " since t=%v", first)
	} else {
		fmt.Fprintf(b, " since t=%v to %v", first, last)
	}
}

// threadName matches a spawned thread's process name: its rank, its
// number and its function.
var threadName = regexp.MustCompile(`^rank (\d+) thread (\d+) \((.*)\)$`)

// maxEntries bounds the entries (a process, or a group of them) a deadlock
// report lists; maxText the length of a name or wait it quotes (a 10 MB
// tl.event name was printed whole, twice).
const (
	maxEntries = 64
	maxText    = 200
)

// clipText is s cut to maxText bytes (at a rune boundary), saying how
// many it left out.
func clipText(s string) string {
	if len(s) <= maxText {
		return s
	}
	n := maxText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d more bytes)", s[:n], len(s)-n)
}

// minGroup is the fewest processes a deadlock report lists as one group.
const minGroup = 3

// stackLines is p's Starlark call stack, innermost first, one indented
// line per frame.
func stackLines(p *sim.Proc) string {
	th, ok := p.Data.(*starlark.Thread)
	if !ok {
		return ""
	}
	var b strings.Builder
	stack := th.CallStack()
	for i := len(stack) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "    %s: in %s\n", stack[i].Pos, stack[i].Name)
	}
	return b.String()
}
