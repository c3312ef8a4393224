package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"kernbench"
	"kernbench/engine/collective"
	"kernbench/engine/config"
	"kernbench/engine/msccl"
	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
)

// `kernbench tune COLLECTIVE` answers "which algorithm for which size?":
// it runs every algorithm of the collective (a comparison, as `kernbench
// run A B …` with its --vary grids), picks the fastest per size and
// writes the choice as a select: section of ccl.yaml, which `kernbench run
// auto` then follows size by size.

// tuneOptions are the flags of kernbench tune: run's size, configuration
// and sweep flags (in runOptions, read by its complete), and tune's own.
type tuneOptions struct {
	runOptions
	writeSelect string // --write-select FILE
	// --export-msccl DIR is runOptions.export: run's checks of an
	// output flag's empty value apply to it.
}

// tuneFunc runs a `kernbench tune` whose flags are parsed into o.
type tuneFunc func(cmd *cobra.Command, o *tuneOptions, collective string, names []string, stdout, stderr io.Writer) error

func newTuneCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	return newTuneCmdWith(env, stdout, stderr, runTune)
}

// newTuneCmdWith is the tune command with run as what it runs (tests see
// the options a command line makes without simulating).
func newTuneCmdWith(env script.Env, stdout, stderr io.Writer, run tuneFunc) *cobra.Command {
	o := &tuneOptions{}
	o.Env = env
	cmd := &cobra.Command{
		Use:   "tune COLLECTIVE [ALGORITHM]...",
		Short: "Find the fastest algorithm of a collective per size and write it as ccl.yaml's select: section",
		Long: `Run every algorithm of ccl.yaml whose collective is COLLECTIVE (or
the ALGORITHMs named), with every combination of the --vary values, over
the sizes of the sweep (--bytes, --sweep, -b/-e/-f as for run) at one world
size, as one comparison (the table run prints for several algorithms), then
print for each size the fastest and its margin over the runner-up, and
the ranges of sizes each wins as a select: section.

--write-select FILE writes that section as a ccl.yaml fragment: load it
with --config FILE or paste it into ccl.yaml, and kernbench run auto
--collective COLLECTIVE (or defaults.algorithm: auto) runs, for each size,
the algorithm and --vary values it records. A size between two measured
sizes takes the winner of the smaller; below the smallest, the smallest's;
above the largest, the largest's.

--export-msccl DIR writes each range's winner as an MSCCL schedule, with
the range as its minBytes and maxBytes (the MSCCL runtime picks the
schedule whose range holds a call's size): DIR/COLLECTIVE_I_ALGORITHM.xml.
An algorithm that cannot be exported is reported and skipped.

A run that fails (an algorithm that does not support the world size) is a
row naming its error, left out of the selection; the command then exits
with its status (name the ALGORITHMs to leave it out). -j runs the
algorithms side by side; --shard I/N runs every N-th size (see run).

--json prints one JSON document in place of the tables: the runs as
kernbench run A B --json has them ("runs"), and the tune's answer
("tune": the collective, world size, winner per size with its margin,
the sizes without one, and the select: ranges).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("tune needs the collective to tune (one of %s), as kernbench tune allreduce", strings.Join(collective.Names(), ", "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, o, args[0], args[1:], stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ConfigPath, "config", "", "ccl.yaml laid over the embedded default (default ./ccl.yaml if present)")
	f.StringArrayVar(&o.Sets, "set", nil, "override a ccl.yaml value: key.path=value (repeatable)")
	f.StringArrayVar(&o.Faults, "fault", nil, "add a fault (as for run; see docs/faults.md)")
	f.IntVar(&o.WorldSize, "world-size", 0, "number of ranks (default: ccl.yaml)")
	addLoadPath(f, &o.LoadPath)
	f.StringVar(&o.bytes, "bytes", "", "one size in bytes per rank buffer, e.g. 64K (default 1M)")
	f.StringVar(&o.sweep, "sweep", "", "sizes MIN:MAX[:FACTOR], e.g. 1K:4M (factor 2)")
	f.StringVarP(&o.minBytes, "minbytes", "b", "", "smallest size of a sweep")
	f.StringVarP(&o.maxBytes, "maxbytes", "e", "", "largest size of a sweep")
	f.Float64VarP(&o.factor, "stepfactor", "f", 2, "size multiplier between the sizes of a -b/-e sweep")
	f.StringVar(&o.DType, "dtype", "f32", "f32 | f16 | bf16 | f64 | i32 | i64 | u8")
	f.BoolVar(&o.Verify, "verify-data", true, "check results against the reference (a wrong algorithm is left out of the selection)")
	f.BoolVar(&o.TimingOnly, "timing-only", false, "move and store no bytes: the same simulated times, far less memory, nothing checked")
	f.StringArrayVar(&o.vary, "vary", nil, "also run once per value of a ccl.yaml key: key.path=v1,v2,… (repeatable: every combination); the winning values go into select:")
	f.IntVarP(&o.Jobs, "jobs", "j", 1, "simulate up to N runs at once (output identical to -j 1)")
	f.StringVar(&o.shard, "shard", "", "run only shard I/N of the sweep's sizes (as for run); each shard's select: covers its sizes")
	f.IntVar(&o.shards, "shards", 0, "number of shards when the index comes from JOB_COMPLETION_INDEX")
	f.StringVar(&o.maxMemory, "max-memory", "", "host memory a run may use, e.g. 4G (as for run)")
	f.Uint64Var(&o.maxSteps, "max-steps", 0, "Starlark step limit per thread (0 = default 10^8)")
	f.DurationVar(&o.timeout, "timeout", 0, "stop the runs' Starlark code after this wall-clock time (0 = none)")
	f.StringVar(&o.writeSelect, "write-select", "", "write the select: section as a ccl.yaml fragment to FILE (- for stdout)")
	f.StringVar(&o.export, "export-msccl", "", "write each range's winner as MSCCL XML with its minBytes/maxBytes into the folder DIR")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the tables")
	f.BoolVar(&o.json, "json", false, "print one JSON document instead of the tables: the runs as compare's --json has them, the winners and the select: ranges")
	return cmd
}

// tuneCandidate is one run of a tune (a variant) at one size.
type tuneCandidate struct {
	Label     string   // the variant's label, as the table names it
	Algorithm string   // its ccl.yaml algorithm
	Set       []string // its --vary items
	TimeNs    float64  // simulated time
}

// tuneSize is one size of the sweep and the runs that gave a right
// result for it, in variant order.
type tuneSize struct {
	Bytes      int64 // bytes per rank buffer, as --bytes gives them
	Candidates []tuneCandidate
}

// tuneWinner is the fastest run at one size and the next fastest other
// run (nil when only one ran).
type tuneWinner struct {
	Bytes    int64
	Best     tuneCandidate
	RunnerUp *tuneCandidate
}

// tuneJSON is the answer of a tune in --json's document, beside the
// comparison's runs: the winner of each size (a size no run finished
// right is in missing) and the ranges of select:.
type tuneJSON struct {
	Collective string           `json:"collective"`
	WorldSize  int              `json:"world_size"`
	Sizes      []int64          `json:"sizes"`
	Shard      string           `json:"shard,omitempty"` // "I/N": the ranges cover its sizes
	Winners    []tuneWinnerJSON `json:"winners"`
	Missing    []int64          `json:"missing,omitempty"`
	Select     []tuneRangeJSON  `json:"select"`
	Exported   []tuneExportJSON `json:"exported,omitempty"`
}

type tuneCandidateJSON struct {
	Label     string   `json:"label"`
	Algorithm string   `json:"algorithm"`
	Set       []string `json:"set,omitempty"`
	TimeNs    float64  `json:"sim_time_ns"`
}

type tuneWinnerJSON struct {
	Bytes int64 `json:"bytes"`
	tuneCandidateJSON
	// RunnerUp is the next fastest run, Speedup its time over the
	// winner's (absent when only one run finished right).
	RunnerUp *tuneCandidateJSON `json:"runner_up,omitempty"`
	Speedup  float64            `json:"speedup,omitempty"`
}

type tuneRangeJSON struct {
	MinBytes  int64    `json:"min_bytes"`
	MaxBytes  int64    `json:"max_bytes,omitempty"` // absent: no upper bound
	Algorithm string   `json:"algorithm"`
	Set       []string `json:"set,omitempty"`
}

// tuneExportJSON is a schedule --export-msccl wrote.
type tuneExportJSON struct {
	File      string `json:"file"`
	Algorithm string `json:"algorithm"`
	Range     string `json:"range"`
}

func candidateJSON(c tuneCandidate) tuneCandidateJSON {
	return tuneCandidateJSON{Label: c.Label, Algorithm: c.Algorithm, Set: c.Set, TimeNs: c.TimeNs}
}

// pickWinners is the fastest candidate of each size, the first in
// variant order on a tie; a size no run finished right has no winner.
func pickWinners(sizes []tuneSize) []tuneWinner {
	var out []tuneWinner
	for _, s := range sizes {
		if len(s.Candidates) == 0 {
			continue
		}
		order := slices.Clone(s.Candidates)
		slices.SortStableFunc(order, func(a, b tuneCandidate) int {
			switch {
			case a.TimeNs < b.TimeNs:
				return -1
			case a.TimeNs > b.TimeNs:
				return 1
			}
			return 0
		})
		w := tuneWinner{Bytes: s.Bytes, Best: order[0]}
		if len(order) > 1 {
			w.RunnerUp = &order[1]
		}
		out = append(out, w)
	}
	return out
}

// margin is how the winner beats the runner-up: "1.23× faster than
// ring_allreduce".
func (w tuneWinner) margin() string {
	switch {
	case w.RunnerUp == nil:
		return "the only run"
	case w.RunnerUp.TimeNs == w.Best.TimeNs:
		return fmt.Sprintf("tied with %s (the first listed wins)", w.RunnerUp.Label)
	case w.RunnerUp.TimeNs < w.Best.TimeNs*1.005:
		// A closer race than two decimals show.
		return fmt.Sprintf("%.4f× faster than %s", w.RunnerUp.TimeNs/w.Best.TimeNs, w.RunnerUp.Label)
	}
	return fmt.Sprintf("%.2f× faster than %s", w.RunnerUp.TimeNs/w.Best.TimeNs, w.RunnerUp.Label)
}

// selectRanges turns the winners of a sweep's sizes (sweep: all its
// sizes, ascending, of which winners may hold a shard's) into ranges
// of sizes: each measured size wins from itself up to the next size of
// the sweep, the smallest from 0 and the largest with no upper bound.
// Adjacent ranges with the same algorithm and settings are one.
func selectRanges(sweep []int64, winners []tuneWinner) []config.SelectRange {
	var out []config.SelectRange
	for _, w := range winners {
		i := slices.Index(sweep, w.Bytes)
		if i < 0 {
			continue
		}
		r := config.SelectRange{MinBytes: w.Bytes, Algorithm: w.Best.Algorithm, Set: slices.Clone(w.Best.Set)}
		if i == 0 {
			r.MinBytes = 0
		}
		if i+1 < len(sweep) {
			r.MaxBytes = sweep[i+1]
		}
		if n := len(out); n > 0 && out[n-1].MaxBytes == r.MinBytes && out[n-1].Algorithm == r.Algorithm && slices.Equal(out[n-1].Set, r.Set) {
			out[n-1].MaxBytes = r.MaxBytes
			continue
		}
		out = append(out, r)
	}
	return out
}

// selectYAML is select: for one collective as a ccl.yaml fragment, under
// comment lines (header, without the "# ").
func selectYAML(collective string, ranges []config.SelectRange, header []string) []byte {
	var b bytes.Buffer
	for _, h := range header {
		fmt.Fprintf(&b, "# %s\n", h)
	}
	fmt.Fprintf(&b, "select:\n  %s:\n", collective)
	for _, r := range ranges {
		fmt.Fprintf(&b, "    - {min_bytes: %d", r.MinBytes)
		if r.MaxBytes != 0 {
			fmt.Fprintf(&b, ", max_bytes: %d", r.MaxBytes)
		}
		fmt.Fprintf(&b, ", algorithm: %s", r.Algorithm)
		if len(r.Set) > 0 {
			items := make([]string, len(r.Set))
			for i, s := range r.Set {
				q, _ := json.Marshal(s) // a JSON string is a YAML double-quoted one
				items[i] = string(q)
			}
			fmt.Fprintf(&b, ", set: [%s]", strings.Join(items, ", "))
		}
		b.WriteString("}\n")
	}
	return b.Bytes()
}

// rangesText is the ranges on one line: "[0, 65536) rd_allreduce,
// [65536, ∞) ring_allreduce".
func rangesText(ranges []config.SelectRange) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = r.RangeString() + " " + r.Algorithm
		if len(r.Set) > 0 {
			parts[i] += " " + strings.Join(r.Set, " ")
		}
	}
	return strings.Join(parts, ", ")
}

// tuneAlgorithms are the algorithms a tune of collective runs: names,
// each of the configuration and not of another collective, or else
// every algorithm whose entry names collective.
func tuneAlgorithms(cfg *config.Config, collective string, names []string) ([]string, error) {
	if !slices.Contains(config.Collectives(), collective) {
		return nil, fmt.Errorf("tune: unknown collective %q (want one of %s)", collective, strings.Join(config.Collectives(), ", "))
	}
	if len(names) == 0 {
		for _, n := range cfg.AlgorithmNames {
			if cfg.Algorithms[n].Collective == collective {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("tune: no algorithm of %s names collective: %s; name the algorithms to run", cfg.File, collective)
		}
		return names, nil
	}
	for i, n := range names {
		a, err := cfg.Algorithm(n)
		if err != nil {
			return nil, fmt.Errorf("tune: %v", err)
		}
		if a.Collective != "" && a.Collective != collective {
			return nil, fmt.Errorf("tune: %s is an algorithm of %s, not %s", n, a.Collective, collective)
		}
		if slices.Contains(names[:i], n) {
			return nil, fmt.Errorf("tune: %s is named twice", n)
		}
	}
	return names, nil
}

// runTune runs the tune of collective: the comparison, then the winners
// and the select: section.
func runTune(cmd *cobra.Command, o *tuneOptions, collective string, names []string, stdout, stderr io.Writer) error {
	if err := o.complete(cmd, stderr); err != nil {
		return usageErr(err.Error())
	}
	o.Watchdog = script.NewWatchdog(o.timeout, "--timeout "+o.timeout.String())
	defer o.Watchdog.Stop()
	if len(o.Sizes) == 0 {
		o.Sizes = []int64{1 << 20}
	}
	sweep := slices.Clone(o.Sizes)
	o.RefusedAsRows = len(sweep) > 1
	shard, sharded, err := shardFromEnv(o.Env.Var, o.shards)
	if o.shard != "" {
		shard, err = parseShard(o.shard)
		sharded = true
	}
	if err != nil {
		return usageErr(err.Error())
	}
	if !sharded && o.shards > 0 {
		return usageErr(fmt.Sprintf("--shards %d takes the shard index from JOB_COMPLETION_INDEX, which is not set; elsewhere use --shard I/%d", o.shards, o.shards))
	}
	if sharded {
		o.Sizes = shard.pick(sweep)
		if len(o.Sizes) == 0 {
			fmt.Fprintf(stderr, "kernbench: shard %d/%d has no sizes of this sweep; nothing to run\n", shard.index, shard.count)
			return nil
		}
	}
	cfg, _, err := target.LoadConfig(o.Env, o.ConfigPath, o.Sets, kernbench.Files)
	if err != nil {
		return asFailure(err)
	}
	algs, err := tuneAlgorithms(cfg, collective, names)
	if err != nil {
		return usageErr(err.Error())
	}
	axes, err := parseVary(o.vary, o.Sets)
	if err != nil {
		return usageErr(err.Error())
	}
	for _, a := range axes {
		if within(a.key, "defaults.algorithm") || within(a.key, "select") {
			return usageErr(fmt.Sprintf("tune: --vary %s: name the algorithms to compare as arguments (kernbench tune %s A B)", a.key, collective))
		}
		if p := strings.Split(a.key, "."); within(a.key, "defaults.world_size") || len(p) == 3 && p[0] == "algorithms" && p[2] == "world_size" {
			return usageErr(fmt.Sprintf("tune: --vary %s: tune compares algorithms at one world size; tune once per world size (--world-size N)", a.key))
		}
	}
	outs := map[string]string{"--write-select": o.writeSelect}
	dests, err := resolveOutputs(o.Env, outs)
	if err != nil {
		return usageErr(err.Error())
	}
	inputs := []string{o.ConfigPath}
	if o.ConfigPath == "" {
		inputs = append(inputs, "ccl.yaml")
	}
	if err := outputOverInput(o.Env, dests, inputs); err != nil {
		return usageErr(err.Error())
	}
	outStdout := stdout
	if d := dests["--write-select"]; d != nil && d.stdout {
		if o.json {
			return usageErr("--write-select - writes to stdout, where --json prints the tune; give --write-select a file")
		}
		stdout = stderr // the fragment has stdout to itself
	}
	if o.export != "" {
		if st, err := os.Stat(o.Env.Path(o.export)); err == nil && !st.IsDir() {
			return usageErr(fmt.Sprintf("--export-msccl %s: not a folder (tune writes one schedule per range into it)", o.export))
		}
	}
	variants := expandVariants(algs, axes, "")
	tables := stdout
	if o.json {
		// One document: the comparison's runs go into it below.
		tables = io.Discard
	}
	reps, runErr := compareReports(&o.runOptions, variants, tables, stderr)
	if reps == nil {
		return runErr
	}
	sizes := make([]tuneSize, len(o.Sizes))
	world := 0
	for i, n := range o.Sizes {
		sizes[i].Bytes = n
	}
	var worlds []string // label and world size of each run that started
	for _, l := range reps {
		if l.rep.Collective != "" {
			worlds = append(worlds, fmt.Sprintf("%s %d", l.label, l.rep.WorldSize))
			if world == 0 {
				world = l.rep.WorldSize
			} else if l.rep.WorldSize != world {
				// An entry's own world_size: the times do not compare.
				return usageErr(fmt.Sprintf("tune: the runs ran at different world sizes (%s): give --world-size N", strings.Join(worlds, ", ")))
			}
		}
	}
	for j, l := range reps {
		for i, r := range l.rep.Results {
			if i >= len(sizes) || r.Refused != nil || r.Verdict() != nil {
				continue
			}
			sizes[i].Candidates = append(sizes[i].Candidates, tuneCandidate{
				Label: l.label, Algorithm: variants[j].target, Set: variants[j].sets, TimeNs: r.SimTimeNs})
		}
	}
	winners := pickWinners(sizes)
	ranges := selectRanges(sweep, winners)
	var missing []string
	for _, s := range sizes {
		if !slices.ContainsFunc(winners, func(w tuneWinner) bool { return w.Bytes == s.Bytes }) {
			missing = append(missing, fmt.Sprint(s.Bytes))
		}
	}
	if !o.json {
		printTune(stdout, collective, world, sizes, winners, ranges)
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "kernbench: tune: no run of %s finished right at %s bytes: select: has no range for them, and auto refuses them\n", collective, strings.Join(missing, ", "))
	}
	if d := dests["--write-select"]; d != nil && len(ranges) > 0 {
		header := []string{
			fmt.Sprintf("Written by kernbench tune %s at world_size %d, sizes %s.", collective, world, sizesText(sweep)),
			"Load it with --config FILE or paste it into ccl.yaml; then",
			fmt.Sprintf("kernbench run auto --collective %s runs, per size, the algorithm of its range.", collective),
		}
		if sharded {
			header = append(header, fmt.Sprintf("Shard %d/%d: the ranges of its sizes only; join the shards' lists.", shard.index, shard.count))
		}
		if f := writeOutput(o.Env, d, outStdout, selectYAML(collective, ranges, header)); f != nil {
			return f
		}
	}
	var exported []tuneExportJSON
	if o.export != "" {
		var f *report.Failure
		if exported, f = exportRanges(o, collective, ranges, winners, stdout, stderr); f != nil {
			return f
		}
	}
	if o.json {
		doc := tuneJSON{Collective: collective, WorldSize: world, Sizes: o.Sizes, Winners: []tuneWinnerJSON{}, Select: []tuneRangeJSON{}, Exported: exported}
		if sharded {
			doc.Shard = fmt.Sprintf("%d/%d", shard.index, shard.count)
		}
		for _, w := range winners {
			j := tuneWinnerJSON{Bytes: w.Bytes, tuneCandidateJSON: candidateJSON(w.Best)}
			if w.RunnerUp != nil {
				r := candidateJSON(*w.RunnerUp)
				j.RunnerUp = &r
				if w.Best.TimeNs > 0 {
					j.Speedup = w.RunnerUp.TimeNs / w.Best.TimeNs
				}
			}
			doc.Winners = append(doc.Winners, j)
		}
		for _, s := range sizes {
			if !slices.ContainsFunc(winners, func(w tuneWinner) bool { return w.Bytes == s.Bytes }) {
				doc.Missing = append(doc.Missing, s.Bytes)
			}
		}
		for _, r := range ranges {
			doc.Select = append(doc.Select, tuneRangeJSON{MinBytes: r.MinBytes, MaxBytes: r.MaxBytes, Algorithm: r.Algorithm, Set: r.Set})
		}
		all := struct {
			Runs []compareReport `json:"runs"`
			Tune tuneJSON        `json:"tune"`
		}{Tune: doc}
		for _, l := range reps {
			all.Runs = append(all.Runs, compareReport{Label: l.label, Report: l.rep})
		}
		writeJSON(stdout, all)
	}
	return runErr
}

// printTune prints the tune's table: the winner of each size with its
// margin, and the select: ranges on one line.
func printTune(stdout io.Writer, collective string, world int, sizes []tuneSize, winners []tuneWinner, ranges []config.SelectRange) {
	fmt.Fprintf(stdout, "\n# tune %s at world_size %d: the fastest per size\n", collective, world)
	width := len("algorithm")
	for _, w := range winners {
		width = max(width, len(w.Best.Label))
	}
	fmt.Fprintf(stdout, "%10s  %-*s  %10s  %s\n", "size", width, "algorithm", "time(us)", "margin")
	for _, s := range sizes {
		i := slices.IndexFunc(winners, func(w tuneWinner) bool { return w.Bytes == s.Bytes })
		if i < 0 {
			fmt.Fprintf(stdout, "%10d  %-*s\n", s.Bytes, width, "(none: no run finished right)")
			continue
		}
		w := winners[i]
		fmt.Fprintf(stdout, "%10d  %-*s  %10.3f  %s\n", w.Bytes, width, w.Best.Label, w.Best.TimeNs/1000, w.margin())
	}
	if len(ranges) > 0 {
		fmt.Fprintf(stdout, "# select.%s: %s\n", collective, rangesText(ranges))
	}
}

// sizesText is a sweep's sizes for a comment: "1024, 4096, …, 1048576".
func sizesText(sweep []int64) string {
	parts := make([]string, len(sweep))
	for i, n := range sweep {
		parts[i] = fmt.Sprint(n)
	}
	if len(parts) > 6 {
		parts = append(parts[:3], "…", parts[len(parts)-1])
	}
	return strings.Join(parts, ", ")
}

// exportRanges writes each range's winner as MSCCL XML into
// o.export, recorded at the smallest measured size of its range, with
// the range as minBytes/maxBytes. A winner that cannot be exported is
// reported and skipped; a file that cannot be written fails the command.
func exportRanges(o *tuneOptions, collective string, ranges []config.SelectRange, winners []tuneWinner, stdout, stderr io.Writer) ([]tuneExportJSON, *report.Failure) {
	if err := os.MkdirAll(o.Env.Path(o.export), 0o755); err != nil {
		return nil, ioFailure(fmt.Sprintf("--export-msccl %s: %v", o.export, err), err)
	}
	var written []tuneExportJSON
	for i, r := range ranges {
		at := int64(-1) // the measured size the range starts from
		for _, w := range winners {
			if r.Contains(w.Bytes) {
				at = w.Bytes
				break
			}
		}
		if at < 0 {
			continue
		}
		var buf bytes.Buffer
		opts := o.Options
		opts.Vary = r.Set
		opts.Sizes, opts.Counts = []int64{at}, nil
		opts.Jobs = 1
		opts.OnResult, opts.OnStart, opts.Progress = nil, nil, nil
		opts.ExportMSCCL = &buf
		var diag bytes.Buffer
		opts.Stderr = &diag
		_, err := ccl.Run(r.Algorithm, opts)
		if err == nil {
			err = setRange(&buf, r)
		}
		if err != nil {
			msg, _, _ := strings.Cut(asFailure(err).Msg, "\n")
			msg = strings.TrimPrefix(msg, "--export-msccl: ") // the line names it already
			fmt.Fprintf(stderr, "kernbench: tune: --export-msccl: %s for %s cannot be exported, skipped: %s\n", r.Algorithm, r.RangeString(), msg)
			continue
		}
		name := filepath.Join(o.export, fmt.Sprintf("%s_%d_%s.xml", collective, i, r.Algorithm))
		d, err := resolveOutput(o.Env, "--export-msccl", name)
		if err != nil {
			return written, ioFailure(err.Error(), err)
		}
		if f := writeOutput(o.Env, d, stdout, buf.Bytes()); f != nil {
			return written, f
		}
		written = append(written, tuneExportJSON{File: name, Algorithm: r.Algorithm, Range: r.RangeString()})
		if !o.quiet && !o.json {
			fmt.Fprintf(stdout, "# wrote %s: %s for %s\n", name, r.Algorithm, r.RangeString())
		}
	}
	return written, nil
}

// ioFailure is an output's failure to be written (exit status of IO).
func ioFailure(msg string, err error) *report.Failure {
	return report.WithKind(errkind.IO, &report.Failure{Rank: -1, Msg: msg, Err: err})
}

// setRange gives the exported schedule in buf the byte range of r
// (minBytes, maxBytes: MSCCL's runtime runs a schedule for the calls
// whose size lies in its range).
func setRange(buf *bytes.Buffer, r config.SelectRange) error {
	a, err := msccl.Parse("exported schedule", buf.Bytes())
	if err != nil {
		return err
	}
	a.MinBytes, a.MaxBytes = r.MinBytes, r.MaxBytes
	buf.Reset()
	return a.Write(buf)
}

// autoVariants are the runs of `kernbench run auto`: for each size of
// the command, the algorithm and --set items of the select: range that
// holds it, one variant per range (its sizes in order). The collective
// is --collective, else the only one select: has.
func autoVariants(o *runOptions) ([]variant, []string, error) {
	cfg, _, err := target.LoadConfig(o.Env, o.ConfigPath, o.Sets, kernbench.Files)
	if err != nil {
		return nil, nil, err
	}
	coll := o.Collective
	if coll == "" {
		var have []string
		for k := range cfg.Select {
			have = append(have, k)
		}
		slices.Sort(have)
		switch len(have) {
		case 0:
			return nil, nil, usageError("auto runs what select: of ccl.yaml records per size, and this configuration has none; kernbench tune COLLECTIVE --write-select FILE writes one (then --config FILE)")
		case 1:
			coll = have[0]
		default:
			return nil, nil, usageError(fmt.Sprintf("auto: select: has ranges for %s; say which with --collective", strings.Join(have, ", ")))
		}
	}
	sizes := o.Sizes
	if len(o.Counts) > 0 {
		return nil, nil, usageError("auto picks by bytes per rank buffer: give --bytes, --sweep or -b/-e, not --count")
	}
	if len(sizes) == 0 {
		sizes = []int64{1 << 20}
	}
	var out []variant
	var notes []string
	index := map[string]int{} // variant key -> position in out
	for _, n := range sizes {
		r, err := cfg.Pick(coll, n)
		if err != nil {
			return nil, nil, usageError("auto: " + err.Error())
		}
		key := r.Algorithm + "\x00" + strings.Join(r.Set, "\x00")
		i, ok := index[key]
		if !ok {
			label := r.Algorithm
			if len(r.Set) > 0 {
				label += " " + strings.Join(r.Set, " ")
			}
			i = len(out)
			index[key] = i
			out = append(out, variant{target: r.Algorithm, sets: slices.Clone(r.Set), label: label})
			notes = append(notes, fmt.Sprintf("auto: select.%s %s (%s) runs %s for", coll, r.RangeString(), r.Pos, label))
		}
		out[i].sizes = append(out[i].sizes, n)
		notes[i] += fmt.Sprintf(" %d", n)
	}
	return out, notes, nil
}

// runAuto runs `kernbench run auto`: a comparison whose variants are the
// algorithms select: picks, each at its own sizes.
func runAuto(o *runOptions, compare []string, sharded bool, stdout, stderr io.Writer) error {
	switch {
	case compare != nil || len(o.vary) > 0:
		return usageErr("auto runs, per size, the algorithm select: records: it is not compared with other algorithms or --vary; compare the algorithms it names (kernbench run A B)")
	case sharded || o.export != "" || o.exportChakra != "":
		return usageErr("auto runs an algorithm per size: run the algorithm it picks to shard its sweep or export its schedule")
	}
	variants, notes, err := autoVariants(o)
	var f *report.Failure
	switch {
	case errors.As(err, &f):
		return f // the configuration does not load
	case err != nil:
		return usageErr(err.Error())
	}
	// A --set defaults.algorithm=auto took effect: it chose auto. The
	// variants name their algorithms, which it would be refused beside.
	o.Sets = slices.DeleteFunc(slices.Clone(o.Sets), func(item string) bool {
		k, _, _ := strings.Cut(item, "=")
		return strings.TrimSpace(k) == "defaults.algorithm"
	})
	if !o.quiet && !o.json && !o.jsonl {
		for _, n := range notes {
			fmt.Fprintf(stdout, "# %s\n", n)
		}
	}
	return runCompare(o, variants, stdout, stderr)
}
