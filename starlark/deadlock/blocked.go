package deadlock

// The blocked processes of a deadlock as data: what each waits in and,
// for a wait on a queue pair, the pointers that explain it (the text
// report groups them, --json lists them), and the hint for a cycle of
// sends that cannot finish.

import (
	"fmt"
	"strings"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/engine/topology"
)

// BlockedProc is one blocked process of a deadlock (error.blocked in
// --json).
type BlockedProc struct {
	Process string `json:"process"`
	// Rank is the rank the process belongs to, when it has one.
	Rank *int `json:"rank,omitempty"`
	// Wait is what it waits in, as the text report says it.
	Wait    string  `json:"wait"`
	SinceNs float64 `json:"since_ns"`
	// Op is the queue-pair operation it waits in (send, recv, recv(any),
	// flush), and QueuePairs the queue pairs it waits on (every
	// direction for a recv(any)); both empty for other waits.
	Op         string    `json:"op,omitempty"`
	QueuePairs []QPState `json:"queue_pairs,omitempty"`
	// Backtrace is its Starlark call stack, innermost first.
	Backtrace []string `json:"backtrace,omitempty"`
}

// QPState is a queue pair a blocked process waits on, with the pointers
// that explain the wait: a send waits while my_head − peer_tail_cache =
// n_slots (the peer's ring is full), a recv while my_tail =
// peer_head_cache (nothing has arrived), a flush while sends are in
// flight.
type QPState struct {
	Dir           string  `json:"dir"`
	Peer          int     `json:"peer"`
	PeerDir       string  `json:"peer_dir"`
	MyHead        *uint64 `json:"my_head,omitempty"`
	PeerTailCache *uint64 `json:"peer_tail_cache,omitempty"`
	MyTail        *uint64 `json:"my_tail,omitempty"`
	PeerHeadCache *uint64 `json:"peer_head_cache,omitempty"`
	InFlight      *int    `json:"in_flight,omitempty"`
	NSlots        int     `json:"n_slots"`
	SlotSize      int64   `json:"slot_size"`
	// SendBytes is the size of the buffer a blocked send is sending (a
	// tl.send or tl.send_async of several messages); absent for a single
	// message and when unknown (a fused primitive's send).
	SendBytes int64 `json:"send_bytes,omitempty"`
	// world is the group's size (the peer as an offset of the rank).
	world int
}

// ring is the bytes the peer's receive ring holds.
func (q QPState) ring() int64 { return int64(q.NSlots) * q.SlotSize }

// qpState is q's state for a wait in op.
func qpState(q *machine.QueuePair, op string) QPState {
	s := QPState{Dir: q.Dir, Peer: q.Peer, PeerDir: q.PeerDir}
	u := func(v uint64) *uint64 { return &v }
	switch op {
	case "send":
		s.MyHead, s.PeerTailCache, s.SendBytes = u(q.MyHead), u(q.PeerTailCache), q.Sending
	case "recv", "recv(any)":
		s.MyTail, s.PeerHeadCache = u(q.MyTail), u(q.PeerHeadCache)
	default:
		n := q.InFlight
		s.InFlight = &n
	}
	return s
}

// BlockedProcs describes each blocked process, in the order given.
func BlockedProcs(blocked []*sim.Proc) []BlockedProc {
	out := make([]BlockedProc, len(blocked))
	for i, p := range blocked {
		b := BlockedProc{Process: p.Name, SinceNs: p.WaitSince.Ns()}
		if p.Wait != nil {
			b.Wait = fmt.Sprint(p.Wait)
		}
		if r, ok := procRank(p.Name); ok {
			b.Rank = &r
		}
		if w, ok := p.Wait.(*machine.WaitInfo); ok && w != nil && w.EP != nil {
			g := w.EP.Group()
			r := w.EP.Rank
			b.Rank, b.Op = &r, w.Op
			qs := w.EP.QPs
			if w.QP != nil {
				qs = []*machine.QueuePair{w.QP}
			}
			for _, q := range qs {
				s := qpState(q, w.Op)
				s.NSlots, s.SlotSize, s.world = g.Cfg.NSlots, g.Cfg.SlotSize, len(g.EPs)
				b.QueuePairs = append(b.QueuePairs, s)
			}
		}
		for _, l := range strings.Split(strings.TrimRight(stackLines(p), "\n"), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				b.Backtrace = append(b.Backtrace, l)
			}
		}
		out[i] = b
	}
	return out
}

// procRank is the rank of a process named "rank N…".
func procRank(name string) (int, bool) {
	var r int
	if _, err := fmt.Sscanf(name, "rank %d", &r); err != nil {
		return 0, false
	}
	return r, true
}

