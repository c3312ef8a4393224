package machine

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
)

// testParams mirrors the shipped ccl.yaml system section with 2 SIPs so that
// every kind of path exists.
func testParams() Params {
	ns := sim.Nanosecond
	return Params{
		Sips: 2, CubesPerSip: 2, PesPerCube: 4,
		PeNoc: LinkParams{128_000, 10 * ns}, Ucie: LinkParams{64_000, 50 * ns}, Pcie: LinkParams{32_000, 500 * ns},
		Tcm:  MemParams{1 << 20, LinkParams{512_000, 2 * ns}},
		Sram: MemParams{8 << 20, LinkParams{256_000, 10 * ns}},
		Hbm:  MemParams{1 << 30, LinkParams{512_000, 100 * ns}},
		Math: LinkParams{256_000, 4 * ns}, VCWeightCompute: 1, VCWeightComm: 1,
	}
}

func newTestMachine(t *testing.T, p Params) *Machine {
	t.Helper()
	m, err := New(sim.New(), p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// formula is T(path, n) = Σ latency + n / min bandwidth, written out from the
// link parameters independently of Path.
func formula(lat []sim.Time, bw []int64, n int64) sim.Time {
	var l sim.Time
	minBW := bw[0]
	for i := range lat {
		l += lat[i]
		minBW = min(minBW, bw[i])
	}
	return l + sim.Time((n*1_000_000+minBW-1)/minBW)
}

type doneRecorder struct {
	at   sim.Time
	sim  *sim.Sim
	done bool
}

func (d *doneRecorder) Complete(*Transfer) { d.at, d.done = d.sim.Now(), true }

// Rule (docs/architecture.md, engine/machine): an idle path costs exactly Σ
// latency + n / min bandwidth for intra-cube, cross-cube and cross-SIP paths
// and every buffer kind.
func TestIdlePathFormulaExact(t *testing.T) {
	p := testParams()
	ns := sim.Nanosecond
	noc, ucie, pcie := p.PeNoc, p.Ucie, p.Pcie
	memOf := func(s Space) LinkParams {
		return map[Space]LinkParams{TCM: p.Tcm.LinkParams, SRAM: p.Sram.LinkParams, HBM: p.Hbm.LinkParams}[s]
	}
	for _, srcSpace := range []Space{TCM, SRAM, HBM} {
		for _, dstSpace := range []Space{TCM, SRAM, HBM} {
			for _, tc := range []struct {
				name  string
				a, b  int
				links []LinkParams
			}{
				{"intra-cube", 0, 1, []LinkParams{noc, noc}},
				{"cross-cube", 0, 5, []LinkParams{noc, ucie, noc}},
				{"cross-sip", 0, 9, []LinkParams{noc, pcie, pcie, noc}},
			} {
				for _, n := range []int64{1, 100, 4096, 1 << 20} {
					name := fmt.Sprintf("%s/%v->%v/%d", tc.name, srcSpace, dstSpace, n)
					if srcSpace == SRAM && dstSpace == SRAM && tc.name == "intra-cube" {
						continue // one memory: its single port carries both the read and the write
					}
					t.Run(name, func(t *testing.T) {
						m := newTestMachine(t, p)
						a, b := m.PE(tc.a), m.PE(tc.b)
						src := map[Space]*Memory{TCM: a.TCM, SRAM: a.SRAM, HBM: a.HBM}[srcSpace]
						dst := map[Space]*Memory{TCM: b.TCM, SRAM: b.SRAM, HBM: b.HBM}[dstSpace]
						// Expected links: SRAM sits at the cube router, so the
						// PE's NoC hop on that side disappears.
						links := append([]LinkParams(nil), tc.links...)
						if dstSpace == SRAM {
							links = links[:len(links)-1]
						}
						if srcSpace == SRAM {
							links = links[1:]
						}
						var lat []sim.Time
						var bw []int64
						for _, l := range append(append([]LinkParams{memOf(srcSpace)}, links...), memOf(dstSpace)) {
							lat = append(lat, l.Latency)
							bw = append(bw, l.BytesPerUs)
						}
						want := formula(lat, bw, n)
						d := &doneRecorder{sim: m.Sim}
						m.Submit(a, &Transfer{Path: m.MemToMem(src, dst), N: n, VC: VCComm, Owner: d}, false)
						if err := m.Sim.Run(); err != nil {
							t.Fatal(err)
						}
						if d.at != want {
							t.Errorf("completion at %v, want Σlat+n/minbw = %v", d.at, want)
						}
					})
				}
			}
		}
	}
	_ = ns
}

// Rule (docs/architecture.md, engine/machine): two flows on one link share it
// — the second waits for the first's bytes (FIFO per resource), so together
// they take twice as long.
func TestTwoFlowsShareLink(t *testing.T) {
	m := newTestMachine(t, testParams())
	n := int64(64 << 10)
	// PE 0 and PE 1 both write into PE 2's HBM: the NoC link into PE 2 is shared.
	d0, d1 := &doneRecorder{sim: m.Sim}, &doneRecorder{sim: m.Sim}
	dst := m.PE(2).HBM
	m.Submit(m.PE(0), &Transfer{Path: m.MemToMem(m.PE(0).HBM, dst), N: n, VC: VCComm, Owner: d0}, false)
	m.Submit(m.PE(1), &Transfer{Path: m.MemToMem(m.PE(1).HBM, dst), N: n, VC: VCComm, Owner: d1}, false)
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	path := m.MemToMem(m.PE(0).HBM, dst)
	alone := path.IdleTime(n)
	serve := path.Service(n)
	if d0.at != alone {
		t.Errorf("first flow done at %v, want %v", d0.at, alone)
	}
	if want := alone + serve; d1.at != want {
		t.Errorf("second flow done at %v, want %v (one more bottleneck service time)", d1.at, want)
	}
}

// Rule (docs/architecture.md, DMA virtual channels): vc_compute traffic slows
// vc_comm according to the weights; with only one channel busy it gets the
// whole engine.
func TestVCWeightsShareInjection(t *testing.T) {
	for _, w := range []struct{ compute, comm int64 }{{1, 1}, {1, 3}, {3, 1}} {
		t.Run(fmt.Sprintf("compute%d_comm%d", w.compute, w.comm), func(t *testing.T) {
			p := testParams()
			p.VCWeightCompute, p.VCWeightComm = w.compute, w.comm
			m := newTestMachine(t, p)
			pe := m.PE(0)
			big := int64(1 << 20)
			small := int64(4096)
			// A long compute copy into PE 1's HBM and a comm send to PE 1's
			// TCM: both inject into PE 0's NoC up-link, so they split it.
			dc, dm := &doneRecorder{sim: m.Sim}, &doneRecorder{sim: m.Sim}
			cpath := m.MemToMem(pe.HBM, m.PE(1).HBM)
			spath := m.MemToMem(pe.TCM, m.PE(1).TCM)
			m.Submit(pe, &Transfer{Path: cpath, N: big, VC: VCCompute, Owner: dc}, false)
			m.Submit(pe, &Transfer{Path: spath, N: small, VC: VCComm, Owner: dm}, false)
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			// Round-robin of 256-byte chunks (the default vc_chunk_size),
			// vc_compute first: the send's 16 chunks end in round
			// ⌈16/comm⌉, after compute·⌈16/comm⌉ chunks of the copy.
			service := spath.Service(small)
			chunks := small / defaultVCChunkSize
			rounds := (chunks + w.comm - 1) / w.comm
			copied := cpath.Service(rounds * w.compute * defaultVCChunkSize)
			if want := copied + service + spath.Latency(); dm.at != want {
				t.Errorf("comm done at %v, want %v (service %v plus %d rounds of %d compute chunks)", dm.at, want, service, rounds, w.compute)
			}
			// Conservation: the compute copy loses exactly what comm used.
			cserv := cpath.Service(big)
			if want := cserv + service + cpath.Latency(); dc.at != want {
				t.Errorf("compute done at %v, want %v", dc.at, want)
			}
		})
	}
}

// Rule (docs/architecture.md, DMA virtual channels, vc_chunk_size): a channel
// that starts injecting while the other injects alone waits for the chunk in
// flight; from that boundary the channels take turns, vc_compute first.
// Weights 1:1, 2 ns per 256 bytes on the up-link; the send (512 bytes)
// arrives at 3 ns.
func TestVCShareStartsAtChunkBoundary(t *testing.T) {
	ns := sim.Nanosecond
	for _, c := range []struct {
		chunk              int64
		sendEnds, copyEnds sim.Time // injection ends
	}{
		// Chunk [2, 4) in flight; compute [4, 6), send [6, 8), compute
		// [8, 10), send [10, 12).
		{256, 12 * ns, 516 * ns},
		// Chunk [0, 8) in flight; compute [8, 16), then the send whole,
		// one partial chunk, [16, 20). The copy loses exactly the send's
		// 4 ns.
		{1024, 20 * ns, 516 * ns},
		// A chunk larger than the copy: the send waits for all of it
		// (512 ns) and the copy loses nothing.
		{1 << 20, 516 * ns, 512 * ns},
	} {
		t.Run(fmt.Sprint(c.chunk), func(t *testing.T) {
			p := testParams()
			p.VCChunkSize = c.chunk
			m := newTestMachine(t, p)
			pe := m.PE(0)
			path := m.MemToMem(pe.TCM, m.PE(1).TCM)
			const big, small = 64 << 10, 512
			dc, dm := &doneRecorder{sim: m.Sim}, &doneRecorder{sim: m.Sim}
			m.Submit(pe, &Transfer{Path: path, N: big, VC: VCCompute, Owner: dc}, false)
			m.Sim.At(3*ns, sim.HandlerFunc(func() {
				m.Submit(pe, &Transfer{Path: path, N: small, VC: VCComm, Owner: dm}, false)
			}))
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			if want := c.sendEnds + path.Latency(); dm.at != want {
				t.Errorf("send done at %v, want %v", dm.at, want)
			}
			if want := c.copyEnds + path.Latency(); dc.at != want {
				t.Errorf("copy done at %v, want %v", dc.at, want)
			}
		})
	}
}

// The DMA engine's round-robin allocates nothing per transfer once the
// simulator's queue has grown (performance.md: nothing allocated per
// message in the engine).
func TestVCRoundRobinAllocatesNothing(t *testing.T) {
	m := newTestMachine(t, testParams())
	pe := m.PE(0)
	path := m.MemToMem(pe.TCM, m.PE(1).TCM)
	d := &doneRecorder{sim: m.Sim}
	trs := []*Transfer{
		{Path: path, N: 5000, VC: VCCompute, Owner: d},
		{Path: path, N: 3000, VC: VCComm, Owner: d},
		{Path: path, N: 7000, VC: VCComm, Owner: d},
	}
	run := func() {
		for _, tr := range trs {
			m.Submit(pe, tr, false)
		}
		if err := m.Sim.Run(); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if allocs := testing.AllocsPerRun(20, run); allocs != 0 {
		t.Errorf("%v allocations per run of three shared transfers, want 0", allocs)
	}
}

// vcCase is a set of transfers queued at time 0 on PE 0's two channels.
type vcCase struct {
	weights [2]int64
	chunk   int64
	sizes   [2][]int64
	remote  [2][]bool // destination in the next cube (UCIe bottleneck) instead of PE 1's TCM
}

// Rule (docs/architecture.md, engine/machine, contention: "as if served chunk
// by chunk (vc_chunk_size) … weighted round-robin between a PE's two virtual
// channels", tested against a chunk-by-chunk reference). The analytic DMA
// model against a chunk-by-chunk weighted round-robin reference: every
// completion is exactly the reference's, for hand-picked and random queues,
// weights and chunk sizes.
func TestVCModelMatchesChunkReference(t *testing.T) {
	var cases []vcCase
	for _, w := range [][2]int64{{1, 1}, {1, 3}, {2, 1}} {
		for _, chunk := range []int64{256, 1, 100, 4096} {
			for _, sizes := range [][2][]int64{
				{{1 << 16}, {4096, 4096, 4096}},
				{{8192, 8192}, {4096, 1024, 4096, 512}},
				{{1000, 3}, {257, 255, 1}},
			} {
				cases = append(cases, vcCase{weights: w, chunk: chunk, sizes: sizes})
			}
		}
	}
	rng := rand.New(rand.NewPCG(13, 8))
	chunks := []int64{1, 7, 64, 256, 1000, 4096, 1 << 20}
	for range 300 {
		c := vcCase{weights: [2]int64{1 + rng.Int64N(4), 1 + rng.Int64N(4)}, chunk: chunks[rng.IntN(len(chunks))]}
		for v := range 2 {
			for range 1 + rng.IntN(4) {
				c.sizes[v] = append(c.sizes[v], 1+rng.Int64N(20000))
				c.remote[v] = append(c.remote[v], rng.IntN(3) == 0)
			}
		}
		cases = append(cases, c)
	}
	for _, c := range cases {
		p := testParams()
		p.VCWeightCompute, p.VCWeightComm, p.VCChunkSize = c.weights[0], c.weights[1], c.chunk
		m := newTestMachine(t, p)
		pe := m.PE(0)
		// Every path injects into PE 0's NoC up-link, so the channels take
		// turns on it; a remote one has a slower bottleneck further on
		// (UCIe), which sets its chunks' time. Both start and end in TCM, so
		// a channel's transfers never wait for each other's bookings and each
		// completes a path latency after its injection ends.
		near, far := m.MemToMem(pe.TCM, m.PE(1).TCM), m.MemToMem(pe.TCM, m.PE(p.PesPerCube).TCM)
		if far.Bottleneck() >= near.Bottleneck() {
			t.Fatalf("far path bottleneck %d bytes/µs, want below the near path's %d", far.Bottleneck(), near.Bottleneck())
		}
		var paths [2][]Path
		var recs [2][]*doneRecorder
		for v := VC(0); v < 2; v++ {
			for i, n := range c.sizes[v] {
				path := near
				if c.remote[v] != nil && c.remote[v][i] {
					path = far
				}
				d := &doneRecorder{sim: m.Sim}
				recs[v] = append(recs[v], d)
				paths[v] = append(paths[v], path)
				m.Submit(pe, &Transfer{Path: path, N: n, VC: v, Owner: d}, false)
			}
		}
		if err := m.Sim.Run(); err != nil {
			t.Fatal(err)
		}
		want := chunkWRR(c.sizes, paths, c.weights, c.chunk)
		var got [2][]sim.Time
		for v := range 2 {
			for i, d := range recs[v] {
				got[v] = append(got[v], d.at-paths[v][i].Latency())
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("weights %v chunk %d sizes %v remote %v: injection ends (-chunk reference +model):\n%s", c.weights, c.chunk, c.sizes, c.remote, diff)
		}
	}
}

// chunkWRR serves two FIFO channels chunk by chunk: per round, weight[v]
// chunks of channel v; returns each transfer's last-chunk end time. A chunk
// takes its path's bottleneck time for the bytes through its end minus that
// for the bytes before it, so a transfer's chunks add up to its Service.
func chunkWRR(sizes [2][]int64, paths [2][]Path, weight [2]int64, chunk int64) [2][]sim.Time {
	var out [2][]sim.Time
	var sent [2]int64
	var t sim.Time
	idx := [2]int{}
	for idx[0] < len(sizes[0]) || idx[1] < len(sizes[1]) {
		for v := 0; v < 2; v++ {
			for k := int64(0); k < weight[v] && idx[v] < len(sizes[v]); k++ {
				n, p := sizes[v][idx[v]], paths[v][idx[v]]
				c := min(chunk, n-sent[v])
				t += p.Service(sent[v]+c) - p.Service(sent[v])
				sent[v] += c
				if sent[v] == n {
					out[v] = append(out[v], t)
					idx[v]++
					sent[v] = 0
				}
			}
		}
	}
	return out
}

// refTransfer is one transfer of the arrivals reference: submitted at at,
// injecting into the up-link or not (a load from the PE's own HBM).
type refTransfer struct {
	at      sim.Time
	n       int64
	path    Path
	injects bool
}

// Rule (docs/architecture.md, engine/machine, the same chunk-by-chunk
// contention rule). The engine against a chunk-by-chunk reference with
// transfers submitted over time, some of them local: the link goes from one
// user to two and back, and a channel's local transfer runs alongside the
// other's sends.
func TestVCModelMatchesChunkReferenceWithArrivals(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 9))
	chunks := []int64{1, 64, 256, 1000, 4096}
	for range 300 {
		p := testParams()
		p.VCWeightCompute, p.VCWeightComm = 1+rng.Int64N(3), 1+rng.Int64N(3)
		p.VCChunkSize = chunks[rng.IntN(len(chunks))]
		m := newTestMachine(t, p)
		pe := m.PE(0)
		send, local := m.MemToMem(pe.TCM, m.PE(1).TCM), m.MemToPE(pe.HBM, pe)
		var q [2][]refTransfer
		var recs [2][]*doneRecorder
		for v := VC(0); v < 2; v++ {
			var at sim.Time
			for range 1 + rng.IntN(5) {
				at += sim.Time(rng.Int64N(int64(100 * sim.Nanosecond)))
				tr := refTransfer{at: at, n: 1 + rng.Int64N(8000), path: send, injects: true}
				if rng.IntN(3) == 0 {
					tr.path, tr.injects = local, false
				}
				q[v] = append(q[v], tr)
				d := &doneRecorder{sim: m.Sim}
				recs[v] = append(recs[v], d)
				x := &Transfer{Path: tr.path, N: tr.n, VC: v, Owner: d}
				m.Sim.At(tr.at, sim.HandlerFunc(func() { m.Submit(pe, x, false) }))
			}
		}
		if err := m.Sim.Run(); err != nil {
			t.Fatal(err)
		}
		want := chunkArrivals(q, [2]int64{p.VCWeightCompute, p.VCWeightComm}, p.VCChunkSize)
		var got [2][]sim.Time
		for v := range 2 {
			for i, d := range recs[v] {
				got[v] = append(got[v], d.at-q[v][i].path.Latency())
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("weights %d:%d chunk %d queues %+v: injection ends (-chunk reference +model):\n%s", p.VCWeightCompute, p.VCWeightComm, p.VCChunkSize, q, diff)
		}
	}
}

// chunkArrivals serves two FIFO channels on a link one chunk at a time,
// deciding at each chunk end: one channel with an injecting transfer ready
// gets the next chunk; with both ready, weight[v] chunks of channel v per
// round, and a new round starting with channel 0 whenever the link had one
// user or none before. A local transfer takes its bottleneck time from its
// start, apart from the link. Returns each transfer's injection end.
func chunkArrivals(q [2][]refTransfer, weight [2]int64, chunk int64) [2][]sim.Time {
	var out [2][]sim.Time
	var idx [2]int
	var sent [2]int64
	var free [2]sim.Time // when the channel's previous transfer ended
	var t sim.Time
	users, turn, served := 0, 0, int64(0)
	startOf := func(v int) sim.Time { return max(q[v][idx[v]].at, free[v]) }
	finish := func(v int, at sim.Time) {
		out[v] = append(out[v], at)
		free[v], sent[v] = at, 0
		idx[v]++
	}
	for idx[0] < len(q[0]) || idx[1] < len(q[1]) {
		// Local transfers end on their own, by t.
		for v := 0; v < 2; v++ {
			for idx[v] < len(q[v]) && !q[v][idx[v]].injects {
				tr := q[v][idx[v]]
				end := startOf(v) + tr.path.Service(tr.n)
				if end > t {
					break
				}
				finish(v, end)
			}
		}
		var ready []int
		next := sim.Never
		for v := 0; v < 2; v++ {
			if idx[v] == len(q[v]) {
				continue
			}
			tr := q[v][idx[v]]
			switch start := startOf(v); {
			case !tr.injects:
				next = min(next, start+tr.path.Service(tr.n))
			case start <= t:
				ready = append(ready, v)
			default:
				next = min(next, start)
			}
		}
		if len(ready) == 0 {
			users, t = 0, next
			continue
		}
		v := ready[0]
		if len(ready) == 2 {
			if users < 2 {
				turn, served = 0, 0
			}
			if served == weight[turn] {
				turn, served = 1-turn, 0
			}
			v = turn
			served++
		}
		users = len(ready)
		tr := q[v][idx[v]]
		c := min(chunk, tr.n-sent[v])
		t += tr.path.Service(sent[v]+c) - tr.path.Service(sent[v])
		if sent[v] += c; sent[v] == tr.n {
			finish(v, t)
		}
	}
	return out
}

func TestAllocFreeCoalesce(t *testing.T) {
	m := newTestMachine(t, testParams())
	mem := m.PE(0).TCM
	a, _ := mem.Alloc(100)
	b, _ := mem.Alloc(64)
	c, _ := mem.Alloc(1)
	if diff := cmp.Diff([]int64{0, 128, 192}, []int64{a, b, c}); diff != "" {
		t.Errorf("offsets (-want +got):\n%s", diff)
	}
	mem.Free(b, 64)
	mem.Free(a, 100)
	mem.Free(c, 1)
	if diff := cmp.Diff([]span{{0, 1 << 20}}, mem.free, cmp.AllowUnexported(span{})); diff != "" {
		t.Errorf("free list (-want +got):\n%s", diff)
	}
	if _, err := mem.Alloc(2 << 20); err == nil {
		t.Error("oversized alloc succeeded")
	}
}

// Rule (docs/architecture.md, engine/machine): traffic shares a link;
// together, sources never push more than its bandwidth, even when one
// source's bookings are pushed back by another's (a regression: a source used
// to overlap its own delayed bookings).
func TestSharedLinkNeverExceedsBandwidth(t *testing.T) {
	m := newTestMachine(t, testParams())
	const per, n = 100, int64(4096)
	var last sim.Time
	dst := m.PE(0).TCM
	for _, src := range []*PE{m.PE(1), m.PE(2)} {
		src := src
		left := per
		var d *chainRecorder
		d = &chainRecorder{sim: m.Sim, next: func() {
			last = max(last, m.Sim.Now())
			if left > 0 {
				left--
				m.Submit(src, &Transfer{Path: m.MemToMem(src.TCM, dst), N: n, VC: VCComm, Owner: d}, false)
			}
		}}
		// Keep several transfers queued per source, like a window of sends.
		for k := 0; k < 4 && left > 0; k++ {
			left--
			m.Submit(src, &Transfer{Path: m.MemToMem(src.TCM, dst), N: n, VC: VCComm, Owner: d}, false)
		}
	}
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	link := m.PE(0).NocDown
	minTime := link.Xfer(2 * per * n)
	if last < minTime {
		t.Errorf("%d bytes crossed %s by %v, faster than its bandwidth allows (%v)", 2*per*n, link.Name, last, minTime)
	}
	if link.BusyTime > last {
		t.Errorf("%s busy %v within %v: over 100%% utilisation", link.Name, link.BusyTime, last)
	}
}

type chainRecorder struct {
	sim  *sim.Sim
	next func()
}

func (c *chainRecorder) Complete(*Transfer) { c.next() }

// Rule (docs/architecture.md, DMA virtual channels): the channels split a
// link both inject into; a transfer that stays inside the PE (a load from its
// own HBM) takes nothing from a send.
func TestVCLocalTrafficDoesNotSlowSends(t *testing.T) {
	m := newTestMachine(t, testParams())
	pe := m.PE(0)
	dc, dm := &doneRecorder{sim: m.Sim}, &doneRecorder{sim: m.Sim}
	spath := m.MemToMem(pe.TCM, m.PE(1).TCM)
	m.Submit(pe, &Transfer{Path: m.MemToPE(pe.HBM, pe), N: 1 << 20, VC: VCCompute, Owner: dc}, false)
	m.Submit(pe, &Transfer{Path: spath, N: 4096, VC: VCComm, Owner: dm}, false)
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	if want := spath.IdleTime(4096); dm.at != want {
		t.Errorf("send done at %v, want the idle time %v (a local load does not share the NoC)", dm.at, want)
	}
}

// PEs, cube SRAMs and links are materialised on first use: a machine of a
// million SIPs (32 M PEs) with 8 placed ranks holds the memories and links
// of those 8 PEs and their cube, and routes between two SIPs still find
// their PCIe links.
func TestMachineMaterialisedOnUse(t *testing.T) {
	p := testParams()
	p.Sips = 1_000_000
	m := newTestMachine(t, p)
	if got, want := m.NumPEs(), 1_000_000*p.CubesPerSip*p.PesPerCube; got != want {
		t.Fatalf("NumPEs = %d, want %d", got, want)
	}
	if err := m.Place(8); err != nil {
		t.Fatal(err)
	}
	if n := len(m.Mems); n > 8*2+2 {
		t.Errorf("%d memories after placing 8 ranks, want at most %d (their TCM and HBM, their cubes' SRAM)", n, 8*2+2)
	}
	far := m.PE(m.NumPEs() - 1)
	path := m.MemToMem(m.Ranks[0].HBM, far.HBM)
	var names []string
	for _, r := range path {
		names = append(names, r.Name)
	}
	last := m.NumPEs() - 1
	want := []string{"hbm pe0", "pe_noc pe0->c0", "pcie s0->host", fmt.Sprintf("pcie host->s%d", 999_999),
		fmt.Sprintf("pe_noc c%d->pe%d", far.Cube, last), fmt.Sprintf("hbm pe%d", last)}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("route rank 0 -> last PE (-want +got):\n%s", diff)
	}
}

// Issue 13 (1): a transfer time that does not fit in int64 ps saturates
// (the watchdog then ends the run) instead of wrapping negative.
func TestXferSaturates(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, bwUs int64
		want    sim.Time
	}{
		{"exact", 4096, 1000, 4096 * sim.Nanosecond},
		{"rounded up", 1, 3, 333334},
		{"n·10⁶ beyond int64", 1 << 50, 1 << 20, sim.Time(1<<30) * 1_000_000},
		{"beyond Never", 1 << 62, 1, sim.Never},
	} {
		r := &Resource{BytesPerUs: tc.bwUs}
		if got := r.Xfer(tc.n); got != tc.want {
			t.Errorf("%s: Xfer(%d) at %d B/µs = %d, want %d", tc.name, tc.n, tc.bwUs, got, tc.want)
		}
	}
}

// Service is the largest Xfer over the path's resources (computed as the
// slowest timed resource's Xfer), and Xfer's 64-bit fast path equals the
// 128-bit rounding up to the saturation point.
func TestServiceIsTheSlowestResourcesXfer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	xfer128 := func(r *Resource, n int64) sim.Time {
		if n <= 0 || r.BytesPerUs == 0 {
			return 0
		}
		q := new(big.Int).Mul(big.NewInt(n), big.NewInt(1_000_000))
		q.Add(q, big.NewInt(r.BytesPerUs-1))
		q.Quo(q, big.NewInt(r.BytesPerUs))
		if !q.IsInt64() || q.Int64() >= int64(sim.Never) {
			return sim.Never
		}
		return sim.Time(q.Int64())
	}
	sizes := []int64{0, 1, 63, 4096, 1<<43 - 1, 1 << 43, 1<<43 + 1, 1 << 50, 1<<63 - 1}
	for i := 0; i < 2000; i++ {
		var path Path
		for k := rng.IntN(5); k >= 0; k-- {
			bw := int64(0)
			if rng.IntN(4) > 0 {
				bw = 1 + rng.Int64N(1_000_000_000)
			}
			path = append(path, &Resource{BytesPerUs: bw})
		}
		n := sizes[rng.IntN(len(sizes))]
		if rng.IntN(2) == 0 {
			n = rng.Int64N(1 << 50)
		}
		var want sim.Time
		for _, r := range path {
			x := xfer128(r, n)
			if got := r.Xfer(n); got != x {
				t.Fatalf("Xfer(%d) at %d B/us = %v, want %v", n, r.BytesPerUs, got, x)
			}
			want = max(want, x)
		}
		if got := path.Service(n); got != want {
			t.Fatalf("Service(%d) = %v, want the largest Xfer %v", n, got, want)
		}
	}
}

