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
	addr := uintptr(unsafe.Pointer(&buf[0]))
	flags, ok := vmFlags(t, addr)
	if !ok {
		t.Fatalf("no mapping holds %#x", addr)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("the heap mapping holding %#x has VmFlags %q, want hg among them", addr, flags)
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
