// Package lint reads an algorithm's syntax tree for the mistakes that
// would otherwise fail only at run time (kernbench check): a direction
// literal the topology never installs, a tl.channel beyond the channels
// installed, a misspelt tl name, a tl.spawn whose function cannot take its
// arguments. It runs nothing.
package lint

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench/engine/topology"
	"kernbench/starlark/registry"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

// kernbench check reads the algorithm's syntax tree for mistakes that
// would otherwise fail only at run time: a direction written as a literal
// that the topology never installs (a typo, or E_1 without channels: 2), a
// tl.channel(dir, c) beyond the channels installed, and a tl.spawn whose
// function cannot take the arguments it is given.

// directionArgs names the direction parameters of the tl builtins that
// move data (a missing direction there is always a mistake once the call
// runs; tl.peer and tl.ready may probe for a direction, as an algorithm
// that supports several topologies does): their positional indices and
// keyword names.
var directionArgs = map[string]struct {
	positions []int
	keywords  []string
}{
	"send":                  {[]int{0}, []string{"dir"}},
	"send_async":            {[]int{0}, []string{"dir"}},
	"recv":                  {[]int{0}, []string{"dir"}},
	"recv_async":            {[]int{0}, []string{"dir"}},
	"flush":                 {[]int{0}, []string{"dir"}},
	"recv_copy":             {[]int{0}, []string{"in_dir"}},
	"recv_reduce_copy":      {[]int{0}, []string{"in_dir"}},
	"recv_reduce_send":      {[]int{0, 2}, []string{"in_dir", "out_dir"}},
	"recv_copy_send":        {[]int{0, 2}, []string{"in_dir", "out_dir"}},
	"recv_reduce_copy_send": {[]int{0, 3}, []string{"in_dir", "out_dir"}},
}

// Calls returns a problem for every literal direction not in dirs (the
// union of what the topology installs on any rank at the admissible world
// sizes; nil: unknown, skip), every tl.channel beyond channels and every
// tl.spawn its function cannot accept. topo describes the topology for the
// messages.
func Calls(file string, src []byte, globals starlark.StringDict, dirs map[string]bool, channels int, topo string) []string {
	f, err := script.FileOptions().Parse(file, src, 0)
	if err != nil {
		return nil // the loader has reported it
	}
	installed := slices.Sorted(func(yield func(string) bool) {
		for d := range dirs {
			if !yield(d) {
				return
			}
		}
	})
	nested := nestedDefs(f)
	var problems []string
	report := func(pos syntax.Position, format string, args ...any) {
		problems = append(problems, pos.String()+": "+fmt.Sprintf(format, args...))
	}
	checkDir := func(call string, lit *syntax.Literal) {
		name, ok := lit.Value.(string)
		if !ok || dirs == nil || dirs[name] {
			return
		}
		hint := ""
		if base, c := topology.SplitChannel(name); c > 0 && dirs[base] {
			hint = fmt.Sprintf(" (channel %d of %s needs channels: %d or more; this run installs %d)", c, base, c+1, channels)
		} else if near := topology.NearestDirection(name, installed); near != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", near)
		}
		report(lit.TokenPos, "tl.%s: direction %q is not installed by topology %s at any world size checked%s; installed: %s",
			call, name, topo, hint, strings.Join(installed, ", "))
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if dot, ok := n.(*syntax.DotExpr); ok {
			checkTLName(dot, report)
		}
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		dot, ok := call.Fn.(*syntax.DotExpr)
		if !ok {
			return true
		}
		method := dot.Name.Name
		positional, keywords := splitArgs(call)
		if da, ok := directionArgs[method]; ok {
			for _, i := range da.positions {
				if i < len(positional) {
					if lit, ok := positional[i].(*syntax.Literal); ok {
						checkDir(method, lit)
					}
				}
			}
			for _, k := range da.keywords {
				if lit, ok := keywords[k].(*syntax.Literal); ok {
					checkDir(method, lit)
				}
			}
		}
		switch method {
		case "channel":
			if len(positional) == 2 {
				if c, ok := intLiteral(positional[1]); ok && c >= channels && dirs != nil {
					report(call.Lparen, "tl.channel(..., %d): this run installs %d channel(s) per neighbour (channels: in ccl.yaml), so channel %d does not exist", c, channels, c)
				}
			}
		case "spawn":
			if msg := spawnProblem(call, positional, keywords, globals, nested); msg != "" {
				report(call.Lparen, "tl.spawn: %s", msg)
			}
		}
		return true
	})
	return problems
}

// tlNames are the fields and methods of tl.
var tlNames = func() []string {
	var names []string
	for _, b := range tl.Builtins() {
		names = append(names, b.Name)
	}
	for _, a := range tl.Attributes() {
		names = append(names, a.Name)
	}
	return names
}()

// checkTLName reports tl.NAME where tl has no NAME: a misspelt primitive
// otherwise fails only when a rank reaches the line. Only a receiver
// spelt tl is checked, the name the benches pass it by.
func checkTLName(dot *syntax.DotExpr, report func(syntax.Position, string, ...any)) {
	id, ok := dot.X.(*syntax.Ident)
	if !ok || id.Name != "tl" || slices.Contains(tlNames, dot.Name.Name) {
		return
	}
	// The message the run would stop with when a rank reaches the line,
	// at its position: Starlark's own error points at the dot.
	report(dot.Dot, "%v", registry.NoSuchAttr("tl", dot.Name.Name, tlNames))
}

