//go:build linux && (amd64 || arm64)

package hugepages

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A large timing-only run touches a few hundred bytes of one rank's state
// per message (its kernel, queue pairs, DMA engine, coroutine stack), and
// the next message touches another rank's: at 1024 ranks that state
// spreads over hundreds of megabytes of heap, and with 4 KiB pages most of
// those touches also miss the TLB. Backed by 2 MiB transparent huge pages
// the same heap needs 512 times fewer TLB entries. Go does not ask for
// huge pages, and with the kernel's usual setting ("madvise") only memory
// that asks gets them, so a timing-only run asks: a background scan marks
// the Go heap's mappings MADV_HUGEPAGE (later page faults get huge pages)
// and collapses the pages already faulted in (MADV_COLLAPSE). It changes
// where memory sits, never what is simulated. Runs that move data do not
// ask: their heap is mostly buffers read and written in order, where the
// collapse only copies pages (measured slower). GODEBUG=disablethp=1 (the
// Go runtime's own switch for huge pages on its heap) turns it off.

// heapArena is the Go heap's arena alignment on 64-bit Linux: every heap
// mapping lies in arenas that start at multiples of it.
const heapArena = 64 << 20

// heapReach bounds how far above its first arena the heap is looked for
// (it grows upward from there; thread stacks and libraries sit far above).
const heapReach = 1 << 40

// heapProbe is allocated as the program starts, so it sits in the heap's
// first arena.
var heapProbe = new([64]byte)

// collapseAfter is how long a run goes before the pages it already uses
// are collapsed into huge pages. Collapsing copies them (about a second
// for 600 MB here, several for the 2.4 GB of a 65,536-rank world), which
// only a long run earns back: the 1024-rank ring (90 s) gained a fifth.
// At 5 s it cost the runs of 5 to 30 s more than it gave (farm-bench,
// paired, CPU time against GODEBUG=disablethp=1, 2026-12-07): a 1024-rank
// ring of 1M (9 s) 1.10 with the collapse, 0.97 with the advice alone; a
// 65,536-rank tree of 4K 15.6 s with it, 9.7 s without. A 1024-rank ring
// of 8M (26.5 s) took the same time either way.
const collapseAfter = 30 * time.Second

// Advise maps the heap of a run of about ranks ranks ahead (reserveHeap;
// 0: not known), starts the scan and returns the function that stops it.
func Advise(ranks int) (stop func()) {
	if strings.Contains(os.Getenv("GODEBUG"), "disablethp=1") || !thpOnRequest() {
		return func() {}
	}
	floor := uintptr(unsafe.Pointer(heapProbe)) &^ (heapArena - 1)
	advised := map[span]bool{}
	reserveHeap(floor, advised, reserveSize(ranks))
	done := make(chan struct{})
	go func() {
		advice := []uintptr{unix.MADV_HUGEPAGE}
		wait := 10 * time.Millisecond
		collapse := time.After(collapseAfter)
		for {
			if adviseHeap(floor, advised, advice...) {
				wait = 10 * time.Millisecond
			} else {
				// The heap grows mostly while a run sets up: scan less
				// often once it stops changing.
				wait = min(2*wait, 500*time.Millisecond)
			}
			select {
			case <-done:
				return
			case <-collapse:
				// From now on every heap mapping is also collapsed, the
				// ones advised so far included (the next scan).
				collapse = nil
				advice = append(advice, unix.MADV_COLLAPSE)
				clear(advised)
			case <-time.After(wait):
			}
		}
	}()
	return func() { close(done) }
}

// The scan alone comes too late for most of a run's heap: the Go runtime
// maps the heap in 4 MiB steps as it grows and the run's set-up fills each
// step within microseconds, with small pages, long before the next scan
// advises it (a 1024-rank ring: 50-70 MB of its 430 MB in huge pages until
// the collapse). So the run's heap is mapped ahead: reserveHeap allocates
// one large block, advises its mapping and lets the collector take it
// back. The runtime keeps the block's address range as free heap and hands
// out its lowest pages first, so the ranks' state goes there, and each
// 2 MiB of it is faulted in as one huge page (no copy, no collapse): the
// same ring then had 360 of its 390 MB in huge pages two seconds in. The
// block is never written, so it costs address space, not memory.

