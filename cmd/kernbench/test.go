package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kernbench"
	"kernbench/cmd/kernbench/internal/render"
	"kernbench/cmd/kernbench/internal/testreport"
	"kernbench/engine/config"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/script"
	"kernbench/starlark/testrun"
)

// testOptions are what the flags and arguments of `kernbench test` say,
// as cobra parsed them; runTest checks them (complete) and runs.
type testOptions struct {
	Env       script.Env
	Paths     []string // the files and folders to look for tests in
	Run       string   // --run: a regular expression of test names
	Verbose   bool
	JSON      bool
	Builtin   bool
	Timeout   time.Duration
	LoadPath  []string
	MaxMemory string
	MaxSteps  uint64
}

// testFunc runs a `kernbench test` whose flags and arguments are parsed
// into o.
type testFunc func(cmd *cobra.Command, o *testOptions, stdout, stderr io.Writer) error

func newTestCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	return newTestCmdWith(env, stdout, stderr, runTest)
}

// newTestCmdWith is the test command with run as what it runs: tests give
// their own to see the options a command line makes, without running any
// test.
func newTestCmdWith(env script.Env, stdout, stderr io.Writer, run testFunc) *cobra.Command {
	o := &testOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "test [PATH...]",
		Short: "Run *_test.star files (test_* functions) in the mock runtime",
		Long: `Find *_test.star files under the given files or folders (default: the
working directory), run every top-level test_* function with assert
predeclared and @kernbench//testing.star (run_kernel_in_mock) loadable, and
print go-test-like results ending in "N passed, N failed".

Each test file has -timeout (default 10m, like go test) of wall-clock time;
at the limit its running test and the rest of the file stop. A test that
runs longer than 10s is reported on stderr every 10s.

Host memory is bounded as in kernbench run (--max-memory, default 80% of
the machine's memory, cgroup limit included): a mock run or run_l3 estimated over it fails its
test; one that passes it while simulating stops with "out of memory at
t=…" and exit status 3.

--builtin runs the tests shipped inside the binary instead of files on
disk: the tests of the shipped algorithms (algorithms/*_test.star) and of
the L3/L2 builtins (benches/l3l2_test.star), exactly as shipped, from any
folder. It reads nothing on disk: a ./ccl.yaml or ./algorithms folder of
the working directory is not used. PATH arguments then name shipped files
or folders (kernbench test --builtin algorithms/ring_allreduce_test.star).

Exit status: 0 all passed, 1 a test failed, 2 a test file did not load,
3 a test file passed its -timeout (as it loaded too) or a test's
simulation passed --max-memory.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Paths = args
			return run(cmd, o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Run, "run", "", "run only tests whose name matches this regular expression")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "list passing tests too")
	f.BoolVar(&o.JSON, "json", false, "print the results as one JSON document on stdout (the go-test-like lines go to stderr)")
	f.BoolVar(&o.Builtin, "builtin", false, "run the tests shipped inside kernbench (the algorithms' and the L3/L2 builtins'), from any folder, reading nothing on disk")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "wall-clock limit of each test file (0 = none); also -timeout")
	addLoadPath(f, &o.LoadPath)
	f.StringVar(&o.MaxMemory, "max-memory", "", "host memory each simulation of a test may use, e.g. 4G (default: 80% of the machine's memory, cgroup limit included, at most half the address space a ulimit -v leaves)")
	f.Uint64Var(&o.MaxSteps, "max-steps", 0, "Starlark step limit per thread, tests and the kernels they run (0 = default 10^8)")
	return cmd
}

// complete checks the flags of a test run and makes the options of
// testrun they set (but its Stderr and OnTest): every mistake in them
// is a usage error, found before any test runs.
func (o *testOptions) complete(cmd *cobra.Command) (testrun.Options, error) {
	ro := testrun.Options{Verbose: o.Verbose, Env: o.Env, Embedded: kernbench.Files, MaxSteps: o.MaxSteps,
		Timeout: o.Timeout, LoadPath: o.LoadPath}
	if o.Timeout < 0 {
		return ro, usageError(fmt.Sprintf("-timeout must be >= 0 (got %v)", o.Timeout))
	}
	if ro.MaxSteps == 0 {
		ro.MaxSteps = defaultMaxSteps
	}
	if o.Builtin && len(o.LoadPath) > 0 {
		return ro, usageError("--load-path cannot be used with --builtin: the shipped tests load only shipped files")
	}
	if err := checkLoadPath(o.Env, o.LoadPath); err != nil {
		return ro, err
	}
	if err := emptyValue(cmd.Flags(), "run"); err != nil {
		return ro, err
	}
	ro.MaxMemory = hostmem.DefaultMaxMemory()
	if o.MaxMemory != "" {
		n, err := config.ParseSize(o.MaxMemory)
		if err != nil || n <= 0 {
			if err == nil {
				err = fmt.Errorf("must be > 0 (got %s)", o.MaxMemory)
			}
			return ro, usageError("--max-memory: " + err.Error())
		}
		ro.MaxMemory = n
	}
	if o.Run != "" {
		re, err := regexp.Compile(o.Run)
		if err != nil {
			return ro, usageError(fmt.Sprintf("-run: %v", err))
		}
		ro.Run = re
	}
	if o.Builtin {
		// The shipped tests see the shipped files only, whatever the
		// working directory holds.
		ro.Env.NoDisk = true
	}
	return ro, nil
}

// testFiles are the test files o's paths name: on disk, or (--builtin)
// shipped.
func (o *testOptions) testFiles() ([]string, error) {
	if o.Builtin {
		return testrun.DiscoverEmbedded(kernbench.Files, o.Paths)
	}
	files, err := testrun.Discover(o.Env, o.Paths)
	if err != nil && len(o.Paths) > 0 && strings.HasSuffix(err.Error(), ": no such file or folder") {
		// kernbench test algorithms outside the repository.
		if _, e2 := testrun.DiscoverEmbedded(kernbench.Files, o.Paths); e2 == nil {
			err = fmt.Errorf("%v (the tests shipped with kernbench run from any folder with: kernbench test --builtin %s)", err, strings.Join(o.Paths, " "))
		}
	}
	return files, err
}

// runTest runs `kernbench test`: it resolves the options and the test
// files, runs each file (printing go-test-like lines as it goes: on
// stdout, on stderr with --json) and renders the tally.
func runTest(cmd *cobra.Command, o *testOptions, stdout, stderr io.Writer) error {
	ro, err := o.complete(cmd)
	if err != nil {
		return usageErr(err.Error())
	}
	// print() of the tests and the progress reporter share stderr.
	lstderr := &testreport.LockedWriter{W: stderr}
	prog := testreport.NewProgress(lstderr, testreport.ProgressEvery)
	defer prog.Stop()
	ro.Stderr, ro.OnTest = lstderr, prog.Start
	files, err := o.testFiles()
	if err != nil {
		return usageErr(err.Error())
	}
	if len(files) == 0 {
		// Like go test's "no test files": a run from the wrong folder
		// should not look like a clean pass.
		where := "the working directory"
		if o.Builtin {
			where = "the files shipped with kernbench"
		}
		if len(o.Paths) > 0 {
			where = strings.Join(o.Paths, ", ")
		}
		fmt.Fprintf(lstderr, "kernbench: no *_test.star files in %s\n", where)
	}
	// With --json, stdout holds the JSON document alone (a program
	// reads it); the go-test-like lines go to stderr.
	text := stdout
	if o.JSON {
		text = lstderr
	}
	t := testreport.Run(files, ro, prog, text, lstderr)
	if o.Run != "" && t.Passed+t.Failed == 0 && len(files) > t.Broken {
		// As go test warns "no tests to run": a misspelt pattern should
		// not look like a clean pass (the status stays 0, as go test's).
		fmt.Fprintf(lstderr, "kernbench: no test matched --run %s (in %d test file(s))\n", o.Run, len(files)-t.Broken)
	}
	return renderTally(t, o.JSON, text, stdout)
}

// renderTally prints the tally (the summary line on text, the document on
// stdout with --json) and returns the error of the worst outcome, whose
// diagnostics the lines printed.
func renderTally(t *testreport.Tally, asJSON bool, text, stdout io.Writer) error {
	fmt.Fprintf(text, "%d passed, %d failed\n", t.Passed, t.Failed)
	if asJSON {
		all := t.All
		if all == nil {
			all = []testrun.Result{}
		}
		render.JSON(stdout, map[string]any{"results": all, "passed": t.Passed, "failed": t.Failed, "load_errors": t.Broken, "load_failures": t.LoadFailures})
	}
	switch {
	case t.Broken > t.LoadTimedOut:
		return reported(errkind.Load, fmt.Sprintf("%d test file(s) did not load", t.Broken))
	case t.LoadTimedOut > 0:
		return reported(errkind.TestTimeout, fmt.Sprintf("%d test file(s) passed -timeout as they loaded", t.LoadTimedOut))
	case t.TimedOut > 0:
		return reported(errkind.TestTimeout, fmt.Sprintf("%d test(s) passed -timeout", t.TimedOut))
	case t.OutOfMemory > 0:
		return reported(errkind.HostMemory, fmt.Sprintf("%d test(s) passed --max-memory", t.OutOfMemory))
	case t.Failed > 0:
		return reported(errkind.TestFailed, fmt.Sprintf("%d test(s) failed", t.Failed))
	}
	return nil
}
