package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"

	"kernbench/cmd/kernbench/internal/compare"
	"kernbench/cmd/kernbench/internal/output"
	"kernbench/cmd/kernbench/internal/render"
	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

// runCompare runs the variants and prints them as one table (or JSON),
// rows in variant order and, within a variant, size order, whatever -j is.
// A variant that fails is a row of the table naming its error (its rows
// before the failure stay) and the others still run; the command exits
// with the worst status of them all (worstFailure).
func runCompare(o *runOptions, variants []compare.Variant, stdout, stderr io.Writer) error {
	_, err := compareReports(o, variants, stdout, stderr)
	return err
}

// compareReports is runCompare returning, with its error, every
// variant's report in variant order (nil when the command line was
// refused before anything ran): kernbench tune picks its winners from
// them.
func compareReports(o *runOptions, variants []compare.Variant, stdout, stderr io.Writer) ([]compare.Labeled, error) {
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
		opts.Vary = v.Sets
		name, err := ccl.Resolve(v.Target, opts, false)
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
		opts.Vary = v.Sets
		if _, err := ccl.Resolve(v.Target, opts, true); err != nil {
			return nil, resolveFailure(o, variants[i], err, stdout, stderr)
		}
	}
	width := len("algorithm")
	for _, v := range variants {
		width = max(width, len(v.Label))
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
			render.JSONLine(w, compare.Row{Label: label, WorldSize: world, Result: r})
		case !o.json:
			fmt.Fprintf(w, "%-*s  %*d%s\n", width, label, len(compare.WorldColumn), world, render.Row(r))
		}
	}
	if !o.json && !o.jsonl {
		fmt.Fprintf(stdout, "%-*s  %s%s\n", width, "algorithm", compare.WorldColumn, render.Header())
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
		opts.Vary = v.Sets
		opts.Jobs = jobs
		if v.Sizes != nil {
			opts.Sizes, opts.Counts = v.Sizes, nil
		}
		opts.Stderr = errTo
		opts.Progress = nil
		world := 0 // the variant's world size, known once it starts
		// otherCollective: the variant runs another collective than the
		// first, found as it starts, before any size: its failure names
		// no size of the sweep.
		otherCollective := false
		opts.OnStart = func(rep *report.Report) error {
			world = rep.WorldSize
			collective.Lock()
			defer collective.Unlock()
			if collective.name == "" {
				collective.name, collective.label = rep.Collective, v.Label
				return nil
			}
			if rep.Collective != collective.name {
				otherCollective = true
				return report.WithKind(errkind.Usage, &report.Failure{Rank: -1,
					Msg: fmt.Sprintf("collective %s, but %s runs %s: compare algorithms of one collective", rep.Collective, collective.label, collective.name)})
			}
			return nil
		}
		opts.OnResult = func(r *report.Result) { row(rowsTo, v.Label, world, r) }
		var rep *report.Report
		var err error
		wall := wallSeconds(func() { rep, err = ccl.Run(v.Target, opts) })
		oc.rep = rep
		if rep != nil {
			// Each run's own wall time, as one run's report has it.
			rep.WallS = wall
		}
		if err == nil {
			return
		}
		// The failure is the variant's row; its diagnostics go where its
		// other messages went.
		oc.fail = asFailure(err)
		if oc.rep == nil {
			oc.rep = &report.Report{File: v.Target}
		}
		at := variantPosition(o, v, oc.rep)
		if otherCollective {
			at = ""
		}
		if !o.json && !o.jsonl {
			fmt.Fprintf(rowsTo, "%-*s  error: %s%s\n", width, v.Label, at, compare.FailureLine(oc.fail))
		}
		fmt.Fprintf(errTo, "kernbench: %s: %s%s\n", v.Label, at, oc.fail.Msg)
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
		per := max(1, o.Jobs/len(variants))
		compare.InOrder(len(variants), min(o.Jobs, len(variants)),
			func(i int) { runOne(i, per, &outs[i].out, &outs[i].errOut) },
			func(i int) {
				_, _ = stdout.Write(outs[i].out.Bytes())
				_, _ = stderr.Write(outs[i].errOut.Bytes())
			})
	}
	var reps, ran []compare.Labeled
	var failures []compare.LabeledFailure
	for i, v := range variants {
		l := compare.Labeled{Label: v.Label, Rep: outs[i].rep}
		reps = append(reps, l)
		if outs[i].fail != nil {
			outs[i].rep.Error = outs[i].fail.Out()
			failures = append(failures, compare.LabeledFailure{Label: v.Label, F: outs[i].fail})
		}
		if len(l.Rep.Results) > 0 {
			ran = append(ran, l)
		}
	}
	compare.Print(stdout, reps, compare.PrintOptions{JSON: o.json, JSONL: o.jsonl, Quiet: o.quiet,
		Sweep: len(o.Sizes) > 1 || len(o.Counts) > 1, Whole: whole(variants)})
	if len(ran) > 0 {
		if err := writeExtras(o, ran); err != nil {
			f := asFailure(err)
			fmt.Fprintf(stderr, "kernbench: %s\n", f.Msg)
			failures = append(failures, compare.LabeledFailure{F: f})
		}
	}
	failures = append(failures, compare.WrongResults(reps, stderr)...)
	failures = append(failures, compare.RefusedSizes(reps, stderr)...)
	labels := make([]string, len(variants))
	for i, v := range variants {
		labels[i] = v.Label
	}
	return reps, worstFailure(failures, labels, stderr)
}

