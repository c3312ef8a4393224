// Package host is the Starlark API of host benches: the PyTorch-shaped
// `torch` object passed to run_rank(rank, world_size, torch), with
// torch.distributed, tensors in simulated device memory, torch.launch and
// torch.check (docs/builtins.md). Its members are registered in
// starlark/registry tables (TorchTable, DistributedTable, TensorTable),
// from which the reference and the stubs are rendered.
package host

import (
	"fmt"
	"math"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/registry"
	"kernbench/starlark/tl"
)

// Runtime is what the run pipeline provides to every rank's torch object.
type Runtime struct {
	M *machine.Machine
	// InitGroup installs the IPCQ process group from ccl.yaml (once; later
	// calls return the same group).
	InitGroup func(world int) (*machine.Group, error)
	// Algorithm is the module chosen by ccl.yaml / the CLI.
	AlgoName   string
	AlgoKernel starlark.Callable
	AlgoParams []starlark.Tuple
	RedOp      dtype.RedOp
	// Args are the bench parameters from the command line.
	Args *starlarkstruct.Struct
	// DataSpace is where tensors are allocated.
	DataSpace machine.Space
	// NewKernel prepares a tl object for a launch on rank (stats, observers).
	NewKernel func(rank int, g *machine.Group, p *sim.Proc) *tl.Kernel
	// OnCheck receives every torch.check result.
	OnCheck func(rank, wrong int, first *Wrong)
	// ThreadKey is the thread-local key under which the launched kernel is
	// stored (print prefixes).
	ThreadKey string
}

// Wrong describes the first element torch.check found wrong.
type Wrong struct {
	Rank, Index int
	Got, Want   string
}

// Torch is one rank's torch object.
type Torch struct {
	rt    *Runtime
	rank  int
	world int
	proc  *sim.Proc
	group *machine.Group
	// dist is torch.distributed: the distributed table's builtins bound to
	// this Torch, in a struct as scripts have always seen it.
	dist *starlarkstruct.Struct
}

var _ starlark.HasAttrs = (*Torch)(nil)

// torchMethod is the signature of torch's and torch.distributed's methods.
type torchMethod = func(t *Torch, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error)

// torchTable is the torch object's attributes and functions.
var torchTable = registry.New("torch", "torch.", []registry.Field[*Torch]{
	{Name: "args", Type: "struct", Doc: "The bench parameters from the command line: count and bytes (the size being run: --count, --bytes or a point of --sweep), dtype, redop, seed, in_place, root and collective (--dtype, --redop, --seed, --in-place, --root, --collective or the algorithm's).", Get: func(t *Torch) starlark.Value { return t.rt.Args }},
	{Name: "distributed", Type: "torch.distributed", Doc: "The process-group API (torch.distributed below).", Get: func(t *Torch) starlark.Value { return t.dist }},
}, []registry.Method[*Torch]{
	{Name: "arange", Sig: `arange(n, dtype="f32")`, Doc: "A new tensor 0, 1, …, n-1 in the rank's data memory.", Fn: (*Torch).arange},
	{Name: "check", Sig: "check(y, expected, ranks=world_size)", Doc: "Count the elements of tensor y that differ from expected (a tensor or a list) beyond the dtype's tolerance for a reduction over `ranks` inputs; reported as the rank's wrong elements, never raises for wrong data. Returns the count.", Fn: (*Torch).check},
	{Name: "empty_like", Sig: "empty_like(x)", Doc: "A new tensor of x's dtype and count.", Fn: (*Torch).emptyLike},
	{Name: "full", Sig: `full(shape, value, dtype="f32")`, Doc: "A new tensor of shape (an int or a tuple of ints) filled with value.", Fn: filler(0, true)},
	{Name: "launch", Sig: "launch(name, kernel, *args, **kwargs)", Doc: "Run kernel(*args, **kwargs, tl=tl) on the rank's PE and return when it finishes (simulated time advances). Tensors are passed as their Ptrs; the algorithm's kernel also gets its ccl.yaml parameters.", Fn: (*Torch).launch},
	{Name: "ones", Sig: `ones(shape, dtype="f32")`, Doc: "A new tensor of shape filled with ones.", Fn: filler(1, false)},
	{Name: "rand", Sig: `rand(shape, dtype="f32", seed=0)`, Doc: "A new tensor of shape with the builtin benches' input data: seed plays the rank, so torch.rand(..., seed=r) is rank r's builtin-bench input.", Fn: (*Torch).rand},
	{Name: "tensor", Sig: `tensor(data, dtype="f32")`, Doc: "A new tensor holding the numbers of list data.", Fn: (*Torch).tensor},
	{Name: "zeros", Sig: `zeros(shape, dtype="f32")`, Doc: "A new tensor of shape filled with zeros.", Fn: filler(0, false)},
})

