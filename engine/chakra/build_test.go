package chakra

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/oplog"
	"kernbench/engine/sim"
)

// oneLink is a route of one 100 GB/s, 10 ns link per ordered pair.
func oneLink(src, dst int) []Hop {
	return []Hop{{Name: "l" + string(rune('0'+src)) + string(rune('0'+dst)), Kind: "pe_noc", GBps: 100, LatencyNs: 10}}
}

// Records of a two-rank exchange: addresses 1000+ are rank 0's memory,
// 2000+ rank 1's; 1500 and 2500 their rx slots.
func rec(seq uint64, rank int, kind oplog.Kind, name string, tEnd sim.Time, f func(*oplog.Record)) *oplog.Record {
	r := &oplog.Record{Seq: seq, Rank: rank, Kind: kind, Name: name, TStart: tEnd, TEnd: tEnd}
	if f != nil {
		f(r)
	}
	return r
}

type depCase struct {
	name    string
	records []*oplog.Record
	// want: per rank, the nodes after the metadata node as
	// "NAME <- deps".
	want [][]string
	err  string
}

func summary(tr *Trace) [][]string {
	var out [][]string
	for _, nodes := range tr.Ranks {
		var rs []string
		for _, n := range nodes[1:] {
			s := n.Name
			if len(n.DataDeps) > 0 {
				s += " <-"
				for _, d := range n.DataDeps {
					s += " " + nodes[d].Name
				}
			}
			rs = append(rs, s)
		}
		out = append(out, rs)
	}
	return out
}

func TestBuildDependencies(t *testing.T) {
	send := func(seq uint64, rank int, tEnd sim.Time, src, slot uint64, sseq uint64) *oplog.Record {
		return rec(seq, rank, oplog.KindIPCQ, "send", tEnd, func(r *oplog.Record) {
			r.Src, r.Dst, r.NBytes, r.Dir, r.SenderSeq = src, slot, 64, "E", sseq
		})
	}
	recvSlot := func(seq uint64, rank int, tEnd sim.Time, slot uint64, sseq uint64) *oplog.Record {
		return rec(seq, rank, oplog.KindIPCQ, "recv", tEnd, func(r *oplog.Record) {
			r.Src, r.NBytes, r.Dir, r.SenderSeq, r.RecvMode = slot, 64, "W", sseq, oplog.ReturnSlot
		})
	}
	recvCopy := func(seq uint64, rank int, tEnd sim.Time, slot, dst uint64, sseq uint64) *oplog.Record {
		r := recvSlot(seq, rank, tEnd, slot, sseq)
		r.Dst, r.RecvMode = dst, oplog.CopyToDst
		return r
	}
	fetch := func(seq uint64, rank int, tEnd sim.Time, src uint64, tile int64) *oplog.Record {
		return rec(seq, rank, oplog.KindMemory, "fetch", tEnd, func(r *oplog.Record) { r.Src, r.NBytes, r.TileOut = src, 64, tile })
	}
	store := func(seq uint64, rank int, tEnd sim.Time, dst uint64, tile int64) *oplog.Record {
		return rec(seq, rank, oplog.KindMemory, "store", tEnd, func(r *oplog.Record) { r.Dst, r.NBytes, r.TileA = dst, 64, tile })
	}
	math := func(seq uint64, rank int, tEnd sim.Time, op string, a, b, out int64) *oplog.Record {
		return rec(seq, rank, oplog.KindMath, "math", tEnd, func(r *oplog.Record) {
			r.Op, r.TileA, r.TileB, r.TileOut, r.NBytes, r.Count = op, a, b, out, 64, 16
		})
	}
	cases := []depCase{{
		name: "a forwarded slot waits for its receive; the next receive for the previous one",
		records: []*oplog.Record{
			send(1, 0, 10, 1000, 2500, 0),
			send(2, 0, 20, 1064, 2564, 1),
			recvSlot(3, 1, 15, 2500, 0),
			recvSlot(4, 1, 25, 2564, 1),
			send(5, 1, 40, 2500, 1500, 0), // forwards the first message from its slot
			recvSlot(6, 0, 45, 1500, 0),
		},
		want: [][]string{
			{"send E #0 to rank 1", "send E #1 to rank 1", "recv W #0 from rank 1"},
			{"recv W #0 from rank 0", "recv W #1 from rank 0 <- recv W #0 from rank 0", "send E #0 to rank 0 <- recv W #0 from rank 0"},
		},
	}, {
		name: "a reduction waits for the receive of its operand, the send for the reduction; a local copy passes the producer on",
		records: []*oplog.Record{
			send(1, 0, 10, 1000, 2500, 0),
			recvCopy(2, 1, 12, 2500, 2100, 0),
			fetch(3, 1, 13, 2100, 1),
			fetch(4, 1, 13, 2000, 2), // its own data: no producer
			math(5, 1, 14, "add", 1, 2, 3),
			store(6, 1, 15, 2200, 3),
			rec(7, 1, oplog.KindMemory, "copy", 16, func(r *oplog.Record) { r.Src, r.Dst, r.NBytes = 2200, 2300, 64 }),
			send(8, 1, 30, 2300, 1500, 0),
			recvSlot(9, 0, 31, 1500, 0),
		},
		want: [][]string{
			{"send E #0 to rank 1", "recv W #0 from rank 1"},
			{"recv W #0 from rank 0", "add of 16 elements <- recv W #0 from rank 0", "send E #0 to rank 0 <- add of 16 elements"},
		},
	}, {
		name: "a scalar op passes its operand's producer on; overwritten memory forgets it",
		records: []*oplog.Record{
			send(1, 0, 10, 1000, 2500, 0),
			recvSlot(2, 1, 12, 2500, 0),
			fetch(3, 1, 13, 2500, 1),
			math(4, 1, 14, "div", 1, 0, 2),
			store(5, 1, 15, 2200, 2),
			send(6, 1, 20, 2200, 1500, 0),
			rec(7, 1, oplog.KindMemory, "host_write", 21, func(r *oplog.Record) { r.Dst, r.NBytes = 2200, 64 }),
			send(8, 1, 30, 2200, 1564, 1),
			recvSlot(9, 0, 31, 1500, 0),
			recvSlot(10, 0, 32, 1564, 1),
		},
		want: [][]string{
			{"send E #0 to rank 1", "recv W #0 from rank 1", "recv W #1 from rank 1 <- recv W #0 from rank 1"},
			{"recv W #0 from rank 0", "send E #0 to rank 0 <- recv W #0 from rank 0", "send E #1 to rank 0"},
		},
	}, {
		name:    "a message never received is refused",
		records: []*oplog.Record{send(1, 0, 10, 1000, 2500, 0)},
		err:     "rank 0's message #0 on E was never received",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := Build(Run{Algorithm: "x", World: 2, Route: oneLink}, c.records)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, summary(tr)); d != "" {
				t.Errorf("nodes (-want +got):\n%s", d)
			}
		})
	}
}

