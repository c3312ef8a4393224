package target

// A target's entry points and the keyword arguments its ccl.yaml entry
// gives them.

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/starlark/registry"
	"kernbench/starlark/script"
)

// BenchFile is the path of a named bench in benches/; a name that is a
// path already (it has a folder or ends in .star) is used as given, so an
// absolute path is not turned into benches/ABS.star.
func BenchFile(name string) string {
	if strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) || strings.HasSuffix(name, ".star") {
		return name
	}
	return filepath.Join("benches", name+".star")
}

// BenchSignature lists why the runner could not call fn, a bench's entry
// point name, with the positional arguments args alone: main(orch) of an
// L3 bench, run_rank(rank, world_size, torch) of a host bench. It is
// empty when the call fits.
func BenchSignature(fn *starlark.Function, name string, args ...string) []string {
	var out []string
	call := fmt.Sprintf("def %s(%s)", name, strings.Join(args, ", "))
	n, positional := script.ParamCounts(fn)
	if positional < len(args) && !fn.HasVarargs() {
		out = append(out, fmt.Sprintf("%s takes %d positional parameter(s); the runner passes %d (%s)", name, positional, len(args), call))
	}
	for i := len(args); i < n; i++ {
		if fn.ParamDefault(i) == nil {
			p, _ := fn.Param(i)
			out = append(out, fmt.Sprintf("%s parameter %q has no default; the runner passes only %s (%s)", name, p, strings.Join(args, ", "), call))
		}
	}
	return out
}

// KernelSignature lists why the benches could not call fn as
// kernel(sendbuf, recvbuf, rank, world_size, tl=tl, **params).
func KernelSignature(fn *starlark.Function, params map[string]bool) []string {
	var out []string
	n, positional := script.ParamCounts(fn)
	if positional < 4 && !fn.HasVarargs() {
		out = append(out, fmt.Sprintf("kernel takes %d positional parameter(s); the benches pass 4 (sendbuf, recvbuf, rank, world_size)", positional))
	}
	hasTL := false
	for i := 0; i < n; i++ {
		name, _ := fn.Param(i)
		if name == "tl" {
			hasTL = true
			if i < 4 && i < positional {
				out = append(out, fmt.Sprintf("kernel's parameter %d is tl, but the benches pass (sendbuf, recvbuf, rank, world_size) positionally and tl by keyword", i+1))
			}
			continue
		}
		if i >= 4 && fn.ParamDefault(i) == nil && !params[name] {
			out = append(out, fmt.Sprintf("kernel parameter %q has no default and no ccl.yaml params entry supplies it", name))
		}
	}
	if !hasTL && !fn.HasKwargs() {
		out = append(out, "kernel has no tl parameter (it is passed by keyword: def kernel(sendbuf, recvbuf, rank, world_size, tl))")
	}
	return out
}

// Params are the params of t's ccl.yaml entry (none without one) as
// keyword arguments in name order, but for those named in skip.
func (t *Target) Params(skip ...string) ([]starlark.Tuple, error) {
	if t.Entry == nil {
		return nil, nil
	}
	keys := make([]string, 0, len(t.Entry.Params))
	for k := range t.Entry.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []starlark.Tuple
	for _, k := range keys {
		v, err := toStarlark(t.Entry.Params[k])
		if err != nil {
			return nil, fmt.Errorf("%s: algorithms.%s.params.%s: %w", t.Settings.Algorithm, t.Name, k, err)
		}
		if slices.Contains(skip, k) {
			continue
		}
		out = append(out, starlark.Tuple{starlark.String(k), v})
	}
	return out, nil
}