// distributedTable is torch.distributed's functions (bound to the rank's
// Torch).
var distributedTable = registry.New("torch.distributed", "torch.distributed.", nil, []registry.Method[*Torch]{
	{Name: "algorithm", Sig: "algorithm()", Doc: "The algorithm chosen by ccl.yaml or the command line: struct(name, kernel).", Fn: (*Torch).algorithm},
	{Name: "get_rank", Sig: "get_rank()", Doc: "This process's rank.", Fn: func(t *Torch, _ *starlark.Thread, _ *starlark.Builtin, _ starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		return starlark.MakeInt(t.rank), nil
	}},
	{Name: "get_world_size", Sig: "get_world_size()", Doc: "The number of ranks.", Fn: func(t *Torch, _ *starlark.Thread, _ *starlark.Builtin, _ starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		return starlark.MakeInt(t.world), nil
	}},
	{Name: "init_process_group", Sig: `init_process_group(backend="ahbm", world_size=world_size, rank=rank)`, Doc: "Install the IPCQ process group of ccl.yaml (the first call installs it, later calls of any rank share it): host code never sees IPCQ settings. world_size and rank must be this process's.", Fn: (*Torch).initProcessGroup},
})

// New makes the torch object for rank, running in process p.
func New(rt *Runtime, rank, world int, p *sim.Proc) *Torch {
	t := &Torch{rt: rt, rank: rank, world: world, proc: p}
	dist := starlark.StringDict{}
	for _, m := range distributedTable.MethodList() {
		dist[m.Name] = distributedTable.Builtin(m.Name).BindReceiver(t)
	}
	t.dist = starlarkstruct.FromStringDict(starlark.String("torch.distributed"), dist)
	return t
}

func (t *Torch) String() string        { return fmt.Sprintf("<torch rank=%d>", t.rank) }
func (t *Torch) Type() string          { return "torch" }
func (t *Torch) Freeze()               {}
func (t *Torch) Truth() starlark.Bool  { return true }
func (t *Torch) Hash() (uint32, error) { return uint32(t.rank), nil }
func (t *Torch) Attr(name string) (starlark.Value, error) {
	return torchTable.Attr(t, name)
}
func (t *Torch) AttrNames() []string { return torchTable.AttrNames() }

func (t *Torch) initProcessGroup(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	backend, world, rank := "ahbm", t.world, t.rank
	if err := starlark.UnpackArgs(b.Name(), args, kw, "backend?", &backend, "world_size?", &world, "rank?", &rank); err != nil {
		return nil, err
	}
	if backend != "ahbm" {
		return nil, fmt.Errorf("%s: backend %q is not supported (want \"ahbm\")", b.Name(), backend)
	}
	if world != t.world || rank != t.rank {
		return nil, fmt.Errorf("%s: world_size=%d rank=%d do not match this process (world_size %d, rank %d)", b.Name(), world, rank, t.world, t.rank)
	}
	g, err := t.rt.InitGroup(world)
	if err != nil {
		return nil, err
	}
	t.group = g
	return starlark.None, nil
}

