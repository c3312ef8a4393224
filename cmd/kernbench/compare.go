package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"

	"kernbench/cmd/kernbench/internal/output"
	"kernbench/cmd/kernbench/internal/render"
	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
	"kernbench/starlark/sweep"
)

// A comparison (`kernbench run A B …`, `--vary key=v1,v2`) runs one
// variant per algorithm and combination of varied settings, all on the
// same bench and sizes, and prints them in one table with a leading
// column naming the variant.

// variant is one run of a comparison.
type variant struct {
	target string
	sets   []string // --set values the --vary flags add
	label  string   // "ring_allreduce", "ring_allreduce defaults.n_slots=4"
	// sizes, when set, are the variant's own sizes (bytes per rank
	// buffer) in place of the command's: auto runs each size with the
	// algorithm select: records for it.
	sizes []int64
}

// labeled is a finished variant's report.
type labeled struct {
	label string
	rep   *report.Report
}

// varyAxis is one --vary flag: a ccl.yaml key and the values it takes.
type varyAxis struct {
	key    string
	values []string
}

// parseVary reads the --vary flags. A key varied twice, or also given by
// a --set (sets), would make some of the values given never take effect:
// an error.
func parseVary(flags, sets []string) ([]varyAxis, error) {
	var axes []varyAxis
	for _, f := range flags {
		key, vals, ok := strings.Cut(f, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || vals == "" {
			return nil, fmt.Errorf("--vary %q: want key.path=v1,v2,… (e.g. --vary defaults.buffer_kind=tcm,sram,hbm)", f)
		}
		axis := varyAxis{key: key}
		for _, v := range splitValues(vals) {
			if v == "" {
				return nil, fmt.Errorf("--vary %q: an empty value", f)
			}
			if slices.Contains(axis.values, v) {
				// Two rows of one run, labelled alike.
				return nil, fmt.Errorf("--vary %q: the value %s is given twice; give each value once", f, v)
			}
			axis.values = append(axis.values, v)
		}
		for _, a := range axes {
			switch {
			case a.key == key:
				return nil, fmt.Errorf("--vary %s is given twice: the second would override the first in every run; give all the values in one --vary", key)
			case within(a.key, key) || within(key, a.key):
				return nil, fmt.Errorf("--vary %s and --vary %s vary the same setting: the one applied last would override the other; vary one of them", a.key, key)
			}
		}
		for _, s := range sets {
			sk, _, _ := strings.Cut(s, "=")
			if sk = strings.TrimSpace(sk); within(sk, key) {
				return nil, fmt.Errorf("--set %s cannot take effect: --vary %s replaces it in every run; give one of them", s, key)
			}
		}
		axes = append(axes, axis)
	}
	return axes, nil
}

// within reports whether key path a is b or lies below it.
func within(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".")
}

// expandVariants is every target with every combination of the varied
// values (the last --vary changing fastest). A target "" is the
// defaults.algorithm of the variant's configuration: the value of a
// --vary defaults.algorithm, else defaultAlgorithm.
func expandVariants(targets []string, axes []varyAxis, defaultAlgorithm string) []variant {
	combos := [][]string{nil}
	for _, a := range axes {
		var next [][]string
		for _, c := range combos {
			for _, v := range a.values {
				next = append(next, append(append([]string(nil), c...), a.key+"="+v))
			}
		}
		combos = next
	}
	var out []variant
	for _, t := range targets {
		for _, c := range combos {
			target := t
			if target == "" {
				target = defaultAlgorithm
				for _, item := range c {
					if v, ok := strings.CutPrefix(item, "defaults.algorithm="); ok {
						target = v
					}
				}
			}
			label := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(target), ".star"), ".xml")
			if len(c) > 0 {
				label += " " + strings.Join(c, " ")
			}
			out = append(out, variant{target: target, sets: c, label: label})
		}
	}
	return out
}

// compareRow is a result line of a comparison's --jsonl output.
type compareRow struct {
	Label     string `json:"label"`
	WorldSize int    `json:"world_size"`
	*report.Result
}

// MarshalJSON puts the label and world size before the row's own fields
// (the row's MarshalJSON, promoted, would leave them out).
func (c compareRow) MarshalJSON() ([]byte, error) {
	head, err := report.MarshalUnescaped(struct {
		Label     string `json:"label"`
		WorldSize int    `json:"world_size"`
	}{c.Label, c.WorldSize})
	if err != nil || c.Result == nil {
		return head, err
	}
	row, err := report.MarshalUnescaped(c.Result)
	if err != nil {
		return nil, err
	}
	// {"label":…,"world_size":…} and {"bytes":…} make one object.
	return append(append(head[:len(head)-1], ','), row[1:]...), nil
}

