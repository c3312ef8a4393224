package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
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
}

// labeled is a finished variant's report.
type labeled struct {
	label string
	rep   *ccl.Report
}

// varyAxis is one --vary flag: a ccl.yaml key and the values it takes.
type varyAxis struct {
	key    string
	values []string
}

func parseVary(flags []string) ([]varyAxis, error) {
	var axes []varyAxis
	for _, f := range flags {
		key, vals, ok := strings.Cut(f, "=")
		if !ok || key == "" || vals == "" {
			return nil, fmt.Errorf("--vary %q: want key.path=v1,v2,… (e.g. --vary defaults.buffer_kind=tcm,sram,hbm)", f)
		}
		axis := varyAxis{key: key}
		for _, v := range strings.Split(vals, ",") {
			if v == "" {
				return nil, fmt.Errorf("--vary %q: an empty value", f)
			}
			axis.values = append(axis.values, v)
		}
		axes = append(axes, axis)
	}
	return axes, nil
}

// expandVariants is every target with every combination of the varied
// values (the last --vary changing fastest).
func expandVariants(targets []string, axes []varyAxis) []variant {
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
		name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(t), ".star"), ".xml")
		for _, c := range combos {
			label := name
			if len(c) > 0 {
				label += " " + strings.Join(c, " ")
			}
			out = append(out, variant{target: t, sets: c, label: label})
		}
	}
	return out
}

// compareRow is a result line of a comparison's --jsonl output.
type compareRow struct {
	Label string `json:"label"`
	*ccl.Result
}

// runCompare runs the variants and prints them as one table (or JSON),
// rows in variant order and, within a variant, size order, whatever -j is.
func runCompare(o *runOptions, variants []variant, stdout, stderr io.Writer) error {
	for flag, set := range map[string]bool{"--oplog": o.oplog != "", "--trace": o.trace != "", "--dot": o.dot != "", "--dump-pointers": o.dumpPtrs} {
		if set {
			return usageErr(stderr, o.json, flag+" writes one run's detail; give it one algorithm, without --vary")
		}
	}
	for i, v := range variants {
		opts := o.Options
		opts.Sets = append(append([]string(nil), o.Sets...), v.sets...)
		if err := ccl.Resolve(v.target, opts); err != nil {
			return compareFailure(o, variants, nil, err, i, stdout, stderr)
		}
	}
	width := len("algorithm")
	for _, v := range variants {
		width = max(width, len(v.label))
	}
	type outcome struct {
		rep    *ccl.Report
		err    error
		out    bytes.Buffer // rows, in order
		errOut bytes.Buffer // the variant's stderr (print(), warnings)
	}
	outs := make([]*outcome, len(variants))
	row := func(w io.Writer, label string, r *ccl.Result) {
		switch {
		case o.jsonl:
			writeJSONLine(w, compareRow{Label: label, Result: r})
		case !o.json:
			fmt.Fprintf(w, "%-*s%s\n", width, label, tableRow(r))
		}
	}
	if !o.json && !o.jsonl {
		fmt.Fprintf(stdout, "%-*s%s\n", width, "algorithm", tableHeader())
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
		opts.Sets = append(append([]string(nil), o.Sets...), v.sets...)
		opts.Jobs = jobs
		opts.Stderr = errTo
		opts.Progress = nil
		opts.OnStart = func(rep *ccl.Report) error {
			collective.Lock()
			defer collective.Unlock()
			if collective.name == "" {
				collective.name, collective.label = rep.Collective, v.label
				return nil
			}
			if rep.Collective != collective.name {
				return ccl.WithKind(errkind.Usage, &ccl.Failure{Rank: -1,
					Msg: fmt.Sprintf("collective %s, but %s runs %s: compare algorithms of one collective", rep.Collective, collective.label, collective.name)})
			}
			return nil
		}
		opts.OnResult = func(r *ccl.Result) { row(rowsTo, v.label, r) }
		oc.rep, oc.err = ccl.Run(v.target, opts)
	}
	for i := range outs {
		outs[i] = &outcome{}
	}
	if o.Jobs <= 1 || len(variants) == 1 {
		// One at a time: rows appear as each size finishes.
		for i := range variants {
			runOne(i, o.Jobs, stdout, stderr)
			if outs[i].err != nil {
				return compareFailure(o, variants, outs[i].rep, outs[i].err, i, stdout, stderr)
			}
		}
	} else {
		// Variants in parallel, each buffered and written in order once
		// every earlier one is out.
		workers := min(o.Jobs, len(variants))
		per := max(1, o.Jobs/len(variants))
		var wg sync.WaitGroup
		next := make(chan int)
		done := make([]chan struct{}, len(variants))
		for i := range done {
			done[i] = make(chan struct{})
		}
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					runOne(i, per, &outs[i].out, &outs[i].errOut)
					close(done[i])
				}
			}()
		}
		go func() {
			for i := range variants {
				next <- i
			}
			close(next)
		}()
		var failed = -1
		for i := range variants {
			<-done[i]
			if failed >= 0 {
				continue
			}
			_, _ = stdout.Write(outs[i].out.Bytes())
			_, _ = stderr.Write(outs[i].errOut.Bytes())
			if outs[i].err != nil {
				failed = i
			}
		}
		wg.Wait()
		if failed >= 0 {
			return compareFailure(o, variants, outs[failed].rep, outs[failed].err, failed, stdout, stderr)
		}
	}
	var reps []labeled
	for i, v := range variants {
		reps = append(reps, labeled{v.label, outs[i].rep})
	}
	switch {
	case o.json:
		all := struct {
			Runs []compareReport `json:"runs"`
		}{}
		for _, l := range reps {
			all.Runs = append(all.Runs, compareReport{Label: l.label, Report: l.rep})
		}
		writeJSON(stdout, all)
	case o.jsonl:
		for _, l := range reps {
			summary := *l.rep
			summary.Results = nil
			writeJSONLine(stdout, compareReport{Label: l.label, Report: &summary})
		}
	default:
		for _, l := range reps {
			if len(l.rep.Results) > 1 {
				var sum float64
				for _, r := range l.rep.Results {
					sum += r.BusBW
				}
				fmt.Fprintf(stdout, "# avg busbw %s: %.2f GB/s\n", l.label, sum/float64(len(l.rep.Results)))
			}
		}
		if !o.quiet {
			for _, l := range reps {
				r := l.rep
				root := ""
				if r.Root != nil {
					root = fmt.Sprintf(", root %d", *r.Root)
				}
				fmt.Fprintf(stdout, "# %s: %s, collective %s, topology %s, world_size %d%s, buffer_kind %s, backpressure %s, data in %s\n",
					l.label, r.File, r.Collective, r.Topology, r.WorldSize, root, r.BufferKind, r.Backpressure, r.DataSpace)
			}
		}
	}
	if err := writeExtras(o, reps); err != nil {
		return fail(stderr, asFailure(err))
	}
	return checkResults(reps, stderr)
}

