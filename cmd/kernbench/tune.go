package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"kernbench"
	"kernbench/cmd/kernbench/internal/compare"
	"kernbench/cmd/kernbench/internal/output"
	"kernbench/cmd/kernbench/internal/render"
	"kernbench/cmd/kernbench/internal/shards"
	"kernbench/cmd/kernbench/internal/tune"
	"kernbench/engine/collective"
	"kernbench/engine/config"
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
the ranges of sizes each wins as a select: section. Every run is of
COLLECTIVE: an algorithm written for another (its entry's collective: or
its module's COLLECTIVE) is refused in its row.

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
	addThreads(f, &o.Threads)
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
	shard, sharded, err := shards.FromEnv(o.Env.Var, o.shards)
	if o.shard != "" {
		shard, err = shards.Parse(o.shard)
		sharded = true
	}
	if err != nil {
		return usageErr(err.Error())
	}
	if !sharded && o.shards > 0 {
		return usageErr(fmt.Sprintf("--shards %d takes the shard index from JOB_COMPLETION_INDEX, which is not set; elsewhere use --shard I/%d", o.shards, o.shards))
	}
	if sharded {
		o.Sizes = shard.Pick(sweep)
		if len(o.Sizes) == 0 {
			fmt.Fprintf(stderr, "kernbench: shard %d/%d has no sizes of this sweep; nothing to run\n", shard.Index, shard.Count)
			return nil
		}
	}
	cfg, _, err := target.LoadConfig(o.Env, o.ConfigPath, o.Sets, kernbench.Files)
	if err != nil {
		return asFailure(err)
	}
	algs, err := tune.Algorithms(cfg, collective, names)
	if err != nil {
		return usageErr(err.Error())
	}
	axes, err := compare.ParseVary(o.vary, o.Sets)
	if err != nil {
		return usageErr(err.Error())
	}
	for _, a := range axes {
		if compare.Within(a.Key, "defaults.algorithm") || compare.Within(a.Key, "select") {
			return usageErr(fmt.Sprintf("tune: --vary %s: name the algorithms to compare as arguments (kernbench tune %s A B)", a.Key, collective))
		}
		if p := strings.Split(a.Key, "."); compare.Within(a.Key, "defaults.world_size") || len(p) == 3 && p[0] == "algorithms" && p[2] == "world_size" {
			return usageErr(fmt.Sprintf("tune: --vary %s: tune compares algorithms at one world size; tune once per world size (--world-size N)", a.Key))
		}
	}
	outs := map[string]string{"--write-select": o.writeSelect}
	dests, err := output.ResolveAll(o.Env, outs)
	if err != nil {
		return usageErr(err.Error())
	}
	inputs := []string{o.ConfigPath}
	if o.ConfigPath == "" {
		inputs = append(inputs, "ccl.yaml")
	}
	if err := output.OverInput(o.Env, dests, inputs); err != nil {
		return usageErr(err.Error())
	}
	outStdout := stdout
	if d := dests["--write-select"]; d != nil && d.Stdout() {
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
	variants := compare.Expand(algs, axes, "")
	// Every run is of the collective tuned: an algorithm whose entry
	// names none (its module's COLLECTIVE, else allreduce, for run) ran
	// as that instead, and its times stood in a tune of another
	// collective.
	o.Collective, o.CollectiveOf = collective, "tune "+collective
	tables := stdout
	if o.json {
		// One document: the comparison's runs go into it below.
		tables = io.Discard
	}
	reps, runErr := compareReports(&o.runOptions, variants, tables, stderr)
	if reps == nil {
		return runErr
	}
	sizes := make([]tune.Size, len(o.Sizes))
	world := 0
	for i, n := range o.Sizes {
		sizes[i].Bytes = n
	}
	var worlds []string // label and world size of each run that started
	for _, l := range reps {
		if l.Rep.Collective != "" {
			worlds = append(worlds, fmt.Sprintf("%s %d", l.Label, l.Rep.WorldSize))
			if world == 0 {
				world = l.Rep.WorldSize
			} else if l.Rep.WorldSize != world {
				// An entry's own world_size: the times do not compare.
				return usageErr(fmt.Sprintf("tune: the runs ran at different world sizes (%s): give --world-size N", strings.Join(worlds, ", ")))
			}
		}
	}
	for j, l := range reps {
		for i, r := range l.Rep.Results {
			if i >= len(sizes) || r.Refused != nil || r.Verdict() != nil {
				continue
			}
			sizes[i].Candidates = append(sizes[i].Candidates, tune.Candidate{
				Label: l.Label, Algorithm: variants[j].Target, Set: variants[j].Sets, TimeNs: r.SimTimeNs})
		}
	}
	if world == 0 {
		// No run started (each failed before simulating): the world
		// asked for, if any (the tune's header said world_size 0).
		world = o.WorldSize
	}
	winners := tune.PickWinners(sizes)
	ranges := tune.SelectRanges(sweep, winners)
	for i := range ranges {
		ranges[i].WorldSize = world // auto picks them at this world size only
	}
	var missing []string
	for _, s := range sizes {
		if !slices.ContainsFunc(winners, func(w tune.Winner) bool { return w.Bytes == s.Bytes }) {
			missing = append(missing, fmt.Sprint(s.Bytes))
		}
	}
	if !o.json {
		printTune(stdout, collective, world, len(variants), sizes, winners, ranges)
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "kernbench: tune: no run of %s finished right at %s bytes: select: has no range for them, and auto refuses them\n", collective, strings.Join(missing, ", "))
	}
	if d := dests["--write-select"]; d != nil && len(ranges) > 0 {
		load := "Load it with --config FILE or paste it into ccl.yaml; then"
		if file, own := ownAlgorithms(o, cfg, ranges); len(own) > 0 {
			// --config FILE replaces ./ccl.yaml (or the --config tuned
			// with), and with it the entries of these algorithms.
			load = fmt.Sprintf("Paste it into %s, which defines %s (--config FILE in its place would not); then", file, strings.Join(own, ", "))
		}
		header := []string{
			fmt.Sprintf("Written by kernbench tune %s at world_size %d, sizes %s.", collective, world, tune.SizesText(sweep)),
			load,
			fmt.Sprintf("kernbench run auto --collective %s runs, per size, the algorithm of its range.", collective),
		}
		if sharded {
			header = append(header, fmt.Sprintf("Shard %d/%d: the ranges of its sizes only; join the shards' lists.", shard.Index, shard.Count))
		}
		if f := output.Write(o.Env, d, outStdout, tune.SelectYAML(collective, ranges, header)); f != nil {
			return f
		}
	}
	var exported []tune.Exported
	if o.export != "" {
		var f *report.Failure
		if exported, f = exportRanges(o, collective, ranges, winners, stdout, stderr); f != nil {
			return f
		}
	}
	if o.json {
		answer := tune.NewAnswer(collective, world, sizes, winners, ranges)
		answer.Exported = exported
		if sharded {
			answer.Shard = fmt.Sprintf("%d/%d", shard.Index, shard.Count)
		}
		all := struct {
			Runs []compare.Report `json:"runs"`
			Tune tune.Answer      `json:"tune"`
		}{Tune: answer}
		for _, l := range reps {
			all.Runs = append(all.Runs, compare.Report{Label: l.Label, Report: l.Rep})
		}
		render.JSON(stdout, all)
	}
	return runErr
}

