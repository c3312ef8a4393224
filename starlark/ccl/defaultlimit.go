package ccl

import "sync/atomic"

// An address-space limit (ulimit -v, RLIMIT_AS) ends the process with the
// Go runtime's fatal error when the heap cannot grow, however much memory
// the system has: the default --max-memory stays under it. The Go heap
// maps more address space than it holds (arenas, the pages it returned to
// the system and still maps, goroutine stacks, its metadata), so the
// default is half of what the limit leaves when the process starts: a
// 3 GiB ulimit -v gives about 1.4 GiB, where a run that held 1.5 GiB was
// killed before.

// underAddressSpace caps limit (the default from the memory available; 0
// when unknown) at half the address space the process may still map;
// fromAS says the cap applied.
func underAddressSpace(limit, room int64) (capped int64, fromAS bool) {
	if room <= 0 {
		return limit, false
	}
	if half := room / 2; limit <= 0 || half < limit {
		return max(half, 1), true
	}
	return limit, false
}

// defaultFromAddressSpace is set when DefaultMaxMemory's figure is the
// address-space cap (the messages naming the default say so).
var defaultFromAddressSpace atomic.Bool

// defaultLimitWhy is how a message explains the default limit.
func defaultLimitWhy() string {
	if defaultFromAddressSpace.Load() {
		return "the default: half the address space ulimit -v leaves"
	}
	return "the default: " + defaultLimitRule
}
