package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"kernbench/engine/collective"
	"kernbench/engine/topology"
	"kernbench/starlark/ccl"
)

// addConfigFlags defines the flags that choose the configuration and what
// of it an algorithm runs with, into o: run and check take the same ones,
// so that check validates the algorithm as run would run it.
func addConfigFlags(f *pflag.FlagSet, o *ccl.Options) {
	f.StringVar(&o.ConfigPath, "config", "", "ccl.yaml laid over the embedded default (default ./ccl.yaml if present)")
	f.StringArrayVar(&o.Sets, "set", nil, "override a ccl.yaml value: key.path=value (repeatable)")
	f.StringArrayVar(&o.Faults, "fault", nil, "add a fault: link=NAME with bandwidth_factor, latency_ns, jitter_ns and seed, stop_at_ns; or pe=INDEX with slowdown, stop_at_ns (key=value,...; repeatable; see docs/faults.md)")
	f.IntVar(&o.WorldSize, "world-size", 0, "number of ranks (default: ccl.yaml)")
	f.StringVar(&o.Topology, "topology", "", strings.Join(topology.Names(), " | "))
	f.StringVar(&o.Collective, "collective", "", strings.Join(collective.Names(), " | "))
}

// addThreads defines --threads into threads (0 when not given: the
// cores available, runtime.GOMAXPROCS).
func addThreads(f *pflag.FlagSet, threads *int) {
	f.IntVar(threads, "threads", 0, "simulate a machine of several SIPs on up to N threads, one SIP each at most (default: the cores available); the output is the same for every N (see docs/architecture.md)")
}

// emptyValue refuses a string flag given as "" (--bytes "", --config ""):
// read as not given it ran with the default the user meant to replace,
// such as 1M bytes or ./ccl.yaml. The flags in allowed take "" as a value
// (test --run "" matches every test).
func emptyValue(flags *pflag.FlagSet, allowed ...string) error {
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		if err != nil || !f.Changed || f.Value.Type() != "string" || f.Value.String() != "" || slices.Contains(allowed, f.Name) {
			return
		}
		err = fmt.Errorf("--%s: an empty value; give one, or leave --%s out for its default", f.Name, f.Name)
	})
	return err
}
