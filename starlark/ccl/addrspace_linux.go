//go:build linux

package ccl

import "golang.org/x/sys/unix"

// startMapped is the address space kernbench maps before a run: the Go
// runtime's reservations (its page allocator's indexes, the first heap
// arenas), the binary and its threads. Measured as VmSize while a run
// starts under ulimit -v 3000000: 1.73 to 1.86 GB, moving by tens of
// megabytes between runs of one command with the threads and arenas of
// the moment. A constant, not a reading, so that the default --max-memory
// is the same at every run.
const startMapped = 2 << 30

// addressSpaceRoom is the address space the process may map for a run
// under its RLIMIT_AS (ulimit -v): the soft limit less startMapped; 0 when
// there is no limit, 1 when nothing is left.
func addressSpaceRoom() int64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur >= 1<<62 {
		return 0
	}
	room := int64(rl.Cur) - startMapped
	if room <= 0 {
		return 1 // nothing left: every run is refused
	}
	return room
}
