package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"kernbench/cmd/kernbench/internal/flagcompat"
	"kernbench/cmd/kernbench/internal/output"
	"kernbench/cmd/kernbench/internal/render"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/sweep"
)

// A command's run function returns nil or the error it failed with, and
// mainIn alone decides what follows: the diagnostic on stderr, the exit
// status and, with --json or --jsonl, the JSON error on stdout. It
// returns one of
//
//   - a *report.Failure (usageErr makes a usage error's) that it has not
//     printed: mainIn prints its message (and detail) as the diagnostic;
//   - an *exitError, a failure whose diagnostics the command printed
//     with its output (test's and check's lines, the rows of a
//     comparison): mainIn prints only the line naming its kind;
//   - an error of cobra's (a flag or argument it refused): a usage error.
//
// A command never prints an error's last line or picks an exit status.

// exitError is an error the command has reported already, carried through
// cobra to mainIn, which takes the exit status from its kind (errkind.Of):
// err is a report.Failure, or wraps the error that says what failed.
type exitError struct{ err error }

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// reported is the exitError of a failure of kind k whose diagnostics the
// command has printed already; msg sums it up.
func reported(k *errkind.Kind, msg string) error {
	return &exitError{err: report.WithKind(k, &report.Failure{Rank: -1, Msg: msg})}
}

// exitWith is the exit status of a command that failed with kind k; the
// last line of its diagnostics names k, so that the text output says
// what --json's error.kind says, and the status is k's, from the same
// value.
func exitWith(stderr io.Writer, k *errkind.Kind) int {
	fmt.Fprintf(stderr, "kernbench: %s (exit status %d)\n", k.Name, k.Status)
	return k.Status
}

// Main runs the CLI in the process's working directory and environment
// and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	defer output.RemoveTempsOnInterrupt(stderr)()
	defer reportPeak(os.Getenv, os.ReadFile, stderr)
	return mainIn(script.Env{}, args, stdout, stderr)
}

// reportPeak prints the process's peak resident set (VmHWM, the figure
// /usr/bin/time reports) when KERNBENCH_REPORT_PEAK is set: the tests
// that hold the host memory estimate against the measured peak run
// kernbench as a process of its own and read it from its stderr.
func reportPeak(getenv func(string) string, read func(string) ([]byte, error), stderr io.Writer) {
	if getenv("KERNBENCH_REPORT_PEAK") == "" {
		return
	}
	b, err := read("/proc/self/status")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				fmt.Fprintf(stderr, "# peak resident set: %d bytes\n", kb*1024)
			}
		}
	}
}

// installSettings lets kernbench's runs change the process's own
// settings (hostmem.ProcessSettings: the Go runtime's soft memory limit
// and GC percent near what the runs hold, the kernel's backing of
// buffers): the program opts in, as its packages change none by
// themselves. Once, before the first command.
var installSettings = sync.OnceFunc(func() { hostmem.Install(hostmem.ProcessSettings()) })

// mainIn runs the CLI in env: every relative path it reads or writes is
// taken in env.Dir and every environment variable it reads comes from
// env, so tests run commands in-process and side by side, each in its
// own directory. Panics never reach the user as Go tracebacks: they are
// reported as internal errors (status 4) on one line asking for a bug
// report; the backtrace follows only with -v, where it helps the report.
func mainIn(env script.Env, args []string, stdout, stderr io.Writer) (code int) {
	defer recoverInternal(stderr, args, &code)
	installSettings()
	out := &countingOut{w: stdout}
	root := newRootCmd(env, out, stderr)
	root.SetArgs(flagcompat.GoTest(args))
	cmd, err := root.ExecuteC()
	if err == nil {
		return errkind.ExitOK
	}
	if cmd == nil {
		cmd = root
	}
	var ee *exitError
	if errors.As(err, &ee) {
		k := errkind.Of(ee.err)
		jsonError(out, cmd, args, k, ee.err)
		return exitWith(stderr, k)
	}
	var f *report.Failure
	if errors.As(err, &f) {
		fmt.Fprintf(stderr, "kernbench: %s\n", f.Msg)
		if f.Detail != "" && f.Detail != f.Msg {
			fmt.Fprintln(stderr, f.Detail)
		}
		k := errkind.Of(f)
		jsonError(out, cmd, args, k, f)
		return exitWith(stderr, k)
	}
	// Flag and argument errors from cobra. Cobra's errors are untyped:
	// the text is read only to avoid pointing at --help twice, not to
	// classify the error (every one of them is a usage error).
	// The help to point at is the failing command's: kernbench --help
	// lists none of run's flags.
	fmt.Fprintf(stderr, "kernbench: %v%s\n", err, flagcompat.Hint(cmd, err))
	if !strings.Contains(err.Error(), "--help") {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	jsonError(out, cmd, args, errkind.Usage, err)
	return exitWith(stderr, errkind.Usage)
}

// countingOut counts what a command writes on stdout.
type countingOut struct {
	w io.Writer
	n int64
}

func (c *countingOut) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// jsonError keeps --json's promise for a command that failed before it
// printed anything (a usage error, a file that does not load): stdout
// gets the error as a JSON document ({"error": {"kind", "message"}}, as
// a report's), one line of it with --jsonl, so that a program reading
// stdout always gets JSON. A command that printed its report has put
// the error in it.
func jsonError(out *countingOut, cmd *cobra.Command, args []string, k *errkind.Kind, err error) {
	if out.n > 0 {
		return
	}
	asked := func(name string) bool {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return f.Value.String() == "true"
		}
		// A flag error stopped the parse: the command line says.
		return slices.Contains(args, "--"+name) || slices.Contains(args, "--"+name+"=true")
	}
	doc := map[string]any{"error": &report.ErrorOut{Kind: k.Name, Message: err.Error()}}
	switch {
	case asked("json"):
		render.JSON(out, doc)
	case asked("jsonl"):
		render.JSONLine(out, doc)
	}
}