// reserveSize is how much heap reserveHeap maps ahead for a run of ranks
// ranks: 1 MiB per rank, from one arena (64 MiB) up to 4 GiB (a 1024-rank
// ring of 32 MiB holds about 600 MB, a 65,536-rank tree 2.4 GB; a heap
// that outgrows the reserve is advised by the scan as before), and at
// most half the memory the kernel reports available, so that mapping it
// never fails (the Go runtime cannot recover from a failed heap mapping).
// Mapped but never written, the block costs the runtime 8 bytes of page
// table per 8 KiB page (4 MB and a few milliseconds for 4 GiB), which
// small runs are spared. It is 0 when address space is counted: under
// an address-space limit (ulimit -v, RLIMIT_AS; starlark/hostmem keeps
// what it leaves for the run) or a commit limit for every writable
// mapping (vm.overcommit_memory = 2), which space never touched would use
// up.
func reserveSize(ranks int) uintptr {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &rl); err != nil || rl.Cur != unix.RLIM_INFINITY {
		return 0
	}
	mode, err := os.ReadFile("/proc/sys/vm/overcommit_memory")
	if err != nil {
		return 0
	}
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return reserveFor(meminfo, mode, ranks)
}

// reserveFor is reserveSize for a /proc/meminfo listing and the
// vm.overcommit_memory setting.
func reserveFor(meminfo, overcommit []byte, ranks int) uintptr {
	if m := string(bytes.TrimSpace(overcommit)); m != "0" && m != "1" {
		return 0
	}
	for line := range bytes.Lines(meminfo) {
		rest, ok := bytes.CutPrefix(line, []byte("MemAvailable:"))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest)) // "24100000 kB"
		if len(f) != 2 || f[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0
		}
		want := min(max(uint64(max(ranks, 0))<<20, heapArena), maxReserve)
		return uintptr(min(kb<<10/2, want) &^ (heapArena - 1))
	}
	return 0
}

// maxReserve bounds reserveSize.
const maxReserve = 4 << 30

// reserveHeap maps n bytes of heap ahead of the run and advises every
// heap mapping not in advised, the new one included (see reserveSize).
func reserveHeap(floor uintptr, advised map[span]bool, n uintptr) {
	if n == 0 {
		return
	}
	// Fresh heap memory is known to be zero: the allocation touches none
	// of its pages.
	block := make([]byte, n)
	adviseHeap(floor, advised, unix.MADV_HUGEPAGE)
	runtime.KeepAlive(block)
	// Free it now (a collection of a heap that holds little yet), so
	// that the run's first allocations land in its range.
	runtime.GC()
}

// thpOnRequest reports whether the kernel gives transparent huge pages to
// memory that asks for them and only to that ("always" needs no asking,
// "never" would refuse).
func thpOnRequest() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && bytes.Contains(b, []byte("[madvise]"))
}

// span is a mapping's address range [start, end).
type span struct{ start, end uintptr }

// adviseHeap gives the advice, in order (MADV_HUGEPAGE: later page faults
// get huge pages; MADV_COLLAPSE: the pages in use become huge pages now),
// to the heap mappings not in done (a mapping that grew counts as new),
// adds them to done, and reports whether there were any.
func adviseHeap(floor uintptr, done map[span]bool, advice ...uintptr) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false
	}
	changed := false
	for _, s := range heapMappings(maps, floor) {
		if done[s] {
			continue
		}
		done[s], changed = true, true
		for _, a := range advice {
			// Errors are not fatal: the memory just keeps its small pages.
			unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, a)
		}
	}
	return changed
}

// heapMappings picks from a /proc/PID/maps listing the private anonymous
// read-write mappings of at least one huge page within heapReach above
// floor: the Go heap's arenas.
func heapMappings(maps []byte, floor uintptr) []span {
	var out []span
	for line := range bytes.Lines(maps) {
		// start-end perms offset dev inode [path]
		f := strings.Fields(string(line))
		if len(f) != 5 || f[1] != "rw-p" || f[4] != "0" {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end < start+2<<20 {
			continue
		}
		if start < uint64(floor) || start-uint64(floor) >= heapReach {
			continue
		}
		out = append(out, span{uintptr(start), uintptr(end)})
	}
	return out
}
