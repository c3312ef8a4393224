package machine

import (
	"encoding/binary"
	"fmt"
	"sort"

	"kernbench/engine/oplog"
)

// Space names a kind of memory.
type Space uint8

const (
	TCM Space = iota + 1
	SRAM
	HBM
)

// ParseSpace parses "tcm", "sram" or "hbm".
func ParseSpace(s string) (Space, error) {
	switch s {
	case "tcm":
		return TCM, nil
	case "sram":
		return SRAM, nil
	case "hbm":
		return HBM, nil
	}
	return 0, fmt.Errorf("unknown memory space %q (want tcm, sram or hbm)", s)
}

// Log is the space as the op_log names it.
func (s Space) Log() oplog.Space {
	switch s {
	case TCM:
		return oplog.SpaceTCM
	case SRAM:
		return oplog.SpaceSRAM
	case HBM:
		return oplog.SpaceHBM
	}
	return 0
}

func (s Space) String() string {
	switch s {
	case TCM:
		return "tcm"
	case SRAM:
		return "sram"
	case HBM:
		return "hbm"
	}
	return fmt.Sprintf("space(%d)", uint8(s))
}

// addrShift places every memory instance in its own window of the physical
// address space, so an address alone names its memory.
const addrShift = 40

// allocAlign is the alignment of every allocation (a cache line).
const allocAlign = 64

// Memory is one memory instance: a PE's TCM or HBM slice, or a cube's SRAM.
// Its bytes grow on demand up to the high-water mark of allocations, so a
// 1 GiB HBM slice costs only what is used.
type Memory struct {
	// What a load, a store, a delivery and a write's hazard check read is
	// the first 64 bytes, one cache line (Memory is padded to 192 bytes, a
	// size class that starts on a line); the allocator's state and the
	// names follow.

	// noData: the machine moves no bytes (timing-only); the memory is
	// never backed and Bytes returns nil.
	noData bool
	Space  Space
	// lazyBlocks counts the blocks that hold a pattern not written yet
	// (FillPattern; their state is in aux): while it is 0, reads and
	// writes look no further.
	lazyBlocks int32
	// sendsReading counts the IPCQ sends whose source is in this memory
	// and that still read it (in flight, or held until a flush): when it
	// is 0, a write here cannot be a SendBufferHazard and the hazard
	// checks skip their scan of the queue pairs.
	sendsReading int
	// readLo and readHi bound the sources of those sends (valid while
	// sendsReading > 0; they only grow until it drops to 0): a write
	// outside them skips the scan too. A PE's TCM holds both the staging
	// ring its sends read and the rx rings other ranks deliver into.
	readLo, readHi int64
	// owner is the PE of a tcm or hbm memory (nil for sram): hazard checks
	// on every write find the rank without a lookup.
	owner *PE
	PE    int // owning PE for tcm/hbm, -1 for sram
	Cube  int // global cube index
	// preRun, while a verified run keeps the pre-run image, holds the
	// blocks written since (their bytes as they were before the first
	// write): Bytes saves them, so phase 2 can start from them.
	preRun *preRunBlocks

	data     []byte
	Port     *Resource
	ID       int
	Capacity int64
	Base     uint64
	free     []span // sorted, coalesced free spans
	used     int64
	// allocHigh is the end of the highest allocation or Bytes view so
	// far: data beyond it has never been handed out, so it is still zero.
	allocHigh int64
	// freeLater are allocations freed while a send may still read them
	// (a kernel returned with its sends on their way): they are freed
	// when no send reads this memory any more (sendRead).
	freeLater []span
	// aux holds what few memories need: the pool of a sweep's slices and
	// the blocks of a pattern not written yet.
	aux *memAux
}

// memAux is the part of a Memory few memories use.
type memAux struct {
	// bufs, when set, hands out and takes back the large slices (data,
	// the pre-run image's blocks) across a sweep's machines (buffers.go).
	bufs *Buffers
	// lazy are the blocks of a pattern not written yet, by block
	// (FillPattern; pattern.go); lazyLo and lazyHi bound those pending
	// (in bytes; an access outside looks no further).
	lazy           []lazyBlock
	lazyLo, lazyHi int64
}

