package oplog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Overlay is a pre-run image kept copy-on-first-write, for a run whose
// phase 1 saved a block of a memory just before first writing it. A block
// phase 1 never wrote still holds its pre-run bytes in the live memory, so
// only the written blocks (for a collective, the receive side: about half
// the data) are saved. A saved block whose bytes repeat every 8 bytes (a
// sentinel, zeros) is kept as its 8-byte pattern, not copied: the receive
// buffers of a collective start so, and copying them paged in as much
// memory again as the buffers themselves.
//
// The replay state of a block is its saved bytes or pattern while held,
// and otherwise the live memory, which the replay only reads. The replay
// works on a held block in a buffer of its own and, after the last record
// that writes the block, compares it with the live memory at once: an
// equal block is let go (its buffer serves the next block), so the replay
// needs buffers only for the blocks it is still writing, not a second copy
// of everything written. Compare then checks the blocks still held: all
// blocks either phase wrote that did not end equal. A block neither wrote
// is the same in both by construction, which holds only if every phase-1
// write saved its blocks first (engine/machine's Memory.Bytes does).
type Overlay struct {
	Mems []OverlayMem // by memory id
	// BlockShift is log2 of the block size in bytes.
	BlockShift uint

	// The replay's state (prepare): the index in effect order of the
	// record being applied, and of the last record writing each block;
	// buffers of let-go blocks; the view a read spanning blocks returns.
	cur     int32
	free    [][]byte
	scratch []byte
}

// BlockState is what an OverlayMem holds of one block.
type BlockState uint8

// The block states.
const (
	// Unheld: the block's bytes are the live memory's.
	Unheld BlockState = iota
	// HeldBytes: the block's bytes are saved (in Pre in phase 1).
	HeldBytes
	// HeldPattern: byte i of the block is byte i%8 of its pattern.
	HeldPattern
)

// OverlayMem is one memory of an Overlay.
type OverlayMem struct {
	// Live is the memory at the end of phase 1 (bytes past its end read
	// as zero). Phase 2 never writes it.
	Live []byte
	// Pre holds block i at Pre[i<<BlockShift:] when State[i] is HeldBytes
	// (phase 1's copies); its other bytes mean nothing. Its length is a
	// whole number of blocks.
	Pre []byte
	// State is each block's state (blocks past it are Unheld); Pattern is
	// a HeldPattern block's 8 bytes (little-endian).
	State   []BlockState
	Pattern []uint64

	// Phase 2: a HeldBytes block's bytes, and the index in effect order
	// of the last record writing each block (-1: none).
	bufs      [][]byte
	lastWrite []int32
}

func (ov *Overlay) mem(addr uint64, n int64) (*OverlayMem, int64, error) {
	id := int(addr>>AddrShift) - 1
	off := int64(addr & (1<<AddrShift - 1))
	if id < 0 || id >= maxMemories {
		return nil, 0, fmt.Errorf("address %#x is in no memory", addr)
	}
	// A memory materialised after phase 1 starts as zeros (no live bytes).
	for id >= len(ov.Mems) {
		ov.Mems = append(ov.Mems, OverlayMem{})
	}
	if n < 0 {
		return nil, 0, fmt.Errorf("negative size %d at address %#x", n, addr)
	}
	return &ov.Mems[id], off, nil
}

// HeldIn reports whether all, and whether none, of the blocks of the
// non-empty range [off, end) are held (blocks past State are not).
func (m *OverlayMem) HeldIn(off, end int64, shift uint) (all, none bool) {
	first, last := off>>shift, (end-1)>>shift
	all, none = last < int64(len(m.State)), true
	for _, s := range m.State[min(first, int64(len(m.State))):min(last+1, int64(len(m.State)))] {
		h := s != Unheld
		all, none = all && h, none && !h
	}
	return all, none
}