// ownAlgorithms are the algorithms of ranges whose entry the tune's
// configuration file defines (a module of its own, not a shipped one),
// and that file (--config, or ./ccl.yaml when present): a select: loaded
// with --config in place of that file would name algorithms unknown
// there. nil with the embedded default alone.
func ownAlgorithms(o *tuneOptions, cfg *config.Config, ranges []config.SelectRange) (file string, own []string) {
	switch {
	case o.ConfigPath != "":
		file = o.ConfigPath
	default:
		if _, err := o.Env.Stat("ccl.yaml"); err != nil {
			return "", nil
		}
		file = "ccl.yaml"
	}
	for _, r := range ranges {
		if a := cfg.Algorithms[r.Algorithm]; a != nil && !a.Shipped && !slices.Contains(own, r.Algorithm) {
			own = append(own, r.Algorithm)
		}
	}
	return file, own
}

// printTune prints the tune's table: the winner of each size with its
// margin, and the select: ranges on one line.
func printTune(stdout io.Writer, collectiveName string, world, runs int, sizes []tune.Size, winners []tune.Winner, ranges []config.SelectRange) {
	at := ""
	if world > 0 {
		at = fmt.Sprintf(" at world_size %d", world)
	}
	fmt.Fprintf(stdout, "\n# tune %s%s: the fastest per size\n", collectiveName, at)
	width := len("algorithm")
	for _, w := range winners {
		width = max(width, len(w.Best.Label))
	}
	// The sizes are --bytes, as select: counts them; the table above
	// prints a collective's larger buffer, world_size × bytes for some.
	fmt.Fprintf(stdout, "%10s  %-*s  %10s  %s\n", "bytes", width, "algorithm", "time(us)", "margin")
	for _, s := range sizes {
		i := slices.IndexFunc(winners, func(w tune.Winner) bool { return w.Bytes == s.Bytes })
		if i < 0 {
			fmt.Fprintf(stdout, "%10d  %-*s\n", s.Bytes, width, "(none: no run finished right)")
			continue
		}
		w := winners[i]
		fmt.Fprintf(stdout, "%10d  %-*s  %10.3f  %s\n", w.Bytes, width, w.Best.Label, w.Best.TimeNs/1000, w.Margin(runs))
	}
	if c, ok := collective.Lookup(collectiveName); ok && c.WideBuffers() != "" && world > 1 {
		fmt.Fprintf(stdout, "# bytes: count × element size, as --bytes and select: count them; the size column above is %d × bytes (%s's %s)\n", world, collectiveName, c.WideBuffers())
	}
	if len(ranges) > 0 {
		fmt.Fprintf(stdout, "# select.%s: %s\n", collectiveName, tune.RangesText(ranges))
	}
}

