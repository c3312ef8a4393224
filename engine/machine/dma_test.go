package machine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
	"kernbench/engine/trace"
)

// arrivalRun is one run of the engine over the queues q of PE 0: each
// transfer is submitted at its time, by an event scheduled before the run
// (so before the engine's events of that instant) or, where late says so,
// by an event that instant adds at its end (after them). It returns each
// transfer's injection end and, with a trace, the engine's vc slices. The
// run has a machine of its own (paths book their resources): a transfer
// goes from PE 0's TCM to PE 1's when it injects, else from PE 0's HBM
// to PE 0.
func arrivalRun(t *testing.T, p Params, q [2][]refTransfer, late [2][]bool, traced bool) (ends [2][]sim.Time, slices []trace.Event) {
	t.Helper()
	m := newTestMachine(t, p)
	if traced {
		m.Trace, m.endHook = trace.New(), true
	}
	pe := m.PE(0)
	send, local := m.MemToMem(pe.TCM, m.PE(1).TCM), m.MemToPE(pe.HBM, pe)
	var recs [2][]*doneRecorder
	for v := VC(0); v < 2; v++ {
		for i, tr := range q[v] {
			d := &doneRecorder{sim: m.Sim}
			recs[v] = append(recs[v], d)
			path := local
			if tr.injects {
				path = send
			}
			x := &Transfer{Path: path, N: tr.n, VC: v, Owner: d, Label: fmt.Sprintf("%d/%d", v, i)}
			submit := sim.HandlerFunc(func() { m.Submit(pe, x, false) })
			if late[v][i] {
				m.Sim.At(tr.at, sim.HandlerFunc(func() { m.Sim.At(m.Sim.Now(), submit) }))
			} else {
				m.Sim.At(tr.at, submit)
			}
		}
	}
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	for v := range 2 {
		for i, d := range recs[v] {
			if !d.done {
				t.Fatalf("transfer %d of channel %d never completed", i, v)
			}
			ends[v] = append(ends[v], d.at-q[v][i].path.Latency())
		}
	}
	if traced {
		for _, e := range m.Trace.Events() {
			if e.Ph == "X" && (e.Cat == "vc_compute" || e.Cat == "vc_comm") {
				slices = append(slices, e)
			}
		}
	}
	return ends, slices
}

// Rule (docs/architecture.md, engine/machine: chunk-by-chunk contention, PE
// DMA): transfers submitted at the very instant a channel's head ends its
// injection, before the engine's event of that instant fires, are served
// exactly as the chunk-by-chunk reference serves them: the engine's event
// remembers which head ends (nextVC), and a submit that changes the heads
// before it fires (a second user of the link, a local transfer ending at the
// same time, a transfer queued behind the head that ends) must leave that
// answer right. (Submitted after the event, in the same instant:
// TestVCSubmitAfterAnInjectionEndMatchesChunkReference.)
func TestVCSubmitAtAnInjectionEndMatchesChunkReference(t *testing.T) {
	checkSubmitsAtInjectionEnds(t, submitCases{seed: 4, cases: 300, rounds: 5, localOdds: 3})
}

// With a trace, every transfer's injection is one slice on its own
// channel's track, from its start to its injection end: the engine's
// event draws the head that ends on the channel it remembers, and the
// times are those of the run without a trace.
func TestVCSlicesAreEachTransfersInjection(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for c := range 50 {
		p := testParams()
		p.VCWeightCompute, p.VCWeightComm = 1+rng.Int64N(3), 1+rng.Int64N(3)
		p.VCChunkSize = []int64{64, 256, 1000}[rng.IntN(3)]
		m := newTestMachine(t, p)
		pe := m.PE(0)
		send, local := m.MemToMem(pe.TCM, m.PE(1).TCM), m.MemToPE(pe.HBM, pe)
		var q [2][]refTransfer
		var late [2][]bool
		for v := range 2 {
			var at sim.Time
			for range 1 + rng.IntN(4) {
				at += sim.Time(rng.Int64N(int64(50 * sim.Nanosecond)))
				tr := refTransfer{at: at, n: 1 + rng.Int64N(6000), path: send, injects: true}
				if rng.IntN(3) == 0 {
					tr.path, tr.injects = local, false
				}
				q[v] = append(q[v], tr)
				late[v] = append(late[v], rng.IntN(2) == 0)
			}
		}
		plain, _ := arrivalRun(t, p, q, late, false)
		ends, slices := arrivalRun(t, p, q, late, true)
		if diff := cmp.Diff(plain, ends); diff != "" {
			t.Fatalf("case %d: injection ends with a trace differ (-without +with):\n%s", c, diff)
		}
		want := map[string]string{}
		for v := range 2 {
			track := []string{"vc_compute", "vc_comm"}[v]
			for i := range q[v] {
				want[fmt.Sprintf("%d/%d", v, i)] = fmt.Sprintf("%s end %v", track, ends[v][i])
			}
		}
		got := map[string]string{}
		for _, e := range slices {
			if _, twice := got[e.Name]; twice {
				t.Errorf("case %d: transfer %s has two slices", c, e.Name)
			}
			end := sim.Time(math.Round((e.Ts + *e.Dur) * 1e6))
			got[e.Name] = fmt.Sprintf("%s end %v", e.Cat, end)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("case %d: vc slices (-transfers +trace):\n%s", c, diff)
		}
	}
}

