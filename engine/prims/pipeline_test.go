package prims

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/machine/machinetest"
	"kernbench/engine/sim"
)

// chainCase is a chain of fused primitives along a line of ranks: rank 0
// sends its buffer east (SendBufferOn), each middle rank receives it from
// the west, combines it with its own (reduce) or stores it (copy) and
// forwards it east, and the last rank receives it into its dst.
type chainCase struct {
	name   string
	ranks  int
	rings  machine.Space // where the rx rings live
	count  int64         // f32 elements per buffer
	piece  int64         // bytes per message (0: slot_size)
	copy   bool          // recv_copy_send / recv_copy instead of the reductions
	redop  dtype.RedOp
	jitter uint64
}

// chainRun is what a chain observably did: the last rank's dst, each
// rank's operations, the end time and the events taken, and (apart, for
// they differ by design) the coroutine resumptions.
type chainRun struct {
	Dst    []float64
	Counts []Counts
	End    sim.Time
	Events uint64
}

func chainCfg(rings machine.Space) machine.IPCQConfig {
	return machine.IPCQConfig{
		BufferKind: rings, Backpressure: machine.Sleep,
		NSlots: 4, SlotSize: 256, CreditBytes: 16,
		Overhead: 2 * sim.Nanosecond, PollInterval: 10 * sim.Nanosecond,
	}
}