// buffers is the memory's pool of slices (nil: none).
func (m *Memory) buffers() *Buffers {
	if m.aux == nil {
		return nil
	}
	return m.aux.bufs
}

// preRunBlockShift is log2 of the pre-run image's block size: each block a
// run writes is copied once before its first write. Smaller blocks copy
// less of a partly written memory; larger ones cost fewer checks.
const preRunBlockShift = 14

// preRunBlocks is a memory's part of the copy-on-first-write pre-run image
// (an oplog.OverlayMem in the making).
type preRunBlocks struct {
	pre     []byte // block i at pre[i<<preRunBlockShift:] when state[i] is HeldBytes
	state   []oplog.BlockState
	pattern []uint64 // a HeldPattern block's bytes
}

// overlay is the memory's part of the pre-run image as an OverlayMem
// (sharing its slices; put stores them back after a change).
func (p *preRunBlocks) overlay(live []byte) oplog.OverlayMem {
	return oplog.OverlayMem{Live: live, Pre: p.pre, State: p.state, Pattern: p.pattern}
}

func (p *preRunBlocks) put(om oplog.OverlayMem) {
	p.pre, p.state, p.pattern = om.Pre, om.State, om.Pattern
}

type span struct{ off, n int64 }

func newMemory(id int, space Space, pe, cube int, capacity int64, port *Resource) *Memory {
	return &Memory{
		ID: id, Space: space, PE: pe, Cube: cube, Capacity: capacity,
		Base: uint64(id+1) << addrShift, Port: port,
		free: []span{{0, capacity}},
	}
}

func (m *Memory) String() string {
	if m.Space == SRAM {
		return fmt.Sprintf("sram[cube %d]", m.Cube)
	}
	return fmt.Sprintf("%s[pe %d]", m.Space, m.PE)
}

// addSendReading counts one more send reading src, a range of m.
func (m *Memory) addSendReading(src Region) {
	if m.sendsReading == 0 {
		m.readLo, m.readHi = src.Off, src.Off+src.N
	} else {
		m.readLo, m.readHi = min(m.readLo, src.Off), max(m.readHi, src.Off+src.N)
	}
	m.sendsReading++
}

// sendRead counts one send reading m less, and frees the allocations
// left to free once none does.
func (m *Memory) sendRead() {
	m.sendsReading--
	if m.sendsReading == 0 && len(m.freeLater) > 0 {
		for _, s := range m.freeLater {
			m.Free(s.off, s.n)
		}
		m.freeLater = m.freeLater[:0]
	}
}

// FreeAfterSends is Free, once no send reads [off, off+n) any more: at
// once, or when every send reading m is done (a kernel's scratch, freed
// when it returns, may be the source of a send still on its way, and a
// new allocation there would change what it delivers).
func (m *Memory) FreeAfterSends(off, n int64) {
	if m.sendsMayRead(Region{Mem: m, Off: off, N: n}) {
		m.freeLater = append(m.freeLater, span{off, n})
		return
	}
	m.Free(off, n)
}

// sendsMayRead reports whether a send may still read a byte of r, a
// range of m: false when no send reads m, or none near r.
func (m *Memory) sendsMayRead(r Region) bool {
	return m.sendsReading > 0 && r.Off < m.readHi && m.readLo < r.Off+r.N
}

// SendsMayRead reports whether an unfinished IPCQ send may read a byte
// of r (Group.WaitUnread and Group.InFlightReading look further only
// then): a writer that asks first saves their calls in the common case.
func (r Region) SendsMayRead() bool { return r.Mem.sendsMayRead(r) }

// Used is the number of allocated bytes.
func (m *Memory) Used() int64 { return m.used }

// OutOfMemoryError reports an allocation that does not fit.
type OutOfMemoryError struct {
	Mem       *Memory
	Requested int64
	// InUse is what the memory had allocated when the allocation was
	// refused (its use later, after a SpaceCheck gave its space back,
	// would not say why).
	InUse int64
}

func (e *OutOfMemoryError) Error() string {
	return fmt.Sprintf("%v: cannot allocate %d bytes (capacity %d, %d in use)", e.Mem, e.Requested, e.Mem.Capacity, e.InUse)
}