// worldColumn heads the column of a comparison's table that gives each
// row's world size: the variants of a comparison may run at different
// ones (an entry's own world_size, a --vary), which the label need not
// say. A single run's table has none; its summary line says it.
const worldColumn = "world_size"

// runCompare runs the variants and prints them as one table (or JSON),
// rows in variant order and, within a variant, size order, whatever -j is.
// A variant that fails is a row of the table naming its error (its rows
// before the failure stay) and the others still run; the command exits
// with the worst status of them all (worstFailure).
func runCompare(o *runOptions, variants []variant, stdout, stderr io.Writer) error {
	_, err := compareReports(o, variants, stdout, stderr)
	return err
}

// compareReports is runCompare returning, with its error, every
// variant's report in variant order (nil when the command line was
// refused before anything ran): kernbench tune picks its winners from
// them.
func compareReports(o *runOptions, variants []variant, stdout, stderr io.Writer) ([]labeled, error) {
	for flag, set := range map[string]bool{"--oplog": o.oplog != "", "--trace": o.trace != "", "--dot": o.dot != "", "--dump-pointers": o.dumpPtrs} {
		if set {
			return nil, usageErr(flag + " writes one run's detail; give it one algorithm, without --vary")
		}
	}
	// Every variant resolves before any runs; then, knowing which
	// algorithms the comparison runs, none has a --set or --vary item
	// that cannot take effect. These are mistakes in the command line:
	// they end it before anything is simulated.
	var compared []string
	for i, v := range variants {
		opts := o.Options
		opts.Vary = v.sets
		name, err := ccl.Resolve(v.target, opts, false)
		if err != nil {
			return nil, resolveFailure(o, variants[i], err, stdout, stderr)
		}
		if name != "" && !slices.Contains(compared, name) {
			compared = append(compared, name)
		}
	}
	o.Compared = compared
	for i, v := range variants {
		opts := o.Options
		opts.Vary = v.sets
		if _, err := ccl.Resolve(v.target, opts, true); err != nil {
			return nil, resolveFailure(o, variants[i], err, stdout, stderr)
		}
	}
	width := len("algorithm")
	for _, v := range variants {
		width = max(width, len(v.label))
	}
	type outcome struct {
		rep    *report.Report
		fail   *report.Failure // the variant's error, nil when it ran
		out    bytes.Buffer    // rows, in order
		errOut bytes.Buffer    // the variant's stderr (print(), warnings, its error)
	}
	outs := make([]*outcome, len(variants))
	row := func(w io.Writer, label string, world int, r *report.Result) {
		switch {
		case o.jsonl:
			render.JSONLine(w, compareRow{Label: label, WorldSize: world, Result: r})
		case !o.json:
			fmt.Fprintf(w, "%-*s  %*d%s\n", width, label, len(worldColumn), world, render.Row(r))
		}
	}
	if !o.json && !o.jsonl {
		fmt.Fprintf(stdout, "%-*s  %s%s\n", width, "algorithm", worldColumn, render.Header())
	}
	// The first variant's collective is the comparison's: rows of another
	// collective measure other buffers (its bench and busbw differ).
	var collective struct {
		sync.Mutex
		name, label string
	}
	runOne := func(i int, jobs int, rowsTo io.Writer, errTo io.Writer) {
		v := variants[i]
		oc := outs[i]
		opts := o.Options
		opts.Vary = v.sets
		opts.Jobs = jobs
		if v.sizes != nil {
			opts.Sizes, opts.Counts = v.sizes, nil
		}
		opts.Stderr = errTo
		opts.Progress = nil
		world := 0 // the variant's world size, known once it starts
		opts.OnStart = func(rep *report.Report) error {
			world = rep.WorldSize
			collective.Lock()
			defer collective.Unlock()
			if collective.name == "" {
				collective.name, collective.label = rep.Collective, v.label
				return nil
			}
			if rep.Collective != collective.name {
				return report.WithKind(errkind.Usage, &report.Failure{Rank: -1,
					Msg: fmt.Sprintf("collective %s, but %s runs %s: compare algorithms of one collective", rep.Collective, collective.label, collective.name)})
			}
			return nil
		}
		opts.OnResult = func(r *report.Result) { row(rowsTo, v.label, world, r) }
		rep, err := ccl.Run(v.target, opts)
		oc.rep = rep
		if err == nil {
			return
		}
		// The failure is the variant's row; its diagnostics go where its
		// other messages went.
		oc.fail = asFailure(err)
		if oc.rep == nil {
			oc.rep = &report.Report{File: v.target}
		}
		if !o.json && !o.jsonl {
			fmt.Fprintf(rowsTo, "%-*s  error: %s%s\n", width, v.label, variantPosition(o, oc.rep), failureLine(oc.fail))
		}
		fmt.Fprintf(errTo, "kernbench: %s: %s%s\n", v.label, variantPosition(o, oc.rep), oc.fail.Msg)
		if f := oc.fail; f.Detail != "" && f.Detail != f.Msg {
			fmt.Fprintln(errTo, f.Detail)
		}
	}
	for i := range outs {
		outs[i] = &outcome{}
	}
	if o.Jobs <= 1 || len(variants) == 1 {
		// One at a time: rows appear as each size finishes.
		for i := range variants {
			runOne(i, o.Jobs, stdout, stderr)
		}
	} else {
		// Variants in parallel, each buffered and written in order once
		// every earlier one is out.
		workers := min(o.Jobs, len(variants))
		per := max(1, o.Jobs/len(variants))
		var wg sync.WaitGroup
		next := make(chan int)
		done := make([]chan struct{}, len(variants))
		panics := make([]any, len(variants))
		for i := range done {
			done[i] = make(chan struct{})
		}
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					func() {
						defer close(done[i])
						// A panic here would end the process past the
						// CLI's error boundary: it is raised again below,
						// on the command's goroutine.
						defer func() {
							if r := recover(); r != nil {
								if _, ok := r.(*sweep.InternalError); !ok {
									r = &sweep.InternalError{Value: r, Stack: debug.Stack()}
								}
								panics[i] = r
							}
						}()
						runOne(i, per, &outs[i].out, &outs[i].errOut)
					}()
				}
			}()
		}
		go func() {
			for i := range variants {
				next <- i
			}
			close(next)
		}()
		for i := range variants {
			<-done[i]
			if panics[i] != nil {
				wg.Wait()
				panic(panics[i])
			}
			_, _ = stdout.Write(outs[i].out.Bytes())
			_, _ = stderr.Write(outs[i].errOut.Bytes())
		}
		wg.Wait()
	}
	var reps, ran []labeled
	var failures []labeledFailure
	for i, v := range variants {
		l := labeled{v.label, outs[i].rep}
		reps = append(reps, l)
		if outs[i].fail != nil {
			outs[i].rep.Error = outs[i].fail.Out()
			failures = append(failures, labeledFailure{v.label, outs[i].fail})
		}
		if len(l.rep.Results) > 0 {
			ran = append(ran, l)
		}
	}
	switch {
	case o.json:
		all := struct {
			Runs []compareReport `json:"runs"`
		}{}
		for _, l := range reps {
			all.Runs = append(all.Runs, compareReport{Label: l.label, Report: l.rep})
		}
		render.JSON(stdout, all)
	case o.jsonl:
		for _, l := range reps {
			summary := *l.rep
			summary.Results = nil
			render.JSONLine(stdout, compareReport{Label: l.label, Report: &summary})
		}
	default:
		for _, l := range reps {
			if avg, ok := render.AvgBusBW(l.rep); ok {
				fmt.Fprintf(stdout, "# avg busbw %s: %.2f GB/s\n", l.label, avg)
			}
		}
		if !o.quiet {
			for _, l := range reps {
				r := l.rep
				if r.Collective == "" {
					continue // failed before it started: its error row says why
				}
				root := ""
				if r.Root != nil {
					root = fmt.Sprintf(", root %d", *r.Root)
				}
				fmt.Fprintf(stdout, "# %s: %s, collective %s, topology %s, world_size %d%s, %s, backpressure %s, data in %s\n",
					l.label, r.File, r.Collective, r.Topology, r.WorldSize, root, render.Placement(r), r.Backpressure, r.DataSpace)
				// Every variant runs under the same faults: what each
				// algorithm put through them at its largest size.
				if n := len(r.Results); n > 0 {
					for _, f := range r.Results[n-1].Faults {
						fmt.Fprintf(stdout, "# %s fault at %d bytes: %s\n", l.label, r.Results[n-1].Bytes, f)
					}
				}
			}
		}
	}
	if len(ran) > 0 {
		if err := writeExtras(o, ran); err != nil {
			f := asFailure(err)
			fmt.Fprintf(stderr, "kernbench: %s\n", f.Msg)
			failures = append(failures, labeledFailure{"", f})
		}
	}
	failures = append(failures, wrongResults(reps, stderr)...)
	failures = append(failures, refusedSizes(reps, stderr)...)
	labels := make([]string, len(variants))
	for i, v := range variants {
		labels[i] = v.label
	}
	return reps, worstFailure(failures, labels, stderr)
}

