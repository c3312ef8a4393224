package chakra_test

import (
	"container/heap"
	"fmt"
	"regexp"
	"strconv"

	"kernbench/engine/chakra"
)

// A small analytical model of the exported graph, to check that the
// export carries the schedule: per message, the path's latency plus its
// bytes at the path's slowest bandwidth (cut-through), links served first
// come first served; a node starts when its dependencies have ended.
// With store-and-forward and one send per rank at a time, each send
// ending when its message arrives, it also gives what ASTRA-sim's way of
// running the same graph costs under this model (docs/astra-sim.md).

type netCfg struct {
	topology  string
	npus      int
	gbps, lat float64
}

var ymlRe = regexp.MustCompile(`(?m)^(\w+):\s*\[\s*([^\]\s]+)\s*\]`)

func parseNetwork(data []byte) (netCfg, error) {
	var c netCfg
	for _, m := range ymlRe.FindAllSubmatch(data, -1) {
		v := string(m[2])
		var err error
		switch string(m[1]) {
		case "topology":
			c.topology = v
		case "npus_count":
			c.npus, err = strconv.Atoi(v)
		case "bandwidth":
			c.gbps, err = strconv.ParseFloat(v, 64)
		case "latency":
			c.lat, err = strconv.ParseFloat(v, 64)
		}
		if err != nil {
			return c, err
		}
	}
	if c.topology == "" || c.npus == 0 || c.gbps == 0 {
		return c, fmt.Errorf("incomplete network file:\n%s", data)
	}
	return c, nil
}

// route is the links from src to dst, named by their ends.
func (c netCfg) route(src, dst int) []string {
	switch c.topology {
	case "Switch":
		return []string{fmt.Sprintf("up%d", src), fmt.Sprintf("down%d", dst)}
	default: // a bidirectional ring: the shorter way round
		var links []string
		fwd := (dst - src + c.npus) % c.npus
		step := 1
		if fwd > c.npus-fwd {
			step = c.npus - 1
		}
		for r := src; r != dst; r = (r + step) % c.npus {
			links = append(links, fmt.Sprintf("%d->%d", r, (r+step)%c.npus))
		}
		return links
	}
}

type modelOpts struct {
	storeAndForward bool    // each hop takes the whole message before the next starts
	oneSend         bool    // a rank has one send in flight, which ends when it arrives
	compNs          float64 // time of a COMP node
}

type ref struct {
	rank int
	id   uint64
}

