package tl

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"go.starlark.net/syntax"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
)

// Rule (docs/architecture.md, Invariants and failures, hazards;
// WriteWriteHazard is one of ours beyond the list there): a write whose
// operation completed and was recycled is over, even while the recycled
// object carries a later write into the same range. The hazard names that
// later write (not the finished one whose entry still pointed at the object),
// and the finished entry leaves the list of issued writes.
func TestWriteWriteHazard_RecycledOperationIsNotPending(t *testing.T) {
	m := timingOnlyMachine(t, 1)
	s := m.Sim
	pe := m.Ranks[0]
	reg := machine.Region{Mem: pe.TCM, Off: 0, N: 64}
	// Writes issued from a fused primitive take its call site (no thread
	// needed to find it).
	k := &Kernel{M: m, PE: pe, inFused: true}
	at := func(line int32) { k.fusedCallBuf.site = syntax.MakePosition(&[]string{"kernel.star"}[0], line, 1) }

	at(1)
	first := m.Store(pe, reg, nil)
	k.noteWrite("tl.first", first)
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	m.Recycle(first, false)

	at(2)
	second := m.Store(pe, reg, nil)
	if second != first {
		t.Fatal("the machine did not reuse the recycled operation; the test needs it to")
	}
	k.noteWrite("tl.second", second)

	err := k.checkWriteWrite("tl.third", reg)
	if errkind.Of(err) != errkind.WriteWriteHazard {
		t.Fatalf("a write over the second's range: got %v, want a WriteWriteHazard", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "tl.second issued at kernel.star:2:1") {
		t.Errorf("the hazard names %q, want the pending write (tl.second issued at kernel.star:2:1)", msg)
	}
	k.compactWrites(false)
	if len(k.writes) != 1 || k.writes[0].fn != "tl.second" {
		t.Errorf("issued writes after compaction: %d entries (%v), want tl.second's alone", len(k.writes), k.writes)
	}
}

// Rule (the WriteWriteHazard, as above): the issued writes are compacted
// as writes are noted (not only before a check), and a compaction never
// drops a write still under way. A process issues stores over time into
// eight ranges (some into HBM, slower), recycling completed operations so
// that later stores reuse them, and after every store checks the list
// against a reference: every write under way is in it, and a write into
// each range is refused exactly when one of the reference's writes into
// that range is under way, naming the first of them.
func TestWriteWriteHazard_CompactionKeepsEveryWriteUnderWay(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		m := timingOnlyMachine(t, 1)
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
		k := &Kernel{M: m, PE: pe, inFused: true}
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
				// Recycle some completed operations (as settle and a
				// stored send do), so that later stores reuse them.
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
					if len(k.writes) >= k.writesCompactAt {
						compactions++ // noteWrite compacts first
					}
					k.noteWrite(fn, op)
					ref = append(ref, issued{op, op.Gen(), fn, r})
					for _, w := range ref {
						if w.op.Gen() != w.gen || w.op.Done {
							continue
						}
						found := false
						for _, e := range k.writes {
							found = found || e.op == w.op && e.gen == w.gen && e.fn == w.fn
						}
						if !found {
							t.Errorf("seed %d, after %s: %s into range %d is under way and no longer in the issued writes", seed, fn, w.fn, w.r)
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
					err := k.checkWriteWrite("tl.check", ranges[r])
					switch {
					case first == "" && err != nil:
						t.Errorf("seed %d, store %d: range %d has no write under way, got %v", seed, n, r, err)
					case first != "" && (errkind.Of(err) != errkind.WriteWriteHazard || !strings.Contains(err.Error(), "while the "+first+" ")):
						t.Errorf("seed %d, store %d: range %d: got %v, want a WriteWriteHazard naming %s", seed, n, r, err, first)
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
