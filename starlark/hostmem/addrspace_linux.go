//go:build linux

package hostmem

import "golang.org/x/sys/unix"

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
