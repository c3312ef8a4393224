package hostmem

import (
	"os"
	"sync"
)

// A verified run holds two large pointer-free blocks for its whole length:
// the simulated memory and the pre-run image phase 2 replays onto; an
// unverified run the first. With Go's default GOGC=100 the heap may grow
// to twice them before the next collection, so peak RSS would be about
// double what the run needs (a kernel that allocates much per message
// fills that headroom). While such runs are active the collector keeps a
// headroom of about 15 % of those bytes (at least 64 MiB) instead;
// collections stay cheap because the big blocks hold no pointers to
// scan. The GC percent is set through the installed Settings (none: the
// collector keeps the program's). A GOGC set in the process's environment
// wins (the runtime's setting: os.Getenv, not a command's script.Env).
// The count is process-wide and safe for runs side by side.

var largeHeap struct {
	sync.Mutex
	bytes int64         // held by active runs
	saved int           // the GC percent before the first of them
	set   func(int) int // the installed SetGCPercent as the first of them registered
}

const minHeadroom = 64 << 20

// HoldLargeHeap registers n bytes held for the rest of a run and returns
// the function that gives them up.
func HoldLargeHeap(n int64) (release func()) {
	if n < 4*minHeadroom || os.Getenv("GOGC") != "" {
		return func() {}
	}
	largeHeap.Lock()
	defer largeHeap.Unlock()
	if largeHeap.bytes == 0 {
		largeHeap.set = installed().SetGCPercent
		if largeHeap.set == nil {
			return func() {} // no setting to change
		}
		largeHeap.saved = largeHeap.set(100)
	}
	largeHeap.bytes += n
	tuneGC()
	return func() {
		largeHeap.Lock()
		defer largeHeap.Unlock()
		largeHeap.bytes -= n
		if largeHeap.bytes == 0 {
			largeHeap.set(largeHeap.saved)
			return
		}
		tuneGC()
	}
}

func tuneGC() {
	largeHeap.set(GCPercent(largeHeap.bytes))
}

// GCPercent is the GC percent while runs hold b bytes of large blocks:
// Go's default 100 below 4 × minHeadroom (HoldLargeHeap takes no smaller
// block), else a headroom of 15 % of the blocks, at least minHeadroom.
// The memory estimate counts the same headroom.
func GCPercent(b int64) int {
	if b < 4*minHeadroom {
		return 100
	}
	headroom := max(minHeadroom, b*15/100)
	return int(min(100, max(10, headroom*100/b)))
}
