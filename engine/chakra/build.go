package chakra

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"kernbench/engine/oplog"
)

// Hop is one link of the path a message takes between two ranks.
type Hop struct {
	Name      string
	Kind      string  // pe_noc, ucie, pcie
	GBps      float64 // bandwidth, GB/s = bytes/ns
	LatencyNs float64
	// JitterNs is the most a fault's jitter adds to the hop's latency
	// per transfer (0: none), which network.yml cannot express.
	JitterNs float64
}

// Run is what the exporter is told about the run besides its op_log.
type Run struct {
	Algorithm  string // the algorithm's name (the files' prefix when it is a plain name)
	Collective string
	World      int
	Bytes      int64 // the run's --bytes (per-rank buffer, as the table's size column counts it)
	DType      string
	SimTimeNs  float64 // kernbench's simulated time of the run
	// Route is the links from rank src to rank dst, memory ports left out.
	Route func(src, dst int) []Hop
}

// Trace is a run's schedule as Chakra execution traces: one node list per
// rank, and the network the messages used.
type Trace struct {
	Run     Run
	Ranks   [][]Node
	Network Network
	// Messages, SendBytes and RecvBytes count the COMM_SEND and
	// COMM_RECV nodes (one per IPCQ message) and their bytes, per rank.
	Messages             int
	SendBytes, RecvBytes []int64
	Comps                int
}

// reduceOps are the math ops of two tiles that make a COMP node: the
// reductions. Others (a scalar op, a conversion, sub, div) pass their
// operands' producers on.
var reduceOps = map[string]bool{"add": true, "mul": true, "max": true, "min": true}

// node is a node under construction.
type node struct {
	rank int
	seq  uint64 // the record's: the rank's nodes are numbered in this order
	n    Node
	deps []int // producers, as indices into b.nodes
}

type builder struct {
	nodes []*node
	mem   segMap
	tiles map[int64][]int
}

type msgKey struct {
	slot, seq uint64 // the rx slot it was delivered to, the sender's sequence number
}

type qpKey struct {
	rank int
	dir  string
}

