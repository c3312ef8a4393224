package machine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
)

// storedRing runs a 3-rank ring in which every sender stores each message
// into a staging slot (the store starts a varying time later, as a tile's
// math would) and sends the slot once the store is done, either with
// SendStored or, as reference, with the store's Wait then Send. The
// receivers are slow (small rings: senders wait for credits). It returns
// a transcript of everything observable: each send's and receive's times,
// the processes' time per activity, and the count of events simulated;
// and the senders' time per activity.
func storedRing(t *testing.T, mode Backpressure, overhead sim.Time, jitter uint64, stored bool) ([]string, [][sim.MaxActivities]sim.Time) {
	t.Helper()
	const world, count = 3, 24
	m, g := installStoredRing(t, world, mode, overhead, jitter)
	var out []string
	var procs []*sim.Proc
	for r := 0; r < world; r++ {
		pe, off, sq, rq := storedRank(t, m, g, r)
		var err error
		var ss StoredSend
		ss.Stored = func() { out = append(out, fmt.Sprintf("%v rank%d stored", m.Sim.Now(), r)) }
		procs = append(procs, m.Sim.Spawn(fmt.Sprintf("rank%d.send", r), func(p *sim.Proc) {
			for i := 0; i < count; i++ {
				slot := Region{Mem: pe.TCM, Off: off + int64(i%4)*128, N: 32 + int64(i%3)*32}
				start := p.Sim().Now()
				op := m.StoreAt(pe, slot, payload(r, i, int(slot.N)), start+sim.Time(i%5)*7*ipcqNS)
				meta := MsgMeta{Count: int64(i)}
				if stored {
					ss.Store, ss.Q, ss.Src, ss.Meta = op, sq, slot, meta
					err = g.SendStored(p, &ss)
				} else {
					if err = op.Wait(p); err == nil {
						ss.Stored()
						err = g.Send(p, sq, slot, meta)
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				out = append(out, fmt.Sprintf("%v rank%d sent #%d (from %v)", p.Sim().Now(), r, i, start))
				if err := p.Sleep(sim.Time(i%4) * 3 * ipcqNS); err != nil {
					return
				}
			}
		}))
		procs = append(procs, m.Sim.Spawn(fmt.Sprintf("rank%d.recv", r), func(p *sim.Proc) {
			for i := 0; i < count; i++ {
				if err := p.Sleep(60 * ipcqNS); err != nil {
					return
				}
				if err := g.WaitRecv(p, rq); err != nil {
					t.Error(err)
					return
				}
				rcv := g.Take(rq, true)
				out = append(out, fmt.Sprintf("%v rank%d received #%d %q", p.Sim().Now(), r, rcv.Meta.Count, rcv.Slot.Bytes()))
			}
		}))
	}
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	var senders [][sim.MaxActivities]sim.Time
	for i, p := range procs {
		out = append(out, fmt.Sprintf("%s spent %v", p.Name, p.Spent))
		if i%2 == 0 {
			senders = append(senders, p.Spent)
		}
	}
	return append(out, fmt.Sprintf("%d events", m.Sim.Events())), senders
}

// Rule (model.md §1): events fire in (time, sequence) order, and
// --jitter-seed permutes only process wake-ups. SendStored continues its waits on the event loop instead of resuming
// the process for each; the run must be the one that waiting for the
// store and then calling Send gives, event for event: the same times, the
// same order (also under jitter, which permutes a step like the process
// wake-up it stands for), the same time per activity, the same count of
// events. A tiny overhead makes the send's overhead pass in place (no
// event) after some of the waits.
func TestSendStored_SameRunAsWaitThenSend(t *testing.T) {
	for _, mode := range []Backpressure{Sleep, Poll} {
		for _, overhead := range []sim.Time{5 * ipcqNS, sim.Picosecond} {
			for _, jitter := range []uint64{0, 1, 7, 99} {
				want, _ := storedRing(t, mode, overhead, jitter, false)
				got, _ := storedRing(t, mode, overhead, jitter, true)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("backpressure %v, overhead %v, jitter %d: SendStored's run differs from Wait then Send (-want +got):\n%s", mode, overhead, jitter, diff)
				}
			}
		}
	}
}

// Rule (model.md §4, send steps 1 and 2): a send without a credit waits
// for one (my_head − peer_tail_cache = n_slots) and returns after
// ipcq_overhead_ns. The scenario waits for both stores and credits, so
// that the steps of both waits are what TestSendStored_SameRunAsWaitThenSend
// compares.
func TestSendStored_RingWaitsForStoresAndCredits(t *testing.T) {
	_, senders := storedRing(t, Sleep, 5*ipcqNS, 0, true)
	for r, spent := range senders {
		if spent[ActMemory] == 0 {
			t.Errorf("rank %d's sender never waited for a store (spent %v)", r, spent)
		}
		if overheads := 24 * 5 * ipcqNS; spent[ActSend] <= overheads {
			t.Errorf("rank %d's sender never waited for a credit: %v sending, the overheads alone are %v", r, spent[ActSend], overheads)
		}
	}
}

// Rule (model.md §8): a process blocked in SendStored names what it waits
// for in deadlock reports, like Send: here the credit of a full ring.
func TestSendStored_DeadlockNamesTheCreditWait(t *testing.T) {
	cfg := ipcqTestCfg(TCM, Sleep, 2, 64)
	m, g := installIPCQ(t, testParams(), ringLinks(2), cfg)
	pe := m.Ranks[0]
	off, err := pe.TCM.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	slot := Region{Mem: pe.TCM, Off: off, N: 64}
	m.Sim.Spawn("rank0", func(p *sim.Proc) {
		q := lookup(t, g, 0, "E", true)
		for i := 0; i < 3; i++ {
			ss := StoredSend{Store: m.StoreAt(pe, slot, payload(0, i, 64), p.Sim().Now()+10*ipcqNS), Q: q, Src: slot, Stored: func() {}}
			if err := g.SendStored(p, &ss); err != nil {
				return
			}
		}
	})
	err = m.Sim.Run()
	var se *sim.StallError
	if !errors.As(err, &se) {
		t.Fatalf("Run() = %v, want *sim.StallError", err)
	}
	var got []string
	for _, p := range se.Blocked {
		got = append(got, fmt.Sprintf("%s: %v", p.Name, p.Wait))
	}
	want := []string{"rank0: rank 0 send E -> rank 1: my_head=2 peer_tail_cache=0 (ring full)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blocked waits (-want +got):\n%s", diff)
	}
}