// AllocSize is what an allocation of n bytes takes of a memory: n rounded
// up to the alignment, at least one aligned block. Allocations into an
// empty memory with no frees between them all fit when their sizes add up
// to at most its capacity.
func AllocSize(n int64) int64 {
	return max(allocAlign, (n+allocAlign-1)/allocAlign*allocAlign)
}

// Alloc reserves n bytes (first fit, 64-byte aligned) and returns the offset.
// The bytes read as zero.
func (m *Memory) Alloc(n int64) (int64, error) {
	off, size, err := m.allocSpace(n)
	if err != nil || m.noData {
		return off, err
	}
	end := off + size
	if end > int64(len(m.data)) {
		m.grown(max(end, min(m.Capacity, 2*int64(len(m.data)))), 0)
	}
	// Bytes above every earlier allocation were never written and are
	// still zero: clearing them would touch fresh pages a first time
	// before the caller fills them. Only the n bytes asked for are
	// cleared, not the block's alignment padding: the op_log records
	// an allocation of n bytes, and phase 2 clears those (the padding
	// kept what a freed allocation left there in phase 2, and phase 1
	// disagreed with it).
	if dirty := min(off+n, max(off, m.allocHigh)); dirty > off {
		if m.lazyBlocks > 0 {
			m.touchLazy(off, dirty, true) // cleared below
		}
		m.savePreRun(off, dirty)
		clear(m.data[off:dirty])
	}
	m.allocHigh = max(m.allocHigh, end)
	return off, nil
}

// allocSpace takes n bytes of the memory's address space (first fit,
// 64-byte aligned: size bytes from off) without touching its bytes.
func (m *Memory) allocSpace(n int64) (off, size int64, err error) {
	if n < 0 {
		return 0, 0, fmt.Errorf("%v: negative allocation size %d", m, n)
	}
	if n > m.Capacity {
		return 0, 0, &OutOfMemoryError{Mem: m, Requested: n, InUse: m.used}
	}
	size = AllocSize(n)
	for i, s := range m.free {
		if s.n < size {
			continue
		}
		if s.n == size {
			m.free = append(m.free[:i], m.free[i+1:]...)
		} else {
			m.free[i] = span{s.off + size, s.n - size}
		}
		m.used += size
		return s.off, size, nil
	}
	return 0, 0, &OutOfMemoryError{Mem: m, Requested: n, InUse: m.used}
}

// SpaceCheck tries allocations in memories as Alloc would make them, in
// the same order, without backing or touching any of their bytes, and
// gives the space back (Undo): a set-up that allocates large buffers in
// several memories learns that one does not fit before it has backed
// (and, in a process that reuses its heap, cleared) gigabytes for the
// others.
type SpaceCheck struct {
	taken []spaceTaken
}

type spaceTaken struct {
	mem    *Memory
	off, n int64
}

// Alloc takes n bytes of m's space as Alloc would, or returns Alloc's
// error.
func (c *SpaceCheck) Alloc(m *Memory, n int64) error {
	off, _, err := m.allocSpace(n)
	if err == nil {
		c.taken = append(c.taken, spaceTaken{m, off, n})
	}
	return err
}

// Undo gives back, last first, the space the check took: every memory's
// free spans and use are as they were before it (Free coalesces them
// into the same spans).
func (c *SpaceCheck) Undo() {
	for i := len(c.taken) - 1; i >= 0; i-- {
		t := c.taken[i]
		t.mem.Free(t.off, t.n)
	}
	c.taken = c.taken[:0]
}

// Reserve makes room for n more bytes of allocations without further
// growth copies (a hint from callers that know their sizes up front).
func (m *Memory) Reserve(n int64) { m.ReserveAhead(n, 0) }

// ReserveAhead is Reserve, and with a pool of slices (UseBuffers) it
// gives the slice the capacity of ahead more bytes instead (a larger size
// of the sweep to come): the pages past n are not touched now, and that
// size's memory takes the slice instead of a new one.
func (m *Memory) ReserveAhead(n, ahead int64) {
	if m.noData {
		return
	}
	if m.used+n > m.Capacity {
		return // the allocations will fail: back nothing
	}
	want := min(m.Capacity, m.used+n+allocAlign)
	if want > int64(len(m.data)) {
		room := int64(0)
		if m.buffers() != nil && ahead > n {
			room = min(m.Capacity, m.used+ahead+allocAlign)
		}
		m.grown(want, room)
	}
}

