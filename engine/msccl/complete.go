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
	input := func(g, _ int) ranks {
		r := make(ranks, words)
		r[g/64] |= 1 << (g % 64)
		return r
	}
	absent := func() ranks { return make(ranks, words) }
	completing := map[StepRef]bool{}
	// (allreduce, reduce_scatter and reduce: the larger buffer is the input.)
	_, err := flow(a, alias, a.NChunksPerLoop, input, absent, ranks.union, func(n StepRef, st *Step, out []ranks) error {
		switch st.Type {
		case "rrs", "rrc", "rrcs", "re":
		default:
			return nil
		}
		full := 0
		for _, v := range out {
			if v.count() == a.NGPUs {
				full++
			}
		}
		if full > 0 {
			if full < st.Cnt {
				return &Error{File: a.File, Line: st.Line, Msg: fmt.Sprintf("gpu %d tb %d step %d completes the sum of %d of its %d chunks: --redop avg divides where a sum completes, and cannot divide only some of a step's chunks", n.GPU, n.TB, n.S, full, st.Cnt)}
			}
			completing[n] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return completing, nil
}

// chunkKey names one chunk of a gpu's buffer, after aliasing.
type chunkKey struct {
	gpu int
	buf Buffer
	idx int
}

// flow evaluates a valid schedule on values of V, one per chunk: the
// first inputs chunks of i (the collective's input, whatever i_chunks
// a gpu declares: an in-place allgather's input lies in o) start as
// input(gpu, idx) and every other chunk as absent(); each step, in an order its waits allow (program order,
// depid/deps, a receive after its send), computes a value per chunk
// it moves (what it sends, stores or both; a reduction combines what it
// receives, or its dst for re, with its src), stores it where the step
// writes, passes it to the matching receive where it sends, and shows
// it to visit. It returns the value of every chunk written or read.
// Any order the waits allow gives the same values when the schedule has
// no race (which a run checks).
func flow[V any](a *Algo, alias Alias, inputs int, input func(gpu, idx int) V, absent func() V, reduce func(x, y V) V, visit func(n StepRef, st *Step, out []V) error) (map[chunkKey]V, error) {
	held := map[chunkKey]V{}
	for _, g := range a.GPUs {
		for k := 0; k < inputs; k++ {
			held[alias.chunk(g.ID, Input, k)] = input(g.ID, k)
		}
	}
	get := func(g int, b Buffer, idx int) V {
		if v, ok := held[alias.chunk(g, b, idx)]; ok {
			return v
		}
		return absent()
	}
	steps := a.steps()
	inbox := map[StepRef][]V{} // what a receiving step gets
	for _, i := range steps.order {
		n := steps.refs[i]
		st := a.step(n)
		msg := inbox[n]
		var out []V
		for k := 0; k < st.Cnt; k++ {
			var v V
			switch st.Type {
			case "s", "cpy":
				v = get(n.GPU, st.SrcBuf, st.SrcOff+k)
			case "r", "rcs":
				v = msg[k]
			case "rrs", "rrc", "rrcs":
				v = reduce(msg[k], get(n.GPU, st.SrcBuf, st.SrcOff+k))
			case "re":
				v = reduce(get(n.GPU, st.DstBuf, st.DstOff+k), get(n.GPU, st.SrcBuf, st.SrcOff+k))
			default:
				continue
			}
			if st.Writes() {
				held[alias.chunk(n.GPU, st.DstBuf, st.DstOff+k)] = v
			}
			out = append(out, v)
		}
		if err := visit(n, st, out); err != nil {
			return nil, err
		}
		if st.Sends() {
			inbox[steps.match[n]] = out
		}
	}
	return held, nil
}