func (t *Torch) algorithm(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 0); err != nil {
		return nil, err
	}
	return starlarkstruct.FromStringDict(starlark.String("algorithm"), starlark.StringDict{
		"name":   starlark.String(t.rt.AlgoName),
		"kernel": t.rt.AlgoKernel,
	}), nil
}

// shape accepts (n,), [n], n or (a, b, …) and returns the element count,
// math.MaxInt64 when the product passes it (alloc then refuses it as too
// large: (1 << 40,) was refused as "shape must hold non-negative ints").
func shapeCount(fn string, v starlark.Value) (int64, error) {
	if _, ok := v.(starlark.Int); ok {
		return shapeDim(fn, v)
	}
	it, ok := v.(starlark.Indexable)
	if !ok {
		return 0, fmt.Errorf("%s: shape must be an int or a tuple of ints, got %s", fn, v.Type())
	}
	n := int64(1)
	for i := 0; i < it.Len(); i++ {
		d, err := shapeDim(fn, it.Index(i))
		if err != nil {
			return 0, err
		}
		if d != 0 && n > math.MaxInt64/d {
			n = math.MaxInt64
		} else {
			n *= d
		}
	}
	return n, nil
}

// shapeDim is one dimension of a shape: a non-negative int
// (math.MaxInt64 for one past 64 bits).
func shapeDim(fn string, v starlark.Value) (int64, error) {
	i, ok := v.(starlark.Int)
	if !ok || i.Sign() < 0 {
		return 0, fmt.Errorf("%s: shape must hold non-negative ints, got %s", fn, v)
	}
	if d, ok := i.Int64(); ok {
		return d, nil
	}
	return math.MaxInt64, nil
}

func (t *Torch) alloc(fn string, n int64, dt dtype.DType) (*Tensor, error) {
	pe := t.rt.M.Ranks[t.rank]
	mem := pe.HBM
	switch t.rt.DataSpace {
	case machine.TCM:
		mem = pe.TCM
	case machine.SRAM:
		mem = pe.SRAM
	}
	if sz := int64(dt.Size()); n > math.MaxInt64/sz {
		// n × size passes 2^63: refused before the multiplication wraps.
		what := fmt.Sprintf("%d × %s (more than 2^63 bytes)", n, dt)
		if n == math.MaxInt64 {
			what = "more than 2^63 elements"
		}
		return nil, &tensorTooLarge{
			msg: fmt.Sprintf("%s: rank %d: a tensor of %s does not fit %v (capacity %d bytes)", fn, t.rank, what, mem, mem.Capacity),
			oom: &machine.OutOfMemoryError{Mem: mem, Requested: math.MaxInt64, InUse: mem.Used()}}
	}
	off, err := mem.Alloc(n * int64(dt.Size()))
	if err != nil {
		return nil, fmt.Errorf("%s: rank %d: %w", fn, t.rank, err)
	}
	return &Tensor{Ptr: tl.NewPtr(machine.Region{Mem: mem, Off: off}, dt, n, t.rank), torch: t}, nil
}

// tensorTooLarge is a tensor whose size in bytes passes 2^63: the
// allocator's OutOfMemory (its kind), with a message that does not name a
// wrapped byte count.
type tensorTooLarge struct {
	msg string
	oom *machine.OutOfMemoryError
}

func (e *tensorTooLarge) Error() string { return e.msg }
func (e *tensorTooLarge) Unwrap() error { return e.oom }

// written logs host-side writes into x for the phase-2 replay.
func (t *Torch) written(x *Tensor) *Tensor {
	tl.LogWrite(t.rt.M, t.rank, "host_write", x.Ptr.Reg, false)
	return x
}

func dtypeArg(fn, s string) (dtype.DType, error) {
	dt, err := dtype.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", fn, err)
	}
	return dt, nil
}

