package msccl

import (
	"fmt"

	"kernbench/engine/collective"
)

// A reduction collective's avg is the sum divided by the number of ranks,
// and the division belongs where a chunk's sum becomes complete. The XML
// does not mark that step, so Completing finds it: it follows every
// chunk's contributions (the set of ranks whose input it sums) through the
// schedule in an order its waits allow, and reports the reducing steps
// whose result holds every rank's.

// Alias maps chunk idx of buffer b on a gpu to the chunk it shares memory
// with, so that an in-place schedule's i and o meet; nil when none do.
type Alias func(gpu int, b Buffer, idx int) (Buffer, int)

// ranks is a set of ranks.
type ranks []uint64

func (r ranks) union(o ranks) ranks {
	out := make(ranks, len(r))
	for i := range r {
		out[i] = r[i] | o[i]
	}
	return out
}

func (r ranks) count() int {
	n := 0
	for _, w := range r {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}

// Completing returns the reducing steps (rrs, rrc, rrcs, re) after which
// their chunks hold the contributions of all ngpus ranks, for a valid
// schedule of allreduce, reduce_scatter or reduce (nil for the others). A
// step that completes some of its cnt chunks but not all is an error: no
// single division fits it.
func (a *Algo) Completing(alias Alias) (map[StepRef]bool, error) {
	if c, ok := collective.Lookup(a.Coll); !ok || !c.Reduces {
		return nil, nil
	}
	words := (a.NGPUs + 63) / 64
	type key struct {
		gpu int
		buf Buffer
		idx int
	}
	canon := func(g int, b Buffer, idx int) key {
		if alias != nil {
			b, idx = alias(g, b, idx)
		}
		return key{g, b, idx}
	}
	held := map[key]ranks{}
	for _, g := range a.GPUs {
		for k := 0; k < g.IChunks; k++ {
			r := make(ranks, words)
			r[g.ID/64] |= 1 << (g.ID % 64)
			held[canon(g.ID, Input, k)] = r
		}
	}
	get := func(g int, b Buffer, idx int) ranks {
		if r, ok := held[canon(g, b, idx)]; ok {
			return r
		}
		return make(ranks, words)
	}
	// The waits: program order, depid/deps, a receive after its send.
	type node = StepRef
	next := map[node][]node{}
	indeg := map[node]int{}
	var order []node
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			for _, st := range tb.Steps {
				n := node{g.ID, tb.ID, st.S}
				order = append(order, n)
				indeg[n] += 0
				if st.S > 0 {
					p := node{g.ID, tb.ID, st.S - 1}
					next[p] = append(next[p], n)
					indeg[n]++
				}
				if st.DepID >= 0 {
					d := node{g.ID, st.DepID, st.Deps}
					next[d] = append(next[d], n)
					indeg[n]++
				}
			}
		}
	}
	matchOf := map[node]node{}
	for _, m := range a.Matches() {
		next[m.Send] = append(next[m.Send], m.Recv)
		indeg[m.Recv]++
		matchOf[m.Send] = m.Recv
	}
	inbox := map[node][]ranks{} // what a receiving step gets
	completing := map[StepRef]bool{}
	queue := []node{}
	for _, n := range order {
		if indeg[n] == 0 {
			queue = append(queue, n)
		}
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		st := a.step(n)
		msg := inbox[n]
		var out []ranks
		full := 0
		for k := 0; k < st.Cnt; k++ {
			var v ranks
			switch st.Type {
			case "s":
				v = get(n.GPU, st.SrcBuf, st.SrcOff+k)
			case "r", "rcs":
				v = msg[k]
			case "rrs", "rrc", "rrcs":
				v = msg[k].union(get(n.GPU, st.SrcBuf, st.SrcOff+k))
			case "cpy":
				v = get(n.GPU, st.SrcBuf, st.SrcOff+k)
			case "re":
				v = get(n.GPU, st.DstBuf, st.DstOff+k).union(get(n.GPU, st.SrcBuf, st.SrcOff+k))
			default:
				continue
			}
			switch st.Type {
			case "rrs", "rrc", "rrcs", "re":
				if v.count() == a.NGPUs {
					full++
				}
			}
			if st.Writes() {
				held[canon(n.GPU, st.DstBuf, st.DstOff+k)] = v
			}
			out = append(out, v)
		}
		if full > 0 {
			if full < st.Cnt {
				return nil, &Error{File: a.File, Line: st.Line, Msg: fmt.Sprintf("gpu %d tb %d step %d completes the sum of %d of its %d chunks: --redop avg divides where a sum completes, and cannot divide only some of a step's chunks", n.GPU, n.TB, n.S, full, st.Cnt)}
			}
			completing[n] = true
		}
		if st.Sends() {
			inbox[matchOf[n]] = out
		}
		for _, m := range next[n] {
			if indeg[m]--; indeg[m] == 0 {
				queue = append(queue, m)
			}
		}
	}
	return completing, nil
}
