package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"early.kernbench/quietstart"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"kernbench/cmd/kernbench/internal/testreport"
	"kernbench/engine/sim"
	"kernbench/starlark/script"
	"kernbench/starlark/sweep"
)

// TestMain lets the test binary double as the kernbench command: testscript
// puts a "kernbench" executable on the scripts' $PATH that re-runs this
// binary, which then calls Main instead of the tests. Scripts reach it
// with `exec kernbench`, which keeps the real entry point (os.Args, exit
// status, the process's own stdout and stderr) under test; kbexit runs
// kernbench in-process.
func TestMain(m *testing.M) {
	// No test reads the wall clock: a run's wall time comes from a clock
	// that moves a quarter second at each look, in this process and in
	// the kernbench it runs as a command.
	wallNow = testClock
	testscript.Main(m, map[string]func(){
		"kernbench": func() {
			wallNow = testClock
			quietstart.Restore()
			os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
		},
	})
}

// testClock is wallNow in tests: a fixed instant plus a quarter second
// per look, so that a run's wall time is positive and never read from
// the machine.
func testClock() time.Time {
	return time.Unix(1_700_000_000, 0).Add(time.Duration(testClockLooks.Add(1)) * (time.Second / 4))
}

var testClockLooks atomic.Int64

// TestScripts runs the CLI acceptance scenarios in testdata/script/*.txtar,
// one scenario per file. Besides testscript's builtins they may use
//
//	kbexit N ARGS...
//
// which runs `kernbench ARGS...` and fails unless it exits with status N
// exactly (the documented codes: 0 ok, 1 wrong result, 2 usage/config/load
// error, 3 deadlock/watchdog/step limit, 4 runtime error). Its stdout and
// stderr are checked by the following stdout/stderr lines as for exec.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Cmds:                map[string]func(ts *testscript.TestScript, neg bool, args []string){"kbexit": kbexit, "dropwall": dropwall, "jsononly": jsononly},
		Condition:           scriptCondition,
	})
}

// scriptCondition answers the scripts' own conditions. [cpuprofiled]: the
// test binary itself runs under go test -cpuprofile, so a kernbench run in
// this process cannot start a second CPU profile (Go allows one at a time).
func scriptCondition(cond string) (bool, error) {
	switch cond {
	case "cpuprofiled":
		f := flag.Lookup("test.cpuprofile")
		return f != nil && f.Value.String() != "", nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
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

// jsononly fails unless the last command's stdout is JSON and nothing
// else: one document (with --jsonl, LINES=N lines of one object each).
func jsononly(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) > 1 || (len(args) == 1 && !strings.HasPrefix(args[0], "lines=")) {
		ts.Fatalf("usage: jsononly [lines=N]")
	}
	out := ts.ReadFile("stdout")
	want := 1
	if len(args) == 1 {
		n, err := strconv.Atoi(strings.TrimPrefix(args[0], "lines="))
		if err != nil {
			ts.Fatalf("jsononly: %v", err)
		}
		if got := strings.Count(out, "\n"); got != n || !strings.HasSuffix(out, "\n") {
			ts.Fatalf("jsononly: stdout has %d lines, want %d", got, n)
		}
		want = n
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for i := 0; i < want; i++ {
		var v map[string]any
		if err := dec.Decode(&v); err != nil {
			ts.Fatalf("jsononly: stdout's document %d is not a JSON object: %v", i+1, err)
		}
	}
	if rest, _ := io.ReadAll(dec.Buffered()); strings.TrimSpace(string(rest)) != "" || dec.More() {
		ts.Fatalf("jsononly: stdout has more than JSON: %q", out)
	}
}

// memoryGuard serialises the in-process commands that set --max-memory:
// the memory guard measures, and its soft limit bounds, the whole process
// (ccl's guardMemory), so another script's runs would count against such
// a command's limit. The rest run side by side (read lock).
var memoryGuard sync.RWMutex

// mainTest is mainIn for a test: every in-process command goes through
// it, so that a command with --max-memory runs alone (memoryGuard). A
// test calling mainIn itself made a --max-memory command of a script
// count its memory: the docs' refused sweep exited 3, not 2, once under
// load, when its run-time guard saw the bad-input corpus's runs.
func mainTest(env script.Env, args []string, stdout, stderr io.Writer) int {
	if hasMaxMemory(args) {
		memoryGuard.Lock()
		defer memoryGuard.Unlock()
	} else {
		memoryGuard.RLock()
		defer memoryGuard.RUnlock()
	}
	return mainIn(env, args, stdout, stderr)
}

// hasMaxMemory reports whether a command line sets --max-memory.
func hasMaxMemory(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return a == "--max-memory" || strings.HasPrefix(a, "--max-memory=") })
}

