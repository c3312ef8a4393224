package machine

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	m, g := installStoredRing(t, world, 2, mode, overhead, jitter)
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

// Rule (docs/architecture.md, engine/sim): events fire in (time, sequence)
// order, and --jitter-seed permutes only process wake-ups. SendStored
// continues its waits on the event loop instead of resuming the process
// for each; the run must be the one that waiting for the store and then
// calling Send gives, event for event: the same times, the same order
// (also under jitter, which permutes a step like the process wake-up it
// stands for), the same time per activity, the same count of events. A
// tiny overhead makes the send's overhead pass in place (no event) after
// some of the waits. Both sides wait through the one StepWait, so the run
// is also checked against the one recorded while the blocking waits were
// written out apart from the steps (checkRecorded).
func TestSendStored_SameRunAsWaitThenSend(t *testing.T) {
	for _, mode := range []Backpressure{Sleep, Poll} {
		for _, overhead := range []sim.Time{5 * ipcqNS, sim.Picosecond} {
			for _, jitter := range []uint64{0, 1, 7, 99} {
				want, _ := storedRing(t, mode, overhead, jitter, false)
				got, _ := storedRing(t, mode, overhead, jitter, true)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("backpressure %v, overhead %v, jitter %d: SendStored's run differs from Wait then Send (-want +got):\n%s", mode, overhead, jitter, diff)
				}
				checkRecorded(t, fmt.Sprintf("stored_%s_%v", modeName(mode), overhead), jitter, want)
			}
		}
	}
}

// Rule (docs/architecture.md, IPCQ, send): a send without a credit waits
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

// Rule (docs/architecture.md, Invariants and failures): a process blocked in
// SendStored names what it waits for in deadlock reports, like Send: here the
// credit of a full ring.
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
	want := []string{"rank0: rank 0 send E -> rank 1: my_head=2 peer_tail_cache=0 n_slots=2 (ring full)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blocked waits (-want +got):\n%s", diff)
	}
}

