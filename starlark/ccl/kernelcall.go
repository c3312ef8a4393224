package ccl

// Whether a bench can call a module's kernel: its signature and the
// keyword arguments the bench passes, in kernbench check's words. run
// refuses such a kernel before simulating; starlark/check lists them.

import (
	"fmt"
	"slices"

	"go.starlark.net/starlark"

	"kernbench/starlark/registry"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
)

// keywordProblems lists the keyword arguments the bench will pass (the
// ccl.yaml entry's params, root for broadcast and reduce) that kernel fn
// cannot take, each with a "did you mean" when a parameter is close.
func keywordProblems(fn *starlark.Function, p *plan, cfgFile string, tgt *target.Target) []string {
	if fn.HasKwargs() {
		return nil
	}
	var names []string
	for i := range fn.NumParams() {
		name, _ := fn.Param(i)
		names = append(names, name)
	}
	var out []string
	for _, kv := range p.params {
		k := string(kv[0].(starlark.String))
		if slices.Contains(names, k) {
			continue
		}
		hint := ""
		if near := registry.Closest(k, names); near != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", near)
		}
		if k == "root" && p.coll.Rooted {
			if _, fromYAML := tgt.Entry.ParamsOrNil()["root"]; !fromYAML {
				out = append(out, fmt.Sprintf("%s: kernel has no parameter \"root\", which the %s bench passes by keyword: def kernel(sendbuf, recvbuf, rank, world_size, tl, root = 0)%s", fn.Position(), p.coll.Name, hint))
				continue
			}
		}
		if slices.ContainsFunc(p.opts.Params, func(kv starlark.Tuple) bool { return kv[0] == starlark.String(k) }) {
			// run_kernel_in_mock's params=, which replaces an entry's
			// param of the name (it was blamed on the embedded ccl.yaml).
			out = append(out, fmt.Sprintf("params=: kernel (%s) has no parameter %q%s", fn.Position(), k, hint))
			continue
		}
		where := cfgFile
		if pos, ok := tgt.Entry.ParamPos(k); ok {
			// Its own line, or the --set or --vary item that gave it.
			where = target.DescribeGiven(pos, p.opts.setItems())
		} else if tgt.Entry != nil && tgt.Entry.Line > 0 {
			where = fmt.Sprintf("%s:%d", cfgFile, tgt.Entry.Line)
		}
		out = append(out, fmt.Sprintf("%s: algorithms.%s.params.%s: kernel (%s) has no parameter %q%s", where, tgt.Name, k, fn.Position(), k, hint))
	}
	return out
}

// callProblems lists why the bench of plan p cannot call kernel: its
// signature and the keyword arguments it would pass that kernel cannot
// take, in check's words. run refuses such a kernel before simulating
// (exit 2) rather than failing on every rank with Starlark's "got multiple
// values for parameter", whose position is the kernel's first statement.
func callProblems(kernel starlark.Callable, p *plan, cfgFile string, tgt *target.Target) []string {
	fn, ok := kernel.(*starlark.Function)
	if !ok {
		return nil
	}
	params := map[string]bool{}
	for _, kv := range p.params {
		params[string(kv[0].(starlark.String))] = true
	}
	var out []string
	for _, msg := range KernelSignature(fn, params) {
		out = append(out, fn.Position().String()+": "+msg)
	}
	return append(out, keywordProblems(fn, p, cfgFile, tgt)...)
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

// KernelPlan is what kernbench check needs of a run's plan: the topology
// the run uses and the params its kernel and neighbors() get.
type KernelPlan struct {
	Topology string
	Params   []starlark.Tuple
}

// PlanKernel plans the run of tgt as Run does and lists the keyword
// arguments the bench would pass that kernel fn (nil: none to check)
// cannot take; cfgFile names the configuration in those problems.
func PlanKernel(tgt *target.Target, globals starlark.StringDict, hasHook bool, opts Options, fn *starlark.Function, cfgFile string) (*KernelPlan, []string, error) {
	p, err := makePlan(tgt, globals, hasHook, opts)
	if err != nil {
		return nil, nil, err
	}
	var problems []string
	if fn != nil {
		problems = keywordProblems(fn, p, cfgFile, tgt)
	}
	return &KernelPlan{Topology: p.topology, Params: p.params}, problems, nil
}