// filler is torch.zeros (value 0), torch.ones (1) and torch.full
// (takesValue: the fill value is an argument).
func filler(value float64, takesValue bool) torchMethod {
	return func(t *Torch, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		fn := b.Name()
		var shape starlark.Value
		var fill starlark.Value = starlark.Float(value)
		ds := "f32"
		var err error
		if takesValue {
			err = starlark.UnpackArgs(fn, args, kw, "shape", &shape, "value", &fill, "dtype?", &ds)
		} else {
			err = starlark.UnpackArgs(fn, args, kw, "shape", &shape, "dtype?", &ds)
		}
		if err != nil {
			return nil, err
		}
		n, err := shapeCount(fn, shape)
		if err != nil {
			return nil, err
		}
		dt, err := dtypeArg(fn, ds)
		if err != nil {
			return nil, err
		}
		f, ok := starlark.AsFloat(fill)
		if !ok {
			return nil, fmt.Errorf("%s: value must be a number, got %s", fn, fill.Type())
		}
		x, err := t.alloc(fn, n, dt)
		if err != nil {
			return nil, err
		}
		if f != 0 {
			dtype.FillValue(dt, x.Ptr.Reg.Bytes(), f)
		}
		return t.written(x), nil
	}
}

func (t *Torch) rand(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var shape starlark.Value
	ds := "f32"
	seed := 0
	if err := starlark.UnpackArgs(b.Name(), args, kw, "shape", &shape, "dtype?", &ds, "seed?", &seed); err != nil {
		return nil, err
	}
	n, err := shapeCount(b.Name(), shape)
	if err != nil {
		return nil, err
	}
	dt, err := dtypeArg(b.Name(), ds)
	if err != nil {
		return nil, err
	}
	x, err := t.alloc(b.Name(), n, dt)
	if err != nil {
		return nil, err
	}
	// The same generator as the builtin benches: seed plays the role of the
	// rank, so torch.rand(..., seed=r) is rank r's builtin-bench input.
	dtype.Fill(dt, x.Ptr.Reg.Bytes(), argSeed(t.rt.Args), seed)
	return t.written(x), nil
}

func argSeed(args *starlarkstruct.Struct) uint64 {
	if args == nil {
		return 0
	}
	v, err := args.Attr("seed")
	if err != nil {
		return 0
	}
	s, _ := starlark.AsInt32(v)
	return uint64(s)
}

func (t *Torch) arange(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var n int
	ds := "f32"
	if err := starlark.UnpackArgs(b.Name(), args, kw, "n", &n, "dtype?", &ds); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("%s: n must be non-negative, got %d", b.Name(), n)
	}
	dt, err := dtypeArg(b.Name(), ds)
	if err != nil {
		return nil, err
	}
	x, err := t.alloc(b.Name(), int64(n), dt)
	if err != nil {
		return nil, err
	}
	buf := x.Ptr.Reg.Bytes()
	for i := 0; i < n; i++ {
		dtype.Put(dt, buf, i, float64(i))
	}
	return t.written(x), nil
}

func (t *Torch) tensor(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var list *starlark.List
	ds := "f32"
	if err := starlark.UnpackArgs(b.Name(), args, kw, "data", &list, "dtype?", &ds); err != nil {
		return nil, err
	}
	dt, err := dtypeArg(b.Name(), ds)
	if err != nil {
		return nil, err
	}
	x, err := t.alloc(b.Name(), int64(list.Len()), dt)
	if err != nil {
		return nil, err
	}
	buf := x.Ptr.Reg.Bytes()
	for i := 0; i < list.Len(); i++ {
		f, ok := starlark.AsFloat(list.Index(i))
		if !ok {
			return nil, fmt.Errorf("%s: element %d is a %s, want a number", b.Name(), i, list.Index(i).Type())
		}
		dtype.Put(dt, buf, i, f)
	}
	return t.written(x), nil
}

