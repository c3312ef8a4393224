package mock

import (
	"fmt"
	"testing"

	"kernbench"
	"kernbench/engine/config"
	"kernbench/engine/dtype"
	"kernbench/starlark/ccl"
)

// The mock runtime agrees with the full simulation on the final data of
// every shipped algorithm (issue: mock runtime), and finds nothing wrong
// over several interleavings.
func TestMockAgreesWithSimulation(t *testing.T) {
	cfg := config.Default()
	sizes := map[string][]int{ // admissible world sizes per topology
		"ring_1d": {1, 3, 4}, "ring_1d_unidir": {1, 3, 4}, "tree_binary": {1, 3, 6},
		"mesh_2d": {1, 4, 9}, "custom": {1, 2, 4},
	}
	for _, name := range cfg.AlgorithmNames {
		a := cfg.Algorithms[name]
		for _, ws := range sizes[a.Topology] {
			t.Run(fmt.Sprintf("%s/world=%d", name, ws), func(t *testing.T) {
				const count = 777
				full, err := ccl.Run(name, ccl.Options{Embedded: kernbench.Files, WorldSize: ws, Counts: []int64{count}, Verify: true, KeepOutputs: true})
				if err != nil {
					t.Fatal(err)
				}
				mock, err := RunKernel(Options{Path: a.Module, Embedded: kernbench.Files, WorldSize: ws, Count: count, Schedules: 3, Seed: 5})
				if err != nil {
					t.Fatal(err)
				}
				if full.Results[0].Wrong != 0 || mock.Wrong != 0 {
					t.Fatalf("wrong elements: simulation %d, mock %d", full.Results[0].Wrong, mock.Wrong)
				}
				dt, _ := dtype.Parse(full.Results[0].DType)
				for r := range full.Results[0].Outputs {
					// Same reduction order, so float results agree within
					// the reference tolerance (in practice bit for bit).
					if w, i := dtype.CountWrong(dt, dtype.Sum, ws, mock.Outputs[r], full.Results[0].Outputs[r]); w > 0 {
						t.Errorf("rank %d: mock and simulation differ at %d element(s), first index %d", r, w, i)
					}
				}
				if full.Results[0].Ops.Send != mock.Sends {
					t.Errorf("sends: simulation %d, mock %d", full.Results[0].Ops.Send, mock.Sends)
				}
			})
		}
	}
}

// Rule (issue 12 item 4): schedules=N always includes the default order as
// schedule 0, whatever the seed, and the other schedules differ from it.
func TestMockScheduleZeroIsDefaultOrder(t *testing.T) {
	for _, seed := range []uint64{0, 1, 5, 1 << 40} {
		if s := scheduleSeed(seed, 0); s != 0 {
			t.Errorf("seed %d: schedule 0 has jitter seed %d, want 0 (the default order)", seed, s)
		}
		if s := scheduleSeed(seed, 1); s == 0 {
			t.Errorf("seed %d: schedule 1 is the default order again", seed)
		}
	}
}

// A fused primitive writes dst piece by piece, each after receiving the
// message it is made of, so its dst may be the source of one of the
// rank's earlier sends as long as each piece is written after that send's
// piece was taken. The in-place ring at two ranks does this (a rank
// receives the reduced chunk into the chunk its first send read, from the
// peer that reduced that send): the mock once checked the whole dst when
// the call began, before the peer had taken the send, and reported a
// SendBufferHazard in schedule 2.
func TestMockInPlaceRingReceivesBehindItsSend(t *testing.T) {
	for _, module := range []string{"ring_allreduce.star", "ring_allreduce_bidir.star", "ring_allreduce_unidir.star"} {
		t.Run(module, func(t *testing.T) {
			r, err := RunKernel(Options{Path: module, Embedded: kernbench.Files, WorldSize: 2, Count: 65536, InPlace: true, Schedules: 10, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if r.Wrong != 0 {
				t.Errorf("%d wrong elements (schedule %d)", r.Wrong, r.FailingSchedule)
			}
		})
	}
}