// Save saves the blocks of [off, end) that are not held yet (phase 1,
// before writing them): as a pattern when the block's live bytes repeat
// every 8 bytes, else as a copy in Pre.
func (m *OverlayMem) Save(off, end int64, shift uint) {
	m.room((end-1)>>shift, shift)
	for b := off >> shift; b <= (end-1)>>shift; b++ {
		if m.State[b] != Unheld {
			continue
		}
		lo, hi := b<<shift, (b+1)<<shift
		// A block shorter than two patterns is copied (as cheap); one
		// past the live memory's end too (its zeros are not live bytes).
		if blk := m.live(lo, hi); int64(len(blk)) == hi-lo && len(blk) >= 16 &&
			bytes.Equal(blk[8:], blk[:len(blk)-8]) {
			m.State[b], m.Pattern[b] = HeldPattern, binary.LittleEndian.Uint64(blk)
			continue
		}
		m.copyLive(lo, m.Pre[lo:hi])
		m.State[b] = HeldBytes
	}
}

// Hold makes every block of [off, end) held as bytes in Pre (copied from
// the live memory or written out from its pattern) and returns Pre's
// bytes [off, end): the range's pre-run bytes in one piece. Blocks are
// 1<<shift bytes.
func (m *OverlayMem) Hold(off, end int64, shift uint) []byte {
	m.room((end-1)>>shift, shift)
	for b := off >> shift; b <= (end-1)>>shift; b++ {
		lo, hi := b<<shift, (b+1)<<shift
		switch m.State[b] {
		case Unheld:
			m.copyLive(lo, m.Pre[lo:hi])
		case HeldPattern:
			fillPattern(m.Pre[lo:hi], m.Pattern[b])
		}
		m.State[b] = HeldBytes
	}
	return m.Pre[off:end]
}

// live is the live memory's part of [lo, hi): shorter than the range, or
// empty, where the range passes the live memory's end.
func (m *OverlayMem) live(lo, hi int64) []byte {
	n := int64(len(m.Live))
	return m.Live[min(lo, n):min(hi, n)]
}

// copyLive copies the live bytes [lo, lo+len(dst)) into dst (zeros past
// the live end).
func (m *OverlayMem) copyLive(lo int64, dst []byte) {
	n := copy(dst, m.live(lo, lo+int64(len(dst))))
	clear(dst[n:])
}

// fillPattern writes pattern p (little-endian) over b, from its first byte.
func fillPattern(b []byte, p uint64) {
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], p)
	k := copy(b, w[:])
	for k < len(b) {
		k += copy(b[k:], b[:k])
	}
}

// room makes State, Pattern and Pre cover block last: room for the whole
// live memory at once, and geometric growth past it.
func (m *OverlayMem) room(last int64, shift uint) {
	if last < int64(len(m.State)) {
		return
	}
	live := (int64(len(m.Live)) + 1<<shift - 1) >> shift
	m.grow(max(last+1, live, 2*int64(len(m.State))), shift)
}

// grow makes room for blocks blocks, copying only the held ones (the rest
// of a fresh allocation is never touched, so costs no memory).
func (m *OverlayMem) grow(blocks int64, shift uint) {
	pre := make([]byte, blocks<<shift)
	state := make([]BlockState, blocks)
	pattern := make([]uint64, blocks)
	for b, s := range m.State {
		if s == HeldBytes {
			lo, hi := int64(b)<<shift, int64(b+1)<<shift
			copy(pre[lo:hi], m.Pre[lo:hi])
		}
	}
	copy(state, m.State)
	copy(pattern, m.Pattern)
	m.Pre, m.State, m.Pattern = pre, state, pattern
}

// prepare readies the overlay for a replay: every block phase 1 saved as
// bytes works in its copy in Pre.
func (ov *Overlay) prepare() {
	shift := ov.BlockShift
	for id := range ov.Mems {
		m := &ov.Mems[id]
		m.bufs = make([][]byte, len(m.State))
		m.lastWrite = nil
		for b, s := range m.State {
			if s == HeldBytes {
				m.bufs[b] = m.Pre[int64(b)<<shift : int64(b+1)<<shift]
			}
		}
	}
}