// whole reports whether variants are one sweep split by size (auto's:
// each runs its own sizes).
func whole(variants []compare.Variant) bool {
	for _, v := range variants {
		if v.Sizes == nil {
			return false
		}
	}
	return len(variants) > 0
}

// variantPosition is sweepPosition for a variant's report ("" when it
// failed before simulating), in the variant's own sizes when it has them
// (auto: the sizes select: gives its algorithm; the command's sweep named
// the wrong size).
func variantPosition(o *runOptions, v compare.Variant, rep *report.Report) string {
	if rep == nil || rep.Collective == "" {
		return ""
	}
	if len(v.Sizes) > 0 {
		return positionIn(v.Sizes, "bytes", rep)
	}
	return sweepPosition(o, rep)
}

// resolveFailure reports a variant that does not resolve (a misspelt
// name, a --set or --vary that cannot take effect): a mistake in the
// command line, which ends the comparison before anything runs.
func resolveFailure(o *runOptions, v compare.Variant, err error, stdout, stderr io.Writer) error {
	f := asFailure(err)
	if o.json || o.jsonl {
		rep := &report.Report{File: v.Target, Error: f.Out()}
		render.JSONLine(stdout, compare.Report{Label: v.Label, Report: rep})
	}
	return atPosition(v.Label+": ", f)
}

// checkResults turns a wrong result or a phase-2 mismatch into exit 1 (see
// compare.WrongResults) and a size refused over --max-memory into exit 2
// (compare.RefusedSizes).
func checkResults(reps []compare.Labeled, stderr io.Writer) error {
	return worstFailure(append(compare.WrongResults(reps, stderr), compare.RefusedSizes(reps, stderr)...), nil, stderr)
}

// writeExtras writes --csv and --plot for finished runs; it fails with a
// *report.Failure.
func writeExtras(o *runOptions, reps []compare.Labeled) error {
	if o.csv != "" {
		var b bytes.Buffer
		if err := compare.CSV(&b, reps); err != nil {
			return report.WithKind(errkind.Usage, &report.Failure{Rank: -1, Msg: "--csv: " + err.Error(), Err: err})
		}
		if f := output.Write(o.Env, o.outputs["--csv"], o.outStdout, b.Bytes()); f != nil {
			return f
		}
	}
	if o.plot != "" {
		svg, err := compare.Plot(reps)
		if err != nil {
			return report.WithKind(errkind.Usage, &report.Failure{Rank: -1, Msg: "--plot: " + err.Error(), Err: err})
		}
		if f := output.Write(o.Env, o.outputs["--plot"], o.outStdout, svg); f != nil {
			return f
		}
	}
	return nil
}

// worstFailure is the command's error for the failures of its runs
// (compare.Worst), nil when there are none.
func worstFailure(failures []compare.LabeledFailure, labels []string, stderr io.Writer) error {
	if f := compare.Worst(failures, labels, stderr); f != nil {
		return &exitError{err: f}
	}
	return nil
}
