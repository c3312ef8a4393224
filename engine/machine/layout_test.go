package machine

import (
	"testing"
	"unsafe"
)

// The objects a message touches on another rank keep the fields it reads
// in as few cache lines as possible (see QueuePair, MemOp, Transfer,
// Resource, Memory): a field added in the wrong place moves a group across
// a line boundary, which costs a cache miss per message at a thousand
// ranks. Their sizes are whole lines, so Go's allocator starts each object
// on a line and the groups stay in the lines they were laid out for.
func TestHotFieldsStayInTheirCacheLines(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the cache-line layouts are laid out for 64-bit pointers")
	}
	var (
		q  QueuePair
		op MemOp
		tr Transfer
		r  Resource
		m  Memory
		e  dmaEngine
	)
	// Each group's bytes [first, end) lie in one line.
	groups := []struct {
		name       string
		first, end uintptr
	}{
		{"QueuePair's sender pointers", unsafe.Offsetof(q.peer), unsafe.Offsetof(q.flushWaiter) + 8},
		{"QueuePair's sender lists", unsafe.Offsetof(q.inflight), unsafe.Offsetof(q.sendFrom) + 8},
		{"QueuePair's receiver pointers", unsafe.Offsetof(q.MyTail), unsafe.Offsetof(q.Slots) + unsafe.Sizeof(q.Slots)},
		{"QueuePair's receiver ring", unsafe.Offsetof(q.Rx), unsafe.Offsetof(q.credits) + unsafe.Sizeof(q.credits)},
		{"MemOp's completion fields", 0, unsafe.Offsetof(op.Data) + unsafe.Sizeof(op.Data)},
		// Whether a recorded operation is still under way reads both.
		{"MemOp's generation and Done", min(unsafe.Offsetof(op.gen), unsafe.Offsetof(op.Done)), max(unsafe.Offsetof(op.gen)+unsafe.Sizeof(op.gen), unsafe.Offsetof(op.Done)+1)},
		{"Transfer's completion fields", 0, unsafe.Offsetof(tr.N) + unsafe.Sizeof(tr.N)},
		{"Resource's booking fields", 0, unsafe.Offsetof(r.BusyTime) + unsafe.Sizeof(r.BusyTime)},
		{"Resource's older holds and the first of them", unsafe.Offsetof(r.older), unsafe.Offsetof(r.olderBuf) + unsafe.Sizeof(hold{})},
		{"Memory's per-access fields", 0, unsafe.Offsetof(m.preRun) + unsafe.Sizeof(m.preRun)},
		{"dmaEngine's per-transfer fields", 0, unsafe.Offsetof(e.nextAt) + unsafe.Sizeof(e.nextAt)},
		{"dmaEngine's path caches", unsafe.Offsetof(e.scanned), unsafe.Offsetof(e.scanned) + unsafe.Sizeof(e.scanned)},
	}
	for _, g := range groups {
		if g.first/64 != (g.end-1)/64 {
			t.Errorf("%s span bytes [%d, %d): more than one cache line", g.name, g.first, g.end)
		}
	}
	if o := unsafe.Offsetof(op.Xfer); o%64 != 0 {
		t.Errorf("MemOp.Xfer starts at byte %d, not on a line", o)
	}
	// want 0: any whole number of lines.
	sizes := []struct {
		name      string
		got, want uintptr
	}{
		{"QueuePair", unsafe.Sizeof(q), 576},
		{"RxSlot", unsafe.Sizeof(RxSlot{}), 64},
		{"Resource", unsafe.Sizeof(r), 192},
		{"MemOp", unsafe.Sizeof(op), 0},
		{"Message", unsafe.Sizeof(Message{}), 0},
		{"Memory", unsafe.Sizeof(m), 0},
		{"dmaEngine", unsafe.Sizeof(e), 192},
	}
	for _, s := range sizes {
		switch {
		case s.want != 0 && s.got != s.want:
			t.Errorf("%s is %d bytes, want %d (the size class it is padded to)", s.name, s.got, s.want)
		case s.got%64 != 0:
			t.Errorf("%s is %d bytes, not a multiple of 64", s.name, s.got)
		}
	}
}
