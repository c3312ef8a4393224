package machine

import (
	"testing"
	"unsafe"
)

// The per-message fields of a queue pair are grouped in cache lines (see
// QueuePair): a field added in the wrong place moves a group across a line
// boundary, which costs a cache miss per message at a thousand ranks.
func TestQueuePairLayoutKeepsHotGroupsInLines(t *testing.T) {
	skipUnless64Bit(t)
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

// Operations and messages are recycled objects touched once per message;
// sizes that are multiples of 64 bytes put them in size classes whose
// objects start on a cache line, so their field groups stay in the lines
// they were laid out for.
func TestOpAndMessageSizesAreWholeCacheLines(t *testing.T) {
	skipUnless64Bit(t)
	var op MemOp
	if s := unsafe.Sizeof(op); s%64 != 0 {
		t.Errorf("MemOp is %d bytes, not a multiple of 64", s)
	}
	if s := unsafe.Sizeof(Message{}); s%64 != 0 {
		t.Errorf("Message is %d bytes, not a multiple of 64", s)
	}
	if o := unsafe.Offsetof(op.Data) + unsafe.Sizeof(op.Data); o > 64 {
		t.Errorf("MemOp's completion fields end at byte %d, past its first line", o)
	}
	if o := unsafe.Offsetof(op.Xfer); o%64 != 0 {
		t.Errorf("MemOp.Xfer starts at byte %d, not on a line", o)
	}
	var tr Transfer
	if o := unsafe.Offsetof(tr.N) + unsafe.Sizeof(tr.N); o > 64 {
		t.Errorf("Transfer's completion fields end at byte %d, past its first line", o)
	}
}

// A booking reads and writes a resource's first line only (see Resource).
func TestResourceBookingFieldsAreItsFirstCacheLine(t *testing.T) {
	skipUnless64Bit(t)
	var r Resource
	if s := unsafe.Sizeof(r); s != 128 {
		t.Errorf("Resource is %d bytes, want 128 (a size class that starts on a cache line)", s)
	}
	if o := unsafe.Offsetof(r.BusyTime) + unsafe.Sizeof(r.BusyTime); o > 64 {
		t.Errorf("Resource's booking fields end at byte %d, past its first line", o)
	}
}

// A load, a store and a write's hazard check read a memory's first line
// only, and a DMA engine is whole lines (see Memory, dmaEngine).
func TestMemoryAndEngineLayout(t *testing.T) {
	skipUnless64Bit(t)
	var m Memory
	if s := unsafe.Sizeof(m); s%64 != 0 {
		t.Errorf("Memory is %d bytes, not a multiple of 64", s)
	}
	if o := unsafe.Offsetof(m.preRun) + unsafe.Sizeof(m.preRun); o > 64 {
		t.Errorf("Memory's per-access fields end at byte %d, past its first line", o)
	}
	if s := unsafe.Sizeof(dmaEngine{}); s%64 != 0 {
		t.Errorf("dmaEngine is %d bytes, not a multiple of 64", s)
	}
}

// skipUnless64Bit skips a layout test where pointers are not 8 bytes: the
// layouts are laid out (and padded) for 64-bit hosts.
func skipUnless64Bit(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the cache-line layouts are laid out for 64-bit pointers")
	}
}
