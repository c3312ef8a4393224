// Package render writes a run's report as text, its one job: the table
// of rows (columns, widths, a refused size's row), the summary after it
// (average busbw, busiest resources, time split, faults, the run's
// description), wrong elements as ranges, and JSON encoding as every
// command writes it.
package render

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"kernbench/engine/topology"
	"kernbench/starlark/report"
	"math"
	"slices"
	"strconv"
	"strings"
)

// JSONLine writes v as one line of JSON.
func JSONLine(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // "<builtin>" and ">=" as written: no web page reads it
	_ = enc.Encode(v)
}

// JSON writes v as indented JSON.
func JSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// columns are the report's columns and their widths: each at least
// its header, size and count wide enough for 10 digits, so rows can be
// printed as they finish and still line up.
var columns = []struct {
	name  string
	width int
}{{"size", 10}, {"count", 10}, {"type", 4}, {"redop", 5}, {"time(us)", 10}, {"algbw(GB/s)", 11}, {"busbw(GB/s)", 11}, {"eff", 5}, {"#wrong", 6}}

func line(cells []string) string {
	var b strings.Builder
	for i, c := range cells {
		fmt.Fprintf(&b, "  %*s", columns[i].width, c)
	}
	return b.String()
}

// Header is the table's header line.
func Header() string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.name
	}
	return line(names)
}

// Row is r's line of the table.
func Row(r *report.Result) string {
	if r.Refused != nil {
		return line([]string{strconv.FormatInt(r.Bytes, 10), strconv.FormatInt(r.Count, 10), r.DType, r.RedOp}) + "  refused: " + r.Refused.Reason
	}
	wrong := strconv.FormatInt(r.Wrong, 10)
	if !r.Verified && r.Wrong == 0 {
		wrong = "N/A"
	}
	return line([]string{strconv.FormatInt(r.Bytes, 10), strconv.FormatInt(r.Count, 10), r.DType, r.RedOp,
		fmt.Sprintf("%.3f", r.SimTimeNs/1000), fmt.Sprintf("%.2f", r.AlgBW), fmt.Sprintf("%.2f", r.BusBW), fmt.Sprintf("%.3f", r.Eff), wrong})
}

// Summary prints what follows the rows: the average busbw of a sweep,
// the busiest resources (-v) and, unless quiet, the run's description.
func Summary(w io.Writer, rep *report.Report, quiet, verbose bool) {
	if avg, ok := AvgBusBW(rep); ok {
		fmt.Fprintf(w, "# avg busbw: %.2f GB/s\n", avg)
	}
	for _, r := range rep.Results {
		if len(r.Busiest) == 0 {
			continue
		}
		fmt.Fprintf(w, "# busiest resources at %d bytes:\n", r.Bytes)
		for _, u := range r.Busiest {
			fmt.Fprintf(w, "#   %-24s %5.1f%%  %d bytes\n", u.Resource, 100*u.Utilisation, u.Bytes)
		}
		if len(r.Classes) > 0 {
			var parts []string
			for _, c := range r.Classes {
				parts = append(parts, fmt.Sprintf("%s x%d busiest %.1f%% mean %.1f%%", c.Kind, c.Count, 100*c.Busiest, 100*c.Mean))
			}
			fmt.Fprintf(w, "# resources by kind at %d bytes: %s\n", r.Bytes, strings.Join(parts, "; "))
		}
		if in := r.Interp; in != nil && r.Ops.Send > 0 {
			fmt.Fprintf(w, "# starlark at %d bytes: %d steps, %d tl calls (%.1f steps, %.2f calls per message sent)\n",
				r.Bytes, in.Steps, in.BuiltinCalls, float64(in.Steps)/float64(r.Ops.Send), float64(in.BuiltinCalls)/float64(r.Ops.Send))
		} else if in != nil {
			// No message sent (one rank, or a kernel of local work): the
			// counts still tell how close a kernel runs to --max-steps.
			fmt.Fprintf(w, "# starlark at %d bytes: %d steps, %d tl calls\n", r.Bytes, in.Steps, in.BuiltinCalls)
		}
		if e := r.HostMemory; e != nil {
			fmt.Fprintf(w, "# host memory at %d bytes: estimate %v\n", r.Bytes, e)
		}
		if c := r.OpLog; c != nil {
			fmt.Fprintf(w, "# op_log at %d bytes: %d records, %.0f bytes of host memory each, %.2f records per message sent\n",
				r.Bytes, c.Records, c.BytesPerRecord, c.RecordsPerMessage)
		}
	}
	if quiet {
		return
	}
	last := -1 // the largest size that ran
	for i, r := range rep.Results {
		if r.Refused == nil {
			last = i
		}
	}
	for i, r := range rep.Results {
		// The largest size (every size with -v): what the ranks waited for.
		if r.Time != nil && (i == last || verbose) {
			fmt.Fprintf(w, "# time at %d bytes: rank %d (most blocked) %s; all ranks %s\n", r.Bytes, r.Time.MostBlocked.Rank, TimeShares(r.Time.MostBlocked), TimeShares(r.Time.All))
		}
	}
	for i, r := range rep.Results {
		// The faults in force, and what went through their resources.
		if i == last || verbose {
			for _, f := range r.Faults {
				fmt.Fprintf(w, "# fault at %d bytes: %s\n", r.Bytes, f)
			}
		}
	}
	var events uint64
	for _, r := range rep.Results {
		events += r.Events
	}
	topo := rep.Topology
	if len(rep.MeshShape) == 2 {
		topo += fmt.Sprintf(" %d x %d", rep.MeshShape[0], rep.MeshShape[1])
	}
	root := ""
	if rep.Root != nil {
		root = fmt.Sprintf(", root %d", *rep.Root)
	}
	fmt.Fprintf(w, "# algorithm %s (%s), collective %s, topology %s, world_size %d%s%s\n", rep.Algorithm, rep.File, rep.Collective, topo, rep.WorldSize, root, InPlace(rep))
	timing := ""
	if rep.TimingOnly {
		timing = " (timing only: no data moved)"
	}
	fmt.Fprintf(w, "# %s, backpressure %s, data in %s%s; %d events simulated, wall %s\n", Placement(rep), rep.Backpressure, rep.DataSpace, timing, events, Wall(rep.WallS))
}

