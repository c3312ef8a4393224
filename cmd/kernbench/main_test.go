package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"kernbench/starlark/ccl"
)

// TestMain lets the test binary double as the kernbench command: testscript
// puts a "kernbench" executable on the scripts' $PATH that re-runs this
// binary, which then calls Main instead of the tests.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"kernbench": func() { os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI acceptance scenarios in testdata/script/*.txtar,
// one scenario per file. Besides testscript's builtins they may use
//
//	kbexit N ARGS...
//
// which runs `kernbench ARGS...` and fails unless it exits with status N
// exactly (the documented codes: 0 ok, 1 wrong result, 2 usage/config/load
// error, 3 deadlock/watchdog/step limit, 4 runtime error). Its stdout and
// stderr are checked by the following stdout/stderr lines as for exec.
//
// kbexit runs kernbench as a subprocess in the script's working directory
// rather than calling Main in this process: Main resolves FILE.star,
// --config and ./ccl.yaml against the process working directory, and the
// scripts run in parallel, each in its own $WORK.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Cmds:                map[string]func(ts *testscript.TestScript, neg bool, args []string){"kbexit": kbexit, "dropwall": dropwall},
	})
}

// dropwall FILE rewrites FILE without its wall-clock lines ("wall_s" in
// JSON, "wall ...s" in tables), the only part of a report that may differ
// between two runs of the same inputs.
func dropwall(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: dropwall FILE")
	}
	var kept []string
	for _, line := range strings.Split(ts.ReadFile(args[0]), "\n") {
		if !strings.Contains(line, `"wall_s"`) && !strings.Contains(line, " wall ") {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(ts.MkAbs(args[0]), []byte(strings.Join(kept, "\n")), 0o644); err != nil {
		ts.Fatalf("dropwall: %v", err)
	}
}

func kbexit(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! kbexit (kbexit already checks the exact status)")
	}
	if len(args) < 1 {
		ts.Fatalf("usage: kbexit STATUS [kernbench args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("kbexit: status %q is not an integer", args[0])
	}
	err = ts.Exec("kernbench", args[1:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		got = ee.ExitCode()
	default:
		ts.Fatalf("kbexit: running kernbench: %v", err)
	}
	if got != want {
		ts.Fatalf("kernbench %q exited with status %d, want %d", args[1:], got, want)
	}
}

// Issue 13 (1): a panic reaches the user as one line asking for a bug
// report; the backtrace only with -v.
func TestReportInternal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       any
		verbose bool
		want    string
	}{
		{"plain", "internal error: negative sleep", false,
			"kernbench: internal error: negative sleep (a bug in kernbench, not in your input: please report it with the command line and input files; run with -v for the backtrace)\n"},
		{"from a sweep worker", &ccl.InternalError{Value: "boom\nsecond line", Stack: []byte("goroutine 7 [running]:\n")}, false,
			"kernbench: internal error: boom second line (a bug in kernbench, not in your input: please report it with the command line and input files; run with -v for the backtrace)\n"},
		{"verbose", &ccl.InternalError{Value: "boom", Stack: []byte("goroutine 7 [running]:\n")}, true,
			"kernbench: internal error: boom (a bug in kernbench, not in your input: please report it with the command line and input files; backtrace below)\ngoroutine 7 [running]:\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			reportInternal(&b, tc.r, tc.verbose)
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"run", "x.star"}, false},
		{[]string{"run", "x.star", "-v"}, true},
		{[]string{"test", "--verbose"}, true},
		{[]string{"run", "x.star", "--", "-v"}, false},
	} {
		if got := verboseArg(tc.args); got != tc.want {
			t.Errorf("verboseArg(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
