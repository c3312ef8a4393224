package machine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/oplog"
	"kernbench/engine/sim"
	"kernbench/engine/trace"
)

// partitionedRing runs a ring of 8 ranks over the 4 SIPs of a machine
// (two ranks a SIP, on different cubes: each SIP sends one direction to
// the next) on a partitioned simulation of k threads (k = 0: on one Sim,
// splitting transfers at SIPs): each rank sends
// count messages east through rx rings of two slots and receives from
// the west with a pause that varies by rank and message, copying every
// other message out of its slot into its HBM. It returns what
// each rank received, when, and the run's events and end.
func partitionedRing(t *testing.T, k int, mode Backpressure, faults ...Fault) (got [][]string, events uint64, end sim.Time, oplogLines, traceJSON string) {
	t.Helper()
	const world, count = 8, 24
	p := testParams()
	p.Sips = 4
	p.Faults = faults
	p.Placement = make([]int, world)
	for r := range p.Placement {
		p.Placement[r] = r * 4 // PE 4r: cube r of SIP r/2
	}
	var g *sim.Partitioned
	var m *Machine
	var err error
	spawn := func(sip int, name string, body func(p *sim.Proc)) { g.Spawn(sip, name, body) }
	if k == 0 {
		p.SplitAtSIP = true
		m = newTestMachine(t, p)
		m.Sim.MaxTime = sim.Second
		defer closeSim(m.Sim)
		spawn = func(_ int, name string, body func(p *sim.Proc)) { m.Sim.Spawn(name, body) }
	} else {
		if g, err = sim.NewPartitioned(p.Sips, p.Lookahead()); err != nil {
			t.Fatal(err)
		}
		if err := g.SetThreads(k); err != nil {
			t.Fatal(err)
		}
		g.MaxTime = sim.Second
		defer g.Close()
		if m, err = NewPartitioned(g, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Place(world); err != nil {
		t.Fatal(err)
	}
	if k == 0 {
		m.Log = &oplog.Log{}
	} else {
		m.EnableTrace(trace.New())
		if err := m.SplitLogs(); err != nil {
			t.Fatal(err)
		}
		if err := m.SplitTrace(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := ipcqTestCfg(HBM, mode, 2, 128)
	cfg.PollInterval = 40 * ipcqNS
	grp, err := m.Install(ringLinks(world), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got = make([][]string, world)
	for r := range world {
		var srcs []Region
		for i := range count {
			srcs = append(srcs, srcBuf(t, m.Ranks[r].HBM, payload(r, i, 24+(i%5)*16)))
		}
		sq, rq := lookup(t, grp, r, "E", true), lookup(t, grp, r, "W", false)
		sip := m.Ranks[r].Sip
		spawn(sip, fmt.Sprintf("rank%d.send", r), func(p *sim.Proc) {
			for i := range count {
				if err := grp.Send(p, sq, srcs[i], MsgMeta{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
		pe := m.Ranks[r]
		dst := srcBuf(t, pe.HBM, make([]byte, 128))
		spawn(sip, fmt.Sprintf("rank%d.recv", r), func(p *sim.Proc) {
			for i := range count {
				if err := p.Sleep(sim.Time(50+(r*7+i*13)%120) * ipcqNS); err != nil {
					return
				}
				if err := grp.WaitRecv(p, rq); err != nil {
					t.Error(err)
					return
				}
				// Odd messages are copied out of the slot (a memory
				// operation: the pools of the rank's SIP), the others read
				// in place.
				rcv := grp.Take(rq, i%2 == 0)
				data := rcv.Slot.Bytes()
				if i%2 == 1 {
					to := Region{Mem: dst.Mem, Off: dst.Off, N: rcv.Slot.N}
					op := m.Copy(pe, to, rcv.Slot)
					if err := op.Wait(p); err != nil {
						return
					}
					grp.CopyDone(rq, rcv.Meta.Seq)
					m.Recycle(op, true)
					data = to.Bytes()
				}
				got[r] = append(got[r], fmt.Sprintf("%v seq=%d %x", p.Sim().Now(), rcv.Meta.Seq, data))
			}
		})
	}
	var pre oplog.Image
	if k > 0 {
		pre = m.Image() // the sources written, before the run
	}
	if k == 0 {
		if err := m.Sim.Run(); err != nil {
			t.Fatal(err)
		}
		return got, m.Sim.Events(), m.Sim.Now(), jsonLines(t, m.Log), ""
	}
	if err := g.Run(); err != nil {
		t.Fatal(err)
	}
	merged, err := m.MergedLog()
	if err != nil {
		t.Fatal(err)
	}
	if msg := merged.CheckCausality(); msg != "" {
		t.Errorf("K=%d: the merged op_log breaks causality: %s", k, msg)
	}
	replayMerged(t, k, pre, m.Image(), merged.Records())
	tr, err := m.MergedTrace()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := tr.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	return got, g.Events(), g.Now(), jsonLines(t, merged), b.String()
}

// replayMerged is phase 2 on a partitioned run's merged op_log: replayed
// from the memory before the run, it gives the memory after it, and it
// catches a wrong byte where the last copy of the run wrote.
func replayMerged(t *testing.T, k int, pre, post oplog.Image, recs []*oplog.Record) {
	t.Helper()
	phase2 := pre.Clone()
	if err := oplog.Replay(&phase2, recs); err != nil {
		t.Fatalf("K=%d: replaying the merged op_log: %v", k, err)
	}
	if mm := oplog.Compare(phase2, post, recs); mm != nil {
		t.Fatalf("K=%d: phase 2 of the merged op_log disagrees with the run: %v", k, mm)
	}
	var last *oplog.Record
	for _, r := range recs {
		if r.Name == "copy" {
			last = r
		}
	}
	if last == nil {
		t.Fatalf("K=%d: the merged op_log has no copy", k)
	}
	mem, off := int(last.Dst>>oplog.AddrShift)-1, last.Dst&(1<<oplog.AddrShift-1)
	post[mem][off] ^= 0xff
	mm := oplog.Compare(phase2, post, recs)
	if mm == nil || mm.Addr != last.Dst {
		t.Errorf("K=%d: a wrong byte at %#x (the last copy's) gives mismatch %v", k, last.Dst, mm)
	}
}

// jsonLines is the op_log as --op-log writes it.
func jsonLines(t *testing.T, l *oplog.Log) string {
	t.Helper()
	var b strings.Builder
	if err := l.WriteJSONLines(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Rule (engine/sim, partition.go): a machine on partitions, one per SIP,
// runs the same for every number of threads, event for event, and
// delivers every message once, in order, with its bytes, when the
// one-Sim split run does. Run with -race: nothing one partition touches
// may be another's.
func TestPartitionedMachineSameForEveryK(t *testing.T) {
	for _, mode := range []Backpressure{Sleep, Poll} {
		t.Run(map[Backpressure]string{Sleep: "sleep", Poll: "poll"}[mode], func(t *testing.T) {
			want, wantEvents, wantEnd, wantLog, wantTrace := partitionedRing(t, 1, mode)
			for _, what := range []string{`"name":"deliver #23 from rank 7"`, `"name":"credits in use E"`, `"cat":"vc_comm"`, `"pid":1000000`} {
				if !strings.Contains(wantTrace, what) {
					t.Errorf("the merged trace has no %s", what)
				}
			}
			if n := strings.Count(wantLog, `"name":"send"`); n != 8*24 {
				t.Errorf("the merged op_log has %d sends, want %d", n, 8*24)
			}
			if n := strings.Count(wantLog, `"name":"copy"`); n != 8*12 {
				t.Errorf("the merged op_log has %d copies, want %d", n, 8*12)
			}
			for r, lines := range want {
				if len(lines) != 24 {
					t.Fatalf("rank %d received %d messages, want 24", r, len(lines))
				}
				for i, l := range lines {
					from := (r + 7) % 8
					if w := fmt.Sprintf(" seq=%d %x", i, payload(from, i, 24+(i%5)*16)); len(l) < len(w) || l[len(l)-len(w):] != w {
						t.Fatalf("rank %d message %d: %q, want it to end %q", r, i, l, w)
					}
				}
			}
			// The one-Sim split run delivers at the same times (its events
			// differ: there a sleep passes in place only when no rank of
			// any SIP has an event before its end).
			one, _, oneEnd, _, _ := partitionedRing(t, 0, mode)
			if diff := cmp.Diff(one, want); diff != "" || oneEnd != wantEnd {
				t.Errorf("one Sim ends at %v, K=1 at %v (-one Sim +K=1):\n%s", oneEnd, wantEnd, diff)
			}
			for _, k := range []int{2, 4} {
				got, events, end, log, tr := partitionedRing(t, k, mode)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("K=%d differs from K=1 (-K=1 +K=%d):\n%s", k, k, diff)
				}
				if diff := cmp.Diff(wantLog, log); diff != "" {
					t.Errorf("K=%d's merged op_log differs from K=1's (-K=1 +K=%d):\n%s", k, k, diff)
				}
				if diff := cmp.Diff(wantTrace, tr); diff != "" {
					t.Errorf("K=%d's merged trace differs from K=1's (-K=1 +K=%d):\n%s", k, k, diff)
				}
				if events != wantEvents || end != wantEnd {
					t.Errorf("K=%d: %d events ending at %v, K=1: %d at %v", k, events, end, wantEvents, wantEnd)
				}
			}
		})
	}
}

// Rule (the same, with faults): a resource's jitter stream and its
// slowdown are its own, booked by its SIP only: the run is the same for
// every K.
func TestPartitionedMachineFaultsSameForEveryK(t *testing.T) {
	faults := []Fault{
		{Resource: "pcie host->s1", Jitter: 300 * ipcqNS, Seed: 7},
		{Resource: "pcie s2->host", BandwidthFactor: 0.25},
		{Resource: "hbm pe12", Jitter: 50 * ipcqNS, Seed: 3},
	}
	want, wantEvents, wantEnd, _, _ := partitionedRing(t, 1, Sleep, faults...)
	if _, _, plainEnd, _, _ := partitionedRing(t, 1, Sleep); plainEnd == wantEnd {
		t.Fatalf("the faults changed nothing (end %v)", wantEnd)
	}
	for _, k := range []int{2, 4} {
		got, events, end, _, _ := partitionedRing(t, k, Sleep, faults...)
		if diff := cmp.Diff(want, got); diff != "" || events != wantEvents || end != wantEnd {
			t.Errorf("K=%d: %d events ending at %v, K=1: %d at %v (-K=1 +K=%d):\n%s", k, events, end, wantEvents, wantEnd, k, diff)
		}
	}
}

// ringSetup is a random ring on partitions: its placement over 4 SIPs,
// rx ring kind, backpressure mode, ring size and traffic.
type ringSetup struct {
	placement []int
	kind      Space
	mode      Backpressure
	nSlots    int
	sizes     [][]int      // per rank, its messages' sizes
	pauses    [][]sim.Time // per rank, the receiver's pause before each
}

func randomRing(seed uint64) ringSetup {
	rng := rand.New(rand.NewPCG(seed, 0x5a1))
	world := 3 + rng.IntN(6)
	s := ringSetup{
		placement: rng.Perm(32)[:world],
		kind:      []Space{TCM, SRAM, HBM}[rng.IntN(3)],
		mode:      []Backpressure{Sleep, Poll}[rng.IntN(2)],
		nSlots:    1 + rng.IntN(4),
	}
	for range world {
		n := 5 + rng.IntN(20)
		var sizes []int
		var pauses []sim.Time
		for range n {
			sizes = append(sizes, 1+rng.IntN(128))
			pauses = append(pauses, sim.Time(rng.IntN(400))*ipcqNS)
		}
		s.sizes, s.pauses = append(s.sizes, sizes), append(s.pauses, pauses)
	}
	return s
}

// runRandomRing runs s on k threads: what each rank received, when.
func runRandomRing(t *testing.T, s ringSetup, k int) (got [][]string, events uint64, end sim.Time) {
	t.Helper()
	world := len(s.placement)
	p := testParams()
	p.Sips = 4
	p.Placement = s.placement
	g, err := sim.NewPartitioned(p.Sips, p.Lookahead())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetThreads(k); err != nil {
		t.Fatal(err)
	}
	g.MaxTime = sim.Second
	defer g.Close()
	m, err := NewPartitioned(g, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Place(world); err != nil {
		t.Fatal(err)
	}
	cfg := ipcqTestCfg(s.kind, s.mode, s.nSlots, 128)
	cfg.PollInterval = 30 * ipcqNS
	grp, err := m.Install(ringLinks(world), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got = make([][]string, world)
	for r := range world {
		var srcs []Region
		for i, n := range s.sizes[r] {
			srcs = append(srcs, srcBuf(t, m.Ranks[r].HBM, payload(r, i, n)))
		}
		sq, rq := lookup(t, grp, r, "E", true), lookup(t, grp, r, "W", false)
		from := (r + world - 1) % world
		sip := m.Ranks[r].Sip
		g.Spawn(sip, fmt.Sprintf("rank%d.send", r), func(p *sim.Proc) {
			for _, src := range srcs {
				if err := grp.Send(p, sq, src, MsgMeta{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
		g.Spawn(sip, fmt.Sprintf("rank%d.recv", r), func(p *sim.Proc) {
			for _, pause := range s.pauses[from] {
				if err := p.Sleep(pause); err != nil {
					return
				}
				if err := grp.WaitRecv(p, rq); err != nil {
					t.Error(err)
					return
				}
				rcv := grp.Take(rq, true)
				got[r] = append(got[r], fmt.Sprintf("%v seq=%d %s", p.Sim().Now(), rcv.Meta.Seq, rcv.Slot.Bytes()))
			}
		})
	}
	if err := g.Run(); err != nil {
		t.Fatal(err)
	}
	return got, g.Events(), g.Now()
}

// Rule (the same, on random rings): random placements over the SIPs, rx
// rings in every kind of memory, both modes, rings of 1 to 4 slots:
// every message arrives once, in order, with its bytes, and the run is
// the same for K = 1, 2 and 4.
func TestPartitionedMachineRandomRings(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		s := randomRing(seed)
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			want, wantEvents, wantEnd := runRandomRing(t, s, 1)
			world := len(s.placement)
			for r, lines := range want {
				from := (r + world - 1) % world
				if len(lines) != len(s.sizes[from]) {
					t.Fatalf("rank %d received %d messages, want %d", r, len(lines), len(s.sizes[from]))
				}
				for i, l := range lines {
					if w := fmt.Sprintf(" seq=%d %s", i, payload(from, i, s.sizes[from][i])); !strings.HasSuffix(l, w) {
						t.Fatalf("rank %d message %d: %q, want it to end %q", r, i, l, w)
					}
				}
			}
			for _, k := range []int{2, 4} {
				got, events, end := runRandomRing(t, s, k)
				if diff := cmp.Diff(want, got); diff != "" || events != wantEvents || end != wantEnd {
					t.Errorf("K=%d: %d events ending at %v, K=1: %d at %v (-K=1 +K=%d):\n%s", k, events, end, wantEvents, wantEnd, k, diff)
				}
			}
		})
	}
}
