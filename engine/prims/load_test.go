package prims

import (
	"strings"
	"testing"
	"unsafe"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
)

// A private load's fields are contiguous and end at Src's end: a field
// added among them, or one grown, spreads a load over a fourth cache line
// (tl's handle begins with a Load).
func TestLoadFieldsAreContiguous(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the cache-line layout is laid out for 64-bit pointers")
	}
	var l Load
	if o := unsafe.Offsetof(l.Src) + unsafe.Sizeof(l.Src); o != 160 || unsafe.Sizeof(l) != 160 {
		t.Errorf("a load's fields end at byte %d (the load is %d bytes), want 160", o, unsafe.Sizeof(l))
	}
	if unsafe.Offsetof(l.Op) != 0 {
		t.Errorf("Load.Op is at byte %d, want 0", unsafe.Offsetof(l.Op))
	}
}

// The pool hands out the load recycled last, its operation and stale
// error cleared (the rest is the next fetch's to set), then new ones.
func TestLoadPool(t *testing.T) {
	m := newMachine(t, 1)
	var pool LoadPool
	a, b := pool.New(), pool.New()
	if a == b {
		t.Fatal("two loads from an empty pool are the same")
	}
	for _, l := range []*Load{a, b} {
		l.Op = m.Fetch(m.Ranks[0], machine.Region{Mem: m.Ranks[0].TCM, Off: 0, N: 16})
		l.Stale = &Error{Kind: KindStaleSlot}
	}
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	pool.Recycle(m, a, true)
	pool.Recycle(m, b, true)
	for i, want := range []*Load{b, a} {
		got := pool.New()
		if got != want {
			t.Fatalf("load %d from the pool is not the one recycled last", i)
		}
		if got.Op != nil || got.Stale != nil || got.next != nil {
			t.Errorf("load %d: op %v, stale %v, next %v; want them cleared", i, got.Op, got.Stale, got.next)
		}
	}
	if l := pool.New(); l == a || l == b {
		t.Error("the pool handed out a load twice")
	}
}

// A completed fetch's tile is its source's dtype and count with the
// operation's bytes and finish time; a stale slot's error comes instead.
func TestLoadLoaded(t *testing.T) {
	m := newMachine(t, 1)
	l := &Load{Kind: "fetch", Src: View{Reg: machine.Region{Mem: m.Ranks[0].TCM, Off: 0, N: 24}, DT: dtype.F32, Count: 6}}
	l.Op = m.Fetch(m.Ranks[0], l.Src.Reg)
	l.Op.TileID = 7
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	var got Tile
	if err := l.Loaded(&got); err != nil {
		t.Fatal(err)
	}
	if got.DT != dtype.F32 || got.Count != 6 || got.Ready != l.Op.Xfer.Finished || got.ID != 7 || got.Ready == 0 {
		t.Errorf("tile %+v, want 6 f32 ready at %v, ID 7", got, l.Op.Xfer.Finished)
	}
	stale := &Error{Kind: KindStaleSlot, Msg: "overwritten"}
	l.Stale = stale
	if err := l.Loaded(&got); err != stale {
		t.Errorf("Loaded of a stale load: %v, want its error", err)
	}
}

// A load of a received slot checks at its completion that the slot still
// holds the message it was received as; any other load is not watched.
func TestLoadWatchSlot(t *testing.T) {
	tests := []struct {
		name      string
		slot      bool
		overwrite bool
		wantStale bool
	}{
		{name: "not a slot"},
		{name: "the slot's message", slot: true},
		{name: "overwritten before the read completed", slot: true, overwrite: true, wantStale: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, 1)
			q := &machine.QueuePair{Dir: "W", PeerDir: "E", Slots: make([]machine.RxSlot, 2)}
			q.Slots[1].Gen = 1
			l := &Load{Kind: "fetch", Src: View{Reg: machine.Region{Mem: m.Ranks[0].TCM, Off: 0, N: 16}, DT: dtype.F32, Count: 4}}
			if tt.slot {
				l.Src.Slot = SlotRef{Q: q, Idx: 1, Gen: 1}
			}
			l.Op = m.Fetch(m.Ranks[0], l.Src.Reg)
			l.WatchSlot(3)
			if tt.overwrite {
				q.Slots[1].Gen = 2
			}
			if err := m.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			if (l.Stale != nil) != tt.wantStale {
				t.Fatalf("Stale = %v, want stale %v", l.Stale, tt.wantStale)
			}
			if tt.wantStale && !strings.HasPrefix(l.Stale.Error(), "StaleSlot: rank 3 fetch src:") {
				t.Errorf("Stale = %v, want rank 3's fetch src named", l.Stale)
			}
		})
	}
}
