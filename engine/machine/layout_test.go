package machine

import (
	"testing"
	"unsafe"
)

// The per-message fields of a queue pair are grouped in cache lines (see
// QueuePair): a field added in the wrong place moves a group across a line
// boundary, which costs a cache miss per message at a thousand ranks.
func TestQueuePairLayoutKeepsHotGroupsInLines(t *testing.T) {
	var q QueuePair
	line := func(off uintptr) uintptr { return off / 64 }
	groups := []struct {
		name       string
		first, end uintptr
	}{
		{"sender pointers", unsafe.Offsetof(q.peer), unsafe.Offsetof(q.flushWaiter) + 8},
		{"sender lists", unsafe.Offsetof(q.inflight), unsafe.Offsetof(q.sendFrom) + 8},
		{"receiver pointers", unsafe.Offsetof(q.MyTail), unsafe.Offsetof(q.Slots) + unsafe.Sizeof(q.Slots)},
		{"receiver ring", unsafe.Offsetof(q.Rx), unsafe.Offsetof(q.credits) + unsafe.Sizeof(q.credits)},
	}
	for _, g := range groups {
		if line(g.first) != line(g.end-1) {
			t.Errorf("%s span bytes [%d, %d): more than one cache line", g.name, g.first, g.end)
		}
	}
	if s := unsafe.Sizeof(q); s != 512 {
		t.Errorf("QueuePair is %d bytes, want 512 (a size class whose objects start on a cache line)", s)
	}
	if s := unsafe.Sizeof(RxSlot{}); s != 64 {
		t.Errorf("RxSlot is %d bytes, want one 64-byte line", s)
	}
}

