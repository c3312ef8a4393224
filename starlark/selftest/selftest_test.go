package selftest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ciSeeds are the seeds go test ./... checks (a few seconds of CPU): each
// collective on each topology that offers it, threads and channels, odd
// kernels, one to sixteen ranks.
var ciSeeds = []uint64{2, 9, 13, 19, 20, 23, 25, 28, 40, 47, 57, 60, 80, 83, 94, 99, 103, 105, 108, 110, 111, 114, 118, 120, 124, 137, 149}

// TestSelfTest checks the invariants on the fixed seeds.
func TestSelfTest(t *testing.T) {
	for _, seed := range ciSeeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkSeed(t, seed, DefaultGen()) })
	}
}

// TestSelfTestSeeds checks the seeds of KERNBENCH_SELFTEST_SEEDS (a list
// of seeds and ranges: 1-1000,4711), for long runs; skipped without it.
// The cases are DefaultGen's; KERNBENCH_SELFTEST_MINFLUSH=0 keeps every
// flush between passes, KERNBENCH_SELFTEST_ZERODIV=0 keeps the odd kernels
// from dividing by zero tiles.
func TestSelfTestSeeds(t *testing.T) {
	spec := os.Getenv("KERNBENCH_SELFTEST_SEEDS")
	if spec == "" {
		t.Skip("set KERNBENCH_SELFTEST_SEEDS=FIRST-LAST (or a list) to run the generator for long")
	}
	seeds, err := parseSeeds(spec)
	if err != nil {
		t.Fatal(err)
	}
	o := GenOptions{
		MinimalFlush: os.Getenv("KERNBENCH_SELFTEST_MINFLUSH") != "0",
		ZeroDivision: os.Getenv("KERNBENCH_SELFTEST_ZERODIV") != "0",
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkSeed(t, seed, o) })
	}
}

// FuzzSelfTest checks the case of each seed the fuzzer tries.
func FuzzSelfTest(f *testing.F) {
	for _, s := range ciSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkSeed(t, seed, DefaultGen()) })
}

func checkSeed(t *testing.T, seed uint64, o GenOptions) {
	t.Helper()
	c := Generate(seed, o)
	out := Check(c, t.TempDir(), CheckOptions{})
	write := os.Getenv("KERNBENCH_SELFTEST_WRITE") != "" // every case, to read them
	if len(out.Problems) == 0 && !write {
		if testing.Verbose() {
			t.Logf("seed %d: exit %d hazard %q: %s", seed, out.Exit, out.Hazard, c.Summary)
		}
		return
	}
	var b strings.Builder
	for _, p := range out.Problems {
		b.WriteString(p.String() + "\n")
	}
	dir := os.Getenv("KERNBENCH_SELFTEST_OUT")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "kernbench-selftest")
	}
	dir = filepath.Join(dir, fmt.Sprintf("seed-%d", seed))
	path, err := c.WriteRepro(dir, b.String())
	if err != nil {
		t.Errorf("writing the reproducer: %v", err)
	}
	if len(out.Problems) == 0 {
		t.Logf("seed %d: no problem; the case is in %s", seed, path)
		return
	}
	t.Errorf("seed %d (%s): %d problem(s); reproduce with %s\n%s", seed, c.Summary, len(out.Problems), path, b.String())
}

// parseSeeds reads "1-100,4711".
func parseSeeds(spec string) ([]uint64, error) {
	var out []uint64
	for _, item := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(item), "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("KERNBENCH_SELFTEST_SEEDS: %q: %v", item, err)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("KERNBENCH_SELFTEST_SEEDS: %q is not a range FIRST-LAST", item)
			}
		}
		for s := a; s <= b; s++ {
			out = append(out, s)
		}
	}
	return out, nil
}

// The checks themselves: a kernel that computes a wrong result without a
// hazard, and one whose race is reported, are told apart, with the
// reproducer's command line.
func TestCheckFindsProblems(t *testing.T) {
	base := Generate(3, GenOptions{})
	cases := []struct {
		name, src string
		want      []string // invariants broken
		hazard    string
	}{
		{"wrong result", `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tl.copy(recvbuf, sendbuf)
`, []string{"mock", "wrong"}, ""},
		{"hazard", `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tl.send("E", sendbuf)
    tl.copy(sendbuf, recvbuf)
    tl.recv("W", dst = recvbuf)
`, []string{"mock"}, "SendBufferHazard"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := *base
			c.Source, c.Topology, c.Sets, c.InPlace = tc.src, "ring_1d", nil, false
			c.WorldSize, c.Count, c.DType, c.RedOp = 2, 64, "f32", "sum"
			out := Check(&c, t.TempDir(), CheckOptions{SkipProcs: true})
			var got []string
			for _, p := range out.Problems {
				got = append(got, p.Invariant)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || out.Hazard != tc.hazard {
				t.Errorf("problems %v, hazard %q; want %v, %q\n%v", got, out.Hazard, tc.want, tc.hazard, out.Problems)
			}
		})
	}
}

// An integer Tile divided by a Tile with a zero element is a ZeroDivision
// (exit 4) in a full run; --timing-only keeps no values to tell, so it
// refuses every integer Tile ÷ Tile with TimingOnly, at its line (it used
// to exit 0: the two runs of one kernel ended differently). The odd
// kernels that divide by zero tiles check no problem now.
func TestTimingOnlyRefusesIntegerTileDivision(t *testing.T) {
	found := 0
	for seed := uint64(1); seed < 400 && found < 2; seed++ {
		c := Generate(seed, GenOptions{ZeroDivision: true})
		if !c.ZeroDiv {
			continue
		}
		found++
		out := Check(c, t.TempDir(), CheckOptions{SkipProcs: true})
		for _, p := range out.Problems {
			t.Errorf("seed %d: %s", seed, p)
		}
	}
	if found == 0 {
		t.Fatal("no seed below 400 makes a kernel that divides by a zero tile")
	}
}
