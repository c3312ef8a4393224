// Package flagcompat answers the flags users bring from other tools and
// the ones they mistype, its one job: nccl-tests' flags given to run
// (said kernbench's way), go test's single-dash -run, -timeout and -v
// given to test, a duration without a unit, and a long flag within two
// edits of one the command has.
package flagcompat

import (
	"errors"
	"kernbench/starlark/registry"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ncclTestsFlags answers the nccl-tests flags kernbench run does not
// have (its users type them first) with kernbench's way of saying the
// same: shorthands by letter, long flags by name.
var ncclTestsFlags = func() map[string]string {
	ranks := "nccl-tests' -g/-t: the number of ranks is --world-size N"
	dtype := "nccl-tests' -d: use --dtype f32, f16, bf16, f64, i32, i64 or u8"
	op := "nccl-tests' -o/--op: use --redop sum, prod, max, min or avg"
	iters := "nccl-tests' -n/-w: the simulation is deterministic, one run per size needs no iterations or warm-up"
	step := "nccl-tests' -i/--stepbytes: kernbench steps by a factor only, -f"
	return map[string]string{
		"g": ranks, "t": ranks, "ngpus": ranks, "nthreads": ranks,
		"d": dtype, "datatype": dtype,
		"o": op, "op": op,
		"n": iters, "w": iters, "iters": iters, "warmup_iters": iters,
		"i": step, "stepbytes": step,
		"c": "nccl-tests' -c: results are always checked; --verify-data=false skips the check",
		"r": "nccl-tests' -r: use --root N",
	}
}()

// Hint is " (did you mean --shard?)" when err is an unknown long
// flag within two edits of one of cmd's flags, " (nccl-tests' -d: use
// --dtype …)" for an nccl-tests flag given to run, what a duration looks
// like for a bad one, else "".
func Hint(cmd *cobra.Command, err error) string {
	if invalid := (*pflag.InvalidValueError)(nil); errors.As(err, &invalid) && invalid.GetFlag().Value.Type() == "duration" {
		return " (a duration has a unit: 30s, 10m, 1h)"
	}
	var unknown *pflag.NotExistError
	if !errors.As(err, &unknown) || unknown.GetSpecifiedName() == "" {
		return ""
	}
	if hint, ok := ncclTestsFlags[unknown.GetSpecifiedName()]; ok && cmd.Name() == "run" {
		return " (" + hint + ")"
	}
	// A one-letter name is within two edits of every short flag name
	// (-t would get --dot): no guess for shorthands.
	if unknown.GetSpecifiedShortnames() != "" {
		return ""
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if n := registry.Closest(unknown.GetSpecifiedName(), names); n != "" {
		return " (did you mean --" + n + "?)"
	}
	return ""
}

// GoTest lets `kernbench test` take go test's single-dash -run,
// -timeout and -v spellings (pflag reads "-run" as three shorthand flags).
func GoTest(args []string) []string {
	if len(args) == 0 || args[0] != "test" {
		return args
	}
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == "-run" || strings.HasPrefix(a, "-run=") || a == "-timeout" || strings.HasPrefix(a, "-timeout=") {
			out[i] = "-" + a
		}
	}
	return out
}