// kbexit runs kernbench in this process (mainIn), in the script's working
// directory and with its environment variables, so the scripts run in
// parallel without a process per command; a command setting --max-memory
// runs as a process of its own.
// noWallClockWatchdog gives a check or test command that sets no
// --timeout of its own --timeout 0: both arm a wall-clock watchdog by
// default (1m, 10m), and a test's outcome must rest on steps and
// simulated time, never on how busy the machine is. A script that is
// about the watchdog passes its own --timeout.
func noWallClockWatchdog(args []string) []string {
	if len(args) == 0 || args[0] != "check" && args[0] != "test" {
		return args
	}
	end := len(args) // flags stop at "--"
	for i, a := range args {
		if a == "--" {
			end = i
			break
		}
		if strings.HasPrefix(a, "--timeout") || strings.HasPrefix(a, "-timeout") {
			return args
		}
	}
	return slices.Concat(args[:end], []string{"--timeout", "0"}, args[end:])
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
	args = noWallClockWatchdog(args[1:])
	if hasMaxMemory(args) {
		// Its limit is on the process's memory: in a process of its own,
		// other tests' simulations cannot count against it (in this one,
		// one did, though the commands of the scripts took turns).
		got := 0
		if err := ts.Exec("kernbench", args...); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				ts.Fatalf("kernbench %q: %v", args, err)
			}
			got = ee.ExitCode()
		}
		if got != want {
			ts.Fatalf("kernbench %q exited with status %d, want %d", args, got, want)
		}
		return
	}
	// A command may write from several goroutines (as to a file
	// descriptor); the script's buffers take one write at a time.
	var stdout, stderr bytes.Buffer
	env := script.Env{Dir: ts.MkAbs("."), Getenv: ts.Getenv}
	got := mainTest(env, args, &testreport.LockedWriter{W: &stdout}, &testreport.LockedWriter{W: &stderr})
	ts.Stdout().Write(stdout.Bytes())
	ts.Stderr().Write(stderr.Bytes())
	if got != want {
		ts.Fatalf("kernbench %q exited with status %d, want %d", args, got, want)
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
		{"from a sweep worker", &sweep.InternalError{Value: "boom\nsecond line", Stack: []byte("goroutine 7 [running]:\n")}, false,
			"kernbench: internal error: boom second line (a bug in kernbench, not in your input: please report it with the command line and input files; run with -v for the backtrace)\n"},
		{"verbose", &sweep.InternalError{Value: "boom", Stack: []byte("goroutine 7 [running]:\n")}, true,
			"kernbench: internal error: boom (a bug in kernbench, not in your input: please report it with the command line and input files; backtrace below)\ngoroutine 7 [running]:\n"},
		// A partition's worker goroutine (a run of several SIPs): its
		// backtrace is not part of the line, with or without a sweep.
		{"from a partition", &sim.PartitionPanic{Value: "internal error: a message within the lookahead", Partition: 1, Stack: []byte("goroutine 9 [running]:\n")}, false,
			"kernbench: internal error: a message within the lookahead (partition 1) (a bug in kernbench, not in your input: please report it with the command line and input files; run with -v for the backtrace)\n"},
		{"from a partition in a sweep", &sweep.InternalError{Value: &sim.PartitionPanic{Value: "boom", Partition: 0, Stack: []byte("goroutine 9 [running]:\n")}, Stack: []byte("goroutine 7 [running]:\n")}, true,
			"kernbench: internal error: boom (partition 0) (a bug in kernbench, not in your input: please report it with the command line and input files; backtrace below)\ngoroutine 9 [running]:\n"},
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

// Rule (tests): a check or test command of a script runs without the
// wall-clock watchdog unless the script sets --timeout itself.
func TestNoWallClockWatchdog(t *testing.T) {
	tests := []struct{ in, want []string }{
		{[]string{"check", "a.star"}, []string{"check", "a.star", "--timeout", "0"}},
		{[]string{"test", "a_test.star", "-timeout", "1s"}, []string{"test", "a_test.star", "-timeout", "1s"}},
		{[]string{"test", "a_test.star", "--timeout=5m"}, []string{"test", "a_test.star", "--timeout=5m"}},
		{[]string{"test", "x", "--", "--timeout"}, []string{"test", "x", "--timeout", "0", "--", "--timeout"}},
		{[]string{"run", "ring_allreduce"}, []string{"run", "ring_allreduce"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, noWallClockWatchdog(tc.in)); diff != "" {
			t.Errorf("noWallClockWatchdog(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}
