package tl_test

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"

	"kernbench/starlark/errkind"
	"kernbench/starlark/tl"
)

// A rank's calls of tl, Ptr and Tile within one simulated instant are
// bounded (here at 100, Stats.InstantCalls): a loop of calls that never
// wait ends with NoTimeProgress at the call past the limit, naming who
// spins and when, while a loop whose calls let time pass runs on however
// many calls it makes.
func TestCallsWithinOneInstant(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want string // a fragment of the error ("": none)
	}{
		{"polling a finished handle", `
def kernel(rank, tl):
    p = tl.alloc(16, "f32")
    h = tl.store_async(p, tl.zeros(16, "f32"))
    tl.wait(h)
    while True:
        tl.done(h)
`, "the kernel made 100 calls of tl, Ptr and Tile at t="},
		{"views", `
def kernel(rank, tl):
    p = tl.alloc(16, "f32")
    while True:
        p.slice(0, 8).chunk(1, 2)
`, "the kernel made 100 calls"},
		{"tile math", `
def kernel(rank, tl):
    t = tl.zeros(16, "f32")
    while True:
        u = t + 1.0
`, "the kernel made 100 calls"},
		// Every Ptr and Tile method counts, as every tl builtin does
		// (Tile.tolist did not).
		{"a tile read back", `
def kernel(rank, tl):
    t = tl.zeros(16, "f32")
    while True:
        t.tolist()
`, "the kernel made 100 calls"},
		{"events handed between threads", `
def other(tl, evs):
    while True:
        tl.wait(evs[0])
        evs[0] = tl.event()
        tl.signal(evs[1])

def kernel(rank, tl):
    evs = [tl.event(), tl.event()]
    tl.spawn(other, evs)
    while True:
        e = evs[1]
        tl.signal(evs[0])
        tl.wait(e)
        evs[1] = tl.event()
`, "the kernel and its threads made 100 calls"},
		{"calls that let time pass", `
def kernel(rank, tl):
    p = tl.alloc(16, "f32", "hbm")
    for i in range(300):
        t = tl.fetch(p)
        u = t + 1.0
        p.slice(0, 8)
`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			globals := execSource(t, "spin.star", []byte(tc.src))
			w := newWorld(t, 1)
			inner := fixtureFunc(t, globals, "kernel")
			fn := starlark.NewBuiltin("setup", func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				kw[0][1].(*tl.Kernel).Stats.InstantCalls = 100
				return starlark.Call(th, inner, args, kw)
			})
			err := w.run(t, fn)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if k := errkind.Of(err); k != errkind.NoTimeProgress {
				t.Errorf("kind %v, want NoTimeProgress", k)
			}
		})
	}
}

// The limit is a million calls plus one per 16 bytes of the rank's
// buffers, scaled by a --max-steps above its default of 10^8.
func TestInstantCallLimit(t *testing.T) {
	type in struct {
		bytes    int64
		maxSteps uint64
	}
	cases := []in{{0, 0}, {8192, 0}, {8192, 100_000_000}, {8192, 200_000_000}, {1 << 30, 0}, {1 << 62, math.MaxUint64}}
	got := make([]int64, len(cases))
	for i, c := range cases {
		got[i] = tl.InstantCallLimit(c.bytes, c.maxSteps)
	}
	want := []int64{1_000_000, 1_000_512, 1_000_512, 2_001_024, 1_000_000 + 1<<26, math.MaxInt64}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("InstantCallLimit (-want +got):\n%s", diff)
	}
}
