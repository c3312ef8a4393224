// Package compare holds what a comparison (`kernbench run A B …`,
// `--vary key=v1,v2`, `kernbench tune`, `kernbench run auto`) is made of
// besides running each variant, its one job: the variants (one per
// algorithm and combination of varied values, each labelled; auto's from
// select:), running them in parallel with their output in order, the
// rows and reports of its output, the verdict over its runs (wrong
// results, refused sizes, the worst failure) and its extra outputs
// (--csv, --plot).
package compare

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"kernbench/cmd/kernbench/internal/render"
	"kernbench/engine/collective"
	"kernbench/engine/config"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A comparison (`kernbench run A B …`, `--vary key=v1,v2`) runs one
// variant per algorithm and combination of varied settings, all on the
// same bench and sizes, and prints them in one table with a leading
// column naming the variant.

// Variant is one run of a comparison.
type Variant struct {
	Target string
	Sets   []string // --set values the --vary flags add
	Label  string   // "ring_allreduce", "ring_allreduce defaults.n_slots=4"
	// Sizes, when set, are the variant's own sizes (bytes per rank
	// buffer) in place of the command's: auto runs each size with the
	// algorithm select: records for it.
	Sizes []int64
}

// Labeled is a finished variant's report.
type Labeled struct {
	Label string
	Rep   *report.Report
}

// VaryAxis is one --vary flag: a ccl.yaml key and the values it takes.
type VaryAxis struct {
	Key    string
	Values []string
}

// ParseVary reads the --vary flags. A key varied twice, or also given by
// a --set (sets), would make some of the values given never take effect:
// an error.
func ParseVary(flags, sets []string) ([]VaryAxis, error) {
	var axes []VaryAxis
	for _, f := range flags {
		key, vals, ok := strings.Cut(f, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || vals == "" {
			return nil, fmt.Errorf("--vary %q: want key.path=v1,v2,… (e.g. --vary defaults.buffer_kind=tcm,sram,hbm)", f)
		}
		axis := VaryAxis{Key: key}
		for _, v := range SplitValues(vals) {
			if v == "" {
				return nil, fmt.Errorf("--vary %q: an empty value", f)
			}
			if slices.Contains(axis.Values, v) {
				// Two rows of one run, labelled alike.
				return nil, fmt.Errorf("--vary %q: the value %s is given twice; give each value once", f, v)
			}
			axis.Values = append(axis.Values, v)
		}
		for _, a := range axes {
			switch {
			case a.Key == key:
				return nil, fmt.Errorf("--vary %s is given twice: the second would override the first in every run; give all the values in one --vary", key)
			case Within(a.Key, key) || Within(key, a.Key):
				return nil, fmt.Errorf("--vary %s and --vary %s vary the same setting: the one applied last would override the other; vary one of them", a.Key, key)
			}
		}
		for _, s := range sets {
			sk, _, _ := strings.Cut(s, "=")
			if sk = strings.TrimSpace(sk); Within(sk, key) {
				return nil, fmt.Errorf("--set %s cannot take effect: --vary %s replaces it in every run; give one of them", s, key)
			}
		}
		axes = append(axes, axis)
	}
	return axes, nil
}

// Within reports whether key path a is b or lies below it.
func Within(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".")
}

// Expand is every target with every combination of the varied
// values (the last --vary changing fastest). A target "" is the
// defaults.algorithm of the variant's configuration: the value of a
// --vary defaults.algorithm, else defaultAlgorithm.
func Expand(targets []string, axes []VaryAxis, defaultAlgorithm string) []Variant {
	combos := [][]string{nil}
	for _, a := range axes {
		var next [][]string
		for _, c := range combos {
			for _, v := range a.Values {
				next = append(next, append(append([]string(nil), c...), a.Key+"="+v))
			}
		}
		combos = next
	}
	var out []Variant
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
			out = append(out, Variant{Target: target, Sets: c, Label: label})
		}
	}
	return out
}

