package trace

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
)

// step is something partition part records at its time at.
type step struct {
	part int
	at   sim.Time
	rec  func(r *Recorder, at sim.Time)
}

// twoSIPs is a run on two partitions, listed in (time, partition) order:
// kernel and DMA slices, a delivery into an rx track, link counters, an
// arrow from SIP 0 to SIP 1, one within SIP 1, and an end whose start
// was never recorded.
func twoSIPs() []step {
	return []step{
		{0, 10, func(r *Recorder, at sim.Time) { r.Slice(1, TidKernel, "kernel", "send", at, at+5, nil) }},
		{0, 10, func(r *Recorder, at sim.Time) { r.FlowStart("0/E/0", 1, TidKernel, at) }},
		{1, 10, func(r *Recorder, at sim.Time) { r.FlowStart("1/W/0", 2, TidKernel, at) }},
		{0, 12, func(r *Recorder, at sim.Time) { r.Counter(LinksPid, "pcie up s0", at, 1) }},
		{1, 15, func(r *Recorder, at sim.Time) { r.Slice(2, TidVCComm, "vc_comm", "dma", at-3, at, nil) }},
		{1, 20, func(r *Recorder, at sim.Time) { r.Instant(2, r.RxTid(2, "W"), "deliver #0 from rank 0", at, nil) }},
		{1, 20, func(r *Recorder, at sim.Time) { r.FlowEnd("0/E/0", 2, TidKernel, at) }},
		{0, 22, func(r *Recorder, at sim.Time) { r.FlowEnd("1/W/0", 1, TidKernel, at) }},
		{1, 25, func(r *Recorder, at sim.Time) { r.FlowEnd("9/X/9", 2, TidKernel, at) }},
		{1, 30, func(r *Recorder, at sim.Time) { r.Counter(LinksPid, "pcie down s1", at, 0) }},
	}
}

// record plays the steps in the order given on recorders split from one
// (the threads' interleaving), and merges them.
func record(t *testing.T, steps []step, order []int) string {
	t.Helper()
	var now [2]sim.Time
	root := New()
	root.Process(1, "rank 0")
	root.Process(2, "rank 1")
	parts := root.Split([]func() sim.Time{func() sim.Time { return now[0] }, func() sim.Time { return now[1] }})
	for _, i := range order {
		s := steps[i]
		now[s.part] = s.at
		s.rec(parts[s.part], s.at)
	}
	merged, err := Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := merged.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Rule (engine/sim/partition.go, trace per SIP): the merged trace is what
// one recorder writes for the same events recorded in (time, partition)
// order, arrows between partitions included, whatever the interleaving
// of the partitions' recording.
func TestMergeSameAsOneRecorderForEveryInterleaving(t *testing.T) {
	steps := twoSIPs()
	one := New()
	one.Process(1, "rank 0")
	one.Process(2, "rank 1")
	for _, s := range steps {
		s.rec(one, s.at)
	}
	var b strings.Builder
	if err := one.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	want := b.String()
	if !strings.Contains(want, `"ph":"s"`) || strings.Count(want, `"ph":"f"`) != 2 {
		t.Fatalf("the reference trace lacks its two arrows:\n%s", want)
	}
	var p0, p1, listed []int
	for i, s := range steps {
		listed = append(listed, i)
		if s.part == 0 {
			p0 = append(p0, i)
		} else {
			p1 = append(p1, i)
		}
	}
	for name, order := range map[string][]int{
		"as listed":         listed,
		"partition 0 first": append(append([]int(nil), p0...), p1...),
		"partition 1 first": append(append([]int(nil), p1...), p0...),
	} {
		if diff := cmp.Diff(want, record(t, steps, order)); diff != "" {
			t.Errorf("%s: merged trace differs from one recorder's (-one +merged):\n%s", name, diff)
		}
	}
}

// Rule: an arrow's end whose process the filter leaves out drops the
// arrow and counts as dropped, as on one recorder.
func TestMergeDropsFilteredFlowEnd(t *testing.T) {
	root := New()
	root.Only([]int{1}, nil)
	var now sim.Time
	clock := func() sim.Time { return now }
	parts := root.Split([]func() sim.Time{clock, clock})
	parts[0].FlowStart("k", 1, TidKernel, 1)
	now = 5
	parts[1].FlowEnd("k", 2, TidKernel, 5)
	merged, err := Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	if merged.Len() != 0 || merged.Dropped() != 1 {
		t.Errorf("merged: %d events, %d dropped; want 0 and 1", merged.Len(), merged.Dropped())
	}
}

func TestMergeRefusesRecorderNotSplit(t *testing.T) {
	if _, err := Merge([]*Recorder{New()}); err == nil || !strings.Contains(err.Error(), "partition 0") {
		t.Fatalf("err = %v, want partition 0's recorder refused", err)
	}
}