// exportRanges writes each range's winner as MSCCL XML into
// o.export, recorded at the smallest measured size of its range, with
// the range as minBytes/maxBytes. A winner that cannot be exported is
// reported and skipped; a file that cannot be written fails the command.
// It returns the schedules it wrote.
func exportRanges(o *tuneOptions, collective string, ranges []config.SelectRange, winners []tune.Winner, stdout, stderr io.Writer) ([]tune.Exported, *report.Failure) {
	if err := os.MkdirAll(o.Env.Path(o.export), 0o755); err != nil {
		return nil, ioFailure(fmt.Sprintf("--export-msccl %s: %v", o.export, err), err)
	}
	var written []tune.Exported
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
			err = tune.SetRange(&buf, r)
		}
		if err != nil {
			msg, _, _ := strings.Cut(asFailure(err).Msg, "\n")
			msg = strings.TrimPrefix(msg, "--export-msccl: ") // the line names it already
			fmt.Fprintf(stderr, "kernbench: tune: --export-msccl: %s for %s cannot be exported, skipped: %s\n", r.Algorithm, r.RangeString(), msg)
			continue
		}
		name := filepath.Join(o.export, fmt.Sprintf("%s_%d_%s.xml", collective, i, r.Algorithm))
		d, err := output.Resolve(o.Env, "--export-msccl", name)
		if err != nil {
			return written, ioFailure(err.Error(), err)
		}
		if f := output.Write(o.Env, d, stdout, buf.Bytes()); f != nil {
			return written, f
		}
		written = append(written, tune.Exported{File: name, Algorithm: r.Algorithm, Range: r.RangeString()})
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

// autoVariants are the runs of `kernbench run auto`: for each size of
// the command, the algorithm and --set items of the select: range that
// holds it, one variant per range (its sizes in order). The collective
// is --collective, else the only one select: has.
func autoVariants(o *runOptions) ([]compare.Variant, []string, error) {
	cfg, _, err := target.LoadConfig(o.Env, o.ConfigPath, o.Sets, kernbench.Files)
	if err != nil {
		return nil, nil, err
	}
	world := o.WorldSize
	if world == 0 {
		world = cfg.Defaults.WorldSize
	}
	return compare.Auto(cfg, o.Collective, world, o.Sizes, o.Counts)
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
