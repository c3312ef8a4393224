package oplog

import (
	"bytes"
	"fmt"
)

// Overlay is a pre-run image kept copy-on-first-write, for a run whose
// phase 1 saved a block of a memory just before first writing it. A block
// phase 1 never wrote still holds its pre-run bytes in the live memory, so
// only the written blocks (for a collective, the receive side: about half
// the data) are copied and paged in.
//
// The replay state of a block is its copy in Pre when Held (saved by phase
// 1, or copied in by the replay before writing it) and otherwise the live
// memory, which the replay only reads. Compare checks every held block:
// all blocks either phase wrote. A block neither wrote is the same in both
// by construction, which holds only if every phase-1 write saved its
// blocks first (engine/machine's Memory.Bytes does).
type Overlay struct {
	Mems []OverlayMem // by memory id
	// BlockShift is log2 of the block size in bytes.
	BlockShift uint
}

// OverlayMem is one memory of an Overlay.
type OverlayMem struct {
	// Live is the memory at the end of phase 1 (bytes past its end read
	// as zero). Phase 2 never writes it.
	Live []byte
	// Pre holds block i at Pre[i<<BlockShift:] when Held[i]; its other
	// bytes mean nothing. Its length is a whole number of blocks.
	Pre  []byte
	Held []bool
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

// read is a view of [addr, addr+n) in the replay state: the overlay's
// copy when every block of it is held, the live memory when none is, else
// the overlay's copy after holding the rest.
func (ov *Overlay) read(addr uint64, n int64) ([]byte, error) {
	m, off, err := ov.mem(addr, n)
	if err != nil || n == 0 {
		return nil, err
	}
	end := off + n
	switch all, none := m.HeldIn(off, end, ov.BlockShift); {
	case all:
		return m.Pre[off:end], nil
	case none && end <= int64(len(m.Live)):
		return m.Live[off:end], nil
	}
	return m.Hold(off, end, ov.BlockShift), nil
}

// write is the overlay's copy of [addr, addr+n), holding its blocks first.
func (ov *Overlay) write(addr uint64, n int64) ([]byte, error) {
	m, off, err := ov.mem(addr, n)
	if err != nil || n == 0 {
		return nil, err
	}
	if all, _ := m.HeldIn(off, off+n, ov.BlockShift); all {
		return m.Pre[off : off+n], nil
	}
	return m.Hold(off, off+n, ov.BlockShift), nil
}

// HeldIn reports whether all, and whether none, of the blocks of the
// non-empty range [off, end) are held (blocks past Held are not).
func (m *OverlayMem) HeldIn(off, end int64, shift uint) (all, none bool) {
	first, last := off>>shift, (end-1)>>shift
	all, none = last < int64(len(m.Held)), true
	for _, h := range m.Held[min(first, int64(len(m.Held))):min(last+1, int64(len(m.Held)))] {
		all, none = all && h, none && !h
	}
	return all, none
}

// Hold copies the blocks of [off, end) that are not held yet from the live
// memory (their pre-run bytes, as nothing wrote them) and returns the
// overlay's bytes [off, end). Blocks are 1<<shift bytes.
func (m *OverlayMem) Hold(off, end int64, shift uint) []byte {
	last := (end - 1) >> shift
	if last >= int64(len(m.Held)) {
		// Room for the whole live memory at once, and geometric growth
		// past it.
		live := (int64(len(m.Live)) + 1<<shift - 1) >> shift
		m.grow(max(last+1, live, 2*int64(len(m.Held))), shift)
	}
	for b := off >> shift; b <= last; b++ {
		if m.Held[b] {
			continue
		}
		lo, hi := b<<shift, (b+1)<<shift
		n := copy(m.Pre[lo:hi], m.Live[min(lo, int64(len(m.Live))):min(hi, int64(len(m.Live)))])
		clear(m.Pre[lo+int64(n) : hi])
		m.Held[b] = true
	}
	return m.Pre[off:end]
}

// grow makes room for blocks blocks, copying only the held ones (the rest
// of a fresh allocation is never touched, so costs no memory).
func (m *OverlayMem) grow(blocks int64, shift uint) {
	pre := make([]byte, blocks<<shift)
	held := make([]bool, blocks)
	for b, h := range m.Held {
		if h {
			lo, hi := int64(b)<<shift, int64(b+1)<<shift
			copy(pre[lo:hi], m.Pre[lo:hi])
		}
	}
	copy(held, m.Held)
	m.Pre, m.Held = pre, held
}

// Compare returns the first difference between the replayed overlay and
// phase 1's memory (missing bytes read as zero), or nil. Only held blocks
// can differ.
func (ov *Overlay) Compare(records []*Record) *Mismatch {
	size := int64(1) << ov.BlockShift
	for id := range ov.Mems {
		m := &ov.Mems[id]
		for b, h := range m.Held {
			if !h {
				continue
			}
			lo := int64(b) * size
			got := m.Pre[lo : lo+size]
			want := m.Live[min(lo, int64(len(m.Live))):min(lo+size, int64(len(m.Live)))]
			if bytes.Equal(got[:len(want)], want) && allZero(got[len(want):]) {
				continue
			}
			for i := range got {
				var y byte
				if i < len(want) {
					y = want[i]
				}
				if got[i] != y {
					addr := uint64(id+1)<<AddrShift | uint64(lo+int64(i))
					return &Mismatch{Addr: addr, Got: got[i], Want: y, LastWriter: lastWriter(records, addr)}
				}
			}
		}
	}
	return nil
}