// pointersText is b's queue-pair wait with its pointers: "send E -> rank
// r+1: my_head=8 peer_tail_cache=0 n_slots=8 (a 1048576-byte send)". With
// rel, the peer is an offset of the rank r (one line for many ranks);
// otherwise it is the peer's rank.
func pointersText(b *BlockedProc, rel bool) string {
	peer := func(q QPState) string {
		if !rel {
			return fmt.Sprintf("rank %d", q.Peer)
		}
		d := ((q.Peer-*b.Rank)%q.world + q.world) % q.world
		if 2*d > q.world {
			d -= q.world
		}
		switch {
		case d > 0:
			return fmt.Sprintf("rank r+%d", d)
		case d < 0:
			return fmt.Sprintf("rank r%d", d)
		}
		return "rank r"
	}
	q := b.QueuePairs[0]
	switch b.Op {
	case "send":
		s := fmt.Sprintf("send %s -> %s: my_head=%d peer_tail_cache=%d n_slots=%d", q.Dir, peer(q), *q.MyHead, *q.PeerTailCache, q.NSlots)
		if q.SendBytes > 0 {
			s += fmt.Sprintf(" (a %d-byte send)", q.SendBytes)
		}
		return s
	case "recv":
		return fmt.Sprintf("recv %s <- %s: my_tail=%d peer_head_cache=%d n_slots=%d", q.Dir, peer(q), *q.MyTail, *q.PeerHeadCache, q.NSlots)
	case "recv(any)":
		parts := make([]string, len(b.QueuePairs))
		for i, q := range b.QueuePairs {
			parts[i] = fmt.Sprintf("%s <- %s my_tail=%d peer_head_cache=%d", q.Dir, peer(q), *q.MyTail, *q.PeerHeadCache)
		}
		return fmt.Sprintf("recv(any) %s; n_slots=%d", strings.Join(parts, ", "), q.NSlots)
	}
	return fmt.Sprintf("%s %s -> %s: in_flight=%d", b.Op, q.Dir, peer(q), *q.InFlight)
}

// pointerLines are the queue-pair lines of a group of blocked processes
// in the same wait: one line per distinct wait relative to the rank (the
// same pointers, the peer at the same offset), naming its ranks, so that
// a symmetric deadlock of a thousand ranks is one line. A line of one
// rank names its peer.
func pointerLines(group []*BlockedProc) []string {
	type line struct {
		text  string
		ranks []int
		one   *BlockedProc
	}
	var lines []*line
	byText := map[string]*line{}
	for _, b := range group {
		if len(b.QueuePairs) == 0 || b.Rank == nil {
			continue
		}
		t := pointersText(b, true)
		l := byText[t]
		if l == nil {
			l = &line{text: t, one: b}
			byText[t] = l
			lines = append(lines, l)
		}
		l.ranks = append(l.ranks, *b.Rank)
	}
	var out []string
	for i, l := range lines {
		if len(lines) > maxListed && i == maxListed-1 {
			out = append(out, fmt.Sprintf("... %d more line(s) of other pointers (--json lists every blocked process)", len(lines)-i))
			break
		}
		if len(l.ranks) == 1 {
			out = append(out, fmt.Sprintf("rank %d: %s", l.ranks[0], pointersText(l.one, false)))
			continue
		}
		out = append(out, fmt.Sprintf("rank r in %s: %s", topology.RankRanges(l.ranks), l.text))
	}
	return out
}

// RingHint is the advice for a wait-for cycle in which every rank waits
// in a send larger than the receive ring it sends into: each such send
// finishes only when its peer receives, and every peer is sending. ""
// when the cycle is not that.
func RingHint(cycle []int, blocked []BlockedProc) string {
	if len(cycle) < 2 {
		return ""
	}
	var lo, hi int64
	var ring QPState
	for i := 0; i+1 < len(cycle); i++ {
		var found *QPState
		for j := range blocked {
			b := &blocked[j]
			if b.Op != "send" || b.Rank == nil || *b.Rank != cycle[i] {
				continue
			}
			if q := b.QueuePairs[0]; q.Peer == cycle[i+1] && q.SendBytes > q.ring() {
				found = &b.QueuePairs[0]
				break
			}
		}
		if found == nil {
			return ""
		}
		if i == 0 || found.SendBytes < lo {
			lo = found.SendBytes
		}
		hi, ring = max(hi, found.SendBytes), *found
	}
	size := fmt.Sprintf("%d bytes", lo)
	if hi != lo {
		size = fmt.Sprintf("%d to %d bytes", lo, hi)
	}
	return fmt.Sprintf("every rank of the cycle waits in a send of %s, larger than the receive ring it sends into "+
		"(n_slots × slot_size = %d × %d = %d bytes), while its peer is sending too: no rank receives. "+
		"Send in rounds of at most one ring and receive each round before sending the next, "+
		"or start the send with tl.send_async and receive before tl.wait-ing for it "+
		"(docs/ccl-author-guide.md, \"Sends larger than one ring\")",
		size, ring.NSlots, ring.SlotSize, ring.ring())
}
