package main

import (
	"strings"
	"testing"
)

// A Slurm array task's shard is SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN
// of SLURM_ARRAY_TASK_COUNT (docs/cluster.md); a variable that is not a
// number, or a task below MIN, names no shard. A MIN of "A" was read as
// 0 (found by FuzzShard, testdata/fuzz/FuzzShard/9ac783ffe105be55), and a
// task ID so far below MIN that the difference wrapped round was a shard.
func TestShardFromSlurm(t *testing.T) {
	for _, tc := range []struct {
		id, count, low string
		want           shardSpec
		err            string
	}{
		{"3", "4", "", shardSpec{3, 4}, ""},
		{"7", "4", "5", shardSpec{2, 4}, ""},
		{"0", "1", "A", shardSpec{}, `SLURM_ARRAY_TASK_MIN "A" is not a number`},
		{"-9223372036854775808", "9223372036854775807", "2", shardSpec{}, "do not name a shard"},
		{"9223372036854775807", "2", "-9223372036854775808", shardSpec{}, "do not name a shard"},
		{"4", "4", "", shardSpec{}, "do not name a shard"},
	} {
		vars := map[string]string{"SLURM_ARRAY_TASK_ID": tc.id, "SLURM_ARRAY_TASK_COUNT": tc.count, "SLURM_ARRAY_TASK_MIN": tc.low}
		got, ok, err := shardFromEnv(func(k string) string { return vars[k] }, 0)
		switch {
		case tc.err == "" && (err != nil || !ok || got != tc.want):
			t.Errorf("Slurm %v: shard %v, %v, %v; want %v", vars, got, ok, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Slurm %v: shard %v, error %v; want error %q", vars, got, err, tc.err)
		}
	}
}