// Build turns a run's op_log into per-rank execution traces: a COMM_SEND
// node for every IPCQ message sent and a COMM_RECV node for every one
// received (its peer, a tag of its own and its bytes), a COMP node for
// every reduction of two tiles, and as data dependencies the waits the
// data forces: a send waits for the nodes that produced the bytes it
// sends (the receive it forwards, the reduction it sends on), a reduction
// for the nodes that produced its operands, and a receive for the
// previous receive on its queue pair (a queue delivers in order). Bytes
// are followed through memory (fetch, store, copy) by replaying the
// records in the order their effects became visible, as phase 2 does.
func Build(run Run, records []*oplog.Record) (*Trace, error) {
	if run.World < 1 {
		return nil, fmt.Errorf("--export-chakra: world size %d", run.World)
	}
	// Pair every send with its receive: the slot it was delivered to and
	// the sender's sequence number name one message.
	sends := map[msgKey]*oplog.Record{}
	recvs := map[msgKey]*oplog.Record{}
	for _, r := range records {
		if r.Kind != oplog.KindIPCQ {
			continue
		}
		switch r.Name {
		case "send":
			sends[msgKey{r.Dst, r.SenderSeq}] = r
		case "recv":
			recvs[msgKey{r.Src, r.SenderSeq}] = r
		}
	}
	var sendOrder []*oplog.Record
	for _, r := range sends {
		sendOrder = append(sendOrder, r)
	}
	slices.SortFunc(sendOrder, func(a, b *oplog.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	tags := map[msgKey]int32{}
	for i, s := range sendOrder {
		k := msgKey{s.Dst, s.SenderSeq}
		if _, ok := recvs[k]; !ok {
			return nil, fmt.Errorf("--export-chakra: rank %d's message #%d on %s was never received: a Chakra send needs its receive", s.Rank, s.SenderSeq, s.Dir)
		}
		if i >= 500_000_000 {
			// ASTRA-sim keeps tags of messages issued by a workload
			// below 5·10^8.
			return nil, fmt.Errorf("--export-chakra: the run sends more than 500 000 000 messages, more tags than ASTRA-sim distinguishes")
		}
		tags[k] = int32(i)
	}
	for _, r := range records {
		if r.Kind != oplog.KindIPCQ || r.Name != "recv" {
			continue
		}
		if _, ok := sends[msgKey{r.Src, r.SenderSeq}]; !ok {
			return nil, fmt.Errorf("--export-chakra: rank %d received message #%d on %s, whose send is not in the op_log", r.Rank, r.SenderSeq, r.Dir)
		}
	}

	// Replay in the order effects became visible (t_end, then seq).
	order := slices.Clone(records)
	slices.SortStableFunc(order, func(a, b *oplog.Record) int {
		if c := cmp.Compare(a.TEnd, b.TEnd); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	b := &builder{tiles: map[int64][]int{}}
	lastRecv := map[qpKey]int{}
	t := &Trace{Run: run, SendBytes: make([]int64, run.World), RecvBytes: make([]int64, run.World)}
	rankOK := func(r int) error {
		if r < 0 || r >= run.World {
			return fmt.Errorf("--export-chakra: the op_log names rank %d of a world of %d", r, run.World)
		}
		return nil
	}
	for _, r := range order {
		switch r.Kind {
		case oplog.KindIPCQ:
			if err := rankOK(r.Rank); err != nil {
				return nil, err
			}
			switch r.Name {
			case "send":
				k := msgKey{r.Dst, r.SenderSeq}
				peer := recvs[k].Rank
				if err := rankOK(peer); err != nil {
					return nil, err
				}
				b.add(r, CommSendNode, fmt.Sprintf("send %s #%d to rank %d", r.Dir, r.SenderSeq, peer),
					b.mem.get(r.Src, r.NBytes), commAttrs(r.Rank, peer, tags[k], r.NBytes))
				t.Messages++
				t.SendBytes[r.Rank] += r.NBytes
			case "recv":
				k := msgKey{r.Src, r.SenderSeq}
				peer := sends[k].Rank
				var deps []int
				q := qpKey{r.Rank, r.Dir}
				if prev, ok := lastRecv[q]; ok {
					deps = []int{prev}
				}
				i := b.add(r, CommRecvNode, fmt.Sprintf("recv %s #%d from rank %d", r.Dir, r.SenderSeq, peer),
					deps, commAttrs(peer, r.Rank, tags[k], r.NBytes))
				lastRecv[q] = i
				t.RecvBytes[r.Rank] += r.NBytes
				if r.RecvMode == oplog.CopyToDst {
					b.mem.set(r.Dst, r.NBytes, []int{i})
				} else {
					b.mem.set(r.Src, r.NBytes, []int{i})
				}
			}
		case oplog.KindMemory:
			switch {
			case r.TileOut != 0: // a fetch
				b.tiles[r.TileOut] = b.mem.get(r.Src, r.NBytes)
			case r.Name == "store":
				b.mem.set(r.Dst, r.NBytes, b.tiles[r.TileA])
			case r.Src != 0 && r.Dst != 0: // a copy
				b.mem.set(r.Dst, r.NBytes, b.mem.get(r.Src, r.NBytes))
			case r.Dst != 0: // written from the host, zeroed, allocated
				b.mem.set(r.Dst, r.NBytes, nil)
			}
		case oplog.KindMath:
			deps := union(b.tiles[r.TileA], b.tiles[r.TileB])
			if r.TileA != 0 && r.TileB != 0 && reduceOps[r.Op] {
				if err := rankOK(r.Rank); err != nil {
					return nil, err
				}
				i := b.add(r, CompNode, fmt.Sprintf("%s of %d elements", r.Op, r.Count), deps, []Attr{
					{"is_cpu_op", false},
					{"num_ops", r.Count},
					{"tensor_size", uint64(r.NBytes)},
				})
				t.Comps++
				deps = []int{i}
			}
			b.tiles[r.TileOut] = deps
		}
	}

	// Number each rank's nodes in the order they were issued, after its
	// metadata node (0).
	byRank := make([][]int, run.World)
	for i, n := range b.nodes {
		byRank[n.rank] = append(byRank[n.rank], i)
	}
	ids := make([]uint64, len(b.nodes))
	t.Ranks = make([][]Node, run.World)
	for rank, ns := range byRank {
		sort.SliceStable(ns, func(i, j int) bool { return b.nodes[ns[i]].seq < b.nodes[ns[j]].seq })
		for j, i := range ns {
			ids[i] = uint64(j + 1)
		}
		out := []Node{{ID: 0, Name: "kernbench " + run.Algorithm, Type: MetadataNode, Attrs: []Attr{
			{"is_cpu_op", false},
			{"rank", int64(rank)},
			{"world_size", int64(run.World)},
			{"collective", run.Collective},
			{"bytes", run.Bytes},
			{"dtype", run.DType},
		}}}
		for _, i := range ns {
			n := b.nodes[i]
			nd := n.n
			nd.ID = ids[i]
			for _, d := range n.deps {
				// A dependency on another rank (a kernel that reads a
				// peer's memory) has no place in a rank's file: the
				// messages carry the order between ranks.
				if b.nodes[d].rank == rank {
					nd.DataDeps = append(nd.DataDeps, ids[d])
				}
			}
			slices.Sort(nd.DataDeps)
			nd.DataDeps = slices.Compact(nd.DataDeps)
			out = append(out, nd)
		}
		t.Ranks[rank] = out
	}
	var err error
	if t.Network, err = network(run, sendOrder, recvs); err != nil {
		return nil, err
	}
	return t, nil
}

// commAttrs are a send's or receive's attributes, typed as Chakra's
// feeder reads them.
func commAttrs(src, dst int, tag int32, n int64) []Attr {
	return []Attr{
		{"is_cpu_op", false},
		{"comm_src", int32(src)},
		{"comm_dst", int32(dst)},
		{"comm_tag", tag},
		{"comm_size", n},
	}
}

func (b *builder) add(r *oplog.Record, typ NodeType, name string, deps []int, attrs []Attr) int {
	b.nodes = append(b.nodes, &node{rank: r.Rank, seq: r.Seq, n: Node{Name: name, Type: typ, Attrs: attrs}, deps: deps})
	return len(b.nodes) - 1
}

// union is the sorted set of a's and b's producers.
func union(a, b []int) []int {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// segMap is which nodes produced each byte of memory: sorted, disjoint
// segments [lo, hi) of physical addresses.
type segMap struct {
	segs []seg
}

type seg struct {
	lo, hi uint64
	prod   []int
}

// first is the index of the first segment ending after addr.
func (m *segMap) first(addr uint64) int {
	return sort.Search(len(m.segs), func(i int) bool { return m.segs[i].hi > addr })
}

// get is the union of the producers of [addr, addr+n).
func (m *segMap) get(addr uint64, n int64) []int {
	if n <= 0 {
		return nil
	}
	end := addr + uint64(n)
	var out []int
	for i := m.first(addr); i < len(m.segs) && m.segs[i].lo < end; i++ {
		out = union(out, m.segs[i].prod)
	}
	return out
}

// set makes prod the producers of [addr, addr+n).
func (m *segMap) set(addr uint64, n int64, prod []int) {
	if n <= 0 {
		return
	}
	end := addr + uint64(n)
	i := m.first(addr)
	j := i
	var keep []seg
	for ; j < len(m.segs) && m.segs[j].lo < end; j++ {
		s := m.segs[j]
		if s.lo < addr {
			keep = append(keep, seg{s.lo, addr, s.prod})
		}
		if s.hi > end {
			keep = append(keep, seg{end, s.hi, s.prod})
		}
	}
	repl := make([]seg, 0, len(keep)+1)
	for _, s := range keep {
		if s.lo < addr {
			repl = append(repl, s)
		}
	}
	if len(prod) > 0 {
		repl = append(repl, seg{addr, end, prod})
	}
	for _, s := range keep {
		if s.lo >= end {
			repl = append(repl, s)
		}
	}
	m.segs = slices.Replace(m.segs, i, j, repl...)
}
