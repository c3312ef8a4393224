package machine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
)

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

const ipcqNS = sim.Nanosecond

// ipcqTestCfg is a small, fully specified IPCQ configuration.
func ipcqTestCfg(kind Space, mode Backpressure, nSlots int, slotSize int64) IPCQConfig {
	return IPCQConfig{
		BufferKind:   kind,
		Backpressure: mode,
		PollInterval: 100 * ipcqNS,
		NSlots:       nSlots,
		SlotSize:     slotSize,
		CreditBytes:  16,
		Overhead:     5 * ipcqNS,
	}
}

// pairLinks: rank 0 sends E to rank 1, whose receiving direction is W.
func pairLinks() [][]Link {
	return [][]Link{
		{{Dir: "E", Peer: 1, PeerDir: "W"}},
		{{Dir: "W", Peer: 0, PeerDir: "E"}},
	}
}

// ringLinks is ring_1d: E to r+1 (its W), W to r-1 (its E).
func ringLinks(n int) [][]Link {
	out := make([][]Link, n)
	for r := range out {
		out[r] = []Link{
			{Dir: "E", Peer: (r + 1) % n, PeerDir: "W"},
			{Dir: "W", Peer: (r - 1 + n) % n, PeerDir: "E"},
		}
	}
	return out
}

// installIPCQ builds a machine, places len(links) ranks and installs IPCQ.
func installIPCQ(t *testing.T, p Params, links [][]Link, cfg IPCQConfig) (*Machine, *Group) {
	t.Helper()
	m := newTestMachine(t, p)
	// A broken poll loop must fail the test, not hang it.
	m.Sim.MaxTime = sim.Second
	t.Cleanup(func() { closeSim(m.Sim) })
	if err := m.Place(len(links)); err != nil {
		t.Fatal(err)
	}
	g, err := m.Install(links, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

// closeSim unwinds processes still blocked after Run (their blocking calls
// return sim.ErrKilled). Sims whose Run already does that have no Close.
func closeSim(s *sim.Sim) {
	if c, ok := any(s).(interface{ Close() }); ok {
		c.Close()
	}
}

// lookup is g.Lookup that must succeed.
func lookup(t *testing.T, g *Group, rank int, dir string, sending bool) *QueuePair {
	t.Helper()
	q, err := g.Lookup(rank, dir, sending)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// srcBuf allocates len(data) bytes in mem and writes data there.
func srcBuf(t *testing.T, mem *Memory, data []byte) Region {
	t.Helper()
	off, err := mem.Alloc(int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	r := Region{Mem: mem, Off: off, N: int64(len(data))}
	copy(r.Bytes(), data)
	return r
}

// payload is n distinct, recognisable bytes for (rank, i).
func payload(rank, i, n int) []byte {
	s := strings.Repeat(fmt.Sprintf("<r%d m%02d>", rank, i), n/8+1)
	return []byte(s[:n])
}

// idleT is T(path, n) = Σ latency + ceil(n / min bandwidth), written out from
// the link parameters (independently of Path and Resource).
func idleT(links []LinkParams, n int64) sim.Time {
	var lat sim.Time
	minBW := links[0].BytesPerUs
	for _, l := range links {
		lat += l.Latency
		minBW = min(minBW, l.BytesPerUs)
	}
	return lat + sim.Time((n*1_000_000+minBW-1)/minBW)
}

// fabricLinks lists the links between PE 0 and a PE in the same cube, another
// cube of the same SIP, or another SIP (testParams: PE 1, PE 5, PE 9).
func fabricLinks(p Params, peerPE int) []LinkParams {
	switch {
	case peerPE < p.PesPerCube:
		return []LinkParams{p.PeNoc, p.PeNoc}
	case peerPE < p.PesPerCube*p.CubesPerSip:
		return []LinkParams{p.PeNoc, p.Ucie, p.PeNoc}
	default:
		return []LinkParams{p.PeNoc, p.Pcie, p.Pcie, p.PeNoc}
	}
}

func memParams(p Params, s Space) LinkParams {
	switch s {
	case TCM:
		return p.Tcm.LinkParams
	case SRAM:
		return p.Sram.LinkParams
	}
	return p.Hbm.LinkParams
}

func memOf(pe *PE, s Space) *Memory {
	switch s {
	case TCM:
		return pe.TCM
	case SRAM:
		return pe.SRAM
	}
	return pe.HBM
}

// ceilTo rounds d up to a multiple of step.
func ceilTo(d, step sim.Time) sim.Time { return (d + step - 1) / step * step }

// delivery is a copy of a message at its DMA completion (Send recycles
// Message values after completion, so tests keep copies, not pointers).
type delivery struct {
	Rank             int // sender
	Dir              string
	Meta             MsgMeta
	Dst              Region
	Issued, Finished sim.Time
}

// recordDeliveries sets g.OnDeliver to append a copy of every completed
// message to the returned slice, then call also (if any).
func recordDeliveries(g *Group, also func(q *QueuePair, msg *Message)) *[]delivery {
	var out []delivery
	g.OnDeliver = func(q *QueuePair, msg *Message) {
		out = append(out, delivery{q.Rank, q.Dir, msg.Meta, msg.Dst, msg.Xfer.Issued, msg.Xfer.Finished})
		if also != nil {
			also(q, msg)
		}
	}
	return &out
}

func asIPCQError(t *testing.T, err error) *IPCQError {
	t.Helper()
	var ie *IPCQError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T), want *IPCQError", err, err)
	}
	return ie
}

func procNames(ps []*sim.Proc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// ---------------------------------------------------------------------------
// 1. Backpressure [send waits for a credit]
// ---------------------------------------------------------------------------

// Rule (docs/architecture.md, IPCQ): send waits while my_head -
// peer_tail_cache >= n_slots. With a receiver that never receives, exactly
// n_slots sends complete and the next one blocks; the run ends as a stall
// naming the blocked sender and its send wait.
func TestIPCQ_Backpressure_BlocksAtExactlyNSlotsInFlight(t *testing.T) {
	for _, nSlots := range []int{1, 4, 7} {
		t.Run(fmt.Sprintf("n_slots=%d", nSlots), func(t *testing.T) {
			cfg := ipcqTestCfg(HBM, Sleep, nSlots, 64)
			m, g := installIPCQ(t, testParams(), pairLinks(), cfg)
			q := lookup(t, g, 0, "E", true)
			rq := lookup(t, g, 1, "W", false)
			src := srcBuf(t, m.Ranks[0].HBM, payload(0, 0, 64))

			sent := 0
			var sendErr error
			var blockedAt sim.Time
			sender := m.Sim.Spawn("rank0.send", func(p *sim.Proc) {
				for i := 0; i < nSlots+10; i++ {
					blockedAt = p.Sim().Now()
					if err := g.Send(p, q, src, MsgMeta{}); err != nil {
						sendErr = err
						return
					}
					sent++
				}
			})
			// Observe the sender's wait while the run is still live: at the
			// delivery of the last message that fits it is parked in send.
			type waitSnap struct {
				Op, Desc  string
				QP        *QueuePair
				WaitSince sim.Time
			}
			var snap *waitSnap
			dels := recordDeliveries(g, func(sq *QueuePair, msg *Message) {
				if msg.Meta.Seq != uint64(nSlots-1) {
					return
				}
				w, ok := sender.Wait.(*WaitInfo)
				if !ok {
					t.Errorf("at the last delivery the sender's Wait is %T(%v), want *WaitInfo", sender.Wait, sender.Wait)
					return
				}
				snap = &waitSnap{Op: w.Op, Desc: w.String(), QP: w.QP, WaitSince: sender.WaitSince}
			})

			err := m.Sim.Run()
			var se *sim.StallError
			if !errors.As(err, &se) {
				t.Fatalf("Run() = %v, want *sim.StallError", err)
			}
			if sent != nSlots || len(*dels) != nSlots {
				t.Fatalf("%d sends completed (%d delivered), want exactly n_slots = %d", sent, len(*dels), nSlots)
			}
			if sendErr != nil {
				t.Errorf("blocked send returned %v before the run was closed", sendErr)
			}
			closeSim(m.Sim)
			if !errors.Is(sendErr, sim.ErrKilled) {
				t.Errorf("blocked send returned %v after Close, want sim.ErrKilled", sendErr)
			}
			if diff := cmp.Diff([]string{"rank0.send"}, procNames(se.Blocked)); diff != "" {
				t.Errorf("StallError.Blocked (-want +got):\n%s", diff)
			}
			if want := (*dels)[nSlots-1].Finished; se.At != want {
				t.Errorf("stall detected at %v, want the last DMA completion %v", se.At, want)
			}
			type ptrs struct{ MyHead, PeerTailCache, PeerHeadCacheRx, MyTailRx uint64 }
			want := ptrs{MyHead: uint64(nSlots), PeerTailCache: 0, PeerHeadCacheRx: uint64(nSlots), MyTailRx: 0}
			got := ptrs{q.MyHead, q.PeerTailCache, rq.PeerHeadCache, rq.MyTail}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pointers after the stall (-want +got):\n%s", diff)
			}
			// The (n_slots+1)-th send started right after n_slots overheads.
			wantSnap := &waitSnap{
				Op:        "send",
				Desc:      fmt.Sprintf("rank 0 send E -> rank 1: my_head=%d peer_tail_cache=0 n_slots=%d (ring full)", nSlots, nSlots),
				QP:        q,
				WaitSince: sim.Time(nSlots) * cfg.Overhead,
			}
			if blockedAt != wantSnap.WaitSince {
				t.Errorf("blocking send issued at %v, want %v", blockedAt, wantSnap.WaitSince)
			}
			if diff := cmp.Diff(wantSnap, snap, cmp.Comparer(func(a, b *QueuePair) bool { return a == b })); diff != "" {
				t.Errorf("sender wait during the run (-want +got):\n%s", diff)
			}
		})
	}
}

// Rule (docs/architecture.md, Invariants and failures): the deadlock report
// needs, for every blocked process, its op, direction, peer and pointers. A
// caller only gets the
// *sim.StallError after Run returns, so each Blocked process must still
// carry its Wait description then. (Regression: Run used to unwind the
// blocked coroutines itself, and the blocking wait's deferred `p.Wait = nil` erased
// the description before the caller could read it.)
func TestIPCQ_Deadlock_StallErrorBlockedKeepsWaitDescription(t *testing.T) {
	cfg := ipcqTestCfg(HBM, Sleep, 2, 64)
	m, g := installIPCQ(t, testParams(), ringLinks(2), cfg)
	src := srcBuf(t, m.Ranks[0].HBM, payload(0, 0, 64))
	// Rank 0 fills its E ring and blocks in send; rank 1 waits for data on
	// its E (from rank 0's W) that never comes.
	m.Sim.Spawn("rank0", func(p *sim.Proc) {
		q := lookup(t, g, 0, "E", true)
		for i := 0; i < 3; i++ {
			if err := g.Send(p, q, src, MsgMeta{}); err != nil {
				return
			}
		}
	})
	m.Sim.Spawn("rank1", func(p *sim.Proc) {
		_ = g.WaitRecv(p, lookup(t, g, 1, "E", false))
	})
	err := m.Sim.Run()
	var se *sim.StallError
	if !errors.As(err, &se) {
		t.Fatalf("Run() = %v, want *sim.StallError", err)
	}
	var got []string
	for _, p := range se.Blocked {
		w, ok := p.Wait.(fmt.Stringer)
		if !ok {
			t.Errorf("after Run returned, blocked process %s has Wait = %v (%T), want its *WaitInfo", p.Name, p.Wait, p.Wait)
			continue
		}
		got = append(got, p.Name+": "+w.String())
	}
	want := []string{
		"rank0: rank 0 send E -> rank 1: my_head=2 peer_tail_cache=0 n_slots=2 (ring full)",
		"rank1: rank 1 recv E <- rank 0: my_tail=0 peer_head_cache=0 n_slots=2 (no data)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blocked waits after Run (-want +got):\n%s", diff)
	}
}

// Rule (docs/architecture.md, Invariants and failures, wait timeout; poll
// mode): in poll mode a full ring never drains the event queue, so the
// deadlock is caught by the wait watchdog, which names the sender: it has
// waited longer than deadlock_timeout_ns since it blocked.
func TestIPCQ_Backpressure_PollModeDeadlockHitsWaitWatchdog(t *testing.T) {
	cfg := ipcqTestCfg(HBM, Poll, 4, 64)
	cfg.PollInterval = 30 * ipcqNS
	m, g := installIPCQ(t, testParams(), pairLinks(), cfg)
	q := lookup(t, g, 0, "E", true)
	src := srcBuf(t, m.Ranks[0].HBM, payload(0, 0, 64))
	sent := 0
	sender := m.Sim.Spawn("rank0.send", func(p *sim.Proc) {
		for {
			if err := g.Send(p, q, src, MsgMeta{}); err != nil {
				return
			}
			sent++
		}
	})
	limit := sim.Microsecond
	m.Sim.WaitWatchdog(limit)
	err := m.Sim.Run()
	var we *sim.WaitTimeoutError
	if !errors.As(err, &we) {
		t.Fatalf("Run() = %v, want *sim.WaitTimeoutError", err)
	}
	if we.Proc != sender {
		t.Errorf("watchdog names %v, want the sender", we.Proc)
	}
	// Blocked at 4 × 5 ns = 20 ns; checks run every limit/4 = 250 ns; the
	// first check with now - 20 ns > 1 µs is at 1250 ns.
	if got, want := m.Sim.Now(), 1250*ipcqNS; got != want {
		t.Errorf("watchdog fired at %v, want %v", got, want)
	}
	if sent != 4 || q.MyHead != 4 || q.PeerTailCache != 0 {
		t.Errorf("sent=%d my_head=%d peer_tail_cache=%d, want 4, 4, 0", sent, q.MyHead, q.PeerTailCache)
	}
}

// ---------------------------------------------------------------------------
// 2. Credit return fast path [docs/architecture.md, IPCQ]
// ---------------------------------------------------------------------------

// Rule (docs/architecture.md, IPCQ, credits): a recv returns a credit that
// reaches the sender after T(path B→A, ipcq_credit_size_bytes) = Σ latency +
// ceil(credit_bytes / min bandwidth) over the PE-to-PE links (no memory
// ports); a sender blocked on the full ring resumes exactly then.
func TestIPCQ_Credit_WakesSenderAfterFastPathDelay(t *testing.T) {
	for _, tc := range []struct {
		name   string
		peerPE int
		credit int64
	}{
		{"intra-cube", 1, 16},
		{"cross-cube", 5, 16},
		{"cross-sip", 9, 16},
		{"cross-sip/credit-64", 9, 64},
		{"intra-cube/credit-1", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams()
			p.Placement = []int{0, tc.peerPE}
			cfg := ipcqTestCfg(HBM, Sleep, 2, 64)
			cfg.CreditBytes = tc.credit
			m, g := installIPCQ(t, p, pairLinks(), cfg)
			q := lookup(t, g, 0, "E", true)
			rq := lookup(t, g, 1, "W", false)
			src := srcBuf(t, m.Ranks[0].HBM, payload(0, 0, 64))

			credit := idleT(fabricLinks(p, tc.peerPE), tc.credit)
			if got := m.PEToPE(m.Ranks[1], m.Ranks[0]).IdleTime(tc.credit); got != credit {
				t.Errorf("PEToPE(receiver, sender).IdleTime(%d) = %v, want Σlat+ceil(n/minbw) = %v", tc.credit, got, credit)
			}
			if rq.creditDelay != credit {
				t.Errorf("receiver creditDelay = %v, want %v", rq.creditDelay, credit)
			}

			const recvAt = 2 * sim.Microsecond
			dels := recordDeliveries(g, nil)
			var resumedAt sim.Time
			sender := m.Sim.Spawn("send", func(p *sim.Proc) {
				for i := 0; i < 3; i++ {
					if err := g.Send(p, q, src, MsgMeta{}); err != nil {
						t.Error(err)
						return
					}
				}
				resumedAt = p.Sim().Now()
			})
			m.Sim.Spawn("recv", func(p *sim.Proc) {
				if err := p.Sleep(recvAt); err != nil {
					return
				}
				if err := g.WaitRecv(p, rq); err != nil {
					t.Error(err)
					return
				}
				if now := p.Sim().Now(); now != recvAt {
					t.Errorf("first message not ready at %v (ready at %v)", recvAt, now)
				}
				g.Take(rq, true)
			})
			// Just before the credit lands nothing has changed for the sender.
			m.Sim.Spawn("observer", func(p *sim.Proc) {
				if err := p.Sleep(recvAt + credit - 1); err != nil {
					return
				}
				if q.PeerTailCache != 0 || sender.Wait == nil {
					t.Errorf("1 ps before the credit: peer_tail_cache=%d, sender waiting=%v; want 0, true", q.PeerTailCache, sender.Wait != nil)
				}
			})
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			if len(*dels) != 3 {
				t.Fatalf("%d deliveries, want 3", len(*dels))
			}
			type times struct{ ThirdIssued, SendReturned sim.Time }
			want := times{recvAt + credit, recvAt + credit + cfg.Overhead}
			got := times{(*dels)[2].Issued, resumedAt}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("blocked send resumes at recv + credit delay %v (-want +got):\n%s", credit, diff)
			}
			if q.PeerTailCache != 1 || q.MyHead != 3 {
				t.Errorf("peer_tail_cache=%d my_head=%d, want 1, 3", q.PeerTailCache, q.MyHead)
			}
		})
	}
}

