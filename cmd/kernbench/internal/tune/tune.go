// Package tune ranks the runs of `kernbench tune`, its one job: the
// fastest run of each size (and by how much), the select: ranges of
// sizes the winners make, and those ranges as ccl.yaml, as text and as an
// exported schedule's byte range.
package tune

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"kernbench/engine/collective"
	"kernbench/engine/config"
	"kernbench/engine/msccl"
	"kernbench/engine/spelling"
)

// Candidate is one run of a tune (a variant) at one size, as --json's
// document names it too.
type Candidate struct {
	Label     string   `json:"label"`         // the variant's label, as the table names it
	Algorithm string   `json:"algorithm"`     // its ccl.yaml algorithm
	Set       []string `json:"set,omitempty"` // its --vary items
	TimeNs    float64  `json:"sim_time_ns"`   // simulated time
}

// Size is one size of the sweep and the runs that gave a right
// result for it, in variant order.
type Size struct {
	Bytes      int64 // bytes per rank buffer, as --bytes gives them
	Candidates []Candidate
}

// Winner is the fastest run at one size and the next fastest other
// run (nil when only one ran).
type Winner struct {
	Bytes    int64
	Best     Candidate
	RunnerUp *Candidate
}

// PickWinners is the fastest candidate of each size, the first in
// variant order on a tie; a size no run finished right has no winner.
func PickWinners(sizes []Size) []Winner {
	var out []Winner
	for _, s := range sizes {
		if len(s.Candidates) == 0 {
			continue
		}
		order := slices.Clone(s.Candidates)
		slices.SortStableFunc(order, func(a, b Candidate) int {
			switch {
			case a.TimeNs < b.TimeNs:
				return -1
			case a.TimeNs > b.TimeNs:
				return 1
			}
			return 0
		})
		w := Winner{Bytes: s.Bytes, Best: order[0]}
		if len(order) > 1 {
			w.RunnerUp = &order[1]
		}
		out = append(out, w)
	}
	return out
}

// Margin is how the winner beats the runner-up: "1.23× faster than
// ring_allreduce". runs is how many runs the tune compares: a winner
// without a runner-up is the only run, or the only one of them that
// finished right at its size (the others failed there, or earlier, or
// were wrong).
func (w Winner) Margin(runs int) string {
	switch {
	case w.RunnerUp == nil && runs > 1:
		return fmt.Sprintf("the only one of %d runs that finished right", runs)
	case w.RunnerUp == nil:
		return "the only run"
	case w.RunnerUp.TimeNs == w.Best.TimeNs:
		return fmt.Sprintf("tied with %s (the first listed wins)", w.RunnerUp.Label)
	case w.RunnerUp.TimeNs < w.Best.TimeNs*1.00005:
		// A closer race than four decimals show ("1.0000× faster" read
		// as a tie): the lead itself, in simulated time.
		return fmt.Sprintf("ahead of %s by %s ns of %s ns", w.RunnerUp.Label,
			strconv.FormatFloat(w.RunnerUp.TimeNs-w.Best.TimeNs, 'g', 3, 64), strconv.FormatFloat(w.Best.TimeNs, 'f', -1, 64))
	case w.RunnerUp.TimeNs < w.Best.TimeNs*1.005:
		// A closer race than two decimals show.
		return fmt.Sprintf("%.4f× faster than %s", w.RunnerUp.TimeNs/w.Best.TimeNs, w.RunnerUp.Label)
	}
	return fmt.Sprintf("%.2f× faster than %s", w.RunnerUp.TimeNs/w.Best.TimeNs, w.RunnerUp.Label)
}

// Answer is the answer of a tune in --json's document, beside the
// comparison's runs: the winner of each size (a size no run finished
// right is in Missing) and the ranges of select:.
type Answer struct {
	Collective string         `json:"collective"`
	WorldSize  int            `json:"world_size"`
	Sizes      []int64        `json:"sizes"`
	Shard      string         `json:"shard,omitempty"` // "I/N": the ranges cover its sizes
	Winners    []AnswerWinner `json:"winners"`
	Missing    []int64        `json:"missing,omitempty"`
	Select     []AnswerRange  `json:"select"`
	Exported   []Exported     `json:"exported,omitempty"`
}

// AnswerWinner is a Winner in the document: the size, the winning run,
// and the next fastest run with Speedup, its time over the winner's
// (both absent when only one run finished right).
type AnswerWinner struct {
	Bytes int64 `json:"bytes"`
	// Size is the table's size, the bytes of the runs' results: world_size
	// × Bytes for a collective with a count × world_size buffer.
	Size int64 `json:"size"`
	Candidate
	RunnerUp *Candidate `json:"runner_up,omitempty"`
	Speedup  float64    `json:"speedup,omitempty"`
}

// AnswerRange is a select: range in the document.
type AnswerRange struct {
	MinBytes  int64    `json:"min_bytes"`
	MaxBytes  int64    `json:"max_bytes,omitempty"`  // absent: no upper bound
	WorldSize int      `json:"world_size,omitempty"` // as select: writes it
	Algorithm string   `json:"algorithm"`
	Set       []string `json:"set,omitempty"`
}

// Exported is a schedule --export-msccl wrote.
type Exported struct {
	File      string `json:"file"`
	Algorithm string `json:"algorithm"`
	Range     string `json:"range"`
}

