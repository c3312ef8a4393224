package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"kernbench/starlark/ccl"
	"kernbench/starlark/script"
)

// A sweep can be split over machines: --shard I/N runs every N-th size
// starting at the I-th (0-based), and `kernbench merge` joins the shards'
// --json reports into the report one run would print. Inside a Slurm array
// job or a Kubernetes Indexed Job the shard comes from the environment.

// shardSpec is one shard of a sweep.
type shardSpec struct{ index, count int }

// parseShard reads "I/N" with 0 <= I < N.
func parseShard(s string) (shardSpec, error) {
	i, n, ok := strings.Cut(s, "/")
	a, err1 := strconv.Atoi(i)
	b, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || b < 1 || a < 0 || a >= b {
		return shardSpec{}, fmt.Errorf("--shard %q: want I/N with 0 <= I < N, e.g. 0/4", s)
	}
	return shardSpec{a, b}, nil
}

// shardFromEnv finds the shard of a Slurm array task (SLURM_ARRAY_TASK_ID
// counted from SLURM_ARRAY_TASK_MIN, out of SLURM_ARRAY_TASK_COUNT) or of a
// Kubernetes Indexed Job (JOB_COMPLETION_INDEX out of --shards N); ok is
// false outside both.
func shardFromEnv(getenv func(string) string, shards int) (shardSpec, bool, error) {
	if id := getenv("SLURM_ARRAY_TASK_ID"); id != "" && getenv("SLURM_ARRAY_TASK_COUNT") != "" {
		task, err1 := strconv.Atoi(id)
		count, err2 := strconv.Atoi(getenv("SLURM_ARRAY_TASK_COUNT"))
		low := 0
		if m := getenv("SLURM_ARRAY_TASK_MIN"); m != "" {
			low, _ = strconv.Atoi(m)
		}
		if err1 != nil || err2 != nil || count < 1 || task-low < 0 || task-low >= count {
			return shardSpec{}, false, fmt.Errorf("SLURM_ARRAY_TASK_ID %q / SLURM_ARRAY_TASK_COUNT %q do not name a shard (use --array=0-%d or --shard I/N)", id, getenv("SLURM_ARRAY_TASK_COUNT"), max(count, 1)-1)
		}
		return shardSpec{task - low, count}, true, nil
	}
	if idx := getenv("JOB_COMPLETION_INDEX"); idx != "" && shards > 0 {
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i >= shards {
			return shardSpec{}, false, fmt.Errorf("JOB_COMPLETION_INDEX %q is not a shard of --shards %d", idx, shards)
		}
		return shardSpec{i, shards}, true, nil
	}
	return shardSpec{}, false, nil
}

// pick keeps the shard's points of a sweep.
func (s shardSpec) pick(points []int64) []int64 {
	var out []int64
	for i, p := range points {
		if i%s.count == s.index {
			out = append(out, p)
		}
	}
	return out
}

func newMergeCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	var asJSON, quiet bool
	cmd := &cobra.Command{
		Use:   "merge REPORT.json...",
		Short: "Join the --json reports of a sharded sweep (--shard I/N) into the report one run would print",
		Long: `Join the --json reports of the shards of one sweep (kernbench run ... --shard I/N
--json, one per shard) into the table (or, with --json, the document) a
single run of the whole sweep prints: the same rows in size order. The
reports must come from the same algorithm and settings; a size that
appears twice is an error. wall_s is the sum of the shards' wall times.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, files []string) error {
			rep, err := mergeReports(env, files)
			if err != nil {
				return usageErr(stderr, asJSON, err.Error())
			}
			if asJSON {
				writeJSON(stdout, rep)
				return nil
			}
			if len(rep.Results) > 0 {
				fmt.Fprintln(stdout, tableHeader())
			}
			for i := range rep.Results {
				fmt.Fprintln(stdout, tableRow(&rep.Results[i]))
			}
			printSummary(stdout, rep, quiet, false)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the merged JSON document instead of the table")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the table")
	return cmd
}

// mergeReports reads shard reports (in env's working directory) and
// joins them.
func mergeReports(env script.Env, files []string) (*ccl.Report, error) {
	var merged *ccl.Report
	var first string
	seen := map[int64]string{}
	for _, f := range files {
		data, err := env.ReadInput(f)
		if err != nil {
			return nil, err
		}
		var rep ccl.Report
		if err := json.Unmarshal(data, &rep); err != nil {
			return nil, fmt.Errorf("%s: not a kernbench --json report: %v", f, err)
		}
		if rep.Error != nil {
			return nil, fmt.Errorf("%s: the shard failed: %s", f, rep.Error.Message)
		}
		if rep.Algorithm == "" && len(rep.Results) == 0 {
			continue // a shard with no sizes
		}
		for _, r := range rep.Results {
			if other, dup := seen[r.Bytes]; dup {
				return nil, fmt.Errorf("%s and %s both hold the row of %d bytes (the same shard twice?)", other, f, r.Bytes)
			}
			seen[r.Bytes] = f
		}
		if merged == nil {
			head := rep
			head.Results = nil
			merged, first = &head, f
		} else if a, b := sameRun(merged, &rep); a != b {
			return nil, fmt.Errorf("%s and %s are different runs (%s vs %s)", first, f, a, b)
		}
		merged.Results = append(merged.Results, rep.Results...)
		if merged != nil && f != first {
			merged.WallS += rep.WallS
		}
	}
	if merged == nil {
		return nil, fmt.Errorf("no rows in %s", strings.Join(files, ", "))
	}
	sort.SliceStable(merged.Results, func(i, j int) bool { return merged.Results[i].Bytes < merged.Results[j].Bytes })
	return merged, nil
}

// sameRun describes what must agree between two shards' reports.
func sameRun(a, b *ccl.Report) (string, string) {
	key := func(r *ccl.Report) string {
		root := ""
		if r.Root != nil {
			root = fmt.Sprintf(" root %d", *r.Root)
		}
		return fmt.Sprintf("%s %s %s %s %v world_size %d%s %s %s %s timing_only=%v", r.Algorithm, r.File, r.Collective, r.Topology, r.MeshShape, r.WorldSize, root, r.BufferKind, r.Backpressure, r.DataSpace, r.TimingOnly)
	}
	return key(a), key(b)
}
