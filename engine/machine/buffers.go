package machine

import (
	"sort"
	"sync"

	"kernbench/engine/oplog"
)

// Buffers passes the large byte slices of one machine's memories (their
// bytes and the blocks of their pre-run images) on to the next machine of
// a sweep, whose pages are then already backed: a fresh page costs a
// fault and the kernel's zeroing (about 12 µs per 4 KiB page on the
// virtual machines the tool was measured on), clearing a backed one a
// fraction of that. Machines running side by side (a sweep's -j workers)
// may share one; its methods are safe for concurrent use. A nil
// *Buffers allocates every slice anew, as make does.
//
// A slice handed out is zero up to its length, as make's is; a scratch
// slice (Scratch) may hold anything.
type Buffers struct {
	// Drop, when set, runs after the pool let go of slices too small for
	// a request (the first larger machine of an ascending sweep): the
	// caller can return their pages to the operating system before the
	// new ones are backed, so the sweep's peak stays its largest size's.
	Drop func(bytes int64)

	mu   sync.Mutex
	free []pooled // sorted by capacity
	// slabs are the op_log's record slabs (UseBuffers).
	slabs oplog.Slabs
}

// PopulateSlabs has the op_log's new slabs backed at once by populate.
func (p *Buffers) PopulateSlabs(populate func([]byte)) { p.slabs.Populate = populate }

// pooled is a slice waiting for its next use; dirty is the length of its
// prefix that may hold non-zero bytes (past it the slice is still zero).
type pooled struct {
	b     []byte
	dirty int
}

// minPooled is the smallest slice worth keeping: below it a fresh slice
// costs a few faults at most, and the collector handles it well.
const minPooled = 1 << 20

// Zeroed returns n zero bytes: a kept slice of n to max(2n, room) bytes
// (cleared where its last user wrote) or a new one with a capacity of
// room (when larger than n; its pages past n are not touched).
func (p *Buffers) Zeroed(n, room int64) []byte {
	b, dirty := p.take(n, room)
	if b == nil {
		return make([]byte, n, max(n, room))
	}
	clear(b[:min(int64(dirty), n)])
	if int64(dirty) > n {
		// Capped at n: its bytes past n are dirty, and whoever gives it
		// back says only how far it wrote.
		return b[:n:n]
	}
	return b[:n]
}

// Scratch returns n bytes whose contents are not defined (the caller
// writes each byte before it reads it), with a capacity of room as for
// Zeroed.
func (p *Buffers) Scratch(n, room int64) []byte {
	b, _ := p.take(n, room)
	if b == nil {
		return make([]byte, n, max(n, room))
	}
	return b[:n]
}

// take removes and returns the smallest kept slice of n to max(2n, room)
// bytes. When none fits, the kept slices smaller than n are let go
// (Drop).
func (p *Buffers) take(n, room int64) ([]byte, int) {
	if p == nil || n < minPooled {
		return nil, 0
	}
	p.mu.Lock()
	i := sort.Search(len(p.free), func(i int) bool { return int64(cap(p.free[i].b)) >= n })
	if i < len(p.free) && int64(cap(p.free[i].b)) <= max(2*n, room) {
		b := p.free[i]
		p.free = append(p.free[:i], p.free[i+1:]...)
		p.mu.Unlock()
		return b.b[:cap(b.b)], b.dirty
	}
	var dropped int64
	for _, s := range p.free[:i] {
		dropped += int64(cap(s.b))
	}
	if dropped > 0 {
		clear(p.free[:i])
		p.free = append(p.free[:0], p.free[i:]...)
	}
	drop := p.Drop
	p.mu.Unlock()
	if dropped > 0 && drop != nil {
		drop(dropped)
	}
	return nil, 0
}

// put keeps b for a later request; its bytes past dirty are zero.
func (p *Buffers) put(b []byte, dirty int) {
	if p == nil || cap(b) < minPooled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.free), func(i int) bool { return cap(p.free[i].b) >= cap(b) })
	p.free = append(p.free, pooled{})
	copy(p.free[i+1:], p.free[i:])
	p.free[i] = pooled{b: b, dirty: min(dirty, cap(b))}
}

// Kept is the number of bytes the pool holds.
func (p *Buffers) Kept() int64 {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, s := range p.free {
		n += int64(cap(s.b))
	}
	return n
}

// UseBuffers makes the machine's memories take their slices from b (nil:
// make them), and its op_log (when set) its record slabs. Call it before
// the machine allocates (Place, Install) and logs.
func (m *Machine) UseBuffers(b *Buffers) {
	m.buffers = b
	for _, mem := range m.Mems {
		mem.useBuffers(b)
	}
	if b != nil && m.Log != nil {
		m.Log.UseSlabs(&b.slabs)
	}
}

// ReleaseBuffers gives the memories' slices back to the machine's
// Buffers (UseBuffers) for the next machine. The machine's memories hold
// no bytes afterwards: call it once nothing reads them any more (every
// view of them, the pre-run image's included, is invalid then).
func (m *Machine) ReleaseBuffers() {
	if m.buffers == nil {
		return
	}
	for _, mem := range m.Mems {
		mem.release()
	}
	for _, pre := range m.spentPre {
		m.buffers.put(pre, cap(pre))
	}
	m.spentPre = nil
	if m.Log != nil {
		m.Log.ReleaseSlabs()
	}
}

// useBuffers makes the memory take its slices from b.
func (m *Memory) useBuffers(b *Buffers) {
	if m.aux == nil {
		if b == nil {
			return
		}
		m.aux = &memAux{}
	}
	m.aux.bufs = b
}

// release gives the memory's slices to its Buffers.
func (m *Memory) release() {
	bufs := m.buffers()
	if bufs == nil {
		return
	}
	if a := m.aux; m.lazyBlocks > 0 {
		clear(a.lazy) // the bytes go, and their patterns with them
		m.lazyBlocks = 0
	}
	if m.data != nil {
		// Only handed-out bytes were written: past allocHigh the slice is
		// still zero.
		bufs.put(m.data, int(min(m.allocHigh, int64(len(m.data)))))
		m.data = nil
	}
	if m.preRun != nil {
		bufs.put(m.preRun.pre, cap(m.preRun.pre))
		m.preRun = nil
	}
}

// keepSpent keeps the pre-run image's blocks that DropPreRun let go (phase
// 2 replays in them) for ReleaseBuffers.
func (m *Machine) keepSpent(pre []byte) {
	if m.buffers != nil && cap(pre) >= minPooled {
		m.spentPre = append(m.spentPre, pre)
	}
}

// grown replaces m.data by n zero bytes holding its old contents, with
// a capacity of room (ReserveAhead). The old slice is not kept for
// reuse: a view of it taken before the growth may still be read.
func (m *Memory) grown(n, room int64) {
	nd := m.buffers().Zeroed(n, room)
	copy(nd, m.data)
	m.data = nd
}
