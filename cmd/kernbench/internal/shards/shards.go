// Package shards splits a sweep over machines and joins it again, its one
// job: --shard I/N runs every N-th size starting at the I-th (0-based),
// from the flag or from a Slurm array or Kubernetes Indexed Job's
// environment, and Merge joins the shards' --json reports into the report
// one run would print, refusing shards of different runs or sweeps.
package shards

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"kernbench/engine/collective"
	"kernbench/engine/dtype"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Spec is one shard of a sweep.
type Spec struct{ Index, Count int }

// Parse reads "I/N" with 0 <= I < N.
func Parse(s string) (Spec, error) {
	i, n, ok := strings.Cut(s, "/")
	a, err1 := strconv.Atoi(i)
	b, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || b < 1 || a < 0 || a >= b {
		return Spec{}, fmt.Errorf("--shard %q: want I/N with 0 <= I < N, e.g. 0/4", s)
	}
	return Spec{a, b}, nil
}

// FromEnv finds the shard of a Slurm array task (SLURM_ARRAY_TASK_ID's
// place among SLURM_ARRAY_TASK_MIN, MIN+STEP, …, MAX, out of
// SLURM_ARRAY_TASK_COUNT) or of a Kubernetes Indexed Job
// (JOB_COMPLETION_INDEX out of --shards N); ok is false outside both.
func FromEnv(getenv func(string) string, shards int) (Spec, bool, error) {
	if id := getenv("SLURM_ARRAY_TASK_ID"); id != "" && getenv("SLURM_ARRAY_TASK_COUNT") != "" {
		return slurm(getenv, id)
	}
	if idx := getenv("JOB_COMPLETION_INDEX"); idx != "" && shards > 0 {
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i >= shards {
			return Spec{}, false, fmt.Errorf("JOB_COMPLETION_INDEX %q is not a shard of --shards %d", idx, shards)
		}
		return Spec{i, shards}, true, nil
	}
	return Spec{}, false, nil
}

// slurm is the shard of Slurm array task id: its place in the array
// MIN, MIN+STEP, …, MAX of COUNT tasks (MIN 0 and STEP 1 when unset). An
// array that is not evenly stepped (--array=1,3,7) or a task outside it
// names no shard: read as ID-MIN, a task of --array=0-6:2 ran shard 2
// and 4 and 6 none.
func slurm(getenv func(string) string, id string) (Spec, bool, error) {
	num := func(name string, def int) (int, string, error) {
		v := getenv(name)
		if v == "" {
			return def, "", nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			// Read as its default it would pick a shard the array did
			// not mean.
			return 0, v, fmt.Errorf("%s %q is not a number: no shard of SLURM_ARRAY_TASK_ID %q (use --shard I/N)", name, v, id)
		}
		return n, v, nil
	}
	low, lowText, err := num("SLURM_ARRAY_TASK_MIN", 0)
	if err != nil {
		return Spec{}, false, err
	}
	step, stepText, err := num("SLURM_ARRAY_TASK_STEP", 1)
	if err != nil {
		return Spec{}, false, err
	}
	high, highText, err := num("SLURM_ARRAY_TASK_MAX", 0)
	if err != nil {
		return Spec{}, false, err
	}
	task, err1 := strconv.Atoi(id)
	countText := getenv("SLURM_ARRAY_TASK_COUNT")
	count, err2 := strconv.Atoi(countText)
	from := ""
	if lowText != "" {
		from = fmt.Sprintf(" (minus SLURM_ARRAY_TASK_MIN %q)", lowText)
	}
	if stepText != "" {
		from += fmt.Sprintf(" (divided by SLURM_ARRAY_TASK_STEP %q)", stepText)
	}
	if step < 1 {
		return Spec{}, false, fmt.Errorf("SLURM_ARRAY_TASK_STEP %q is not a step of an array: no shard of SLURM_ARRAY_TASK_ID %q (use --shard I/N)", stepText, id)
	}
	// task < low: far enough below, task-low wraps round into range.
	if err1 != nil || err2 != nil || count < 1 || task < low || task-low < 0 || (task-low)%step != 0 || (task-low)/step >= count {
		return Spec{}, false, fmt.Errorf("SLURM_ARRAY_TASK_ID %q%s / SLURM_ARRAY_TASK_COUNT %q do not name a shard (use --array=0-%d or --shard I/N)", id, from, countText, max(count, 1)-1)
	}
	// The array must be MIN, MIN+STEP, …, MAX: a list such as 1,3,7 has
	// no place to read from the task ID alone.
	if highText != "" && (high < low || high-low < 0 || (high-low)%step != 0 || (high-low)/step != count-1) {
		return Spec{}, false, fmt.Errorf("the Slurm array is not SLURM_ARRAY_TASK_MIN %d to SLURM_ARRAY_TASK_MAX %q in steps of %d (%s tasks): its task IDs do not name shards; use --array=0-%d or --shard I/N", low, highText, step, countText, count-1)
	}
	return Spec{(task - low) / step, count}, true, nil
}

