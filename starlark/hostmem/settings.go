package hostmem

import (
	"runtime/debug"
	"sync/atomic"
)

// Settings are how runs change what is the whole process's: the Go
// runtime's soft memory limit (the run-time guard keeps it under the
// runs' limits) and GC percent (HoldLargeHeap), and the kernel's backing
// of a buffer's pages (Populate). A nil field leaves that setting alone.
// A library runs with none unless its program installs them (Install):
// importing kernbench's packages and running a simulation changes no
// process-wide setting of a program that did not ask for it.
type Settings struct {
	// SetMemoryLimit and SetGCPercent are as runtime/debug's: they set
	// the new value and return the one before.
	SetMemoryLimit func(limit int64) int64
	SetGCPercent   func(percent int) int
	// Populate backs the pages of b with memory now, before they are
	// written.
	Populate func(b []byte)
}

// ProcessSettings are the settings of the process itself: runtime/debug's,
// and madvise(MADV_POPULATE_WRITE) where the system has it. cmd/kernbench
// installs them.
func ProcessSettings() Settings {
	return Settings{SetMemoryLimit: debug.SetMemoryLimit, SetGCPercent: debug.SetGCPercent, Populate: populate}
}

var settings atomic.Pointer[Settings]

// Install makes the runs that start after it change the process-wide
// settings through s. A program installs its settings once, before its
// first run: a run keeps the settings it started with (the guard and the
// collector's headroom restore what they saved through them).
func Install(s Settings) { settings.Store(&s) }

// installed is what Install installed: none before it.
func installed() Settings {
	if s := settings.Load(); s != nil {
		return *s
	}
	return Settings{}
}

// Populate asks the installed Settings to back the whole pages of b now
// (see populate); without them it does nothing, and the first writes
// fault the pages in.
func Populate(b []byte) {
	if p := installed().Populate; p != nil {
		p(b)
	}
}
