package ccl

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"kernbench"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
)

// Tests of the 2-D mesh, custom torus and recursive halving-doubling
// allreduce algorithms (algorithms/mesh_allreduce.star, custom_mesh.star,
// rd_allreduce.star), run by file name with the embedded ccl.yaml.

const (
	meshFile   = "algorithms/mesh_allreduce.star"
	meshCustom = "algorithms/custom_mesh.star"
	meshRD     = "algorithms/rd_allreduce.star"
)

var meshCounts = []int64{0, 1, 37, 1000, 5000}

// meshRun runs file with reference verification on top of o.
func meshRun(t *testing.T, file string, o Options) *report.Report {
	t.Helper()
	return runVerified(t, file, o)
}

// meshCheck fails unless every row was verified with no wrong element and
// the phase-2 replay of the op_log (when done) agrees.
func meshCheck(t *testing.T, rep *report.Report) {
	t.Helper()
	checkCorrect(t, rep)
}

type meshCase struct {
	name  string
	world int
	sets  []string
}

func meshShapeCase(rows, cols int) meshCase {
	return meshCase{fmt.Sprintf("shape=%dx%d", rows, cols), rows * cols,
		[]string{fmt.Sprintf("defaults.mesh_shape=[%d,%d]", rows, cols)}}
}

// meshWorlds are the admissible world sizes of each algorithm up to 16.
func meshWorlds(file string) []meshCase {
	var out []meshCase
	switch file {
	case meshFile:
		for _, w := range []int{1, 4, 9, 16} {
			out = append(out, meshCase{fmt.Sprintf("world=%d", w), w, nil})
		}
		for _, s := range [][2]int{{2, 3}, {1, 5}, {3, 1}, {2, 2}, {4, 2}} {
			out = append(out, meshShapeCase(s[0], s[1]))
		}
	case meshRD:
		for _, w := range []int{1, 2, 4, 8, 16} {
			out = append(out, meshCase{fmt.Sprintf("world=%d", w), w, nil})
		}
	case meshCustom:
		for w := 1; w <= 16; w++ {
			out = append(out, meshCase{fmt.Sprintf("world=%d", w), w, nil})
		}
	}
	return out
}

// Every algorithm is correct for every admissible world size up to 16
// (mesh: squares and mesh_shape cases including 1xN, Nx1 and dimensions of
// size 2), for counts that do not split evenly (including 0 and 1), in
// place and out of place.
func TestMeshAlgorithmsWorldSizesAndCounts(t *testing.T) {
	longTest(t)
	for _, file := range []string{meshFile, meshCustom, meshRD} {
		for _, c := range meshWorlds(file) {
			for _, inPlace := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/in_place=%v", strings.TrimSuffix(strings.TrimPrefix(file, "algorithms/"), ".star"), c.name, inPlace)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					rep := meshRun(t, file, Options{WorldSize: c.world, Sets: c.sets, InPlace: inPlace,
						Counts: meshCounts, DType: "f32", RedOp: "sum"})
					if rep.WorldSize != c.world {
						t.Errorf("world_size = %d, want %d", rep.WorldSize, c.world)
					}
					meshCheck(t, rep)
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

// Every dtype class with every reduction (avg divides by world_size at the
// end) at a mid world size: a 2x4 mesh, a 3x4 torus, an 8-rank hypercube.
func TestMeshAlgorithmsDTypesAndRedOps(t *testing.T) {
	for _, c := range []struct {
		file string
		mc   meshCase
	}{
		{meshFile, meshShapeCase(2, 4)},
		{meshCustom, meshCase{"world=12", 12, nil}},
		{meshRD, meshCase{"world=8", 8, nil}},
	} {
		for _, dt := range []string{"f32", "bf16", "i32", "u8"} {
			for _, op := range []string{"sum", "prod", "max", "min", "avg"} {
				name := fmt.Sprintf("%s/%s/%s/%s", strings.TrimPrefix(c.file, "algorithms/"), c.mc.name, dt, op)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					rep := meshRun(t, c.file, Options{WorldSize: c.mc.world, Sets: c.mc.sets,
						Counts: []int64{1000}, DType: dt, RedOp: op, InPlace: op == "avg"})
					if r := rep.Results[0]; r.DType != dt || r.RedOp != op {
						t.Errorf("row is %s %s, want %s %s", r.DType, r.RedOp, dt, op)
					}
					meshCheck(t, rep)
				})
			}
		}
	}
}

