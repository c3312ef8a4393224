//go:build linux && (amd64 || arm64)

package hugepages

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestHeapMappingsPicksTheGoHeapsArenas(t *testing.T) {
	const floor = 0x3564dc000000
	maps := strings.Join([]string{
		"00400000-00c00000 r-xp 00000000 fd:01 123 /usr/local/bin/kernbench",
		"010f1000-0312b000 rw-p 00000000 00:00 0 ",                        // below the heap (the binary's bss)
		"0a51c000-0a53d000 rw-p 00000000 00:00 0                  [heap]", // the C heap, named
		"3564dc000000-3564dd400000 ---p 00000000 00:00 0 ",                // reserved, not mapped
		"3564dd400000-3564e0400000 rw-p 00000000 00:00 0 ",                // an arena in use: picked
		"3564e0400000-3564e0500000 rw-p 00000000 00:00 0 ",                // 1 MiB: less than a huge page
		"3564e4000000-3564e8000000 rw-p 00000000 00:00 0",                 // the next arena: picked
		"3564e8000000-3564ec000000 rw-s 00000000 00:05 7 /dev/shm/x",      // shared, file-backed
		"7f2a2ab5f000-7f2a2b360000 rw-p 00000000 00:00 0 ",                // a thread stack, far above
	}, "\n") + "\n"
	got := heapMappings([]byte(maps), floor)
	want := []span{{0x3564dd400000, 0x3564e0400000}, {0x3564e4000000, 0x3564e8000000}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(span{})); diff != "" {
		t.Errorf("heapMappings (-want +got):\n%s", diff)
	}
}

// TestAdviseHeapMarksTheHeapForHugePages checks on this machine that the
// scan finds the mapping holding a heap object and that the kernel took
// the advice (the mapping's VmFlags gain "hg").
func TestAdviseHeapMarksTheHeapForHugePages(t *testing.T) {
	if !thpOnRequest() {
		t.Skip("transparent huge pages are not in madvise mode here")
	}
	buf := make([]byte, 16<<20)
	for i := range buf {
		buf[i] = 1
	}
	floor := uintptr(unsafe.Pointer(heapProbe)) &^ (heapArena - 1)
	if !adviseHeap(floor, map[span]bool{}, unix.MADV_HUGEPAGE) {
		t.Fatal("adviseHeap found no heap mapping")
	}
	wantAdvised(t, uintptr(unsafe.Pointer(&buf[0])), "")
}

// wantAdvised fails t unless the mapping holding addr is advised for huge
// pages (VmFlags hg); what says what addr is.
func wantAdvised(t *testing.T, addr uintptr, what string) {
	t.Helper()
	flags, ok := vmFlags(t, addr)
	if !ok {
		t.Fatalf("no mapping holds %#x", addr)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("the heap mapping holding %s%#x has VmFlags %q, want hg among them", what, addr, flags)
	}
}

// vmFlags is the VmFlags line of the mapping that holds addr.
func vmFlags(t *testing.T, addr uintptr) (string, bool) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	inside := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line + " x")[0], "-"); ok {
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				inside = uintptr(start) <= addr && addr < uintptr(end)
				continue
			}
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && inside {
			return strings.TrimSpace(flags), true
		}
	}
	return "", false
}

// TestReservedHeapTakesTheRunsAllocations checks on this machine that a
// heap mapped ahead (reserveHeap) holds the allocations that follow, in a
// mapping advised before they touch it: without the reserve, an
// allocation larger than every free range of the heap so far gets a
// fresh mapping that no scan has seen.
func TestReservedHeapTakesTheRunsAllocations(t *testing.T) {
	if !thpOnRequest() {
		t.Skip("transparent huge pages are not in madvise mode here")
	}
	floor := uintptr(unsafe.Pointer(heapProbe)) &^ (heapArena - 1)
	reserveHeap(floor, map[span]bool{}, 512<<20)
	buf := make([]byte, 96<<20)
	buf[0] = 1
	wantAdvised(t, uintptr(unsafe.Pointer(&buf[0])), "a new allocation ")
}

func TestReserveForTakesAMiBPerRankWithinHalfTheAvailableMemory(t *testing.T) {
	const plenty = "MemTotal:       24684000 kB\nMemFree:        14000000 kB\nMemAvailable:   22812672 kB\n"
	tests := []struct {
		name       string
		meminfo    string
		overcommit string
		ranks      int
		want       uintptr
	}{
		{"1024 ranks", plenty, "0\n", 1024, 1 << 30},
		{"1000 ranks: whole arenas", plenty, "0\n", 1000, 960 << 20},
		{"8 ranks: one arena", plenty, "0\n", 8, heapArena},
		{"ranks not known: one arena", plenty, "0\n", 0, heapArena},
		{"65536 ranks: at most 4 GiB", plenty, "0\n", 65536, maxReserve},
		{"overcommit always", plenty, "1\n", 1024, 1 << 30},
		{"strict commit limit", plenty, "2\n", 1024, 0},
		{"half of 1 GiB available", "MemAvailable:    1048576 kB\n", "0\n", 1024, 512 << 20},
		{"half, rounded down to an arena", "MemAvailable:    1000000 kB\n", "0\n", 1024, 448 << 20},
		{"less than an arena", "MemAvailable:      100000 kB\n", "0\n", 1024, 0},
		{"no MemAvailable (old kernels)", "MemTotal:       24684000 kB\nMemFree:        14000000 kB\n", "0\n", 1024, 0},
		{"unreadable", "MemAvailable:   lots\n", "0\n", 1024, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reserveFor([]byte(tt.meminfo), []byte(tt.overcommit), tt.ranks); got != tt.want {
				t.Errorf("reserveFor = %d MiB, want %d MiB", got>>20, tt.want>>20)
			}
		})
	}
}
