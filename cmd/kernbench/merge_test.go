package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernbench/cmd/kernbench/internal/shards"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// The merged wall_s is the shards' sum to the nanosecond, as one run's is
// (time.Duration.Seconds), not the float noise of adding them up:
// 0.1 s + 0.2 s printed as 0.30000000000000004 in a merged document.
func TestMergedWallTimeIsWholeNanoseconds(t *testing.T) {
	dir := t.TempDir()
	sweep := []int64{1024, 2048}
	for i, wall := range []float64{0.1, 0.2} {
		rep := report.Report{Algorithm: "a", File: "a.star", WorldSize: 2, WallS: wall,
			Results: []report.Result{{Bytes: sweep[i], Count: sweep[i] / 4, DType: "f32"}},
			Shard:   &report.Shard{Index: i, Count: 2, Sweep: sweep, Settings: []string{}}}
		data, err := json.Marshal(&rep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, []string{"s0.json", "s1.json"}[i]), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	merged, err := shards.Merge(script.Env{Dir: dir}, []string{"s0.json", "s1.json"})
	if err != nil {
		t.Fatal(err)
	}
	if merged.WallS != 0.3 {
		t.Errorf("merged wall_s = %v, want 0.3", merged.WallS)
	}
}

// writeReports writes each document into dir under its name.
func writeReports(t *testing.T, dir string, docs map[string]string) {
	t.Helper()
	for name, doc := range docs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A file that holds no report (null, {}, a --jsonl row cut to one line)
// is refused, naming it, not merged as nothing: merge whole.json null.json
// printed whole.json's rows as if null.json were a report (found by
// FuzzMerge).
func TestMergeRefusesFilesThatAreNotReports(t *testing.T) {
	dir := t.TempDir()
	whole, err := os.ReadFile(filepath.Join("testdata", "merge", "whole.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeReports(t, dir, map[string]string{"whole.json": string(whole), "null.json": "null", "empty.json": "{}",
		"row.jsonl": `{"bytes":256,"count":64,"dtype":"f32","redop":"sum","sim_time_ns":259.5}`})
	for _, f := range []string{"null.json", "empty.json", "row.jsonl"} {
		_, err := shards.Merge(script.Env{Dir: dir}, []string{"whole.json", f})
		if err == nil || !strings.Contains(err.Error(), f+": not a kernbench --json report") {
			t.Errorf("merge whole.json %s: error %v, want %s: not a kernbench --json report", f, err, f)
		}
	}
}

// A shard's report holds a row for each of its sizes of the sweep, no
// more and no fewer: a shard 1/2 report without its rows ("results"
// misspelt) merged into a report of 2 rows for a sweep of 4 sizes (found
// by FuzzMerge, testdata/fuzz/FuzzMerge/b42fc1db11bcb803).
func TestMergeRefusesShardWithoutItsRows(t *testing.T) {
	dir := t.TempDir()
	shard := func(i int, sizes ...int64) string {
		rep := report.Report{Algorithm: "a", File: "a.star", WorldSize: 2,
			Shard: &report.Shard{Index: i, Count: 2, Sweep: []int64{1024, 2048, 4096, 8192}, Settings: []string{}}}
		for _, s := range sizes {
			rep.Results = append(rep.Results, report.Result{Bytes: s, Count: s / 4, DType: "f32"})
		}
		data, err := json.Marshal(&rep)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	writeReports(t, dir, map[string]string{"s0.json": shard(0, 1024, 4096), "s1.json": shard(1, 2048, 8192),
		"s1-none.json": shard(1), "s1-short.json": shard(1, 2048), "s1-more.json": shard(1, 2048, 8192, 16384),
		"s0-swapped.json": shard(0, 1024, 2048), "s1-swapped.json": shard(1, 4096, 8192)})
	if _, err := shards.Merge(script.Env{Dir: dir}, []string{"s0.json", "s1.json"}); err != nil {
		t.Fatalf("merge of the whole sweep: %v", err)
	}
	for _, tc := range []struct {
		files []string
		want  string
	}{
		{[]string{"s0.json", "s1-none.json"}, "s1-none.json: shard 1/2 holds 0 rows, but its sizes of the sweep are 2 (2048, 8192)"},
		{[]string{"s0.json", "s1-short.json"}, "s1-short.json: shard 1/2 holds 1 rows, but its sizes of the sweep are 2 (2048, 8192)"},
		{[]string{"s1-more.json", "s0.json"}, "s1-more.json: shard 1/2 holds 3 rows, but its sizes of the sweep are 2 (2048, 8192)"},
		{[]string{"s0-swapped.json", "s1-swapped.json"}, "s0-swapped.json holds the row of 2048 bytes, size 2 of the sweep, which is shard 1/2's"},
	} {
		_, err := shards.Merge(script.Env{Dir: dir}, tc.files)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("merge %v: error %v, want %q", tc.files, err, tc.want)
		}
	}
}

// A shard record that names no shard (0 <= index < count) is refused,
// naming the file: one of count 0 in a failed shard's report divided by
// zero.
func TestMergeRefusesBadShardRecord(t *testing.T) {
	dir := t.TempDir()
	writeReports(t, dir, map[string]string{
		"zero.json":     `{"algorithm":"a","results":[],"error":{"kind":"StepLimit","message":"m"},"shard":{"index":0,"count":0,"sweep":[1024]}}`,
		"past.json":     `{"algorithm":"a","results":[{"bytes":1024}],"shard":{"index":2,"count":2,"sweep":[1024]}}`,
		"negative.json": `{"algorithm":"a","results":[{"bytes":1024}],"shard":{"index":-1,"count":2,"sweep":[1024]}}`})
	for _, f := range []string{"zero.json", "past.json", "negative.json"} {
		_, err := shards.Merge(script.Env{Dir: dir}, []string{f})
		if err == nil || !strings.Contains(err.Error(), f+": its shard record") {
			t.Errorf("merge %s: error %v, want %s: its shard record ...", f, err, f)
		}
	}
}

// A shard's rows are those it wrote, one per size of its part of the
// sweep: a row of a size the sweep does not hold (3000 bytes in a sweep
// of powers of two), and figures edited after the run (a faster
// sim_time_ns), were merged as if the run had printed them.
func TestMergeRefusesRowsNotOfTheSweep(t *testing.T) {
	dir := t.TempDir()
	sweep := []int64{1024, 2048, 4096, 8192}
	shard := func(i int, coll string, digest bool, edit func(*report.Result), sizes ...int64) string {
		rep := report.Report{Algorithm: "a", File: "a.star", Collective: coll, WorldSize: 4,
			Shard: &report.Shard{Index: i, Count: 2, Sweep: sweep, Settings: []string{}}}
		for _, s := range sizes {
			n := s / 4
			if coll == "allgather" {
				n *= 4 // the row is the recvbuf of world_size chunks
			}
			rep.Results = append(rep.Results, report.Result{Bytes: n * 4, Count: n, DType: "f32", SimTimeNs: 500})
		}
		if digest {
			rep.Shard.Rows = report.RowsDigest(rep.Results)
		}
		if edit != nil {
			edit(&rep.Results[0])
		}
		data, err := json.Marshal(&rep)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	faster := func(r *report.Result) { r.SimTimeNs = 100 }
	writeReports(t, dir, map[string]string{
		"s0.json":        shard(0, "allreduce", true, nil, 1024, 4096),
		"s1.json":        shard(1, "allreduce", true, nil, 2048, 8192),
		"s1-size.json":   shard(1, "allreduce", false, nil, 3000, 8192),
		"s1-edited.json": shard(1, "allreduce", true, faster, 2048, 8192),
		"g0.json":        shard(0, "allgather", true, nil, 1024, 4096),
		"g1.json":        shard(1, "allgather", true, nil, 2048, 8192),
		"g1-size.json":   shard(1, "allgather", false, nil, 2048, 2048),
	})
	for _, tc := range []struct {
		files []string
		want  string // "" when the merge succeeds
	}{
		{[]string{"s0.json", "s1.json"}, ""},
		{[]string{"g0.json", "g1.json"}, ""},
		{[]string{"s0.json", "s1-size.json"}, "s1-size.json: row 1 of shard 1/2 is 3000 bytes (750 elements), but its size of the sweep, 2048 bytes per rank buffer, makes 2048 bytes (512 elements)"},
		{[]string{"s0.json", "s1-edited.json"}, "s1-edited.json: its rows are not those shard 1/2 wrote (edited since?)"},
		{[]string{"g0.json", "g1-size.json"}, "g1-size.json: row 2 of shard 1/2 is 8192 bytes (2048 elements), but its size of the sweep, 8192 bytes per rank buffer, makes 32768 bytes (8192 elements)"},
	} {
		_, err := shards.Merge(script.Env{Dir: dir}, tc.files)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("merge %v: %v", tc.files, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("merge %v: error %v, want %q", tc.files, err, tc.want)
		}
	}
}
