package msccl

import (
	"fmt"

	"kernbench/engine/topology"
)

// A schedule that runs to the end can still leave a wrong result: an
// output chunk no step writes, a chunk received into the wrong place, a
// sum that misses a rank or counts one twice. A run finds those in its
// data; CheckResult finds them without running, by following what each
// chunk holds (flow) and comparing every output chunk with what the
// collective wants there, as msccl-tools' MSCCLang checks its programs'
// postconditions.

// content is what a chunk holds in the symbolic run of a schedule: the
// input chunk idx of the ranks in from, combined by the redop.
type content struct {
	idx  int
	from ranks
	// mixed: it combines input chunks of different indexes (idxs, in
	// ascending order); twice: it combines the chunks of the ranks in dup
	// more than once (a sum counts them twice); unset: it holds, or
	// combines, data no step wrote.
	mixed, twice, unset bool
	idxs                []int
	dup                 ranks
}

// combine is the redop of x and y, symbolically.
func combine(x, y content) content {
	z := content{idx: x.idx, from: x.from.union(y.from), mixed: x.mixed || y.mixed || x.idx != y.idx,
		twice: x.twice || y.twice, unset: x.unset || y.unset}
	if z.mixed {
		z.idxs = mergeIdxs(x.indexes(), y.indexes())
	}
	for i := range x.from {
		if both := x.from[i] & y.from[i]; both != 0 {
			z.twice = true
			if z.dup == nil {
				z.dup = make(ranks, len(x.from))
			}
			z.dup[i] |= both
		}
	}
	for _, d := range []ranks{x.dup, y.dup} {
		if d == nil {
			continue
		}
		if z.dup == nil {
			z.dup = make(ranks, len(d))
		}
		for i := range d {
			z.dup[i] |= d[i]
		}
	}
	return z
}

// indexes are the input chunks c combines, ascending.
func (c content) indexes() []int {
	if c.mixed {
		return c.idxs
	}
	return []int{c.idx}
}

