package host_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/starlarktest"
	"go.starlark.net/syntax"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/machine/machinetest"
	"kernbench/engine/sim"
	"kernbench/starlark/host"
)

// The torch object is tested directly (no simulation: its tensor
// constructors, torch.check and init_process_group never block) with
// Starlark test code; torch.launch and whole benches are tested through
// ccl.Run in bench_test.go.

func testParams() machine.Params { return machinetest.Params(1, 2, 4) }

// check is one torch.check call seen by Runtime.OnCheck.
type check struct {
	Rank, Wrong int
	First       *host.Wrong
}

// fixture is a torch object for rank of world on a fresh machine, with the
// runtime's callbacks recording what they see.
type fixture struct {
	rt     *host.Runtime
	torch  *host.Torch
	checks []check
	inits  []int
}

func newFixture(t *testing.T, rank, world int, seed uint64, space machine.Space) *fixture {
	t.Helper()
	m, err := machine.New(sim.New(), testParams())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Place(world); err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	f.rt = &host.Runtime{
		M: m, RedOp: dtype.Sum, DataSpace: space, AlgoName: "my_algo",
		AlgoKernel: starlark.NewBuiltin("my_kernel", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.None, nil
		}),
		Args: starlarkstruct.FromStringDict(starlark.String("args"), starlark.StringDict{
			"seed": starlark.MakeUint64(seed), "count": starlark.MakeInt(4),
		}),
		InitGroup: func(w int) (*machine.Group, error) {
			f.inits = append(f.inits, w)
			return nil, nil
		},
		OnCheck: func(rank, wrong int, first *host.Wrong) { f.checks = append(f.checks, check{rank, wrong, first}) },
	}
	f.torch = host.New(f.rt, rank, world, nil)
	return f
}

var fileOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}

