// Package flagcompat answers the flags users bring from other tools and
// the ones they mistype, its one job: nccl-tests' flags given to run
// (said kernbench's way), go test's single-dash -run, -timeout and -v
// given to test, a duration without a unit, and a long flag within two
// edits of one the command has.
package flagcompat

import (
	"errors"
	"fmt"
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
	launch := "nccl-tests' -z/-y/-G/-p/-R/-D/-V: how the host launches NCCL; kernbench launches kernel() on every simulated rank itself, drop the flag"
	aggregate := "nccl-tests' -m/--agg_iters: each size is one collective, simulated once; there is nothing to aggregate"
	cycles := "nccl-tests' -N/--run_cycles: a run is deterministic, a second cycle prints the same table"
	average := "nccl-tests' -a/--average: one simulation covers every rank, time(us) is until the last rank returns; nothing to average"
	cputime := "nccl-tests' -C/--report_cputime: time(us) is simulated time; -v splits it into send, recv and memory per rank"
	output := "nccl-tests' -J/--output_file: use --json or --jsonl (stdout), or --csv FILE"
	return map[string]string{
		"z": launch, "blocking": launch, "y": launch, "stream_null": launch,
		"G": launch, "cudagraph": launch, "p": launch, "parallel_init": launch,
		"R": launch, "local_register": launch, "D": launch, "device_implementation": launch,
		"V": launch, "device_cta_count": launch,
		"m": aggregate, "agg_iters": aggregate,
		"N": cycles, "run_cycles": cycles,
		"a": average, "average": average,
		"C": cputime, "report_cputime": cputime,
		"J": output, "output_file": output,
		"T": "nccl-tests' -T/--timeout: use --timeout with a unit (--timeout 30s, wall clock) or --max-steps N",
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
	if invalid := (*pflag.InvalidValueError)(nil); errors.As(err, &invalid) {
		switch f := invalid.GetFlag(); {
		case f.Value.Type() == "duration":
			return " (a duration has a unit: 30s, 10m, 1h)"
		case f.Name == "root" && cmd.Name() == "run":
			// nccl-tests' -r takes a rank or all (every root in turn).
			return " (--root takes one rank, 0 to world_size-1; nccl-tests' -r all has no counterpart: run once per root)"
		case strings.HasPrefix(f.Value.Type(), "int") || strings.HasPrefix(f.Value.Type(), "uint"):
			return " (--" + f.Name + " takes a whole number)"
		}
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

// CheckValue is the usage error of `run … --check 1` (or 0), nccl-tests'
// -c/--check result check, whose value pflag leaves among the algorithm
// names once --check (a boolean) is set; "" when there is none. check is
// whether --check was given, args the command's arguments.
func CheckValue(check bool, args []string) string {
	if !check {
		return ""
	}
	for _, a := range args {
		if a == "0" || a == "1" {
			return fmt.Sprintf("--check %s: nccl-tests' -c/--check checks results, which kernbench does in every run (--verify-data=false skips it); "+
				"kernbench's --check re-verifies every queue pair's pointer invariants after each delivery (slow) and takes no value after a space: drop both, or give --check alone", a)
		}
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
