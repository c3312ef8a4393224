// Package host is the Starlark API of host benches: the PyTorch-shaped
// `torch` object passed to run_rank(rank, world_size, torch), with
// torch.distributed, tensors in simulated device memory, torch.launch and
// torch.check (starlark-api.md §4).
package host

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/tl"
)

// Runtime is what the run pipeline provides to every rank's torch object.
type Runtime struct {
	M *machine.Machine
	// InitGroup installs the IPCQ process group from ccl.yaml (once; later
	// calls return the same group) [D10].
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
	attrs starlark.StringDict
}

var _ starlark.HasAttrs = (*Torch)(nil)

// New makes the torch object for rank, running in process p.
func New(rt *Runtime, rank, world int, p *sim.Proc) *Torch {
	t := &Torch{rt: rt, rank: rank, world: world, proc: p}
	b := func(name string, fn func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error)) *starlark.Builtin {
		return starlark.NewBuiltin(name, fn)
	}
	dist := starlarkstruct.FromStringDict(starlark.String("torch.distributed"), starlark.StringDict{
		"init_process_group": b("torch.distributed.init_process_group", t.initProcessGroup),
		"algorithm":          b("torch.distributed.algorithm", t.algorithm),
		"get_rank": b("torch.distributed.get_rank", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.MakeInt(rank), nil
		}),
		"get_world_size": b("torch.distributed.get_world_size", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.MakeInt(world), nil
		}),
	})
	t.attrs = starlark.StringDict{
		"distributed": dist,
		"args":        rt.Args,
		"zeros":       b("torch.zeros", t.filler("torch.zeros", 0, false)),
		"ones":        b("torch.ones", t.filler("torch.ones", 1, false)),
		"full":        b("torch.full", t.filler("torch.full", 0, true)),
		"rand":        b("torch.rand", t.rand),
		"arange":      b("torch.arange", t.arange),
		"tensor":      b("torch.tensor", t.tensor),
		"empty_like":  b("torch.empty_like", t.emptyLike),
		"launch":      b("torch.launch", t.launch),
		"check":       b("torch.check", t.check),
	}
	return t
}

func (t *Torch) String() string        { return fmt.Sprintf("<torch rank=%d>", t.rank) }
func (t *Torch) Type() string          { return "torch" }
func (t *Torch) Freeze()               {}
func (t *Torch) Truth() starlark.Bool  { return true }
func (t *Torch) Hash() (uint32, error) { return uint32(t.rank), nil }
func (t *Torch) Attr(name string) (starlark.Value, error) {
	if v, ok := t.attrs[name]; ok {
		return v, nil
	}
	return nil, nil
}
func (t *Torch) AttrNames() []string { return t.attrs.Keys() }

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

// shape accepts (n,), [n], n or (a, b, …) and returns the element count.
func shapeCount(fn string, v starlark.Value) (int64, error) {
	if i, err := starlark.AsInt32(v); err == nil {
		if i < 0 {
			return 0, fmt.Errorf("%s: shape must hold non-negative ints, got %d", fn, i)
		}
		return int64(i), nil
	}
	it, ok := v.(starlark.Indexable)
	if !ok {
		return 0, fmt.Errorf("%s: shape must be an int or a tuple of ints, got %s", fn, v.Type())
	}
	n := int64(1)
	for i := 0; i < it.Len(); i++ {
		d, err := starlark.AsInt32(it.Index(i))
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%s: shape must hold non-negative ints, got %s", fn, it.Index(i))
		}
		n *= int64(d)
	}
	return n, nil
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
	off, err := mem.Alloc(n * int64(dt.Size()))
	if err != nil {
		return nil, fmt.Errorf("%s: rank %d: %v", fn, t.rank, err)
	}
	return &Tensor{Ptr: tl.NewPtr(machine.Region{Mem: mem, Off: off}, dt, n, t.rank), torch: t}, nil
}

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

func (t *Torch) filler(fn string, value float64, takesValue bool) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
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
	got := y.Ptr.Reg.Bytes()
	var want []byte
	switch e := exp.(type) {
	case *Tensor:
		if e.Ptr.Count != y.Ptr.Count {
			return nil, fmt.Errorf("%s: expected has %d elements, y has %d", b.Name(), e.Ptr.Count, y.Ptr.Count)
		}
		want = make([]byte, len(got))
		dtype.Convert(want, dt, e.Ptr.Reg.Bytes(), e.Ptr.DT)
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