// Pick keeps the shard's points of a sweep.
func (s Spec) Pick(points []int64) []int64 {
	var out []int64
	for i, p := range points {
		if i%s.Count == s.Index {
			out = append(out, p)
		}
	}
	return out
}

// Merge reads shard reports (in env's working directory) and
// joins them. Whether they are of one run is checked before their rows:
// two runs of different world sizes share sizes, and "the same shard
// twice" would name the wrong mistake.
func Merge(env script.Env, files []string) (*report.Report, error) {
	var merged *report.Report
	var first string
	var place *report.Shard // the first report's place in the sweep
	var placeFile string
	shards := map[int]string{}
	seen := map[int64]string{}
	shardOf := map[int64]int{} // a row's shard, by its size
	for i, f := range files {
		data, err := env.ReadInput(f)
		if errors.Is(err, fs.ErrNotExist) && strings.ContainsAny(f, "*?[") {
			// The shell passes a pattern that matches nothing as it is.
			return nil, fmt.Errorf("%s: no file matches this pattern (no shard wrote its report there?)", f)
		}
		if err != nil {
			return nil, err
		}
		var rep report.Report
		if err := json.Unmarshal(data, &rep); err != nil {
			if line, _, more := strings.Cut(strings.TrimSpace(string(data)), "\n"); more && json.Valid([]byte(line)) {
				return nil, fmt.Errorf("%s: --jsonl output (a JSON line per size); merge joins the --json reports of the shards: run them with --json", f)
			}
			return nil, fmt.Errorf("%s: not a kernbench --json report: %w", f, err)
		}
		var comparison struct {
			Runs json.RawMessage `json:"runs"`
		}
		if json.Unmarshal(data, &comparison) == nil && comparison.Runs != nil {
			return nil, fmt.Errorf("%s: the report of a comparison (several algorithms or --vary); merge joins the shards of one algorithm's sweep: run each algorithm's shards on their own", f)
		}
		empty := rep.Algorithm == "" && len(rep.Results) == 0 // a shard with no sizes
		if empty && rep.Shard == nil && rep.Error == nil {
			// null, {} or a --jsonl row cut to one line: merged as
			// nothing, it would pass for a report.
			return nil, fmt.Errorf("%s: not a kernbench --json report (no algorithm, rows or shard record)", f)
		}
		if s := rep.Shard; s != nil && (s.Count < 1 || s.Index < 0 || s.Index >= s.Count) {
			return nil, fmt.Errorf("%s: its shard record is %d/%d, not a shard of a sweep (I/N with 0 <= I < N)", f, s.Index, s.Count)
		}
		if rep.Error != nil {
			at := ""
			if s := rep.Shard; s != nil {
				// The shard's sizes before the failing one are its rows.
				if pts := (Spec{s.Index, s.Count}).Pick(s.Sweep); len(rep.Results) < len(pts) {
					at = fmt.Sprintf(" at %d %s per rank buffer", pts[len(rep.Results)], sweepUnit(s))
				}
			}
			return nil, fmt.Errorf("%s: the shard failed%s: %s", f, at, rep.Error.Message)
		}
		if !empty && merged != nil {
			if err := sameRun(first, merged, f, &rep); err != nil {
				return nil, err
			}
		}
		if i == 0 {
			place, placeFile = rep.Shard, f
		} else if err := sameSweep(placeFile, place, f, rep.Shard); err != nil {
			return nil, err
		}
		if s := rep.Shard; s != nil {
			// A report cut short or edited would leave sizes out of the
			// merged sweep without a word.
			pts := (Spec{s.Index, s.Count}).Pick(s.Sweep)
			if len(rep.Results) != len(pts) {
				return nil, fmt.Errorf("%s: shard %d/%d holds %d rows, but its sizes of the sweep are %d (%s)", f, s.Index, s.Count, len(rep.Results), len(pts), pointList(pts))
			}
			if err := shardRows(f, &rep, pts); err != nil {
				return nil, err
			}
		}
		if empty {
			if rep.Shard != nil {
				shards[rep.Shard.Index] = f
			}
			continue
		}
		if merged == nil {
			head := rep
			head.Results = nil
			merged, first = &head, f
		}
		for _, r := range rep.Results {
			if other, dup := seen[r.Bytes]; dup {
				return nil, fmt.Errorf("%s and %s both hold the row of %d bytes (the same shard twice?)", other, f, r.Bytes)
			}
			seen[r.Bytes] = f
			if rep.Shard != nil {
				shardOf[r.Bytes] = rep.Shard.Index
			}
		}
		if rep.Shard != nil {
			if other, dup := shards[rep.Shard.Index]; dup {
				return nil, fmt.Errorf("%s and %s are both shard %d/%d", other, f, rep.Shard.Index, rep.Shard.Count)
			}
			shards[rep.Shard.Index] = f
		}
		merged.Results = append(merged.Results, rep.Results...)
		if f != first {
			merged.WallS += rep.WallS
		}
	}
	if place != nil {
		for i := 0; i < place.Count && i < len(place.Sweep); i++ {
			if _, ok := shards[i]; !ok {
				what := "sizes"
				if sweepUnit(place) == "elements" {
					what = "counts"
				}
				pts := (Spec{i, place.Count}).Pick(place.Sweep)
				return nil, fmt.Errorf("shard %d/%d is missing (%s %s of the sweep): merge needs the report of every shard", i, place.Count, what, pointList(pts))
			}
		}
	}
	if merged == nil {
		return nil, fmt.Errorf("no rows in %s", strings.Join(files, ", "))
	}
	merged.Shard = nil
	// Whole nanoseconds, as one run's wall_s: a float sum would print
	// 0.1 + 0.2 as 0.30000000000000004.
	merged.WallS = time.Duration(math.Round(merged.WallS * 1e9)).Seconds()
	sort.SliceStable(merged.Results, func(i, j int) bool { return merged.Results[i].Bytes < merged.Results[j].Bytes })
	if place != nil {
		// Every shard holds as many rows as it has sizes; in size order
		// the j-th row must be shard j%N's, else a shard holds another's.
		for j, r := range merged.Results {
			if s := shardOf[r.Bytes]; s != j%place.Count {
				return nil, fmt.Errorf("%s holds the row of %d bytes, size %d of the sweep, which is shard %d/%d's: not the rows of shard %d/%d", seen[r.Bytes], r.Bytes, j+1, j%place.Count, place.Count, s, place.Count)
			}
		}
	}
	merged.NoteAvgBusBW() // (each shard's own is of its rows only)
	return merged, nil
}