// installStoredRing installs the IPCQ ring of the stored-send tests:
// small rings (senders wait for credits) of nSlots and the given
// backpressure, overhead and jitter.
func installStoredRing(t *testing.T, world, nSlots int, mode Backpressure, overhead sim.Time, jitter uint64) (*Machine, *Group) {
	t.Helper()
	cfg := ipcqTestCfg(TCM, mode, nSlots, 128)
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

// pipeChain is one call of a fused primitive's pipeline reduced to its
// waits: for each of n messages, it stores a staging slot and sends it
// once stored (StartStored, Advance), waits for the next message
// (StepWait.Recv), takes it and waits for the load of its slot
// (StepWait.Load). It begins in the process and goes on in steps (the
// later sends start in a step), and the process resumes once per call.
type pipeChain struct {
	m       *Machine
	g       *Group
	pe      *PE
	off     int64
	sq, rq  *QueuePair
	r, i, n int // rank; message i of the call's n
	at      int
	ss      StoredSend
	w       StepWait
	load    *MemOp
	out     *[]string
}

// What a pipeChain does next (the wait it is in, when parked).
const (
	chainSend = iota
	chainSent
	chainArrived
	chainLoaded
)

// advance runs the chain until it waits (true) or the call is over.
func (pc *pipeChain) advance(p *sim.Proc) (waiting bool) {
	for {
		switch pc.at {
		case chainSend:
			if pc.i == pc.n {
				return false
			}
			pc.ss.Store, pc.ss.Src = pc.store(p.Sim().Now())
			pc.at = chainSent
			if !pc.g.StartStored(p, &pc.ss) {
				return true
			}
		case chainSent:
			pc.at = chainArrived
			if !pc.w.Recv(p, pc.rq) {
				return true
			}
		case chainArrived:
			rcv := pc.g.Take(pc.rq, true)
			pc.load = pc.m.Fetch(pc.pe, rcv.Slot)
			pc.at = chainLoaded
			if !pc.w.Load(p, pc.load) {
				return true
			}
		case chainLoaded:
			pc.loaded(p.Sim().Now())
			pc.at = chainSend
		}
	}
}

func (pc *pipeChain) Step(p *sim.Proc) {
	var over bool
	if pc.at == chainSent {
		over = pc.ss.Advance(p)
	} else {
		over = pc.w.Woken(p)
	}
	if over && !pc.advance(p) {
		p.ResumeNow()
	}
}

// store issues the store of message i into its staging slot, starting a
// varying time after now (as a tile's math would).
func (pc *pipeChain) store(now sim.Time) (*MemOp, Region) {
	i := pc.i
	slot := Region{Mem: pc.pe.TCM, Off: pc.off + int64(i%4)*128, N: 32 + int64(i%3)*32}
	return pc.m.StoreAt(pc.pe, slot, payload(pc.r, i, int(slot.N)), now+sim.Time((i+pc.r)%5)*9*ipcqNS), slot
}

// loaded logs message i's load and goes on to the next.
func (pc *pipeChain) loaded(now sim.Time) {
	*pc.out = append(*pc.out, fmt.Sprintf("%v rank%d sent #%d, loaded %q", now, pc.r, pc.i, pc.load.Data))
	pc.i++
}

// storedRingPipe runs a 3-rank ring whose processes make calls of a few
// messages each (pipeChain), with sleeps between the calls: as steps, or
// as reference with the blocking calls (the store's Wait, Send, WaitRecv,
// the load's Wait). It returns everything observable, as storedRing.
func storedRingPipe(t *testing.T, mode Backpressure, overhead sim.Time, jitter uint64, steps bool) []string {
	t.Helper()
	const world, calls = 3, 8
	// One slot per ring: a rank that sends before it receives runs out
	// of credits when its receiver pauses.
	m, g := installStoredRing(t, world, 1, mode, overhead, jitter)
	var out []string
	var procs []*sim.Proc
	for r := 0; r < world; r++ {
		pe, off, sq, rq := storedRank(t, m, g, r)
		pc := &pipeChain{m: m, g: g, pe: pe, off: off, sq: sq, rq: rq, r: r, out: &out}
		pc.ss.Q, pc.ss.Stored = sq, func() {}
		procs = append(procs, m.Sim.Spawn(fmt.Sprintf("rank%d", r), func(p *sim.Proc) {
			for c := 0; c < calls; c++ {
				pc.i, pc.n, pc.at = 0, 1+(c+r)%4, chainSend
				if steps {
					for pc.advance(p) {
						if err := p.AwaitStep(pc); err != nil {
							t.Error(err)
							return
						}
					}
				} else {
					for ; pc.i < pc.n; pc.loaded(p.Sim().Now()) {
						op, slot := pc.store(p.Sim().Now())
						err := op.Wait(p)
						if err == nil {
							err = g.Send(p, sq, slot, MsgMeta{})
						}
						if err == nil {
							err = g.WaitRecv(p, rq)
						}
						if err == nil {
							pc.load = m.Fetch(pe, g.Take(rq, true).Slot)
							err = pc.load.Wait(p)
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				}
				out = append(out, fmt.Sprintf("%v rank%d call %d done", p.Sim().Now(), r, c))
				// (Rank 2's long pauses keep rank 1's sends waiting for
				// credits.)
				if err := p.Sleep(sim.Time((c*r)%4)*11*ipcqNS + sim.Time(r/2*(c%2))*150*ipcqNS); err != nil {
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
	if overheads := 20 * overhead; procs[1].Spent[ActSend] <= overheads || procs[0].Spent[ActRecv] == 0 {
		t.Errorf("rank 1 never waited for a credit (%v sending, the overheads alone are %v) or rank 0 for a message (%v)", procs[1].Spent[ActSend], overheads, procs[0].Spent[ActRecv])
	}
	return append(out, fmt.Sprintf("%d events", m.Sim.Events()))
}

// Rule (docs/architecture.md, engine/sim: event order and jitter; IPCQ
// credits): a pipeline of steps that sends stored slots, waits for messages
// and for loads (StartStored, StoredSend.Advance, StepWait) gives the run of
// the blocking calls, event for event: the same times, order, time per
// activity and count of events, under jitter too, in both backpressure modes
// (Poll: the waits for messages and credits sleep a poll interval at a time,
// in place or not). (With the long overhead the next message is often there
// when it has passed; with the tiny one the overhead passes in place.) The
// blocking calls drive the same StepWait to its end, so the run is also
// checked against the one recorded while they were written out apart from
// the steps (checkRecorded).
func TestStepWait_PipelineSameRunAsBlockingCalls(t *testing.T) {
	for _, mode := range []Backpressure{Sleep, Poll} {
		for _, overhead := range []sim.Time{5 * ipcqNS, sim.Picosecond, 40 * ipcqNS} {
			for _, jitter := range []uint64{0, 1, 7, 99} {
				want := storedRingPipe(t, mode, overhead, jitter, false)
				got := storedRingPipe(t, mode, overhead, jitter, true)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("backpressure %v, overhead %v, jitter %d: the steps' run differs from the blocking calls' (-want +got):\n%s", mode, overhead, jitter, diff)
				}
				checkRecorded(t, fmt.Sprintf("pipe_%s_%v", modeName(mode), overhead), jitter, want)
			}
		}
	}
}

var update = flag.Bool("update", false, "rewrite the recorded runs under testdata/waits")

// checkRecorded compares the transcript of a run of the waits' tests
// (name, jitter) with the one recorded in testdata/waits: the whole
// transcript without jitter (name.txt, readable), its SHA-256 digest with
// (digests.txt). The runs were recorded while every IPCQ and memory wait
// still had a blocking and a step form written out separately, which the
// tests compared; now that the blocking form is the step form driven to
// completion, comparing the forms no longer catches a change of the one
// implementation, and the recorded runs do: a wait keeps its times,
// order, time per activity and count of events.
func checkRecorded(t *testing.T, name string, jitter uint64, got []string) {
	t.Helper()
	name = strings.ReplaceAll(name, " ", "")
	text := strings.Join(got, "\n") + "\n"
	key := fmt.Sprintf("%s jitter %d", name, jitter)
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(text)))
	dir := filepath.Join("testdata", "waits")
	full := filepath.Join(dir, name+".txt")
	if *update {
		recordMu.Lock()
		defer recordMu.Unlock()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if jitter == 0 {
			if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		digests := readDigests(t, true)
		digests[key] = sum
		var lines []string
		for k, v := range digests {
			lines = append(lines, k+": "+v)
		}
		slices.Sort(lines)
		if err := os.WriteFile(filepath.Join(dir, "digests.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if jitter == 0 {
		want, err := os.ReadFile(full)
		if err != nil {
			t.Fatalf("%v (record it with go test -run %s -update)", err, t.Name())
		}
		if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(text, "\n")); diff != "" {
			t.Errorf("%s: the run differs from the recorded one (-recorded +now):\n%s", full, diff)
		}
	}
	if want := readDigests(t, false)[key]; want != sum {
		t.Errorf("%s: the run's digest is %s, recorded %q (the run without jitter, %s, shows the changes that jitter does not move)", key, sum, want, full)
	}
}

var recordMu sync.Mutex

// readDigests reads testdata/waits/digests.txt ("name jitter N: sum"
// lines); a missing file is empty when it is about to be written.
func readDigests(t *testing.T, writing bool) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "waits", "digests.txt"))
	if err != nil && !(writing && errors.Is(err, os.ErrNotExist)) {
		t.Fatalf("%v (record it with go test -run %s -update)", err, t.Name())
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			out[k] = v
		}
	}
	return out
}

func modeName(m Backpressure) string {
	if m == Poll {
		return "poll"
	}
	return "sleep"
}

// Rule (docs/architecture.md, engine/sim: processes; where time goes): a
// blocking wait that the end of the run interrupts returns sim.ErrKilled
// and leaves the process as the wait found it: no wait described, the
// caller's activity back. (A blocking wait is a StepWait driven to its end
// from the process; when the run ends first, the undoing is block's own.)
func TestBlockingWait_KilledLeavesNoWait(t *testing.T) {
	for _, mode := range []Backpressure{Sleep, Poll} {
		for _, wait := range []string{"recv", "credit"} {
			cfg := ipcqTestCfg(TCM, mode, 1, 64)
			cfg.PollInterval = 10 * ipcqNS
			m, g := installIPCQ(t, testParams(), ringLinks(2), cfg)
			m.Sim.MaxTime = 10 * sim.Microsecond // (polling never stalls: the watchdog ends the run)
			var err error
			proc := m.Sim.Spawn("rank0", func(p *sim.Proc) {
				p.Doing(ActFlush) // the caller's activity
				switch wait {
				case "recv":
					err = g.WaitRecv(p, lookup(t, g, 0, "W", false))
				case "credit":
					q := lookup(t, g, 0, "E", true)
					src := srcBuf(t, m.Ranks[0].TCM, payload(0, 0, 64))
					if err = g.Send(p, q, src, MsgMeta{}); err == nil {
						err = g.Send(p, q, src, MsgMeta{}) // the ring's one slot is taken
					}
				}
			})
			if runErr := m.Sim.Run(); runErr == nil {
				t.Fatalf("%s, %s: the run ended without an error, want a stall or the watchdog", modeName(mode), wait)
			}
			if proc.Wait == nil {
				t.Errorf("%s, %s: the blocked process describes no wait before the run is closed", modeName(mode), wait)
			}
			closeSim(m.Sim)
			if !errors.Is(err, sim.ErrKilled) || proc.Wait != nil || proc.Activity != ActFlush {
				t.Errorf("%s, %s: after Close the wait returned %v (want sim.ErrKilled), Wait %v (want none), activity %d (want %d)",
					modeName(mode), wait, err, proc.Wait, proc.Activity, ActFlush)
			}
		}
	}
}