// Row is a result line of a comparison's --jsonl output.
type Row struct {
	Label     string `json:"label"`
	WorldSize int    `json:"world_size"`
	*report.Result
}

// MarshalJSON puts the label and world size before the row's own fields
// (the row's MarshalJSON, promoted, would leave them out).
func (c Row) MarshalJSON() ([]byte, error) {
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

// WorldColumn heads the column of a comparison's table that gives each
// row's world size: the variants of a comparison may run at different
// ones (an entry's own world_size, a --vary), which the label need not
// say. A single run's table has none; its summary line says it.
const WorldColumn = "world_size"

// LabeledFailure is a failure of a comparison's variant (label) or, with
// no label, of the command (an output file it could not write).
type LabeledFailure struct {
	Label string
	F     *report.Failure
}

// Worst is the failure the command ends with, of the failures of its runs:
// the one with the highest exit status (4 an error raised while running, 3 a
// deadlock or limit, 2 a usage, configuration or load error, 1 a wrong
// result), the first of them in the table's order when several share it;
// nil when there are none. For a comparison (labels: its runs, in the
// table's order) it first lists the runs that failed on one line, each
// with its worst kind, as the kind line that ends the command names only
// the command's.
func Worst(failures []LabeledFailure, labels []string, stderr io.Writer) *report.Failure {
	if len(failures) == 0 {
		return nil
	}
	worst := failures[0]
	kinds := map[string]*errkind.Kind{}
	for _, lf := range failures {
		k := lf.F.ErrorKind()
		if k.Status > worst.F.ErrorKind().Status {
			worst = lf
		}
		if prev := kinds[lf.Label]; prev == nil || k.Status > prev.Status {
			kinds[lf.Label] = k
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
	return worst.F
}

// FailureLine is a failure as one line of the table: its kind and the
// first line of its message.
func FailureLine(f *report.Failure) string {
	msg, _, _ := strings.Cut(f.Msg, "\n")
	return f.ErrorKind().Name + ": " + msg
}

// Report is one variant's report in a comparison's JSON.
type Report struct {
	Label string `json:"label"`
	*report.Report
}

// RefusedSizes reports the sizes of each run that the memory guard
// refused (the sweep ran the others) and returns them as failures, one
// per run, of the refusal's kind (OutOfMemory, exit 2): a size asked for
// and not run must not pass for a success.
func RefusedSizes(reps []Labeled, stderr io.Writer) []LabeledFailure {
	var out []LabeledFailure
	for _, l := range reps {
		var sizes, simulated []string
		reachable := 0
		for _, r := range l.Rep.Results {
			switch {
			case r.Refused == nil:
			case r.Refused.Simulated:
				simulated = append(simulated, strconv.FormatInt(r.Bytes, 10))
			default:
				sizes = append(sizes, strconv.FormatInt(r.Bytes, 10))
				if r.Refused.Reachable() {
					reachable++
				}
			}
		}
		prefix := "kernbench: "
		if l.Label != "" {
			prefix += l.Label + ": "
		}
		var msgs []string
		if len(sizes) > 0 {
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
			msgs = append(msgs, fmt.Sprintf("%d of %d sizes refused over --max-memory, not run: %s (the rows say why); %s", len(sizes), len(l.Rep.Results), strings.Join(sizes, ", "), hint))
		}
		if len(simulated) > 0 {
			// (No mode makes the buffers fit: only smaller sizes or a
			// larger simulated memory.)
			msgs = append(msgs, fmt.Sprintf("%d of %d sizes refused, not run: %s: their buffers do not fit the simulated memory (the rows say why); lower the sweep's largest size (-e, --sweep's MAX) or give the buffers a larger memory", len(simulated), len(l.Rep.Results), strings.Join(simulated, ", ")))
		}
		for _, msg := range msgs {
			fmt.Fprintf(stderr, "%s%s\n", prefix, msg)
			out = append(out, LabeledFailure{l.Label, report.WithKind(errkind.MemoryLimit, &report.Failure{Rank: -1, Msg: msg})})
		}
	}
	return out
}

// WrongResults reports every wrong result and phase-2 mismatch of reps (a
// run's messages name it by its label when it has one, a comparison's)
// and returns them as failures (exit 1), one per run.
func WrongResults(reps []Labeled, stderr io.Writer) []LabeledFailure {
	var out []LabeledFailure
	for _, l := range reps {
		prefix := "kernbench: "
		if l.Label != "" {
			prefix += l.Label + ": "
		}
	runs:
		for _, r := range l.Rep.Results {
			f := r.Verdict()
			if f == nil {
				if r.Disconnected != nil && !r.Verified {
					unchecked(stderr, prefix, l.Rep, r)
				}
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
				wrongReport(stderr, prefix, l.Rep, r)
			}
			if f.ErrorKind() == errkind.Phase2Mismatch {
				fmt.Fprintf(stderr, "%s%s\n", prefix, report.Phase2Advice)
			}
			out = append(out, LabeledFailure{l.Label, f})
			break runs
		}
	}
	return out
}

// unchecked warns that a row whose data nothing checked (--timing-only,
// --verify-data=false) cannot be right: its messages joined the ranks
// only in groups. A warning, not a failure: the run did what was asked,
// and its time is the time of that kernel.
func unchecked(stderr io.Writer, prefix string, rep *report.Report, r report.Result) {
	how := "--verify-data=false"
	if rep.TimingOnly {
		how = "--timing-only"
	}
	fmt.Fprintf(stderr, "%swarning: the result at %d bytes was not checked (%s), and it cannot be right:\n", prefix, r.Bytes, how)
	fmt.Fprint(stderr, render.Disconnected(r.Disconnected, rep))
}

// wrongReport prints a row's wrong elements: the count, the first, and
// each rank's ranges.
func wrongReport(stderr io.Writer, prefix string, rep *report.Report, r report.Result) {
	fw := r.FirstWrong
	fmt.Fprintf(stderr, "%s%d wrong element(s) at %d bytes; first: rank %d index %d got %s want %s\n", prefix, r.Wrong, r.Bytes, fw.Rank, fw.Index, fw.Got, fw.Want)
	fmt.Fprint(stderr, render.AvgHint(r.RedOp, rep.WorldSize, fw))
	fmt.Fprint(stderr, render.WrongRanges(r.WrongRanges))
	fmt.Fprint(stderr, render.ReduceNonRoot(rep, r.WrongRanges))
	fmt.Fprint(stderr, render.SendWritten(r.SendWritten))
	fmt.Fprint(stderr, render.Disconnected(r.Disconnected, rep))
	if len(rep.ScheduleWrong) > 0 {
		fmt.Fprintf(stderr, "%sthe schedule itself leaves these outputs wrong (kernbench check %s finds them without running):\n", prefix, rep.File)
		for _, line := range rep.ScheduleWrong {
			fmt.Fprintf(stderr, "  %s\n", line)
		}
	}
}

// CSV writes one line per (run, size), with the table's figures
// unrounded.
func CSV(w io.Writer, reps []Labeled) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"label", "algorithm", "collective", "topology", "world_size", "size", "count", "type", "redop", "in_place",
		"time_us", "algbw_gbps", "busbw_gbps", "eff", "wrong", "refused"})
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, l := range reps {
		r := l.Rep
		for _, x := range r.Results {
			if x.Refused != nil {
				// No figures: the size did not run; the last column says why.
				_ = cw.Write([]string{l.Label, r.Algorithm, r.Collective, r.Topology, strconv.Itoa(r.WorldSize),
					strconv.FormatInt(x.Bytes, 10), strconv.FormatInt(x.Count, 10), x.DType, x.RedOp, strconv.FormatBool(x.InPlace),
					"", "", "", "", "", x.Refused.Reason})
				continue
			}
			wrong := strconv.FormatInt(x.Wrong, 10)
			if !x.Verified && x.Wrong == 0 {
				wrong = "" // not checked
			}
			_ = cw.Write([]string{l.Label, r.Algorithm, r.Collective, r.Topology, strconv.Itoa(r.WorldSize),
				strconv.FormatInt(x.Bytes, 10), strconv.FormatInt(x.Count, 10), x.DType, x.RedOp, strconv.FormatBool(x.InPlace),
				f(usOf(x.SimTimeNs)), f(x.AlgBW), f(x.BusBW), f(x.Eff), wrong, ""})
		}
	}
	cw.Flush()
	return cw.Error()
}

