package machine

import (
	"encoding/binary"

	"kernbench/engine/oplog"
)

// A memory can hold a repeated 8-byte pattern without writing it: the
// bench's recv buffers start as their sentinel (NaN, 0xA5 bytes) so that
// an element the kernel never writes is reported as such, and writing
// that sentinel over hundreds of megabytes only for the run's first
// stores to overwrite it was most of its cost. FillPattern writes the
// pattern into the partial blocks at the region's ends and notes the
// whole blocks between them as holding it (memAux.lazy); a block's cache
// lines are written with the pattern when something first reads the
// block or writes part of it without saying it overwrites it (view,
// Bytes), and a line a store or a delivery overwrites whole (Overwrite)
// is not written with it at all: each block tracks which of its lines
// were written since. Every byte reads as the pattern until
// written, as if it had been written at once: the run, its op_log, the
// checks and phase 2 see the same bytes. Blocks still pending when the
// live memory is read whole (the pre-run overlay of phase 2, Snapshot)
// are written then.

// FillPattern makes every byte of r read as pattern repeated from r's
// start (little-endian: byte i is byte i%8 of the pattern), writing only
// the blocks r does not cover whole (see above). While the pre-run image
// is kept the bytes are written at once.
func (r Region) FillPattern(pattern uint64) {
	m := r.Mem
	if m.noData || r.N <= 0 {
		return
	}
	const s = preRunBlockShift
	b := m.viewRaw(r.Off, r.N) // grows data over r
	first := (r.Off + 1<<s - 1) >> s
	end := (r.Off + r.N) >> s // blocks [first, end) lie inside r
	if m.preRun != nil || r.Off%8 != 0 || end <= first {
		fillRepeat(m.bytes(r.Off, r.N), pattern)
		return
	}
	fillRepeat(b[:first<<s-r.Off], pattern)
	fillRepeat(b[end<<s-r.Off:], pattern) // starts 8-byte aligned, as r does
	if m.aux == nil {
		m.aux = &memAux{}
	}
	a := m.aux
	if int64(len(a.lazy)) < end {
		a.lazy = append(a.lazy, make([]lazyBlock, end-int64(len(a.lazy)))...)
	}
	if m.lazyBlocks == 0 {
		a.lazyLo, a.lazyHi = first<<s, end<<s
	} else {
		a.lazyLo, a.lazyHi = min(a.lazyLo, first<<s), max(a.lazyHi, end<<s)
	}
	for blk := first; blk < end; blk++ {
		if !a.lazy[blk].on {
			m.lazyBlocks++
		}
		a.lazy[blk] = lazyBlock{on: true, pattern: pattern}
	}
}

// lazyBlock is a block of a pattern not written yet: its lines of
// lazyLine bytes marked in written have been written since, the others
// read as the pattern.
type lazyBlock struct {
	on      bool
	pattern uint64
	written [lazyLines / 64]uint64
}

const (
	lazyLineShift = 6 // a cache line
	lazyLines     = 1 << (preRunBlockShift - lazyLineShift)
)

// Overwrite returns the live bytes of r for a writer that writes every
// one of them before anything reads them (a store's or a delivery's
// copy): the lines of a pending pattern that r covers whole are not
// written with the pattern first. Otherwise it is Bytes.
func (r Region) Overwrite() []byte {
	m := r.Mem
	if m.noData {
		return nil
	}
	return m.write(r.Off, r.N, true)
}

// WriteFrom copies src into r, as copy(r.Bytes(), src) does; a src that
// fills r writes it through Overwrite. (src is read before r is touched:
// a src overlapping a pending pattern reads the pattern.)
//
// A timing-only memory returns at the call site (this is small enough to
// inline; a store and a delivery each make one call).
func (r Region) WriteFrom(src []byte) {
	if r.Mem.noData {
		return
	}
	r.Mem.writeFrom(r.Off, r.N, src)
}

func (m *Memory) writeFrom(off, n int64, src []byte) {
	copy(m.write(off, n, int64(len(src)) >= n), src)
}

