package sim

import (
	"testing"
	"unsafe"
)

// A process's fields that every switch, sleep and wait touch are its
// first two cache lines, and a step's its first two (see Proc): a field added among them, or a size
// that is not a whole number of lines, spreads them over a third.
func TestProcHotFieldsAreItsFirstTwoCacheLines(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the cache-line layout is laid out for 64-bit pointers")
	}
	var p Proc
	if s := unsafe.Sizeof(p); s%64 != 0 {
		t.Errorf("Proc is %d bytes, not a multiple of 64", s)
	}
	if o := unsafe.Offsetof(p.WaitSince) + unsafe.Sizeof(p.WaitSince); o > 64 {
		t.Errorf("Proc's switch and wait fields end at byte %d, past its first line", o)
	}
	// A step (ParkStep) reads step and charges since: in the first line,
	// a step touches no line past Spent's.
	for _, f := range []struct {
		name      string
		off, size uintptr
	}{{"step", unsafe.Offsetof(p.step), unsafe.Sizeof(p.step)}, {"since", unsafe.Offsetof(p.since), unsafe.Sizeof(p.since)}} {
		if f.off+f.size > 64 {
			t.Errorf("Proc.%s ends at byte %d, past its first line", f.name, f.off+f.size)
		}
	}
	if o := unsafe.Offsetof(p.Spent); o != 64 {
		t.Errorf("Proc.Spent starts at byte %d, want 64 (its own line)", o)
	}
}