// Buffers above the kernels' tcm_limit (256 KiB) are reduced in recvbuf
// itself rather than in a TCM work copy; so are buffers that already live
// in TCM (--data-space tcm). Both paths with ragged counts, in place and
// out of place, and an avg whose division happens on that path.
func TestMeshAlgorithmsWorkInRecvbuf(t *testing.T) {
	cases := []struct {
		file string
		mc   meshCase
	}{
		{meshFile, meshShapeCase(2, 3)},
		{meshFile, meshShapeCase(4, 2)},
		{meshFile, meshShapeCase(1, 5)},
		{meshFile, meshShapeCase(3, 1)},
		{meshCustom, meshCase{"world=6", 6, nil}},
		{meshCustom, meshCase{"world=7", 7, nil}},
		{meshRD, meshCase{"world=2", 2, nil}},
		{meshRD, meshCase{"world=8", 8, nil}},
	}
	for _, c := range cases {
		for _, inPlace := range []bool{false, true} {
			name := fmt.Sprintf("%s/%s/in_place=%v", strings.TrimPrefix(c.file, "algorithms/"), c.mc.name, inPlace)
			t.Run(name+"/data=tcm", func(t *testing.T) {
				t.Parallel()
				rep := meshRun(t, c.file, Options{WorldSize: c.mc.world, Sets: c.mc.sets, InPlace: inPlace,
					Counts: []int64{1, 37, 1000, 5000}, DataSpace: "tcm"})
				meshCheck(t, rep)
			})
			t.Run(name+"/data=hbm/large", func(t *testing.T) {
				t.Parallel()
				rep := meshRun(t, c.file, Options{WorldSize: c.mc.world, Sets: c.mc.sets, InPlace: inPlace,
					Counts: []int64{70001}, DType: "i32", RedOp: "avg"})
				meshCheck(t, rep)
			})
		}
	}
}

// The IPCQ receive rings may live in SRAM or HBM too. A slot there is read
// through the DMA, possibly behind queued loads and stores, so the kernels
// copy it out (recv dst=) instead of risking StaleSlot; 20000 elements at
// 8 ranks is enough for a sender to reuse a slot before a late read.
func TestMeshAlgorithmsBufferKinds(t *testing.T) {
	for _, c := range []struct {
		file string
		mc   meshCase
	}{
		{meshFile, meshShapeCase(2, 4)},
		{meshCustom, meshCase{"world=8", 8, nil}},
		{meshRD, meshCase{"world=8", 8, nil}},
	} {
		for _, kind := range []string{"sram", "hbm"} {
			name := fmt.Sprintf("%s/%s/%s", strings.TrimPrefix(c.file, "algorithms/"), c.mc.name, kind)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				rep := meshRun(t, c.file, Options{WorldSize: c.mc.world, InPlace: kind == "hbm",
					Sets:   append([]string{"defaults.buffer_kind=" + kind}, c.mc.sets...),
					Counts: []int64{37, 20000}})
				if rep.BufferKind != kind {
					t.Errorf("buffer_kind = %q, want %q", rep.BufferKind, kind)
				}
				meshCheck(t, rep)
			})
		}
	}
}

// rd_allreduce needs a power-of-two world size: its neighbors() hook fails
// for 6 ranks, which is an init error (exit 2) naming the problem, before
// anything runs.
func TestMeshRDRejectsNonPowerOfTwo(t *testing.T) {
	for _, world := range []int{3, 6, 12} {
		t.Run(fmt.Sprintf("world=%d", world), func(t *testing.T) {
			rep, err := Run(meshRD, Options{WorldSize: world, Counts: []int64{16}, Embedded: kernbench.Files, Verify: true})
			var f *report.Failure
			if !errors.As(err, &f) {
				t.Fatalf("Run(rd_allreduce, world %d) = %+v, %v; want a *Failure", world, rep, err)
			}
			if f.ErrorKind().Status != report.ExitUsage {
				t.Errorf("exit code = %d, want %d (init error); message %q", f.ErrorKind().Status, report.ExitUsage, f.Msg)
			}
			if f.ErrorKind().Name != "InitError" {
				t.Errorf("kind = %q, want InitError", f.ErrorKind().Name)
			}
			want := fmt.Sprintf("rd_allreduce: world_size %d is not a power of two", world)
			if !strings.Contains(f.Msg, want) {
				t.Errorf("message %q does not contain %q", f.Msg, want)
			}
		})
	}
}

