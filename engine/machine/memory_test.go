package machine

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/oplog"
)

// heldBlocks lists the blocks of mem whose pre-run bytes were saved.
func heldBlocks(mem *Memory) []int {
	var out []int
	for b, s := range mem.preRun.state {
		if s != oplog.Unheld {
			out = append(out, b)
		}
	}
	return out
}

// preRunTestBlocks allocates n pre-run blocks in PE 0's TCM of a test
// machine and returns them for writing.
func preRunTestBlocks(t *testing.T, n int64) (m *Machine, mem *Memory, off int64, b []byte) {
	t.Helper()
	m = newTestMachine(t, testParams())
	mem = m.PE(0).TCM
	off, err := mem.Alloc(n << preRunBlockShift)
	if err != nil {
		t.Fatal(err)
	}
	return m, mem, off, mem.Bytes(off, n<<preRunBlockShift)
}

// While the pre-run image is kept, a write through Bytes or an Alloc that
// clears reused bytes saves the blocks it writes first; View saves
// nothing; PreRun gives back the bytes from before KeepPreRun.
func TestPreRunSavesBlocksBeforeFirstWrite(t *testing.T) {
	const block = 1 << preRunBlockShift
	m, mem, off, b := preRunTestBlocks(t, 4)
	for i := range b {
		b[i] = byte(i%251 + 1)
	}
	pre := bytes.Clone(b)
	m.KeepPreRun()
	_ = mem.View(off, 4*block)
	if h := heldBlocks(mem); len(h) != 0 {
		t.Fatalf("View saved blocks %v", h)
	}
	// A write across the end of block 1 into block 2.
	w := mem.Bytes(off+2*block-2, 4)
	for i := range w {
		w[i] = 0xEE
	}
	if h := heldBlocks(mem); len(h) != 2 || h[0] != 1 || h[1] != 2 {
		t.Fatalf("held blocks after a write over blocks 1 and 2: %v", h)
	}
	// A reused allocation is cleared: that is a write of block 3.
	mem.Free(off+3*block, block)
	if _, err := mem.Alloc(block); err != nil {
		t.Fatal(err)
	}
	if h := heldBlocks(mem); len(h) != 3 || h[2] != 3 {
		t.Fatalf("held blocks after a clearing Alloc: %v", h)
	}
	if got := (Region{Mem: mem, Off: off, N: block}).PreRun(); &got[0] != &mem.data[off] {
		t.Error("PreRun of a region nothing wrote is not a view of the live memory")
	}
	if got := (Region{Mem: mem, Off: off, N: 4 * block}).PreRun(); !bytes.Equal(got, pre) {
		t.Error("PreRun of the region is not its bytes from before KeepPreRun")
	}
	// A memory materialised afterwards starts from zeros.
	far := m.PE(5).HBM
	fw := far.Bytes(100, 8)
	copy(fw, "abcdefgh")
	if got := (Region{Mem: far, Off: 96, N: 16}).PreRun(); !bytes.Equal(got, make([]byte, 16)) {
		t.Errorf("PreRun of a memory made after KeepPreRun = %v, want zeros", got)
	}
	ov := m.PreRunOverlay()
	m.DropPreRun()
	if mem.preRun != nil || far.preRun != nil {
		t.Error("DropPreRun left an image")
	}
	if ov.Mems[mem.ID].State[1] != oplog.HeldBytes || !bytes.Equal(ov.Mems[mem.ID].Pre[off+block:off+2*block], pre[block:2*block]) {
		t.Error("the overlay does not carry the saved block")
	}
}

// Rule (docs/architecture.md, Two-pass verification: phase 2 starts from the
// initial image): a block whose bytes repeat every 8 bytes (a receive
// buffer's sentinel) is saved before its first write as its pattern, without
// a copy; PreRun still gives back its bytes from before KeepPreRun.
func TestPreRunSavesSentinelBlockAsPattern(t *testing.T) {
	const block = 1 << preRunBlockShift
	m, mem, off, b := preRunTestBlocks(t, 2)
	for i := range b {
		b[i] = []byte{0, 0, 0xc0, 0x7f}[i%4]
	}
	pre := bytes.Clone(b)
	m.KeepPreRun()
	copy(mem.Bytes(off+block-4, 8), "abcdefgh")
	first := int(off / block)
	if s := mem.preRun.state[first : first+2]; s[0] != oplog.HeldPattern || s[1] != oplog.HeldPattern {
		t.Fatalf("sentinel blocks saved as %v, want patterns", s)
	}
	if p := mem.preRun.pre[off : off+2*block]; !bytes.Equal(p, make([]byte, 2*block)) {
		t.Error("a block saved as a pattern was copied too")
	}
	if got := (Region{Mem: mem, Off: off, N: 2 * block}).PreRun(); !bytes.Equal(got, pre) {
		t.Error("PreRun of the region is not its bytes from before KeepPreRun")
	}
}