// InPlace is ", in place" for a report of in-place runs (--in-place: one
// buffer for send and recv, as nccl-tests' in-place columns), else "".
func InPlace(rep *report.Report) string {
	for _, r := range rep.Results {
		if r.InPlace {
			return ", in place"
		}
	}
	return ""
}

// Placement is the header's "buffer_kind K" with why kernbench chose K
// and where it put the fused primitives' staging, when it did.
func Placement(rep *report.Report) string {
	s := "buffer_kind " + rep.BufferKind
	if rep.BufferKindWhy != "" {
		s += " (" + rep.BufferKindWhy + ")"
	}
	if rep.NSlotsWhy != "" {
		s += fmt.Sprintf(", n_slots %d (%s)", rep.NSlots, rep.NSlotsWhy)
	}
	if rep.Staging != "" {
		s += ", staging in " + rep.Staging
		if rep.StagingWhy != "" {
			s += " (" + rep.StagingWhy + ")"
		}
	}
	return s
}

// AvgBusBW is the mean busbw of the sizes of a sweep that ran (refused
// ones have none); ok is false with fewer than two.
func AvgBusBW(rep *report.Report) (avg float64, ok bool) {
	return report.SweepAvgBusBW(rep.Results)
}

// TimeShares is a split as percentages, largest first, zeros left out:
// "memory 90.6%, send 5.7%, recv 3.5%".
func TimeShares(t report.TimeSplit) string {
	parts := []struct {
		name string
		ns   float64
	}{{"memory", t.MemoryNs}, {"send", t.SendNs}, {"recv", t.RecvNs}, {"flush", t.FlushNs}, {"other", t.OtherNs}}
	total := 0.0
	for _, p := range parts {
		total += p.ns
	}
	slices.SortStableFunc(parts, func(a, b struct {
		name string
		ns   float64
	}) int {
		return cmp.Compare(b.ns, a.ns)
	})
	var out []string
	for _, p := range parts {
		if pct := 100 * p.ns / total; pct >= 0.05 {
			out = append(out, fmt.Sprintf("%s %.1f%%", p.name, pct))
		}
	}
	return strings.Join(out, ", ")
}

// Wall is a wall-clock time in seconds as the summary writes it.
func Wall(s float64) string {
	return strings.TrimSpace(fmt.Sprintf("%.3fs", s))
}

// Caps of WrongRanges: ranks listed, ranges listed per rank.
const (
	maxWrongRanks       = 8
	maxWrongRangesShown = 4
)

// AvgHint explains the commonest avg mistake when the first wrong
// element shows it: the value is world_size times the average, so the call
// that completed the sum did not divide (a fused primitive's final=True; a
// kernel summing with tl.reduce or Tile math divides itself). "" otherwise.
func AvgHint(redop string, world int, fw *report.WrongElem) string {
	if redop != "avg" || world < 2 || fw == nil {
		return ""
	}
	got, err1 := strconv.ParseFloat(fw.Got, 64)
	want, err2 := strconv.ParseFloat(fw.Want, 64)
	if err1 != nil || err2 != nil || want == 0 || math.IsNaN(got) || math.IsNaN(want) || math.IsInf(got, 0) || math.IsInf(want, 0) {
		return ""
	}
	sum := want * float64(world)
	if math.Abs(got-sum) > 1e-2*math.Abs(sum) {
		return ""
	}
	return fmt.Sprintf("  (got is %d × want, the sum: with --redop avg the call that completes the sum divides by world_size only when called with final=True; tl.reduce and Tile math never divide: divide the sum yourself, tl.store(dst, tl.fetch(dst) / world_size))\n", world)
}