// shardRows checks that the rows of shard report rep (file f) are those
// the shard wrote, one for each of its points of the sweep in order: a
// row of a size the sweep does not hold, or with figures edited since
// the run, was merged as if the run had printed it.
func shardRows(f string, rep *report.Report, pts []int64) error {
	s := rep.Shard
	if s.Rows != "" && s.Rows != report.RowsDigest(rep.Results) {
		return fmt.Errorf("%s: its rows are not those shard %d/%d wrote (edited since?): merge joins the reports as kernbench run wrote them", f, s.Index, s.Count)
	}
	coll, ok := collective.Lookup(rep.Collective)
	if !ok {
		return nil // not a collective's sweep: the row count is all there is to check
	}
	mul := int64(1)
	if coll.SendMul || coll.RecvMul {
		mul = int64(rep.WorldSize) // the row is the larger buffer (ccl's row)
	}
	counts := sweepUnit(s) == "elements"
	for i, r := range rep.Results {
		dt, err := dtype.Parse(r.DType)
		if err != nil {
			return fmt.Errorf("%s: the row of %d bytes has dtype %q: %w", f, r.Bytes, r.DType, err)
		}
		n := pts[i] / int64(dt.Size()) // elements per rank
		if counts {
			n = pts[i]
		}
		if want := n * mul; r.Count != want || r.Bytes != want*int64(dt.Size()) {
			return fmt.Errorf("%s: row %d of shard %d/%d is %d bytes (%d elements), but its size of the sweep, %d %s per rank buffer, makes %d bytes (%d elements)", f, i+1, s.Index, s.Count, r.Bytes, r.Count, pts[i], sweepUnit(s), want*int64(dt.Size()), want)
		}
	}
	return nil
}