// runStar executes src (which defines test(torch)) with assert predeclared
// and calls test(torch).
func runStar(t *testing.T, torch *host.Torch, src string) {
	t.Helper()
	am, err := starlarktest.LoadAssertModule()
	if err != nil {
		t.Fatal(err)
	}
	th := &starlark.Thread{Name: t.Name()}
	starlarktest.SetReporter(th, t)
	g, err := starlark.ExecFileOptions(fileOptions, th, "torch_test.star", src, starlark.StringDict{"assert": am["assert"]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := starlark.Call(th, g["test"], starlark.Tuple{torch}, nil); err != nil {
		if ee, ok := err.(*starlark.EvalError); ok {
			t.Fatal(ee.Backtrace())
		}
		t.Fatal(err)
	}
}

// Tensor constructors: shapes (int, tuple, list, several dimensions),
// dtypes and contents.
func TestTensorConstructors(t *testing.T) {
	f := newFixture(t, 0, 2, 0, machine.HBM)
	runStar(t, f.torch, `
def test(torch):
    x = torch.zeros((4,))
    assert.eq(type(x), "tensor")
    assert.eq((x.dtype, x.count, x.nbytes, len(x)), ("f32", 4, 16, 4))
    assert.eq(x.data, [0.0] * 4)
    assert.eq(list(x), [0.0] * 4)
    assert.eq(x.ptr.space, "hbm")
    assert.eq(x.ptr.rank, 0)
    assert.eq(torch.zeros(3).count, 3)
    assert.eq(torch.zeros([2, 3]).count, 6)
    assert.eq(torch.zeros((2, 3, 4), dtype = "i32").data, [0] * 24)
    assert.eq(torch.zeros(()).count, 1)  # a scalar has one element
    assert.eq(torch.zeros((0,)).data, [])
    assert.true(not torch.zeros((0,)))

    assert.eq(torch.ones((3,)).data, [1.0] * 3)
    assert.eq(torch.ones((2,), dtype = "bf16").data, [1.0] * 2)
    assert.eq(torch.ones(2, dtype = "u8").data, [1, 1])

    assert.eq(torch.full((3,), 2.5).data, [2.5] * 3)
    assert.eq(torch.full((2,), -7, dtype = "i64").data, [-7, -7])
    assert.eq(torch.full(shape = (2,), value = 0.25, dtype = "f64").data, [0.25] * 2)

    assert.eq(torch.arange(5).data, [0.0, 1.0, 2.0, 3.0, 4.0])
    assert.eq(torch.arange(4, dtype = "i32").data, [0, 1, 2, 3])
    assert.eq(torch.arange(0).data, [])

    t = torch.tensor([1, 2.5, -3])
    assert.eq((t.dtype, t.data), ("f32", [1.0, 2.5, -3.0]))
    assert.eq(torch.tensor([7, 255], dtype = "u8").data, [7, 255])
    assert.eq(torch.tensor([], dtype = "f16").data, [])

    e = torch.empty_like(t)
    assert.eq((e.dtype, e.count), ("f32", 3))
    assert.ne(e.ptr.addr, t.ptr.addr)
    assert.eq(torch.empty_like(torch.zeros(5, dtype = "i64")).dtype, "i64")

    c = torch.arange(6, dtype = "i32").chunk(1, 3)
    assert.eq((type(c), c.data), ("tensor", [2, 3]))
    assert.eq(dir(x), ["chunk", "count", "data", "dtype", "nbytes", "ptr"])
`)
}

// torch.rand is the builtin benches' generator with seed playing the rank
// and torch.args.seed the run's seed: deterministic, and different per seed.
func TestRand(t *testing.T) {
	const runSeed = 7
	f := newFixture(t, 0, 1, runSeed, machine.HBM)
	runStar(t, f.torch, `
def test(torch):
    a = torch.rand((64,), dtype = "f32", seed = 1)
    assert.eq(a.data, torch.rand((64,), dtype = "f32", seed = 1).data)
    assert.ne(a.data, torch.rand((64,), dtype = "f32", seed = 2).data)
    assert.eq(torch.rand((8, 8), seed = 1).data, a.data)  # dtype defaults to f32
    assert.eq(torch.rand(16, seed = 1).data, a.data[:16])  # a longer buffer extends a shorter one
    for v in a.data:
        assert.true(v >= -1 and v < 1, "value %r outside [-1, 1)" % v)
    for v in torch.rand((64,), dtype = "i32", seed = 3).data:
        assert.true(v % 2 == 1 and v >= -15 and v <= 15, "i32 value %r" % v)
    assert.eq(torch.rand(4).data, torch.rand(4, seed = 0).data)
`)
	// The same bytes as dtype.Fill(seed = torch.args.seed, rank = seed=).
	for _, dt := range dtype.All() {
		v, err := f.torch.Attr("rand")
		if err != nil {
			t.Fatal(err)
		}
		x, err := starlark.Call(&starlark.Thread{}, v, starlark.Tuple{starlark.MakeInt(33)},
			[]starlark.Tuple{{starlark.String("dtype"), starlark.String(dt.String())}, {starlark.String("seed"), starlark.MakeInt(5)}})
		if err != nil {
			t.Fatalf("torch.rand(33, dtype=%s, seed=5): %v", dt, err)
		}
		want := make([]byte, 33*dt.Size())
		dtype.Fill(dt, want, runSeed, 5)
		if got := x.(*host.Tensor).Ptr.Reg.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("torch.rand(33, dtype=%s, seed=5) differs from dtype.Fill(%s, seed=%d, rank=5)", dt, dt, runSeed)
		}
	}
}

// Tensors live in the runtime's data space.
func TestDataSpace(t *testing.T) {
	for _, space := range []machine.Space{machine.TCM, machine.SRAM, machine.HBM} {
		f := newFixture(t, 1, 2, 0, space)
		runStar(t, f.torch, fmt.Sprintf(`
def test(torch):
    x = torch.zeros(4)
    assert.eq(x.ptr.space, %q)
    assert.eq(x.ptr.rank, 1)
    assert.eq(torch.tensor([1, 2]).ptr.space, %q)
`, space, space))
	}
}

// Host arithmetic makes new tensors and costs no simulated time.
func TestTensorArithmetic(t *testing.T) {
	f := newFixture(t, 0, 1, 0, machine.HBM)
	runStar(t, f.torch, `
def test(torch):
    a = torch.tensor([1, 2, 3])
    b = torch.tensor([10, 20, 30])
    assert.eq((a + b).data, [11.0, 22.0, 33.0])
    assert.eq((b - a).data, [9.0, 18.0, 27.0])
    assert.eq((a * b).data, [10.0, 40.0, 90.0])
    assert.eq((b / a).data, [10.0, 10.0, 10.0])
    assert.eq((a * 2).data, [2.0, 4.0, 6.0])
    assert.eq((2 * a).data, [2.0, 4.0, 6.0])
    assert.eq((10 - a).data, [9.0, 8.0, 7.0])
    assert.eq((a / 2).data, [0.5, 1.0, 1.5])
    assert.eq(a.data, [1.0, 2.0, 3.0])  # operands unchanged
    i = torch.tensor([7, 9], dtype = "i32")
    assert.eq((i / 2).data, [3, 4])
    assert.fails(lambda: a + i, "tensor \\+: operands differ \\(f32\\[3\\] and i32\\[2\\]\\)")
    assert.fails(lambda: a + torch.zeros(2), "operands differ")
    assert.fails(lambda: a + "x", "unknown binary op: tensor \\+ string")
`)
	if got := f.rt.M.Sim.Now(); got != 0 {
		t.Errorf("simulated time after host arithmetic = %v, want 0", got)
	}
}

// Constructor arguments are validated with messages naming the builtin.
func TestTensorErrors(t *testing.T) {
	f := newFixture(t, 0, 1, 0, machine.HBM)
	runStar(t, f.torch, `
def test(torch):
    assert.fails(lambda: torch.zeros(None), "torch.zeros: shape must be an int or a tuple of ints, got NoneType")
    assert.fails(lambda: torch.zeros((2, -1)), "torch.zeros: shape must hold non-negative ints, got -1")
    assert.fails(lambda: torch.ones((2, "a")), "torch.ones: shape must hold non-negative ints, got \"a\"")
    assert.fails(lambda: torch.zeros(3, dtype = "f8"), "torch.zeros: unknown dtype \"f8\"")
    assert.fails(lambda: torch.full((2,), "x"), "torch.full: value must be a number, got string")
    assert.fails(lambda: torch.full((2,)), "torch.full: missing argument for value")
    assert.fails(lambda: torch.tensor(["a"]), "torch.tensor: element 0 is a string, want a number")
    assert.fails(lambda: torch.tensor((1, 2)), "torch.tensor: for parameter data: got tuple, want list")
    assert.fails(lambda: torch.arange(3, dtype = "x"), "torch.arange: unknown dtype")
    assert.fails(lambda: torch.rand((2,), seed = "a"), "torch.rand: for parameter .?seed.?: got string, want int")
    assert.fails(lambda: torch.empty_like([1]), "torch.empty_like")
    assert.fails(lambda: torch.zeros(1 << 29, dtype = "f64"), "torch.zeros: rank 0: hbm\\[pe 0\\]: cannot allocate")
`)
}

// A negative element count is a shape error, whether given as an int or
// in a tuple.
func TestNegativeShapeInt(t *testing.T) {
	f := newFixture(t, 0, 1, 0, machine.HBM)
	runStar(t, f.torch, `
def test(torch):
    # A bare negative int used to reach the allocator ("negative
    # allocation size -4").
    assert.fails(lambda: torch.zeros(-1), "torch.zeros: shape must hold non-negative ints, got -1")
    assert.fails(lambda: torch.arange(-1), "torch.arange: n must be non-negative, got -1")
    assert.fails(lambda: torch.full(-2, 1.0), "torch.full: shape must hold non-negative ints, got -2")
`)
}

// torch.check counts wrong elements (never raising for wrong data),
// reports the first, and accepts a list or a tensor.
func TestCheck(t *testing.T) {
	f := newFixture(t, 1, 2, 0, machine.HBM)
	runStar(t, f.torch, `
def test(torch):
    y = torch.tensor([1, 2, 3, 4])
    assert.eq(torch.check(y, [1, 2, 3, 4]), 0)
    assert.eq(torch.check(y, [1, 5, 3, 6]), 2)
    assert.eq(torch.check(y, torch.tensor([1, 2, 3, 4], dtype = "f64")), 0)
    assert.eq(torch.check(y = y, expected = torch.zeros(4)), 4)
    i = torch.tensor([1, 2], dtype = "i32")
    assert.eq(torch.check(i, [1, 3]), 1)
    assert.fails(lambda: torch.check(y, [1, 2]), "torch.check: expected has 2 elements, y has 4")
    assert.fails(lambda: torch.check(y, torch.zeros(3)), "torch.check: expected has 3 elements, y has 4")
    assert.fails(lambda: torch.check(y, [1, 2, 3, "x"]), "torch.check: expected\\[3\\] is a string, want a number")
    assert.fails(lambda: torch.check(y, 4), "torch.check: expected must be a tensor or a list, got int")
`)
	want := []check{
		{1, 0, nil},
		{1, 2, &host.Wrong{Rank: 1, Index: 1, Got: "2", Want: "5"}},
		{1, 0, nil},
		{1, 4, &host.Wrong{Rank: 1, Index: 0, Got: "1", Want: "0"}},
		{1, 1, &host.Wrong{Rank: 1, Index: 1, Got: "2", Want: "3"}},
	}
	if diff := cmp.Diff(want, f.checks); diff != "" {
		t.Errorf("OnCheck calls (-want +got):\n%s", diff)
	}
}

// init_process_group checks backend, world size and rank against the
// process and installs the group through the runtime.
func TestInitProcessGroup(t *testing.T) {
	f := newFixture(t, 1, 3, 0, machine.HBM)
	runStar(t, f.torch, `
def test(torch):
    dist = torch.distributed
    assert.eq(dist.get_rank(), 1)
    assert.eq(dist.get_world_size(), 3)
    assert.fails(lambda: dist.init_process_group(backend = "ahbm", world_size = 3, rank = 2),
                 "torch.distributed.init_process_group: world_size=3 rank=2 do not match this process \\(world_size 3, rank 1\\)")
    assert.fails(lambda: dist.init_process_group(backend = "ahbm", world_size = 4, rank = 1), "do not match this process")
    assert.fails(lambda: dist.init_process_group(backend = "nccl"), "backend \"nccl\" is not supported \\(want \"ahbm\"\\)")
    assert.eq(dist.init_process_group(backend = "ahbm", world_size = 3, rank = 1), None)
    assert.eq(dist.init_process_group(), None)  # defaults: this process
    algo = dist.algorithm()
    assert.eq(algo.name, "my_algo")
    assert.eq(str(algo.kernel), "<built-in function my_kernel>")
    assert.eq(torch.args.seed, 0)
    assert.eq(torch.args.count, 4)
`)
	if diff := cmp.Diff([]int{3, 3}, f.inits); diff != "" {
		t.Errorf("InitGroup calls (world sizes) (-want +got):\n%s", diff)
	}
}

// The torch object's members.
func TestTorchAttrs(t *testing.T) {
	f := newFixture(t, 0, 1, 0, machine.HBM)
	want := []string{"arange", "args", "check", "distributed", "empty_like", "full", "launch", "ones", "rand", "tensor", "zeros"}
	got := f.torch.AttrNames()
	sortStrings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("torch attributes (-want +got):\n%s", diff)
	}
	if s := f.torch.String(); !strings.Contains(s, "rank=0") {
		t.Errorf("torch.String() = %q", s)
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