// ReduceNonRoot says, for a wrong reduce, which ranks other than the
// root have wrong elements: a reduce leaves their recvbuf as it was (the
// sentinel out of place), so a kernel that keeps its partial sums in
// recvbuf on every rank is wrong there, with "want NaN" as the only clue.
// "" for another collective or when only the root is wrong.
func ReduceNonRoot(rep *report.Report, rws []report.RankWrong) string {
	if rep.Collective != "reduce" || rep.Root == nil {
		return ""
	}
	var ranks []int
	for _, rw := range rws {
		if rw.Rank != *rep.Root {
			ranks = append(ranks, rw.Rank)
		}
	}
	if len(ranks) == 0 {
		return ""
	}
	who := fmt.Sprintf("rank %d", ranks[0])
	if len(ranks) > 1 {
		who = "ranks " + topology.RankRanges(ranks)
	}
	return fmt.Sprintf("  (%s, not the root (rank %d), changed recvbuf: a reduce leaves every recvbuf but the root's as it was; keep partial sums in a buffer of the kernel's own, tl.alloc(count, dtype, space))\n", who, *rep.Root)
}

// SendWritten says which ranks wrote into their sendbuf in a wrong
// out-of-place run (report.Result.SendWritten), "" when none did.
func SendWritten(ranks []int) string {
	if len(ranks) == 0 {
		return ""
	}
	who := fmt.Sprintf("rank %d", ranks[0])
	if len(ranks) > 1 {
		who = "ranks " + topology.RankRanges(ranks)
	}
	return fmt.Sprintf("  (%s wrote into sendbuf, the input the result is checked against: what was sent from it afterwards was not the input, and a value copied into it, a recvbuf's sentinel too, reads as wrong or never written where it arrived; tl.copy(dst, src) writes its first argument)\n", who)
}

// Disconnected says why a wrong run could not be right when its messages
// joined the ranks only in groups (report.Result.Disconnected): the
// groups, the ranks rank 0 never heard from, the directions used and
// those not; "" when d is nil.
func Disconnected(d *report.Disconnected, rep *report.Report) string {
	if d == nil {
		return ""
	}
	if len(d.Used) == 0 {
		return "  (no rank sent a message: no data moved between ranks)\n"
	}
	const shown = 4
	var gs []string
	for i, g := range d.Groups {
		if i == shown {
			break
		}
		s := topology.RankRanges(g)
		if strings.Contains(s, ",") {
			s = "{" + s + "}"
		}
		gs = append(gs, s)
	}
	groups := andList(gs)
	if n := len(d.Groups); n > shown {
		groups = strings.Join(gs, ", ") + fmt.Sprintf(" and %d more", n-shown)
	}
	var others []int
	for _, g := range d.Groups[1:] {
		others = append(others, g...)
	}
	unreached := fmt.Sprintf("rank %d", others[0])
	if len(others) > 1 {
		unreached = "ranks " + topology.RankRanges(others)
	}
	topo := rep.Topology
	if len(rep.MeshShape) == 2 {
		topo += fmt.Sprintf(" %d x %d", rep.MeshShape[0], rep.MeshShape[1])
	}
	unused := ""
	if len(d.Unused) > 0 {
		unused = fmt.Sprintf(" (%s %s not used)", andList(d.Unused), map[bool]string{true: "was", false: "were"}[len(d.Unused) == 1])
	}
	return fmt.Sprintf("  (the run's messages, on %s, join the ranks only in groups %s: nothing a rank sent reached another group, so data of %s never reached rank %d; on topology %s those directions do not connect every rank%s)\n",
		andList(d.Used), groups, unreached, d.Groups[0][0], topo, unused)
}

// andList is "a", "a and b", "a, b and c".
func andList(xs []string) string {
	if len(xs) <= 1 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// WrongRanges lists the wrong elements of each rank as merged index
// ranges, one line per rank (capped), saying which ranges still hold the
// recvbuf sentinel, i.e. were never written.
func WrongRanges(rws []report.RankWrong) string {
	var b strings.Builder
	unwritten := false
	for i, rw := range rws {
		if i == maxWrongRanks {
			fmt.Fprintf(&b, "  … and %d more rank(s) with wrong elements\n", len(rws)-i)
			break
		}
		fmt.Fprintf(&b, "  rank %d: %d wrong at ", rw.Rank, rw.Wrong)
		for j, g := range rw.Ranges {
			if j == maxWrongRangesShown {
				break
			}
			if j > 0 {
				b.WriteString(", ")
			}
			if g.End == g.Start+1 {
				fmt.Fprintf(&b, "%d", g.Start)
			} else {
				fmt.Fprintf(&b, "[%d, %d)", g.Start, g.End)
			}
			if g.Sentinel {
				b.WriteString(" never written")
				unwritten = true
			}
		}
		if more := len(rw.Ranges) - min(len(rw.Ranges), maxWrongRangesShown) + rw.More; more > 0 {
			fmt.Fprintf(&b, ", and %d more range(s)", more)
		}
		b.WriteString("\n")
	}
	if unwritten {
		// The sentinel is judged by value: one a rank sent from its
		// recvbuf before filling it (a forward before its receive
		// completed) lands as "never written" on the next rank.
		b.WriteString("  (never written: the elements still hold the sentinel recvbufs start with, NaN for floats, 0xA5 bytes for integers, or received it: a rank sent from its recvbuf before filling it)\n")
	}
	return b.String()
}
