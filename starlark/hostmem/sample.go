package hostmem

import (
	"fmt"
	"kernbench/starlark/errkind"
	"kernbench/starlark/script"
	"os"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"weak"
)

// How the guard measures the process: its resident set, read through a
// file kept open, and the garbage collections it ran, noted through a
// weak pointer (guard.go says when each is read).

// collectionSentinel is an object nothing holds, so the next collection
// frees it. Larger than the tiny allocator's 16 bytes: tiny objects share
// a block, which another object may keep alive.
type collectionSentinel struct{ _ [64]byte }

// collections notes the garbage collections the process ran: a weak
// pointer to a sentinel reads nil once a collection has freed it (about
// 10 ns to ask, and it asks in the caller's own goroutine, unlike a
// cleanup, which runs when the scheduler gets to it: under load, a string
// doubled in a loop reached a gigabyte before one did).
var collections struct {
	sentinel atomic.Pointer[weak.Pointer[collectionSentinel]]
	count    atomic.Uint64
	// sampled is the count at the last sample a poll took (pollMemory):
	// one sample per collection for all the threads that poll.
	sampled atomic.Uint64
}

// collectionsSoFar is the number of collections noted so far. A sentinel
// made while a collection marks survives it and is noted at the next one.
func collectionsSoFar() uint64 {
	p := collections.sentinel.Load()
	if p != nil && p.Value() != nil {
		return collections.count.Load()
	}
	next := weak.Make(new(collectionSentinel))
	if collections.sentinel.CompareAndSwap(p, &next) {
		collections.count.Add(1)
	}
	return collections.count.Load()
}

// pollMemory is the memory watch's poll (script.NewMemoryWatch), called
// by a watched thread every so many steps: when a collection ran since
// the thread's last poll (seen), the first thread to poll after it samples
// and fires the watches over their limit, and every thread polls more
// often while collections keep coming.
func pollMemory(seen *uint64) bool {
	c := collectionsSoFar()
	if c == *seen {
		return false
	}
	*seen = c
	if s := collections.sampled.Load(); s < c && collections.sampled.CompareAndSwap(s, c) {
		h := sampleMemory()
		memGuard.held.Store(h)
		checkWatches(h)
	}
	return true
}

// Sample samples the memory now, in the caller's goroutine, fires the
// watches over their limit (as a poll does) and returns the figure. The
// simulation calls it where a thread's polls and the event loop's turns
// may both have missed what a kernel held: when a kernel returns (a
// kernel of a few steps and no messages reaches neither). About 1 µs.
func Sample() int64 {
	h := sampleMemory()
	memGuard.held.Store(h)
	checkWatches(h)
	return h
}

// SampleAtReturn is Sample where a kernel returns, for a run whose limit
// is limit: the kernels of a large world return one after another, most
// of them having allocated nothing since the last return, and a read of
// /proc/self/statm costs a system call (9 µs on a loaded 2-core VM: half
// a second of system time for the 65,536 returns of a 65,536-rank run).
// So it reads only when the resident set may have passed limit or a
// watch's since its last read; otherwise it returns a figure at most
// limit without reading. The resident set grows by the pages the process
// touches, which, with no collection run since that read, are the
// runtime's pages that were free or returned then and are in use now
// (heap spans and stacks; the collector only frees) or were in use then
// and never touched: the first part is the growth of what the runtime
// holds in use, and the second is memory allocated and not yet written
// (a verified run's simulated memory, written by transfers, which the
// event loop's guard samples), not what a kernel makes: its lists and
// strings are written as they are made (`x = [0] * 100000000`, what the
// check at return is for, is 800 MB in use at once). Under an
// address-space limit, where what counts is what the process maps, it
// always reads.
func SampleAtReturn(limit int64) int64 {
	atReturn.Lock()
	defer atReturn.Unlock()
	inUse, ok := runtimeInUse()
	c := collectionsSoFar()
	if ok && atReturn.read && c == atReturn.collections && startRoom() == 0 {
		bound := atReturn.held + max(0, inUse-atReturn.inUse)
		if w, _, any := smallestWatch(); any {
			limit = min(limit, w)
		}
		if bound <= limit {
			return bound
		}
	}
	h := Sample()
	atReturn.read, atReturn.held, atReturn.inUse, atReturn.collections = ok, h, inUse, c
	atReturn.reads++
	return h
}

// atReturn is SampleAtReturn's last read: the resident set it read, what
// the runtime held in use and the collections so far just before it.
var atReturn struct {
	sync.Mutex
	read        bool
	held, inUse int64
	collections uint64
	reads       uint64 // reads made (tests)
	samples     [3]metrics.Sample
}

// runtimeInUse is what the Go runtime holds in use (mapped memory but the
// free and the returned pages of its heap: spans, stacks, its own
// structures), without allocating; ok false when the runtime does not
// tell.
func runtimeInUse() (int64, bool) {
	s := &atReturn.samples
	if s[0].Name == "" {
		s[0].Name, s[1].Name, s[2].Name = "/memory/classes/total:bytes", "/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes"
	}
	metrics.Read(s[:])
	for _, x := range s {
		if x.Value.Kind() != metrics.KindUint64 {
			return 0, false
		}
	}
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64() - s[2].Value.Uint64()), true
}