// note records that r, index i in effect order, is the last record so far
// that writes the blocks it writes.
func (ov *Overlay) note(l *Log, i int, r *entry) {
	addr, n, ok := writeRange(l, r)
	id := int(addr>>AddrShift) - 1
	if !ok || n <= 0 || n > maxWriteRange || id < 0 || id >= maxMemories {
		return // nothing written, or the replay will refuse it
	}
	m, off, _ := ov.mem(addr, n)
	shift := ov.BlockShift
	last := (off + n - 1) >> shift
	if last >= int64(len(m.lastWrite)) {
		had := len(m.lastWrite)
		m.lastWrite = growTo(m.lastWrite, last)
		for b := had; b < len(m.lastWrite); b++ {
			m.lastWrite[b] = -1
		}
	}
	for b := off >> shift; b <= last; b++ {
		m.lastWrite[b] = int32(i)
	}
}

// writtenSince reports whether a record after index i that note has seen
// wrote a block of [addr, addr+n).
func (ov *Overlay) writtenSince(addr uint64, n int64, i int32) bool {
	id := int(addr>>AddrShift) - 1
	if n <= 0 || id < 0 || id >= len(ov.Mems) {
		return false // read nothing, or from no memory note has seen written
	}
	m, off := &ov.Mems[id], int64(addr&(1<<AddrShift-1))
	first, last := off>>ov.BlockShift, (off+n-1)>>ov.BlockShift
	for b := first; b <= min(last, int64(len(m.lastWrite))-1); b++ {
		if m.lastWrite[b] > i {
			return true
		}
	}
	return false
}

// maxWriteRange bounds the records prepare looks at: a larger one cannot
// be replayed (its bytes would not fit), and marking its blocks would take
// as long.
const maxWriteRange = 1 << 40

// at tells the overlay that record i (in effect order) is applied next.
func (ov *Overlay) at(i int) { ov.cur = int32(i) }

// read is a view of [addr, addr+n) in the replay state: the live
// memory's bytes when no block of it is held (viewFixed: phase 2 never
// writes them), a held block's own bytes when it lies in one (viewBlock),
// else a copy (viewTransient).
func (ov *Overlay) read(addr uint64, n int64) ([]byte, viewKind, error) {
	m, off, err := ov.mem(addr, n)
	if err != nil || n == 0 {
		return nil, viewFixed, err
	}
	end, shift := off+n, ov.BlockShift
	first, last := off>>shift, (end-1)>>shift
	if _, none := m.HeldIn(off, end, shift); none && end <= int64(len(m.Live)) {
		return m.Live[off:end], viewFixed, nil
	}
	if first == last && first < int64(len(m.bufs)) && m.bufs[first] != nil {
		lo := first << shift
		return m.bufs[first][off-lo : end-lo], viewBlock, nil
	}
	if int64(cap(ov.scratch)) < n {
		ov.scratch = make([]byte, n)
	}
	out := ov.scratch[:n]
	for b := first; b <= last; b++ {
		lo, hi := max(off, b<<shift), min(end, (b+1)<<shift)
		m.blockBytes(b, lo, hi, out[lo-off:hi-off], shift)
	}
	return out, viewTransient, nil
}

// blockBytes copies the replay state's bytes [lo, hi) of block b into dst.
func (m *OverlayMem) blockBytes(b, lo, hi int64, dst []byte, shift uint) {
	base := b << shift
	state := Unheld
	if b < int64(len(m.State)) {
		state = m.State[b]
	}
	switch {
	case b < int64(len(m.bufs)) && m.bufs[b] != nil:
		copy(dst, m.bufs[b][lo-base:hi-base])
	case state == HeldBytes: // phase 1's copy, before a replay took it
		copy(dst, m.Pre[lo:hi])
	case state == HeldPattern:
		// dst starts at byte (lo-base)%8 of the pattern: rotated to it.
		fillPattern(dst, bits.RotateLeft64(m.Pattern[b], -8*int((lo-base)&7)))
	default:
		m.copyLive(lo, dst)
	}
}

