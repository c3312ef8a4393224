package ccl

import (
	"testing"

	"kernbench"

	"kernbench/engine/machine"
)

// An unverified run holds its simulated memory to the end as a verified
// one does: the collector keeps gc.go's headroom for it, not Go's 100 %
// (a kernel that allocates much, rd_allreduce 8 × 16M, doubled the memory
// before a collection), and the memory estimate counts that headroom.
func TestUnverifiedRunHoldsLargeHeap(t *testing.T) {
	var held int64
	afterPhase1 = func(*machine.Machine) {
		largeHeap.Lock()
		held = largeHeap.bytes
		largeHeap.Unlock()
	}
	defer func() { afterPhase1 = nil }()
	// 8 ranks × 2 × 16 MiB: 256 MiB of buffers, the smallest held.
	if _, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 8, Sizes: []int64{16 << 20}}); err != nil {
		t.Fatal(err)
	}
	if held < 256<<20 {
		t.Errorf("while the unverified run simulated, %d bytes were held for the collector, want its 256 MiB of buffers", held)
	}
}
