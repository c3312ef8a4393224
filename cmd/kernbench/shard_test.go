package main

import (
	"kernbench/cmd/kernbench/internal/shards"
	"strings"
	"testing"
)

// A Slurm array task's shard is (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN)
// / SLURM_ARRAY_TASK_STEP of SLURM_ARRAY_TASK_COUNT (docs/cluster.md); a
// variable that is not a number, a task below MIN or between steps, or an
// array that is not MIN to MAX in steps names no shard. A MIN of "A" was read as
// 0 (found by FuzzShard, testdata/fuzz/FuzzShard/9ac783ffe105be55), and a
// task ID so far below MIN that the difference wrapped round was a shard.
func TestShardFromSlurm(t *testing.T) {
	for _, tc := range []struct {
		id, count, low string
		step, high     string
		want           shards.Spec
		err            string
	}{
		{"3", "4", "", "", "", shards.Spec{Index: 3, Count: 4}, ""},
		{"7", "4", "5", "", "", shards.Spec{Index: 2, Count: 4}, ""},
		{"0", "1", "A", "", "", shards.Spec{}, `SLURM_ARRAY_TASK_MIN "A" is not a number`},
		{"-9223372036854775808", "9223372036854775807", "2", "", "", shards.Spec{}, "do not name a shard"},
		{"9223372036854775807", "2", "-9223372036854775808", "", "", shards.Spec{}, "do not name a shard"},
		{"4", "4", "", "", "", shards.Spec{}, "do not name a shard"},
		// --array=0-6:2 (tasks 0, 2, 4, 6) is shards 0 to 3 of 4; task 2
		// ran shard 2, tasks 4 and 6 none.
		{"2", "4", "0", "2", "6", shards.Spec{Index: 1, Count: 4}, ""},
		{"6", "4", "0", "2", "6", shards.Spec{Index: 3, Count: 4}, ""},
		{"9", "3", "1", "4", "9", shards.Spec{Index: 2, Count: 3}, ""},
		{"5", "4", "0", "2", "6", shards.Spec{}, "do not name a shard"},
		{"8", "4", "0", "2", "6", shards.Spec{}, "do not name a shard"},
		{"2", "4", "0", "0", "6", shards.Spec{}, `SLURM_ARRAY_TASK_STEP "0" is not a step`},
		{"2", "4", "0", "x", "6", shards.Spec{}, `SLURM_ARRAY_TASK_STEP "x" is not a number`},
		{"2", "4", "0", "2", "y", shards.Spec{}, `SLURM_ARRAY_TASK_MAX "y" is not a number`},
		// --array=1,3,7: no step maps the IDs to shards.
		{"3", "3", "1", "", "7", shards.Spec{}, "is not SLURM_ARRAY_TASK_MIN 1 to SLURM_ARRAY_TASK_MAX \"7\" in steps of 1"},
		{"3", "3", "1", "1", "7", shards.Spec{}, "its task IDs do not name shards"},
		{"3", "3", "1", "2", "7", shards.Spec{}, "its task IDs do not name shards"},
		{"4", "3", "1", "3", "-9223372036854775808", shards.Spec{}, "its task IDs do not name shards"},
	} {
		vars := map[string]string{"SLURM_ARRAY_TASK_ID": tc.id, "SLURM_ARRAY_TASK_COUNT": tc.count, "SLURM_ARRAY_TASK_MIN": tc.low,
			"SLURM_ARRAY_TASK_STEP": tc.step, "SLURM_ARRAY_TASK_MAX": tc.high}
		got, ok, err := shards.FromEnv(func(k string) string { return vars[k] }, 0)
		switch {
		case tc.err == "" && (err != nil || !ok || got != tc.want):
			t.Errorf("Slurm %v: shard %v, %v, %v; want %v", vars, got, ok, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Slurm %v: shard %v, error %v; want error %q", vars, got, err, tc.err)
		}
	}
}