// NewAnswer is the answer of a tune of collective at world ranks over
// sizes (the sizes it ran, with their runs), from its winners and ranges.
func NewAnswer(coll string, world int, sizes []Size, winners []Winner, ranges []config.SelectRange) Answer {
	a := Answer{Collective: coll, WorldSize: world, Sizes: []int64{}, Winners: []AnswerWinner{}, Select: []AnswerRange{}}
	for _, s := range sizes {
		a.Sizes = append(a.Sizes, s.Bytes)
		if !slices.ContainsFunc(winners, func(w Winner) bool { return w.Bytes == s.Bytes }) {
			a.Missing = append(a.Missing, s.Bytes)
		}
	}
	for _, w := range winners {
		j := AnswerWinner{Bytes: w.Bytes, Size: w.Bytes, Candidate: w.Best}
		if c, ok := collective.Lookup(coll); ok && c.WideBuffers() != "" && world > 0 {
			j.Size *= int64(world)
		}
		if w.RunnerUp != nil {
			r := *w.RunnerUp
			j.RunnerUp = &r
			if w.Best.TimeNs > 0 {
				j.Speedup = w.RunnerUp.TimeNs / w.Best.TimeNs
			}
		}
		a.Winners = append(a.Winners, j)
	}
	for _, r := range ranges {
		a.Select = append(a.Select, AnswerRange{MinBytes: r.MinBytes, MaxBytes: r.MaxBytes, WorldSize: r.WorldSize, Algorithm: r.Algorithm, Set: r.Set})
	}
	return a
}

// SelectRanges turns the winners of a sweep's sizes (sweep: all its
// sizes, ascending, of which winners may hold a shard's) into ranges
// of sizes: each measured size wins from itself up to the next size of
// the sweep, the smallest from 0 and the largest with no upper bound.
// Adjacent ranges with the same algorithm and settings are one.
func SelectRanges(sweep []int64, winners []Winner) []config.SelectRange {
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

// SelectYAML is select: for one collective as a ccl.yaml fragment, under
// comment lines (header, without the "# ").
func SelectYAML(collective string, ranges []config.SelectRange, header []string) []byte {
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
		if r.WorldSize != 0 {
			fmt.Fprintf(&b, ", world_size: %d", r.WorldSize)
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

// RangesText is the ranges on one line: "[0, 65536) rd_allreduce,
// [65536, ∞) ring_allreduce".
func RangesText(ranges []config.SelectRange) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = r.RangeString() + " " + r.Algorithm
		if len(r.Set) > 0 {
			parts[i] += " " + strings.Join(r.Set, " ")
		}
	}
	return strings.Join(parts, ", ")
}

// SizesText is a sweep's sizes for a comment: "1024, 4096, …, 1048576".
func SizesText(sweep []int64) string {
	parts := make([]string, len(sweep))
	for i, n := range sweep {
		parts[i] = fmt.Sprint(n)
	}
	if len(parts) > 6 {
		parts = append(parts[:3], "…", parts[len(parts)-1])
	}
	return strings.Join(parts, ", ")
}

// SetRange gives the exported schedule in buf the byte range of r
// (minBytes, maxBytes: MSCCL's runtime runs a schedule for the calls
// whose size lies in its range).
func SetRange(buf *bytes.Buffer, r config.SelectRange) error {
	a, err := msccl.Parse("exported schedule", buf.Bytes())
	if err != nil {
		return err
	}
	a.MinBytes, a.MaxBytes = r.MinBytes, r.MaxBytes
	buf.Reset()
	return a.Write(buf)
}

// Algorithms are the algorithms a tune of collective runs: names,
// each of the configuration and not of another collective, or else
// every algorithm whose entry names collective.
func Algorithms(cfg *config.Config, collective string, names []string) ([]string, error) {
	if !slices.Contains(config.Collectives(), collective) {
		return nil, fmt.Errorf("tune: unknown collective %q (want one of %s)%s", collective, strings.Join(config.Collectives(), ", "), spelling.Hint(collective, config.Collectives()))
	}
	var own []string // the algorithms of the collective
	for _, n := range cfg.AlgorithmNames {
		if cfg.Algorithms[n].Collective == collective {
			own = append(own, n)
		}
	}
	if len(names) == 0 {
		names = own
		if len(names) == 0 {
			return nil, fmt.Errorf("tune: no algorithm of %s names collective: %s; name the algorithms to run", cfg.File, collective)
		}
		return names, nil
	}
	for i, n := range names {
		a, err := cfg.Algorithm(n)
		if err != nil {
			if filepath.Ext(n) == ".xml" {
				// ccl.yaml's modules are .star files: an MSCCL schedule
				// cannot take a name there, so the hint above would be refused.
				return nil, fmt.Errorf("tune: %s is an MSCCL schedule, and tune compares algorithms of ccl.yaml by name, whose modules are .star files: compare schedules with kernbench run %s OTHER.xml --sweep MIN:MAX", n, n)
			}
			if ext := filepath.Ext(n); ext == ".star" {
				// select: names algorithms, so a file takes a name first.
				name := strings.TrimSuffix(filepath.Base(n), ext)
				return nil, fmt.Errorf("tune: %s is a file, and tune compares algorithms of ccl.yaml by name, the name select: records: give it one with an entry in ccl.yaml (%s: {module: %s}) or --set algorithms.%s.module=%s, then tune %s", n, name, n, name, n, name)
			}
			// As run's: the nearest name, among every algorithm (one of
			// another collective is then refused naming whose it is).
			list := fmt.Sprintf("the algorithms of %s: %s", collective, strings.Join(own, ", "))
			if len(own) == 0 {
				list = fmt.Sprintf("no algorithm of %s names collective: %s", cfg.File, collective)
			}
			return nil, fmt.Errorf("tune: unknown algorithm %q (%s)%s", n, list, spelling.Hint(n, cfg.AlgorithmNames))
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
