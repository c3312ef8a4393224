package host

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench/engine/dtype"
	"kernbench/starlark/registry"
	"kernbench/starlark/tl"
)

// Tensor is a host handle on device memory: a Ptr plus host-side
// conveniences. Host arithmetic (a + b) costs no simulated time; it is for
// computing expected results.
type Tensor struct {
	Ptr   *tl.Ptr
	torch *Torch
}

var (
	_ starlark.HasAttrs  = (*Tensor)(nil)
	_ starlark.HasBinary = (*Tensor)(nil)
	_ starlark.Sequence  = (*Tensor)(nil)
)

func (x *Tensor) String() string {
	return fmt.Sprintf("tensor(count=%d, dtype=%s, %s)", x.Ptr.Count, x.Ptr.DT, x.Ptr.Reg.Mem)
}
func (x *Tensor) Type() string          { return "tensor" }
func (x *Tensor) Freeze()               {}
func (x *Tensor) Truth() starlark.Bool  { return x.Ptr.Count > 0 }
func (x *Tensor) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: tensor") }
func (x *Tensor) Len() int              { return int(x.Ptr.Count) }
func (x *Tensor) Iterate() starlark.Iterator {
	return x.list().Iterate()
}

func (x *Tensor) list() *starlark.List {
	v, _ := x.Ptr.Attr("tolist")
	l, _ := starlark.Call(&starlark.Thread{}, v, nil, nil)
	return l.(*starlark.List)
}

// tensorTable is a tensor's attributes and methods.
var tensorTable = registry.New("tensor", "tensor.", []registry.Field[*Tensor]{
	{Name: "count", Type: "int", Doc: "Number of elements.", Get: func(x *Tensor) starlark.Value { return starlark.MakeInt64(x.Ptr.Count) }},
	{Name: "data", Type: "list", Doc: "The values as a list (read after the launch; no simulated cost).", Get: func(x *Tensor) starlark.Value { return x.list() }},
	{Name: "dtype", Type: "str", Doc: "Element type name.", Get: func(x *Tensor) starlark.Value { return starlark.String(x.Ptr.DT.String()) }},
	{Name: "nbytes", Type: "int", Doc: "Size in bytes.", Get: func(x *Tensor) starlark.Value { return starlark.MakeInt64(x.Ptr.Reg.N) }},
	{Name: "ptr", Type: "Ptr", Doc: "Its Ptr (what a kernel gets when the tensor is passed to torch.launch).", Get: func(x *Tensor) starlark.Value { return x.Ptr }},
}, []registry.Method[*Tensor]{
	{Name: "chunk", Sig: "chunk(i, n)", Doc: "The i-th of n equal parts, as a tensor (Ptr.chunk).", Fn: func(x *Tensor, th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		c, _ := x.Ptr.Attr("chunk")
		v, err := starlark.Call(th, c, args, kw)
		if err != nil {
			return nil, err
		}
		return &Tensor{Ptr: v.(*tl.Ptr), torch: x.torch}, nil
	}},
})

func (x *Tensor) AttrNames() []string { return tensorTable.AttrNames() }

func (x *Tensor) Attr(name string) (starlark.Value, error) { return tensorTable.Attr(x, name) }

var hostOps = map[syntax.Token]dtype.Op{syntax.PLUS: dtype.Add, syntax.MINUS: dtype.Sub, syntax.STAR: dtype.Mul, syntax.SLASH: dtype.Div}

// Binary is host-side elementwise arithmetic into a new tensor.
func (x *Tensor) Binary(tok syntax.Token, y starlark.Value, side starlark.Side) (starlark.Value, error) {
	op, ok := hostOps[tok]
	if !ok || x.torch == nil {
		return nil, nil
	}
	out, err := x.torch.alloc("tensor "+tok.String(), x.Ptr.Count, x.Ptr.DT)
	if err != nil {
		return nil, err
	}
	out.torch = x.torch
	switch y := y.(type) {
	case *Tensor:
		if y.Ptr.DT != x.Ptr.DT || y.Ptr.Count != x.Ptr.Count {
			return nil, fmt.Errorf("tensor %s: operands differ (%s[%d] and %s[%d])", tok, x.Ptr.DT, x.Ptr.Count, y.Ptr.DT, y.Ptr.Count)
		}
		a, b := x, y
		if side == starlark.Right {
			a, b = y, x
		}
		dtype.Binary(op, x.Ptr.DT, out.Ptr.Reg.Bytes(), a.Ptr.Reg.View(), b.Ptr.Reg.View())
	case starlark.Int, starlark.Float:
		f, _ := starlark.AsFloat(y)
		dtype.BinaryScalar(op, x.Ptr.DT, out.Ptr.Reg.Bytes(), x.Ptr.Reg.View(), f, int64(f), side == starlark.Right)
	default:
		return nil, nil
	}
	return x.torch.written(out), nil
}
