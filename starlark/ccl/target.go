package ccl

// A run's target through starlark/target: its configuration and what of
// its options target.Given needs.

import (
	"kernbench/engine/config"
	"kernbench/starlark/errkind"
	"kernbench/starlark/mscclio"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
	"kernbench/starlark/wiring"
)

// loadConfig is LoadConfig of opts' configuration with its --set and
// --vary items.
func (o Options) loadConfig() (*config.Config, string, error) {
	return target.LoadConfigWithFaults(o.Env, o.ConfigPath, o.given().AllSets(), o.Faults, o.Embedded)
}

// Resolve checks, without running anything, that `kernbench run arg`
// with opts' configuration (--config, --set, --vary) names something to
// run: the configuration loads and arg is an algorithm of it, a file, or
// an MSCCL schedule that parses; and that no --set or --vary item is
// one that cannot take effect in the run (target.Ineffective). A comparison
// resolves every variant first, so that a misspelt name or a bad --vary
// value is reported before the variants ahead of it have spent their
// simulation time.
//
// It returns the ccl.yaml algorithm arg names or whose module it is ("" for
// none). With check false it only resolves (a comparison first learns
// which algorithms its variants run, to set Options.Compared).
func Resolve(arg string, opts Options, check bool) (algorithm string, err error) {
	cfg, cfgDir, err := opts.loadConfig()
	if err != nil {
		return "", err
	}
	if IsMSCCL(arg) {
		a, err := loadMSCCL(arg, script.Source{Env: opts.Env, Embedded: opts.Embedded, Overlay: map[string][]byte{mscclio.RunnerName: mscclio.Runner}})
		if err != nil || !check {
			return "", err
		}
		return "", target.Ineffective(cfg, mscclRun(arg, a), opts.given())
	}
	tgt, err := target.Resolve(arg, cfg, cfgDir, script.Source{Env: opts.Env, Embedded: opts.Embedded})
	if err != nil || !check {
		return tgt.NameOrEmpty(), err
	}
	// A fault the machine has no resource for fails every variant of a
	// comparison alike: said once, before anything runs.
	if err := wiring.CheckFaults(cfg.System, wiring.MachineParams(cfg.System, tgt.Settings)); err != nil {
		return tgt.Name, report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	return tgt.Name, target.Ineffective(cfg, tgt.RunOf(false), opts.given())
}

// kernelKey is the thread-local under which a rank's thread keeps its
// tl.Kernel.
const kernelKey = "kernbench.kernel"

// given is what of o decides whether its --set and --vary items take
// effect (target.Given).
func (o Options) given() target.Given {
	collective := o.Collective
	if o.CollectiveOf != "" {
		// Not --collective: a tune's collective, which an entry's
		// collective: (the same, or refused as another's) does not fight.
		collective = ""
	}
	return target.Given{Sets: o.Sets, Vary: o.Vary, Keywords: o.Keywords, WorldSize: o.WorldSize, Topology: o.Topology,
		Collective: collective, Root: o.Root, RootGiven: o.RootGiven, Compared: o.Compared}
}

// setItems are o's --set items then its --vary items, in the order they
// are applied.
func (o Options) setItems() []target.SetItem { return o.given().Items() }