// Rule (docs/architecture.md, engine/machine): a DMA transfer's timing comes
// from its own path's latency and bottleneck, also when its channel's
// previous submits went along other paths (the engine remembers the last path
// scanned per channel): paths of equal length, a path's prefix (same first
// resource), and an untimed empty path, in random order on both channels.
func TestDMAPathFactsFollowEachTransfer(t *testing.T) {
	m := newTestMachine(t, testParams())
	pe := m.PE(0)
	toPeer := m.MemToMem(pe.TCM, m.PE(1).TCM)
	paths := []Path{
		toPeer,
		toPeer[:len(toPeer)-1], // same first resource, shorter
		m.MemToMem(pe.TCM, m.PE(5).TCM),
		m.MemToPE(pe.HBM, pe),
		m.PEToMem(pe, pe.HBM),
		m.MemToMem(pe.HBM, m.PE(2).HBM),
		{},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	e := pe.dma
	for i := 0; i < 400; i++ {
		path := paths[rng.IntN(len(paths))]
		tr := &Transfer{Path: path, N: int64(1 + rng.IntN(4096)), VC: VC(rng.IntN(2)), Owner: &doneRecorder{sim: m.Sim}}
		m.Submit(pe, tr, false)
		injects, slowest, latency := e.scan(path)
		if tr.injects != injects || tr.bottleneck != slowest || tr.latency != latency {
			t.Fatalf("submit %d on %v along %v: injects %v, bottleneck %v, latency %v; want %v, %v, %v",
				i, tr.VC, path, tr.injects, tr.bottleneck, tr.latency, injects, slowest, latency)
		}
		if rng.IntN(8) == 0 {
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
}

// A SIP's PCIe links are made (and named) once: asking for them again, as
// every route across SIPs does, allocates nothing.
func TestPCIeLinksMadeOnce(t *testing.T) {
	m := newTestMachine(t, testParams())
	up, down := m.PCIe(1)
	if n := testing.AllocsPerRun(100, func() {
		if u, d := m.PCIe(1); u != up || d != down {
			t.Fatal("a second PCIe(1) gave other links")
		}
	}); n != 0 {
		t.Errorf("PCIe of links already made allocates %v objects per call", n)
	}
	if up.Name != "pcie s1->host" || down.Name != "pcie host->s1" {
		t.Errorf("links named %q and %q", up.Name, down.Name)
	}
}
