package registry_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"

	"kernbench/starlark/registry"
)

// box is a test receiver type.
type box struct{ n int }

func (b *box) String() string        { return fmt.Sprintf("box(%d)", b.n) }
func (b *box) Type() string          { return "box" }
func (b *box) Freeze()               {}
func (b *box) Truth() starlark.Bool  { return true }
func (b *box) Hash() (uint32, error) { return uint32(b.n), nil }

var boxes = registry.New("box", "box.", []registry.Field[*box]{
	{Name: "n", Type: "int", Doc: "The number.", Get: func(b *box) starlark.Value { return starlark.MakeInt(b.n) }},
	{Name: "held", Type: "int", Doc: "A value the box holds itself (no getter)."},
}, []registry.Method[*box]{
	{Name: "plus", Sig: "plus(k)", Doc: "n + k.", Fn: func(b *box, _ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var k int
		if err := starlark.UnpackArgs(fn.Name(), args, kw, "k", &k); err != nil {
			return nil, err
		}
		return starlark.MakeInt(b.n + k), nil
	}},
	{Name: "add", Sig: "add()", Doc: "Does nothing (sorts before the fields).", Fn: func(*box, *starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return starlark.None, nil
	}},
})

// A method is one shared builtin bound to each receiver: the call sees its
// receiver, errors carry the prefixed name, fields compute per receiver.
func TestTableBindsReceivers(t *testing.T) {
	th := &starlark.Thread{}
	for _, n := range []int{1, 40} {
		b := &box{n: n}
		v, err := boxes.Attr(b, "plus")
		if err != nil {
			t.Fatal(err)
		}
		bound := v.(*starlark.Builtin)
		if bound.Receiver() != b {
			t.Errorf("box(%d).plus is bound to %v", n, bound.Receiver())
		}
		got, err := starlark.Call(th, bound, starlark.Tuple{starlark.MakeInt(2)}, nil)
		if err != nil || got.(starlark.Int) != starlark.MakeInt(n+2) {
			t.Errorf("box(%d).plus(2) = %v, %v; want %d", n, got, err, n+2)
		}
		if _, err := starlark.Call(th, bound, nil, nil); err == nil || err.Error() != "box.plus: missing argument for k" {
			t.Errorf("box(%d).plus() error = %v; want the prefixed name", n, err)
		}
		if f, _ := boxes.Attr(b, "n"); f != starlark.MakeInt(n) {
			t.Errorf("box(%d).n = %v", n, f)
		}
	}
	if v, err := boxes.Attr(&box{}, "held"); v != nil || err != nil {
		t.Errorf("a field without a getter = %v, %v; want nil, nil (the value answers it)", v, err)
	}
	if v, err := boxes.Attr(&box{}, "nope"); v != nil || err != nil {
		t.Errorf("an unknown member = %v, %v; want nil, nil", v, err)
	}
	if diff := cmp.Diff([]string{"add", "held", "n", "plus"}, boxes.AttrNames()); diff != "" {
		t.Errorf("AttrNames (-want +got):\n%s", diff)
	}
	if !boxes.Has("held") || boxes.Has("nope") {
		t.Errorf("Has(held) = %v, Has(nope) = %v", boxes.Has("held"), boxes.Has("nope"))
	}
	if boxes.Builtin("plus") != boxes.Builtin("plus") || boxes.Builtin("n") != nil {
		t.Errorf("Builtin: plus is not one shared builtin, or a field has one")
	}
	if boxes.GoType() != "*registry_test.box" {
		t.Errorf("GoType = %q", boxes.GoType())
	}
	var names []string
	for _, e := range registry.Members(boxes) {
		names = append(names, e.Usage())
	}
	if diff := cmp.Diff([]string{"add()", "held", "n", "plus(k)"}, names); diff != "" {
		t.Errorf("Members (-want +got):\n%s", diff)
	}
}

// A predeclared function (no receiver) gets the zero receiver.
func TestUnboundCall(t *testing.T) {
	var got *box = &box{}
	fns := registry.New("", "", nil, []registry.Method[*box]{
		{Name: "f", Sig: "f()", Doc: "F.", Fn: func(b *box, _ *starlark.Thread, _ *starlark.Builtin, _ starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			got = b
			return starlark.None, nil
		}},
	})
	if _, err := starlark.Call(&starlark.Thread{}, fns.Builtin("f"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got != nil {
		t.Errorf("receiver = %v, want nil", got)
	}
}

func TestDuplicateNamePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "dup.x is registered twice") {
			t.Errorf("recover() = %v; want a duplicate-name panic", r)
		}
	}()
	registry.New("dup", "dup.", []registry.Field[*box]{{Name: "x", Type: "int", Doc: "X."}}, []registry.Method[*box]{{Name: "x", Sig: "x()", Doc: "X."}})
}

func TestPySig(t *testing.T) {
	for _, c := range []struct{ sig, want string }{
		{"tobytes()", "tobytes(self)"},
		{"send(dir, src, nbytes=None)", "send(self, dir, src, nbytes=None)"},
		// A required keyword after a default gets "=..." so that the stub parses.
		{"create_l3_l2_region(worker_id=0, payload_bytes, counter_bytes)", "create_l3_l2_region(self, worker_id=0, payload_bytes=..., counter_bytes=...)"},
		{"launch(kernel, *args, pe=0, **kwargs)", "launch(self, kernel, *args, pe=0, **kwargs)"},
		{"spawn(fn, *args, **kwargs)", "spawn(self, fn, *args, **kwargs)"},
	} {
		if got := registry.PySig(c.sig); got != c.want {
			t.Errorf("PySig(%q) = %q, want %q", c.sig, got, c.want)
		}
	}
}

func TestClassName(t *testing.T) {
	for name, want := range map[string]string{"tl": "Tl", "queue.input": "QueueInput", "region_endpoint": "RegionEndpoint", "torch.distributed": "TorchDistributed"} {
		if got := registry.ClassName(name); got != want {
			t.Errorf("ClassName(%q) = %q, want %q", name, got, want)
		}
	}
}
