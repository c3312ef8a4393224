package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/cobra"

	"kernbench/cmd/kernbench/internal/compare"
	"kernbench/cmd/kernbench/internal/tune"
	"kernbench/engine/config"
	"kernbench/starlark/script"
)

// The fastest run of each size wins, the first listed on a tie; the
// runner-up is the next fastest; a size no run finished has none.
func TestPickWinners(t *testing.T) {
	ring := func(ns float64) tune.Candidate { return tune.Candidate{Label: "ring", Algorithm: "ring", TimeNs: ns} }
	rd := func(ns float64) tune.Candidate { return tune.Candidate{Label: "rd", Algorithm: "rd", TimeNs: ns} }
	tree := func(ns float64) tune.Candidate { return tune.Candidate{Label: "tree", Algorithm: "tree", TimeNs: ns} }
	for _, tc := range []struct {
		name   string
		sizes  []tune.Size
		want   []tune.Winner
		margin []string
		runs   int // runs the tune compares (0: 3)
	}{
		{"crossover", []tune.Size{
			{Bytes: 1024, Candidates: []tune.Candidate{ring(200), rd(100), tree(150)}},
			{Bytes: 4096, Candidates: []tune.Candidate{ring(300), rd(369)}},
		}, []tune.Winner{
			{Bytes: 1024, Best: rd(100), RunnerUp: ptr(tree(150))},
			{Bytes: 4096, Best: ring(300), RunnerUp: ptr(rd(369))},
		}, []string{"1.50× faster than tree", "1.23× faster than rd"}, 0},
		{"tie: the first listed", []tune.Size{{Bytes: 8, Candidates: []tune.Candidate{rd(10), ring(10)}}},
			[]tune.Winner{{Bytes: 8, Best: rd(10), RunnerUp: ptr(ring(10))}}, []string{"tied with ring (the first listed wins)"}, 0},
		{"close", []tune.Size{{Bytes: 8, Candidates: []tune.Candidate{rd(1000), ring(1004)}}},
			[]tune.Winner{{Bytes: 8, Best: rd(1000), RunnerUp: ptr(ring(1004))}}, []string{"1.0040× faster than ring"}, 0},
		{"closer than four decimals", []tune.Size{{Bytes: 8, Candidates: []tune.Candidate{rd(29116.5), ring(29116.6)}}},
			[]tune.Winner{{Bytes: 8, Best: rd(29116.5), RunnerUp: ptr(ring(29116.6))}}, []string{"ahead of ring by 0.1 ns of 29116.5 ns"}, 0},
		{"alone", []tune.Size{{Bytes: 8, Candidates: []tune.Candidate{ring(5)}}},
			[]tune.Winner{{Bytes: 8, Best: ring(5)}}, []string{"the only run"}, 1},
		{"the others failed", []tune.Size{{Bytes: 8, Candidates: []tune.Candidate{ring(5)}}},
			[]tune.Winner{{Bytes: 8, Best: ring(5)}}, []string{"the only one of 3 runs that finished right"}, 3},
		{"none ran", []tune.Size{{Bytes: 8}}, nil, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tune.PickWinners(tc.sizes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("winners (-want +got):\n%s", diff)
			}
			runs := tc.runs
			if runs == 0 {
				runs = 3
			}
			var margins []string
			for _, w := range got {
				margins = append(margins, w.Margin(runs))
			}
			if diff := cmp.Diff(tc.margin, margins); diff != "" {
				t.Errorf("margins (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// Each measured size wins from itself to the next size of the sweep
// (the smallest from 0, the largest without bound); neighbours with the
// same algorithm and settings merge; a shard's ranges cover its sizes.
func TestSelectRanges(t *testing.T) {
	win := func(n int64, alg string, set ...string) tune.Winner {
		return tune.Winner{Bytes: n, Best: tune.Candidate{Algorithm: alg, Set: set}}
	}
	sweep := []int64{1024, 4096, 16384, 65536}
	for _, tc := range []struct {
		name    string
		winners []tune.Winner
		want    []config.SelectRange
	}{
		{"crossover", []tune.Winner{win(1024, "rd"), win(4096, "rd"), win(16384, "ring"), win(65536, "ring")}, []config.SelectRange{
			{MinBytes: 0, MaxBytes: 16384, Algorithm: "rd"},
			{MinBytes: 16384, Algorithm: "ring"},
		}},
		{"one winner", []tune.Winner{win(1024, "ring"), win(4096, "ring"), win(16384, "ring"), win(65536, "ring")}, []config.SelectRange{
			{Algorithm: "ring"},
		}},
		{"settings differ", []tune.Winner{win(1024, "ring", "defaults.n_slots=2"), win(4096, "ring", "defaults.n_slots=8"), win(16384, "ring", "defaults.n_slots=8"), win(65536, "ring", "defaults.n_slots=8")}, []config.SelectRange{
			{MaxBytes: 4096, Algorithm: "ring", Set: []string{"defaults.n_slots=2"}},
			{MinBytes: 4096, Algorithm: "ring", Set: []string{"defaults.n_slots=8"}},
		}},
		{"back and forth", []tune.Winner{win(1024, "rd"), win(4096, "ring"), win(16384, "rd"), win(65536, "ring")}, []config.SelectRange{
			{MaxBytes: 4096, Algorithm: "rd"}, {MinBytes: 4096, MaxBytes: 16384, Algorithm: "ring"},
			{MinBytes: 16384, MaxBytes: 65536, Algorithm: "rd"}, {MinBytes: 65536, Algorithm: "ring"},
		}},
		{"shard 1/2", []tune.Winner{win(4096, "ring"), win(65536, "ring")}, []config.SelectRange{
			{MinBytes: 4096, MaxBytes: 16384, Algorithm: "ring"}, {MinBytes: 65536, Algorithm: "ring"},
		}},
		{"a size without a winner", []tune.Winner{win(1024, "rd"), win(16384, "rd"), win(65536, "ring")}, []config.SelectRange{
			{MaxBytes: 4096, Algorithm: "rd"}, {MinBytes: 16384, MaxBytes: 65536, Algorithm: "rd"}, {MinBytes: 65536, Algorithm: "ring"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tune.SelectRanges(sweep, tc.winners)); diff != "" {
				t.Errorf("ranges (-want +got):\n%s", diff)
			}
		})
	}
}

// What tune writes loads back as the same ranges (config.LoadOverlay,
// as --config reads it), set items with quotes and commas included.
func TestSelectYAMLRoundTrip(t *testing.T) {
	ranges := []config.SelectRange{
		{MaxBytes: 16384, Algorithm: "rd_allreduce"},
		{MinBytes: 16384, MaxBytes: 1 << 20, Algorithm: "ring_allreduce", Set: []string{"defaults.n_slots=4", `defaults.mesh_shape=[2,2]`}},
		{MinBytes: 1 << 20, Algorithm: "mesh_allreduce", Set: []string{"algorithms.mesh_allreduce.params.tcm_limit=4096"}},
	}
	data := tune.SelectYAML("allreduce", ranges, []string{"a comment"})
	c, err := config.LoadOverlay("sel.yaml", data, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	got := c.Select["allreduce"]
	for i := range got {
		got[i].Pos = ""
	}
	if diff := cmp.Diff(ranges, got); diff != "" {
		t.Errorf("read back (-written +read):\n%s\n%s", diff, data)
	}
}

// A tune command line makes the options its run gets.
func TestTuneFlagsMakeOptions(t *testing.T) {
	type made struct {
		Collective  string
		Names       []string
		Sizes       []int64
		Jobs        int
		Vary        []string
		Shard       string
		WriteSelect string
		Export      string
		Err         string
	}
	for _, tc := range []struct {
		args []string
		want made
	}{
		{[]string{"allreduce", "--sweep", "1K:4K"}, made{Collective: "allreduce", Sizes: []int64{1024, 2048, 4096}, Jobs: 1}},
		{[]string{"allreduce", "ring_allreduce", "rd_allreduce", "-b", "1K", "-e", "16K", "-f", "4", "-j", "2", "--vary", "defaults.n_slots=2,4", "--shard", "1/2", "--write-select", "s.yaml", "--export-msccl", "xml"},
			made{Collective: "allreduce", Names: []string{"ring_allreduce", "rd_allreduce"}, Sizes: []int64{1024, 4096, 16384}, Jobs: 2,
				Vary: []string{"defaults.n_slots=2,4"}, Shard: "1/2", WriteSelect: "s.yaml", Export: "xml"}},
		{[]string{"allreduce", "--bytes", "4K", "--sweep", "1K:4K"}, made{Collective: "allreduce", Jobs: 1, Err: "--count, --bytes, --sweep and -b/-e are mutually exclusive"}},
		{[]string{"allreduce", "--export-msccl", ""}, made{Collective: "allreduce", Jobs: 1, Export: "", Err: "--export-msccl: an empty file name; give a file, or - for stdout"}},
	} {
		var got made
		run := func(cmd *cobra.Command, o *tuneOptions, collective string, names []string, _, _ io.Writer) error {
			got = made{Collective: collective, Names: names, Jobs: o.Jobs, Vary: o.vary, Shard: o.shard, WriteSelect: o.writeSelect, Export: o.export}
			if err := o.complete(cmd, io.Discard); err != nil {
				got.Err = err.Error()
				return nil
			}
			got.Sizes = o.Sizes
			return nil
		}
		cmd := newTuneCmdWith(script.Env{}, io.Discard, io.Discard, run)
		if err := execWith(t, cmd, tc.args); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
}

// auto runs each size with the algorithm and set: items of the range
// holding it, one variant per distinct choice, its sizes in order.
func TestAutoVariants(t *testing.T) {
	dir := t.TempDir()
	sel := "select:\n  allreduce:\n" +
		"    - {max_bytes: 4K, algorithm: rd_allreduce}\n" +
		"    - {min_bytes: 4K, max_bytes: 64K, algorithm: ring_allreduce, set: [\"defaults.n_slots=2\"]}\n" +
		"    - {min_bytes: 64K, max_bytes: 1M, algorithm: rd_allreduce}\n" +
		"  broadcast:\n    - {algorithm: tree_broadcast}\n"
	if err := os.WriteFile(filepath.Join(dir, "sel.yaml"), []byte(sel), 0o644); err != nil {
		t.Fatal(err)
	}
	env := script.Env{Dir: dir, Getenv: func(string) string { return "" }}
	for _, tc := range []struct {
		name       string
		collective string
		sizes      []int64
		want       []compare.Variant
		err        string
	}{
		{"per size", "allreduce", []int64{1024, 4096, 16384, 65536, 1<<20 - 4}, []compare.Variant{
			{Target: "rd_allreduce", Label: "rd_allreduce", Sizes: []int64{1024, 65536, 1<<20 - 4}},
			{Target: "ring_allreduce", Sets: []string{"defaults.n_slots=2"}, Label: "ring_allreduce defaults.n_slots=2", Sizes: []int64{4096, 16384}},
		}, ""},
		{"default size", "broadcast", nil, []compare.Variant{{Target: "tree_broadcast", Label: "tree_broadcast", Sizes: []int64{1 << 20}}}, ""},
		{"past every range", "allreduce", []int64{1 << 20}, nil, "auto: select.allreduce: no range holds 1048576 bytes"},
		{"two collectives, none given", "", []int64{8}, nil, "auto: select: has ranges for allreduce, broadcast; say which with --collective"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &runOptions{}
			o.Env, o.ConfigPath, o.Collective, o.Sizes = env, "sel.yaml", tc.collective, tc.sizes
			got, _, err := autoVariants(o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("variants (-want +got):\n%s", diff)
			}
		})
	}
}
