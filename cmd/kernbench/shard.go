package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"kernbench"
	"kernbench/engine/collective"
	"kernbench/engine/dtype"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
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

// shardFromEnv finds the shard of a Slurm array task (SLURM_ARRAY_TASK_ID's
// place among SLURM_ARRAY_TASK_MIN, MIN+STEP, …, MAX, out of
// SLURM_ARRAY_TASK_COUNT) or of a Kubernetes Indexed Job
// (JOB_COMPLETION_INDEX out of --shards N); ok is false outside both.
func shardFromEnv(getenv func(string) string, shards int) (shardSpec, bool, error) {
	if id := getenv("SLURM_ARRAY_TASK_ID"); id != "" && getenv("SLURM_ARRAY_TASK_COUNT") != "" {
		return slurmShard(getenv, id)
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

// slurmShard is the shard of Slurm array task id: its place in the array
// MIN, MIN+STEP, …, MAX of COUNT tasks (MIN 0 and STEP 1 when unset). An
// array that is not evenly stepped (--array=1,3,7) or a task outside it
// names no shard: read as ID-MIN, a task of --array=0-6:2 ran shard 2
// and 4 and 6 none.
func slurmShard(getenv func(string) string, id string) (shardSpec, bool, error) {
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
		return shardSpec{}, false, err
	}
	step, stepText, err := num("SLURM_ARRAY_TASK_STEP", 1)
	if err != nil {
		return shardSpec{}, false, err
	}
	high, highText, err := num("SLURM_ARRAY_TASK_MAX", 0)
	if err != nil {
		return shardSpec{}, false, err
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
		return shardSpec{}, false, fmt.Errorf("SLURM_ARRAY_TASK_STEP %q is not a step of an array: no shard of SLURM_ARRAY_TASK_ID %q (use --shard I/N)", stepText, id)
	}
	// task < low: far enough below, task-low wraps round into range.
	if err1 != nil || err2 != nil || count < 1 || task < low || task-low < 0 || (task-low)%step != 0 || (task-low)/step >= count {
		return shardSpec{}, false, fmt.Errorf("SLURM_ARRAY_TASK_ID %q%s / SLURM_ARRAY_TASK_COUNT %q do not name a shard (use --array=0-%d or --shard I/N)", id, from, countText, max(count, 1)-1)
	}
	// The array must be MIN, MIN+STEP, …, MAX: a list such as 1,3,7 has
	// no place to read from the task ID alone.
	if highText != "" && (high < low || high-low < 0 || (high-low)%step != 0 || (high-low)/step != count-1) {
		return shardSpec{}, false, fmt.Errorf("the Slurm array is not SLURM_ARRAY_TASK_MIN %d to SLURM_ARRAY_TASK_MAX %q in steps of %d (%s tasks): its task IDs do not name shards; use --array=0-%d or --shard I/N", low, highText, step, countText, count-1)
	}
	return shardSpec{(task - low) / step, count}, true, nil
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

// mergeOptions are what the flags and arguments of `kernbench merge` say,
// as cobra parsed them.
type mergeOptions struct {
	Env     script.Env
	Reports []string // the shards' --json reports
	JSON    bool
	Quiet   bool
}

// mergeFunc runs a `kernbench merge` whose flags and arguments are parsed
// into o.
type mergeFunc func(cmd *cobra.Command, o *mergeOptions, stdout, stderr io.Writer) error

func newMergeCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	return newMergeCmdWith(env, stdout, stderr, runMerge)
}

// newMergeCmdWith is the merge command with run as what it runs: tests
// give their own to see the options a command line makes.
func newMergeCmdWith(env script.Env, stdout, stderr io.Writer, run mergeFunc) *cobra.Command {
	o := &mergeOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "merge REPORT.json...",
		Short: "Join the --json reports of a sharded sweep (--shard I/N) into the report one run would print",
		Long: `Join the --json reports of the shards of one sweep (kernbench run ... --shard I/N
--json, one per shard) into the table (or, with --json, the document) a
single run of the whole sweep prints: the same rows in size order. The
reports must come from the same algorithm, settings and sweep, and every
shard must be there; a size or shard that appears twice, a failed shard,
a missing one, a row of a size the shard's part of the sweep does not
hold or rows edited since the run is an error naming the files
(docs/cluster.md). wall_s
is the sum of the shards' wall times. A size a shard refused over
--max-memory is a refused row of the merged sweep, and merge then exits 2
as the run of the whole sweep would.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("merge needs the --json reports of a sharded sweep, as kernbench merge shard-*.json")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, files []string) error {
			o.Reports = files
			return run(cmd, o, stdout, stderr)
		},
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the merged JSON document instead of the table")
	cmd.Flags().BoolVarP(&o.Quiet, "quiet", "q", false, "print only the table")
	return cmd
}

// runMerge runs `kernbench merge`: it joins the reports and renders the
// merged one as one run would.
func runMerge(_ *cobra.Command, o *mergeOptions, stdout, stderr io.Writer) error {
	rep, err := mergeReports(o.Env, o.Reports)
	if err != nil {
		return usageErr(err.Error())
	}
	if o.JSON {
		writeJSON(stdout, rep)
	} else {
		if len(rep.Results) > 0 {
			fmt.Fprintln(stdout, tableHeader())
		}
		for i := range rep.Results {
			fmt.Fprintln(stdout, tableRow(&rep.Results[i]))
		}
		printSummary(stdout, rep, o.Quiet, false)
	}
	// Sizes a shard refused over --max-memory are rows of the merged
	// sweep, and its status says so, as one run's would.
	return worstFailure(refusedSizes([]labeled{{"", rep}}, stderr), nil, stderr)
}

// mergeReports reads shard reports (in env's working directory) and
// joins them. Whether they are of one run is checked before their rows:
// two runs of different world sizes share sizes, and "the same shard
// twice" would name the wrong mistake.
func mergeReports(env script.Env, files []string) (*report.Report, error) {
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
				if pts := (shardSpec{s.Index, s.Count}).pick(s.Sweep); len(rep.Results) < len(pts) {
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
			pts := (shardSpec{s.Index, s.Count}).pick(s.Sweep)
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
				pts := (shardSpec{i, place.Count}).pick(place.Sweep)
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

// notRowFlags are the run flags that change nothing in a report's rows
// (outputs, limits, how the sweep is spread) or whose effect the report
// records elsewhere: the size flags in the shard's sweep, --config and
// --set in its configuration digest, the rest in the header or the rows
// (sameRun), so that a shard relying on a default and one giving the
// same value as a flag still merge. Every other flag set (--seed,
// --jitter-seed, --bench, ...) makes another run.
var notRowFlags = map[string]bool{
	"json": true, "jsonl": true, "jobs": true, "quiet": true, "verbose": true,
	"shard": true, "shards": true, "trace": true, "trace-ranks": true,
	"trace-kinds": true, "oplog": true, "dot": true, "cpuprofile": true,
	"csv": true, "plot": true, "export-msccl": true, "dump-pointers": true,
	"timeout": true, "max-memory": true, "max-steps": true, "check": true,
	"strict": true, "bytes": true, "sweep": true, "minbytes": true,
	"maxbytes": true, "stepfactor": true, "config": true, "set": true,
	"world-size": true, "topology": true, "collective": true, "root": true,
	"data-space": true, "timing-only": true, "verify-data": true,
	"dtype": true, "redop": true, "in-place": true,
}

// rowSettings lists the flags set on cmd that decide a report's rows, as
// --name=value, in name order.
func rowSettings(cmd *cobra.Command) []string {
	out := []string{}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if !notRowFlags[f.Name] {
			out = append(out, "--"+f.Name+"="+f.Value.String())
		}
	})
	return out
}

// configDigest identifies the configuration a run uses (the default,
// ccl.yaml or --config, and --set), whatever file it was read from.
func configDigest(o *runOptions) string {
	cfg, _, err := target.LoadConfig(o.Env, o.ConfigPath, o.Sets, kernbench.Files)
	if err != nil {
		return "" // the run reports it
	}
	c := *cfg
	c.File = ""
	data, err := json.Marshal(&c)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