// installStoredRing installs the IPCQ ring of the stored-send tests:
// small rings (senders wait for credits) and the given backpressure,
// overhead and jitter.
func installStoredRing(t *testing.T, world int, mode Backpressure, overhead sim.Time, jitter uint64) (*Machine, *Group) {
	t.Helper()
	cfg := ipcqTestCfg(TCM, mode, 2, 128)
	cfg.PollInterval = 40 * ipcqNS
	cfg.Overhead = overhead
	m, g := installIPCQ(t, testParams(), ringLinks(world), cfg)
	m.Sim.SetJitter(jitter)
	return m, g
}

// storedRank is rank r's side of a stored-send ring: its PE, four
// 128-byte staging slots in its TCM, its sending and receiving queue pairs.
func storedRank(t *testing.T, m *Machine, g *Group, r int) (pe *PE, off int64, sq, rq *QueuePair) {
	t.Helper()
	pe = m.Ranks[r]
	off, err := pe.TCM.Alloc(4 * 128)
	if err != nil {
		t.Fatal(err)
	}
	return pe, off, lookup(t, g, r, "E", true), lookup(t, g, r, "W", false)
}

// storedRingThen is storedRing with one process per rank that sends each
// message and then receives one (a fused primitive's pipeline): with
// SendStored and Then, or as reference with the store's Wait, Send and
// WaitRecv.
func storedRingThen(t *testing.T, mode Backpressure, overhead sim.Time, jitter uint64, stored bool) []string {
	t.Helper()
	const world, count = 3, 24
	m, g := installStoredRing(t, world, mode, overhead, jitter)
	var out []string
	var procs []*sim.Proc
	for r := 0; r < world; r++ {
		pe, off, sq, rq := storedRank(t, m, g, r)
		var err error
		var ss StoredSend
		ss.Stored = func() {}
		procs = append(procs, m.Sim.Spawn(fmt.Sprintf("rank%d", r), func(p *sim.Proc) {
			for i := 0; i < count; i++ {
				slot := Region{Mem: pe.TCM, Off: off + int64(i%4)*128, N: 32 + int64(i%3)*32}
				start := p.Sim().Now()
				op := m.StoreAt(pe, slot, payload(r, i, int(slot.N)), start+sim.Time((i+r)%5)*9*ipcqNS)
				if stored {
					ss.Store, ss.Q, ss.Src, ss.Then = op, sq, slot, rq
					err = g.SendStored(p, &ss)
				} else if err = op.Wait(p); err == nil {
					err = g.Send(p, sq, slot, MsgMeta{})
				}
				if err == nil {
					err = g.WaitRecv(p, rq)
				}
				if err != nil {
					t.Error(err)
					return
				}
				rcv := g.Take(rq, true)
				out = append(out, fmt.Sprintf("%v rank%d sent #%d (from %v), received %q", p.Sim().Now(), r, i, start, rcv.Slot.Bytes()))
				if err := p.Sleep(sim.Time((i*r)%4) * 11 * ipcqNS); err != nil {
					return
				}
			}
		}))
	}
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		out = append(out, fmt.Sprintf("%s spent %v", p.Name, p.Spent))
	}
	return append(out, fmt.Sprintf("%d events", m.Sim.Events()))
}

// SendStored's wait for the next message (Then) gives the run of Send
// then WaitRecv, event for event. (With the long overhead the message is
// often there when it has passed.)
func TestSendStored_ThenRecvSameRunAsSendThenWaitRecv(t *testing.T) {
	for _, mode := range []Backpressure{Sleep, Poll} {
		for _, overhead := range []sim.Time{5 * ipcqNS, sim.Picosecond, 40 * ipcqNS} {
			for _, jitter := range []uint64{0, 1, 7, 99} {
				want := storedRingThen(t, mode, overhead, jitter, false)
				got := storedRingThen(t, mode, overhead, jitter, true)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("backpressure %v, overhead %v, jitter %d: SendStored with Then differs from Send then WaitRecv (-want +got):\n%s", mode, overhead, jitter, diff)
				}
			}
		}
	}
}
