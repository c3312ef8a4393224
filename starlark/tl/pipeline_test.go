package tl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/engine/trace"
)

// pipelineCase is a run of testdata/pipeline.star: its IPCQ
// configuration, its function (ring, or ring_threads for a kernel with a
// thread) and whether the run is traced.
type pipelineCase struct {
	name   string
	cfg    machine.IPCQConfig
	fn     string
	traced bool
}

// pipelineRun runs a function of testdata/pipeline.star on 4 ranks with
// the fused primitives' waits as steps or as the process's blocking
// calls, and returns everything observable (each rank's time per
// activity and counts of operations, the final time, the count of
// events; traced, every event of the trace) and the count of coroutine
// resumptions.
func pipelineRun(t *testing.T, c pipelineCase, jitter uint64, steps bool) ([]string, uint64) {
	out, resumed, _, _ := pipelineRunStaging(t, c, jitter, steps)
	return out, resumed
}

// pipelineRunStaging is pipelineRun that also returns the time the
// processes spent waiting for sends to finish reading (a staging slot's,
// the only such wait of the fixture) and the steps' hand-overs for it.
func pipelineRunStaging(t *testing.T, c pipelineCase, jitter uint64, steps bool) (out []string, resumed uint64, flush sim.Time, staging int) {
	t.Helper()
	setPieceSteps(steps)
	defer setPieceSteps(true)
	name := c.fn
	if name == "" {
		name = "ring"
	}
	fn := fixtureFunc(t, loadFixtureCfg(t, "pipeline.star", c.cfg), name)
	w := newWorldCfg(t, 4, c.cfg)
	w.s.SetJitter(jitter)
	var rec *trace.Recorder
	if c.traced {
		rec = trace.New()
		w.m.EnableTrace(rec)
	}
	if err := w.run(t, fn); err != nil {
		t.Fatal(err)
	}
	if rec != nil {
		if rec.Len() == 0 {
			t.Fatal("the trace recorded nothing")
		}
		var js strings.Builder
		if err := rec.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.SplitAfter(js.String(), "},")...)
	}
	for r, k := range w.kernels {
		out = append(out, fmt.Sprintf("rank %d spent %v, stats %+v", r, k.Proc.Spent, *k.Stats))
		flush += k.Proc.Spent[machine.ActFlush]
		staging += k.HandOvers().Staging
	}
	out = append(out, fmt.Sprintf("%v: %d events", w.s.Now(), w.s.Events()))
	return out, w.s.Resumptions(), flush, staging
}

// Rule (docs/architecture.md, engine/sim: event order and jitter): a fused
// primitive's pipeline continued in steps (its waits for messages, loads and
// its forwarded pieces' sends) gives the run of the process's own blocking
// calls, event for event: the same times, time per activity, operations and
// count of events, under jitter too; with rings in HBM (each piece is copied
// into an inbox first, and the steps hand over to the process when a staging
// slot is still read by a send) and a local operand still being stored into;
// and with polling, where the process does every wait either way. With steps
// the processes resume far less often.
func TestPipelineStepsSameRunAsBlockingCalls(t *testing.T) {
	tcm := testIPCQ()
	hbm := testIPCQ()
	hbm.BufferKind = machine.HBM
	poll := testIPCQ()
	poll.Backpressure = machine.Poll
	for _, c := range []pipelineCase{
		{name: "tcm", cfg: tcm}, {name: "hbm_rings", cfg: hbm}, {name: "poll", cfg: poll},
		{name: "threads", cfg: tcm, fn: "ring_threads"}, {name: "threads_hbm_rings", cfg: hbm, fn: "ring_threads"},
		{name: "traced", cfg: tcm, traced: true}, {name: "traced_hbm_rings", cfg: hbm, traced: true},
		{name: "traced_threads", cfg: tcm, fn: "ring_threads", traced: true},
	} {
		for _, jitter := range []uint64{0, 1, 5, 42} {
			want, blocking := pipelineRun(t, c, jitter, false)
			got, stepped := pipelineRun(t, c, jitter, true)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s, jitter %d: the run with steps differs from the blocking one (-blocking +steps):\n%s", c.name, jitter, diff)
			}
			if 2*stepped > blocking {
				t.Errorf("%s, jitter %d: %d resumptions with steps, %d without: the steps did not halve them", c.name, jitter, stepped, blocking)
			}
		}
	}
}

