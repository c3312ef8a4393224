package oplog

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/dtype"
	"kernbench/engine/sim"
)

// partWrite is a record a partition writes, at its clock's time.
type partWrite struct {
	part int
	at   sim.Time
	r    Record
}

// partitionScenario is the scenario's dataflow on two SIPs: each
// partition fetches two tiles of its own memory, adds them and stores the
// sum, numbering its tiles 1, 2, 3; SIP 0 copies its sum on and sends it
// to SIP 1, whose far half writes the send's record (and then the recv).
func partitionScenario() (Image, []partWrite) {
	initial := Image{
		{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // SIP 0's memory
		{5, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // SIP 1's memory
	}
	w := []partWrite{
		{0, 10, Record{Kind: KindMemory, Name: "fetch", Src: addr(0, 0), NBytes: 4, TileOut: 1, TEnd: 10}},
		{1, 12, Record{Kind: KindMemory, Name: "fetch", Src: addr(1, 0), NBytes: 4, TileOut: 1, TEnd: 12}},
		{0, 11, Record{Kind: KindMemory, Name: "fetch", Src: addr(0, 4), NBytes: 4, TileOut: 2, TEnd: 11}},
		{1, 12, Record{Kind: KindMemory, Name: "fetch", Src: addr(1, 4), NBytes: 4, TileOut: 2, TEnd: 12}},
		{1, 16, Record{Kind: KindMath, Name: "math", Op: "add", DType: dtype.I32, NBytes: 4, TileA: 1, TileB: 2, TileOut: 3, TEnd: 16}},
		{0, 15, Record{Kind: KindMath, Name: "math", Op: "add", DType: dtype.I32, NBytes: 4, TileA: 1, TileB: 2, TileOut: 3, TEnd: 15}},
		{1, 20, Record{Kind: KindMemory, Name: "store", Dst: addr(1, 8), NBytes: 4, TileA: 3, TEnd: 20}},
		{0, 20, Record{Kind: KindMemory, Name: "store", Dst: addr(0, 8), NBytes: 4, TileA: 3, TEnd: 20}},
		{0, 30, Record{Kind: KindMemory, Name: "copy", Src: addr(0, 8), Dst: addr(0, 12), NBytes: 4, TEnd: 30}},
		{1, 40, Record{Kind: KindIPCQ, Name: "send", Src: addr(0, 12), Dst: addr(1, 12), NBytes: 4, TEnd: 40}},
		{1, 45, Record{Kind: KindIPCQ, Name: "recv", RecvMode: ReturnSlot, Src: addr(1, 12), NBytes: 4, TEnd: 45}},
	}
	return initial, w
}

// writeParts writes the records into a log per partition, in the order
// given (how a run's threads interleave them), each at its time, with
// tile IDs from the partition's own NewTile.
func writeParts(t *testing.T, w []partWrite, order []int) []*Log {
	t.Helper()
	var now [2]sim.Time
	parts := make([]*Log, 2)
	for p := range parts {
		parts[p] = &Log{Clock: func() sim.Time { return now[p] }}
	}
	for _, i := range order {
		pw := w[i]
		now[pw.part] = pw.at
		l := parts[pw.part]
		r := pw.r
		if r.TileOut > 0 {
			if id := l.NewTile(); id != r.TileOut {
				t.Fatalf("partition %d's tile %d numbered %d", pw.part, r.TileOut, id)
			}
		}
		l.Add(&r)
	}
	return parts
}

// Rule (engine/sim/partition.go, op_log per SIP): the merged log is in
// (time written, partition, order of writing), numbered anew, with each
// partition's tiles moved past the earlier partitions'; phase 2 replays
// it to the run's result and still catches a wrong one.
func TestMergeLogsReplaysAndCatchesWrongResult(t *testing.T) {
	initial, w := partitionScenario()
	in := make([]int, len(w))
	for i := range in {
		in[i] = i
	}
	merged, err := MergeLogs(writeParts(t, w, in))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Seq                   uint64
		Name                  string
		TEnd                  sim.Time
		TileOut, TileA, TileB int64
	}
	var got []row
	for _, r := range merged.Records() {
		got = append(got, row{r.Seq, r.Name, r.TEnd, r.TileOut, r.TileA, r.TileB})
	}
	want := []row{
		{0, "fetch", 10, 1, 0, 0},
		{1, "fetch", 11, 2, 0, 0},
		{2, "fetch", 12, 4, 0, 0},
		{3, "fetch", 12, 5, 0, 0},
		{4, "math", 15, 3, 1, 2},
		{5, "math", 16, 6, 4, 5},
		{6, "store", 20, 0, 3, 0}, // a tie: the lower partition first
		{7, "store", 20, 0, 6, 0},
		{8, "copy", 30, 0, 0, 0},
		{9, "send", 40, 0, 0, 0},
		{10, "recv", 45, 0, 0, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("merged log (-want +got):\n%s", diff)
	}
	if id := merged.NewTile(); id != 7 {
		t.Errorf("the merged log's next tile is %d, want 7 (after both partitions' 3)", id)
	}

	phase1 := Image{
		{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0},
		{5, 0, 0, 0, 7, 0, 0, 0, 12, 0, 0, 0, 3, 0, 0, 0},
	}
	recs := merged.Records()
	phase2 := initial.Clone()
	if err := replay(&phase2, merged); err != nil {
		t.Fatal(err)
	}
	if m := Compare(phase2, phase1, recs); m != nil {
		t.Fatalf("phase 2 of the merged log disagrees with a correct phase 1: %v", m)
	}

	// A wrong sum on SIP 1 (phase 1 stored 13): phase 2 names the store.
	phase1[1][8] = 13
	m := Compare(phase2, phase1, recs)
	if m == nil {
		t.Fatal("phase 2 of the merged log matched a wrong phase 1")
	}
	if m.Addr != addr(1, 8) || m.LastWriter == nil || m.LastWriter.Seq != 7 {
		t.Errorf("mismatch = %v, want SIP 1's store (record 7) at %#x", m, addr(1, 8))
	}
}

// Rule: the merged log does not depend on how the partitions' writes
// interleaved (the number of threads), only on each partition's own.
func TestMergeLogsSameForEveryInterleaving(t *testing.T) {
	_, w := partitionScenario()
	var p0, p1 []int
	for i, pw := range w {
		if pw.part == 0 {
			p0 = append(p0, i)
		} else {
			p1 = append(p1, i)
		}
	}
	orders := map[string][]int{
		"as listed":         nil,
		"partition 0 first": append(append([]int(nil), p0...), p1...),
		"partition 1 first": append(append([]int(nil), p1...), p0...),
	}
	for i := range w {
		orders["as listed"] = append(orders["as listed"], i)
	}
	var first string
	for _, name := range []string{"as listed", "partition 0 first", "partition 1 first"} {
		merged, err := MergeLogs(writeParts(t, w, orders[name]))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := merged.WriteJSONLines(&b); err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = b.String()
		} else if diff := cmp.Diff(first, b.String()); diff != "" {
			t.Errorf("%s: merged op_log differs (-as listed +got):\n%s", name, diff)
		}
	}
}

func TestMergeLogsRefusesLogWithoutTimes(t *testing.T) {
	timed := &Log{Clock: func() sim.Time { return 1 }}
	timed.Add(&Record{Kind: KindMemory, Name: "alloc"})
	untimed := &Log{}
	untimed.Add(&Record{Kind: KindMemory, Name: "alloc"})
	_, err := MergeLogs([]*Log{timed, untimed})
	if err == nil || !strings.Contains(err.Error(), "partition 1") {
		t.Fatalf("err = %v, want partition 1's log refused", err)
	}
}

// MergeLogsConsuming (a run's merge, which lets each part's slabs go as
// they are merged) gives MergeLogs' log, over parts of several slabs, and
// leaves the parts empty.
func TestMergeLogsConsumingSameAsMergeLogs(t *testing.T) {
	write := func() []*Log {
		var now [3]sim.Time
		parts := make([]*Log, 3)
		for p := range parts {
			parts[p] = &Log{Clock: func() sim.Time { return now[p] }}
		}
		for i := range 3*(1<<slabShift) + 77 {
			p := i * 7 % 3
			now[p] += sim.Time(1 + i%5)
			parts[p].Add(&Record{Kind: KindMemory, Name: "copy", Src: addr(p, 0), Dst: addr(p, 4), NBytes: 4, TEnd: now[p], Rank: p})
		}
		return parts
	}
	kept, err := MergeLogs(write())
	if err != nil {
		t.Fatal(err)
	}
	parts := write()
	consumed, err := MergeLogsConsuming(parts)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := kept.WriteJSONLines(&a); err != nil {
		t.Fatal(err)
	}
	if err := consumed.WriteJSONLines(&b); err != nil {
		t.Fatal(err)
	}
	if kept.Len() <= 1<<slabShift {
		t.Fatalf("%d records: want parts of several slabs", kept.Len())
	}
	if diff := cmp.Diff(a.String(), b.String()); diff != "" {
		t.Errorf("consuming merge differs (-MergeLogs +MergeLogsConsuming):\n%s", diff)
	}
	for p, l := range parts {
		if l.Len() != 0 || len(l.slabs) != 0 {
			t.Errorf("part %d after the consuming merge: %d records, %d slabs, want none", p, l.Len(), len(l.slabs))
		}
	}
}
