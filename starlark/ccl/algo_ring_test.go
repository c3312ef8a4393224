package ccl

import (
	"fmt"
	"kernbench/starlark/report"
	"math"
	"testing"
)

// The ring-family algorithms under algorithms/ (run as files, without a
// ccl.yaml entry: their TOPOLOGY and COLLECTIVE constants choose the bench).
var ringalgoAlgorithms = []struct {
	file, collective, topology string
	reduces                    bool
}{
	{"ring_reduce_scatter.star", "reduce_scatter", "ring_1d", true},
	{"ring_allgather.star", "allgather", "ring_1d", false},
	{"ring_allreduce_bidir.star", "allreduce", "ring_1d", true},
	{"ring_allreduce_unidir.star", "allreduce", "ring_1d_unidir", true},
	{"alltoall.star", "alltoall", "custom", false},
}

// ringalgoRun runs algorithms/<file> with the embedded ccl.yaml and reference
// verification on top of o, and checks that every count got its row.
func ringalgoRun(t *testing.T, file string, o Options) *report.Report {
	t.Helper()
	return runVerified(t, "algorithms/"+file, o)
}

// ringalgoCheck fails unless every row was verified with no wrong element.
func ringalgoCheck(t *testing.T, rep *report.Report) {
	t.Helper()
	checkCorrect(t, rep)
}

// Every algorithm is correct for world sizes 1..16 (one and two cubes of the
// default machine), counts that split into nothing, one element and sizes
// not divisible by the world size or the slot, in place and out of place.
func TestRingAlgoWorldSizesCountsInPlace(t *testing.T) {
	longTest(t)
	counts := []int64{0, 1, 37, 1000, 5000}
	for _, a := range ringalgoAlgorithms {
		for world := 1; world <= 16; world++ {
			for _, inPlace := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/world=%d/in_place=%v", a.file, world, inPlace), func(t *testing.T) {
					t.Parallel()
					rep := ringalgoRun(t, a.file, Options{WorldSize: world, InPlace: inPlace, Counts: counts,
						Collective: a.collective, DType: "f32", RedOp: "sum"})
					if rep.Collective != a.collective || rep.Topology != a.topology || rep.WorldSize != world {
						t.Errorf("ran %s on %s with world_size %d, want %s on %s with %d",
							rep.Collective, rep.Topology, rep.WorldSize, a.collective, a.topology, world)
					}
					ringalgoCheck(t, rep)
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

// The reducing algorithms match the reference for f32/f16/i32/u8 with every
// reduction (avg: summed, then divided by the world size) at an odd and an
// even world size; the others move every dtype unchanged.
func TestRingAlgoDTypesAndRedOps(t *testing.T) {
	dtypes := []string{"f32", "f16", "i32", "u8"}
	for _, a := range ringalgoAlgorithms {
		redops := []string{"sum"}
		if a.reduces {
			redops = []string{"sum", "prod", "max", "min", "avg"}
		}
		for _, world := range []int{3, 8} {
			for _, dt := range dtypes {
				for _, op := range redops {
					t.Run(fmt.Sprintf("%s/world=%d/%s/%s", a.file, world, dt, op), func(t *testing.T) {
						t.Parallel()
						rep := ringalgoRun(t, a.file, Options{WorldSize: world, Counts: []int64{1000, 37},
							Collective: a.collective, DType: dt, RedOp: op, InPlace: op == "avg"})
						wantOp := op
						if !a.reduces {
							wantOp = "none" // nccl-tests' redop column for collectives without a reduction
						}
						for _, r := range rep.Results {
							if r.DType != dt || r.RedOp != wantOp {
								t.Errorf("row is %s %s, want %s %s", r.DType, r.RedOp, dt, wantOp)
							}
						}
						ringalgoCheck(t, rep)
					})
				}
			}
		}
	}
}

// alltoall also runs on a ring (store-and-forward relay) when a ring
// topology is chosen, and falls back to the ring above MESH_MAX ranks.
func TestRingAlgoAlltoallRelay(t *testing.T) {
	for _, topo := range []string{"ring_1d", "ring_1d_unidir"} {
		for _, world := range []int{2, 3, 4, 7, 16} {
			for _, inPlace := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/world=%d/in_place=%v", topo, world, inPlace), func(t *testing.T) {
					t.Parallel()
					rep := ringalgoRun(t, "alltoall.star", Options{WorldSize: world, Topology: topo, InPlace: inPlace,
						Counts: []int64{0, 1, 37, 1000}, Collective: "alltoall", DType: "f16"})
					if rep.Topology != topo {
						t.Errorf("topology = %q, want %q", rep.Topology, topo)
					}
					ringalgoCheck(t, rep)
				})
			}
		}
	}
	t.Run("world=33/two_sips", func(t *testing.T) {
		t.Parallel()
		rep := ringalgoRun(t, "alltoall.star", Options{WorldSize: 33, Counts: []int64{37}, Collective: "alltoall",
			Sets: []string{"system.sips=2"}})
		ringalgoCheck(t, rep)
	})
}

// The rx rings may live in any memory kind (slots are then read through
// DMA), and the bench's buffers in TCM or SRAM.
func TestRingAlgoBufferKinds(t *testing.T) {
	for _, a := range ringalgoAlgorithms {
		for _, kind := range []string{"hbm", "sram"} {
			t.Run(fmt.Sprintf("%s/%s", a.file, kind), func(t *testing.T) {
				t.Parallel()
				rep := ringalgoRun(t, a.file, Options{WorldSize: 8, Counts: []int64{37, 5000}, Collective: a.collective,
					DataSpace: map[string]string{"hbm": "tcm", "sram": "sram"}[kind], Sets: []string{"defaults.buffer_kind=" + kind}})
				if rep.BufferKind != kind {
					t.Errorf("buffer_kind = %q, want %q", rep.BufferKind, kind)
				}
				ringalgoCheck(t, rep)
			})
		}
	}
}

