package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// outputPaths maps each output flag of run to its value ("" when not
// given).
func (o *runOptions) outputPaths() map[string]string {
	return map[string]string{"--oplog": o.oplog, "--trace": o.trace, "--cpuprofile": o.cpuprofile, "--dot": o.dot,
		"--csv": o.csv, "--plot": o.plot, "--export-msccl": o.export}
}

// emptyOutput refuses an output flag given an empty value (--trace ""):
// ignoring it would run without the file the user asked for.
func emptyOutput(flags *pflag.FlagSet, paths map[string]string) error {
	for _, flag := range slices.Sorted(maps.Keys(paths)) {
		if paths[flag] == "" && flags.Changed(strings.TrimPrefix(flag, "--")) {
			return fmt.Errorf("%s: an empty file name; give a file, or - for stdout", flag)
		}
	}
	return nil
}
