package ccl

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"kernbench"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
)

// The tree algorithms run from their files (no ccl.yaml entry): the
// module's TOPOLOGY (tree_binary) and COLLECTIVE pick topology and bench.

// treeRun runs algorithms/<algo>.star with reference verification.
func treeRun(t *testing.T, algo string, o Options) *report.Report {
	t.Helper()
	rep := runVerified(t, "algorithms/"+algo+".star", o)
	if rep.Topology != "tree_binary" {
		t.Errorf("%s: topology %q, want tree_binary", algo, rep.Topology)
	}
	return rep
}

// treeCheck fails unless every row was verified with no wrong element.
func treeCheck(t *testing.T, rep *report.Report) {
	t.Helper()
	checkCorrect(t, rep)
}

// treeRoots are the roots tried for a rooted collective: 0 and, with more
// than one rank, a non-zero one: the last rank (a leaf, often the deepest)
// for even world sizes, the middle rank (an inner rank or a leaf on the
// other side of the tree) for odd ones.
func treeRoots(world int) []int {
	switch {
	case world == 1:
		return []int{0}
	case world%2 == 0:
		return []int{0, world - 1}
	}
	return []int{0, world / 2}
}

var treeAlgos = []struct {
	name   string
	rooted bool
}{{"tree_allreduce", false}, {"tree_broadcast", true}, {"tree_reduce", true}}

// Every tree algorithm is correct for every world size of the default
// machine's first 16 PEs (one- and two-child ranks, leaves, a single rank),
// for empty, single-element, ragged and multi-piece counts, in place and
// out of place, and (broadcast, reduce) for root 0 and non-zero roots; the
// reduce bench also checks that non-root recv buffers were left untouched.
func TestTreeWorldSizesCountsRoots(t *testing.T) {
	counts := []int64{0, 1, 37, 1000, 5000}
	for _, a := range treeAlgos {
		for world := 1; world <= 16; world++ {
			roots := []int{0}
			if a.rooted {
				roots = treeRoots(world)
			}
			for _, root := range roots {
				for _, inPlace := range []bool{false, true} {
					name := fmt.Sprintf("%s/world=%d/root=%d/in_place=%v", a.name, world, root, inPlace)
					t.Run(name, func(t *testing.T) {
						rep := treeRun(t, a.name, Options{WorldSize: world, Root: root, InPlace: inPlace, Counts: counts, DType: "f32", RedOp: "sum"})
						if rep.WorldSize != world {
							t.Errorf("world_size = %d, want %d", rep.WorldSize, world)
						}
						treeCheck(t, rep)
						for _, r := range rep.Results {
							if r.InPlace != inPlace {
								t.Errorf("count %d: in_place = %v, want %v", r.Count, r.InPlace, inPlace)
							}
						}
					})
				}
			}
		}
	}
}

// Every dtype with every reduction matches the reference at an odd and an
// even world size (reduce also at a non-zero root); broadcast moves every
// dtype bit for bit.
func TestTreeDTypesAndRedOps(t *testing.T) {
	dtypes := []string{"f32", "f16", "i32", "u8"}
	redops := []string{"sum", "prod", "max", "min", "avg"}
	for _, world := range []int{3, 8} {
		for _, dt := range dtypes {
			for _, op := range redops {
				for _, tc := range []struct {
					algo string
					root int
				}{{"tree_allreduce", 0}, {"tree_reduce", 0}, {"tree_reduce", world - 1}} {
					t.Run(fmt.Sprintf("%s/world=%d/root=%d/%s/%s", tc.algo, world, tc.root, dt, op), func(t *testing.T) {
						rep := treeRun(t, tc.algo, Options{WorldSize: world, Root: tc.root, Counts: []int64{1000, 37}, DType: dt, RedOp: op})
						for _, r := range rep.Results {
							if r.DType != dt || r.RedOp != op {
								t.Errorf("row is %s %s, want %s %s", r.DType, r.RedOp, dt, op)
							}
						}
						treeCheck(t, rep)
					})
				}
			}
			t.Run(fmt.Sprintf("tree_broadcast/world=%d/%s", world, dt), func(t *testing.T) {
				treeCheck(t, treeRun(t, "tree_broadcast", Options{WorldSize: world, Root: 1, Counts: []int64{1000, 37}, DType: dt}))
			})
		}
	}
}

