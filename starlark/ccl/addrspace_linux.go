//go:build linux

package ccl

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// addressSpaceRoom is the address space the process may still map under
// its RLIMIT_AS (ulimit -v): the soft limit less what it maps already
// (VmSize); 0 when there is no limit.
func addressSpaceRoom() int64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur >= 1<<62 {
		return 0
	}
	used := int64(0)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if f := bytes.Fields(line); len(f) >= 2 && string(f[0]) == "VmSize:" {
				if n, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
					used = n * 1024 // kB
				}
			}
		}
	}
	room := int64(rl.Cur) - used
	if room <= 0 {
		return 1 // nothing left: every run is refused
	}
	return room
}