// recoverInternal, deferred by mainIn, reports a panic of the command
// run with args as an InternalError and sets *code to its exit status.
func recoverInternal(stderr io.Writer, args []string, code *int) {
	if r := recover(); r != nil {
		reportInternal(stderr, r, verboseArg(args))
		*code = exitWith(stderr, errkind.Internal)
	}
}

func newRootCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "kernbench",
		Short: "Write, run and verify collective-communication algorithms on a simulated accelerator",
		Long: `kernbench runs collective algorithms written in Starlark (.star) on a
deterministic simulated accelerator and reports whether they are correct and
how fast they are.

  kernbench run algorithms/ring_allreduce.star
  kernbench run ring_allreduce --world-size 16 --bytes 4M
  kernbench tune allreduce --sweep 1K:4M --write-select select.yaml`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCmd(env, stdout, stderr), newTestCmd(env, stdout, stderr), newCheckCmd(env, stdout, stderr), newDocsCmd(env, stdout, stderr), newVersionCmd(stdout), newMergeCmd(env, stdout, stderr), newTuneCmd(env, stdout, stderr))
	return root
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kernbench, Go and Starlark versions (and the VCS revision it was built from)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			bi, _ := debug.ReadBuildInfo()
			fmt.Fprint(stdout, versionText(bi, runtime.Version()))
			return nil
		},
	}
}

// versionText is what `kernbench version` prints: the module version
// ("(devel)" for a build from a checkout), the revision, commit time and
// dirty flag when the build recorded them (go build and go install in a
// git checkout do; go run does not), and the Go and Starlark versions.
func versionText(bi *debug.BuildInfo, goVersion string) string {
	version, star := "(devel)", "unknown"
	var rev, when, dirty string
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == "go.starlark.net" {
				star = d.Version
			}
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = ", modified"
				}
			}
		}
	}
	line := "kernbench " + version
	if rev != "" {
		line += fmt.Sprintf(" (revision %s, %s%s)", rev[:min(12, len(rev))], when, dirty)
	}
	return fmt.Sprintf("%s\ngo %s\ngo.starlark.net %s\n", line, goVersion, star)
}

// reportInternal prints a recovered panic: what went wrong and a request
// for a bug report on one line, then (verbose) the backtrace of the
// goroutine that panicked.
func reportInternal(w io.Writer, r any, verbose bool) {
	msg, stack := fmt.Sprint(r), debug.Stack()
	var ie *sweep.InternalError
	if err, ok := r.(error); ok && errors.As(err, &ie) {
		r, msg, stack = ie.Value, fmt.Sprint(ie.Value), ie.Stack
	}
	// A panic on a partition's worker goroutine (a run of several SIPs)
	// carries that goroutine's backtrace, which its Error() appends: the
	// line gets the panic's value, the backtrace waits for -v.
	var pp *sim.PartitionPanic
	if err, ok := r.(error); ok && errors.As(err, &pp) {
		msg, stack = fmt.Sprintf("%v (partition %d)", pp.Value, pp.Partition), pp.Stack
	}
	msg = strings.TrimPrefix(msg, "internal error: ")
	hint := "run with -v for the backtrace"
	if verbose {
		hint = "backtrace below"
	}
	fmt.Fprintf(w, "kernbench: internal error: %s (a bug in kernbench, not in your input: please report it with the command line and input files; %s)\n",
		strings.ReplaceAll(msg, "\n", " "), hint)
	if verbose {
		w.Write(stack)
	}
}

// verboseArg reports whether args ask for -v/--verbose (before a "--").
func verboseArg(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-v", "--verbose", "-v=true", "--verbose=true":
			return true
		}
	}
	return false
}
