package oplog

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A log whose slabs a longer log filled before it holds its own records
// only: the records of the first log, with extras and strings, do not
// show through.
func TestSlabsReusedByTheNextLog(t *testing.T) {
	const n = 3<<slabShift + 5
	var pool Slabs
	first := &Log{}
	first.UseSlabs(&pool)
	for i := range n {
		first.Add(&Record{Kind: KindMemory, Rank: i % 7, Name: "first", Src: uint64(i), Dst: uint64(i + 1), NBytes: 64, Data: []byte{1, 2}, Scalar: 3})
	}
	first.ReleaseSlabs()
	if first.Len() != 0 || len(pool.free) != 4 {
		t.Fatalf("after release: log length %d, %d slabs kept (want 0, 4)", first.Len(), len(pool.free))
	}
	second := &Log{}
	second.UseSlabs(&pool)
	var want []*Record
	for i := range 2<<slabShift + 1 {
		r := &Record{Kind: KindMemory, Rank: 2, Src: uint64(100 + i), NBytes: 8}
		second.Add(r)
		c := *r
		want = append(want, &c)
	}
	if len(pool.free) != 1 {
		t.Errorf("%d slabs left in the pool, want 1 (3 reused)", len(pool.free))
	}
	if diff := cmp.Diff(want, second.Records()); diff != "" {
		t.Errorf("the second log's records (-want +got):\n%s", diff)
	}
}