// Rule (docs/architecture.md, IPCQ, credits): a credit covers the messages
// taken whose slots are free, in order: a message taken to be copied out
// (copy_to_dst) frees its slot when its copy is done (CopyDone), and until
// then no credit covers it or any later message, not even one taken
// return_slot; in-flight credits apply in issue order. (A credit used to
// carry my_tail, so the credit of one copy covered the messages whose
// copies were still reading their slots, and the sender refilled them: a
// wrong result without a hazard, found by the self-test.)
func TestIPCQ_Credit_CoversFreedSlotsOnly(t *testing.T) {
	cfg := ipcqTestCfg(HBM, Sleep, 4, 64)
	m, g := installIPCQ(t, testParams(), pairLinks(), cfg)
	q := lookup(t, g, 0, "E", true)
	rq := lookup(t, g, 1, "W", false)
	src := srcBuf(t, m.Ranks[0].HBM, payload(0, 0, 64))
	credit := idleT(fabricLinks(testParams(), 1), cfg.CreditBytes)

	m.Sim.Spawn("send", func(p *sim.Proc) {
		for i := 0; i < 4; i++ {
			if err := g.Send(p, q, src, MsgMeta{}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	type sample struct {
		At            sim.Time
		PeerTailCache uint64
	}
	var got []sample
	const t0 = 2 * sim.Microsecond
	m.Sim.Spawn("recv", func(p *sim.Proc) {
		if err := p.Sleep(t0); err != nil {
			return
		}
		g.Take(rq, false)
		g.Take(rq, false)
		g.CopyDone(rq, 1) // carries 0: message 0 is still being copied
		if err := p.Sleep(1 * ipcqNS); err != nil {
			return
		}
		g.Take(rq, true) // carries 0 still
		if err := p.Sleep(1 * ipcqNS); err != nil {
			return
		}
		g.CopyDone(rq, 0) // carries 3
	})
	m.Sim.Spawn("observer", func(p *sim.Proc) {
		for _, at := range []sim.Time{t0 + credit, t0 + ipcqNS + credit, t0 + 2*ipcqNS + credit - 1, t0 + 2*ipcqNS + credit} {
			if err := p.Sleep(at - p.Sim().Now()); err != nil {
				return
			}
			got = append(got, sample{at, q.PeerTailCache})
		}
	})
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	want := []sample{{t0 + credit, 0}, {t0 + ipcqNS + credit, 0}, {t0 + 2*ipcqNS + credit - 1, 0}, {t0 + 2*ipcqNS + credit, 3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("peer_tail_cache over time (-want +got):\n%s", diff)
	}
}

// ---------------------------------------------------------------------------
// 3. Sleep vs poll and 11. determinism [docs/architecture.md]
// ---------------------------------------------------------------------------

type ringRecv struct {
	At   sim.Time
	Rank int
	Seq  uint64
	Data string
}

type ringWait struct {
	Kind       string // "send" or "recv"
	Start, End sim.Time
}

type ringRun struct {
	Recvs  []ringRecv // in the order they happened
	Finish map[string]sim.Time
	Waits  []ringWait
}

// runRing3 is the shared traffic pattern: 3 ranks in a ring, each sends 20
// distinct messages E (n_slots 2) while a slow receiver drains W.
func runRing3(t *testing.T, mode Backpressure) ringRun {
	t.Helper()
	return runRing3On(t, mode, testParams())
}

// runRing3On is runRing3 on a machine of parameters p.
func runRing3On(t *testing.T, mode Backpressure, p Params) ringRun {
	t.Helper()
	const world, count = 3, 20
	cfg := ipcqTestCfg(HBM, mode, 2, 128)
	cfg.PollInterval = 40 * ipcqNS
	m, g := installIPCQ(t, p, ringLinks(world), cfg)
	run := ringRun{Finish: map[string]sim.Time{}}
	for r := 0; r < world; r++ {
		var srcs []Region
		for i := 0; i < count; i++ {
			srcs = append(srcs, srcBuf(t, m.Ranks[r].HBM, payload(r, i, 24+(i%5)*16)))
		}
		sq := lookup(t, g, r, "E", true)
		rq := lookup(t, g, r, "W", false)
		name := fmt.Sprintf("rank%d.send", r)
		m.Sim.Spawn(name, func(p *sim.Proc) {
			for i := 0; i < count; i++ {
				start := p.Sim().Now()
				if err := g.Send(p, sq, srcs[i], MsgMeta{}); err != nil {
					t.Error(err)
					return
				}
				run.Waits = append(run.Waits, ringWait{"send", start, p.Sim().Now()})
			}
			run.Finish[name] = p.Sim().Now()
		})
		rname := fmt.Sprintf("rank%d.recv", r)
		m.Sim.Spawn(rname, func(p *sim.Proc) {
			for i := 0; i < count; i++ {
				if err := p.Sleep(150 * ipcqNS); err != nil { // work on the previous tile
					return
				}
				start := p.Sim().Now()
				if err := g.WaitRecv(p, rq); err != nil {
					t.Error(err)
					return
				}
				run.Waits = append(run.Waits, ringWait{"recv", start, p.Sim().Now()})
				rcv := g.Take(rq, true)
				run.Recvs = append(run.Recvs, ringRecv{p.Sim().Now(), r, rcv.Meta.Seq, string(rcv.Slot.Bytes())})
			}
			run.Finish[rname] = p.Sim().Now()
		})
	}
	if err := m.Sim.Run(); err != nil {
		t.Fatalf("%v mode: %v", mode, err)
	}
	return run
}

// perRankData is what each rank received, in order, without times.
func perRankData(run ringRun) [][]string {
	out := make([][]string, 3)
	for _, r := range run.Recvs {
		out[r.Rank] = append(out[r.Rank], fmt.Sprintf("seq=%d %s", r.Seq, r.Data))
	}
	return out
}

// Rule (docs/architecture.md, IPCQ: "results are identical in both modes;
// only timing differs"): the same ring traffic with backpressure gives
// identical received data in sleep and poll mode, every poll-mode process
// finishes no earlier, and every poll-mode wait is a whole number of poll
// intervals.
func TestIPCQ_BackpressureModes_SleepAndPollReceiveIdenticalData(t *testing.T) {
	sleep := runRing3(t, Sleep)
	poll := runRing3(t, Poll)

	// The data is the expected one: rank r gets rank r-1's 20 payloads in order.
	want := make([][]string, 3)
	for r := 0; r < 3; r++ {
		for i := 0; i < 20; i++ {
			want[r] = append(want[r], fmt.Sprintf("seq=%d %s", i, payload((r+2)%3, i, 24+(i%5)*16)))
		}
	}
	if diff := cmp.Diff(want, perRankData(sleep)); diff != "" {
		t.Errorf("sleep mode received data (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(perRankData(sleep), perRankData(poll)); diff != "" {
		t.Errorf("received data, sleep (-) vs poll (+):\n%s", diff)
	}

	if len(poll.Finish) != 6 || len(sleep.Finish) != 6 {
		t.Fatalf("finished processes: sleep %d, poll %d, want 6", len(sleep.Finish), len(poll.Finish))
	}
	for name, ts := range sleep.Finish {
		if tp := poll.Finish[name]; tp < ts {
			t.Errorf("%s finished at %v in poll mode, earlier than %v in sleep mode", name, tp, ts)
		}
	}

	const interval, overhead = 40 * ipcqNS, 5 * ipcqNS
	for _, mode := range []struct {
		name string
		run  ringRun
	}{{"sleep", sleep}, {"poll", poll}} {
		blocked := map[string]int{}
		for _, w := range mode.run.Waits {
			d := w.End - w.Start
			if w.Kind == "send" {
				d -= overhead
			}
			if d > 0 {
				blocked[w.Kind]++
			}
			if mode.name == "poll" && d%interval != 0 {
				t.Errorf("poll mode %s wait [%v, %v] lasted %v: not a multiple of the poll interval %v", w.Kind, w.Start, w.End, d, interval)
			}
		}
		// The pattern must exercise both kinds of wait, or the test is void.
		if blocked["send"] == 0 || blocked["recv"] == 0 {
			t.Errorf("%s mode: %d blocked sends, %d blocked recvs; want both > 0", mode.name, blocked["send"], blocked["recv"])
		}
	}
}

// Rule (docs/architecture.md, IPCQ): sleep wakes exactly at the pointer
// update; poll re-checks every poll_interval_ns from the start of the wait,
// so the wait is the sleep-mode wait rounded up to a whole number of
// intervals.
func TestIPCQ_BackpressureModes_PollRoundsWaitsUpToInterval(t *testing.T) {
	p := testParams()
	const n = 200
	const t0 = sim.Microsecond         // the sender starts
	const recvAt = 3 * sim.Microsecond // the receiver takes the first message
	arrive := t0 + idleT([]LinkParams{p.Hbm.LinkParams, p.PeNoc, p.PeNoc, p.Hbm.LinkParams}, n)
	credit := idleT(fabricLinks(p, 1), 16)
	sendBlocked := t0 + 5*ipcqNS // n_slots 1: the second send blocks after one overhead
	for _, tc := range []struct {
		name     string
		mode     Backpressure
		interval sim.Time
	}{
		{"sleep", Sleep, 100 * ipcqNS},
		{"poll/100ns", Poll, 100 * ipcqNS},
		{"poll/7ns", Poll, 7 * ipcqNS},
		{"poll/1ps", Poll, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type wakes struct{ Recv, Send sim.Time }
			// Sleep: exactly at the update. Poll: the receiver waits from 0,
			// the sender from sendBlocked; each rounds up to the interval.
			want := wakes{arrive, recvAt + credit}
			if tc.mode == Poll {
				want = wakes{ceilTo(arrive, tc.interval), sendBlocked + ceilTo(recvAt+credit-sendBlocked, tc.interval)}
			}
			cfg := ipcqTestCfg(HBM, tc.mode, 1, 256)
			cfg.PollInterval = tc.interval
			m, g := installIPCQ(t, p, pairLinks(), cfg)
			q := lookup(t, g, 0, "E", true)
			rq := lookup(t, g, 1, "W", false)
			src := srcBuf(t, m.Ranks[0].HBM, payload(0, 0, n))
			dels := recordDeliveries(g, nil)
			var recvWoke sim.Time
			m.Sim.Spawn("send", func(p *sim.Proc) {
				if err := p.Sleep(t0); err != nil {
					return
				}
				for i := 0; i < 2; i++ {
					if i == 1 && p.Sim().Now() != sendBlocked {
						t.Errorf("second send issued at %v, want %v", p.Sim().Now(), sendBlocked)
					}
					if err := g.Send(p, q, src, MsgMeta{}); err != nil {
						t.Error(err)
						return
					}
				}
			})
			m.Sim.Spawn("recv", func(p *sim.Proc) {
				if err := g.WaitRecv(p, rq); err != nil {
					t.Error(err)
					return
				}
				recvWoke = p.Sim().Now()
				if err := p.Sleep(recvAt - p.Sim().Now()); err != nil {
					return
				}
				g.Take(rq, true)
			})
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			if len(*dels) != 2 {
				t.Fatalf("%d deliveries, want 2", len(*dels))
			}
			if diff := cmp.Diff(want, wakes{recvWoke, (*dels)[1].Issued}); diff != "" {
				t.Errorf("wake times (-want +got):\n%s", diff)
			}
		})
	}
}

// Rule (docs/architecture.md, Determinism): same inputs → identical results.
// The ring scenario run twice yields the same transcript, times and bytes
// included.
func TestIPCQ_Determinism_RingTranscriptIdenticalAcrossRuns(t *testing.T) {
	for _, mode := range []Backpressure{Sleep, Poll} {
		t.Run(fmt.Sprint("mode", mode), func(t *testing.T) {
			a, b := runRing3(t, mode), runRing3(t, mode)
			if len(a.Recvs) != 60 {
				t.Fatalf("%d receives, want 60", len(a.Recvs))
			}
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("second run differs (-first +second):\n%s", diff)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 4. Ring wrap-around [docs/architecture.md, IPCQ]
// ---------------------------------------------------------------------------

// Rule (docs/architecture.md, IPCQ): slot = my_head % n_slots, dst = rx_base
// + slot × slot_size. 3 × n_slots messages through 2 slots arrive in order
// with their bytes and metadata (sender_seq 0, 1, 2, …), the slot index
// wraps, and each slot's generation counts its deliveries.
func TestIPCQ_Ring_WrapsAroundInOrderWithSeqAndSlotGen(t *testing.T) {
	const nSlots, rounds = 2, 3
	cfg := ipcqTestCfg(HBM, Sleep, nSlots, 96)
	m, g := installIPCQ(t, testParams(), pairLinks(), cfg)
	q := lookup(t, g, 0, "E", true)
	rq := lookup(t, g, 1, "W", false)

	type got struct {
		Meta    MsgMeta
		Idx     int
		Gen     uint64
		SlotOff int64
		Data    string
	}
	var want, gotRecv []got
	var srcs []Region
	for i := 0; i < nSlots*rounds; i++ {
		data := payload(0, i, 10+7*i)
		srcs = append(srcs, srcBuf(t, m.Ranks[0].HBM, data))
		want = append(want, got{
			Meta:    MsgMeta{NBytes: int64(len(data)), DType: 3, Count: int64(i + 1), Seq: uint64(i)},
			Idx:     i % nSlots,
			Gen:     uint64(i/nSlots + 1),
			SlotOff: rq.Rx.Off + int64(i%nSlots)*cfg.SlotSize,
			Data:    string(data),
		})
	}
	dels := recordDeliveries(g, nil)
	m.Sim.Spawn("send", func(p *sim.Proc) {
		for i, src := range srcs {
			// Seq and NBytes are the IPCQ's to fill; junk must be overwritten.
			if err := g.Send(p, q, src, MsgMeta{NBytes: 999, DType: 3, Count: int64(i + 1), Seq: 12345}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	m.Sim.Spawn("recv", func(p *sim.Proc) {
		for range srcs {
			if err := g.WaitRecv(p, rq); err != nil {
				t.Error(err)
				return
			}
			r := g.Take(rq, true)
			gotRecv = append(gotRecv, got{r.Meta, r.Idx, r.Gen, r.Slot.Off, string(r.Slot.Bytes())})
		}
	})
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, gotRecv); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
	if len(*dels) != len(srcs) {
		t.Fatalf("%d deliveries, want %d", len(*dels), len(srcs))
	}
	for i, dl := range *dels {
		d := dl.Dst
		if wantAddr := rq.Rx.Addr() + uint64((i%nSlots)*int(cfg.SlotSize)); d.Addr() != wantAddr || d.Mem != rq.Rx.Mem {
			t.Errorf("message %d: dst %v, want rx_base_pa + %d × slot_size = %#x", i, d, i%nSlots, wantAddr)
		}
	}
	var gens []uint64
	for _, s := range rq.Slots {
		gens = append(gens, s.Gen)
	}
	if diff := cmp.Diff([]uint64{rounds, rounds}, gens); diff != "" {
		t.Errorf("SlotGen after %d rounds (-want +got):\n%s", rounds, diff)
	}
	type ptrs struct{ MyHead, PeerTailCache, MyTail, PeerHeadCache uint64 }
	if diff := cmp.Diff(ptrs{6, 6, 6, 6}, ptrs{q.MyHead, q.PeerTailCache, rq.MyTail, rq.PeerHeadCache}); diff != "" {
		t.Errorf("final pointers (-want +got):\n%s", diff)
	}
}

// ---------------------------------------------------------------------------
// 5. Data arrives exactly at DMA completion [I6, I7]
// ---------------------------------------------------------------------------

// Rule (I6/I7, docs/architecture.md, IPCQ; T(path, n) of engine/machine): a
// message sent at t over an idle path is visible at exactly t +
// T(MemToMem(src, peer rx), n); the bytes and peer_head_cache appear in the
// same event (never one without the other), and a receiver parked in WaitRecv
// sees the data when it wakes.
func TestIPCQ_Delivery_VisibleExactlyAtDMACompletionWithData(t *testing.T) {
	const n = 200
	const t0 = sim.Microsecond
	p := testParams()
	for _, peerPE := range []int{1, 5, 9} {
		for _, srcSpace := range []Space{HBM, TCM} {
			for _, rxKind := range []Space{TCM, HBM, SRAM} {
				name := fmt.Sprintf("peer-pe%d/src-%v/rx-%v", peerPE, srcSpace, rxKind)
				t.Run(name, func(t *testing.T) {
					p := p
					p.Placement = []int{0, peerPE}
					cfg := ipcqTestCfg(rxKind, Sleep, 2, 256)
					m, g := installIPCQ(t, p, pairLinks(), cfg)
					q := lookup(t, g, 0, "E", true)
					rq := lookup(t, g, 1, "W", false)
					data := payload(0, 7, n)
					src := srcBuf(t, memOf(m.Ranks[0], srcSpace), data)

					// Expected path: src port, fabric, rx port — SRAM sits at
					// the cube router, so its side has no PE NoC hop.
					links := fabricLinks(p, peerPE)
					if rxKind == SRAM {
						links = links[:len(links)-1]
					}
					links = append(append([]LinkParams{memParams(p, srcSpace)}, links...), memParams(p, rxKind))
					want := t0 + idleT(links, n)
					if got := t0 + m.MemToMem(src.Mem, rq.Rx.Mem).IdleTime(n); got != want {
						t.Fatalf("MemToMem(src, peer rx).IdleTime = %v, independent formula %v", got-t0, want-t0)
					}
					slot := rq.Rx.Sub(0, n)
					visible := func() bool { return bytes.Equal(slot.Bytes(), data) }

					m.Sim.Spawn("send", func(p *sim.Proc) {
						if err := p.Sleep(t0); err != nil {
							return
						}
						if err := g.Send(p, q, src, MsgMeta{}); err != nil {
							t.Error(err)
						}
					})
					var wokeAt sim.Time
					var sawData bool
					m.Sim.Spawn("recv", func(p *sim.Proc) {
						if err := g.WaitRecv(p, rq); err != nil {
							t.Error(err)
							return
						}
						wokeAt = p.Sim().Now()
						r := g.Take(rq, true)
						sawData = bytes.Equal(r.Slot.Bytes(), data)
					})
					// 1 ps before completion: neither pointer nor bytes.
					m.Sim.Spawn("before", func(p *sim.Proc) {
						if err := p.Sleep(want - 1); err != nil {
							return
						}
						if rq.PeerHeadCache != 0 || visible() {
							t.Errorf("at %v (1 ps early): peer_head_cache=%d bytes visible=%v", want-1, rq.PeerHeadCache, visible())
						}
					})
					// I7 sampled every ns: ready ⇔ bytes present.
					m.Sim.Spawn("i7", func(p *sim.Proc) {
						for p.Sim().Now() < want+5*ipcqNS {
							if rq.MyTail == 0 && rq.Ready() != visible() {
								t.Errorf("I7 at %v: ready=%v but bytes visible=%v", p.Sim().Now(), rq.Ready(), visible())
							}
							if err := p.Sleep(ipcqNS); err != nil {
								return
							}
						}
					})
					// I6: in the completion event itself both are already set.
					delivered := 0
					var finished sim.Time
					g.OnDeliver = func(sq *QueuePair, msg *Message) {
						delivered++
						finished = msg.Xfer.Finished
						if now := m.Sim.Now(); now != want || rq.PeerHeadCache != 1 || !visible() {
							t.Errorf("completion event at %v: peer_head_cache=%d bytes visible=%v; want %v, 1, true", now, rq.PeerHeadCache, visible(), want)
						}
					}
					if err := m.Sim.Run(); err != nil {
						t.Fatal(err)
					}
					if delivered != 1 {
						t.Fatalf("delivered %d messages, want 1", delivered)
					}
					type obs struct {
						Finished, RecvWoke sim.Time
						SawData            bool
					}
					if diff := cmp.Diff(obs{want, want, true}, obs{finished, wokeAt, sawData}); diff != "" {
						t.Errorf("delivery (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// Rule (docs/architecture.md, IPCQ): the source bytes are read at DMA
// completion; src is in flight until then, so a write after send (but before
// completion) is what arrives.
func TestIPCQ_Delivery_SourceBytesReadAtCompletion(t *testing.T) {
	cfg := ipcqTestCfg(HBM, Sleep, 2, 64)
	m, g := installIPCQ(t, testParams(), pairLinks(), cfg)
	q := lookup(t, g, 0, "E", true)
	rq := lookup(t, g, 1, "W", false)
	first, second := payload(0, 1, 64), payload(0, 2, 64)
	src := srcBuf(t, m.Ranks[0].HBM, first)
	var got string
	m.Sim.Spawn("send", func(p *sim.Proc) {
		if err := g.Send(p, q, src, MsgMeta{}); err != nil {
			t.Error(err)
			return
		}
		copy(src.Bytes(), second) // still in flight: not a snapshot at send time
	})
	m.Sim.Spawn("recv", func(p *sim.Proc) {
		if err := g.WaitRecv(p, rq); err != nil {
			t.Error(err)
			return
		}
		got = string(g.Take(rq, true).Slot.Bytes())
	})
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(second), got); diff != "" {
		t.Errorf("delivered bytes (-want +got):\n%s", diff)
	}
}

// ---------------------------------------------------------------------------
// 6. IPCQ errors [IpcqInvalidDirection, IpcqMessageTooLarge]
// ---------------------------------------------------------------------------

// Rule (docs/architecture.md, Invariants and failures): a message larger than
// slot_size is IpcqMessageTooLarge and changes no pointer; exactly slot_size
// is fine.
func TestIPCQ_Errors_MessageTooLarge(t *testing.T) {
	cfg := ipcqTestCfg(HBM, Sleep, 2, 128)
	m, g := installIPCQ(t, testParams(), pairLinks(), cfg)
	q := lookup(t, g, 0, "E", true)
	big := srcBuf(t, m.Ranks[0].HBM, payload(0, 0, 129))
	exact := srcBuf(t, m.Ranks[0].HBM, payload(0, 1, 128))
	var errBig, errExact error
	var doneAt sim.Time
	m.Sim.Spawn("send", func(p *sim.Proc) {
		errBig = g.Send(p, q, big, MsgMeta{})
		doneAt = p.Sim().Now()
		errExact = g.Send(p, q, exact, MsgMeta{})
	})
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	ie := asIPCQError(t, errBig)
	if ie.Kind != "IpcqMessageTooLarge" {
		t.Errorf("Kind = %q, want IpcqMessageTooLarge", ie.Kind)
	}
	for _, s := range []string{"rank 0", "E", "129", "128"} {
		if !strings.Contains(ie.Error(), s) {
			t.Errorf("error %q does not mention %q", ie.Error(), s)
		}
	}
	if doneAt != 0 {
		t.Errorf("rejected send took time: returned at %v", doneAt)
	}
	if errExact != nil {
		t.Errorf("send of exactly slot_size bytes: %v", errExact)
	}
	if q.MyHead != 1 {
		t.Errorf("my_head = %d, want 1 (only the slot-sized message counts)", q.MyHead)
	}
}

// Rule (docs/architecture.md, Invariants and failures; ring_1d_unidir in
// docs/topologies.md): an unknown direction, or sending on a receive-only
// direction, is IpcqInvalidDirection listing the installed directions.
func TestIPCQ_Errors_InvalidDirection(t *testing.T) {
	// ring_1d_unidir: every rank sends E; its W is receive-only.
	links := [][]Link{
		{{Dir: "E", Peer: 1, PeerDir: "W"}, {Dir: "W", Peer: 2, PeerDir: "E", RecvOnly: true}},
		{{Dir: "E", Peer: 2, PeerDir: "W"}, {Dir: "W", Peer: 0, PeerDir: "E", RecvOnly: true}},
		{{Dir: "E", Peer: 0, PeerDir: "W"}, {Dir: "W", Peer: 1, PeerDir: "E", RecvOnly: true}},
	}
	_, g := installIPCQ(t, testParams(), links, ipcqTestCfg(HBM, Sleep, 2, 64))
	for _, tc := range []struct {
		name    string
		rank    int
		dir     string
		sending bool
		wantErr bool
		mention []string
	}{
		{"unknown-N", 0, "N", true, true, []string{"rank 0", `"N"`, "installed: E, W"}},
		{"unknown-recv", 2, "parent", false, true, []string{"rank 2", `"parent"`, "installed: E, W"}},
		{"empty", 1, "", false, true, []string{"rank 1", "installed: E, W"}},
		{"case-sensitive", 1, "e", true, true, []string{`"e"`}},
		{"send-on-recv-only-W", 1, "W", true, true, []string{"rank 1", `"W"`, "receive-only", "installed: E, W"}},
		{"recv-on-recv-only-W", 1, "W", false, false, nil},
		{"send-E", 1, "E", true, false, nil},
		{"recv-E", 1, "E", false, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := g.Lookup(tc.rank, tc.dir, tc.sending)
			if !tc.wantErr {
				if err != nil || q == nil || q.Dir != tc.dir || q.Rank != tc.rank {
					t.Fatalf("Lookup = %v, %v; want rank %d's %s", q, err, tc.rank, tc.dir)
				}
				return
			}
			if q != nil {
				t.Errorf("Lookup returned a queue pair with the error")
			}
			ie := asIPCQError(t, err)
			if ie.Kind != "IpcqInvalidDirection" {
				t.Errorf("Kind = %q, want IpcqInvalidDirection", ie.Kind)
			}
			for _, s := range tc.mention {
				if !strings.Contains(ie.Msg, s) {
					t.Errorf("message %q does not mention %q", ie.Msg, s)
				}
			}
		})
	}
	// WaitAny on a rank with no directions is also IpcqInvalidDirection.
	m2, g2 := installIPCQ(t, testParams(), [][]Link{nil}, ipcqTestCfg(HBM, Sleep, 1, 64))
	var err error
	m2.Sim.Spawn("any", func(p *sim.Proc) { _, err = g2.WaitAny(p, g2.EPs[0]) })
	if rerr := m2.Sim.Run(); rerr != nil {
		t.Fatal(rerr)
	}
	if ie := asIPCQError(t, err); ie.Kind != "IpcqInvalidDirection" {
		t.Errorf("WaitAny with no directions: Kind = %q", ie.Kind)
	}
}

// ---------------------------------------------------------------------------
// 7. Rx rings that do not fit [buffer kinds]
// ---------------------------------------------------------------------------

// Rule (buffer kinds, docs/architecture.md, IPCQ): a ring that does not fit
// in buffer_kind memory is an init error naming the rank and the bytes
// needed.
func TestIPCQ_Install_RxRingThatDoesNotFitIsRingFitErrorNamingRankAndBytes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		kind     Space
		nSlots   int
		slotSize int64
		prealloc map[int]int64 // rank -> bytes already used in its buffer memory
		mention  []string
	}{
		{"tcm-huge", TCM, 1024, 4096, nil,
			[]string{"rank 0", "2 direction(s) × 1024 slots × 4096 bytes = 8388608 bytes needed", "1048576 free of 1048576"}},
		{"tcm-rank1-partly-used", TCM, 4, 64 << 10, map[int]int64{1: 700 << 10},
			[]string{"rank 1", "= 524288 bytes needed", "331776 free of 1048576"}},
		{"sram-shared-by-cube", SRAM, 256, 8 << 10, nil,
			// 4 ranks × 2 dirs × 2 MiB in one 8 MiB SRAM: rank 2 is the first that does not fit.
			[]string{"rank 2", "4194304 bytes needed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestMachine(t, testParams())
			world := 3
			if tc.kind == SRAM {
				world = 4
			}
			if err := m.Place(world); err != nil {
				t.Fatal(err)
			}
			for r, n := range tc.prealloc {
				if _, err := memOf(m.Ranks[r], tc.kind).Alloc(n); err != nil {
					t.Fatal(err)
				}
			}
			cfg := ipcqTestCfg(tc.kind, Sleep, tc.nSlots, tc.slotSize)
			g, err := m.Install(ringLinks(world), cfg)
			var rf *RingFitError
			if !errors.As(err, &rf) {
				t.Fatalf("Install = %v, %v; want *RingFitError", g, err)
			}
			for _, s := range tc.mention {
				if !strings.Contains(rf.Error(), s) {
					t.Errorf("ring fit error %q does not mention %q", rf.Error(), s)
				}
			}
		})
	}
	// The same geometry in HBM fits.
	m := newTestMachine(t, testParams())
	if err := m.Place(3); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Install(ringLinks(3), ipcqTestCfg(HBM, Sleep, 1024, 4096)); err != nil {
		t.Errorf("hbm rings: %v", err)
	}
}

// ---------------------------------------------------------------------------
// 8. Flush
// ---------------------------------------------------------------------------

// Rule (tl.flush, docs/builtins.md): flush waits until this side's sends have
// completed their DMA — not for the receiver to consume them (no credit
// needed) — and only for the given direction when one is named.
func TestIPCQ_Flush_WaitsForInFlightSendsOnly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     Backpressure
		interval sim.Time
	}{{"sleep", Sleep, 0}, {"poll", Poll, 30 * ipcqNS}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ipcqTestCfg(HBM, tc.mode, 2, 64<<10)
			if tc.mode == Poll {
				cfg.PollInterval = tc.interval
			}
			m, g := installIPCQ(t, testParams(), ringLinks(3), cfg)
			ep := g.EPs[0]
			qE, qW := lookup(t, g, 0, "E", true), lookup(t, g, 0, "W", true)
			small := srcBuf(t, m.Ranks[0].HBM, payload(0, 0, 64))
			big := srcBuf(t, m.Ranks[0].HBM, payload(0, 1, 64<<10))
			dels := recordDeliveries(g, nil)
			type obs struct {
				IdleFlush, FlushW, FlushAll sim.Time
				InFlightEAfterW             int
			}
			var got obs
			wait := func(start, done sim.Time) sim.Time {
				if tc.mode == Poll && done > start {
					return start + ceilTo(done-start, tc.interval)
				}
				return max(start, done)
			}
			var startW, startAll sim.Time
			m.Sim.Spawn("rank0", func(p *sim.Proc) {
				if err := g.Flush(p, ep, nil); err != nil { // nothing in flight
					t.Error(err)
					return
				}
				got.IdleFlush = p.Sim().Now()
				if err := g.Send(p, qW, small, MsgMeta{}); err != nil {
					t.Error(err)
					return
				}
				if err := g.Send(p, qE, big, MsgMeta{}); err != nil {
					t.Error(err)
					return
				}
				startW = p.Sim().Now()
				if err := g.Flush(p, ep, qW); err != nil {
					t.Error(err)
					return
				}
				got.FlushW = p.Sim().Now()
				got.InFlightEAfterW = qE.InFlight
				startAll = p.Sim().Now()
				if err := g.Flush(p, ep, nil); err != nil {
					t.Error(err)
					return
				}
				got.FlushAll = p.Sim().Now()
			})
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			if len(*dels) != 2 || (*dels)[0].Dir != "W" || (*dels)[1].Dir != "E" || !((*dels)[0].Finished < (*dels)[1].Finished) {
				t.Fatalf("setup: deliveries %+v; want W then E", *dels)
			}
			doneW, doneE := (*dels)[0].Finished, (*dels)[1].Finished
			want := obs{
				IdleFlush:       0,
				FlushW:          wait(startW, doneW),
				FlushAll:        wait(startAll, doneE),
				InFlightEAfterW: 1,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("flush (-want +got):\n%s", diff)
			}
			// Nobody received: flush did not need credits.
			if qE.PeerTailCache != 0 || qW.PeerTailCache != 0 || qE.InFlight != 0 || qW.InFlight != 0 {
				t.Errorf("peer_tail_cache E/W = %d/%d, in flight %d/%d; want 0", qE.PeerTailCache, qW.PeerTailCache, qE.InFlight, qW.InFlight)
			}
		})
	}
}

// Rule (threads share their rank's directions): any number of processes of
// a rank (its kernel and its tl.spawn threads) may flush one direction at
// once, and each returns when the sends in flight have completed. The
// flush kept one waiter per queue pair, so the second flush replaced the
// first, which was never woken (a deadlock at "flush E: 0 send(s) in
// flight"; found by the self-test, seed 12).
func TestIPCQ_Flush_SeveralWaitersOfOneDirection(t *testing.T) {
	for _, mode := range []Backpressure{Sleep, Poll} {
		t.Run(map[Backpressure]string{Sleep: "sleep", Poll: "poll"}[mode], func(t *testing.T) {
			cfg := ipcqTestCfg(HBM, mode, 2, 64<<10)
			m, g := installIPCQ(t, testParams(), ringLinks(2), cfg)
			ep := g.EPs[0]
			qE := lookup(t, g, 0, "E", true)
			big := srcBuf(t, m.Ranks[0].HBM, payload(0, 1, 64<<10))
			dels := recordDeliveries(g, nil)
			m.Sim.Spawn("rank0", func(p *sim.Proc) {
				if err := g.Send(p, qE, big, MsgMeta{}); err != nil {
					t.Error(err)
				}
			})
			done := make([]sim.Time, 3)
			for i := range done {
				m.Sim.Spawn(fmt.Sprint("flusher", i), func(p *sim.Proc) {
					if err := p.Sleep(sim.Time(1+i) * ipcqNS); err != nil { // after the send is issued
						t.Error(err)
						return
					}
					if err := g.Flush(p, ep, qE); err != nil {
						t.Error(err)
					}
					done[i] = p.Sim().Now()
				})
			}
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			if len(*dels) != 1 {
				t.Fatalf("setup: %d deliveries, want 1", len(*dels))
			}
			for i, at := range done {
				if at < (*dels)[0].Finished {
					t.Errorf("flusher %d returned at %v, before the send completed at %v", i, at, (*dels)[0].Finished)
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 9. Exactly-once (I1) and pointer monotonicity (I2), randomized
// ---------------------------------------------------------------------------

// Rule (I1, I2, docs/architecture.md, IPCQ): over a randomized multi-rank
// exchange (random placement across cubes and SIPs, buffer kind, mode,
// n_slots, sizes, source memories, delays and credit timing), every queue
// pair delivers each sender_seq exactly once and in order with its bytes;
// my_head, my_tail and the caches never decrease; and at every observed
// moment my_tail ≤ peer_head_cache ≤ peer.my_head, peer_tail_cache ≤
// peer.my_tail, my_head − peer_tail_cache ≤ n_slots.
func TestIPCQ_Random_ExactlyOnceInOrderAndMonotonePointers(t *testing.T) {
	dirs := []string{"E", "W"}
	rev := map[string]string{"E": "W", "W": "E"}
	for seed := uint64(1); seed <= 24; seed++ {
		// Even seeds split transfers at SIPs (the rule of a partitioned
		// run: its messages, credits and halves of a completion).
		split := seed%2 == 0
		t.Run(fmt.Sprint("seed", seed, map[bool]string{true: "-split"}[split]), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x1bc))
			world := 2 + rng.IntN(4)
			p := testParams()
			p.Placement = rng.Perm(16)[:world]
			p.SplitAtSIP = split
			cfg := ipcqTestCfg([]Space{TCM, SRAM, HBM}[rng.IntN(3)], []Backpressure{Sleep, Poll}[rng.IntN(2)], 1+rng.IntN(4), 128)
			cfg.PollInterval = sim.Time(1+rng.IntN(60)) * ipcqNS
			m, g := installIPCQ(t, p, ringLinks(world), cfg)
			t.Logf("world %d placement %v kind %v mode %v n_slots %d poll %v", world, p.Placement, cfg.BufferKind, cfg.Backpressure, cfg.NSlots, cfg.PollInterval)

			type msgPlan struct {
				src  Region
				data string
				gap  sim.Time
			}
			type key struct {
				rank int
				dir  string
			}
			plans := map[key][]msgPlan{}
			for r := 0; r < world; r++ {
				for _, d := range dirs {
					cnt := rng.IntN(25)
					for i := 0; i < cnt; i++ {
						n := 1 + rng.IntN(128)
						buf := make([]byte, n)
						for k := range buf {
							buf[k] = byte(rng.Uint32())
						}
						mem := m.Ranks[r].HBM
						if rng.IntN(2) == 0 {
							mem = m.Ranks[r].TCM
						}
						plans[key{r, d}] = append(plans[key{r, d}], msgPlan{srcBuf(t, mem, buf), string(buf), sim.Time(rng.IntN(300)) * ipcqNS})
					}
				}
			}

			// Pointer checker.
			type ptrs struct{ MyHead, MyTail, PeerHeadCache, PeerTailCache uint64 }
			last := map[*QueuePair]ptrs{}
			var all []*QueuePair
			for _, ep := range g.EPs {
				all = append(all, ep.QPs...)
			}
			failures := 0
			check := func(where string) {
				if failures > 5 {
					return
				}
				now := m.Sim.Now()
				for _, q := range all {
					cur := ptrs{q.MyHead, q.MyTail, q.PeerHeadCache, q.PeerTailCache}
					prev := last[q]
					if cur.MyHead < prev.MyHead || cur.MyTail < prev.MyTail || cur.PeerHeadCache < prev.PeerHeadCache || cur.PeerTailCache < prev.PeerTailCache {
						failures++
						t.Errorf("I2 at %v (%s): rank %d %s pointers decreased: %+v -> %+v", now, where, q.Rank, q.Dir, prev, cur)
					}
					last[q] = cur
					pq := q.PeerQP()
					if !(q.MyTail <= q.PeerHeadCache && q.PeerHeadCache <= pq.MyHead && q.PeerTailCache <= pq.MyTail && q.MyHead-q.PeerTailCache <= uint64(cfg.NSlots)) {
						failures++
						t.Errorf("pointer bounds at %v (%s): rank %d %s %+v, peer my_head=%d my_tail=%d", now, where, q.Rank, q.Dir, cur, pq.MyHead, pq.MyTail)
					}
				}
			}
			delivered := map[key]map[uint64]int{}
			g.OnDeliver = func(q *QueuePair, msg *Message) {
				k := key{q.Rank, q.Dir}
				if delivered[k] == nil {
					delivered[k] = map[uint64]int{}
				}
				delivered[k][msg.Meta.Seq]++
				check("deliver")
			}
			g.OnRecv = func(q *QueuePair, meta MsgMeta, slot Region, at sim.Time) { check("recv") }

			received := map[key][]string{}
			finished := 0
			nProcs := 0
			for r := 0; r < world; r++ {
				for _, d := range dirs {
					k := key{r, d}
					sq := lookup(t, g, r, d, true)
					plan := plans[k]
					nProcs++
					m.Sim.Spawn(fmt.Sprintf("r%d.send%s", r, d), func(p *sim.Proc) {
						defer func() { finished++ }()
						for _, mp := range plan {
							if err := p.Sleep(mp.gap); err != nil {
								return
							}
							if err := g.Send(p, sq, mp.src, MsgMeta{}); err != nil {
								t.Error(err)
								return
							}
							check("send")
						}
					})
					rq := lookup(t, g, r, d, false)
					from := plans[key{rq.Peer, rev[d]}]
					type recvPlan struct {
						delay, creditDelay sim.Time
						creditNow          bool
					}
					var rp []recvPlan
					for range from {
						rp = append(rp, recvPlan{sim.Time(rng.IntN(300)) * ipcqNS, sim.Time(rng.IntN(200)) * ipcqNS, rng.IntN(2) == 0})
					}
					nProcs++
					m.Sim.Spawn(fmt.Sprintf("r%d.recv%s", r, d), func(p *sim.Proc) {
						defer func() { finished++ }()
						for _, pl := range rp {
							if err := p.Sleep(pl.delay); err != nil {
								return
							}
							if err := g.WaitRecv(p, rq); err != nil {
								t.Error(err)
								return
							}
							rc := g.Take(rq, pl.creditNow)
							received[k] = append(received[k], fmt.Sprintf("seq=%d %x", rc.Meta.Seq, rc.Slot.Bytes()))
							if !pl.creditNow {
								if err := p.Sleep(pl.creditDelay); err != nil {
									return
								}
								g.CopyDone(rq, rc.Meta.Seq)
								check("credit")
							}
						}
					})
				}
			}
			m.Sim.Spawn("observer", func(p *sim.Proc) {
				for finished < nProcs {
					check("sample")
					if err := p.Sleep(25 * ipcqNS); err != nil {
						return
					}
				}
			})
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			check("end")

			for r := 0; r < world; r++ {
				for _, d := range dirs {
					k := key{r, d}
					rq := lookup(t, g, r, d, false)
					from := plans[key{rq.Peer, rev[d]}]
					var want []string
					wantDel := map[uint64]int{}
					for i, mp := range from {
						want = append(want, fmt.Sprintf("seq=%d %x", i, mp.data))
						wantDel[uint64(i)] = 1
					}
					if diff := cmp.Diff(want, received[k]); diff != "" {
						t.Errorf("rank %d recv %s (-want +got):\n%s", r, d, diff)
					}
					// Deliveries are recorded on the sender's queue pair.
					sk := key{rq.Peer, rev[d]}
					if diff := cmp.Diff(wantDel, delivered[sk]); len(from) > 0 && diff != "" {
						t.Errorf("deliveries per seq of rank %d %s (-want +got):\n%s", sk.rank, sk.dir, diff)
					}
					sq := lookup(t, g, rq.Peer, rev[d], true)
					n := uint64(len(from))
					type fin struct{ MyHead, PeerTailCache, MyTail, PeerHeadCache uint64 }
					if diff := cmp.Diff(fin{n, n, n, n}, fin{sq.MyHead, sq.PeerTailCache, rq.MyTail, rq.PeerHeadCache}); diff != "" || sq.InFlight != 0 {
						t.Errorf("final pointers rank %d %s -> rank %d (-want +got):\n%s in flight %d", sq.Rank, sq.Dir, rq.Rank, diff, sq.InFlight)
					}
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 10. WaitAny round-robin [tl.recv()]
// ---------------------------------------------------------------------------

// Rule (threads share their rank's directions): two processes of a rank
// (its threads) receiving from any direction at once each get a message.
// The endpoint kept one waiter, so the second receive replaced the first,
// which waited forever beside a ready message (found by the self-test).
func TestIPCQ_WaitAny_SeveralWaiters(t *testing.T) {
	for _, mode := range []Backpressure{Sleep, Poll} {
		t.Run(map[Backpressure]string{Sleep: "sleep", Poll: "poll"}[mode], func(t *testing.T) {
			m, g := installIPCQ(t, testParams(), ringLinks(3), ipcqTestCfg(HBM, mode, 2, 4096))
			for _, peer := range []int{1, 2} {
				dir := map[int]string{1: "W", 2: "E"}[peer] // towards rank 0
				sq := lookup(t, g, peer, dir, true)
				src := srcBuf(t, m.Ranks[peer].HBM, payload(peer, 0, 64))
				m.Sim.Spawn(fmt.Sprint("rank", peer), func(p *sim.Proc) {
					if err := p.Sleep(sim.Time(peer) * sim.Microsecond); err != nil {
						return
					}
					if err := g.Send(p, sq, src, MsgMeta{}); err != nil {
						t.Error(err)
					}
				})
			}
			var got []string
			for i := range 2 {
				m.Sim.Spawn(fmt.Sprint("rank0 thread", i), func(p *sim.Proc) {
					q, err := g.WaitAny(p, g.EPs[0])
					if err != nil {
						t.Error(err)
						return
					}
					g.Take(q, true)
					got = append(got, q.Dir)
				})
			}
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"E", "W"}, got); diff != "" {
				t.Errorf("directions received (-want +got):\n%s", diff)
			}
		})
	}
}

// Rule (tl.recv, docs/builtins.md): tl.recv() without a direction checks directions round-robin
// starting after the last polled one and returns the first ready; when none
// is ready it waits for the next delivery (sleep: exactly at it).
func TestIPCQ_WaitAny_RoundRobinStartsAfterLastPolled(t *testing.T) {
	// Rank 0 has E, N, S, W (sorted) to ranks 1..4, each linked back once.
	links := [][]Link{
		{{Dir: "W", Peer: 4, PeerDir: "E"}, {Dir: "N", Peer: 2, PeerDir: "S"}, {Dir: "E", Peer: 1, PeerDir: "W"}, {Dir: "S", Peer: 3, PeerDir: "N"}},
		{{Dir: "W", Peer: 0, PeerDir: "E"}},
		{{Dir: "S", Peer: 0, PeerDir: "N"}},
		{{Dir: "N", Peer: 0, PeerDir: "S"}},
		{{Dir: "E", Peer: 0, PeerDir: "W"}},
	}
	p := testParams()
	for _, mode := range []Backpressure{Sleep, Poll} {
		t.Run(fmt.Sprint("mode", mode), func(t *testing.T) {
			cfg := ipcqTestCfg(HBM, mode, 4, 64)
			m, g := installIPCQ(t, p, links, cfg)
			if diff := cmp.Diff([]string{"E", "N", "S", "W"}, g.EPs[0].Directions()); diff != "" {
				t.Fatalf("directions (-want +got):\n%s", diff)
			}
			// Early messages: 1 on rank 0's E, 3 on N, 3 on W, none on S.
			early := map[int]int{1: 1, 2: 3, 4: 3}
			for peer, cnt := range early {
				sq := lookup(t, g, peer, links[peer][0].Dir, true)
				src := srcBuf(t, m.Ranks[peer].HBM, payload(peer, 0, 64))
				m.Sim.Spawn(fmt.Sprintf("rank%d", peer), func(p *sim.Proc) {
					for i := 0; i < cnt; i++ {
						if err := g.Send(p, sq, src, MsgMeta{}); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			// A late message on S (from rank 3) at 8 µs.
			const late = 8 * sim.Microsecond
			sq3 := lookup(t, g, 3, "N", true)
			src3 := srcBuf(t, m.Ranks[3].HBM, payload(3, 0, 64))
			m.Sim.Spawn("rank3", func(p *sim.Proc) {
				if err := p.Sleep(late); err != nil {
					return
				}
				if err := g.Send(p, sq3, src3, MsgMeta{}); err != nil {
					t.Error(err)
				}
			})
			lateArrival := late + idleT([]LinkParams{p.Hbm.LinkParams, p.PeNoc, p.PeNoc, p.Hbm.LinkParams}, 64)

			var got []string
			var lastAt sim.Time
			m.Sim.Spawn("rank0", func(p *sim.Proc) {
				if err := p.Sleep(5 * sim.Microsecond); err != nil {
					return
				}
				for i := 0; i < 8; i++ {
					q, err := g.WaitAny(p, g.EPs[0])
					if err != nil {
						t.Error(err)
						return
					}
					g.Take(q, true)
					got = append(got, q.Dir)
					lastAt = p.Sim().Now()
				}
			})
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			want := []string{"E", "N", "W", "N", "W", "N", "W", "S"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("WaitAny directions (-want +got):\n%s", diff)
			}
			wantAt := lateArrival
			if mode == Poll {
				wantAt = 5*sim.Microsecond + ceilTo(lateArrival-5*sim.Microsecond, cfg.PollInterval)
			}
			if lastAt != wantAt {
				t.Errorf("blocked WaitAny returned at %v, want %v", lastAt, wantAt)
			}
		})
	}
}

// Rule I2 under --check (Group.Paranoid): a corrupted pointer is caught at
// the next delivery or credit, named by its invariant.
func TestIPCQ_Paranoid_CatchesBrokenPointerI2(t *testing.T) {
	s := sim.New()
	m, err := New(s, testParams())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Place(2); err != nil {
		t.Fatal(err)
	}
	g, err := m.Install([][]Link{{{Dir: "E", Peer: 1, PeerDir: "W"}}, {{Dir: "W", Peer: 0, PeerDir: "E"}}},
		IPCQConfig{BufferKind: TCM, Backpressure: Sleep, NSlots: 4, SlotSize: 64, CreditBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	g.Paranoid = true
	east := g.EPs[0].QP("E")
	off, _ := m.PE(0).TCM.Alloc(64)
	s.Spawn("sender", func(p *sim.Proc) {
		_ = g.Send(p, east, Region{m.PE(0).TCM, off, 16}, MsgMeta{})
		east.peer.MyTail = 7 // corrupt the receiver's tail behind the engine's back
	})
	err = s.Run()
	defer s.Close()
	var inv *InvariantError
	if !errors.As(err, &inv) || inv.Name != "I2" {
		t.Fatalf("Run = %v, want an I2 InvariantError", err)
	}
}

// Rule (SendBufferHazard, docs/architecture.md, Invariants and failures): a
// send reads its source until its DMA completes, so a write into that source
// is a hazard for exactly the ranks that can address that memory: the owner
// of a TCM or HBM slice, and every PE of the cube whose SRAM it is. The check
// looks only at those ranks (not at every rank of the world); this pins that
// the narrowed scan still finds the send from every rank that can see the
// memory and from no other.
func TestIPCQ_SendBufferHazard_ReadersOfAMemory(t *testing.T) {
	cfg := ipcqTestCfg(HBM, Sleep, 4, 4096)
	// testParams: 4 PEs per cube, so ranks 0–3 share cube 0's SRAM and
	// ranks 4–7 cube 1's.
	m, g := installIPCQ(t, testParams(), ringLinks(8), cfg)
	sram0 := srcBuf(t, m.Ranks[0].SRAM, payload(0, 0, 4096))
	sram1 := srcBuf(t, m.Ranks[4].SRAM, payload(4, 0, 4096))
	hbm2 := srcBuf(t, m.Ranks[2].HBM, payload(2, 0, 4096))
	var sends []*Message
	m.Sim.Spawn("rank1", func(p *sim.Proc) {
		// Rank 1 sends out of its cube's SRAM, rank 2 out of its HBM.
		if err := g.Send(p, lookup(t, g, 1, "E", true), sram0, MsgMeta{}); err != nil {
			t.Error(err)
		}
	})
	m.Sim.Spawn("rank2", func(p *sim.Proc) {
		if err := g.Send(p, lookup(t, g, 2, "E", true), hbm2, MsgMeta{}); err != nil {
			t.Error(err)
		}
		// Both DMAs are in flight now (4 KiB take longer than the
		// overhead): ask who reads what.
		for _, reg := range []Region{sram0.Sub(100, 8), sram1.Sub(100, 8), hbm2.Sub(0, 1), Region{Mem: m.Ranks[3].HBM, Off: 0, N: 64}} {
			sends = append(sends, g.InFlightReading(reg))
		}
	})
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range sends {
		if s == nil {
			got = append(got, "none")
		} else {
			got = append(got, fmt.Sprintf("rank %d %s", s.Q.Rank, s.Q.Dir))
		}
	}
	want := []string{"rank 1 E", "none", "rank 2 E", "none"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sends reading each region while in flight (-want +got):\n%s", diff)
	}
}

// Rule (SendBufferHazard, docs/architecture.md, Invariants and failures), the
// bookkeeping behind the fast path: a memory's count of sends that still read
// it equals the sends in flight or held (HoldSends) with their source there,
// and its bounds of their sources cover each, after every delivery, receive
// and flush, so the hazard checks may skip a memory whose count is 0 or a
// range outside the bounds. Ranks send from HBM and from the shared SRAM,
// receivers take the messages late, and a flush ends the held ones.
func TestIPCQ_SendsReadingCountMatchesTheLists(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			cfg := ipcqTestCfg(HBM, Sleep, 2, 4096)
			m, g := installIPCQ(t, testParams(), ringLinks(4), cfg)
			g.HoldSends = hold
			var mems []*Memory
			for _, pe := range m.Ranks {
				mems = append(mems, pe.TCM, pe.HBM, pe.SRAM)
			}
			check := func(when string) {
				t.Helper()
				want := map[*Memory]int{}
				covered := func(msg *Message) {
					// The bounds the checks skip by cover every source.
					if mem := msg.Src.Mem; msg.Src.Off < mem.readLo || msg.Src.Off+msg.Src.N > mem.readHi || !mem.sendsMayRead(msg.Src) {
						t.Fatalf("%s: %v bounds its reading sends' sources by [%d, %d), a send reads %v", when, mem, mem.readLo, mem.readHi, msg.Src)
					}
				}
				for _, ep := range g.EPs {
					for _, q := range ep.QPs {
						for _, msg := range q.liveInflight() {
							want[msg.Src.Mem]++
							covered(msg)
						}
						for _, msg := range q.held {
							want[msg.Src.Mem]++
							covered(msg)
						}
					}
				}
				for _, mem := range mems {
					if mem.sendsReading != want[mem] {
						t.Fatalf("%s: %v counts %d sends reading it, the lists hold %d", when, mem, mem.sendsReading, want[mem])
					}
				}
			}
			g.OnDeliver = func(*QueuePair, *Message) { check("after a delivery") }
			sawReading := false
			for r := range 4 {
				src := []Region{
					srcBuf(t, m.Ranks[r].HBM, payload(r, 0, 4096)),
					srcBuf(t, m.Ranks[r].SRAM, payload(r, 1, 2048)),
				}
				m.Sim.Spawn(fmt.Sprint("send", r), func(p *sim.Proc) {
					q := lookup(t, g, r, "E", true)
					for i := range 5 {
						if err := g.Send(p, q, src[i%2], MsgMeta{}); err != nil {
							t.Error(err)
							return
						}
						check("after a send")
						sawReading = sawReading || src[i%2].Mem.sendsReading > 0
					}
					if err := g.Flush(p, q.ep, nil); err != nil {
						t.Error(err)
					}
					check("after a flush")
				})
				m.Sim.Spawn(fmt.Sprint("recv", r), func(p *sim.Proc) {
					q := lookup(t, g, r, "W", false)
					for range 5 {
						if err := p.Sleep(300 * sim.Nanosecond); err != nil {
							return
						}
						if err := g.WaitRecv(p, q); err != nil {
							t.Error(err)
							return
						}
						g.Take(q, true)
						check("after a receive")
					}
				})
			}
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			check("at the end")
			if !sawReading {
				t.Fatal("no send was ever counted as reading its memory: the test checks nothing")
			}
			for _, mem := range mems {
				if mem.sendsReading != 0 {
					t.Errorf("%v: %d sends still counted after every flush", mem, mem.sendsReading)
				}
			}
		})
	}
}

// Rule (docs/architecture.md, IPCQ, recv; I6): a receiver sees messages in
// the order they were sent. A message from a source with a short path may
// land before an earlier one from a slower source; it is published (its
// peer_head_cache raised) only with the messages before it.
func TestIPCQ_Delivery_PublishedInSenderOrder(t *testing.T) {
	p := testParams()
	p.Placement = []int{0, 1}
	m, g := installIPCQ(t, p, pairLinks(), ipcqTestCfg(TCM, Sleep, 4, 256))
	q := lookup(t, g, 0, "E", true)
	rq := lookup(t, g, 1, "W", false)
	slow := srcBuf(t, memOf(m.Ranks[0], HBM), payload(0, 0, 256))
	fast := srcBuf(t, memOf(m.Ranks[0], TCM), payload(0, 1, 4))
	type delivery struct{ Seq, PeerHead uint64 }
	var got []delivery
	g.OnDeliver = func(_ *QueuePair, msg *Message) {
		got = append(got, delivery{msg.Meta.Seq, rq.PeerHeadCache})
	}
	m.Sim.Spawn("send", func(p *sim.Proc) {
		for _, src := range []Region{slow, fast} {
			if err := g.Send(p, q, src, MsgMeta{}); err != nil {
				t.Error(err)
			}
		}
	})
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != 1 {
		t.Fatalf("deliveries %v: the scenario needs message 1 to land first", got)
	}
	want := []delivery{{1, 0}, {0, 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("peer_head_cache at each delivery (-want +got):\n%s", diff)
	}
}

// Rule (docs/architecture.md, Invariants and failures, deadlock report): a
// blocked wait describes itself with its rank, direction, peer, the pointers
// that explain it and the ring's depth; a send of a whole buffer says how
// large the buffer is, a recv(any) gives every direction's receive pointers.
func TestWaitInfo_StringNamesPointersAndRing(t *testing.T) {
	_, g := installIPCQ(t, testParams(), ringLinks(3), ipcqTestCfg(HBM, Sleep, 4, 64))
	e := g.EPs[1].QP("E")
	w := g.EPs[1].QP("W")
	e.MyHead, e.PeerTailCache = 9, 5
	w.MyTail, w.PeerHeadCache = 3, 3
	for _, tc := range []struct {
		name    string
		sending int64
		wait    *WaitInfo
		want    string
	}{
		{"send, one message", 0, &e.SendWait, "rank 1 send E -> rank 2: my_head=9 peer_tail_cache=5 n_slots=4 (ring full)"},
		{"send of a buffer", 1 << 20, &e.SendWait, "rank 1 send E -> rank 2: my_head=9 peer_tail_cache=5 n_slots=4 (ring full, a 1048576-byte send)"},
		{"recv", 0, &w.RecvWait, "rank 1 recv W <- rank 0: my_tail=3 peer_head_cache=3 n_slots=4 (no data)"},
		{"recv(any)", 0, &g.EPs[1].AnyWait, "rank 1 recv(any): E <- rank 2 my_tail=0 peer_head_cache=0, W <- rank 0 my_tail=3 peer_head_cache=3; n_slots=4 (no data)"},
		{"flush", 0, &e.FlushWait, "rank 1 flush E: 0 send(s) in flight"},
	} {
		e.Sending = tc.sending
		if diff := cmp.Diff(tc.want, tc.wait.String()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// An UnreceivedError is one line however many queue pairs hold messages:
// the queue pair itself when there is one, otherwise how many messages on
// how many (a 4096-rank ring whose every rank leaves a message wrote a
// clause per queue pair; starlark/failure lists them grouped).
func TestUnreceivedErrorOneLine(t *testing.T) {
	pair := func(r int) Unreceived {
		return Unreceived{Sender: r, SendDir: "E", Receiver: r + 1, RecvDir: "W", Count: 2, FirstSeq: 3, FirstSentAt: "f.star:4:12"}
	}
	for _, c := range []struct {
		name  string
		sends []Unreceived
		want  string
	}{
		{"one queue pair", []Unreceived{pair(0)},
			"messages sent and never received (invariant I1): rank 0 sent 2 message(s) on E that rank 1 never received on W (the first, #3, sent at f.star:4:12): a receive is missing, or a send is one too many"},
		{"no position", []Unreceived{{Sender: 1, SendDir: "E", Receiver: 2, RecvDir: "W", Count: 1}},
			"messages sent and never received (invariant I1): rank 1 sent 1 message(s) on E that rank 2 never received on W: a receive is missing, or a send is one too many"},
		{"several", []Unreceived{pair(0), pair(1), pair(2)},
			"messages sent and never received (invariant I1): 6 message(s) on 3 queue pair(s): a receive is missing, or a send is one too many"},
	} {
		e := &UnreceivedError{Sends: c.sends}
		if diff := cmp.Diff(c.want, e.Error()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

// Rule (engine/sim, partition.go: IPCQ): with SplitAtSIP a credit that
// crosses SIPs is a message carrying its value (the sender's side never
// reads the receiver's queue pair), due when the credit was due. On a
// ring over two SIPs whose transfers meet no contention on the far side,
// the split run is the whole-path run: every receive, wait and finish.
func TestIPCQ_SplitAtSIP_CreditsCrossAsMessages(t *testing.T) {
	for _, mode := range []Backpressure{Sleep, Poll} {
		var runs [2]ringRun
		for i, split := range []bool{false, true} {
			p := testParams()
			p.Placement = []int{0, 9, 2} // rank 1 on SIP 1: two of three links cross
			p.SplitAtSIP = split
			runs[i] = runRing3On(t, mode, p)
		}
		if diff := cmp.Diff(runs[0], runs[1]); diff != "" {
			t.Errorf("%v mode: split run differs from the whole-path run (-whole +split):\n%s", mode, diff)
		}
	}
}