func (t *Torch) emptyLike(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var x *Tensor
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &x); err != nil {
		return nil, err
	}
	y, err := t.alloc(b.Name(), x.Ptr.Count, x.Ptr.DT)
	if err != nil {
		return nil, err
	}
	return t.written(y), nil
}

// launch runs kernel(*args, tl=tl) on the rank's PE in this process and
// returns when it finishes (simulated time advances meanwhile).
func (t *Torch) launch(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("%s: want launch(name, kernel, *args)", b.Name())
	}
	if _, ok := args[0].(starlark.String); !ok {
		return nil, fmt.Errorf("%s: name must be a string, got %s", b.Name(), args[0].Type())
	}
	kernel, ok := args[1].(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("%s: kernel must be a function, got %s", b.Name(), args[1].Type())
	}
	kargs := make(starlark.Tuple, 0, len(args)-2)
	for _, a := range args[2:] {
		if x, ok := a.(*Tensor); ok {
			a = x.Ptr
		}
		kargs = append(kargs, a)
	}
	k := t.rt.NewKernel(t.rank, t.group, t.proc)
	kwargs := append([]starlark.Tuple(nil), kw...)
	if kernel == t.rt.AlgoKernel {
		kwargs = append(kwargs, t.rt.AlgoParams...)
	}
	kwargs = append(kwargs, starlark.Tuple{starlark.String("tl"), k})
	prev := th.Local(t.rt.ThreadKey)
	th.SetLocal(t.rt.ThreadKey, k)
	defer th.SetLocal(t.rt.ThreadKey, prev)
	_, err := starlark.Call(th, kernel, kargs, kwargs)
	if err == nil {
		err = k.Finish()
	} else {
		k.Release()
	}
	if err != nil {
		return nil, err
	}
	return starlark.None, nil
}

// check counts elements of y that differ from expected (a Tensor or a list)
// beyond the dtype's tolerance; it never raises for wrong data.
func (t *Torch) check(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var y *Tensor
	var exp starlark.Value
	ranks := t.world
	if err := starlark.UnpackArgs(b.Name(), args, kw, "y", &y, "expected", &exp, "ranks?", &ranks); err != nil {
		return nil, err
	}
	dt := y.Ptr.DT
	got := y.Ptr.Reg.View()
	var want []byte
	switch e := exp.(type) {
	case *Tensor:
		if e.Ptr.Count != y.Ptr.Count {
			return nil, fmt.Errorf("%s: expected has %d elements, y has %d", b.Name(), e.Ptr.Count, y.Ptr.Count)
		}
		want = make([]byte, len(got))
		dtype.Convert(want, dt, e.Ptr.Reg.View(), e.Ptr.DT)
	case *starlark.List:
		if int64(e.Len()) != y.Ptr.Count {
			return nil, fmt.Errorf("%s: expected has %d elements, y has %d", b.Name(), e.Len(), y.Ptr.Count)
		}
		want = make([]byte, len(got))
		for i := 0; i < e.Len(); i++ {
			f, ok := starlark.AsFloat(e.Index(i))
			if !ok {
				return nil, fmt.Errorf("%s: expected[%d] is a %s, want a number", b.Name(), i, e.Index(i).Type())
			}
			dtype.Put(dt, want, i, f)
		}
	default:
		return nil, fmt.Errorf("%s: expected must be a tensor or a list, got %s", b.Name(), exp.Type())
	}
	wrong, first := dtype.CountWrong(dt, t.rt.RedOp, ranks, got, want)
	var w *Wrong
	if wrong > 0 {
		w = &Wrong{Rank: t.rank, Index: first, Got: dtype.Format(dt, got, first), Want: dtype.Format(dt, want, first)}
	}
	if t.rt.OnCheck != nil {
		t.rt.OnCheck(t.rank, wrong, w)
	}
	return starlark.MakeInt(wrong), nil
}
