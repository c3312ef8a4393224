// Package selftest checks the simulator against itself: it generates
// random valid kernels (Starlark collectives built from random
// decompositions over the whole tl surface) on random machines and
// configurations, runs each one in the mock, timed, timed again under
// other GOMAXPROCS and with --timing-only, and checks invariants that must
// hold whatever the kernel: phase 2 agrees with phase 1, a result is right
// unless a hazard is reported (naming the kernel's line), what the mock
// passes is not wrong in a timed run, --timing-only simulates the same
// thing, and the output is deterministic.
//
// A failure names its seed; Case.WriteRepro writes the kernel and the
// kernbench run command line that reproduce it. docs/testing.md says how
// to run the generator for long.
package selftest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Case is one generated kernel and the run configuration it is checked in.
type Case struct {
	Seed       uint64
	Opts       GenOptions // what it was generated with (a seed makes another case with other options)
	Source     string     // the kernel module (kernel.star)
	Collective string
	Topology   string
	WorldSize  int
	Count      int64
	DType      string
	RedOp      string
	InPlace    bool
	Root       int // broadcast and reduce
	DataSpace  string
	InputSeed  uint64 // --seed: the bench's input data
	JitterSeed uint64 // --jitter-seed (0: off)
	Sets       []string
	// Odd is set for a deliberately odd-but-legal kernel (integer tile
	// arithmetic on the side of the collective).
	Odd bool
	// ZeroDiv is set when the odd side computation divides an integer
	// tile by zeros (GenOptions.ZeroDivision): the full run fails with
	// ZeroDivision, and --timing-only refuses the division (TimingOnly).
	ZeroDiv bool
	// NoFlush is set when the passes of the kernel are not separated by a
	// tl.flush where the model's rules do not ask for one.
	NoFlush bool
	// Summary says in a line what the generator chose.
	Summary string
}

// FileName is the name of the kernel module in a reproducer.
const FileName = "kernel.star"

// Args are the arguments of `kernbench run` after the kernel's path.
func (c *Case) Args() []string {
	a := []string{
		"--world-size", strconv.Itoa(c.WorldSize),
		"--count", strconv.FormatInt(c.Count, 10),
		"--dtype", c.DType,
		"--seed", strconv.FormatUint(c.InputSeed, 10),
		"--data-space", c.DataSpace,
	}
	if reduces[c.Collective] {
		// A collective without a reduction refuses --redop.
		a = append(a, "--redop", c.RedOp)
	}
	if c.InPlace {
		a = append(a, "--in-place")
	}
	if c.Root != 0 {
		a = append(a, "--root", strconv.Itoa(c.Root))
	}
	if c.JitterSeed != 0 {
		a = append(a, "--jitter-seed", strconv.FormatUint(c.JitterSeed, 10))
	}
	for _, s := range c.Sets {
		a = append(a, "--set", s)
	}
	return a
}

// TimingOnlyArgs are Args for the case's --timing-only run: without
// --seed, which picks input data a timing-only run does not make.
func (c *Case) TimingOnlyArgs() []string {
	args := c.Args()
	if i := slices.Index(args, "--seed"); i >= 0 {
		args = slices.Delete(args, i, i+2)
	}
	return append(args, "--timing-only")
}

// CommandLine is the kernbench run command that reproduces the case from
// the reproducer's folder.
func (c *Case) CommandLine() string { return c.commandLine(false) }

// commandLine is CommandLine, or with timingOnly its --timing-only run
// (without --seed, which picks input data a timing-only run does not make).
func (c *Case) commandLine(timingOnly bool) string {
	var b strings.Builder
	b.WriteString("kernbench run " + FileName)
	args := c.Args()
	if timingOnly {
		args = c.TimingOnlyArgs()
	}
	for _, a := range args {
		b.WriteByte(' ')
		if strings.ContainsAny(a, "[], {}:") {
			a = "'" + a + "'"
		}
		b.WriteString(a)
	}
	return b.String()
}

// WriteRepro writes the case into dir (created if needed): kernel.star and
// repro.sh, whose comment header says the seed, what failed and how to
// run it. It returns the script's path.
func (c *Case) WriteRepro(dir, problem string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(c.Source), 0o644); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&b, "# kernbench self-test, seed %d: %s\n", c.Seed, c.Summary)
	env := ""
	if c.Opts.MinimalFlush {
		env += "KERNBENCH_SELFTEST_MINFLUSH=1 "
	}
	if c.Opts.ZeroDivision {
		env += "KERNBENCH_SELFTEST_ZERODIV=1 "
	}
	b.WriteString("# Regenerate with: " + env + "KERNBENCH_SELFTEST_SEEDS=" + strconv.FormatUint(c.Seed, 10) + " go test ./starlark/selftest -run TestSelfTestSeeds -v\n")
	for _, l := range strings.Split(strings.TrimRight(problem, "\n"), "\n") {
		b.WriteString("# " + l + "\n")
	}
	b.WriteString("# Its --timing-only run: " + c.commandLine(true) + "\n")
	b.WriteString("cd \"$(dirname \"$0\")\" && " + c.CommandLine() + " \"$@\"\n")
	p := filepath.Join(dir, "repro.sh")
	if err := os.WriteFile(p, []byte(b.String()), 0o755); err != nil {
		return "", err
	}
	return p, nil
}