// ringalgoMachine is the part of the machine the allgather cost formula
// reads: link and memory parameters in GB/s and ns.
type ringalgoMachine struct {
	nocBW, nocLat, ucieBW, ucieLat, hbmBW, tcmBW float64
}

func (m ringalgoMachine) sets() []string {
	return []string{
		// Overheads and memory latencies off, math practically free: what is
		// left is the wire and the memory ports' bandwidth.
		"defaults.ipcq_overhead_ns=0",
		"system.memory.tcm.latency_ns=0",
		"system.memory.hbm.latency_ns=0",
		"system.memory.sram.latency_ns=0",
		"system.math.bytes_per_ns=1000000",
		"system.math.latency_ns=0",
		fmt.Sprintf("system.links.pe_noc.bandwidth_gbps=%g", m.nocBW),
		fmt.Sprintf("system.links.pe_noc.latency_ns=%g", m.nocLat),
		fmt.Sprintf("system.links.ucie.bandwidth_gbps=%g", m.ucieBW),
		fmt.Sprintf("system.links.ucie.latency_ns=%g", m.ucieLat),
		fmt.Sprintf("system.memory.hbm.bandwidth_gbps=%g", m.hbmBW),
		fmt.Sprintf("system.memory.tcm.bandwidth_gbps=%g", m.tcmBW),
	}
}

// ringalgoAllgatherFormula is the cost formula of ring_allgather.star's
// docstring for p ranks on consecutive PEs (8 per cube), n bytes per rank,
// 4 KiB slots and 8 of them: B and a are the bandwidth and latency of the
// slowest ring hop, B_m and B_t those of the HBM holding the buffers and of
// the TCM holding rx slots and staging. The k = 1 form assumes equal hops
// (p <= 8). In place or not makes no difference.
func ringalgoAllgatherFormula(m ringalgoMachine, p int, n float64, _ bool) float64 {
	const slot, nSlots = 4096, 8
	b, a := m.nocBW, 2*m.nocLat
	if p > 8 {
		b, a = math.Min(m.nocBW, m.ucieBW), 2*m.nocLat+m.ucieLat
	}
	q := float64(p)
	if k := math.Ceil(n / slot); k >= 2 {
		// Pipelined: the link is the bottleneck; the HBM stores of received
		// pieces and the own chunk's copy stay inside the PE and overlap the
		// sends (they do not share the NoC injection: DMA virtual channels).
		// The last piece's slot read and HBM store are the pipeline fill.
		// (Where the TCM port is as busy as the link, B_t = 4 B as on the
		// shipped machine, its contention adds up to 2 s/B_t more.)
		g := math.Min(nSlots, k)
		s := n / (math.Ceil(k/g) * g)
		return (q-1)*n/b + a + s/m.tcmBW + s/m.hbmBW
	}
	// Store-and-forward: each hop adds its latency, its transfer and the
	// TCM staging (slot read, staging store) of the forwarded piece; the
	// last hop ends with the HBM store.
	return (q-1)*(a+n/b) + (2*q-3)*n/m.tcmBW + n/m.hbmBW
}

// On an idle machine with overheads and memory latencies zeroed, the
// simulated allgather time is within 2 % of its docstring formula: pipelined
// (several slots per chunk) at 2..16 ranks, including rings through two
// cubes, and store-and-forward (one slot or less per chunk) inside a cube,
// for two sets of link and memory parameters.
func TestRingAlgoAllgatherCostFormula(t *testing.T) {
	machines := []ringalgoMachine{
		{nocBW: 128, nocLat: 10, ucieBW: 64, ucieLat: 50, hbmBW: 512, tcmBW: 512}, // the shipped values
		{nocBW: 100, nocLat: 25, ucieBW: 40, ucieLat: 80, hbmBW: 1024, tcmBW: 512},
	}
	type point struct {
		p     int
		count int64
	}
	var points []point
	// Bandwidth-dominated sizes (many pieces per chunk): the alpha-beta
	// form is what the check is about. Store-and-forward sizes (one piece)
	// are latency-dominated and covered by the correctness tests.
	for _, p := range []int{2, 3, 5, 8} {
		points = append(points, point{p, 16384})
	}
	points = append(points, point{8, 65536}, point{9, 16384}, point{12, 16384}, point{16, 16384})
	for mi, m := range machines {
		for _, pt := range points {
			for _, inPlace := range []bool{false, true} {
				t.Run(fmt.Sprintf("machine=%d/world=%d/count=%d/in_place=%v", mi, pt.p, pt.count, inPlace), func(t *testing.T) {
					t.Parallel()
					rep := ringalgoRun(t, "ring_allgather.star", Options{WorldSize: pt.p, Counts: []int64{pt.count},
						InPlace: inPlace, Collective: "allgather", DType: "f32", Sets: m.sets()})
					ringalgoCheck(t, rep)
					got := rep.Results[0].SimTimeNs
					want := ringalgoAllgatherFormula(m, pt.p, float64(pt.count*4), inPlace)
					if math.Abs(got-want) > 0.02*want {
						t.Errorf("sim_time = %.1f ns, formula %.1f ns (%+.2f %%); want within 2 %%", got, want, 100*(got-want)/want)
					} else {
						t.Logf("sim_time = %.1f ns, formula %.1f ns (%+.2f %%)", got, want, 100*(got-want)/want)
					}
				})
			}
		}
	}
}
