package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"kernbench/cmd/kernbench/internal/listflag"
	"kernbench/cmd/kernbench/internal/shards"
	"kernbench/engine/config"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// mergeSeeds are the seed inputs of FuzzMerge: files in testdata/merge,
// written by kernbench itself (ring_allreduce --world-size 2 --sweep
// 1K:16K as three shards --json, whole --json, --jsonl and as a table,
// shard 1/3 stopped by --max-steps 100; ring_allreduce --count 64 as two
// shards, the second with no sizes; ring_allgather --world-size 4
// --sweep 1K:8K --timing-only as two shards; a comparison of
// ring_allreduce and rd_allreduce).
var mergeSeeds = [][]string{
	{"sweep0.json", "sweep1.json", "sweep2.json"},
	{"sweep2.json", "sweep0.json", "sweep1.json"},
	{"sweep0.json", "sweep1-failed.json", "sweep2.json"},
	{"sweep0.json", "sweep2.json"},
	{"sweep0.json", "sweep0.json", "sweep1.json"},
	{"sweep0.json", "whole.json"},
	{"count0.json", "count1.json"},
	{"count1.json", "count0.json"},
	{"gather0.json", "gather1.json"},
	{"gather0.json", "sweep1.json"},
	{"whole.json"},
	{"whole.jsonl"},
	{"whole.txt"},
	{"compare.json"},
}

// mergeFiles are the names the fuzzed reports are merged under.
var mergeFiles = []string{"s0.json", "s1.json", "s2.json"}

// FuzzMerge: kernbench merge of any one to three files ends with a
// documented status, never a panic; an error names one of the files
// (but for a missing shard, which has none); and a merge that succeeds
// holds exactly the rows of its inputs, in size order, each input being
// a report (rows of a run or a shard's place in the sweep). A merge of
// shards holds the rows one run of the sweep would print: one per size,
// the row at position j of the sweep being the shard j%N's (j/N)-th.
func FuzzMerge(f *testing.F) {
	for _, seed := range mergeSeeds {
		var in [3][]byte
		for i, name := range seed {
			data, err := os.ReadFile(filepath.Join("testdata", "merge", name))
			if err != nil {
				f.Fatal(err)
			}
			in[i] = data
		}
		f.Add(uint8(len(seed)), in[0], in[1], in[2])
	}
	f.Fuzz(func(t *testing.T, n uint8, a, b, c []byte) {
		inputs := [][]byte{a, b, c}[:1+int(n)%3]
		dir := t.TempDir()
		files := mergeFiles[:len(inputs)]
		for i, data := range inputs {
			if err := os.WriteFile(filepath.Join(dir, files[i]), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		env := script.Env{Dir: dir}
		merged, err := shards.Merge(env, files)

		// The command prints what shards.Merge returns (or its error).
		var stdout, stderr bytes.Buffer
		code := mainTest(env, append([]string{"merge"}, files...), &stdout, &stderr)
		for _, bad := range []string{"internal error", "\ngoroutine ", "panic:"} {
			if strings.Contains(stderr.String(), bad) {
				t.Fatalf("kernbench merge: stderr contains %q:\n%s", bad, stderr.String())
			}
		}
		if (err == nil) != (code == 0) || (err != nil && code != 2) {
			t.Fatalf("kernbench merge: status %d, shards.Merge error %v", code, err)
		}

		if err != nil {
			msg := err.Error()
			missing := strings.HasPrefix(msg, "shard ") && strings.Contains(msg, " is missing")
			named := false
			for _, f := range files {
				named = named || strings.Contains(msg, f)
			}
			if !named && !missing {
				t.Fatalf("merge error names none of the files %v: %q", files, msg)
			}
			return
		}

		// Every input is a report of the run, and the merged rows are
		// theirs, in size order.
		var all []report.Result
		rows := map[int][]report.Result{} // a shard's rows by its index
		var place *report.Shard
		for i, data := range inputs {
			var rep report.Report
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatalf("merge accepted %s, which is not a report: %v", files[i], err)
			}
			if rep.Algorithm == "" && len(rep.Results) == 0 && rep.Shard == nil {
				t.Fatalf("merge accepted %s, which has neither rows nor a shard's place in a sweep: %.200q", files[i], data)
			}
			all = append(all, rep.Results...)
			if s := rep.Shard; s != nil {
				if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
					t.Fatalf("merge accepted %s, shard %d/%d", files[i], s.Index, s.Count)
				}
				rows[s.Index], place = rep.Results, s
			}
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].Bytes < all[j].Bytes })
		if !reflect.DeepEqual(merged.Results, all) {
			t.Fatalf("merged rows are not those of the inputs in size order:\nmerged %v\ninputs %v", sizesOf(merged.Results), sizesOf(all))
		}
		for i := 1; i < len(merged.Results); i++ {
			if merged.Results[i].Bytes <= merged.Results[i-1].Bytes {
				t.Fatalf("merged rows %d and %d are both of %d bytes", i-1, i, merged.Results[i].Bytes)
			}
		}
		if merged.Shard != nil {
			t.Fatalf("merged report has a shard record %+v", merged.Shard)
		}
		if place == nil {
			return
		}
		if len(merged.Results) != len(place.Sweep) {
			t.Fatalf("merged %d rows from a sweep of %d sizes (%v)", len(merged.Results), len(place.Sweep), sizesOf(merged.Results))
		}
		for j := range merged.Results {
			s := rows[j%place.Count]
			if j/place.Count >= len(s) || !reflect.DeepEqual(merged.Results[j], s[j/place.Count]) {
				t.Fatalf("merged row %d (%d bytes) is not shard %d/%d's row %d (its rows %v)", j, merged.Results[j].Bytes, j%place.Count, place.Count, j/place.Count, sizesOf(s))
			}
		}
	})
}

