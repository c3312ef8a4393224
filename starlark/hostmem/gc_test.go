package hostmem

import (
	"math"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// GCPercent is the collector's headroom the estimate counts: Go's 100 %
// below 256 MiB of held blocks, then 64 MiB, then about 15 %.
func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	got := []int{GCPercent(0), GCPercent(255 * mib), GCPercent(256 * mib), GCPercent(400 * mib), GCPercent(1 << 30), GCPercent(1 << 40)}
	want := []int{100, 100, 25, 16, 14, 14} // 15 % rounded down
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GCPercent (-want +got):\n%s", diff)
	}
}

// fakeSettings records what runs set through it: the soft memory limit
// and the GC percent, starting from Go's defaults.
type fakeSettings struct {
	mu        sync.Mutex
	limit     int64
	percent   int
	populated int
}

func newFakeSettings() *fakeSettings { return &fakeSettings{limit: math.MaxInt64, percent: 100} }

func (f *fakeSettings) settings() Settings {
	return Settings{
		SetMemoryLimit: func(l int64) int64 {
			f.mu.Lock()
			defer f.mu.Unlock()
			old := f.limit
			if l >= 0 {
				f.limit = l
			}
			return old
		},
		SetGCPercent: func(p int) int {
			f.mu.Lock()
			defer f.mu.Unlock()
			old := f.percent
			f.percent = p
			return old
		},
		Populate: func([]byte) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.populated++
		},
	}
}

func (f *fakeSettings) now() (int64, int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.limit, f.percent, f.populated
}

// install makes s the installed settings for the test.
func install(t *testing.T, s Settings) {
	t.Cleanup(func() { Install(Settings{}) })
	Install(s)
}

// While runs are registered, the installed settings hold the soft limit
// at 90 % of the smallest limit and the GC percent at GCPercent of the
// bytes held; the last release restores both. Without settings
// installed nothing is asked: a library changes no process-wide setting
// its program did not install.
func TestSettingsAreInstalledNotAssumed(t *testing.T) {
	t.Setenv("GOGC", "") // the environment's GOGC would win
	const mib = 1 << 20
	type state struct {
		Limit              int64
		Percent, Populated int
	}
	for _, tc := range []struct {
		name       string
		installed  bool
		held, done state
	}{
		{"installed", true, state{900 * mib, GCPercent(512 * mib), 1}, state{math.MaxInt64, 100, 1}},
		{"none installed", false, state{math.MaxInt64, 100, 0}, state{math.MaxInt64, 100, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSettings()
			if tc.installed {
				install(t, f.settings())
			} else {
				install(t, Settings{})
			}
			releaseA := GuardRun(1000 * mib)
			releaseB := GuardRun(2000 * mib)
			releaseHeap := HoldLargeHeap(512 * mib)
			Populate(make([]byte, 1<<20))
			var got state
			got.Limit, got.Percent, got.Populated = f.now()
			if diff := cmp.Diff(tc.held, got); diff != "" {
				t.Errorf("while runs are registered (-want +got):\n%s", diff)
			}
			releaseHeap()
			releaseB()
			releaseA()
			got.Limit, got.Percent, got.Populated = f.now()
			if diff := cmp.Diff(tc.done, got); diff != "" {
				t.Errorf("after the runs (-want +got):\n%s", diff)
			}
		})
	}
}