// write replaces [addr, addr+n) of the replay state: its first bytes by
// src (as copy does), or all of it by zeros when zero is set. Each block
// that no later record writes is then compared with the live memory and,
// when equal, let go.
func (ov *Overlay) write(addr uint64, n int64, src []byte, zero bool) error {
	m, off, err := ov.mem(addr, n)
	if err != nil || n == 0 {
		return err
	}
	end, shift := off+n, ov.BlockShift
	first, last := off>>shift, (end-1)>>shift
	for b := first; b <= last; b++ {
		buf := ov.own(m, b)
		lo, hi := max(off, b<<shift), min(end, (b+1)<<shift)
		dst := buf[lo-b<<shift : hi-b<<shift]
		if zero {
			clear(dst)
		} else if lo-off < int64(len(src)) {
			copy(dst, src[lo-off:])
		}
	}
	for b := first; b <= last; b++ {
		if b < int64(len(m.lastWrite)) && m.lastWrite[b] == ov.cur {
			ov.settle(m, b)
		}
	}
	return nil
}

// own returns block b's own buffer in the replay, making one (from the
// block's pre-run state) if it has none yet.
func (ov *Overlay) own(m *OverlayMem, b int64) []byte {
	if b >= int64(len(m.bufs)) {
		m.bufs = growTo(m.bufs, b)
	}
	if m.bufs[b] != nil {
		return m.bufs[b]
	}
	size := int64(1) << ov.BlockShift
	var buf []byte
	if k := len(ov.free); k > 0 {
		buf, ov.free = ov.free[k-1], ov.free[:k-1]
	} else {
		buf = make([]byte, size)
	}
	m.blockBytes(b, b<<ov.BlockShift, (b+1)<<ov.BlockShift, buf, ov.BlockShift)
	if b >= int64(len(m.State)) {
		m.State = growTo(m.State, b)
	}
	m.bufs[b], m.State[b] = buf, HeldBytes
	return buf
}

// settle compares block b, which no later record writes, with the live
// memory: equal, it is let go (the live bytes are its bytes from now on);
// else it stays held for Compare to report.
func (ov *Overlay) settle(m *OverlayMem, b int64) {
	buf := m.bufs[b]
	if buf == nil || !m.liveEqual(b, buf, ov.BlockShift) {
		return
	}
	ov.free = append(ov.free, buf)
	m.bufs[b], m.State[b] = nil, Unheld
}

// liveEqual reports whether got equals block b of the live memory (zeros
// past its end).
func (m *OverlayMem) liveEqual(b int64, got []byte, shift uint) bool {
	lo := b << shift
	want := m.live(lo, lo+int64(len(got)))
	return bytes.Equal(got[:len(want)], want) && allZero(got[len(want):])
}

// Compare returns the first difference between the replayed overlay and
// phase 1's memory (missing bytes read as zero), or nil. Only held blocks
// can differ.
func (ov *Overlay) Compare(records []*Record) *Mismatch { return ov.CompareLog(logOf(records)) }

// CompareLog is Compare with the log's records.
func (ov *Overlay) CompareLog(l *Log) *Mismatch {
	size := int64(1) << ov.BlockShift
	got := make([]byte, size)
	for id := range ov.Mems {
		m := &ov.Mems[id]
		for b, s := range m.State {
			if s == Unheld {
				continue
			}
			lo := int64(b) * size
			m.blockBytes(int64(b), lo, lo+size, got, ov.BlockShift)
			if m.liveEqual(int64(b), got, ov.BlockShift) {
				continue
			}
			want := m.live(lo, lo+size)
			for i := range got {
				var y byte
				if i < len(want) {
					y = want[i]
				}
				if got[i] != y {
					addr := uint64(id+1)<<AddrShift | uint64(lo+int64(i))
					return mismatchAt(l, addr, got[i], y)
				}
			}
		}
	}
	return nil
}