// The rx rings and the data may live in any memory, and the algorithms stay
// correct (and deadlock-free) for small IPCQ geometries: a single slot, two
// slots, and slots of a few elements (many pieces per buffer).
func TestTreeMemoriesAndGeometry(t *testing.T) {
	type setup struct {
		name  string
		space string
		sets  []string
	}
	var setups []setup
	for _, kind := range []string{"tcm", "hbm", "sram"} {
		for _, space := range []string{"hbm", "tcm", "sram"} {
			setups = append(setups, setup{"rings=" + kind + "/data=" + space, space, []string{"defaults.buffer_kind=" + kind}})
		}
	}
	setups = append(setups,
		setup{"n_slots=1", "hbm", []string{"defaults.n_slots=1"}},
		setup{"n_slots=2/slot=64", "hbm", []string{"defaults.n_slots=2", "defaults.slot_size=64"}},
		setup{"n_slots=1/slot=16/hbm_rings", "hbm", []string{"defaults.n_slots=1", "defaults.slot_size=16", "defaults.buffer_kind=hbm"}},
		setup{"n_slots=3/slot=8/poll", "hbm", []string{"defaults.n_slots=3", "defaults.slot_size=8", "defaults.backpressure=poll"}},
	)
	for _, s := range setups {
		for _, a := range treeAlgos {
			root := 0
			if a.rooted {
				root = 5
			}
			// The settings are the algorithm's own: tree_allreduce's entry
			// sets buffer_kind, which a defaults.buffer_kind cannot change.
			var sets []string
			for _, item := range s.sets {
				sets = append(sets, "algorithms."+a.name+"."+strings.TrimPrefix(item, "defaults."))
			}
			t.Run(s.name+"/"+a.name, func(t *testing.T) {
				rep := treeRun(t, a.name, Options{WorldSize: 11, Root: root, Counts: []int64{300, 37}, DataSpace: s.space, Sets: sets, RedOp: "avg"})
				treeCheck(t, rep)
			})
		}
	}
}

// treeIdle zeroes everything but the links: no IPCQ overhead, memories
// without latency and with (practically) unlimited bandwidth, instant math.
var treeIdle = []string{
	"defaults.ipcq_overhead_ns=0",
	"system.memory.tcm.latency_ns=0", "system.memory.hbm.latency_ns=0", "system.memory.sram.latency_ns=0",
	"system.memory.tcm.bandwidth_gbps=1000000", "system.memory.hbm.bandwidth_gbps=1000000", "system.memory.sram.bandwidth_gbps=1000000",
	"system.math.bytes_per_ns=1000000", "system.math.latency_ns=0",
}

// treeNbrs lists rank r's tree neighbours in direction order (parent,
// child_left, child_right), as tree_binary installs them.
func treeNbrs(r, p int) []int {
	var out []int
	if r > 0 {
		out = append(out, (r-1)/2)
	}
	for _, c := range []int{2*r + 1, 2*r + 2} {
		if c < p {
			out = append(out, c)
		}
	}
	return out
}

// treeFar is the largest hop distance from start without passing prev.
func treeFar(p, start, prev int) int {
	far := 0
	for _, q := range treeNbrs(start, p) {
		if q != prev {
			far = max(far, 1+treeFar(p, q, start))
		}
	}
	return far
}

// treeBroadcastFormula is tree_broadcast's docstring cost on an idle machine
// with free memories:
//
//	T = (k-1)·tau + max over leaves of Σ over hops (inject_h + alpha_h)
//
// where a rank sends each piece to its downstream neighbours deepest subtree
// first, inject_h is the sum of s·beta over the sends up to and including
// hop h's (m·s·beta for equal links), alpha_h and beta_h are the latency sum
// and inverse bottleneck bandwidth of the hop's path, and tau is the largest
// per-piece injection time of a rank. It assumes no link is shared by two
// tree edges (true for the cases tested).
func treeBroadcastFormula(t *testing.T, world, root int, count int64, placement []int, sets []string) float64 {
	t.Helper()
	cfg, _, err := target.LoadConfig(script.Env{}, "", sets, kernbench.Files)
	if err != nil {
		t.Fatal(err)
	}
	sys := cfg.System
	slot := cfg.Defaults.SlotSize
	elems := slot / 4 // f32
	k := (count + elems - 1) / elems
	if count%k != 0 {
		t.Fatalf("count %d does not split into %d equal pieces", count, k)
	}
	s := float64(count/k) * 4
	pe := func(r int) int {
		if placement != nil {
			return placement[r]
		}
		return r
	}
	// Path of a send between two PEs: pe_noc up, ucie or 2 × pcie between
	// cubes, pe_noc down (memory ports are free here).
	hop := func(a, b int) (alpha, inject float64) {
		ca, cb := pe(a)/sys.PesPerCube, pe(b)/sys.PesPerCube
		alpha = 2 * sys.Links.PeNoc.LatencyNs
		bw := sys.Links.PeNoc.BandwidthGBps
		switch {
		case ca == cb:
		case ca/sys.CubesPerSip == cb/sys.CubesPerSip:
			alpha += sys.Links.Ucie.LatencyNs
			bw = math.Min(bw, sys.Links.Ucie.BandwidthGBps)
		default:
			alpha += 2 * sys.Links.Pcie.LatencyNs
			bw = math.Min(bw, sys.Links.Pcie.BandwidthGBps)
		}
		return alpha, s / bw
	}
	// Orient the tree away from root; order each rank's sends.
	type edge struct{ to, far int }
	downs := make([][]edge, world)
	var visit func(r, from int)
	visit = func(r, from int) {
		for _, q := range treeNbrs(r, world) {
			if q != from {
				downs[r] = append(downs[r], edge{q, treeFar(world, q, r)})
				visit(q, r)
			}
		}
		sort.SliceStable(downs[r], func(i, j int) bool { return downs[r][i].far > downs[r][j].far })
	}
	visit(root, -1)
	tau := 0.0
	for r := range downs {
		sum := 0.0
		for _, e := range downs[r] {
			_, inj := hop(r, e.to)
			sum += inj
		}
		tau = math.Max(tau, sum)
	}
	var arrive func(r int, at float64) float64
	arrive = func(r int, at float64) float64 {
		last, inj := at, 0.0
		for _, e := range downs[r] {
			alpha, x := hop(r, e.to)
			inj += x
			last = math.Max(last, arrive(e.to, at+inj+alpha))
		}
		return last
	}
	return arrive(root, float64(k-1)*tau)
}

