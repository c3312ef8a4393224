//go:build linux

package quietstart

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

var (
	savedAS   syscall.Rlimit
	loweredAS bool
)

// startRoom is the address space left to the packages initialised
// before main (a few megabytes are enough), less than the 4 GiB the
// reservation asks for.
const startRoom = 1 << 30

// lowerAddressSpace lowers the soft RLIMIT_AS, when there is one, to
// what the process maps plus startRoom, so that starlark's reservation
// fails.
func lowerAddressSpace() {
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &savedAS); err != nil || savedAS.Cur == ^uint64(0) {
		return
	}
	used := vmSize()
	if used <= 0 || savedAS.Cur <= uint64(used)+startRoom {
		return // the reservation fails anyway
	}
	lowered := savedAS
	lowered.Cur = uint64(used) + startRoom
	loweredAS = syscall.Setrlimit(syscall.RLIMIT_AS, &lowered) == nil
}

// restoreAddressSpace sets the soft limit back (the hard limit never
// moved, so an unprivileged process may).
func restoreAddressSpace() {
	if loweredAS {
		_ = syscall.Setrlimit(syscall.RLIMIT_AS, &savedAS)
		loweredAS = false
	}
}

// vmSize is the address space the process maps (0 when unknown).
func vmSize() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if f := bytes.Fields(line); len(f) >= 2 && string(f[0]) == "VmSize:" {
			n, _ := strconv.ParseInt(string(f[1]), 10, 64)
			return n * 1024
		}
	}
	return 0
}
