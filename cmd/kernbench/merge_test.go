package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"kernbench/starlark/ccl"
	"kernbench/starlark/script"
)

// The merged wall_s is the shards' sum to the nanosecond, as one run's is
// (time.Duration.Seconds), not the float noise of adding them up:
// 0.1 s + 0.2 s printed as 0.30000000000000004 in a merged document.
func TestMergedWallTimeIsWholeNanoseconds(t *testing.T) {
	dir := t.TempDir()
	sweep := []int64{1024, 2048}
	for i, wall := range []float64{0.1, 0.2} {
		rep := ccl.Report{Algorithm: "a", File: "a.star", WorldSize: 2, WallS: wall,
			Results: []ccl.Result{{Bytes: sweep[i], Count: sweep[i] / 4, DType: "f32"}},
			Shard:   &ccl.Shard{Index: i, Count: 2, Sweep: sweep, Settings: []string{}}}
		data, err := json.Marshal(&rep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, []string{"s0.json", "s1.json"}[i]), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	merged, err := mergeReports(script.Env{Dir: dir}, []string{"s0.json", "s1.json"})
	if err != nil {
		t.Fatal(err)
	}
	if merged.WallS != 0.3 {
		t.Errorf("merged wall_s = %v, want 0.3", merged.WallS)
	}
}
