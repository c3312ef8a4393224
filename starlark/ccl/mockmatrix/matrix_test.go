// Package mockmatrix runs every shipped algorithm in the mock runtime
// over its matrix of world sizes, placements of the buffers, dtypes and
// redops. It is a package of its own so that go test ./... runs it beside
// the ccl package's tests, with a time limit of its own.
package mockmatrix

import (
	"fmt"
	"io"
	"os"
	"testing"

	"kernbench"
	"kernbench/engine/collective"
	"kernbench/engine/config"
	"kernbench/starlark/errkind"
	"kernbench/starlark/mock"
)

// mockMatrixSizes are the world sizes every shipped algorithm runs at in
// TestMockEveryShippedAlgorithm.
var mockMatrixSizes = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16}

// mockUnbuildable are the shipped algorithms whose topology cannot be
// built at some world sizes: the reason for a size, "" where it can. The
// matrix checks that such a size does fail to build (an InitError), and
// an algorithm failing to build at a size not listed here fails the test.
var mockUnbuildable = map[string]func(sys config.System, ws int) string{
	"rd_allreduce": func(_ config.System, ws int) string {
		if ws&(ws-1) != 0 {
			return "recursive halving-doubling pairs rank r with r ^ 2^k: the world size must be a power of two"
		}
		return ""
	},
	"hier_allreduce": func(sys config.System, ws int) string {
		if ws > sys.PesPerCube && ws%sys.PesPerCube != 0 {
			return fmt.Sprintf("every cube in use must hold as many ranks as the others (%d PEs per cube)", sys.PesPerCube)
		}
		return ""
	},
}

// Every algorithm of the shipped ccl.yaml passes in the mock runtime over
// 20 interleavings at world sizes 1-9 and 16, in place and out of place,
// in f32 and bf16, and with two redops when its collective reduces (sum,
// and avg, which divides once, at the end: a stage that divides too early
// or twice is wrong). A new entry of ccl.yaml is enrolled by being there.
// The counts are small and chosen so that the chunks of a world size
// differ in length and some are empty (9 elements among 16 ranks).
//
// By default a world size runs one case out of place and one in place,
// the (dtype, redop) pair turning from one size to the next, so that every
// combination of in_place, dtype and redop runs at two or more sizes
// (about 20 s of CPU: go test ./... must pass on two loaded cores within
// go test's 10 minutes per package); KERNBENCH_MOCK_MATRIX=full runs every
// combination at every size (about 80 s of CPU), and -short one case per
// world size.
func TestMockEveryShippedAlgorithm(t *testing.T) {
	cfg := config.Default()
	if len(cfg.AlgorithmNames) == 0 {
		t.Fatal("the shipped ccl.yaml has no algorithms")
	}
	for name := range mockUnbuildable {
		if cfg.Algorithms[name] == nil {
			t.Errorf("mockUnbuildable lists %s, which the shipped ccl.yaml does not have", name)
		}
	}
	for _, name := range cfg.AlgorithmNames {
		a := cfg.Algorithms[name]
		coll, ok := collective.Lookup(a.Collective)
		if !ok {
			t.Fatalf("%s: collective %q is none of the builtin ones", name, a.Collective)
		}
		t.Run(name, func(t *testing.T) {
			for i, ws := range mockMatrixSizes {
				t.Run(fmt.Sprintf("world=%d", ws), func(t *testing.T) {
					run := func(c mockMatrixCase, schedules int) (*mock.Result, error) {
						return mock.RunKernel(mock.Options{Path: a.Module, Embedded: kernbench.Files, Stderr: io.Discard,
							WorldSize: ws, Count: c.count, DType: c.dtype, RedOp: c.redop, InPlace: c.inPlace, Root: c.root,
							Schedules: schedules, Seed: uint64(ws)})
					}
					cases := mockMatrixCases(coll, ws)
					switch {
					case testing.Short():
						cases = cases[i%len(cases) : i%len(cases)+1]
					case os.Getenv("KERNBENCH_MOCK_MATRIX") != "full":
						cases = turningCases(cases, i)
					}
					if why := mockCannotBuild(name, cfg.System, ws); why != "" {
						_, err := run(cases[0], 1)
						if errkind.Of(err) != errkind.Init {
							t.Fatalf("listed as not buildable (%s), but the run gave %v, not an InitError: take it off mockUnbuildable", why, err)
						}
						t.Skipf("the topology cannot be built: %s", why)
					}
					for _, c := range cases {
						t.Run(c.name, func(t *testing.T) {
							r, err := run(c, 20)
							if errkind.Of(err) == errkind.Init {
								t.Fatalf("%v\n(if the topology cannot be built at this world size, list the size in mockUnbuildable with the reason)", err)
							}
							if err != nil {
								t.Fatal(err)
							}
							if r.Wrong != 0 {
								t.Errorf("%d wrong elements, first in schedule %d: %+v", r.Wrong, r.FailingSchedule, r.FirstWrong)
							}
						})
					}
				})
			}
		})
	}
}