// runChain runs c with the pipeline's waits as steps of the event loop
// or (stepsOff) as blocking calls of each rank's process.
func runChain(t *testing.T, c chainCase, stepsOff bool) (chainRun, uint64) {
	t.Helper()
	s := sim.New()
	s.SetJitter(c.jitter)
	m, err := machine.New(s, machinetest.Params(1, 1, c.ranks))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Place(c.ranks); err != nil {
		t.Fatal(err)
	}
	links := make([][]machine.Link, c.ranks)
	for r := range links {
		links[r] = []machine.Link{{Dir: "E", Peer: (r + 1) % c.ranks, PeerDir: "W"}, {Dir: "W", Peer: (r + c.ranks - 1) % c.ranks, PeerDir: "E"}}
	}
	g, err := m.Install(links, chainCfg(c.rings))
	if err != nil {
		t.Fatal(err)
	}
	piece := c.piece
	if piece == 0 {
		piece = g.Cfg.SlotSize
	}
	pool := &LoadPool{}
	kernels := make([]*Kernel, c.ranks)
	dsts := make([]View, c.ranks)
	errs := make([]error, c.ranks)
	for r := range kernels {
		k := &Kernel{M: m, G: g, PE: m.Ranks[r], Counts: &Counts{}, Rank: r, World: c.ranks, RedOp: c.redop, Handles: pool, StepsOff: stepsOff}
		kernels[r] = k
		s.Spawn(fmt.Sprintf("rank %d", r), func(p *sim.Proc) {
			k.Proc = p
			errs[r] = k.chainRank(c, piece, &dsts[r])
			if errs[r] == nil {
				errs[r] = k.SendDeferred()
			}
			if errs[r] == nil {
				errs[r] = k.DrainWrites()
			}
		})
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	var out chainRun
	for r, k := range kernels {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		out.Counts = append(out.Counts, *k.Counts)
	}
	last := dsts[c.ranks-1]
	for i := range last.Count {
		out.Dst = append(out.Dst, dtype.Get(last.DT, last.Reg.View(), int(i)))
	}
	out.End, out.Events = s.Now(), s.Events()
	for _, k := range kernels {
		k.Release()
	}
	return out, s.Resumptions()
}

// chainRank is rank k's part of the chain: its local buffer holds
// rank+1 in every element, its dst is kept in dst.
func (k *Kernel) chainRank(c chainCase, piece int64, dst *View) error {
	local, err := k.AllocView("test", int(c.count), dtype.F32, machine.HBM)
	if err != nil {
		return err
	}
	dtype.FillValue(dtype.F32, local.Reg.View(), float64(k.Rank+1))
	if *dst, err = k.AllocView("test", int(c.count), dtype.F32, machine.HBM); err != nil {
		return err
	}
	if k.Rank == 0 {
		q, err := k.G.Lookup(0, "E", true)
		if err != nil {
			return err
		}
		return k.SendBufferOn(q, &local, piece, nil)
	}
	name := "tl.recv_reduce_send"
	if c.copy {
		name = "tl.recv_copy_send"
	}
	lastRank := k.Rank == c.ranks-1
	if lastRank {
		name = "tl.recv_reduce_copy"
		if c.copy {
			name = "tl.recv_copy"
		}
	}
	call := k.NewCall(name, nil)
	call.Piece, call.Final = piece, lastRank
	if call.In, err = k.G.LookupRecv(k.Rank, "W"); err != nil {
		return err
	}
	if !lastRank {
		if call.Out, err = k.G.Lookup(k.Rank, "E", true); err != nil {
			return err
		}
	}
	if !c.copy {
		call.Local = &local
	}
	if lastRank || c.copy {
		call.Dst = dst
	}
	return k.RunFused(call)
}

// Rule (docs/architecture.md, engine/sim: event order and jitter): a fused
// primitive's pipeline gives the same run whether its waits are steps of
// the event loop or blocking calls of the rank's process — the same
// results, operations, end time and events, under jitter too — and with
// steps the processes resume less often. Each piece is one message: the
// first rank sends ceil(bytes / piece) of them, and every later rank
// receives as many.
func TestPipelineStepsGiveTheBlockingRun(t *testing.T) {
	for _, c := range []chainCase{
		{name: "reduce, tcm rings", ranks: 4, rings: machine.TCM, count: 1000, redop: dtype.Sum},
		{name: "reduce, hbm rings", ranks: 4, rings: machine.HBM, count: 1000, redop: dtype.Sum},
		{name: "reduce, small pieces", ranks: 3, rings: machine.TCM, count: 333, piece: 100, redop: dtype.Sum},
		{name: "reduce, jitter", ranks: 5, rings: machine.TCM, count: 640, redop: dtype.RMax, jitter: 7},
		{name: "avg, divided at the last rank", ranks: 4, rings: machine.TCM, count: 256, redop: dtype.Avg},
		{name: "copy, tcm rings", ranks: 4, rings: machine.TCM, count: 1000, copy: true},
		{name: "copy, hbm rings, jitter", ranks: 3, rings: machine.HBM, count: 500, copy: true, jitter: 3},
		{name: "one element", ranks: 2, rings: machine.TCM, count: 1, redop: dtype.Sum},
	} {
		t.Run(c.name, func(t *testing.T) {
			blocking, resumedBlocking := runChain(t, c, true)
			stepped, resumedStepped := runChain(t, c, false)
			if diff := cmp.Diff(blocking, stepped); diff != "" {
				t.Errorf("the run with steps differs from the blocking one (-blocking +steps):\n%s", diff)
			}
			if resumedStepped > resumedBlocking || c.count > 256 && resumedStepped == resumedBlocking {
				t.Errorf("%d resumptions with steps, %d without: the steps saved none", resumedStepped, resumedBlocking)
			}
			want := make([]float64, c.count)
			for i := range want {
				switch {
				case c.copy:
					want[i] = 1 // rank 0's buffer, passed along
				case c.redop == dtype.RMax:
					want[i] = float64(c.ranks)
				case c.redop == dtype.Avg:
					want[i] = float64(c.ranks+1) / 2
				default:
					want[i] = float64(c.ranks*(c.ranks+1)) / 2
				}
			}
			if diff := cmp.Diff(want, stepped.Dst); diff != "" {
				t.Errorf("the last rank's dst (-want +got):\n%s", diff)
			}
			piece := c.piece
			if piece == 0 {
				piece = chainCfg(c.rings).SlotSize
			}
			messages := (c.count*4 + piece - 1) / piece
			for r, n := range stepped.Counts {
				if r < c.ranks-1 && n.Send != messages {
					t.Errorf("rank %d sent %d messages, want %d", r, n.Send, messages)
				}
				if r > 0 && n.Recv != messages {
					t.Errorf("rank %d received %d messages, want %d", r, n.Recv, messages)
				}
			}
		})
	}
}