// labeledFailure is a failure of a comparison's variant (label) or, with
// no label, of the command (an output file it could not write).
type labeledFailure struct {
	label string
	f     *report.Failure
}

// worstFailure is the command's error for the failures of its runs: the
// one with the highest exit status (4 an error raised while running, 3 a
// deadlock or limit, 2 a usage, configuration or load error, 1 a wrong
// result), the first of them in the table's order when several share it;
// nil when there are none. For a comparison (labels: its runs, in the
// table's order) it first lists the runs that failed on one line, each
// with its worst kind, as the kind line that ends the command names only
// the command's.
func worstFailure(failures []labeledFailure, labels []string, stderr io.Writer) error {
	if len(failures) == 0 {
		return nil
	}
	worst := failures[0]
	kinds := map[string]*errkind.Kind{}
	for _, lf := range failures {
		k := lf.f.ErrorKind()
		if k.Status > worst.f.ErrorKind().Status {
			worst = lf
		}
		if prev := kinds[lf.label]; prev == nil || k.Status > prev.Status {
			kinds[lf.label] = k
		}
	}
	var parts []string
	for _, l := range labels {
		if k := kinds[l]; k != nil {
			parts = append(parts, fmt.Sprintf("%s (%s)", l, k.Name))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(stderr, "kernbench: %d of %d runs failed: %s\n", len(parts), len(labels), strings.Join(parts, ", "))
	}
	return &exitError{err: worst.f}
}

// failureLine is a failure as one line of the table: its kind and the
// first line of its message.
func failureLine(f *report.Failure) string {
	msg, _, _ := strings.Cut(f.Msg, "\n")
	return f.ErrorKind().Name + ": " + msg
}

// variantPosition is sweepPosition for a variant's report ("" when it
// failed before simulating).
func variantPosition(o *runOptions, rep *report.Report) string {
	if rep == nil || rep.Collective == "" {
		return ""
	}
	return sweepPosition(o, rep)
}

// compareReport is one variant's report in a comparison's JSON.
type compareReport struct {
	Label string `json:"label"`
	*report.Report
}

// resolveFailure reports a variant that does not resolve (a misspelt
// name, a --set or --vary that cannot take effect): a mistake in the
// command line, which ends the comparison before anything runs.
func resolveFailure(o *runOptions, v variant, err error, stdout, stderr io.Writer) error {
	f := asFailure(err)
	if o.json || o.jsonl {
		rep := &report.Report{File: v.target, Error: f.Out()}
		render.JSONLine(stdout, compareReport{Label: v.label, Report: rep})
	}
	return atPosition(v.label+": ", f)
}

// checkResults turns a wrong result or a phase-2 mismatch into exit 1 (see
// wrongResults) and a size refused over --max-memory into exit 2
// (refusedSizes).
func checkResults(reps []labeled, stderr io.Writer) error {
	return worstFailure(append(wrongResults(reps, stderr), refusedSizes(reps, stderr)...), nil, stderr)
}

// refusedSizes reports the sizes of each run that the memory guard
// refused (the sweep ran the others) and returns them as failures, one
// per run, of the refusal's kind (OutOfMemory, exit 2): a size asked for
// and not run must not pass for a success.
func refusedSizes(reps []labeled, stderr io.Writer) []labeledFailure {
	var out []labeledFailure
	for _, l := range reps {
		var sizes []string
		reachable := 0
		for _, r := range l.rep.Results {
			if r.Refused != nil {
				sizes = append(sizes, strconv.FormatInt(r.Bytes, 10))
				if r.Refused.Reachable() {
					reachable++
				}
			}
		}
		if len(sizes) == 0 {
			continue
		}
		prefix := "kernbench: "
		if l.label != "" {
			prefix += l.label + ": "
		}
		them := "them"
		if len(sizes) == 1 {
			them = "it"
		}
		hint := "raise --max-memory"
		switch {
		case reachable == len(sizes):
			hint = "--timing-only runs " + them + ", or raise --max-memory"
		case reachable > 0:
			hint = fmt.Sprintf("--timing-only runs %d of %s; or raise --max-memory", reachable, them)
		}
		msg := fmt.Sprintf("%d of %d sizes refused over --max-memory, not run: %s (the rows say why); %s", len(sizes), len(l.rep.Results), strings.Join(sizes, ", "), hint)
		fmt.Fprintf(stderr, "%s%s\n", prefix, msg)
		out = append(out, labeledFailure{l.label, report.WithKind(errkind.MemoryLimit, &report.Failure{Rank: -1, Msg: msg})})
	}
	return out
}

// wrongResults reports every wrong result and phase-2 mismatch of reps (a
// run's messages name it by its label when it has one, a comparison's)
// and returns them as failures (exit 1), one per run.
func wrongResults(reps []labeled, stderr io.Writer) []labeledFailure {
	var out []labeledFailure
	for _, l := range reps {
		prefix := "kernbench: "
		if l.label != "" {
			prefix += l.label + ": "
		}
	runs:
		for _, r := range l.rep.Results {
			f := r.Verdict()
			if f == nil {
				continue
			}
			if f.ErrorKind() == errkind.Phase2Mismatch {
				fmt.Fprintf(stderr, "%stwo-pass verification failed at %d bytes: %s\n", prefix, r.Bytes, r.Phase2)
				if d := r.Phase2Diagnosis; d != nil {
					for _, line := range d.Lines() {
						fmt.Fprintf(stderr, "  %s\n", line)
					}
				}
			}
			if r.Wrong > 0 {
				wrongReport(stderr, prefix, l.rep, r)
			}
			if f.ErrorKind() == errkind.Phase2Mismatch {
				fmt.Fprintf(stderr, "%s%s\n", prefix, report.Phase2Advice)
			}
			out = append(out, labeledFailure{l.label, f})
			break runs
		}
	}
	return out
}

// wrongReport prints a row's wrong elements: the count, the first, and
// each rank's ranges.
func wrongReport(stderr io.Writer, prefix string, rep *report.Report, r report.Result) {
	fw := r.FirstWrong
	fmt.Fprintf(stderr, "%s%d wrong element(s) at %d bytes; first: rank %d index %d got %s want %s\n", prefix, r.Wrong, r.Bytes, fw.Rank, fw.Index, fw.Got, fw.Want)
	fmt.Fprint(stderr, render.AvgHint(r.RedOp, rep.WorldSize, fw))
	fmt.Fprint(stderr, render.WrongRanges(r.WrongRanges))
}

// writeExtras writes --csv and --plot for finished runs; it fails with a
// *report.Failure.
func writeExtras(o *runOptions, reps []labeled) error {
	if o.csv != "" {
		var b bytes.Buffer
		if err := writeCSV(&b, reps); err != nil {
			return report.WithKind(errkind.Usage, &report.Failure{Rank: -1, Msg: "--csv: " + err.Error(), Err: err})
		}
		if f := output.Write(o.Env, o.outputs["--csv"], o.outStdout, b.Bytes()); f != nil {
			return f
		}
	}
	if o.plot != "" {
		svg, err := plotBusBW(reps)
		if err != nil {
			return report.WithKind(errkind.Usage, &report.Failure{Rank: -1, Msg: "--plot: " + err.Error(), Err: err})
		}
		if f := output.Write(o.Env, o.outputs["--plot"], o.outStdout, svg); f != nil {
			return f
		}
	}
	return nil
}

// writeCSV writes one line per (run, size), with the table's figures
// unrounded.
func writeCSV(w io.Writer, reps []labeled) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"label", "algorithm", "collective", "topology", "world_size", "size", "count", "type", "redop", "in_place",
		"time_us", "algbw_gbps", "busbw_gbps", "eff", "wrong", "refused"})
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, l := range reps {
		r := l.rep
		for _, x := range r.Results {
			if x.Refused != nil {
				// No figures: the size did not run; the last column says why.
				_ = cw.Write([]string{l.label, r.Algorithm, r.Collective, r.Topology, strconv.Itoa(r.WorldSize),
					strconv.FormatInt(x.Bytes, 10), strconv.FormatInt(x.Count, 10), x.DType, x.RedOp, strconv.FormatBool(x.InPlace),
					"", "", "", "", "", x.Refused.Reason})
				continue
			}
			wrong := strconv.FormatInt(x.Wrong, 10)
			if !x.Verified && x.Wrong == 0 {
				wrong = "" // not checked
			}
			_ = cw.Write([]string{l.label, r.Algorithm, r.Collective, r.Topology, strconv.Itoa(r.WorldSize),
				strconv.FormatInt(x.Bytes, 10), strconv.FormatInt(x.Count, 10), x.DType, x.RedOp, strconv.FormatBool(x.InPlace),
				f(x.SimTimeNs / 1000), f(x.AlgBW), f(x.BusBW), f(x.Eff), wrong, ""})
		}
	}
	cw.Flush()
	return cw.Error()
}

// splitValues splits --vary's values at the commas outside brackets: a
// list value ([2,4] of mesh_shape) is one value, not two broken halves.
func splitValues(vals string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range vals {
		switch c {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, vals[start:i])
				start = i + 1
			}
		}
	}
	return append(out, vals[start:])
}