// touchLazy writes the pending pattern where [lo, hi) needs it: into
// every line of the blocks it touches that was not written since, or,
// when overwrite says [lo, hi) is about to be written whole, only into
// the lines it covers in part (the lines it covers whole are marked
// written). A block whose lines are all written is done. While the
// pre-run image is kept, a block it does not hold yet is written whole
// first (its first write saves its live bytes).
func (m *Memory) touchLazy(lo, hi int64, overwrite bool) {
	const s = preRunBlockShift
	a := m.aux
	if hi <= lo || hi <= a.lazyLo || a.lazyHi <= lo {
		return
	}
	first, last := lo>>s, min((hi-1)>>s, int64(len(a.lazy))-1)
	for blk := first; blk <= last; blk++ {
		lb := &a.lazy[blk]
		if !lb.on {
			continue
		}
		base := blk << s
		if !overwrite || m.preRun != nil && (blk >= int64(len(m.preRun.state)) || m.preRun.state[blk] == oplog.Unheld) {
			lb.fillUnwritten(m.data[base:base+1<<s], 0, lazyLines)
		} else {
			// Lines [l0, l1) meet [lo, hi); [f0, f1) lie inside it.
			rlo, rhi := max(lo, base)-base, min(hi, base+1<<s)-base
			l0, l1 := int(rlo>>lazyLineShift), int((rhi+1<<lazyLineShift-1)>>lazyLineShift)
			f0, f1 := int((rlo+1<<lazyLineShift-1)>>lazyLineShift), int(rhi>>lazyLineShift)
			b := m.data[base : base+1<<s]
			if l0 < f0 {
				lb.fillUnwritten(b, l0, l0+1)
			}
			if f1 < l1 && f1 >= f0 {
				lb.fillUnwritten(b, f1, l1)
			}
			if f0 < f1 {
				lb.mark(f0, f1)
			}
		}
		if lb.allWritten() {
			lb.on = false
			m.lazyBlocks--
		}
	}
}

// mark notes lines [l0, l1) as written.
func (lb *lazyBlock) mark(l0, l1 int) {
	for l0 < l1 {
		w, bit := l0/64, l0%64
		n := min(64-bit, l1-l0)
		mask := ^uint64(0)
		if n < 64 {
			mask = (1<<n - 1) << bit
		}
		lb.written[w] |= mask
		l0 += n
	}
}

func (lb *lazyBlock) allWritten() bool {
	for _, w := range lb.written {
		if w != ^uint64(0) {
			return false
		}
	}
	return true
}

// fillUnwritten writes the pattern into the lines of [l0, l1) not
// written yet, and marks them written; b is the block's bytes.
func (lb *lazyBlock) fillUnwritten(b []byte, l0, l1 int) {
	for l := l0; l < l1; {
		if lb.written[l/64]&(1<<(l%64)) != 0 {
			l++
			continue
		}
		e := l + 1
		for e < l1 && lb.written[e/64]&(1<<(e%64)) == 0 {
			e++
		}
		fillRepeat(b[l<<lazyLineShift:e<<lazyLineShift], lb.pattern)
		lb.mark(l, e)
		l = e
	}
}

// writeLazy writes every pending pattern: the live bytes are then all
// there for a reader of the whole memory.
func (m *Memory) writeLazy() {
	if m.lazyBlocks > 0 {
		m.touchLazy(0, int64(len(m.data)), false)
	}
}

// fillRepeat fills b with pattern repeated from its start.
func fillRepeat(b []byte, pattern uint64) {
	if len(b) < 8 {
		var p [8]byte
		binary.LittleEndian.PutUint64(p[:], pattern)
		copy(b, p[:])
		return
	}
	binary.LittleEndian.PutUint64(b, pattern)
	// Double the filled prefix up to 4 KiB (in cache), then repeat it.
	k := 8
	for ; k < len(b) && k < 4096; k *= 2 {
		copy(b[k:], b[:k])
	}
	for blk := k; k < len(b); k += blk {
		copy(b[k:], b[:blk])
	}
}