func toStarlark(v any) (starlark.Value, error) {
	switch v := v.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(v), nil
	case int64:
		return starlark.MakeInt64(v), nil
	case int:
		return starlark.MakeInt(v), nil
	case float64:
		return starlark.Float(v), nil
	case string:
		return starlark.String(v), nil
	case []any:
		out := make([]starlark.Value, len(v))
		for i, x := range v {
			sv, err := toStarlark(x)
			if err != nil {
				return nil, err
			}
			out[i] = sv
		}
		return starlark.NewList(out), nil
	case map[string]any:
		d := starlark.NewDict(len(v))
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sv, err := toStarlark(v[k])
			if err != nil {
				return nil, err
			}
			_ = d.SetKey(starlark.String(k), sv)
		}
		return d, nil
	}
	return nil, fmt.Errorf("unsupported value %v (%T)", v, v)
}

// Call is what a bench passes a kernel by keyword (but tl).
type Call struct {
	Params     []starlark.Tuple // the keyword arguments: the entry's params, root
	Rooted     bool             // the collective has a root, passed as root=
	Collective string
	Extra      []starlark.Tuple // run_kernel_in_mock's params=, among Params
	CfgFile    string           // the configuration, as problems name it
	Items      []SetItem        // the --set and --vary items, in order
}

// KeywordProblems lists the keyword arguments the bench will pass (the
// ccl.yaml entry's params, root for broadcast and reduce) that kernel fn
// cannot take, each with a "did you mean" when a parameter is close.
func (t *Target) KeywordProblems(fn *starlark.Function, c Call) []string {
	if fn.HasKwargs() {
		return nil
	}
	var names []string
	for i := range fn.NumParams() {
		name, _ := fn.Param(i)
		names = append(names, name)
	}
	var out []string
	for _, kv := range c.Params {
		k := string(kv[0].(starlark.String))
		if slices.Contains(names, k) {
			continue
		}
		hint := ""
		if near := registry.Closest(k, names); near != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", near)
		}
		if k == "root" && c.Rooted {
			if _, fromYAML := t.Entry.ParamsOrNil()["root"]; !fromYAML {
				out = append(out, fmt.Sprintf("%s: kernel has no parameter \"root\", which the %s bench passes by keyword: def kernel(sendbuf, recvbuf, rank, world_size, tl, root = 0)%s", fn.Position(), c.Collective, hint))
				continue
			}
		}
		if slices.ContainsFunc(c.Extra, func(kv starlark.Tuple) bool { return kv[0] == starlark.String(k) }) {
			// run_kernel_in_mock's params=, which replaces an entry's
			// param of the name (it was blamed on the embedded ccl.yaml).
			out = append(out, fmt.Sprintf("params=: kernel (%s) has no parameter %q%s", fn.Position(), k, hint))
			continue
		}
		where := c.CfgFile
		if pos, ok := t.Entry.ParamPos(k); ok {
			// Its own line, or the --set or --vary item that gave it.
			where = DescribeGiven(pos, c.Items)
		} else if t.Entry != nil && t.Entry.Line > 0 {
			where = fmt.Sprintf("%s:%d", c.CfgFile, t.Entry.Line)
		}
		out = append(out, fmt.Sprintf("%s: algorithms.%s.params.%s: kernel (%s) has no parameter %q%s", where, t.Name, k, fn.Position(), k, hint))
	}
	return out
}

// CallProblems lists why a bench passing c cannot call kernel: its
// signature and the keyword arguments it would pass that kernel cannot
// take, in check's words. run refuses such a kernel before simulating
// (exit 2) rather than failing on every rank with Starlark's "got multiple
// values for parameter", whose position is the kernel's first statement.
func (t *Target) CallProblems(kernel starlark.Callable, c Call) []string {
	fn, ok := kernel.(*starlark.Function)
	if !ok {
		return nil
	}
	params := map[string]bool{}
	for _, kv := range c.Params {
		params[string(kv[0].(starlark.String))] = true
	}
	var out []string
	for _, msg := range KernelSignature(fn, params) {
		out = append(out, fn.Position().String()+": "+msg)
	}
	return append(out, t.KeywordProblems(fn, c)...)
}
