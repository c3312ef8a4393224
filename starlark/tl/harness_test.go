package tl_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/starlarktest"
	"go.starlark.net/syntax"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/tl"
)

// The harness runs Starlark kernels on a small simulated machine: one SIP of
// two cubes of four PEs, timing as in engine/machine's testParams, and a
// ring of E/W IPCQ directions over the ranks. Each rank is a simulated
// process that calls a fixture function as fn(rank, tl=tl).

// testParams are the machine parameters of every harness world
// (tl.HarnessParams, shared with the package's internal tests).
func testParams() machine.Params { return tl.HarnessParams() }

// testIPCQ is the IPCQ configuration of every harness world.
func testIPCQ() machine.IPCQConfig {
	return machine.IPCQConfig{
		BufferKind: machine.TCM, Backpressure: machine.Sleep,
		NSlots: 4, SlotSize: 256, CreditBytes: 16,
		Overhead: 2 * sim.Nanosecond, PollInterval: 10 * sim.Nanosecond,
	}
}

// ringLinks is ring_1d: E goes to rank+1, W to rank-1, each the other's
// reverse.
func ringLinks(n int) [][]machine.Link {
	links := make([][]machine.Link, n)
	for r := range n {
		links[r] = []machine.Link{
			{Dir: "E", Peer: (r + 1) % n, PeerDir: "W"},
			{Dir: "W", Peer: (r + n - 1) % n, PeerDir: "E"},
		}
	}
	return links
}

// world is one simulation with its machine and installed process group.
type world struct {
	s       *sim.Sim
	m       *machine.Machine
	g       *machine.Group
	n       int
	kernels []*tl.Kernel
	errs    []error     // each rank's kernel error
	redOp   dtype.RedOp // the collective's reduction (tl.redop)
}

func newWorld(t *testing.T, n int) *world {
	t.Helper()
	return newWorldCfg(t, n, testIPCQ())
}

// newWorldCfg is newWorld with another IPCQ configuration.
func newWorldCfg(t *testing.T, n int, cfg machine.IPCQConfig) *world {
	t.Helper()
	return newWorldParams(t, n, testParams(), cfg)
}

// newWorldParams is newWorldCfg on a machine of other parameters.
func newWorldParams(t *testing.T, n int, p machine.Params, cfg machine.IPCQConfig) *world {
	t.Helper()
	s := sim.New()
	m, err := machine.New(s, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Place(n); err != nil {
		t.Fatal(err)
	}
	g, err := m.Install(ringLinks(n), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &world{s: s, m: m, g: g, n: n, kernels: make([]*tl.Kernel, n), errs: make([]error, n), redOp: dtype.Sum}
}

// kernel makes rank r's tl value running in proc.
func (w *world) kernel(r int, proc *sim.Proc) *tl.Kernel {
	k := tl.New(&tl.Kernel{M: w.m, G: w.g, EP: w.g.EPs[r], PE: w.m.Ranks[r], Rank: r, World: w.n, RedOp: w.redOp, Proc: proc})
	k.StepsOff = pieceStepsOff
	return k
}

// pieceStepsOff makes the harness's kernels do every wait of their fused
// primitives' pipelines in their process (prims.Kernel.StepsOff), for the
// comparisons of the steps with the process's blocking calls.
var pieceStepsOff bool

// setPieceSteps turns the fused primitives' steps on or off.
func setPieceSteps(on bool) { pieceStepsOff = !on }

// run calls fn(rank, tl=tl) on every rank as concurrent simulated processes
// and returns the simulation's error: the first kernel error (wrapped with
// its rank), a deadlock, or nil. Each rank's own error is in w.errs.
func (w *world) run(t *testing.T, fn starlark.Callable) error {
	t.Helper()
	for r := range w.n {
		th := &starlark.Thread{Name: fmt.Sprintf("rank %d", r)}
		th.Print = func(_ *starlark.Thread, msg string) { t.Logf("rank %d: %s", r, msg) }
		starlarktest.SetReporter(th, t)
		w.s.Spawn(th.Name, func(proc *sim.Proc) {
			k := w.kernel(r, proc)
			w.kernels[r] = k
			_, err := starlark.Call(th, fn, starlark.Tuple{starlark.MakeInt(r)}, []starlark.Tuple{{starlark.String("tl"), k}})
			if err == nil {
				err = k.Finish()
			} else {
				k.Release()
			}
			if err != nil && !errors.Is(err, sim.ErrKilled) {
				w.errs[r] = err
				w.s.Stop(fmt.Errorf("rank %d: %w", r, err))
			}
		})
	}
	w.s.WaitWatchdog(10 * sim.Millisecond)
	defer w.s.Close()
	return w.s.Run()
}

// hw describes the machine to fixtures so they compute expected times from
// the parameters rather than hard-coding them.
func hw(q machine.IPCQConfig) *starlarkstruct.Struct {
	p := testParams()
	port := func(lp machine.LinkParams) starlark.Value {
		return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"latency_ns":   starlark.Float(lp.Latency.Ns()),
			"bytes_per_ns": starlark.Float(float64(lp.BytesPerUs) / 1000),
		})
	}
	return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
		"tcm":          port(p.Tcm.LinkParams),
		"sram":         port(p.Sram.LinkParams),
		"hbm":          port(p.Hbm.LinkParams),
		"pe_noc":       port(p.PeNoc),
		"math":         port(p.Math),
		"tcm_capacity": starlark.MakeInt64(p.Tcm.Capacity),
		"n_slots":      starlark.MakeInt(q.NSlots),
		"slot_size":    starlark.MakeInt64(q.SlotSize),
		"overhead_ns":  starlark.Float(q.Overhead.Ns()),
		"buffer_kind":  starlark.String(q.BufferKind.String()),
		"poll":         starlark.Bool(q.Backpressure == machine.Poll),
		"poll_ns":      starlark.Float(q.PollInterval.Ns()),
	})
}

var fileOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}

// loadFixture executes testdata/name with assert and hw predeclared.
func loadFixture(t *testing.T, name string) starlark.StringDict {
	t.Helper()
	return loadFixtureCfg(t, name, testIPCQ())
}

// loadFixtureCfg is loadFixture with hw describing another IPCQ
// configuration.
func loadFixtureCfg(t *testing.T, name string, cfg machine.IPCQConfig) starlark.StringDict {
	t.Helper()
	path := filepath.Join("testdata", name)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return execSourceCfg(t, path, src, cfg)
}

// execSource executes a Starlark file with assert, struct and hw
// predeclared and returns its globals.
func execSource(t *testing.T, filename string, src []byte) starlark.StringDict {
	t.Helper()
	return execSourceCfg(t, filename, src, testIPCQ())
}

func execSourceCfg(t *testing.T, filename string, src []byte, cfg machine.IPCQConfig) starlark.StringDict {
	t.Helper()
	am, err := starlarktest.LoadAssertModule()
	if err != nil {
		t.Fatal(err)
	}
	predeclared := starlark.StringDict{
		"assert": am["assert"],
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
		"hw":     hw(cfg),
	}
	th := &starlark.Thread{Name: "load " + filename}
	starlarktest.SetReporter(th, t)
	globals, err := starlark.ExecFileOptions(fileOptions, th, filename, src, predeclared)
	if err != nil {
		t.Fatalf("%s: %v", filename, err)
	}
	return globals
}

// fixtureFunc returns the function name of a loaded fixture.
func fixtureFunc(t *testing.T, globals starlark.StringDict, name string) starlark.Callable {
	t.Helper()
	fn, ok := globals[name].(starlark.Callable)
	if !ok {
		t.Fatalf("fixture has no function %q", name)
	}
	return fn
}

// worldSize is the fixture's WORLD_SIZE (default 2).
func worldSize(t *testing.T, globals starlark.StringDict) int {
	t.Helper()
	v, ok := globals["WORLD_SIZE"]
	if !ok {
		return 2
	}
	n, err := starlark.AsInt32(v)
	if err != nil {
		t.Fatalf("WORLD_SIZE: %v", err)
	}
	return n
}

// runFixture runs every test_* function of testdata/name as a kernel on all
// ranks of a fresh world with the IPCQ configuration cfg; assert failures
// are reported through the testing.T, and a kernel error or deadlock fails
// the test.
func runFixture(t *testing.T, name string, cfg machine.IPCQConfig) {
	t.Helper()
	globals := loadFixtureCfg(t, name, cfg)
	var tests []string
	for k := range globals {
		if strings.HasPrefix(k, "test_") {
			tests = append(tests, k)
		}
	}
	sort.Strings(tests)
	n := worldSize(t, globals)
	for _, tn := range tests {
		t.Run(tn, func(t *testing.T) {
			w := newWorldCfg(t, n, cfg)
			if err := w.run(t, fixtureFunc(t, globals, tn)); err != nil {
				var ee *starlark.EvalError
				if errors.As(err, &ee) {
					t.Fatalf("%s\n%s", err, ee.Backtrace())
				}
				t.Fatal(err)
			}
		})
	}
}

// TestStarFixtures runs every testdata/*.star fixture.
func TestStarFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.star"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.star fixtures")
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) { runFixture(t, name, testIPCQ()) })
	}
}

// The IPCQ fixtures hold for every buffer kind and for poll backpressure
// (docs/architecture.md, IPCQ: results are identical, only timing differs;
// the fixtures compute the timing they check from hw).
func TestIPCQFixtureVariants(t *testing.T) {
	for _, v := range []struct {
		name string
		edit func(*machine.IPCQConfig)
	}{
		{"hbm_rings", func(c *machine.IPCQConfig) { c.BufferKind = machine.HBM }},
		{"sram_rings", func(c *machine.IPCQConfig) { c.BufferKind = machine.SRAM }},
		{"poll", func(c *machine.IPCQConfig) { c.Backpressure = machine.Poll }},
		{"poll_sram_rings", func(c *machine.IPCQConfig) { c.Backpressure, c.BufferKind = machine.Poll, machine.SRAM }},
	} {
		t.Run(v.name, func(t *testing.T) {
			cfg := testIPCQ()
			v.edit(&cfg)
			runFixture(t, "ipcq.star", cfg)
		})
	}
}

func setReporter(th *starlark.Thread, t *testing.T) { starlarktest.SetReporter(th, t) }
