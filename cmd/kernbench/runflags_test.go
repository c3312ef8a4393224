package main

import (
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"kernbench/starlark/hostmem"
	"kernbench/starlark/script"
)

// A command line makes the options the run gets: the run command with a
// run function of the test's (newRunCmdWith) shows them without
// simulating anything.
func TestRunFlagsMakeOptions(t *testing.T) {
	type made struct {
		Target     string
		Compare    []string
		Sizes      []int64
		Counts     []int64
		WorldSize  int
		TimingOnly bool
		MaxSteps   uint64
		BenchFlags []string
		Err        string
	}
	for _, tc := range []struct {
		args []string
		want made
	}{
		{[]string{"ring_allreduce", "--bytes", "4K"}, made{Target: "ring_allreduce", Sizes: []int64{4096}, MaxSteps: defaultMaxSteps, BenchFlags: []string{"--bytes"}}},
		{[]string{"ring_allreduce", "--count", "8", "--world-size", "4"}, made{Target: "ring_allreduce", Counts: []int64{8}, WorldSize: 4, MaxSteps: defaultMaxSteps, BenchFlags: []string{"--count", "--world-size"}}},
		{[]string{"ring_allreduce", "--sweep", "1K:4K", "--timing-only", "--max-steps", "99"}, made{Target: "ring_allreduce", Sizes: []int64{1024, 2048, 4096}, TimingOnly: true, MaxSteps: 99, BenchFlags: []string{"--sweep", "--timing-only"}}},
		{[]string{"a", "b"}, made{Compare: []string{"a", "b"}, MaxSteps: defaultMaxSteps}},
		{[]string{"ring_allreduce", "--bytes", "4K", "--count", "8"}, made{Target: "ring_allreduce", Err: "--count, --bytes, --sweep and -b/-e are mutually exclusive"}},
		{[]string{"ring_allreduce", "--bytes", "6", "--dtype", "f32"}, made{Target: "ring_allreduce", Err: "--bytes 6 is not a whole number of f32 elements (4 bytes each); use a multiple of 4 or --count"}},
	} {
		var got made
		run := func(cmd *cobra.Command, o *runOptions, arg string, _, _ io.Writer, compare ...string) error {
			got.Target, got.Compare = arg, compare
			if err := o.complete(cmd, io.Discard); err != nil {
				got.Err = err.Error()
				return nil
			}
			got.Sizes, got.Counts, got.WorldSize, got.TimingOnly, got.MaxSteps, got.BenchFlags = o.Sizes, o.Counts, o.WorldSize, o.TimingOnly, o.MaxSteps, o.BenchFlags
			return nil
		}
		cmd := newRunCmdWith(script.Env{}, io.Discard, io.Discard, run)
		if err := execWith(t, cmd, tc.args); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
}

// execWith runs cmd, a command made with a run function of the test's,
// on args.
func execWith(t *testing.T, cmd *cobra.Command, args []string) error {
	t.Helper()
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.Execute()
}

// The test command's flags and arguments make its options, and complete
// makes testrun's options of them or refuses them.
func TestTestFlagsMakeOptions(t *testing.T) {
	type made struct {
		Opts      testOptions
		MaxSteps  uint64
		MaxMemory int64 // 0: the default
		Run       string
		NoDisk    bool
		Err       string
	}
	for _, tc := range []struct {
		args []string
		want made
	}{
		{nil, made{Opts: testOptions{Paths: []string{}, Timeout: 10 * time.Minute}, MaxSteps: defaultMaxSteps}},
		{[]string{"a_test.star", "dir", "--run", "allreduce", "-v", "--json", "--max-steps", "99", "--max-memory", "4K", "--timeout", "1s"},
			made{Opts: testOptions{Paths: []string{"a_test.star", "dir"}, Run: "allreduce", Verbose: true, JSON: true, MaxSteps: 99, MaxMemory: "4K", Timeout: time.Second},
				MaxSteps: 99, MaxMemory: 4096, Run: "allreduce"}},
		{[]string{"--builtin", "algorithms"}, made{Opts: testOptions{Paths: []string{"algorithms"}, Builtin: true, Timeout: 10 * time.Minute}, MaxSteps: defaultMaxSteps, NoDisk: true}},
		{[]string{"--timeout", "-1s"}, made{Opts: testOptions{Paths: []string{}, Timeout: -time.Second}, Err: "-timeout must be >= 0 (got -1s)"}},
		{[]string{"--run", "("}, made{Opts: testOptions{Paths: []string{}, Run: "(", Timeout: 10 * time.Minute}, Err: "-run: error parsing regexp: missing closing ): `(`"}},
		{[]string{"--builtin", "--load-path", "lib"}, made{Opts: testOptions{Paths: []string{}, Builtin: true, LoadPath: []string{"lib"}, Timeout: 10 * time.Minute},
			Err: "--load-path cannot be used with --builtin: the shipped tests load only shipped files"}},
	} {
		var got made
		run := func(cmd *cobra.Command, o *testOptions, _, _ io.Writer) error {
			got.Opts = *o
			ro, err := o.complete(cmd)
			if err != nil {
				got.Err = err.Error()
				return nil
			}
			got.MaxSteps, got.NoDisk = ro.MaxSteps, ro.Env.NoDisk
			if ro.MaxMemory != hostmem.DefaultMaxMemory() {
				got.MaxMemory = ro.MaxMemory
			}
			if ro.Run != nil {
				got.Run = ro.Run.String()
			}
			return nil
		}
		if err := execWith(t, newTestCmdWith(script.Env{}, io.Discard, io.Discard, run), tc.args); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
}

// The check command's flags and argument make its options, and complete
// makes check.Run's options of them or refuses them.
func TestCheckFlagsMakeOptions(t *testing.T) {
	type made struct {
		Target     string
		ConfigPath string
		Sets       []string
		WorldSize  int
		Topology   string
		Collective string
		WorldSizes []int
		ShowMap    int
		Timeout    time.Duration
		Err        string
	}
	for _, tc := range []struct {
		args []string
		want made
	}{
		{[]string{"ring_allreduce"}, made{Target: "ring_allreduce", Timeout: time.Minute}},
		{[]string{"a.star", "--config", "c.yaml", "--set", "x.y=1", "--world-size", "8", "--topology", "ring", "--collective", "allgather", "--show-map", "8", "--timeout", "0s"},
			made{Target: "a.star", ConfigPath: "c.yaml", Sets: []string{"x.y=1"}, WorldSize: 8, Topology: "ring", Collective: "allgather", ShowMap: 8}},
		{[]string{"a.star", "--world-sizes", "2,4-6"}, made{Target: "a.star", WorldSizes: []int{2, 4, 5, 6}, Timeout: time.Minute}},
		{[]string{"a.star", "--world-sizes", "2", "--world-size", "4"}, made{Target: "a.star", Err: "--world-size checks one world size and --world-sizes several: give one of them"}},
		{[]string{"a.star", "--show-map", "0"}, made{Target: "a.star", Err: "--show-map must be >= 1 (got 0)"}},
		{[]string{"a_test.star", "--world-size", "4"}, made{Target: "a_test.star",
			Err: "--world-size: a_test.star is a test file, checked as kernbench test loads it, without a configuration; check the algorithm it tests with --world-size"}},
	} {
		var got made
		run := func(cmd *cobra.Command, o *checkOptions, _, _ io.Writer) error {
			got.Target = o.Target
			co, err := o.complete(cmd)
			if err != nil {
				got.Err = err.Error()
				return nil
			}
			got.ConfigPath, got.Sets, got.WorldSize, got.Topology, got.Collective = co.ConfigPath, co.Sets, co.WorldSize, co.Topology, co.Collective
			got.WorldSizes, got.ShowMap, got.Timeout = co.WorldSizes, co.ShowMap, o.Timeout
			return nil
		}
		if err := execWith(t, newCheckCmdWith(script.Env{}, io.Discard, io.Discard, run), tc.args); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
}

// The merge and docs commands' flags and arguments make their options.
func TestMergeAndDocsFlagsMakeOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want mergeOptions
	}{
		{[]string{"s0.json", "s1.json"}, mergeOptions{Reports: []string{"s0.json", "s1.json"}}},
		{[]string{"--json", "-q", "s0.json"}, mergeOptions{Reports: []string{"s0.json"}, JSON: true, Quiet: true}},
	} {
		var got mergeOptions
		run := func(_ *cobra.Command, o *mergeOptions, _, _ io.Writer) error {
			got = *o
			return nil
		}
		if err := execWith(t, newMergeCmdWith(script.Env{}, io.Discard, io.Discard, run), tc.args); err != nil {
			t.Errorf("merge %q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("merge %q (-want +got):\n%s", tc.args, diff)
		}
	}
	for _, tc := range []struct {
		args []string
		want docsOptions
	}{
		{nil, docsOptions{}},
		{[]string{"--stubs", "out"}, docsOptions{Stubs: "out"}},
	} {
		var got docsOptions
		run := func(_ *cobra.Command, o *docsOptions, _, _ io.Writer) error {
			got = *o
			return nil
		}
		if err := execWith(t, newDocsCmdWith(script.Env{}, io.Discard, io.Discard, run), tc.args); err != nil {
			t.Errorf("docs %q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("docs %q (-want +got):\n%s", tc.args, diff)
		}
	}
}
