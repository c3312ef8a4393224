package tl_test

import (
	"testing"

	"kernbench/engine/dtype"
)

// A forwarding primitive stages its pieces in a ring of n_slots+2 TCM
// slots of slot_size bytes, taken in turn: each piece gets the next slot
// (sized for the piece), and after the last slot the first again, so a
// slot is reused only once n_slots+1 later pieces were staged.
func TestStagingSlots_TakenInTurnAroundTheRing(t *testing.T) {
	w := newWorld(t, 2)
	k := w.kernel(0, nil)
	cfg := testIPCQ()
	n := cfg.NSlots + 2
	const count = 3
	first, err := k.StagingSlot("tl.recv_reduce_send", dtype.F32, count)
	if err != nil {
		t.Fatal(err)
	}
	if first.Mem != w.m.Ranks[0].TCM || first.N != count*4 {
		t.Fatalf("first staging slot %v: want %d bytes of rank 0's TCM", first, count*4)
	}
	for i := 1; i <= n; i++ {
		reg, err := k.StagingSlot("tl.recv_reduce_send", dtype.F32, count)
		if err != nil {
			t.Fatal(err)
		}
		want := first.Off + int64(i%n)*cfg.SlotSize
		if reg.Mem != first.Mem || reg.Off != want || reg.N != count*4 {
			t.Errorf("staging slot %d: %v at offset %d, want offset %d, %d bytes", i, reg, reg.Off, want, count*4)
		}
	}
}