func TestSegMap(t *testing.T) {
	var m segMap
	m.set(0, 100, []int{1})
	m.set(20, 10, []int{2})
	m.set(25, 100, []int{3})
	m.set(90, 5, nil)
	type q struct {
		lo uint64
		n  int64
	}
	for _, c := range []struct {
		q    q
		want []int
	}{
		{q{0, 20}, []int{1}},
		{q{0, 21}, []int{1, 2}},
		{q{24, 2}, []int{2, 3}},
		{q{90, 5}, nil},
		{q{94, 2}, []int{3}},
		{q{124, 10}, []int{3}},
		{q{125, 10}, nil},
		{q{0, 200}, []int{1, 2, 3}},
	} {
		if d := cmp.Diff(c.want, m.get(c.q.lo, c.q.n)); d != "" {
			t.Errorf("get(%d, %d) (-want +got):\n%s", c.q.lo, c.q.n, d)
		}
	}
}

// The network is a ring when every message goes to a neighbour, a switch
// otherwise; exact only when kernbench's paths are alike and unshared.
func TestNetworkChoice(t *testing.T) {
	sw := func(src, dst int) []Hop {
		return []Hop{{Name: "up" + string(rune('0'+src)), GBps: 100, LatencyNs: 10}, {Name: "down" + string(rune('0'+dst)), GBps: 100, LatencyNs: 10}}
	}
	msg := func(seq uint64, src, dst int) []*oplog.Record {
		slot := uint64(10000*(dst+1) + int(seq)*64)
		return []*oplog.Record{
			rec(seq*2, src, oplog.KindIPCQ, "send", sim.Time(seq), func(r *oplog.Record) { r.Dst, r.NBytes, r.SenderSeq = slot, 64, seq }),
			rec(seq*2+1, dst, oplog.KindIPCQ, "recv", sim.Time(seq), func(r *oplog.Record) { r.Src, r.NBytes, r.SenderSeq = slot, 64, seq }),
		}
	}
	var ringMsgs, ringBoth, allMsgs []*oplog.Record
	for r := 0; r < 4; r++ {
		ringMsgs = append(ringMsgs, msg(uint64(r), r, (r+1)%4)...)
		ringBoth = append(ringBoth, msg(uint64(r), r, (r+1)%4)...)
		ringBoth = append(ringBoth, msg(uint64(10+r), r, (r+3)%4)...)
		allMsgs = append(allMsgs, msg(uint64(r), r, (r+2)%4)...)
	}
	// The same switch with a fault's jitter on rank 1's up link.
	jittered := func(src, dst int) []Hop {
		h := sw(src, dst)
		if src == 1 {
			h[0].JitterNs = 50
		}
		return h
	}
	for _, c := range []struct {
		name    string
		records []*oplog.Record
		route   func(src, dst int) []Hop // nil: sw
		want    Network
		why     string // a part of Why
	}{
		{"ring one way through a switch", ringMsgs, nil, Network{Topology: "Ring", NPUs: 4, GBps: 100, LatencyNs: 20, Exact: true}, ""},
		{"ring both ways shares kernbench's up links", ringBoth, nil, Network{Topology: "Ring", NPUs: 4, GBps: 100, LatencyNs: 20}, "links of their own"},
		{"not neighbours", allMsgs, nil, Network{Topology: "Switch", NPUs: 4, GBps: 100, LatencyNs: 10, Exact: true}, ""},
		// A latency that jitters is not the file's one latency.
		{"a jittered link", ringMsgs, jittered, Network{Topology: "Ring", NPUs: 4, GBps: 100, LatencyNs: 20}, "a fault jitters the latency of up1 up to 50 ns more per transfer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			route := c.route
			if route == nil {
				route = sw
			}
			tr, err := Build(Run{Algorithm: "x", World: 4, Route: route}, c.records)
			if err != nil {
				t.Fatal(err)
			}
			got := tr.Network
			got.Why = ""
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("network (-want +got):\n%s", d)
			}
			if !got.Exact && tr.Network.Why == "" {
				t.Errorf("an approximate network says nothing of why")
			}
			if !strings.Contains(tr.Network.Why, c.why) {
				t.Errorf("Why %q does not say %q", tr.Network.Why, c.why)
			}
		})
	}
}
