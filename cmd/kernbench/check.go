package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kernbench"
	"kernbench/cmd/kernbench/internal/listflag"
	"kernbench/starlark/ccl"
	"kernbench/starlark/check"
	"kernbench/starlark/errkind"
	"kernbench/starlark/script"
	"kernbench/starlark/testrun"
)

// checkOptions are what the flags and argument of `kernbench check` say,
// as cobra parsed them; runCheck checks them (complete) and checks the
// target.
type checkOptions struct {
	Env        script.Env
	Target     string      // the algorithm, test file or MSCCL schedule
	Config     ccl.Options // run's configuration flags (addConfigFlags) and nothing else
	LoadPath   []string
	Timeout    time.Duration
	ShowMap    int
	WorldSizes string // --world-sizes as given
}

// checkFunc runs a `kernbench check` whose flags and argument are parsed
// into o.
type checkFunc func(cmd *cobra.Command, o *checkOptions, stdout, stderr io.Writer) error

func newCheckCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	return newCheckCmdWith(env, stdout, stderr, runCheck)
}

// newCheckCmdWith is the check command with run as what it runs: tests
// give their own to see the options a command line makes.
func newCheckCmdWith(env script.Env, stdout, stderr io.Writer, run checkFunc) *cobra.Command {
	o := &checkOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "check FILE.star | FILE.xml | NAME",
		Short: "Load, lint and validate an algorithm without simulating",
		Long: `Check an algorithm without running it: the file parses and resolves
(every error is listed), kernel exists with a signature the benches can call
(a bench's main(orch) or run_rank(rank, world_size, torch), one the runner can),
neighbors() builds valid maps for each world size, the machine can place
each world size, and its ccl.yaml entry fits. Its calls are read for
misspelt tl names, literal directions the topology never installs,
tl.channel beyond the channels installed and tl.spawn calls whose function
cannot take their arguments. A NAME_test.star file is checked as kernbench
test loads it (assert predeclared, @kernbench//testing.star loadable;
test_* functions take no parameters). An MSCCL .xml schedule is parsed
and validated, steps of two thread blocks that touch a chunk with
nothing ordering them are reported as races (as is a step whose source
and destination share a chunk at different places), and what each
output chunk ends holding is worked out and compared with the
collective's result (docs/msccl.md).
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
			o.Target = args[0]
			return run(cmd, o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	addConfigFlags(f, &o.Config)
	f.Lookup("world-size").Usage = "check at this number of ranks only (default: the --world-sizes)"
	addLoadPath(f, &o.LoadPath)
	f.DurationVar(&o.Timeout, "timeout", time.Minute, "wall-clock limit of the checked file's Starlark (top level, neighbors()); 0 = none")
	f.IntVar(&o.ShowMap, "show-map", 0, "print the neighbour map at this world size (at most 65536) and the links each direction crosses (pe_noc, ucie, pcie)")
	f.StringVar(&o.WorldSizes, "world-sizes", "", "world sizes to validate neighbors() for, e.g. 1-16 or 2,4,8 (default 1-16; at most 1024 sizes, each at most 65536)")
	return cmd
}

// complete checks the flags of a check and makes the options of check.Run
// they set (but its Watchdog and MapOut): every mistake in them is a
// usage error, found before anything is loaded.
func (o *checkOptions) complete(cmd *cobra.Command) (check.Options, error) {
	co := check.Options{Env: o.Env, Embedded: kernbench.Files, LoadPath: o.LoadPath, ShowMap: o.ShowMap,
		ConfigPath: o.Config.ConfigPath, Sets: o.Config.Sets, Faults: o.Config.Faults, WorldSize: o.Config.WorldSize, Topology: o.Config.Topology, Collective: o.Config.Collective}
	if o.Timeout < 0 {
		return co, usageError(fmt.Sprintf("--timeout must be >= 0 (got %v)", o.Timeout))
	}
	if err := checkLoadPath(o.Env, o.LoadPath); err != nil {
		return co, err
	}
	if err := emptyValue(cmd.Flags()); err != nil {
		return co, err
	}
	if cmd.Flags().Changed("show-map") && o.ShowMap == 0 {
		// 0 is the default, no map: given, it printed nothing.
		return co, usageError("--show-map must be >= 1 (got 0)")
	}
	if o.WorldSizes != "" {
		ws, err := listflag.WorldSizes(o.WorldSizes)
		if err != nil {
			return co, err
		}
		co.WorldSizes = ws
	}
	if cmd.Flags().Changed("world-size") && co.WorldSize < 1 {
		return co, usageError(fmt.Sprintf("--world-size must be >= 1 (got %d)", co.WorldSize))
	}
	if co.WorldSize > 0 && o.WorldSizes != "" {
		return co, usageError("--world-size checks one world size and --world-sizes several: give one of them")
	}
	if co.ShowMap < 0 {
		return co, usageError(fmt.Sprintf("--show-map must be >= 1 (got %d)", co.ShowMap))
	}
	if co.ShowMap > check.MaxWorldSize {
		return co, usageError(fmt.Sprintf("--show-map %d: over %d, the largest world size check builds a map for", co.ShowMap, check.MaxWorldSize))
	}
	if co.WorldSize > check.MaxWorldSize {
		return co, usageError(fmt.Sprintf("--world-size %d: over %d, the largest world size check builds a map for", co.WorldSize, check.MaxWorldSize))
	}
	if strings.HasSuffix(o.Target, "_test.star") {
		for _, flag := range []string{"config", "set", "world-size", "topology", "collective", "world-sizes", "show-map"} {
			if cmd.Flags().Changed(flag) {
				return co, usageError(fmt.Sprintf("--%s: %s is a test file, checked as kernbench test loads it, without a configuration; check the algorithm it tests with --%s", flag, o.Target, flag))
			}
		}
	}
	return co, nil
}

// runCheck runs `kernbench check`: it resolves the options, checks the
// target (a test file as kernbench test loads it) and renders the
// problems found.
func runCheck(cmd *cobra.Command, o *checkOptions, stdout, stderr io.Writer) error {
	co, err := o.complete(cmd)
	if err != nil {
		return usageErr(err.Error())
	}
	co.Watchdog = script.NewWatchdog(o.Timeout, "--timeout "+o.Timeout.String())
	defer co.Watchdog.Stop()
	co.MapOut = stdout
	var problems []string
	testFile := strings.HasSuffix(o.Target, "_test.star")
	n := 0 // a test file's test_* functions
	if testFile {
		// A test file is checked as kernbench test loads it: with
		// assert and @kernbench//testing.star, not as an algorithm.
		problems, n = testrun.CheckFile(o.Target, testrun.Options{Env: o.Env, Embedded: kernbench.Files, MaxSteps: 10_000_000, Timeout: o.Timeout, LoadPath: o.LoadPath})
	} else {
		problems = check.Run(o.Target, co)
	}
	for _, p := range problems {
		fmt.Fprintln(stderr, p)
	}
	switch {
	case len(problems) > 0:
		fmt.Fprintf(stderr, "%s: %d problem(s)\n", o.Target, len(problems))
		return reported(errkind.CheckFailed, "check failed")
	case testFile:
		fmt.Fprintf(stdout, "%s: ok (a test file, %d test_* function(s))\n", o.Target, n)
	default:
		fmt.Fprintf(stdout, "%s: ok\n", o.Target)
	}
	return nil
}
