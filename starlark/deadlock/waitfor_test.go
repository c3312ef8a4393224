package deadlock

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

func TestFindCycle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edges []Edge
		want  []int
	}{
		{"ring of 3", []Edge{{0, 2, "recv W"}, {1, 0, "recv W"}, {2, 1, "recv W"}}, []int{0, 2, 1, 0}},
		{"pair", []Edge{{0, 1, "send E"}, {1, 0, "send E"}}, []int{0, 1, 0}},
		{"chain without cycle", []Edge{{0, 1, "recv W"}, {1, 2, "recv W"}}, nil},
		{"cycle not through rank 0", []Edge{{0, 1, "recv W"}, {1, 2, "recv W"}, {2, 1, "send E"}}, []int{1, 2, 1}},
	} {
		if diff := cmp.Diff(tc.want, FindCycle(tc.edges)); diff != "" {
			t.Errorf("%s: cycle (-want +got):\n%s", tc.name, diff)
		}
	}
}

// The DOT output is well formed: one node per rank, one edge per wait,
// cycle edges in red, balanced braces.
func TestWriteDOT(t *testing.T) {
	var b strings.Builder
	edges := []Edge{{0, 1, "send E"}, {1, 0, "send E"}, {2, 0, "recv W"}}
	if err := WriteDOT(&b, edges); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"digraph waitfor {", `r0 [label="rank 0"];`, `r2 [label="rank 2"];`,
		`r0 -> r1 [label="send E", color=red, penwidth=2];`, `r2 -> r0 [label="recv W"];`} {
		if !strings.Contains(got, want) {
			t.Errorf("DOT lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "{") != strings.Count(got, "}") || !strings.HasSuffix(got, "}\n") {
		t.Errorf("DOT is not balanced:\n%s", got)
	}
}

// The wait-for graph is of ranks: a kernel waiting in tl.wait for its own
// tl.send_async, whose process waits on the same queue pair, is one edge,
// not two (the report listed every edge of such a cycle twice).
func TestWaitGraphEdgesOnce(t *testing.T) {
	q0 := &machine.QueuePair{Rank: 0, Peer: 1, Dir: "E"}
	q1 := &machine.QueuePair{Rank: 1, Peer: 0, Dir: "E"}
	var blocked []*sim.Proc
	for _, q := range []*machine.QueuePair{q0, q0, q1, q1} { // kernel and send_async process of each rank
		blocked = append(blocked, &sim.Proc{Wait: &machine.WaitInfo{Op: "send", QP: q}})
	}
	want := []Edge{{0, 1, "send E"}, {1, 0, "send E"}}
	if diff := cmp.Diff(want, WaitGraph(blocked)); diff != "" {
		t.Errorf("edges (-want +got):\n%s", diff)
	}
}
