package machine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dirtied is a slice of n bytes of 0xFF.
func dirtied(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xFF
	}
	return b
}

// nonZero is the index of b's first non-zero byte, or -1.
func nonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}

// A pool hands out a kept slice of n to 2n bytes, zero up to n however
// far its last user wrote, lets go of the slices smaller than a request
// none fits (and says how many bytes), and keeps the larger ones.
func TestBuffersReuseZeroedAndDrop(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name    string
		kept    []int   // capacities put, each written (dirty) whole
		ask     int64   // Zeroed(ask)
		reused  bool    // the slice handed out is a kept one
		dropped []int64 // what Drop was told
		left    int64   // Kept afterwards
	}{
		{"equal size", []int{2 * mib}, 2 * mib, true, nil, 0},
		{"larger kept, within twice", []int{3 * mib}, 2 * mib, true, nil, 0},
		{"smallest that fits", []int{4 * mib, 2 * mib, 3 * mib}, 2 * mib, true, nil, 7 * mib},
		{"more than twice: kept for later", []int{5 * mib}, 2 * mib, false, nil, 5 * mib},
		{"smaller ones dropped", []int{mib, 2 * mib, 8 * mib}, 3 * mib, false, []int64{3 * mib}, 8 * mib},
		{"below the pooled size: made", []int{2 * mib}, mib / 2, false, nil, 2 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dropped []int64
			p := &Buffers{Drop: func(n int64) { dropped = append(dropped, n) }}
			addrs := map[*byte]bool{}
			for _, c := range tc.kept {
				b := dirtied(c)
				addrs[&b[0]] = true
				p.put(b, c)
			}
			got := p.Zeroed(tc.ask, 0)
			if int64(len(got)) != tc.ask || int64(cap(got)) != tc.ask {
				t.Fatalf("len %d cap %d, want %d", len(got), cap(got), tc.ask)
			}
			if i := nonZero(got); i >= 0 {
				t.Errorf("byte %d of the slice handed out is %#x, not zero", i, got[i])
			}
			if reused := addrs[&got[0]]; reused != tc.reused {
				t.Errorf("reused a kept slice: %v, want %v", reused, tc.reused)
			}
			if diff := cmp.Diff(tc.dropped, dropped); diff != "" {
				t.Errorf("Drop calls (-want +got):\n%s", diff)
			}
			if k := p.Kept(); k != tc.left {
				t.Errorf("kept %d bytes afterwards, want %d", k, tc.left)
			}
		})
	}
}

// A slice handed out shorter than it is, then given back as written only
// up to its length, is not taken for clean past it: its tail from an
// earlier use is out of reach (the capacity handed out is the length).
func TestBuffersTailOfALargerSliceStaysOutOfReach(t *testing.T) {
	const mib = 1 << 20
	p := &Buffers{}
	p.put(dirtied(3*mib), 3*mib)
	a := p.Zeroed(2*mib, 0)
	p.put(a, 0) // nothing written
	b := p.Zeroed(2*mib, 0)
	if i := nonZero(b[:cap(b)]); i >= 0 {
		t.Errorf("byte %d is %#x, not zero", i, b[i])
	}
}

// A machine whose memories take their slices from a pool that a machine
// before it wrote reads zeros wherever it allocates or views what it
// never wrote, and keeps a pre-run image of those zeros, as a machine
// with fresh slices does.
func TestMemoryFromUsedBuffersReadsZero(t *testing.T) {
	const n = 2 << 20
	p := &Buffers{}
	first := newTestMachine(t, testParams())
	first.UseBuffers(p)
	mem := first.PE(0).HBM
	mem.Reserve(2 * n)
	off, err := mem.Alloc(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem.Bytes(off, 2*n), dirtied(2*n))
	first.KeepPreRun()
	_ = mem.Bytes(off, 2*n) // saves pre-run blocks
	first.DropPreRun()
	first.ReleaseBuffers()
	kept := p.Kept()
	if kept == 0 {
		t.Fatal("the first machine gave nothing back")
	}

	second := newTestMachine(t, testParams())
	second.UseBuffers(p)
	mem2 := second.PE(0).HBM
	mem2.Reserve(n)
	if p.Kept() == kept {
		t.Fatal("the second machine took nothing from the pool")
	}
	off2, err := mem2.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	if i := nonZero(mem2.View(off2, n)); i >= 0 {
		t.Errorf("allocated byte %d reads %#x", i, mem2.View(off2, n)[i])
	}
	// Past every allocation, a view reads zeros too.
	if i := nonZero(mem2.View(off2+n, n)); i >= 0 {
		t.Errorf("never allocated byte %d reads non-zero", i)
	}
	second.KeepPreRun()
	w := mem2.Bytes(off2, n)
	for i := range w {
		w[i] = 7
	}
	if i := nonZero(Region{Mem: mem2, Off: off2, N: n}.PreRun()); i >= 0 {
		t.Errorf("pre-run byte %d is non-zero", i)
	}
}

// Room ahead: a new slice has the capacity asked for, untouched past n;
// given back written up to n, it serves a request up to its capacity (the
// next, larger size of a sweep), zero throughout, and keeps its capacity
// when its written part lies within the request.
func TestBuffersRoomAhead(t *testing.T) {
	const mib = 1 << 20
	p := &Buffers{}
	a := p.Zeroed(2*mib, 4*mib)
	if len(a) != 2*mib || cap(a) != 4*mib {
		t.Fatalf("len %d cap %d, want %d and %d", len(a), cap(a), 2*mib, 4*mib)
	}
	copy(a, dirtied(2*mib))
	p.put(a, 2*mib)
	b := p.Zeroed(3*mib, 0)
	if &b[0] != &a[0] {
		t.Fatal("the larger request did not reuse the slice with room for it")
	}
	if len(b) != 3*mib || cap(b) != 4*mib {
		t.Errorf("len %d cap %d, want %d and %d", len(b), cap(b), 3*mib, 4*mib)
	}
	if i := nonZero(b[:cap(b)]); i >= 0 {
		t.Errorf("byte %d is %#x, not zero", i, b[i])
	}
}