// Free releases an allocation made by Alloc.
func (m *Memory) Free(off, n int64) {
	size := (n + allocAlign - 1) / allocAlign * allocAlign
	if size == 0 {
		size = allocAlign
	}
	m.used -= size
	i := sort.Search(len(m.free), func(i int) bool { return m.free[i].off > off })
	m.free = append(m.free, span{})
	copy(m.free[i+1:], m.free[i:])
	m.free[i] = span{off, size}
	// Coalesce with neighbours.
	if i+1 < len(m.free) && m.free[i].off+m.free[i].n == m.free[i+1].off {
		m.free[i].n += m.free[i+1].n
		m.free = append(m.free[:i+1], m.free[i+2:]...)
	}
	if i > 0 && m.free[i-1].off+m.free[i-1].n == m.free[i].off {
		m.free[i-1].n += m.free[i].n
		m.free = append(m.free[:i], m.free[i+1:]...)
	}
}

// Bytes returns the live bytes [off, off+n) of the memory (no copy) for
// reading and writing. While the pre-run image is kept, it first saves
// the blocks of the range that were not written yet: every write of
// simulated memory goes through here (or Alloc), and a reader that will
// not write uses View instead, which saves nothing.
//
// A timing-only memory (noData) answers at the call site: Bytes and View
// are small enough to inline, and a message or memory operation asks for
// bytes several times.
func (m *Memory) Bytes(off, n int64) []byte {
	if m.noData {
		return nil // no pre-run image either (keepPreRun)
	}
	return m.bytes(off, n)
}

func (m *Memory) bytes(off, n int64) []byte { return m.write(off, n, false) }

// write is bytes; overwrite says the caller writes every byte before it
// reads any (Overwrite).
func (m *Memory) write(off, n int64, overwrite bool) []byte {
	var b []byte
	if overwrite {
		b = m.viewRaw(off, n)
		if m.lazyBlocks > 0 {
			m.touchLazy(off, off+n, true)
		}
	} else {
		b = m.view(off, n)
	}
	if m.preRun != nil && n > 0 {
		m.savePreRun(off, off+n)
	}
	return b
}

// View returns the live bytes [off, off+n) of the memory (no copy) for
// reading only: a write into them would bypass the pre-run image, so
// phase 2 could miss it.
func (m *Memory) View(off, n int64) []byte {
	if m.noData {
		return nil
	}
	return m.view(off, n)
}

// view is viewRaw with the pending pattern written where the range
// needs it (pattern.go).
func (m *Memory) view(off, n int64) []byte {
	b := m.viewRaw(off, n)
	if m.lazyBlocks > 0 {
		m.touchLazy(off, off+n, false)
	}
	return b
}

// viewRaw grows the memory over [off, off+n) and returns its live bytes.
func (m *Memory) viewRaw(off, n int64) []byte {
	if end := off + n; end > int64(len(m.data)) {
		// Reading never-allocated space: grow so it reads as zeros.
		m.grown(min(max(end, 2*int64(len(m.data))), max(m.Capacity, end)), 0)
	}
	// Whoever holds the slice may write it: it counts as handed out.
	m.allocHigh = max(m.allocHigh, off+n)
	return m.data[off : off+n]
}

// savePreRun saves the pre-run bytes of the blocks of [off, end) not
// saved yet. Until its first write a block's live bytes are its pre-run
// bytes (zero past the end of data).
func (m *Memory) savePreRun(off, end int64) {
	p := m.preRun
	if p == nil || end <= off {
		return
	}
	om := p.overlay(m.data)
	if all, _ := om.HeldIn(off, end, preRunBlockShift); all {
		return
	}
	om.Save(off, end, preRunBlockShift)
	p.put(om)
}

