package oplog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"kernbench/engine/dtype"
	"kernbench/engine/sim"
)

func addr(mem int, off uint64) uint64 { return uint64(mem+1)<<AddrShift | off }

// A small dataflow: fetch two tiles, add them, store the sum, copy it on,
// and a send into another memory. Phase 1's image is what applying the
// records in effect order gives.
func scenario() (Image, []*Record) {
	initial := Image{
		{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // memory 0: two i32 inputs + room
		make([]byte, 8), // memory 1
	}
	recs := []*Record{
		{Kind: KindMemory, Name: "fetch", Src: addr(0, 0), NBytes: 4, TileOut: 1, TEnd: 10},
		{Kind: KindMemory, Name: "fetch", Src: addr(0, 4), NBytes: 4, TileOut: 2, TEnd: 11},
		{Kind: KindMath, Name: "math", Op: "add", DType: dtype.I32, NBytes: 4, TileA: 1, TileB: 2, TileOut: 3, TEnd: 15},
		{Kind: KindMemory, Name: "store", Dst: addr(0, 8), NBytes: 4, TileA: 3, TEnd: 20},
		{Kind: KindMemory, Name: "copy", Src: addr(0, 8), Dst: addr(0, 12), NBytes: 4, TEnd: 30},
		{Kind: KindIPCQ, Name: "send", Src: addr(0, 12), Dst: addr(1, 4), NBytes: 4, TEnd: 40},
		{Kind: KindMemory, Name: "host_write", Dst: addr(1, 0), NBytes: 2, Data: []byte{9, 9}, TEnd: 41},
		{Kind: KindIPCQ, Name: "recv", RecvMode: ReturnSlot, Src: addr(1, 4), NBytes: 4, TEnd: 45},
	}
	for i, r := range recs {
		r.Seq = uint64(i)
	}
	return initial, recs
}

func TestReplayAppliesDataflow(t *testing.T) {
	initial, recs := scenario()
	img := initial.Clone()
	if err := Replay(&img, recs); err != nil {
		t.Fatal(err)
	}
	want := Image{
		{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0},
		{9, 9, 0, 0, 3, 0, 0, 0},
	}
	if diff := cmp.Diff(want, img); diff != "" {
		t.Errorf("replayed image (-want +got):\n%s", diff)
	}
	if m := Compare(img, want, recs); m != nil {
		t.Errorf("Compare reported %v for equal images", m)
	}
}

// Rule (docs/architecture.md, Two-pass verification): phase 2 catches an
// effect that phase 1 applied out of its recorded order. Here phase 1 ran the
// copy before the store it depends on (so it copied stale bytes), while the
// records say the store came first; the replay reproduces the recorded order
// and disagrees.
func TestPhase2CatchesEffectAppliedOutOfOrder(t *testing.T) {
	initial, recs := scenario()
	// Phase 1 as it (wrongly) happened: copy and send before the store.
	phase1 := initial.Clone()
	wrongOrder := []*Record{recs[0], recs[1], recs[2], recs[4], recs[5], recs[3], recs[6], recs[7]}
	wl := logOf(wrongOrder)
	rp := &replayer{im: &phase1, log: wl, tiles: make([]replayTile, 4), free: map[int64][][]byte{}}
	for id := int64(1); id <= 3; id++ {
		rp.tiles[id] = replayTile{data: []byte{byte(id), 0, 0, 0}, live: true}
	}
	for i := range wl.Len() {
		if err := rp.apply(wl.at(i)); err != nil {
			t.Fatal(err)
		}
	}
	phase2 := initial.Clone()
	if err := Replay(&phase2, recs); err != nil {
		t.Fatal(err)
	}
	m := Compare(phase2, phase1, recs)
	if m == nil {
		t.Fatal("phase 2 matched a phase 1 that applied the copy before the store")
	}
	if m.Addr != addr(0, 12) {
		t.Errorf("first mismatch at %#x, want %#x (the copy's destination)", m.Addr, addr(0, 12))
	}
	if m.LastWriter == nil || m.LastWriter.Name != "copy" {
		t.Errorf("last writer = %+v, want the copy record", m.LastWriter)
	}
	if !strings.Contains(m.String(), "last written by record 4 (memory copy") {
		t.Errorf("message %q does not name the record", m.String())
	}
}

// An unrecorded write in phase 1 (memory changed behind the log's back) is
// a mismatch too.
func TestPhase2CatchesUnrecordedWrite(t *testing.T) {
	initial, recs := scenario()
	phase1 := initial.Clone()
	if err := Replay(&phase1, recs); err != nil {
		t.Fatal(err)
	}
	phase1[1][7] = 0xEE
	phase2 := initial.Clone()
	if err := Replay(&phase2, recs); err != nil {
		t.Fatal(err)
	}
	m := Compare(phase2, phase1, recs)
	if m == nil || m.Addr != addr(1, 7) || m.Want != 0xEE {
		t.Fatalf("mismatch = %+v, want phase 1 byte 0xee at %#x", m, addr(1, 7))
	}
}

func TestReplayRejectsUnknownTile(t *testing.T) {
	img := Image{make([]byte, 8)}
	err := Replay(&img, []*Record{{Kind: KindMemory, Name: "store", Dst: addr(0, 0), NBytes: 4, TileA: 99}})
	if err == nil || !strings.Contains(err.Error(), "unknown tile 99") {
		t.Errorf("Replay = %v, want unknown tile error", err)
	}
}

// A record naming no valid tile is refused, not a crash: the replay's
// tile tables must cover tile 0 even when no record names a positive tile.
func TestReplayRejectsNegativeTile(t *testing.T) {
	img := Image{make([]byte, 8)}
	err := Replay(&img, []*Record{{Kind: KindMemory, Name: "store", Dst: addr(0, 0), NBytes: 4, TileA: -1, TileB: -1, TileOut: -1}})
	if err == nil || !strings.Contains(err.Error(), "unknown tile -1") {
		t.Errorf("Replay = %v, want unknown tile error", err)
	}
}

// Rule I5 (docs/architecture.md, Invariants and failures): send → DMA
// complete → recv in the op_log.
func TestCheckCausality(t *testing.T) {
	send := &Record{Seq: 0, Kind: KindIPCQ, Name: "send", Dst: addr(1, 0), SenderSeq: 3, TEnd: 50}
	ok := &Record{Seq: 1, Kind: KindIPCQ, Name: "recv", Src: addr(1, 0), SenderSeq: 3, TStart: 50, TEnd: 50}
	early := &Record{Seq: 1, Kind: KindIPCQ, Name: "recv", Src: addr(1, 0), SenderSeq: 3, TStart: 49, TEnd: 49}
	orphan := &Record{Seq: 1, Kind: KindIPCQ, Name: "recv", Src: addr(1, 0), SenderSeq: 4, TStart: 60, TEnd: 60}
	if msg := CheckCausality([]*Record{send, ok}); msg != "" {
		t.Errorf("valid order reported: %s", msg)
	}
	if msg := CheckCausality([]*Record{send, early}); !strings.HasPrefix(msg, "I5: ") || !strings.Contains(msg, "before its send") {
		t.Errorf("recv before send completion: got %q", msg)
	}
	if msg := CheckCausality([]*Record{send, orphan}); !strings.Contains(msg, "no matching send") {
		t.Errorf("recv without send: got %q", msg)
	}
}

// The JSON form of a record (--oplog) spells the enumerations out, leaves
// out what does not apply, and is one line per record.
func TestRecordJSON(t *testing.T) {
	var l Log
	l.Add(&Record{Rank: 2, Kind: KindMath, Name: "math", Op: "convert", DType: dtype.F32, OutType: dtype.BF16, NBytes: 8, TileA: 4, TileOut: 5, TEnd: 7})
	l.Add(&Record{Rank: 1, Kind: KindIPCQ, Name: "recv", RecvMode: CopyToDst, Src: 1 << AddrShift, SrcSp: SpaceTCM, Dst: 2 << AddrShift, DstSp: SpaceHBM, NBytes: 4, Dir: "E", SenderSeq: 3})
	var b strings.Builder
	if err := l.WriteJSONLines(&b); err != nil {
		t.Fatal(err)
	}
	want := `{"seq":0,"rank":2,"kind":"math","name":"math","t_start_ps":0,"t_end_ps":7,"nbytes":8,"dtype":"f32","tile_out":5,"tile_a":4,"op":"convert","out_dtype":"bf16"}
{"seq":1,"rank":1,"kind":"ipcq","name":"recv","t_start_ps":0,"t_end_ps":0,"src":1099511627776,"dst":2199023255552,"src_space":"tcm","dst_space":"hbm","nbytes":4,"dir":"E","sender_seq":3,"recv_mode":"copy_to_dst"}
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("JSON lines (-want +got):\n%s", diff)
	}
}

// effectSorted merges the math records into the others instead of sorting
// the whole log: it must give the stable sort's order for logs as phase 1
// writes them (math logged early), for parts out of order, and for ties
// (duplicate sequence numbers, as a hand-made log may have).
func TestEffectSortedIsStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		n := rng.IntN(40)
		recs := make([]*Record, n)
		var now sim.Time
		for i := range recs {
			now += sim.Time(rng.IntN(3))
			r := &Record{Kind: KindMemory, Seq: uint64(i), TEnd: now}
			if rng.IntN(3) == 0 {
				// Math is logged at issue and takes effect later.
				r.Kind, r.TEnd = KindMath, now+sim.Time(rng.IntN(8)) // often out of order among themselves
			}
			switch {
			case trial%5 == 1 && rng.IntN(10) == 0:
				r.TEnd = sim.Time(rng.IntN(20)) // a part out of order
			case trial%5 == 2 && i > 0 && rng.IntN(4) == 0:
				r.Seq = recs[i-1].Seq // ties
			}
			recs[i] = r
		}
		l := logOf(recs)
		want := make([]*entry, n)
		for i := range want {
			want[i] = l.at(i)
		}
		slices.SortStableFunc(want, effectOrder)
		got, _, _ := effectSorted(l)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: effectSorted differs from the stable sort", trial)
		}
	}
}

// mapCausality is CheckCausality as a map of sends (the last send of a
// message wins) and a scan of the receives in log order: the reference
// for the sorted search.
func mapCausality(records []*Record) string {
	type key struct{ slot, seq uint64 }
	sends := map[key]*Record{}
	for _, r := range records {
		if r.Kind == KindIPCQ && r.Name == "send" {
			sends[key{r.Dst, r.SenderSeq}] = r
		}
	}
	for _, r := range records {
		if r.Kind != KindIPCQ || r.Name != "recv" {
			continue
		}
		s, ok := sends[key{r.Src, r.SenderSeq}]
		switch {
		case !ok:
			return fmt.Sprintf("I5: record %d (rank %d recv %s seq %d at %v) has no matching send", r.Seq, r.Rank, r.Dir, r.SenderSeq, r.TStart)
		case s.TEnd > r.TStart:
			return fmt.Sprintf("I5: record %d (rank %d recv %s seq %d) began at %v before its send (record %d, rank %d) completed at %v",
				r.Seq, r.Rank, r.Dir, r.SenderSeq, r.TStart, s.Seq, s.Rank, s.TEnd)
		}
	}
	return ""
}

// Random logs of sends and receives over a few slots, with repeated
// sends, orphans and early receives: the search (by slot when every
// slot's sends come in sequence order, as a queue pair's do, which half
// the trials make so; else by message) reports what the map did, the
// first violation in log order.
func TestCheckCausalityMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	var failures, passedRecvs int
	for trial := range 2000 {
		n := rng.IntN(30)
		recs := make([]*Record, n)
		lastSeq := map[uint64]uint64{} // per slot, the last send's number
		for i := range recs {
			r := &Record{Seq: uint64(i), Rank: rng.IntN(4), Kind: KindIPCQ, SenderSeq: uint64(rng.IntN(4)),
				TStart: sim.Time(rng.IntN(100)), TEnd: sim.Time(rng.IntN(100))}
			slot := addr(rng.IntN(2), uint64(64*rng.IntN(3)))
			switch rng.IntN(5) {
			case 0, 1:
				r.Name, r.Dst = "send", slot
				if trial%4 >= 2 {
					// In sequence order per slot, a message sent again
					// now and then.
					r.SenderSeq = lastSeq[slot] + uint64(rng.IntN(3))
					lastSeq[slot] = r.SenderSeq
				}
			case 2, 3:
				r.Name, r.Src, r.RecvMode = "recv", slot, ReturnSlot
				if k := rng.IntN(i + 1); trial%2 == 0 && k < i && recs[k].Name == "send" {
					// Mostly well-formed: a message sent earlier, received after.
					s := recs[k]
					r.Src, r.SenderSeq, r.TStart = s.Dst, s.SenderSeq, s.TEnd+sim.Time(rng.IntN(3))
				}
			default:
				r.Kind, r.Name = KindMemory, "store"
			}
			recs[i] = r
		}
		got, want := CheckCausality(recs), mapCausality(recs)
		if got != want {
			t.Fatalf("trial %d: CheckCausality = %q, the map gives %q", trial, got, want)
		}
		if got != "" {
			failures++
		} else if slices.ContainsFunc(recs, func(r *Record) bool { return r.Name == "recv" }) {
			passedRecvs++
		}
	}
	t.Logf("%d of 2000 logs violate I5; %d with receives pass", failures, passedRecvs)
	if failures == 0 || passedRecvs == 0 {
		t.Fatalf("%d of 2000 random logs violate I5, %d with receives pass: the test covers only one outcome", failures, passedRecvs)
	}
}

// Rule (docs/architecture.md, Two-pass verification, phase 1: every data op
// appends a record with its fields): the log keeps a compact copy of each
// record (strings by id, the rare fields aside); what it gives back is what
// was added, field for field, with its sequence number; a nil Data stays nil
// and an empty one empty (the replay tells them apart).
func TestLogKeepsRecords(t *testing.T) {
	recs := []*Record{
		{Rank: 3, Kind: KindIPCQ, Name: "send", SrcSp: SpaceHBM, DstSp: SpaceTCM, DType: dtype.F32, TStart: 5, TEnd: 9, Src: addr(0, 64), Dst: addr(1, 0),
			NBytes: 4096, Count: 1024, Dir: "east", SenderSeq: 7},
		{Rank: -1, Kind: KindL3L2, Name: "queue_put", TEnd: 10, Dst: addr(2, 8), NBytes: 4, Data: []byte{1, 2, 3, 4}},
		{Rank: 1, Kind: KindMath, Name: "math", Op: "mul", DType: dtype.I32, OutType: dtype.I64, Left: true, NBytes: 16, TileOut: 9, TileA: 8,
			Scalar: 2.5, ScalarI: -3, TEnd: 11},
		{Rank: 0, Kind: KindMemory, Name: "host_write", Dst: addr(0, 0), Data: []byte{}},
		{Rank: 2, Kind: KindMarker, Name: "phase", Args: map[string]string{"step": "1"}},
	}
	want := make([]Record, len(recs))
	for i, r := range recs {
		want[i] = *r
		want[i].Seq = uint64(i)
	}
	var l Log
	for _, r := range recs {
		l.Add(r)
	}
	if l.Len() != len(recs) {
		t.Fatalf("the log has %d records, want %d", l.Len(), len(recs))
	}
	for i, r := range l.Records() {
		if diff := cmp.Diff(want[i], *r, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("record %d (-added +kept):\n%s", i, diff)
		}
		if (want[i].Data == nil) != (r.Data == nil) {
			t.Errorf("record %d: Data %#v kept as %#v", i, want[i].Data, r.Data)
		}
	}
}