// splitArgs returns a call's positional arguments and its keyword
// arguments by name; a *args or **kwargs argument makes both unknowable
// (nil, nil).
func splitArgs(call *syntax.CallExpr) ([]syntax.Expr, map[string]syntax.Expr) {
	var positional []syntax.Expr
	keywords := map[string]syntax.Expr{}
	for _, a := range call.Args {
		switch a := a.(type) {
		case *syntax.UnaryExpr:
			if a.Op == syntax.STAR || a.Op == syntax.STARSTAR {
				return nil, nil
			}
			positional = append(positional, a)
		case *syntax.BinaryExpr:
			if a.Op == syntax.EQ {
				if id, ok := a.X.(*syntax.Ident); ok {
					keywords[id.Name] = a.Y
					continue
				}
			}
			positional = append(positional, a)
		default:
			positional = append(positional, a)
		}
	}
	return positional, keywords
}

func intLiteral(e syntax.Expr) (int, bool) {
	lit, ok := e.(*syntax.Literal)
	if !ok || lit.Token != syntax.INT {
		return 0, false
	}
	n, err := strconv.Atoi(lit.Raw)
	return n, err == nil
}

// signature is what spawnProblem needs of a function: its name, its
// named parameters in order (keyword-only ones after the positional
// ones) and which have defaults, and whether it takes *args and
// **kwargs.
type signature struct {
	name               string
	params             []string
	hasDefault         []bool
	positional         int // named parameters that take positional arguments
	varargs, kwargsToo bool
}

// functionSignature is fn's signature.
func functionSignature(fn *starlark.Function) signature {
	n, positional := script.ParamCounts(fn)
	sig := signature{name: fn.Name(), positional: positional, varargs: fn.HasVarargs(), kwargsToo: fn.HasKwargs()}
	for i := range n {
		name, _ := fn.Param(i)
		sig.params = append(sig.params, name)
		sig.hasDefault = append(sig.hasDefault, fn.ParamDefault(i) != nil)
	}
	return sig
}

// defSignature is the signature of a def statement (a function defined
// inside another, which the module's globals do not hold).
func defSignature(d *syntax.DefStmt) signature {
	sig := signature{name: d.Name.Name, positional: -1}
	for _, p := range d.Params {
		switch p := p.(type) {
		case *syntax.Ident:
			sig.params = append(sig.params, p.Name)
			sig.hasDefault = append(sig.hasDefault, false)
		case *syntax.BinaryExpr: // name = default
			if id, ok := p.X.(*syntax.Ident); ok {
				sig.params = append(sig.params, id.Name)
				sig.hasDefault = append(sig.hasDefault, true)
			}
		case *syntax.UnaryExpr:
			switch {
			case p.Op == syntax.STARSTAR:
				sig.kwargsToo = true
			case p.X != nil: // *args
				sig.varargs = true
				fallthrough
			default: // a bare *: keyword-only parameters follow
				if sig.positional < 0 {
					sig.positional = len(sig.params)
				}
			}
		}
	}
	if sig.positional < 0 {
		sig.positional = len(sig.params)
	}
	return sig
}

// nestedDefs are the functions defined inside other functions of f, by
// name, where a name is defined once in the file (nil for a name defined
// several times, at any depth: which one a call means depends on scope).
func nestedDefs(f *syntax.File) map[string]*syntax.DefStmt {
	defs := map[string]*syntax.DefStmt{}
	count := map[string]int{}
	depth := 0
	var walk func(n syntax.Node) bool
	walk = func(n syntax.Node) bool {
		d, ok := n.(*syntax.DefStmt)
		if !ok {
			return true
		}
		count[d.Name.Name]++
		if depth > 0 {
			defs[d.Name.Name] = d
		}
		depth++
		for _, st := range d.Body {
			syntax.Walk(st, walk)
		}
		depth--
		return false
	}
	syntax.Walk(f, walk)
	for name := range defs {
		if count[name] > 1 {
			defs[name] = nil
		}
	}
	return defs
}

// spawnProblem says why tl.spawn(fn, args..., kw...) cannot call fn, a
// global function of the file or a function defined once inside another,
// as fn(tl, args..., kw...); "" when it can or when fn is neither.
func spawnProblem(call *syntax.CallExpr, positional []syntax.Expr, keywords map[string]syntax.Expr, globals starlark.StringDict, nested map[string]*syntax.DefStmt) string {
	if positional == nil && keywords == nil {
		return "" // *args / **kwargs: not knowable here
	}
	if len(positional) == 0 {
		return "want the function to run first: tl.spawn(fn, *args, **kwargs)"
	}
	id, ok := positional[0].(*syntax.Ident)
	if !ok {
		return ""
	}
	var sig signature
	if fn, ok := globals[id.Name].(*starlark.Function); ok {
		if _, inner := nested[id.Name]; inner {
			return "" // also defined inside a function: which one is meant depends on scope
		}
		sig = functionSignature(fn)
	} else if d := nested[id.Name]; d != nil && globals[id.Name] == nil {
		sig = defSignature(d)
	} else {
		return ""
	}
	given := len(positional) // tl plus the arguments after fn
	if given > sig.positional && !sig.varargs {
		return fmt.Sprintf("%s takes %d positional parameter(s) (tl first), it would get %d (tl and %d more)", sig.name, sig.positional, given, given-1)
	}
	bound := map[string]bool{}
	for i, name := range sig.params {
		if i < given && i < sig.positional {
			bound[name] = true
		}
	}
	for k := range keywords {
		if !slices.Contains(sig.params, k) && !sig.kwargsToo {
			return fmt.Sprintf("%s has no parameter %q", sig.name, k)
		}
		bound[k] = true
	}
	for i, name := range sig.params {
		if !bound[name] && !sig.hasDefault[i] {
			if i == 0 {
				return fmt.Sprintf("%s must take tl as its first parameter", sig.name)
			}
			return fmt.Sprintf("%s's parameter %q gets no value (the thread runs %s(tl, ...) with the arguments after the function)", sig.name, name, sig.name)
		}
	}
	return ""
}
