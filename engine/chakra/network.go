package chakra

import (
	"fmt"
	"strings"

	"kernbench/engine/oplog"
)

// Network is the ASTRA-sim analytical network the traces are written
// for: one dimension, a Ring (every message goes to a neighbour in rank
// order) or else a Switch.
type Network struct {
	Topology  string  // Ring | Switch
	NPUs      int     // npus_count
	GBps      float64 // bandwidth of each link
	LatencyNs float64 // latency of each link
	// Exact says every message's path in kernbench has exactly this
	// bandwidth and latency and shares its links with the same messages
	// as in the topology; otherwise Why says what was rounded.
	Exact bool
	Why   string
}

type pathInfo struct {
	hops      []Hop
	gbps, lat float64
}

// network chooses the topology from the paths the messages took.
func network(run Run, sends []*oplog.Record, recvs map[msgKey]*oplog.Record) (Network, error) {
	nw := Network{NPUs: run.World, Topology: "Switch"}
	type pair struct{ src, dst int }
	var pairs []pair
	paths := map[pair]pathInfo{}
	for _, s := range sends {
		p := pair{s.Rank, recvs[msgKey{s.Dst, s.SenderSeq}].Rank}
		if _, ok := paths[p]; ok {
			continue
		}
		var hops []Hop
		if run.Route != nil {
			hops = run.Route(p.src, p.dst)
		}
		if len(hops) == 0 {
			return nw, fmt.Errorf("--export-chakra: no links between rank %d and rank %d", p.src, p.dst)
		}
		pi := pathInfo{hops: hops, gbps: hops[0].GBps}
		for _, h := range hops {
			pi.gbps = min(pi.gbps, h.GBps)
			pi.lat += h.LatencyNs
		}
		paths[p] = pi
		pairs = append(pairs, p)
	}
	if len(pairs) == 0 {
		return nw, fmt.Errorf("--export-chakra: the run sent no message: nothing to export")
	}
	// The slowest bandwidth and the longest latency of the paths used;
	// uniform says they are all alike.
	uniform := true
	first := paths[pairs[0]]
	nw.GBps = first.gbps
	var maxLat float64
	for _, p := range pairs {
		pi := paths[p]
		nw.GBps = min(nw.GBps, pi.gbps)
		maxLat = max(maxLat, pi.lat)
		if pi.gbps != first.gbps || pi.lat != first.lat {
			uniform = false
		}
	}
	// Who shares each kernbench link.
	users := map[string][]pair{}
	var linkOrder []string
	for _, p := range pairs {
		for _, h := range paths[p].hops {
			if _, ok := users[h.Name]; !ok {
				linkOrder = append(linkOrder, h.Name)
			}
			users[h.Name] = append(users[h.Name], p)
		}
	}
	ring := run.World > 1
	for _, p := range pairs {
		d := (p.dst - p.src + run.World) % run.World
		if d != 1 && d != run.World-1 {
			ring = false
		}
	}
	var shared []string
	if ring {
		// A bidirectional ring: each ordered neighbour pair a link of its
		// own, the whole kernbench path in one hop.
		nw.Topology, nw.LatencyNs = "Ring", maxLat
		for _, l := range linkOrder {
			if len(users[l]) > 1 {
				shared = append(shared, l)
			}
		}
	} else {
		// A switch: an up link per source, a down link per destination,
		// half the path's latency each.
		nw.LatencyNs = maxLat / 2
		for _, p := range pairs {
			if len(paths[p].hops) != 2 {
				uniform = false
			}
		}
		for _, l := range linkOrder {
			srcs, dsts := map[int]bool{}, map[int]bool{}
			for _, p := range users[l] {
				srcs[p.src], dsts[p.dst] = true, true
			}
			if len(srcs) > 1 && len(dsts) > 1 {
				shared = append(shared, l)
			}
		}
		if uniform {
			// Exact only when both hops have the path's bandwidth and
			// half its latency each.
			for _, p := range pairs {
				for _, h := range paths[p].hops {
					if h.GBps != nw.GBps || h.LatencyNs != nw.LatencyNs {
						uniform = false
					}
				}
			}
		}
	}
	// Links whose latency a fault jitters: the file has one latency.
	var jittered []string
	for _, l := range linkOrder {
		for _, h := range paths[users[l][0]].hops {
			if h.Name == l && h.JitterNs > 0 {
				jittered = append(jittered, fmt.Sprintf("%s up to %g ns", l, h.JitterNs))
				break
			}
		}
	}
	nw.Exact = uniform && len(shared) == 0 && len(jittered) == 0
	var why []string
	if !uniform {
		why = append(why, fmt.Sprintf("the paths differ: every link gets the slowest bandwidth (%g GB/s) and the latency that makes the longest path's (%g ns)", nw.GBps, maxLat))
	}
	if len(shared) > 0 {
		if len(shared) > 3 {
			shared = append(shared[:3], "…")
		}
		why = append(why, fmt.Sprintf("kernbench links carry messages that the %s gives links of their own (%s)", strings.ToLower(nw.Topology), strings.Join(shared, ", ")))
	}
	if len(jittered) > 0 {
		if len(jittered) > 3 {
			jittered = append(jittered[:3], "…")
		}
		why = append(why, fmt.Sprintf("in kernbench a fault jitters the latency of %s more per transfer; the links here have one latency, without it", strings.Join(jittered, ", ")))
	}
	nw.Why = strings.Join(why, "; ")
	return nw, nil
}