// Rule (docs/architecture.md, engine/machine: "every transfer's completion
// time is within one chunk's service time of the chunk-level model", tested
// against a chunk-by-chunk reference). Transfers submitted at the very
// instant a channel's head ends its injection, some before the engine's event
// of that instant fires and some after it (from an event that instant adds at
// its end): the order of events within an instant is no part of the model, so
// both are served as the chunk-by-chunk reference serves them. After the
// event, a channel whose last transfer ended has left the link to the other
// for no time at all; the reference goes on with the round there, and so must
// the engine (it used to start a new round with vc_compute, up to two chunks
// and more late at 1:1 weights).
func TestVCSubmitAfterAnInjectionEndMatchesChunkReference(t *testing.T) {
	checkSubmitsAtInjectionEnds(t, submitCases{seed: 5, cases: 1000, rounds: 6, localOdds: 4, late: true, equalWeightsHalf: true})
}

// submitCases are random cases of transfers submitted at the instants a
// channel's head ends its injection (checkSubmitsAtInjectionEnds).
type submitCases struct {
	seed          uint64
	cases, rounds int
	// localOdds: one transfer in localOdds stays inside the PE.
	localOdds int
	// late: two submits in three come after the engine's event of their
	// instant (else all come before it).
	late bool
	// equalWeightsHalf: half the cases at 1:1 weights, where the
	// round-robin alternates chunk by chunk.
	equalWeightsHalf bool
}

// checkSubmitsAtInjectionEnds runs the cases of c against the
// chunk-by-chunk reference: every injection end within one chunk's service
// time of it (docs/architecture.md, engine/machine), and then exactly the
// reference's.
func checkSubmitsAtInjectionEnds(t *testing.T, c submitCases) {
	t.Helper()
	rng := rand.New(rand.NewPCG(21, c.seed))
	chunks := []int64{1, 64, 256, 1000, 4096}
	for c0 := range c.cases {
		p := testParams()
		p.VCWeightCompute, p.VCWeightComm = 1, 1
		if !c.equalWeightsHalf || rng.IntN(2) == 0 {
			p.VCWeightCompute, p.VCWeightComm = 1+rng.Int64N(3), 1+rng.Int64N(3)
		}
		p.VCChunkSize = chunks[rng.IntN(len(chunks))]
		m := newTestMachine(t, p)
		pe := m.PE(0)
		send, local := m.MemToMem(pe.TCM, m.PE(1).TCM), m.MemToPE(pe.HBM, pe)
		var q [2][]refTransfer
		var late [2][]bool
		add := func(v int, at sim.Time, after bool) {
			tr := refTransfer{at: at, n: 1 + rng.Int64N(6000), path: send, injects: true}
			if rng.IntN(c.localOdds) == 0 {
				tr.path, tr.injects = local, false
			}
			q[v] = append(q[v], tr)
			late[v] = append(late[v], after)
		}
		add(0, 0, false)
		add(1, sim.Time(rng.Int64N(int64(20*sim.Nanosecond))), false)
		// Then, one at a time, a transfer submitted exactly when a head
		// ends in the run so far (the run up to that time stays the same),
		// after the engine's event of that instant or before it.
		for range c.rounds {
			ends, _ := arrivalRun(t, p, q, late, false)
			v := rng.IntN(2)
			at := endsFrom(ends, q[v][len(q[v])-1].at)
			if len(at) == 0 {
				continue
			}
			a := at[rng.IntN(len(at))]
			if !c.late {
				add(v, a, false)
				continue
			}
			// A channel's transfers are submitted in their order: one at
			// the instant of a late one before it is late too.
			prev := len(q[v]) - 1
			add(v, a, rng.IntN(3) != 0 || a == q[v][prev].at && late[v][prev])
		}
		want := chunkArrivals(q, [2]int64{p.VCWeightCompute, p.VCWeightComm}, p.VCChunkSize)
		got, _ := arrivalRun(t, p, q, late, false)
		// One chunk of a send takes its bottleneck's time for chunk bytes
		// (±1 ps of rounding between chunk boundaries).
		bound := send.Service(p.VCChunkSize) + 1
		for v := range 2 {
			for i := range want[v] {
				if d := got[v][i] - want[v][i]; d > bound || -d > bound {
					t.Fatalf("case %d: weights %d:%d chunk %d queues %+v late %v: transfer %d of channel %d ends its injection at %v, the chunk reference at %v: %.2f chunks apart, more than one",
						c0, p.VCWeightCompute, p.VCWeightComm, p.VCChunkSize, q, late, i, v, got[v][i], want[v][i], float64(d)/float64(send.Service(p.VCChunkSize)))
				}
			}
		}
		if !cmp.Equal(want, got) {
			t.Fatalf("case %d: weights %d:%d chunk %d queues %+v late %v: injection ends (-chunk reference +model):\n%s",
				c0, p.VCWeightCompute, p.VCWeightComm, p.VCChunkSize, q, late, cmp.Diff(want, got))
		}
	}
}

// endsFrom lists the injection ends of either channel at or after t: the
// instants at which a channel's next transfer may be submitted without
// changing the run before it (its transfers stay in submission order).
func endsFrom(ends [2][]sim.Time, t sim.Time) []sim.Time {
	var at []sim.Time
	for _, e := range slices.Concat(ends[0], ends[1]) {
		if e >= t {
			at = append(at, e)
		}
	}
	return at
}
