package prims

import "kernbench/engine/machine"

// TileBufs are a rank's owners of pieces' bytes, reused.
type TileBufs struct {
	pe   *machine.PE
	free []*TileBuf
}

// TileBuf owns the bytes of a fused primitive's piece while its stores
// copy them: the last store to complete hands them back to the machine's
// pool. The pipeline holds the bytes itself until it has issued the
// piece's last store (Release): the store into the staging slot may wait
// for a slow send still reading the slot, and the dst store, issued
// first, may complete during that wait; without the hold, its completion
// gave the bytes back to the pool, another load took them, and the
// staging store then wrote that load's bytes (phase 1 forwarded other
// data than its op_log says).
type TileBuf struct {
	pool    *TileBufs
	data    []byte
	pending int
}

// New takes ownership of data, bytes of pe's pool (PE.Buffer; nil
// under timing-only: no owner), held by the caller until it calls
// Release.
func (bs *TileBufs) New(pe *machine.PE, data []byte) *TileBuf {
	if data == nil {
		return nil
	}
	bs.pe = pe
	var b *TileBuf
	if n := len(bs.free); n > 0 {
		b = bs.free[n-1]
		bs.free = bs.free[:n-1]
	} else {
		b = &TileBuf{pool: bs}
	}
	b.data, b.pending = data, 1 // the caller's hold
	return b
}

// Watch makes the store op one more reader of the bytes.
func (b *TileBuf) Watch(op *machine.MemOp) {
	if b == nil {
		return
	}
	b.pending++
	op.Watcher = b
}

// OpDone runs when one of the stores has copied the bytes.
func (b *TileBuf) OpDone(*machine.MemOp) { b.Release() }

// Release drops one reader of the bytes (a store that copied them, or
// the holder once it issued its last store); the last one gives them
// back to the PE's pool.
func (b *TileBuf) Release() {
	if b == nil {
		return
	}
	if b.pending--; b.pending == 0 {
		bs := b.pool
		bs.pe.PutBuffer(b.data)
		b.data = nil
		bs.free = append(bs.free, b)
	}
}
