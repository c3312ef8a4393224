package failure

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/machine"
	"kernbench/starlark/errkind"
)

// The report of messages never received groups queue pairs of one shape
// (directions, count, the first's number and position) into a line that
// names the senders as ranges and its first pairs, so that it stays a few
// lines at any world size; a single queue pair, or a group of two, keeps
// the line of each pair; --json's entries are every queue pair by sender.
func TestUnreceivedGroups(t *testing.T) {
	// ring is the queue pairs of ranks 0..n-1 each leaving count messages
	// on E for rank r+1, in the engine's order (by receiver: rank n-1's
	// first).
	ring := func(n int, count uint64, at string) []machine.Unreceived {
		var out []machine.Unreceived
		for recv := range n {
			send := (recv - 1 + n) % n
			out = append(out, machine.Unreceived{Sender: send, SendDir: "E", Receiver: recv, RecvDir: "W", Count: count, FirstSentAt: at})
		}
		return out
	}
	west := func(sender, receiver int, count, seq uint64, at string) machine.Unreceived {
		return machine.Unreceived{Sender: sender, SendDir: "W", Receiver: receiver, RecvDir: "E", Count: count, FirstSeq: seq, FirstSentAt: at}
	}
	const rule = "messages sent and never received (invariant I1): "
	const advice = ": a receive is missing, or a send is one too many"
	cases := []struct {
		name   string
		sends  []machine.Unreceived
		msg    string
		detail []string
	}{
		{
			name:  "one queue pair: its own line, no detail",
			sends: []machine.Unreceived{{Sender: 0, SendDir: "E", Receiver: 1, RecvDir: "W", Count: 1, FirstSentAt: "f.star:3:16"}},
			msg:   rule + "rank 0 sent 1 message(s) on E that rank 1 never received on W (the first, #0, sent at f.star:3:16)" + advice,
		},
		{
			name:  "a ring of 8: one line, senders as a range, three pairs spelled out",
			sends: ring(8, 1, "f.star:4:12"),
			msg:   rule + "8 message(s) on 8 queue pair(s)" + advice,
			detail: []string{
				"  ranks 0-7 (8): each sent 1 message(s) on E that its peer never received on W (the first, #0, sent at f.star:4:12): 0 -> 1, 1 -> 2, 2 -> 3 and 5 more",
			},
		},
		{
			name:  "a ring of 1024: the same one line",
			sends: ring(1024, 2, "f.star:4:12"),
			msg:   rule + "2048 message(s) on 1024 queue pair(s)" + advice,
			detail: []string{
				"  ranks 0-1023 (1024): each sent 2 message(s) on E that its peer never received on W (the first, #0, sent at f.star:4:12): 0 -> 1, 1 -> 2, 2 -> 3 and 1021 more",
			},
		},
		{
			name:  "one pair more than the examples is spelled out, not counted",
			sends: ring(4, 1, "f.star:4:12"),
			msg:   rule + "4 message(s) on 4 queue pair(s)" + advice,
			detail: []string{
				"  ranks 0-3 (4): each sent 1 message(s) on E that its peer never received on W (the first, #0, sent at f.star:4:12): 0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0",
			},
		},
		{
			name:  "two shapes: the group, and a pair of another send site and direction alone, by lowest sender",
			sends: append(ring(8, 1, "f.star:4:12"), west(0, 7, 2, 1, "f.star:6:16")),
			msg:   rule + "10 message(s) on 9 queue pair(s)" + advice,
			detail: []string{
				"  ranks 0-7 (8): each sent 1 message(s) on E that its peer never received on W (the first, #0, sent at f.star:4:12): 0 -> 1, 1 -> 2, 2 -> 3 and 5 more",
				"  rank 0 sent 2 message(s) on W that rank 7 never received on E (the first, #1, sent at f.star:6:16)",
			},
		},
		{
			name: "a group of two is two lines",
			sends: []machine.Unreceived{
				west(5, 4, 1, 0, "f.star:6:16"),
				{Sender: 2, SendDir: "E", Receiver: 3, RecvDir: "W", Count: 1, FirstSentAt: "f.star:4:12"},
				west(3, 2, 1, 0, "f.star:6:16"),
			},
			msg: rule + "3 message(s) on 3 queue pair(s)" + advice,
			detail: []string{
				"  rank 2 sent 1 message(s) on E that rank 3 never received on W (the first, #0, sent at f.star:4:12)",
				"  rank 3 sent 1 message(s) on W that rank 2 never received on E (the first, #0, sent at f.star:6:16)",
				"  rank 5 sent 1 message(s) on W that rank 4 never received on E (the first, #0, sent at f.star:6:16)",
			},
		},
		{
			name: "even ranks on E, odd ranks on W: the senders' list is cut",
			sends: func() []machine.Unreceived {
				var out []machine.Unreceived
				for r := 0; r < 64; r++ {
					if r%2 == 0 {
						out = append(out, machine.Unreceived{Sender: r, SendDir: "E", Receiver: r + 1, RecvDir: "W", Count: 1, FirstSentAt: "f.star:5:16"})
					} else {
						out = append(out, west(r, r-1, 1, 0, "f.star:7:16"))
					}
				}
				return out
			}(),
			msg: rule + "64 message(s) on 64 queue pair(s)" + advice,
			detail: []string{
				"  ranks 0, 2, 4, 6, 8, 10, 12, 14, ... (32): each sent 1 message(s) on E that its peer never received on W (the first, #0, sent at f.star:5:16): 0 -> 1, 2 -> 3, 4 -> 5 and 29 more",
				"  ranks 1, 3, 5, 7, 9, 11, 13, 15, ... (32): each sent 1 message(s) on W that its peer never received on E (the first, #0, sent at f.star:7:16): 1 -> 0, 3 -> 2, 5 -> 4 and 29 more",
			},
		},
		{
			name: "every rank its own count: at most 16 lines, the rest counted",
			sends: func() []machine.Unreceived {
				out := ring(40, 0, "f.star:4:12")
				for i := range out {
					out[i].Count = uint64(out[i].Sender + 1)
				}
				return out
			}(),
			msg: rule + "820 message(s) on 40 queue pair(s)" + advice,
			detail: func() []string {
				var want []string
				for r := range 15 {
					want = append(want, fmt.Sprintf("  rank %d sent %d message(s) on E that rank %d never received on W (the first, #0, sent at f.star:4:12)", r, r+1, r+1))
				}
				return append(want, "  ... 25 more queue pair(s) on 25 more line(s), not shown (--json lists every queue pair)")
			}(),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Unreceived(&machine.UnreceivedError{Sends: tc.sends})
			if f.ErrorKind() != errkind.Unreceived {
				t.Errorf("kind %s, want %s", f.ErrorKind().Name, errkind.Unreceived.Name)
			}
			if diff := cmp.Diff(tc.msg, f.Msg); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			var detail []string
			if f.Detail != "" {
				detail = strings.Split(f.Detail, "\n")
			}
			if diff := cmp.Diff(tc.detail, detail); diff != "" {
				t.Errorf("detail (-want +got):\n%s", diff)
			}
			// --json: every queue pair, by sender.
			if len(f.Unreceived) != len(tc.sends) {
				t.Fatalf("%d entries for --json, want %d", len(f.Unreceived), len(tc.sends))
			}
			for i := 1; i < len(f.Unreceived); i++ {
				if a, b := f.Unreceived[i-1], f.Unreceived[i]; a.Sender > b.Sender || a.Sender == b.Sender && a.SendDir > b.SendDir {
					t.Errorf("entries %d and %d out of sender order: %+v, %+v", i-1, i, a, b)
				}
			}
			if diff := cmp.Diff(tc.sends, f.Out().Unreceived, cmp.Transformer("byQueuePair", byQueuePair)); diff != "" {
				t.Errorf("--json's entries (-want +got):\n%s", diff)
			}
		})
	}
}

// byQueuePair is sends keyed by queue pair, for comparing the entries as
// a set (their order is checked on its own).
func byQueuePair(sends []machine.Unreceived) map[string]machine.Unreceived {
	m := map[string]machine.Unreceived{}
	for _, u := range sends {
		m[fmt.Sprintf("%d/%s", u.Sender, u.SendDir)] = u
	}
	return m
}