// sampleMemory is the memory the process holds: its resident set
// (/proc/self/statm), what /usr/bin/time reports as the peak and what the
// kernel's out-of-memory killer counts. The runtime's own figures count
// more: the simulated memory a run allocated but never touched (the
// kernel backs a page at its first write) and freed heap the runtime has
// not returned (a run holding 4.3 GB was reported to hold 8.1 GiB). Where
// /proc is missing, the runtime's mapped memory minus what it returned.
// Under an address-space limit (ulimit -v) what ends the process is the
// address space it maps, touched or not (tiles of zeros never written
// grow it, not the resident set): there the figure is the larger of the
// resident set and the address space mapped past what the process maps
// as it starts (startMapped), which the default limit is half of.
func sampleMemory() int64 {
	if mapped, resident := readStatm(); resident > 0 {
		if startRoom() > 0 {
			resident = max(resident, mapped-startMapped)
		}
		return resident
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// statmFile is /proc/self/statm, opened once (nil where it cannot be):
// reading it again from offset 0 makes the kernel write it afresh, at an
// eighth of the cost of opening it anew.
var statmFile = sync.OnceValue(func() *os.File {
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return nil
	}
	return f
})

// readStatm is what /proc/self/statm says now, read through statmFile
// (mapped and resident bytes; 0 for a figure it cannot tell). It
// allocates nothing: the event loop's guard calls it.
func readStatm() (mapped, resident int64) {
	f := statmFile()
	if f == nil {
		return 0, 0
	}
	var b [128]byte // seven counts of pages: far fewer digits
	n, _ := f.ReadAt(b[:], 0)
	return parseStatm(b[:n])
}

// parseStatm is the address space mapped and the resident set, in bytes,
// from the first two fields of /proc/self/statm (counts of pages); 0 for
// a field missing or not a positive count.
func parseStatm(b []byte) (mapped, resident int64) {
	var fields [2]int64
	for i := range fields {
		for len(b) > 0 && (b[0] == ' ' || b[0] == '\n') {
			b = b[1:]
		}
		pages, digits := int64(0), 0
		for ; digits < len(b) && b[digits] >= '0' && b[digits] <= '9'; digits++ {
			pages = SatMul(pages, 10) + int64(b[digits]-'0')
		}
		if digits == 0 || (digits < len(b) && b[digits] != ' ' && b[digits] != '\n') {
			break // not a count: this field and those after it are unknown
		}
		fields[i] = SatMul(pages, int64(os.Getpagesize()))
		b = b[digits:]
	}
	return fields[0], fields[1]
}

// allocSampleBytes is how many bytes of tiles the kernels allocate
// between two samples (NoteAlloc).
const allocSampleBytes = 16 << 20

// allocsSinceSample counts the bytes of tiles allocated since the last
// sample NoteAlloc took.
var allocsSinceSample atomic.Int64

// NoteAlloc is told the bytes of each tile a kernel is about to allocate
// (tl.zeros, tl.full, Tile math) and refuses the allocation that would
// take the process past the smallest limit of the memory watches: every
// allocSampleBytes of tiles, and at every tile that large, it samples in
// the allocating thread, fires the watches already over their limit, and
// returns an *AllocRefused when the sample and the tile together pass
// one. A poll that waits for a collection cannot bound these: a tile may
// be gigabytes, a tile of zeros is never written (under ulimit -v it
// grows the address space, not the heap the collector paces by), and
// under load a collection ends late; a loop of 80 MB tiles of zeros passed
// the limit by 200 MiB and, one run in fifteen under load, ran into the Go
// runtime's fatal error.
func NoteAlloc(n int64) error {
	if allocsSinceSample.Add(n) < allocSampleBytes {
		return nil
	}
	allocsSinceSample.Store(0)
	h := sampleMemory()
	memGuard.held.Store(h)
	checkWatches(h)
	if limit, isDefault, ok := smallestWatch(); ok && SatAdd(h, n) > limit {
		return &AllocRefused{Bytes: n, Held: h, Limit: limit, DefaultLimit: isDefault}
	}
	return nil
}

// AllocRefused is a tile NoteAlloc refused: Bytes more would take the
// process from Held past Limit. Kind OutOfMemory (exit 3), as the guard's
// other stops.
type AllocRefused struct {
	Bytes, Held, Limit int64
	DefaultLimit       bool
}

func (e *AllocRefused) Error() string {
	return fmt.Sprintf("a tile of %s would take the run's host memory from %s to %s, over --max-memory %s; "+
		"keep fewer or smaller tiles, or raise --max-memory", FormatBytes(e.Bytes), FormatBytes(e.Held), FormatBytes(SatAdd(e.Held, e.Bytes)), LimitText(e.Limit, e.DefaultLimit))
}

// ErrorKind is errkind.HostMemory.
func (e *AllocRefused) ErrorKind() *errkind.Kind { return errkind.HostMemory }

// Unwrap is script.ErrMemory: a run stopped by a refused tile reports it
// as the guard's other stops do (OutOfMemoryError, with Asked).
func (e *AllocRefused) Unwrap() error { return script.ErrMemory }