// mockMatrixCase is one run of an algorithm at one world size.
type mockMatrixCase struct {
	name         string
	dtype, redop string
	count        int64
	inPlace      bool
	root         int
}

// mockMatrixCases are the runs of a collective at world size ws: in place
// and out of place, f32 with 1000 elements (root 0) and bf16 with 9 (root
// ws-1), each with sum and avg when the collective reduces.
func mockMatrixCases(coll collective.Collective, ws int) []mockMatrixCase {
	redops := []string{"sum"}
	if coll.Reduces {
		redops = append(redops, "avg")
	}
	dtypes := []struct {
		dtype string
		count int64
		root  int
	}{{"f32", 1000, 0}, {"bf16", 9, ws - 1}}
	var out []mockMatrixCase
	for _, inPlace := range []bool{false, true} {
		for _, d := range dtypes {
			for _, op := range redops {
				c := mockMatrixCase{dtype: d.dtype, redop: op, count: d.count, inPlace: inPlace}
				if coll.Rooted {
					c.root = d.root
				}
				c.name = fmt.Sprintf("%s/%s/in_place=%t", c.dtype, c.redop, c.inPlace)
				out = append(out, c)
			}
		}
	}
	return out
}

// mockCannotBuild says why the algorithm's topology cannot be built at
// world size ws ("" when it can).
func mockCannotBuild(name string, sys config.System, ws int) string {
	if f := mockUnbuildable[name]; f != nil {
		return f(sys, ws)
	}
	return ""
}

// turningCases keeps, of cases (mockMatrixCases: for each placement, each
// dtype with each redop), one case per placement: at size index i the
// (i+p)-th (dtype, redop) pair of placement p, so that the pairs turn
// from one size to the next.
func turningCases(cases []mockMatrixCase, i int) []mockMatrixCase {
	var out []mockMatrixCase
	for p, inPlace := range []bool{false, true} {
		var same []mockMatrixCase
		for _, c := range cases {
			if c.inPlace == inPlace {
				same = append(same, c)
			}
		}
		out = append(out, same[(i+p)%len(same)])
	}
	return out
}

// The default matrix still runs every combination of in_place, dtype and
// redop, each at two world sizes or more.
func TestTurningCasesCoverEveryCombination(t *testing.T) {
	coll, _ := collective.Lookup("allreduce")
	seen := map[string]int{}
	for i, ws := range mockMatrixSizes {
		for _, c := range turningCases(mockMatrixCases(coll, ws), i) {
			seen[c.name]++
		}
	}
	all := mockMatrixCases(coll, 4)
	if len(seen) != len(all) {
		t.Fatalf("%d combinations run, want all %d: %v", len(seen), len(all), seen)
	}
	for name, n := range seen {
		if n < 2 {
			t.Errorf("%s runs at %d world size(s), want 2 or more", name, n)
		}
	}
}