// keepPreRun starts keeping the pre-run image (copy-on-first-write). The
// room for a copy of every block is allocated now, untouched: only the
// blocks saved later cost pages, and the collector sees the heap grow once
// here, before the op_log it scans has grown, instead of once per memory
// as the run first writes each.
func (m *Memory) keepPreRun() {
	if m.noData {
		return
	}
	blocks := (int64(len(m.data)) + 1<<preRunBlockShift - 1) >> preRunBlockShift
	// (Scratch: a block of pre is read only after Save copied it there.)
	room := (int64(cap(m.data)) + 1<<preRunBlockShift - 1) >> preRunBlockShift << preRunBlockShift
	m.preRun = &preRunBlocks{pre: m.buffers().Scratch(blocks<<preRunBlockShift, room), state: make([]oplog.BlockState, blocks), pattern: make([]uint64, blocks)}
}

// PreRun returns the region's bytes as they were when the machine started
// keeping its pre-run image (KeepPreRun): a view of the live memory when
// nothing wrote the region since, else of the saved copy (holding the
// region's other blocks too). The view is for reading, and holds the
// pre-run bytes until phase 2 replays onto the image.
func (r Region) PreRun() []byte {
	m := r.Mem
	if m.preRun == nil || r.N <= 0 {
		return r.Mem.View(r.Off, r.N)
	}
	live := m.View(r.Off, r.N) // grows data over the region: blocks read as zero
	p := m.preRun
	om := p.overlay(m.data)
	end := r.Off + r.N
	if _, none := om.HeldIn(r.Off, end, preRunBlockShift); none {
		return live
	}
	out := om.Hold(r.Off, end, preRunBlockShift)
	p.put(om)
	return out
}

// KeepPreRunPattern tells the pre-run image that r's bytes repeat its
// first 8 bytes (its writer filled it so, as the bench fills a recv
// buffer with its sentinel): r's whole blocks not saved yet are saved as
// that pattern now, without the check of each block's 16 KiB that the
// run's first write to it would make. It does nothing before KeepPreRun.
// A false claim cannot hide a wrong run: phase 2 would replay from the
// claimed bytes and report the blocks whose live bytes differ.
func (r Region) KeepPreRunPattern() {
	m := r.Mem
	p := m.preRun
	if p == nil || r.N < 8 || r.Off%8 != 0 {
		return
	}
	first := (r.Off + 1<<preRunBlockShift - 1) >> preRunBlockShift
	end := (r.Off + r.N) >> preRunBlockShift // blocks [first, end) lie inside r
	if end <= first || end > int64(len(p.state)) {
		return
	}
	pattern := binary.LittleEndian.Uint64(m.View(r.Off, 8))
	for b := first; b < end; b++ {
		if p.state[b] == oplog.Unheld {
			p.state[b], p.pattern[b] = oplog.HeldPattern, pattern
		}
	}
}

// Size is the number of bytes the memory holds so far (its high-water
// mark, not its capacity).
func (m *Memory) Size() int64 { return int64(len(m.data)) }

// NoData reports whether the memory keeps no bytes (a timing-only machine).
func (m *Memory) NoData() bool { return m.noData }

// Snapshot copies the used bytes (Machine.Image).
func (m *Memory) Snapshot() []byte {
	m.writeLazy()
	return append([]byte(nil), m.data...)
}

// Region is a byte range of one memory.
type Region struct {
	Mem *Memory
	Off int64
	N   int64
}

// Addr is the physical address of the region's first byte.
func (r Region) Addr() uint64 { return r.Mem.Base + uint64(r.Off) }

// Bytes returns the live bytes of the region, to read and write (see
// Memory.Bytes).
func (r Region) Bytes() []byte { return r.Mem.Bytes(r.Off, r.N) }

// View returns the live bytes of the region, to read only (see
// Memory.View).
func (r Region) View() []byte { return r.Mem.View(r.Off, r.N) }

// Sub returns the sub-range [off, off+n) relative to r.
func (r Region) Sub(off, n int64) Region { return Region{r.Mem, r.Off + off, n} }

// Overlaps reports whether two regions share a byte.
func (r Region) Overlaps(o Region) bool {
	return r.Mem == o.Mem && r.Off < o.Off+o.N && o.Off < r.Off+r.N && r.N > 0 && o.N > 0
}

func (r Region) String() string {
	return fmt.Sprintf("%v@%#x+%d", r.Mem, r.Addr(), r.N)
}