// usOf is a simulated time in nanoseconds (a whole number of
// picoseconds) in microseconds, divided once from the picoseconds:
// dividing the nanoseconds again printed 2.9162660000000002 for 2916266 ps.
func usOf(ns float64) float64 {
	if ps := math.Round(ns * 1000); ps < 1<<53 {
		return ps / 1e6
	}
	return ns / 1000
}

// SplitValues splits --vary's values at the commas outside brackets: a
// list value ([2,4] of mesh_shape) is one value, not two broken halves.
func SplitValues(vals string) []string {
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

// Auto are the variants of `kernbench run auto` of cfg: for each size
// (bytes per rank buffer; none: 1M), the algorithm and --set items of the
// select: range that holds it, one variant per range (its sizes in
// order), and a note per variant saying so. The collective is collective,
// else the only one select: has; counts (--count) are refused. Ranges
// tuned at another world size than world are not picked (Config.Pick).
func Auto(cfg *config.Config, collectiveFlag string, world int, sizes, counts []int64) ([]Variant, []string, error) {
	coll := collectiveFlag
	if coll == "" {
		var have []string
		for k := range cfg.Select {
			have = append(have, k)
		}
		slices.Sort(have)
		switch len(have) {
		case 0:
			return nil, nil, errors.New("auto runs what select: of ccl.yaml records per size, and this configuration has none; kernbench tune COLLECTIVE --write-select FILE writes one (then --config FILE)")
		case 1:
			coll = have[0]
		default:
			return nil, nil, fmt.Errorf("auto: select: has ranges for %s; say which with --collective", strings.Join(have, ", "))
		}
	}
	if len(counts) > 0 {
		return nil, nil, errors.New("auto picks by bytes per rank buffer: give --bytes, --sweep or -b/-e, not --count")
	}
	if len(sizes) == 0 {
		sizes = []int64{1 << 20}
	}
	var out []Variant
	var notes []string
	index := map[string]int{} // variant key -> position in out
	for _, n := range sizes {
		r, err := cfg.Pick(coll, n, world)
		if err != nil {
			return nil, nil, fmt.Errorf("auto: %w", err)
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
			out = append(out, Variant{Target: r.Algorithm, Sets: slices.Clone(r.Set), Label: label})
			notes = append(notes, fmt.Sprintf("auto: select.%s %s (%s) runs %s for", coll, r.RangeString(), r.Pos, label))
		}
		out[i].Sizes = append(out[i].Sizes, n)
	}
	// The sizes are --bytes; a collective whose table prints world_size ×
	// bytes (allgather's recvbuf) gets those too, to find its rows.
	c, _ := collective.Lookup(coll)
	wide := c.WideBuffers() != "" && world > 1
	for i, v := range out {
		if wide {
			notes[i] += " --bytes"
		}
		for _, n := range v.Sizes {
			notes[i] += fmt.Sprintf(" %d", n)
		}
		if wide {
			notes[i] += " (size"
			for _, n := range v.Sizes {
				notes[i] += fmt.Sprintf(" %d", n*int64(world))
			}
			notes[i] += ")"
		}
	}
	return out, notes, nil
}