type event struct {
	t     float64
	ready bool // else: the node ends
	n     ref
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	a, b := e[i], e[j]
	if a.t != b.t {
		return a.t < b.t
	}
	if a.ready != b.ready {
		return !a.ready // ends first
	}
	if a.n.rank != b.n.rank {
		return a.n.rank < b.n.rank
	}
	return a.n.id < b.n.id
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

type msgID struct {
	src, dst int
	tag      int64
}

// simulate runs the graph and returns when its last node ends, in ns.
func simulate(files []*chakra.File, nw netCfg, o modelOpts) (float64, error) {
	type state struct {
		node     *chakra.Node
		waiting  int
		readyAt  float64
		ready    bool
		arrived  float64
		hasArr   bool
		children []ref
	}
	nodes := map[ref]*state{}
	recvOf := map[msgID]ref{}
	for rank, f := range files {
		for i := range f.Nodes {
			n := &f.Nodes[i]
			r := ref{rank, n.ID}
			if _, dup := nodes[r]; dup {
				return 0, fmt.Errorf("rank %d: node %d twice", rank, n.ID)
			}
			nodes[r] = &state{node: n, waiting: len(n.DataDeps)}
			if n.Type == chakra.CommRecvNode {
				src, _ := n.Int("comm_src")
				tag, _ := n.Int("comm_tag")
				recvOf[msgID{int(src), rank, tag}] = r
			}
		}
	}
	var q events
	for r, s := range nodes {
		for _, d := range s.node.DataDeps {
			p, ok := nodes[ref{r.rank, d}]
			if !ok {
				return 0, fmt.Errorf("rank %d: node %d depends on node %d, which is not in the file", r.rank, r.id, d)
			}
			p.children = append(p.children, r)
		}
		if s.waiting == 0 {
			heap.Push(&q, event{0, true, r})
		}
	}
	free := map[string]float64{} // when each link is next free
	sendBusy := map[int]bool{}
	pending := map[int][]ref{} // sends waiting for their rank's one send
	var end float64
	ended := 0
	var transmit func(t float64, r ref) error
	transmit = func(t float64, r ref) error {
		n := nodes[r].node
		dst, _ := n.Int("comm_dst")
		tag, _ := n.Int("comm_tag")
		size, _ := n.Int("comm_size")
		links := nw.route(r.rank, int(dst))
		xfer := float64(size) / nw.gbps
		var arrive float64
		if o.storeAndForward {
			at := t
			for _, l := range links {
				start := max(at, free[l])
				free[l] = start + xfer
				at = start + nw.lat + xfer
			}
			arrive = at
		} else {
			// Cut-through: the head goes on as soon as it has crossed a
			// link, each link carries the message in its own turn, and
			// no link finishes before the one before it has delivered.
			head, tail := t, t
			for _, l := range links {
				start := max(head, free[l])
				done := max(start+xfer, tail)
				free[l] = done
				head, tail = start+nw.lat, done+nw.lat
			}
			arrive = tail
		}
		rr, ok := recvOf[msgID{r.rank, int(dst), tag}]
		if !ok {
			return fmt.Errorf("rank %d's send %d (tag %d) has no receive on rank %d", r.rank, r.id, tag, dst)
		}
		rs := nodes[rr]
		rs.arrived, rs.hasArr = arrive, true
		if rs.ready {
			heap.Push(&q, event{max(rs.readyAt, arrive), false, rr})
		}
		heap.Push(&q, event{arrive, false, r})
		return nil
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		s := nodes[e.n]
		if e.ready {
			s.ready, s.readyAt = true, e.t
			switch s.node.Type {
			case chakra.CommSendNode:
				if o.oneSend && sendBusy[e.n.rank] {
					pending[e.n.rank] = append(pending[e.n.rank], e.n)
					continue
				}
				sendBusy[e.n.rank] = true
				if err := transmit(e.t, e.n); err != nil {
					return 0, err
				}
			case chakra.CommRecvNode:
				if s.hasArr {
					heap.Push(&q, event{max(e.t, s.arrived), false, e.n})
				}
			case chakra.CompNode:
				heap.Push(&q, event{e.t + o.compNs, false, e.n})
			default:
				heap.Push(&q, event{e.t, false, e.n})
			}
			continue
		}
		ended++
		end = max(end, e.t)
		for _, c := range s.children {
			cs := nodes[c]
			cs.waiting--
			cs.readyAt = max(cs.readyAt, e.t)
			if cs.waiting == 0 {
				heap.Push(&q, event{cs.readyAt, true, c})
			}
		}
		if s.node.Type == chakra.CommSendNode && o.oneSend {
			sendBusy[e.n.rank] = false
			if p := pending[e.n.rank]; len(p) > 0 {
				// The lowest id of the sends waiting, as ASTRA-sim's
				// workload layer picks.
				best := 0
				for i := range p {
					if p[i].id < p[best].id {
						best = i
					}
				}
				next := p[best]
				pending[e.n.rank] = append(p[:best], p[best+1:]...)
				sendBusy[e.n.rank] = true
				if err := transmit(e.t, next); err != nil {
					return 0, err
				}
			}
		}
	}
	if ended != len(nodes) {
		return 0, fmt.Errorf("%d of %d nodes never ran: a cycle, or a receive without its send", len(nodes)-ended, len(nodes))
	}
	return end, nil
}
