package prims

import (
	"testing"
	"unsafe"
)

// The fields a message's piece of a fused primitive touches on its
// rank's Kernel lie in its first eight cache lines (see Kernel; tl's
// Kernel begins with it): a field
// added among them, or one of them moved among the per-call fields, costs
// a cache miss per message at a hundred ranks and more.
func TestKernelPieceFieldsFirst(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the cache-line layout is laid out for 64-bit pointers")
	}
	var k Kernel
	fields := []struct {
		name      string
		off, size uintptr
	}{
		{"M", unsafe.Offsetof(k.M), unsafe.Sizeof(k.M)},
		{"G", unsafe.Offsetof(k.G), unsafe.Sizeof(k.G)},
		{"PE", unsafe.Offsetof(k.PE), unsafe.Sizeof(k.PE)},
		{"Proc", unsafe.Offsetof(k.Proc), unsafe.Sizeof(k.Proc)},
		{"Counts", unsafe.Offsetof(k.Counts), unsafe.Sizeof(k.Counts)},
		{"root", unsafe.Offsetof(k.root), unsafe.Sizeof(k.root)},
		{"Rank", unsafe.Offsetof(k.Rank), unsafe.Sizeof(k.Rank)},
		{"RedOp", unsafe.Offsetof(k.RedOp), unsafe.Sizeof(k.RedOp)},
		{"InFused", unsafe.Offsetof(k.InFused), unsafe.Sizeof(k.InFused)},
		{"deferred", unsafe.Offsetof(k.deferred), unsafe.Sizeof(k.deferred)},
		{"Handles", unsafe.Offsetof(k.Handles), unsafe.Sizeof(k.Handles)},
		{"pendingWrites", unsafe.Offsetof(k.pendingWrites), unsafe.Sizeof(k.pendingWrites)},
		{"deferredBuf", unsafe.Offsetof(k.deferredBuf), unsafe.Sizeof(k.deferredBuf)},
		{"writes", unsafe.Offsetof(k.writes), unsafe.Sizeof(k.writes)},
		{"issuingSends", unsafe.Offsetof(k.issuingSends), unsafe.Sizeof(k.issuingSends)},
		{"reading", unsafe.Offsetof(k.reading), unsafe.Sizeof(k.reading)},
		{"prefetched", unsafe.Offsetof(k.prefetched), unsafe.Sizeof(k.prefetched)},
		{"call", unsafe.Offsetof(k.call), unsafe.Sizeof(k.call)},
		{"scratch.Staging", unsafe.Offsetof(k.scratch) + unsafe.Offsetof(k.scratch.Staging), unsafe.Sizeof(k.scratch.Staging)},
	}
	for _, f := range fields {
		if end := f.off + f.size; end > 8*64 {
			t.Errorf("Kernel.%s ends at byte %d, after the first eight lines", f.name, end)
		}
	}
}

// What a piece touches in its call's pipeline lies in the pipeline's
// first five cache lines (see pieceRun); the call's error and the test
// counters follow.
func TestPieceRunPieceFieldsFirst(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the cache-line layout is laid out for 64-bit pointers")
	}
	var pr pieceRun
	if end := unsafe.Offsetof(pr.copied) + unsafe.Sizeof(pr.copied); end > 5*64 {
		t.Errorf("a piece's pipeline fields end at byte %d, after the first five lines", end)
	}
	if s := unsafe.Sizeof(pr); s%64 != 0 {
		t.Errorf("pieceRun is %d bytes, not a whole number of lines (its size class would not start it on one)", s)
	}
}