// settleRun runs function name of testdata/pipeline_settle.star on 2
// ranks of a machine whose math is slow, with the fused primitives' waits
// as steps or as the process's blocking calls, and returns everything
// observable (as pipelineRun, with the run's error) and rank 1's
// hand-overs (prims.Kernel.HandOvers).
func settleRun(t *testing.T, name string, jitter uint64, steps bool) (out []string, window, dst int) {
	t.Helper()
	setPieceSteps(steps)
	defer setPieceSteps(true)
	cfg := testIPCQ()
	fn := fixtureFunc(t, loadFixtureCfg(t, "pipeline_settle.star", cfg), name)
	p := testParams()
	// A piece's reduction takes about 5 us: its store is still under way
	// when the next call reaches it.
	p.Math.BytesPerUs = 50
	w := newWorldParams(t, 2, p, cfg)
	w.s.SetJitter(jitter)
	err := w.run(t, fn)
	for r, k := range w.kernels {
		out = append(out, fmt.Sprintf("rank %d spent %v, stats %+v", r, k.Proc.Spent, *k.Stats))
	}
	out = append(out, fmt.Sprintf("%v: %d events, error %v", w.s.Now(), w.s.Events(), err))
	h := w.kernels[1].HandOvers()
	window, dst = h.Window, h.Dst
	return out, window, dst
}

// Rule (docs/architecture.md, engine/sim: event order): when a step of a
// fused primitive's pipeline comes to a store of the kernel still under way
// into what it is about to load (the local operand's piece) or store (the dst
// piece), it hands the pipeline over to the process, which waits for the
// store; the run is that of the process's own blocking calls, event for event
// (the same times, time per activity, operations, count of events and error),
// under jitter too, and the load sees the stored data. The test fails if the
// run no longer takes the hand-over it checks.
func TestPipelineStepsHandOverPendingStore(t *testing.T) {
	for _, c := range []struct {
		name    string
		wantErr string // "" for none
	}{{"window", ""}, {"dst", "WriteWriteHazard"}} {
		for _, jitter := range []uint64{0, 1, 5} {
			want, _, _ := settleRun(t, c.name, jitter, false)
			got, window, dst := settleRun(t, c.name, jitter, true)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s, jitter %d: the run with steps differs from the blocking one (-blocking +steps):\n%s", c.name, jitter, diff)
			}
			last := got[len(got)-1]
			if c.wantErr == "" && !strings.HasSuffix(last, "error <nil>") || c.wantErr != "" && !strings.Contains(last, c.wantErr) {
				t.Errorf("%s, jitter %d: %s; want error %q", c.name, jitter, last, c.wantErr)
			}
			if handed := map[string]int{"window": window, "dst": dst}[c.name]; handed == 0 {
				t.Errorf("%s, jitter %d: no step handed the pipeline over to the process for the pending store (the fixture no longer tests it)", c.name, jitter)
			}
		}
	}
}

// Rule (docs/architecture.md, IPCQ: credits): a step hands a fused
// primitive's pipeline over to the process for a staging slot only when a
// send still reads that slot, for only then does the process wait (a staging
// slot comes round again n_slots + 1 sends later, past the ring's
// backpressure): where the blocking run never waits for a send to finish
// reading, no step hands over (SendsMayRead's bounds span every send from the
// PE's TCM, so they cover the staging ring whenever a piece is in flight).
func TestPipelineStepsStagingHandOverOnlyWhenRead(t *testing.T) {
	tcm := testIPCQ()
	hbm := testIPCQ()
	hbm.BufferKind = machine.HBM
	for _, c := range []pipelineCase{{name: "tcm", cfg: tcm}, {name: "hbm_rings", cfg: hbm}} {
		for _, jitter := range []uint64{0, 1, 5, 42} {
			_, _, flush, _ := pipelineRunStaging(t, c, jitter, false)
			_, _, _, staging := pipelineRunStaging(t, c, jitter, true)
			if flush == 0 && staging > 0 {
				t.Errorf("%s, jitter %d: the steps handed over %d times for a staging slot that no send reads (the blocking run never waits)", c.name, jitter, staging)
			}
		}
	}
}
