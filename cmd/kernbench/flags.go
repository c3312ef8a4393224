package main

import (
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
	f.IntVar(&o.WorldSize, "world-size", 0, "number of ranks (default: ccl.yaml)")
	f.StringVar(&o.Topology, "topology", "", strings.Join(topology.Names, " | "))
	f.StringVar(&o.Collective, "collective", "", strings.Join(collective.Names(), " | "))
}
