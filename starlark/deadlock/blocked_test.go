package deadlock

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sendWait and recvWait are blocked processes of a world of n ranks as
// BlockedProcs describes them: rank r waits in a send to peer (the ring
// of 8 × 4096 bytes full, sending bytes) or in a recv from peer.
func sendWait(r, peer, n int, head uint64, bytes int64) BlockedProc {
	h, t := head, uint64(head-8)
	return BlockedProc{Process: fmt.Sprintf("rank %d", r), Rank: &r, Op: "send",
		QueuePairs: []QPState{{Dir: "E", Peer: peer, PeerDir: "W", MyHead: &h, PeerTailCache: &t, NSlots: 8, SlotSize: 4096, SendBytes: bytes, world: n}}}
}

func recvWait(r, peer, n int) BlockedProc {
	var z uint64
	return BlockedProc{Process: fmt.Sprintf("rank %d", r), Rank: &r, Op: "recv",
		QueuePairs: []QPState{{Dir: "W", Peer: peer, PeerDir: "E", MyTail: &z, PeerHeadCache: &z, NSlots: 8, SlotSize: 4096, world: n}}}
}

// Rule (docs/architecture.md, Invariants and failures: the deadlock report,
// at a thousand ranks): a group of ranks in the same wait gives its queue
// pairs' pointers in one line per distinct state, the peer as an offset of
// the rank; a line of one rank names its peer; past maxListed lines the rest
// is counted.
func TestPointerLines(t *testing.T) {
	ring := func(n int, head func(r int) uint64) []*BlockedProc {
		var out []*BlockedProc
		for r := 0; r < n; r++ {
			b := sendWait(r, (r+1)%n, n, head(r), 1<<20)
			out = append(out, &b)
		}
		return out
	}
	same := func(int) uint64 { return 8 }
	for _, tc := range []struct {
		name  string
		group []*BlockedProc
		want  []string
	}{
		{"a symmetric ring of 1024 is one line", ring(1024, same),
			[]string{"rank r in 0-1023: send E -> rank r+1: my_head=8 peer_tail_cache=0 n_slots=8 (a 1048576-byte send)"}},
		{"one rank ahead names its peer", ring(4, func(r int) uint64 { return 8 + uint64(r/3)*8 }), []string{
			"rank r in 0-2: send E -> rank r+1: my_head=8 peer_tail_cache=0 n_slots=8 (a 1048576-byte send)",
			"rank 3: send E -> rank 0: my_head=16 peer_tail_cache=8 n_slots=8 (a 1048576-byte send)",
		}},
		{"recvs of a mesh row: the wrap is its own offset", func() []*BlockedProc {
			var out []*BlockedProc
			for r := 0; r < 16; r++ {
				b := recvWait(r, r/4*4+(r%4+3)%4, 16)
				out = append(out, &b)
			}
			return out
		}(), []string{
			"rank r in 0, 4, 8, 12: recv W <- rank r+3: my_tail=0 peer_head_cache=0 n_slots=8",
			"rank r in 1-3, 5-7, 9-11, 13-15: recv W <- rank r-1: my_tail=0 peer_head_cache=0 n_slots=8",
		}},
		{"every rank its own pointers: cut at maxListed", ring(40, func(r int) uint64 { return 8 + uint64(r) }), func() []string {
			var want []string
			for r := 0; r < maxListed-1; r++ {
				want = append(want, fmt.Sprintf("rank %d: send E -> rank %d: my_head=%d peer_tail_cache=%d n_slots=8 (a 1048576-byte send)", r, r+1, 8+r, r))
			}
			return append(want, fmt.Sprintf("... %d more line(s) of other pointers (--json lists every blocked process)", 40-maxListed+1))
		}()},
	} {
		if diff := cmp.Diff(tc.want, pointerLines(tc.group)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// The hint for a cycle of sends larger than the ring they wait on: only
// when every rank of the cycle waits in such a send.
func TestRingHint(t *testing.T) {
	sends := func(n int, bytes func(r int) int64) []BlockedProc {
		var out []BlockedProc
		for r := 0; r < n; r++ {
			out = append(out, sendWait(r, (r+1)%n, n, 8, bytes(r)))
		}
		return out
	}
	big := func(int) int64 { return 1 << 20 }
	for _, tc := range []struct {
		name    string
		cycle   []int
		blocked []BlockedProc
		want    string // a part of the hint; "" for none
	}{
		{"whole buffers around a ring", []int{0, 1, 2, 3, 0}, sends(4, big), "a send of 1048576 bytes, larger than the receive ring it sends into (n_slots × slot_size = 8 × 4096 = 32768 bytes)"},
		{"the advice and where to read on", []int{0, 1, 0}, sends(2, big), `Send in rounds of at most one ring and receive each round before sending the next, or start the send with tl.send_async and receive before tl.wait-ing for it (docs/ccl-author-guide.md, "Sends larger than one ring")`},
		{"sizes differ", []int{0, 1, 0}, sends(2, func(r int) int64 { return 65536 << r }), "a send of 65536 to 131072 bytes"},
		{"sends of one ring fit", []int{0, 1, 0}, sends(2, func(int) int64 { return 32768 }), ""},
		{"sends of unknown size", []int{0, 1, 0}, sends(2, func(int) int64 { return 0 }), ""},
		{"one rank of the cycle receives", []int{0, 1, 0}, []BlockedProc{sendWait(0, 1, 2, 8, 1<<20), recvWait(1, 0, 2)}, ""},
		{"receives only", []int{0, 1, 0}, []BlockedProc{recvWait(0, 1, 2), recvWait(1, 0, 2)}, ""},
		{"no cycle", nil, sends(2, big), ""},
	} {
		got := RingHint(tc.cycle, tc.blocked)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: hint %q, want one containing %q", tc.name, got, tc.want)
		}
	}
}

// The hint sends the reader to a section of the author guide: it must be
// there, under the title the hint names.
func TestRingHintNamesAGuideSection(t *testing.T) {
	guide, err := os.ReadFile("../../docs/ccl-author-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	const title = "Sends larger than one ring"
	hint := RingHint([]int{0, 1, 0}, []BlockedProc{sendWait(0, 1, 2, 8, 1<<20), sendWait(1, 0, 2, 8, 1<<20)})
	if !strings.Contains(hint, `docs/ccl-author-guide.md, "`+title+`"`) {
		t.Errorf("the hint does not name the section %q of docs/ccl-author-guide.md: %s", title, hint)
	}
	if !strings.Contains(string(guide), "\n### "+title+"\n") {
		t.Errorf("docs/ccl-author-guide.md has no section %q, which the deadlock hint names", title)
	}
}
