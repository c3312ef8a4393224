package main

import (
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

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
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
}
