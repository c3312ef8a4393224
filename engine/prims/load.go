package prims

import "kernbench/engine/machine"

// Load is a read of a view by the PE: a fused primitive's private load of
// a piece (pooled: LoadPool), and the operation a tl handle of a fetch,
// store or copy tracks (its first field). The fields a private load
// touches are its 160 bytes.
type Load struct {
	Op *machine.MemOp
	// Stale is the StaleSlot error found when a read of a received slot
	// completed (WatchSlot).
	Stale error
	// Rank is the rank whose use of a received slot Stale names.
	Rank int
	next *Load  // links the recycled loads (LoadPool)
	Kind string // fetch, store, copy, recv
	// Src is the source read (a fetch: the tile's dtype and count, its
	// received slot).
	Src View
}

// WatchSlot has rank's load check, when its read completes, that a
// received slot source still held the message it was received as (the
// bytes are read at completion).
func (l *Load) WatchSlot(rank int) {
	if l.Src.Slot.Q == nil {
		return
	}
	l.Rank = rank
	l.Op.Watcher = l
}

// OpDone is WatchSlot's check (machine.MemOp's Watcher).
func (l *Load) OpDone(*machine.MemOp) {
	if l.Src.SlotStale() {
		l.Stale = l.Src.CheckSlot(l.Rank, l.Kind+" src")
	}
}

// Loaded sets t to the tile of the completed fetch l (in place: a piece
// takes two), or returns the StaleSlot error its completion found.
func (l *Load) Loaded(t *Tile) error {
	if l.Stale != nil {
		return l.Stale
	}
	t.DT, t.Count, t.Data, t.Ready, t.ID = l.Src.DT, l.Src.Count, l.Op.Data, l.Op.Xfer.Finished, l.Op.TileID
	return nil
}

// LoadPool holds the loads the fused primitives recycled, for the
// kernels of one run (one simulation: its kernels run one at a time) to
// reuse, the last recycled first. Shared by all ranks, the load a rank
// gets is the one some rank recycled last, still in cache; a pool per
// rank handed out the one its rank recycled a whole ring turn ago, a
// cache miss or more per message at a hundred ranks.
type LoadPool struct {
	free *Load
}

// New returns a load to fill, reusing a recycled one: recycling clears
// what a fetch does not set again (Op, Stale); Kind, Src and Rank are the
// caller's to set.
func (p *LoadPool) New() *Load {
	if l := p.free; l != nil {
		p.free, l.next = l.next, nil
		return l
	}
	return &Load{}
}

// Recycle hands a load whose operation has completed, and the operation,
// back for reuse; keepData: no tile holds the loaded bytes any more, so
// the next load may overwrite them. The caller keeps no pointer to l:
// any kernel of the run may reuse it.
func (p *LoadPool) Recycle(m *machine.Machine, l *Load, keepData bool) {
	m.Recycle(l.Op, keepData)
	// Only what a reuse does not set again is cleared: a whole load is
	// 20 words to clear, twice per piece.
	l.Op, l.Stale = nil, nil
	l.next, p.free = p.free, l
}
