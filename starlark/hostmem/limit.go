package hostmem

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultMaxMemory is --max-memory's default: 80 % of the memory the
// process may use, the smaller of the machine's physical memory
// (MemTotal) and the cgroup's limit (v2 memory.max, v1
// memory.limit_in_bytes). Both are fixed while the machine runs, so one
// command is admitted or refused the same way whatever other processes
// hold at the moment (MemAvailable, the base before, moved by gigabytes
// within a session), and at most half the address space an RLIMIT_AS
// leaves a run (see below). 0 when none is known.
func DefaultMaxMemory() int64 {
	n, fromAS := underAddressSpace(availableMemory(os.ReadFile)/5*4, startRoom())
	defaultFromAddressSpace.Store(fromAS)
	return n
}

// defaultLimitRule is how messages name DefaultMaxMemory's rule.
const defaultLimitRule = "80% of the machine's memory, cgroup limit included"

// availableMemory is the memory the process may use, from the files read
// reads: the smaller of MemTotal and the cgroup's limit (0 when none
// says). Never MemAvailable: it moves with what other processes hold.
func availableMemory(read func(string) ([]byte, error)) int64 {
	var avail int64
	take := func(n int64) {
		if n > 0 && (avail == 0 || n < avail) {
			avail = n
		}
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := read(f); err == nil {
			// "max" (v2) or a huge number (v1) mean no limit.
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n < 1<<60 {
				take(n)
			}
		}
	}
	if b, err := read("/proc/meminfo"); err == nil {
		fields := map[string]int64{}
		for _, line := range bytes.Split(b, []byte("\n")) {
			f := strings.Fields(string(line))
			if len(f) >= 2 {
				if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					fields[strings.TrimSuffix(f[0], ":")] = n * 1024 // kB
				}
			}
		}
		take(fields["MemTotal"])
	}
	return avail
}

// An address-space limit (ulimit -v, RLIMIT_AS) ends the process with the
// Go runtime's fatal error when the heap cannot grow, however much memory
// the system has: the default --max-memory stays under it. The Go heap
// maps more address space than it holds (arenas, the pages it returned to
// the system and still maps, goroutine stacks, its metadata), so the
// default is half of what the limit leaves beyond what the process maps
// as it starts (2 GiB, addrspace_linux.go): an 8 GiB ulimit -v gives
// 3 GiB, a 3 GiB one 512 MiB (a run that held 1.5 GiB under 3 GiB was
// killed by the Go runtime before).

// startRoom is the address space a run may map (addressSpaceRoom: the
// limit less a constant, not a reading of VmSize, which moved between
// runs of one command and the default with it), read once.
var startRoom = sync.OnceValue(addressSpaceRoom)

// underAddressSpace caps limit (the default from the memory available; 0
// when unknown) at half the address space a run may map (addressSpaceRoom);
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

// DefaultLimitWhy is how a message explains the default limit.
func DefaultLimitWhy() string {
	if defaultFromAddressSpace.Load() {
		return "the default: half of what ulimit -v leaves past the 2 GiB kernbench maps as it starts"
	}
	return "the default: " + defaultLimitRule
}

// startMapped is the address space kernbench maps before a run: the Go
// runtime's reservations (its page allocator's indexes, the first heap
// arenas), the binary and its threads. Measured as VmSize while a run
// starts under ulimit -v 3000000: 1.73 to 1.86 GB, moving by tens of
// megabytes between runs of one command with the threads and arenas of
// the moment. A constant, not a reading, so that the default --max-memory
// is the same at every run.
const startMapped = 2 << 30

// AddressSpaceLimited reports whether the process runs under an
// address-space limit (RLIMIT_AS, ulimit -v): then address space a run
// maps without touching counts against it too.
func AddressSpaceLimited() bool { return addressSpaceRoom() != 0 }
