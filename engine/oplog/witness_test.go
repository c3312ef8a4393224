package oplog

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// witnessed is a witnessed log of recs, each record producing in phase 1
// what produced gives for its sequence number (nil: what the replay of the
// records makes, i.e. a phase 1 that did what its log says).
func witnessed(t *testing.T, initial Image, recs []*Record, produced map[uint64][]byte) *Log {
	t.Helper()
	// What each record makes when phase 1 follows the log: the replay's.
	honest := initial.Clone()
	l := &Log{}
	l.Witness()
	for _, r := range recs {
		l.add(r)
	}
	rp := &replayer{im: &honest, log: l, tiles: make([]replayTile, 8), free: map[int64][][]byte{}}
	var made [][]byte
	for _, e := range l.phase2Scan().order {
		if err := rp.apply(e); err != nil {
			t.Fatal(err)
		}
		made = append(made, append([]byte(nil), rp.produced(e)...))
	}
	w := &Log{}
	w.Witness()
	for i, e := range l.phase2Scan().order {
		r := l.record(e)
		r.Produced, r.Origin = made[i], "call of record "+string(rune('0'+r.Seq))
		if p, ok := produced[r.Seq]; ok {
			r.Produced = p
		}
		if r.Kind == KindIPCQ && r.RecvMode == ReturnSlot {
			r.Produced = nil
		}
		w.add(r)
	}
	return w
}

// Rule (docs/architecture.md, Two-pass verification, diagnosis of a
// mismatch): a witnessed log names the first record, in effect order, whose
// phase-2 effect differs from what it produced in phase 1, with the call that
// issued it; a phase 1 that did what its log says has none.
func TestWitnessNamesFirstDivergentRecord(t *testing.T) {
	for _, tc := range []struct {
		name     string
		produced map[uint64][]byte
		want     uint64 // seq of the divergent record; 99: none
	}{
		{"honest phase 1", nil, 99},
		// The store wrote other bytes than its tile (a buffer reused
		// under it): it, not the copy and send that forwarded them, is
		// named.
		{"store wrote other bytes", map[uint64][]byte{3: {7, 0, 0, 0}}, 3},
		// A fetch that read other bytes than its source held at its t_end.
		{"fetch read other bytes", map[uint64][]byte{1: {5, 0, 0, 0}}, 1},
		{"send delivered other bytes", map[uint64][]byte{5: {0, 0, 0, 1}}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			initial, recs := scenario()
			l := witnessed(t, initial, recs, tc.produced)
			img := initial.Clone()
			if err := replay(&img, l); err != nil {
				t.Fatal(err)
			}
			d := l.Divergence()
			if tc.want == 99 {
				if d != nil {
					t.Fatalf("divergence %v in an honest run", d)
				}
				return
			}
			if d == nil {
				t.Fatalf("no divergence found, want record %d", tc.want)
			}
			if d.Record.Seq != tc.want || d.Origin != "call of record "+string(rune('0'+tc.want)) {
				t.Errorf("divergence = record %d issued by %q, want record %d with its call", d.Record.Seq, d.Origin, tc.want)
			}
		})
	}
}

// A mismatch names the last writer of the address in each phase: phase 1
// wrote in log order, phase 2 in effect order (t_end, seq). Here the log
// says the store ended before the copy into the same bytes, but phase 1
// logged (did) the store last.
func TestMismatchNamesLastWriterOfEachPhase(t *testing.T) {

	recs := []*Record{
		{Seq: 0, Kind: KindMemory, Name: "fetch", Src: addr(0, 0), NBytes: 4, TileOut: 1, TEnd: 10},
		{Seq: 1, Kind: KindMemory, Name: "copy", Src: addr(0, 0), Dst: addr(0, 4), NBytes: 4, TEnd: 30},
		{Seq: 2, Kind: KindMemory, Name: "store", Dst: addr(0, 4), NBytes: 4, TileA: 1, TEnd: 20},
	}
	l := logOf(recs)
	m := mismatchAt(l, addr(0, 5), 0, 1)
	got := [2]uint64{m.LogWriter.Seq, m.LastWriter.Seq}
	if diff := cmp.Diff([2]uint64{2, 1}, got); diff != "" {
		t.Errorf("last writers [phase 1, phase 2] (-want +got):\n%s", diff)
	}
}
