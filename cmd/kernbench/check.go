package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kernbench"
	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
	"kernbench/starlark/script"
	"kernbench/starlark/testrun"
)

func newCheckCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	o := ccl.CheckOptions{Env: env, Embedded: kernbench.Files}
	var sizes string
	var timeout time.Duration
	var sel ccl.Options // the configuration flags, shared with run
	cmd := &cobra.Command{
		Use:   "check FILE.star | FILE.xml | NAME",
		Short: "Load, lint and validate an algorithm without simulating",
		Long: `Check an algorithm without running it: the file parses and resolves
(every error is listed), kernel exists with a signature the benches can call,
neighbors() builds valid maps for each world size, the machine can place
each world size, and its ccl.yaml entry fits. Its calls are read for
misspelt tl names, literal directions the topology never installs,
tl.channel beyond the channels installed and tl.spawn calls whose function
cannot take their arguments. A NAME_test.star file is checked as kernbench
test loads it (assert predeclared, @kernbench//testing.star loadable;
test_* functions take no parameters). An MSCCL .xml schedule is parsed
and validated (docs/msccl.md).
--config, --set, --world-size, --topology and --collective are run's: the
algorithm is checked as kernbench run with them would run it.
Exit status 0 when clean, 2 with file:line:col for every problem.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				// A shell pattern (algorithms/*.star) gives several.
				return fmt.Errorf("check takes one algorithm or file, got %d: check each in turn, as for f in %s; do kernbench check \"$f\"; done", len(args), strings.Join(args, " "))
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return usageErr(stderr, false, fmt.Sprintf("--timeout must be >= 0 (got %v)", timeout))
			}
			if err := checkLoadPath(env, o.LoadPath); err != nil {
				return usageErr(stderr, false, err.Error())
			}
			if err := emptyValue(cmd.Flags()); err != nil {
				return usageErr(stderr, false, err.Error())
			}
			if cmd.Flags().Changed("show-map") && o.ShowMap == 0 {
				// 0 is the default, no map: given, it printed nothing.
				return usageErr(stderr, false, "--show-map must be >= 1 (got 0)")
			}
			o.Watchdog = script.NewWatchdog(timeout, "--timeout "+timeout.String())
			defer o.Watchdog.Stop()
			if sizes != "" {
				ws, err := parseSizes(sizes)
				if err != nil {
					return usageErr(stderr, false, err.Error())
				}
				o.WorldSizes = ws
			}
			o.ConfigPath, o.Sets, o.Faults, o.WorldSize, o.Topology, o.Collective = sel.ConfigPath, sel.Sets, sel.Faults, sel.WorldSize, sel.Topology, sel.Collective
			if cmd.Flags().Changed("world-size") && o.WorldSize < 1 {
				return usageErr(stderr, false, fmt.Sprintf("--world-size must be >= 1 (got %d)", o.WorldSize))
			}
			if o.WorldSize > 0 && sizes != "" {
				return usageErr(stderr, false, "--world-size checks one world size and --world-sizes several: give one of them")
			}
			if o.ShowMap < 0 {
				return usageErr(stderr, false, fmt.Sprintf("--show-map must be >= 1 (got %d)", o.ShowMap))
			}
			if o.ShowMap > ccl.MaxCheckWorldSize {
				return usageErr(stderr, false, fmt.Sprintf("--show-map %d: over %d, the largest world size check builds a map for", o.ShowMap, ccl.MaxCheckWorldSize))
			}
			if o.WorldSize > ccl.MaxCheckWorldSize {
				return usageErr(stderr, false, fmt.Sprintf("--world-size %d: over %d, the largest world size check builds a map for", o.WorldSize, ccl.MaxCheckWorldSize))
			}
			o.MapOut = stdout
			var problems []string
			if strings.HasSuffix(args[0], "_test.star") {
				for _, flag := range []string{"config", "set", "world-size", "topology", "collective", "world-sizes", "show-map"} {
					if cmd.Flags().Changed(flag) {
						return usageErr(stderr, false, fmt.Sprintf("--%s: %s is a test file, checked as kernbench test loads it, without a configuration; check the algorithm it tests with --%s", flag, args[0], flag))
					}
				}
				// A test file is checked as kernbench test loads it: with
				// assert and @kernbench//testing.star, not as an algorithm.
				var n int
				problems, n = testrun.CheckFile(args[0], testrun.Options{Env: env, Embedded: kernbench.Files, MaxSteps: 10_000_000, Timeout: timeout, LoadPath: o.LoadPath})
				if len(problems) == 0 {
					fmt.Fprintf(stdout, "%s: ok (a test file, %d test_* function(s))\n", args[0], n)
					return nil
				}
			} else {
				problems = ccl.Check(args[0], o)
			}
			for _, p := range problems {
				fmt.Fprintln(stderr, p)
			}
			if len(problems) > 0 {
				fmt.Fprintf(stderr, "%s: %d problem(s)\n", args[0], len(problems))
				return reported(errkind.CheckFailed, "check failed")
			}
			fmt.Fprintf(stdout, "%s: ok\n", args[0])
			return nil
		},
	}
	addConfigFlags(cmd.Flags(), &sel)
	cmd.Flags().Lookup("world-size").Usage = "check at this number of ranks only (default: the --world-sizes)"
	addLoadPath(cmd.Flags(), &o.LoadPath)
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "wall-clock limit of the checked file's Starlark (top level, neighbors()); 0 = none")
	cmd.Flags().IntVar(&o.ShowMap, "show-map", 0, "print the neighbour map at this world size (at most 65536) and the links each direction crosses (pe_noc, ucie, pcie)")
	cmd.Flags().StringVar(&sizes, "world-sizes", "", "world sizes to validate neighbors() for, e.g. 1-16 or 2,4,8 (default 1-16; at most 1024 sizes, each at most 65536)")
	return cmd
}

// parseSizes reads "1-16" or "2,4,8": at most ccl.MaxCheckSizes sizes,
// each at most ccl.MaxCheckWorldSize (an end of 2^63-1 used to wrap the
// loop below and fill the memory).
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 1 {
			return nil, fmt.Errorf("--world-sizes %q: want sizes like 1-16 or 2,4,8", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, fmt.Errorf("--world-sizes %q: want sizes like 1-16 or 2,4,8", s)
			}
		}
		if b > ccl.MaxCheckWorldSize {
			return nil, fmt.Errorf("--world-sizes %q: world size %d is over %d, the largest check builds a map for", s, b, ccl.MaxCheckWorldSize)
		}
		if len(out)+(b-a+1) > ccl.MaxCheckSizes {
			return nil, fmt.Errorf("--world-sizes %q: more than %d sizes; check fewer at a time", s, ccl.MaxCheckSizes)
		}
		for w := a; w <= b; w++ {
			out = append(out, w)
		}
	}
	return out, nil
}