// Rule (docs/architecture.md, Two-pass verification: phase 2 starts from the
// initial memory image): a region its writer says repeats its first 8 bytes
// (KeepPreRunPattern, the bench's recv buffers) has its whole blocks saved as
// that pattern at once, before any write: the claim is taken, not checked
// (here the bytes of the second whole block break the pattern, and the
// claimed pre-run bytes are the pattern's). The partial blocks at the
// region's ends are left to the first write's check, and before KeepPreRun
// nothing is saved.
func TestPreRunPatternClaimSavesWholeBlocks(t *testing.T) {
	const block = 1 << preRunBlockShift
	m, mem, off, b := preRunTestBlocks(t, 4)
	for i := range b {
		b[i] = []byte{0, 0, 0xc0, 0x7f}[i%4]
	}
	want := bytes.Clone(b[:block])
	b[2*block+100] = 1 // block 2 is no pattern
	r := Region{Mem: mem, Off: off + 8, N: 4*block - 16}
	r.KeepPreRunPattern() // before KeepPreRun: no image to tell
	m.KeepPreRun()
	first := int(off / block)
	if s := mem.preRun.state[first : first+4]; s[0]|s[1]|s[2]|s[3] != oplog.Unheld {
		t.Fatalf("blocks saved before KeepPreRun: %v", s)
	}
	r.KeepPreRunPattern()
	s := mem.preRun.state[first : first+4]
	if s[0] != oplog.Unheld || s[3] != oplog.Unheld {
		t.Errorf("the region's partial end blocks were saved: %v", s)
	}
	if s[1] != oplog.HeldPattern || s[2] != oplog.HeldPattern {
		t.Fatalf("the region's whole blocks saved as %v, want patterns", s[1:3])
	}
	if got := (Region{Mem: mem, Off: off + 2*block, N: block}).PreRun(); !bytes.Equal(got, want) {
		t.Error("PreRun of a claimed block is not the claimed pattern")
	}
}

// A SpaceCheck allocates as Alloc would, in the same first-fit places
// and with the same error, and its Undo leaves every memory's free spans
// and use as they were, also around holes; the memories' bytes are never
// made.
func TestSpaceCheckAllocatesAsAllocAndUndoes(t *testing.T) {
	m := newTestMachine(t, testParams())
	a, b := m.PE(0).TCM, m.PE(1).TCM
	// Holes in a: two allocations freed between three that stay.
	var offs []int64
	for _, n := range []int64{4096, 1000, 4096, 3000, 4096} {
		off, err := a.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	a.Free(offs[1], 1000)
	a.Free(offs[3], 3000)
	type state struct {
		Free       []span
		Used, Data int64
	}
	of := func(mem *Memory) state { return state{slices.Clone(mem.free), mem.used, int64(len(mem.data))} }
	beforeA, beforeB := of(a), of(b)

	var check SpaceCheck
	var got []error
	for _, step := range []struct {
		mem *Memory
		n   int64
	}{{a, 900}, {a, 2000}, {b, b.Capacity / 2}, {a, 200}, {b, b.Capacity / 2}, {b, 1}} {
		got = append(got, check.Alloc(step.mem, step.n))
	}
	checkedA, checkedB := of(a), of(b)
	check.Undo()
	if diff := cmp.Diff([]state{beforeA, beforeB}, []state{of(a), of(b)}, cmp.AllowUnexported(span{})); diff != "" {
		t.Errorf("after Undo (-before +after):\n%s", diff)
	}
	if b.Size() != 0 {
		t.Errorf("the check made b's bytes (%d)", b.Size())
	}

	// The same allocations made for real: the same places, the same
	// outcome (the last one fails in b, full).
	var want []error
	for _, step := range []struct {
		mem *Memory
		n   int64
	}{{a, 900}, {a, 2000}, {b, b.Capacity / 2}, {a, 200}, {b, b.Capacity / 2}, {b, 1}} {
		_, err := step.mem.Alloc(step.n)
		want = append(want, err)
	}
	if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(got)); diff != "" {
		t.Errorf("errors (-Alloc +SpaceCheck):\n%s", diff)
	}
	if got[5] == nil {
		t.Fatal("the last allocation fitted a full memory")
	}
	for _, c := range []struct{ checked, real state }{{checkedA, of(a)}, {checkedB, of(b)}} {
		if diff := cmp.Diff(c.real.Free, c.checked.Free, cmp.AllowUnexported(span{})); diff != "" {
			t.Errorf("free spans (-Alloc +SpaceCheck):\n%s", diff)
		}
	}
}