// meshZeroOverheads removes every fixed cost but the links' own latency:
// IPCQ overhead, memory latencies and math time.
var meshZeroOverheads = []string{
	"defaults.ipcq_overhead_ns=0",
	"system.memory.tcm.latency_ns=0",
	"system.memory.hbm.latency_ns=0",
	"system.memory.sram.latency_ns=0",
	"system.math.bytes_per_ns=1000000",
	"system.math.latency_ns=0",
}

// meshLinkParams returns, for a run with sets on the embedded machine, the
// latency (ns) and bottleneck bandwidth (bytes/ns) of a send between two
// PEs of one cube (HBM source, TCM rx ring: hbm port, pe_noc up, pe_noc
// down, tcm port) and the HBM port bandwidth that the DMA's fetches and
// stores use.
func meshLinkParams(t *testing.T, sets []string) (alpha, beta, betaHBM float64) {
	t.Helper()
	cfg, _, err := target.LoadConfig(script.Env{}, "", sets, kernbench.Files)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Defaults.BufferKind != "tcm" {
		t.Fatalf("buffer_kind = %q; the formula assumes tcm rx rings", cfg.Defaults.BufferKind)
	}
	s := cfg.System
	alpha = s.Memory.Hbm.LatencyNs + 2*s.Links.PeNoc.LatencyNs + s.Memory.Tcm.LatencyNs
	beta = math.Min(math.Min(s.Memory.Hbm.BandwidthGBps, s.Links.PeNoc.BandwidthGBps), s.Memory.Tcm.BandwidthGBps)
	return alpha, beta, s.Memory.Hbm.BandwidthGBps
}

// The simulated time on an otherwise idle machine is within 2 % of the
// docstring formulas, computed from the link parameters. Ranks of one cube
// (8 PEs), so every hop crosses pe_noc up and pe_noc down; 512 KiB per rank
// is above the kernels' tcm_limit, so the buffers are reduced in HBM. The
// HBM fetches and stores stay inside the PE, so they do not share the NoC
// injection with the sends: DMA virtual channels), and the classic alpha-beta
// formulas hold:
//
//	rd:   T = sum_k [2 alpha + 2 b_k / beta],  b_k = n e / 2^(k+1)
//	mesh: T = 3 alpha + 2 (B_r + B_c)/beta,
//	      B_r = (C-1) n e / C, B_c = (R-1) n e / (R C)
//
// checked with the shipped memories and with memory bandwidths raised.
func TestMeshCostFormula(t *testing.T) {
	const count = 131072 // f32: 512 KiB per rank
	const e = 4.0
	n := float64(count)
	for _, fast := range []bool{false, true} {
		sets := append([]string(nil), meshZeroOverheads...)
		if fast {
			sets = append(sets, "system.memory.hbm.bandwidth_gbps=1000000", "system.memory.tcm.bandwidth_gbps=1000000")
		}
		alpha, beta, _ := meshLinkParams(t, sets)

		t.Run(fmt.Sprintf("rd_allreduce/world=8/fast_memory=%v", fast), func(t *testing.T) {
			const p, levels = 8, 3
			want := 0.0
			for k := 0; k < levels; k++ {
				want += 2*alpha + n*e/math.Pow(2, float64(k+1))*2/beta
			}
			rep := meshRun(t, meshRD, Options{WorldSize: p, Sets: sets, Counts: []int64{count}})
			meshCheck(t, rep)
			meshCheckTime(t, rep.Results[0].SimTimeNs, want)
		})
		t.Run(fmt.Sprintf("mesh_allreduce/shape=2x4/fast_memory=%v", fast), func(t *testing.T) {
			const rows, cols = 2, 4
			br := (cols - 1) * n * e / cols
			bc := (rows - 1) * n * e / (rows * cols)
			want := 3*alpha + 2*(br+bc)/beta
			rep := meshRun(t, meshFile, Options{WorldSize: rows * cols, Counts: []int64{count},
				Sets: append([]string{fmt.Sprintf("defaults.mesh_shape=[%d,%d]", rows, cols)}, sets...)})
			meshCheck(t, rep)
			meshCheckTime(t, rep.Results[0].SimTimeNs, want)
		})
	}
}

func meshCheckTime(t *testing.T, got, want float64) {
	t.Helper()
	t.Logf("sim_time %.1f ns, formula %.1f ns (%+.2f %%)", got, want, 100*(got-want)/want)
	if math.Abs(got-want) > 0.02*want {
		t.Errorf("sim_time = %.1f ns, want %.1f ns ± 2 %%", got, want)
	}
}