func sizesOf(rows []report.Result) []int64 {
	out := make([]int64, len(rows))
	for i := range rows {
		out[i] = rows[i].Bytes
	}
	return out
}

// FuzzShard: a shard named by --shard I/N, by Slurm's array variables or
// by JOB_COMPLETION_INDEX with --shards N is one of the sweep's N shards
// (0 <= I < N; a Slurm shard is SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN
// of SLURM_ARRAY_TASK_COUNT, each a number), or an error naming what the
// user set; a sweep (--sweep MIN:MAX[:FACTOR], or -b/-e with -f) is
// sizes from MIN rising to at most MAX; and the N shards of a sweep
// partition it: every size in exactly one shard, in sweep order.
func FuzzShard(f *testing.F) {
	f.Add("1/4", "3", "4", "", "", 0, "1K:16K", "1K", "16K", 2.0)
	f.Add("0/1", "7", "4", "5", "", 0, "1K:4M:4", "", "1M", 4.0)
	f.Add("3/3", "", "", "", "2", 3, "1:1", "1G", "1K", 1.5)
	f.Add("-1/2", "x", "2", "", "7", 4, "4K:1K", "0", "-1", 1.0)
	f.Add("2/2", "2", "0", "", "-1", 2, "1K:1M:1.0001", "1.5K", "2.5K", 1e300)
	f.Add(" 1/2", "9223372036854775807", "9223372036854775807", "-9223372036854775808", "9", 10, "8E:8E", "1E", "7E", 3.0)
	f.Fuzz(func(t *testing.T, spec, taskID, taskCount, taskMin, jobIndex string, nShards int, sweep, lo, hi string, factor float64) {
		if sh, err := shards.Parse(spec); err == nil {
			checkShard(t, "--shard "+spec, sh)
			i, n, _ := strings.Cut(spec, "/")
			if !sameNumber(i, sh.Index) || !sameNumber(n, sh.Count) {
				t.Fatalf("--shard %q read as %d/%d", spec, sh.Index, sh.Count)
			}
		} else if !strings.Contains(err.Error(), "--shard "+strconv.Quote(spec)) {
			t.Fatalf("--shard %q: error does not name it: %v", spec, err)
		}

		vars := map[string]string{"SLURM_ARRAY_TASK_ID": taskID, "SLURM_ARRAY_TASK_COUNT": taskCount,
			"SLURM_ARRAY_TASK_MIN": taskMin, "JOB_COMPLETION_INDEX": jobIndex}
		slurm := taskID != "" && taskCount != ""
		sh, ok, err := shards.FromEnv(func(k string) string { return vars[k] }, nShards)
		switch {
		case err != nil:
			name := "JOB_COMPLETION_INDEX"
			if slurm {
				name = "SLURM_ARRAY_TASK_"
			}
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("environment %v, --shards %d: error does not name %s: %v", vars, nShards, name, err)
			}
		case ok && slurm:
			checkShard(t, fmt.Sprintf("Slurm %v", vars), sh)
			// The index is the task's place in the array, counted exactly
			// from numbers (Slurm sets nothing else).
			id, e1 := new(big.Int).SetString(taskID, 10)
			low, e2 := new(big.Int).SetString(taskMin, 10)
			if taskMin == "" {
				low, e2 = new(big.Int), true
			}
			if !e1 || !e2 || new(big.Int).Sub(id, low).Cmp(big.NewInt(int64(sh.Index))) != 0 || !sameNumber(taskCount, sh.Count) {
				t.Fatalf("Slurm %v: shard %d/%d", vars, sh.Index, sh.Count)
			}
		case ok:
			checkShard(t, fmt.Sprintf("JOB_COMPLETION_INDEX %q --shards %d", jobIndex, nShards), sh)
			if sh.Count != nShards {
				t.Fatalf("JOB_COMPLETION_INDEX %q --shards %d: shard %d/%d", jobIndex, nShards, sh.Index, sh.Count)
			}
		}

		sizes, err := listflag.Sweep(sweep)
		if err != nil {
			if !strings.Contains(err.Error(), "--sweep "+strconv.Quote(sweep)) {
				t.Fatalf("--sweep %q: error does not name it: %v", sweep, err)
			}
		} else {
			checkSweep(t, "--sweep "+sweep, sweep, sizes)
		}

		// -b/-e with -f become a --sweep (as run builds it).
		if msg := listflag.CheckMinMax(lo, hi); msg == "" {
			if factor > 1 && !math.IsInf(factor, 0) {
				spec := fmt.Sprintf("%s:%s:%g", lo, hi, factor)
				bs, err := listflag.Sweep(spec)
				if err != nil && !strings.Contains(err.Error(), "sizes, more than") {
					t.Fatalf("-b %q -e %q -f %g accepted, but its sweep %q is not: %v", lo, hi, factor, spec, err)
				}
				if err == nil {
					checkSweep(t, fmt.Sprintf("-b %q -e %q -f %g", lo, hi, factor), spec, bs)
				}
			}
		} else if !strings.Contains(msg, "-b/--minbytes") && !strings.Contains(msg, "-e/--maxbytes") {
			t.Fatalf("-b %q -e %q: error names neither flag: %s", lo, hi, msg)
		}

		if len(sizes) == 0 {
			return
		}
		for _, n := range []int{1, 2, 3, len(sizes), len(sizes) + 1, sh.Count} {
			if n < 1 {
				continue
			}
			seen := map[int]int{} // a size's position in the sweep -> its shard
			for i := 0; i < n && i <= len(sizes); i++ {
				part := shards.Spec{Index: i, Count: n}.Pick(sizes)
				for k, s := range part {
					pos := i + k*n
					if pos >= len(sizes) || sizes[pos] != s {
						t.Fatalf("shard %d/%d of %v holds %d at its place %d", i, n, sizes, s, k)
					}
					if other, dup := seen[pos]; dup {
						t.Fatalf("size %d of %v is in shards %d/%d and %d/%d", s, sizes, other, n, i, n)
					}
					seen[pos] = i
				}
			}
			if len(seen) != len(sizes) {
				t.Fatalf("the %d shards of %v hold %d of its sizes", n, sizes, len(seen))
			}
			if n > len(sizes) && len(shards.Spec{Index: n - 1, Count: n}.Pick(sizes)) != 0 {
				t.Fatalf("shard %d/%d of %v has sizes", n-1, n, sizes)
			}
		}
	})
}

