package ccl

import (
	"fmt"
	"testing"

	"kernbench"
	"kernbench/engine/machine"
)

// watchPreRun makes every verified run check, as phase 2 starts, that the
// copy-on-first-write pre-run image (Region.PreRun) equals a full copy of
// the memory taken when the image was started. A phase-1 write that did
// not go through Memory.Bytes leaves its block unsaved and changed, so the
// two differ; the first difference is reported through found.
func watchPreRun(t *testing.T, found func(mem *machine.Memory, off int64)) (runs *int) {
	t.Helper()
	runs = new(int)
	onKeepPreRun = func(m *machine.Machine) func() {
		full := m.Image()
		return func() {
			*runs++
			for i, mem := range m.Mems {
				var want []byte
				if i < len(full) {
					want = full[i]
				}
				n := max(int64(len(want)), mem.Size())
				if n == 0 {
					continue
				}
				got := machine.Region{Mem: mem, Off: 0, N: n}.PreRun()
				for off := range got {
					var w byte
					if off < len(want) {
						w = want[off]
					}
					if got[off] != w {
						found(mem, int64(off))
						return
					}
				}
			}
		}
	}
	t.Cleanup(func() { onKeepPreRun = nil })
	return runs
}

// Every write of simulated memory in phase 1 saves its block first: for
// every shipped algorithm (and a few settings), MSCCL schedules, the host
// bench and the L3/L2 benches, the kept
// image is the memory as it was before the run.
func TestPreRunImageSeesEveryWrite(t *testing.T) {
	var current string
	runs := watchPreRun(t, func(mem *machine.Memory, off int64) {
		t.Errorf("%s: %v offset %d changed in phase 1 without saving its pre-run bytes (a write that bypassed Memory.Bytes)", current, mem, off)
	})
	type job struct {
		arg  string
		opts Options
	}
	var jobs []job
	for _, algo := range []string{"alltoall", "custom_mesh", "hier_allreduce", "mesh_allreduce", "rd_allreduce", "ring_allgather",
		"ring_allreduce", "ring_allreduce_bidir", "ring_allreduce_manual", "ring_allreduce_unidir", "ring_reduce_scatter",
		"tree_allreduce", "tree_broadcast", "tree_reduce"} {
		jobs = append(jobs, job{algo, Options{WorldSize: 8, Counts: []int64{5000}}})
	}
	jobs = append(jobs,
		job{"ring_allreduce", Options{WorldSize: 4, Counts: []int64{3000}, InPlace: true}},
		job{"ring_allreduce", Options{WorldSize: 8, Counts: []int64{37, 5000}, DataSpace: "tcm", Sets: []string{"defaults.buffer_kind=hbm"}}},
		job{"ring_allreduce_manual", Options{WorldSize: 8, Counts: []int64{5000}, DataSpace: "sram", Sets: []string{"defaults.buffer_kind=sram", "defaults.backpressure=poll"}}},
		job{"tree_allreduce", Options{WorldSize: 5, Counts: []int64{777}, DType: "bf16", RedOp: "max"}},
		job{"../../testdata/msccl/allreduce_ring_ch2_8.xml", Options{Counts: []int64{4096, 36000}}},
		job{"../../testdata/msccl/alltoall_two_step_8.xml", Options{Counts: []int64{36000}}},
		job{"benches/ccl_allreduce.star", Options{WorldSize: 4, Counts: []int64{1000}}},
		job{"benches/l3l2_stream.star", Options{}},
		job{"benches/l3l2_queue.star", Options{}})
	for _, j := range jobs {
		current = fmt.Sprintf("%s %+v", j.arg, j.opts.Counts)
		before := *runs
		j.opts.Embedded, j.opts.Verify = kernbench.Files, true
		rep, err := Run(j.arg, j.opts)
		if err != nil {
			t.Errorf("%s: %v", current, err)
			continue
		}
		if *runs == before {
			t.Errorf("%s: no verified run kept a pre-run image", current)
		}
		for _, r := range rep.Results {
			if r.Phase2Match == nil || !*r.Phase2Match {
				t.Errorf("%s: phase2_match %v (%s), want true", current, r.Phase2Match, r.Phase2)
			}
		}
	}
}

// The check above catches a write that bypasses Memory.Bytes (here one
// through View, which is for reading), which phase 2 alone would miss.
func TestPreRunWatchCatchesBypassingWrite(t *testing.T) {
	var at []string
	watchPreRun(t, func(mem *machine.Memory, off int64) { at = append(at, fmt.Sprintf("%v+%d", mem, off)) })
	afterPhase1 = func(m *machine.Machine) {
		m.Ranks[3].TCM.View(0, 1)[0] ^= 0xff
	}
	defer func() { afterPhase1 = nil }()
	if _, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 4, Counts: []int64{4096}, Verify: true}); err != nil {
		t.Fatal(err)
	}
	if len(at) != 1 || at[0] != "tcm[pe 3]+0" {
		t.Errorf("differences found at %v, want tcm[pe 3]+0", at)
	}
}