// On an idle machine whose only costs are the links, tree_broadcast takes
// its docstring formula's time within 2 %: in one cube (pe_noc links) for
// world sizes with one- and two-child ranks and roots with one to three
// downstream neighbours, and with ranks on different cubes (ucie links).
func TestTreeBroadcastCostFormula(t *testing.T) {
	const count = 64 * 1024 // 64 pieces of 4 KiB f32 with the default slot size
	type tc struct {
		world, root int
		placement   []int
	}
	cases := []tc{
		{2, 0, nil}, {2, 1, nil}, // a chain
		{3, 0, nil}, {3, 1, nil}, // two children; a leaf root
		{5, 0, nil}, {5, 1, nil}, {5, 2, nil}, // one-child rank; a root with a parent and two children
		{7, 0, nil}, {7, 3, nil}, {7, 6, nil}, // full tree
		{8, 0, nil}, {8, 1, nil}, {8, 7, nil}, // a one-child rank on the deepest path
		{2, 0, []int{0, 8}},         // across two cubes (ucie)
		{4, 3, []int{0, 8, 16, 24}}, // a chain 3-1-0-2 across four cubes
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("world=%d/root=%d/placement=%v", c.world, c.root, c.placement), func(t *testing.T) {
			sets := append([]string(nil), treeIdle...)
			if c.placement != nil {
				pl := "system.placement=["
				for i, x := range c.placement {
					if i > 0 {
						pl += ","
					}
					pl += fmt.Sprint(x)
				}
				sets = append(sets, pl+"]")
			}
			rep := treeRun(t, "tree_broadcast", Options{WorldSize: c.world, Root: c.root, Counts: []int64{count}, Sets: sets})
			treeCheck(t, rep)
			sim := rep.Results[0].SimTimeNs
			want := treeBroadcastFormula(t, c.world, c.root, count, c.placement, sets)
			t.Logf("sim %.1f ns, formula %.1f ns", sim, want)
			if math.Abs(sim-want)/want >= 0.02 {
				t.Errorf("sim_time %.1f ns, formula %.1f ns: off by %.2f %% (want < 2 %%)", sim, want, 100*math.Abs(sim-want)/want)
			}
		})
	}
}

// tree_reduce's docstring formula for root 0 on a full tree of depth D in
// one cube, T = (k + D - 1) * 2s/B + D * (alpha + t_comb), holds within 2 %
// with overheads zeroed (alpha = two pe_noc hops, t_comb = 2s/bw_tcm with
// instant math).
func TestTreeReduceCostFormula(t *testing.T) {
	sets := []string{"defaults.ipcq_overhead_ns=0", "system.memory.tcm.latency_ns=0", "system.memory.hbm.latency_ns=0",
		"system.memory.sram.latency_ns=0", "system.math.bytes_per_ns=1000000", "system.math.latency_ns=0"}
	cfg, _, err := target.LoadConfig(script.Env{}, "", sets, kernbench.Files)
	if err != nil {
		t.Fatal(err)
	}
	sys := cfg.System
	const k, count = 64, 64 * 1024 // 64 pieces of 4 KiB (f32)
	s := float64(count/k) * 4
	alpha := 2 * sys.Links.PeNoc.LatencyNs
	tComb := 2 * s / sys.Memory.Tcm.BandwidthGBps
	for _, tc := range []struct{ world, depth int }{{3, 1}, {7, 2}} {
		t.Run(fmt.Sprintf("world=%d", tc.world), func(t *testing.T) {
			rep := treeRun(t, "tree_reduce", Options{WorldSize: tc.world, Counts: []int64{count}, Sets: sets})
			treeCheck(t, rep)
			want := float64(k+tc.depth-1)*2*s/sys.Links.PeNoc.BandwidthGBps + float64(tc.depth)*(alpha+tComb)
			got := rep.Results[0].SimTimeNs
			if math.Abs(got-want) > 0.02*want {
				t.Errorf("sim_time = %.1f ns, formula %.1f ns (%+.2f %%); want within 2 %%", got, want, 100*(got-want)/want)
			}
		})
	}
}