// compareReport is one variant's report in a comparison's JSON.
type compareReport struct {
	Label string `json:"label"`
	*ccl.Report
}

// compareFailure reports variant i's error the way a single run does.
func compareFailure(o *runOptions, variants []variant, rep *ccl.Report, err error, i int, stdout, stderr io.Writer) error {
	f := asFailure(err)
	if o.json || o.jsonl {
		if rep == nil {
			rep = &ccl.Report{File: variants[i].target}
		}
		rep.Error = f.Out()
		rep.Results = nil
		writeJSONLine(stdout, compareReport{Label: variants[i].label, Report: rep})
	}
	fmt.Fprintf(stderr, "kernbench: %s: %s\n", variants[i].label, f.Msg)
	if f.Detail != "" && f.Detail != f.Msg {
		fmt.Fprintln(stderr, f.Detail)
	}
	return &exitError{err: f}
}

// checkResults turns a wrong result or a phase-2 mismatch into exit 1; a
// run's messages name it by its label when it has one (a comparison).
func checkResults(reps []labeled, stderr io.Writer) error {
	for _, l := range reps {
		prefix := "kernbench: "
		if l.label != "" {
			prefix += l.label + ": "
		}
		for _, r := range l.rep.Results {
			if r.Phase2Match != nil && !*r.Phase2Match {
				fmt.Fprintf(stderr, "%stwo-pass verification failed at %d bytes: %s\n", prefix, r.Bytes, r.Phase2)
				if d := r.Phase2Diagnosis; d != nil {
					for _, line := range d.Lines() {
						fmt.Fprintf(stderr, "  %s\n", line)
					}
				}
				if r.Wrong > 0 {
					wrongReport(stderr, prefix, l.rep, r)
				}
				fmt.Fprintf(stderr, "%s%s\n", prefix, ccl.Phase2Advice)
				return reported(errkind.Phase2Mismatch, "phase 2 mismatch")
			}
			if r.Wrong > 0 {
				wrongReport(stderr, prefix, l.rep, r)
				return reported(errkind.WrongResult, "verification failed")
			}
		}
	}
	return nil
}

// wrongReport prints a row's wrong elements: the count, the first, and
// each rank's ranges.
func wrongReport(stderr io.Writer, prefix string, rep *ccl.Report, r ccl.Result) {
	fw := r.FirstWrong
	fmt.Fprintf(stderr, "%s%d wrong element(s) at %d bytes; first: rank %d index %d got %s want %s\n", prefix, r.Wrong, r.Bytes, fw.Rank, fw.Index, fw.Got, fw.Want)
	fmt.Fprint(stderr, avgHint(r.RedOp, rep.WorldSize, fw))
	fmt.Fprint(stderr, wrongRangesText(r.WrongRanges))
}

// writeExtras writes --csv and --plot for finished runs; it fails with a
// *ccl.Failure.
func writeExtras(o *runOptions, reps []labeled) error {
	if o.csv != "" {
		var b bytes.Buffer
		if err := writeCSV(&b, reps); err != nil {
			return ccl.WithKind(errkind.Usage, &ccl.Failure{Rank: -1, Msg: "--csv: " + err.Error(), Err: err})
		}
		if f := writeOutput(o.Env, o.outputs["--csv"], o.outStdout, b.Bytes()); f != nil {
			return f
		}
	}
	if o.plot != "" {
		svg, err := plotBusBW(reps)
		if err != nil {
			return ccl.WithKind(errkind.Usage, &ccl.Failure{Rank: -1, Msg: "--plot: " + err.Error(), Err: err})
		}
		if f := writeOutput(o.Env, o.outputs["--plot"], o.outStdout, svg); f != nil {
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
		"time_us", "algbw_gbps", "busbw_gbps", "eff", "wrong"})
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, l := range reps {
		r := l.rep
		for _, x := range r.Results {
			wrong := strconv.FormatInt(x.Wrong, 10)
			if !x.Verified && x.Wrong == 0 {
				wrong = "" // not checked
			}
			_ = cw.Write([]string{l.label, r.Algorithm, r.Collective, r.Topology, strconv.Itoa(r.WorldSize),
				strconv.FormatInt(x.Bytes, 10), strconv.FormatInt(x.Count, 10), x.DType, x.RedOp, strconv.FormatBool(x.InPlace),
				f(x.SimTimeNs / 1000), f(x.AlgBW), f(x.BusBW), f(x.Eff), wrong})
		}
	}
	cw.Flush()
	return cw.Error()
}