// pointList prints the sizes (or counts) of a sweep.
func pointList(pts []int64) string {
	out := make([]string, len(pts))
	for i, p := range pts {
		out[i] = strconv.FormatInt(p, 10)
	}
	return strings.Join(out, ", ")
}

// sameSweep checks that two reports are shards of one sweep, run with
// the same settings (those the report's header does not show).
func sameSweep(fa string, a *report.Shard, fb string, b *report.Shard) error {
	switch {
	case a == nil && b == nil:
		return nil // reports without their place (older kernbench): the header and rows are checked
	case a == nil || b == nil:
		if a != nil {
			fa, fb = fb, fa
		}
		return fmt.Errorf("%s is not the report of a shard (kernbench run ... --shard I/N --json), %s is: merge joins the shards of one sweep", fa, fb)
	case a.Count != b.Count:
		return fmt.Errorf("%s is shard %d/%d and %s shard %d/%d: shards of different splits of the sweep", fa, a.Index, a.Count, fb, b.Index, b.Count)
	case !slices.Equal(a.Sweep, b.Sweep):
		return fmt.Errorf("%s and %s are shards of different sweeps (%s vs %s)", fa, fb, sweepText(a.Sweep), sweepText(b.Sweep))
	}
	if !slices.Equal(a.Settings, b.Settings) {
		var diff []string
		for _, s := range a.Settings {
			if !slices.Contains(b.Settings, s) {
				diff = append(diff, s+" only in "+fa)
			}
		}
		for _, s := range b.Settings {
			if !slices.Contains(a.Settings, s) {
				diff = append(diff, s+" only in "+fb)
			}
		}
		return fmt.Errorf("%s and %s are different runs: %s", fa, fb, strings.Join(diff, ", "))
	}
	if a.Config != b.Config {
		return fmt.Errorf("%s and %s are different runs: their configurations differ (ccl.yaml, --config or --set)", fa, fb)
	}
	return nil
}

// sweepUnit says what a shard's sweep counts: bytes, or elements with
// --count.
func sweepUnit(s *report.Shard) string {
	if slices.ContainsFunc(s.Settings, func(f string) bool { return strings.HasPrefix(f, "--count=") }) {
		return "elements"
	}
	return "bytes"
}

func sweepText(s []int64) string {
	if len(s) == 0 {
		return "no sizes"
	}
	return fmt.Sprintf("%d sizes, %d to %d", len(s), s[0], s[len(s)-1])
}

// sameRun checks what the headers of two shards' reports must agree on,
// naming the first field that differs.
func sameRun(fa string, a *report.Report, fb string, b *report.Report) error {
	fields := func(r *report.Report) [][2]string {
		root := ""
		if r.Root != nil {
			root = strconv.Itoa(*r.Root)
		}
		return [][2]string{{"algorithm", r.Algorithm}, {"file", r.File}, {"collective", r.Collective},
			{"topology", r.Topology}, {"mesh_shape", fmt.Sprint(r.MeshShape)}, {"world_size", strconv.Itoa(r.WorldSize)},
			{"root", root}, {"buffer_kind", r.BufferKind}, {"backpressure", r.Backpressure},
			{"data_space", r.DataSpace}, {"timing_only", strconv.FormatBool(r.TimingOnly)}}
	}
	// The element type, reduction and placement are the rows', and
	// whether they were verified those of the rows that ran (a refused
	// size has no figures).
	row := func(r *report.Report) [][2]string {
		for _, x := range r.Results {
			if x.Refused == nil {
				return [][2]string{{"dtype", x.DType}, {"redop", x.RedOp}, {"in_place", strconv.FormatBool(x.InPlace)}, {"verified", strconv.FormatBool(x.Verified)}}
			}
		}
		return nil
	}
	x, y := fields(a), fields(b)
	if rx, ry := row(a), row(b); rx != nil && ry != nil {
		x, y = append(x, rx...), append(y, ry...)
	}
	for i := range x {
		if x[i][1] != y[i][1] {
			return fmt.Errorf("%s and %s are different runs: %s %s in %s, %s in %s", fa, fb, x[i][0], x[i][1], fa, y[i][1], fb)
		}
	}
	return nil
}
