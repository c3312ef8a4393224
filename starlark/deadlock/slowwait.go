package deadlock

import (
	"fmt"
	"strings"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// A wait longer than deadlock_timeout_ns is a deadlock only if what it
// waits for will never come. The wait-for edges say whom each blocked
// rank waits for; following them from the rank that timed out either
// stays among ranks that wait on queue pairs for each other or for ranks
// that have returned (stuck: a deadlock), or reaches a rank that is still
// working: a process not waiting on a queue pair (running, in a memory
// operation, a timed sleep, a flush of its own DMAs) or a receive whose
// message is on its way. A slow tree (a leaf waits for the broadcast while
// the root still reduces) is the second case: reporting it as a deadlock
// sends the user looking for a bug in a right algorithm.

// WaitsOnWork follows wt's wait-for edges from its rank and returns the
// chain to the first rank still working, or nil when there is none.
func WaitsOnWork(wt *sim.WaitTimeoutError) []int {
	if wt == nil || wt.Proc == nil {
		return nil
	}
	start, ok := procRank(wt.Proc.Name)
	if !ok {
		return nil
	}
	working := map[int]bool{}
	var waiting []*sim.Proc
	for _, p := range wt.Blocked {
		r, ok := procRank(p.Name)
		if !ok || p.Done() {
			continue
		}
		w, ipcq := p.Wait.(*machine.WaitInfo)
		switch {
		case !ipcq || w == nil || w.Op == "flush":
			working[r] = true
		case w.Op == "recv" && w.QP != nil && w.QP.PeerQP() != nil && w.QP.PeerQP().InFlight > 0:
			working[r] = true // its message is on its way
		default:
			waiting = append(waiting, p)
		}
	}
	next := map[int][]int{}
	for _, e := range WaitGraph(waiting) {
		next[e.From] = append(next[e.From], e.To)
	}
	// Breadth first, edges in sorted order: the shortest chain, the same
	// every run.
	from := map[int]int{start: start}
	queue := []int{start}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		if working[r] && r != start {
			chain := []int{r}
			for chain[0] != start {
				chain = append([]int{from[chain[0]]}, chain...)
			}
			return chain
		}
		for _, to := range next[r] {
			if _, seen := from[to]; !seen {
				from[to] = r
				queue = append(queue, to)
			}
		}
	}
	return nil
}

// ChainText writes a wait-for chain: "rank 7 -> rank 3 -> rank 1".
func ChainText(chain []int) string {
	parts := make([]string, len(chain))
	for i, r := range chain {
		parts[i] = fmt.Sprintf("rank %d", r)
	}
	return strings.Join(parts, " -> ")
}
