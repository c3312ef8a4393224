// Package registry is the one way kernbench registers Starlark builtins,
// in go.starlark.net's style (its library.go): every Starlark value type
// with attributes has a method table (name, signature, doc, function) and
// a field table; each method is one shared *starlark.Builtin, created once,
// which a value's Attr binds to the value with BindReceiver. The generated
// reference and the editor stubs are rendered from the same tables
// (Receivers), so nothing a script can call is missing from them.
package registry

import (
	"fmt"
	"reflect"
	"sort"

	"go.starlark.net/starlark"
)

// Method documents and implements one method of receiver type R.
type Method[R starlark.Value] struct {
	Name string // e.g. "send" (called as tl.send)
	Sig  string // Python-style signature without the receiver, for docs and stubs
	Doc  string
	Fn   func(recv R, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error)
}

// Field documents one value attribute of receiver type R.
type Field[R starlark.Value] struct {
	Name, Type, Doc string
	// Get computes the attribute; nil for one the value holds itself (the
	// table then only documents it).
	Get func(recv R) starlark.Value
}

// Entry is the documentation of one member, whatever its receiver type.
type Entry struct {
	Name string
	Sig  string // a method's signature; "" for a field
	Type string // a field's type
	Doc  string
}

// IsMethod reports whether the entry is a method (it has a signature).
func (e Entry) IsMethod() bool { return e.Sig != "" }

// Receiver is the documentation view of a table, for the reference, the
// stubs and the test that every registered member appears in both.
type Receiver interface {
	// Name is the receiver as scripts and the docs name it ("tl", "Ptr",
	// "region", "torch"); "" for a table of predeclared functions, which
	// are called unbound.
	Name() string
	// GoType is the Go type of its values ("*tl.Kernel").
	GoType() string
	Fields() []Entry
	Methods() []Entry
}

// Table is the registration of one receiver's members.
type Table[R starlark.Value] struct {
	name   string
	fields []Field[R]
	meths  []Method[R]

	index map[string]member[R]
	names []string
}

// member is what Attr finds under a name: a method's shared builtin, or a
// field's getter (both nil for a field the value holds itself).
type member[R starlark.Value] struct {
	builtin *starlark.Builtin
	get     func(R) starlark.Value
}

// New registers the members of receiver name. Each method becomes one
// shared builtin named prefix+Name (prefix "tl." makes tl.send's errors
// read "tl.send: …"). New panics on a name registered twice: that is a
// programming error found by any test that loads the package.
func New[R starlark.Value](name, prefix string, fields []Field[R], methods []Method[R]) *Table[R] {
	t := &Table[R]{name: name, fields: fields, meths: methods,
		index: make(map[string]member[R], len(fields)+len(methods))}
	add := func(n string, m member[R]) {
		if _, dup := t.index[n]; dup {
			panic(fmt.Sprintf("registry: %s.%s is registered twice", name, n))
		}
		t.index[n] = m
		t.names = append(t.names, n)
	}
	for _, f := range fields {
		add(f.Name, member[R]{get: f.Get})
	}
	for _, m := range methods {
		fn := m.Fn
		add(m.Name, member[R]{builtin: starlark.NewBuiltin(prefix+m.Name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			recv, _ := b.Receiver().(R) // the zero R for a predeclared function
			return fn(recv, th, b, args, kw)
		})})
	}
	sort.Strings(t.names)
	all = append(all, t)
	return t
}

// Builtin is the shared, unbound builtin of method name (nil if none).
func (t *Table[R]) Builtin(name string) *starlark.Builtin { return t.index[name].builtin }

// Attr is recv's attribute name: a computed field, or the method bound to
// recv; nil, nil when the table has neither (Starlark then reports the
// missing attribute), also for a documented field the value holds itself.
func (t *Table[R]) Attr(recv R, name string) (starlark.Value, error) {
	m := t.index[name]
	switch {
	case m.builtin != nil:
		return m.builtin.BindReceiver(recv), nil
	case m.get != nil:
		return m.get(recv), nil
	}
	return nil, nil
}

// AttrNames are the registered member names, sorted (a fresh slice).
func (t *Table[R]) AttrNames() []string { return append([]string(nil), t.names...) }

// Has reports whether name is a registered member.
func (t *Table[R]) Has(name string) bool {
	_, ok := t.index[name]
	return ok
}

// MethodList is the registered methods, in table order.
func (t *Table[R]) MethodList() []Method[R] { return t.meths }

func (t *Table[R]) Name() string   { return t.name }
func (t *Table[R]) GoType() string { return reflect.TypeFor[R]().String() }

func (t *Table[R]) Fields() []Entry {
	out := make([]Entry, len(t.fields))
	for i, f := range t.fields {
		out[i] = Entry{Name: f.Name, Type: f.Type, Doc: f.Doc}
	}
	return out
}

func (t *Table[R]) Methods() []Entry {
	out := make([]Entry, len(t.meths))
	for i, m := range t.meths {
		out[i] = Entry{Name: m.Name, Sig: m.Sig, Doc: m.Doc}
	}
	return out
}

// all is every table made so far, in creation order.
var all []Receiver

// Receivers lists every registered table, in creation order (package
// initialisation order: deterministic for one binary).
func Receivers() []Receiver { return append([]Receiver(nil), all...) }
