package machine

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
)

// IPCQ scenarios as transcripts (testdata/ipcq/*.txt): a scenario reads as
// its input, what each rank does, and the events the machine must give
// for it, so that a rule of the queue is stated once, by example, and a
// change of behaviour shows as a diff of events. The format:
//
//	# comments
//	config slots=2 slot_size=64 backpressure=sleep links=pair|ring:N
//	rank R: OP; OP; ...
//	----
//	the expected transcript
//
// where an OP is `send DIR BYTES`, `recv DIR` (wait, take the message and
// give its credit back), `hold DIR` (take it to copy it out: its slot
// stays taken), `release DIR` (the oldest held message's copy is done,
// CopyDone), `flush` or
// `sleep DURATION` (a Go duration), each optionally followed by `xN` to
// repeat it. The transcript lists, in simulated-time order, every send
// (when its message is queued), every receipt and every rank's end, then
// each queue pair's pointers. go test ./engine/machine -run TestIPCQScenarios
// -update rewrites the transcripts; review them as diffs.
func TestIPCQScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/ipcq/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata/ipcq (%v)", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, want, _ := strings.Cut(string(data), "----\n")
			got := runScenario(t, input)
			if *update {
				if err := os.WriteFile(file, []byte(input+"----\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", file, diff)
			}
		})
	}
}

// scenarioOp is one operation of a rank's list.
type scenarioOp struct {
	verb, dir string
	n         int64
	d         sim.Time
}

// runScenario runs the scenario input and returns its transcript.
func runScenario(t *testing.T, input string) string {
	t.Helper()
	cfg := ipcqTestCfg(HBM, Sleep, 2, 64)
	var links [][]Link
	ranks := map[int][]scenarioOp{}
	for i, line := range strings.Split(input, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("line %d: %q: %s", i+1, line, fmt.Sprintf(format, args...))
		}
		if rest, ok := strings.CutPrefix(line, "config "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "slots":
					n, err := strconv.Atoi(v)
					if err != nil {
						fail("slots: %v", err)
					}
					cfg.NSlots = n
				case "slot_size":
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						fail("slot_size: %v", err)
					}
					cfg.SlotSize = n
				case "backpressure":
					cfg.Backpressure = map[string]Backpressure{"sleep": Sleep, "poll": Poll}[v]
				case "links":
					switch {
					case v == "pair":
						links = pairLinks()
					case strings.HasPrefix(v, "ring:"):
						n, err := strconv.Atoi(strings.TrimPrefix(v, "ring:"))
						if err != nil {
							fail("links: %v", err)
						}
						links = ringLinks(n)
					default:
						fail("links: want pair or ring:N")
					}
				default:
					fail("unknown config key %q", k)
				}
			}
			continue
		}
		head, body, ok := strings.Cut(line, ":")
		var r int
		if _, err := fmt.Sscanf(head, "rank %d", &r); !ok || err != nil {
			fail("want `config ...` or `rank R: OP; ...`")
		}
		for _, op := range strings.Split(body, ";") {
			f := strings.Fields(op)
			repeat := 1
			if k := len(f) - 1; k > 0 && strings.HasPrefix(f[k], "x") {
				n, err := strconv.Atoi(f[k][1:])
				if err != nil {
					fail("repeat %q: %v", f[k], err)
				}
				repeat, f = n, f[:k]
			}
			if len(f) == 0 {
				fail("empty operation")
			}
			o := scenarioOp{verb: f[0]}
			switch {
			case o.verb == "send" && len(f) == 3:
				o.dir = f[1]
				n, err := strconv.ParseInt(f[2], 10, 64)
				if err != nil {
					fail("send bytes: %v", err)
				}
				o.n = n
			case (o.verb == "recv" || o.verb == "hold" || o.verb == "release") && len(f) == 2:
				o.dir = f[1]
			case o.verb == "flush" && len(f) == 1:
			case o.verb == "sleep" && len(f) == 2:
				d, err := parseSimTime(f[1])
				if err != nil {
					fail("sleep: %v", err)
				}
				o.d = d
			default:
				fail("unknown operation %q", op)
			}
			for range repeat {
				ranks[r] = append(ranks[r], o)
			}
		}
	}
	if links == nil {
		t.Fatal("no `config links=...` line")
	}
	m, g := installIPCQ(t, testParams(), links, cfg)
	var out strings.Builder
	g.OnSend = func(q *QueuePair, meta MsgMeta, at sim.Time) {
		fmt.Fprintf(&out, "t=%v rank %d send %s #%d %d bytes\n", at, q.Rank, q.Dir, meta.Seq, meta.NBytes)
	}
	g.OnRecv = func(q *QueuePair, meta MsgMeta, _ Region, at sim.Time) {
		fmt.Fprintf(&out, "t=%v rank %d recv %s #%d %d bytes\n", at, q.Rank, q.Dir, meta.Seq, meta.NBytes)
	}
	for r := range links {
		ops := ranks[r]
		m.Sim.Spawn(fmt.Sprintf("rank %d", r), func(p *sim.Proc) {
			type heldMsg struct {
				q   *QueuePair
				seq uint64
			}
			held := map[string][]heldMsg{}
			for i, o := range ops {
				var err error
				switch o.verb {
				case "send":
					q := lookup(t, g, r, o.dir, true)
					src := srcBuf(t, m.Ranks[r].HBM, payload(r, i, int(o.n)))
					err = g.Send(p, q, src, MsgMeta{DType: 5, Count: o.n})
				case "recv", "hold":
					q := lookup(t, g, r, o.dir, false)
					if err = g.WaitRecv(p, q); err == nil {
						got := g.Take(q, o.verb == "recv")
						if o.verb == "hold" {
							held[o.dir] = append(held[o.dir], heldMsg{q, got.Meta.Seq})
						}
					}
				case "release":
					if len(held[o.dir]) == 0 {
						t.Errorf("rank %d: release %s with no held message", r, o.dir)
						return
					}
					h := held[o.dir][0]
					held[o.dir] = held[o.dir][1:]
					g.CopyDone(h.q, h.seq)
				case "flush":
					err = g.Flush(p, g.EPs[r], nil)
				case "sleep":
					err = p.Sleep(o.d)
				}
				if err != nil {
					fmt.Fprintf(&out, "t=%v rank %d: %s %s: %v\n", m.Sim.Now(), r, o.verb, o.dir, err)
					return
				}
			}
			fmt.Fprintf(&out, "t=%v rank %d done\n", m.Sim.Now(), r)
		})
	}
	if err := m.Sim.Run(); err != nil {
		fmt.Fprintf(&out, "run: %v\n", err)
	}
	g.DumpPointers(&out)
	return out.String()
}

// parseSimTime reads a simulated duration of a scenario: an integer and a
// unit, ns, us or ms ("2us"). Simulated time only: nothing here reads or
// bounds the wall clock.
func parseSimTime(v string) (sim.Time, error) {
	for _, u := range []struct {
		suffix string
		unit   sim.Time
	}{{"ns", sim.Nanosecond}, {"us", sim.Microsecond}, {"ms", sim.Millisecond}} {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("%q: want a whole number of ns, us or ms", v)
			}
			return sim.Time(n) * u.unit, nil
		}
	}
	return 0, fmt.Errorf("%q: want a whole number of ns, us or ms", v)
}
