package prims

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// What a write still under way refuses: a write into an overlapping range
// (PendingInto) while its operation is not done; a read of it
// (PendingRead) only for an asynchronous write with a handle, and on an
// untimed machine until the handle is waited even once the operation is
// done.
func TestWrites_PendingIntoAndRead(t *testing.T) {
	type want struct{ into, read, readUntimed string }
	tests := []struct {
		name   string
		fn     string
		done   bool // the operation completed
		handle bool // a handle is attached
		waited bool
		at     machine.Region // the range checked (the write's is [0, 64))
		want   want
	}{
		{name: "plain store under way", fn: "tl.store", at: machine.Region{Off: 32, N: 64}, want: want{into: "tl.store"}},
		{name: "plain store elsewhere", fn: "tl.store", at: machine.Region{Off: 64, N: 64}},
		{name: "store_async under way", fn: "tl.store_async", handle: true, at: machine.Region{Off: 0, N: 8},
			want: want{into: "tl.store_async", read: "tl.store_async", readUntimed: "tl.store_async"}},
		{name: "store_async done, not waited", fn: "tl.store_async", handle: true, done: true, at: machine.Region{Off: 0, N: 8},
			want: want{readUntimed: "tl.store_async"}},
		{name: "store_async done and waited", fn: "tl.store_async", handle: true, done: true, waited: true, at: machine.Region{Off: 0, N: 8}},
		{name: "a handle on a plain store is not attached", fn: "tl.store", handle: true, at: machine.Region{Off: 0, N: 8}, want: want{into: "tl.store"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, 1)
			pe := m.Ranks[0]
			var ws Writes
			op := m.Store(pe, machine.Region{Mem: pe.TCM, Off: 0, N: 64}, nil)
			ws.Note(tt.fn, op, site(3), false, nil)
			waited := tt.waited
			if tt.handle {
				ws.Attach(op, &waited)
			}
			if tt.done {
				if err := m.Sim.Run(); err != nil {
					t.Fatal(err)
				}
			}
			at := tt.at
			at.Mem = pe.TCM
			name := func(w *Write) string {
				if w == nil {
					return ""
				}
				return w.Fn
			}
			got := want{into: name(ws.PendingInto(at)), read: name(ws.PendingRead(at, false)), readUntimed: name(ws.PendingRead(at, true))}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("pending writes (-want +got):\n%s", diff)
			}
			if w := ws.PendingInto(at); w != nil && w.IssuedAt() != " issued at kernel.star:3" {
				t.Errorf("IssuedAt = %q", w.IssuedAt())
			}
		})
	}
}

// A write whose operation completed and was recycled is over, even while
// the recycled object carries a later write into the same range: the
// later write is the one found, and compaction drops the finished entry.
func TestWrites_RecycledOperationIsNotPending(t *testing.T) {
	m := newMachine(t, 1)
	pe := m.Ranks[0]
	reg := machine.Region{Mem: pe.TCM, Off: 0, N: 64}
	var ws Writes
	first := m.Store(pe, reg, nil)
	ws.Note("tl.first", first, site(1), false, nil)
	if err := m.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	m.Recycle(first, false)
	second := m.Store(pe, reg, nil)
	if second != first {
		t.Fatal("the machine did not reuse the recycled operation; the test needs it to")
	}
	ws.Note("tl.second", second, site(2), false, nil)
	if w := ws.PendingInto(reg); w == nil || w.Fn != "tl.second" {
		t.Fatalf("PendingInto = %v, want tl.second's entry", w)
	}
	ws.Compact(false)
	var fns []string
	for _, w := range ws.Entries() {
		fns = append(fns, w.Fn)
	}
	if diff := cmp.Diff([]string{"tl.second"}, fns); diff != "" {
		t.Errorf("entries after compaction (-want +got):\n%s", diff)
	}
}

// The entries are compacted as writes are noted (not only before a
// check), and a compaction never drops a write still under way. A process
// issues stores over time into eight ranges (some into HBM, slower),
// recycling completed operations so that later stores reuse them, and
// after every store checks the list against a reference: every write
// under way is in it, and each range's first pending write is the
// reference's.
func TestWrites_CompactionKeepsEveryWriteUnderWay(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		m := newMachine(t, 1)
		s := m.Sim
		pe := m.Ranks[0]
		ranges := make([]machine.Region, 8)
		for i := range ranges {
			mem := pe.TCM
			if i%3 == 0 {
				mem = pe.HBM
			}
			ranges[i] = machine.Region{Mem: mem, Off: int64(i) * 256, N: 64 + int64(i)*32}
		}
		var ws Writes
		type issued struct {
			op  *machine.MemOp
			gen uint64
			fn  string
			r   int
		}
		var ref []issued
		rng := rand.New(rand.NewPCG(seed, 3))
		compactions := 0
		s.Spawn("kernel", func(p *sim.Proc) {
			for n := 0; n < 300; {
				for _, w := range ref {
					if w.op.Gen() == w.gen && w.op.Done && rng.IntN(2) == 0 {
						m.Recycle(w.op, false)
					}
				}
				// A burst of stores with no check between them (a fused
				// primitive's pieces), each noted.
				for range 1 + rng.IntN(6) {
					r := rng.IntN(len(ranges))
					op := m.Store(pe, ranges[r], nil)
					fn := fmt.Sprintf("tl.w%d", n)
					n++
					if ws.WillCompact() {
						compactions++
					}
					ws.Note(fn, op, site(1), false, nil)
					ref = append(ref, issued{op, op.Gen(), fn, r})
					for _, w := range ref {
						if w.op.Gen() != w.gen || w.op.Done {
							continue
						}
						found := false
						for _, e := range ws.Entries() {
							found = found || e.Op == w.op && e.Gen == w.gen && e.Fn == w.fn
						}
						if !found {
							t.Errorf("seed %d, after %s: %s into range %d is under way and no longer noted", seed, fn, w.fn, w.r)
						}
					}
					if rng.IntN(3) == 0 {
						_ = p.Sleep(sim.Time(rng.Int64N(int64(20 * sim.Nanosecond))))
					}
				}
				for r := range ranges {
					var first string
					for _, w := range ref {
						if w.op.Gen() == w.gen && !w.op.Done && ranges[w.r].Overlaps(ranges[r]) {
							first = w.fn
							break
						}
					}
					got := ""
					if w := ws.PendingInto(ranges[r]); w != nil {
						got = w.Fn
					}
					if got != first {
						t.Errorf("seed %d, store %d: range %d: pending write %q, want %q", seed, n, r, got, first)
					}
				}
				_ = p.Sleep(sim.Time(rng.Int64N(int64(60 * sim.Nanosecond))))
			}
		})
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		if compactions < 5 {
			t.Errorf("seed %d: the list was compacted %d times as writes were noted; the test wants it to be, often", seed, compactions)
		}
	}
}