// sameNumber says whether s is the decimal number n.
func sameNumber(s string, n int) bool {
	v, ok := new(big.Int).SetString(s, 10)
	return ok && v.Cmp(big.NewInt(int64(n))) == 0
}

func checkShard(t *testing.T, what string, sh shards.Spec) {
	t.Helper()
	if sh.Count < 1 || sh.Index < 0 || sh.Index >= sh.Count {
		t.Fatalf("%s: accepted as shard %d/%d", what, sh.Index, sh.Count)
	}
}

// checkSweep: an accepted sweep rises strictly from MIN to at most MAX,
// in at most listflag.MaxSweep sizes.
func checkSweep(t *testing.T, what, spec string, sizes []int64) {
	t.Helper()
	parts := strings.Split(spec, ":")
	lo, err1 := config.ParseSize(parts[0])
	hi, err2 := config.ParseSize(parts[1])
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: accepted, but MIN or MAX is not a size", what)
	}
	if len(sizes) == 0 || len(sizes) > listflag.MaxSweep || sizes[0] != lo || sizes[len(sizes)-1] > hi {
		t.Fatalf("%s: %d sizes %v, want %d rising to at most %d", what, len(sizes), sizes, lo, hi)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] <= sizes[i-1] {
			t.Fatalf("%s: sizes %v do not rise", what, sizes)
		}
	}
}
