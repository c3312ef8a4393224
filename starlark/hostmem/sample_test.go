package hostmem

import (
	"errors"
	"io/fs"
	"kernbench/starlark/errkind"
	"kernbench/starlark/script"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// The held figure is what the process holds: memory a run allocated but
// never wrote (the kernel backs a page at its first write; a lazy PE's
// memory) is not held, what it wrote is. The runtime's mapped-minus-
// returned figure counted both (a run holding 4.3 GB was reported at
// 8.1 GiB).
func TestHeldMemoryIsResident(t *testing.T) {
	if residentBytes(os.ReadFile) == 0 {
		t.Skip("no /proc/self/statm: the held figure is the runtime's")
	}
	const mib = 1 << 20
	runtime.GC()
	const size = 256 * mib
	before := sampleMemory()
	// Fresh pages from the system (untouchedBytes): a block of the Go
	// heap may reuse a span an earlier test wrote, which counted as held
	// before this wrote anything (about one run in four).
	b, release := untouchedBytes(t, size)
	defer release()
	allocated := sampleMemory()
	for i := 0; i < 128*mib; i += os.Getpagesize() {
		b[i] = 1
	}
	written := sampleMemory()
	runtime.KeepAlive(b)
	if d := allocated - before; d > 32*mib {
		t.Errorf("%s allocated, none written: the held figure grew by %s, want under 32 MiB", FormatBytes(int64(size)), FormatBytes(d))
	}
	if d := written - before; d < 112*mib || d > 160*mib {
		t.Errorf("128 MiB written: the held figure grew by %s, want about 128 MiB", FormatBytes(d))
	}
}

// The guard's reading of /proc/self/statm: the address space mapped (ulimit
// -v's figure) and the resident set, parsed without allocating.
func TestParseStatm(t *testing.T) {
	page := int64(os.Getpagesize())
	if m, r := parseStatm([]byte("250000 1000 300 200 0 9000 0\n")); m != 250000*page || r != 1000*page {
		t.Errorf("parseStatm = %d, %d; want %d, %d", m, r, 250000*page, 1000*page)
	}
	if m, r := readStatm(); residentBytes(os.ReadFile) > 0 && (m <= 0 || r <= 0 || r > m) {
		t.Errorf("readStatm = %d mapped, %d resident: want both positive, resident at most mapped", m, r)
	}
	if n := testing.AllocsPerRun(100, func() { readStatm() }); n != 0 {
		t.Errorf("readStatm allocates %v times a call, want none (the event loop's guard calls it)", n)
	}
}

func TestResidentBytes(t *testing.T) {
	page := int64(os.Getpagesize())
	for _, tc := range []struct {
		name  string
		statm string
		want  int64
	}{
		{"resident pages", "250000 1000 300 200 0 9000 0\n", 1000 * page},
		{"one space each", "7 3\n", 3 * page},
		{"a count with a sign", "250000 -1000 300\n", 0},
		{"digits then letters", "250000 1000x 300\n", 0},
		{"short", "250000\n", 0},
		{"garbled", "a b c\n", 0},
		{"missing", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := residentBytes(func(string) ([]byte, error) {
				if tc.statm == "" {
					return nil, fs.ErrNotExist
				}
				return []byte(tc.statm), nil
			})
			if got != tc.want {
				t.Errorf("residentBytes(%q) = %d, want %d", tc.statm, got, tc.want)
			}
		})
	}
}

// A tile is refused before it is allocated when the process's memory and
// the tile together pass the smallest memory watch's limit (NoteAlloc):
// a tile of zeros is never written, so no sample after it would see it
// under ulimit -v until the address space ran out. Small tiles are
// counted and sampled every allocSampleBytes.
func TestNoteAllocRefusesATilePastTheLimit(t *testing.T) {
	if residentBytes(os.ReadFile) == 0 {
		t.Skip("no /proc/self/statm: the held figure is the runtime's")
	}
	const mib = 1 << 20
	limit := max(sampleMemory()+64*mib, RuntimeBytes)
	_, release := Watch(limit, false)
	defer release()
	if err := NoteAlloc(4 * mib); err != nil {
		t.Errorf("a 4 MiB tile well under the limit: %v", err)
	}
	err := NoteAlloc(128 * mib)
	var refused *AllocRefused
	if !errors.As(err, &refused) || refused.Bytes != 128*mib || refused.Limit != limit {
		t.Fatalf("a 128 MiB tile 64 MiB under the limit: got %v, want it refused", err)
	}
	if !script.IsMemory(err) || errkind.Of(err) != errkind.HostMemory {
		t.Errorf("the refusal is not a memory stop of kind OutOfMemory: %v", err)
	}
	release()
	if err := NoteAlloc(128 * mib); err != nil {
		t.Errorf("with no watch registered nothing is refused: %v", err)
	}
}

// residentBytes is the resident set from /proc/self/statm (its second
// field, in pages) as read reads it; 0 when it cannot tell (the tests skip where
// /proc is missing).
func residentBytes(read func(string) ([]byte, error)) int64 {
	b, err := read("/proc/self/statm")
	if err != nil {
		return 0
	}
	_, resident := parseStatm(b)
	return resident
}

// A kernel's return reads the resident set only when the process may have
// passed the limit since the last read (SampleAtReturn): the returns of a
// large world's kernels, one after another, cost a system call each.
func TestSampleAtReturnReadsOnlyWhenTheLimitMayHaveBeenPassed(t *testing.T) {
	if residentBytes(os.ReadFile) == 0 || startRoom() > 0 {
		t.Skip("no /proc/self/statm, or under an address-space limit: every return reads")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but the test's
	const mib = 1 << 20
	const plenty = 1 << 50
	runtime.GC()
	step := func(what string, limit int64, wantRead bool) int64 {
		t.Helper()
		before := atReturn.reads
		h := SampleAtReturn(limit)
		if read := atReturn.reads > before; read != wantRead {
			t.Errorf("%s: read %v, want %v", what, read, wantRead)
		}
		return h
	}
	step("after a collection", plenty, true)
	step("nothing allocated since", plenty, false)
	if n := testing.AllocsPerRun(100, func() { SampleAtReturn(plenty) }); n != 0 {
		t.Errorf("SampleAtReturn allocates %v times a call, want none", n)
	}
	held := atReturn.held
	b := make([]byte, 64*mib)
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	step("64 MiB written, the limit 1 GiB above the last read", held+1024*mib, false)
	step("64 MiB written, the limit 32 MiB above the last read", held+32*mib, true)
	runtime.KeepAlive(b)
	step("nothing allocated since", plenty, false)
	runtime.GC()
	step("a collection since", plenty, true)
	if h := step("a limit under what is held", 1, true); h <= 1 {
		t.Errorf("SampleAtReturn(1) = %d, want what is held", h)
	}
	// The 64 MiB go back now, not while a later test measures.
	debug.FreeOSMemory()
}
