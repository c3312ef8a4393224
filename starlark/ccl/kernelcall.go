package ccl

// Whether a bench can call a module's kernel (target.CallProblems), for
// run, which refuses such a kernel before simulating, and starlark/check,
// which lists the problems.

import (
	"go.starlark.net/starlark"

	"kernbench/starlark/target"
)

// call is what the bench of plan p passes its kernel by keyword, as
// target's checks of a kernel's signature take it; cfgFile names the
// configuration in their problems.
func (p *plan) call(cfgFile string) target.Call {
	return target.Call{Params: p.params, Rooted: p.coll.Rooted, Collective: p.coll.Name, Extra: p.opts.Params, CfgFile: cfgFile, Items: p.opts.setItems()}
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
		problems = tgt.KeywordProblems(fn, p.call(cfgFile))
	}
	return &KernelPlan{Topology: p.topology, Params: p.params}, problems, nil
}