// mergeIdxs is the ascending union of two ascending lists.
func mergeIdxs(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || i < len(a) && a[i] < b[j]:
			out = append(out, a[i])
			i++
		case i >= len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// members are the ranks of r below n, ascending.
func (r ranks) members(n int) []int {
	var who []int
	for k := 0; k < n && r != nil; k++ {
		if r[k/64]&(1<<(k%64)) != 0 {
			who = append(who, k)
		}
	}
	return who
}

// same reports whether c holds exactly what want does.
func (c content) same(want content) bool {
	if c.unset || c.mixed || c.twice || c.idx != want.idx {
		return false
	}
	for i := range want.from {
		if c.from[i] != want.from[i] {
			return false
		}
	}
	return true
}

// describe says what c holds, in words.
func (c content) describe(ngpus int) string {
	switch {
	case c.unset:
		return "data no step wrote"
	case c.mixed:
		return fmt.Sprintf("a combination of different input chunks (%s) of ranks %s", topology.RankRanges(c.idxs), topology.RankRanges(c.from.members(ngpus)))
	}
	who := c.from.members(ngpus)
	var s string
	switch {
	case len(who) == 1:
		s = fmt.Sprintf("rank %d's input chunk %d", who[0], c.idx)
	case len(who) == ngpus:
		s = fmt.Sprintf("the reduction of input chunk %d over all %d ranks", c.idx, ngpus)
	default:
		s = fmt.Sprintf("the reduction of input chunk %d over ranks %s only", c.idx, topology.RankRanges(who))
	}
	if c.twice {
		switch dup := c.dup.members(ngpus); len(dup) {
		case 0:
			s += ", some rank's counted more than once"
		case 1:
			s += fmt.Sprintf(", rank %d's counted more than once", dup[0])
		default:
			s += fmt.Sprintf(", ranks %s counted more than once", topology.RankRanges(dup))
		}
	}
	return s
}

// CheckResult reports every gpu whose output chunks do not end holding
// what the schedule's collective wants, for a valid schedule whose
// chunks are named by the larger per-rank buffer (nchunksperloop of
// them): allreduce's output chunk j is input chunk j reduced over every
// rank; reduce_scatter's chunk j on gpu g is input chunk g*per+j reduced
// over every rank (per = nchunksperloop / ngpus); allgather's chunk j is
// rank j/per's input chunk j%per; alltoall's chunk j on gpu g is rank
// j/per's input chunk g*per+j%per; broadcast's chunk j is root's input
// chunk j on every gpu; reduce's chunk j on root is input chunk j reduced over
// every rank. alias maps the chunks that share memory in place; root is
// a broadcast's or reduce's root. Each gpu is reported once, at its
// <gpu> line, with its first wrong chunk. A collective whose chunks do
// not divide among the gpus is not checked (a run refuses its sizes).
func (a *Algo) CheckResult(alias Alias, root int) error {
	n, c := a.NGPUs, a.NChunksPerLoop
	if n < 1 || c < 1 {
		return nil
	}
	per := c / n
	words := (n + 63) / 64
	one := func(r int) ranks {
		s := make(ranks, words)
		s[r/64] |= 1 << (r % 64)
		return s
	}
	all := make(ranks, words)
	for r := 0; r < n; r++ {
		all[r/64] |= 1 << (r % 64)
	}
	// want gives what output chunk j of gpu g must hold, and whether it
	// is checked at all.
	var want func(g, j int) (content, bool)
	outputs := c
	switch a.Coll {
	case "allreduce":
		want = func(_, j int) (content, bool) { return content{idx: j, from: all}, true }
	case "reduce_scatter":
		outputs = per
		want = func(g, j int) (content, bool) { return content{idx: g*per + j, from: all}, true }
	case "allgather":
		want = func(_, j int) (content, bool) { return content{idx: j % per, from: one(j / per)}, true }
	case "alltoall":
		want = func(g, j int) (content, bool) { return content{idx: g*per + j%per, from: one(j / per)}, true }
	case "broadcast":
		want = func(_, j int) (content, bool) { return content{idx: j, from: one(root)}, true }
	case "reduce":
		want = func(g, j int) (content, bool) {
			if g != root {
				// Every output but the root's stays as it was: in place
				// the rank's input, out of place unwritten.
				return content{idx: j, from: one(g), unset: !a.InPlace}, true
			}
			return content{idx: j, from: all}, true
		}
	default:
		return nil
	}
	if outputs != c || a.Coll == "allgather" || a.Coll == "alltoall" {
		// Chunks named per rank (per of them) must divide evenly.
		if per < 1 || c%n != 0 {
			return nil
		}
	}
	input := func(g, idx int) content { return content{idx: idx, from: one(g)} }
	absent := func() content { return content{from: make(ranks, words), unset: true} }
	inputs := c
	if a.Coll == "allgather" {
		inputs = per
	}
	held, err := flow(a, alias, inputs, input, absent, combine, func(StepRef, *Step, []content) error { return nil })
	if err != nil {
		return err
	}
	var errs ErrorList
	for _, g := range a.GPUs {
		var first string
		wrong := 0
		for j := 0; j < outputs; j++ {
			w, checked := want(g.ID, j)
			if !checked {
				continue
			}
			got, written := held[alias.chunk(g.ID, Output, j)]
			if w.unset && !written || written && got.same(w) {
				continue
			}
			if wrong++; wrong > 1 {
				continue
			}
			switch {
			case w.unset:
				first = fmt.Sprintf("gpu %d's output chunk %d is written (it ends holding %s); %s leaves every output but the root's (rank %d's) as it was", g.ID, j, got.describe(n), a.Coll, root)
			case !written:
				first = fmt.Sprintf("gpu %d's output chunk %d is never written; %s wants %s there", g.ID, j, a.Coll, w.describe(n))
			default:
				first = fmt.Sprintf("gpu %d's output chunk %d ends holding %s; %s wants %s", g.ID, j, got.describe(n), a.Coll, w.describe(n))
			}
		}
		if wrong > 1 {
			first += fmt.Sprintf(" (and %d more of its output chunks are wrong)", wrong-1)
		}
		if wrong > 0 {
			errs = append(errs, &Error{File: a.File, Line: g.Line, Msg: first})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs.sorted()
}
