package msccl

import (
	"fmt"
	"sort"
)

// Two thread blocks of a gpu run at the same time: a step of one that
// writes a chunk while a step of the other reads or writes it gives a
// result that depends on which goes first, unless something orders the
// two. A run finds such a race only when its timing meets it (and
// run_kernel_in_mock when one of its orders does); Races finds every one
// without running, from what orders steps: program order within a thread
// block, depid/deps, and a receive after the send it matches (so a chain
// of messages orders its ends).

// access is one step's use of a chunk.
type access struct {
	step  int // the step's index among its gpu's steps
	write bool
}

// Races reports every pair of steps of one gpu, in different thread
// blocks, that touch a chunk (after alias: in place, i and o share
// chunks) at least one of them writing, with nothing ordering them. Each
// pair is reported once, at the line of its later step in the file. So
// is a step whose source and destination share a chunk shifted (shifted),
// whose result depends on the order of its own chunks.
func (a *Algo) Races(alias Alias) error {
	all := a.steps()
	if len(all.order) != len(all.refs) {
		return nil // (validation reports the cycle)
	}
	// Each gpu's steps, numbered apart (local): the reachability sets
	// below are over one gpu's steps.
	local := make([]int, len(all.refs))
	perGPU := make([][]int, len(a.GPUs)) // gpu -> its steps' ids
	for n, r := range all.refs {
		local[n] = len(perGPU[r.GPU])
		perGPU[r.GPU] = append(perGPU[r.GPU], n)
	}
	var errs ErrorList
	errs = append(errs, a.shifted(alias)...)
	for g, steps := range perGPU {
		// The chunks each step of gpu g reads and writes.
		uses := map[chunkKey][]access{}
		for _, n := range steps {
			r := all.refs[n]
			st := a.step(r)
			for k := 0; k < st.Cnt; k++ {
				if st.Reads() {
					c := alias.chunk(g, st.SrcBuf, st.SrcOff+k)
					uses[c] = append(uses[c], access{local[n], false})
				}
				if st.Writes() {
					c := alias.chunk(g, st.DstBuf, st.DstOff+k)
					uses[c] = append(uses[c], access{local[n], true})
				}
			}
		}
		if len(uses) == 0 {
			continue
		}
		// after[n]: the steps of gpu g that some path from step n reaches
		// (bit i: gpu g's step i), filled in reverse topological order.
		words := (len(steps) + 63) / 64
		after := make([]uint64, len(all.refs)*words)
		for i := len(all.order) - 1; i >= 0; i-- {
			n := all.order[i]
			mine := after[n*words : (n+1)*words]
			for _, s := range all.succ[n] {
				theirs := after[s*words : (s+1)*words]
				for w := range mine {
					mine[w] |= theirs[w]
				}
				if all.refs[s].GPU == g {
					l := local[s]
					mine[l/64] |= 1 << (l % 64)
				}
			}
		}
		reaches := func(from, to int) bool { // gpu g's local steps
			n := steps[from]
			return after[n*words+to/64]&(1<<(to%64)) != 0
		}
		seen := map[[2]int]bool{}
		keys := make([]chunkKey, 0, len(uses))
		for c := range uses {
			keys = append(keys, c)
		}
		sort.Slice(keys, func(i, j int) bool {
			x, y := keys[i], keys[j]
			return x.buf < y.buf || x.buf == y.buf && x.idx < y.idx
		})
		for _, c := range keys {
			us := uses[c]
			for i := range us {
				for j := i + 1; j < len(us); j++ {
					x, y := us[i], us[j]
					rx, ry := all.refs[steps[x.step]], all.refs[steps[y.step]]
					if rx.TB == ry.TB || !x.write && !y.write || seen[[2]int{x.step, y.step}] {
						continue
					}
					if reaches(x.step, y.step) || reaches(y.step, x.step) {
						continue
					}
					seen[[2]int{x.step, y.step}], seen[[2]int{y.step, x.step}] = true, true
					errs = append(errs, a.raceError(rx, x.write, ry, y.write, c, alias))
				}
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs.sorted()
}

// shifted reports the steps whose source and destination share a chunk
// at different places of the step (cpy o[0..2) into o[1..3)): the step
// moves its cnt chunks at once on a GPU, and one by one in a run's loop
// iterations, so what the shared chunk ends holding depends on that
// order. A step that reads and writes the same chunks in place
// (rrc i 0 into i 0) is no such step.
func (a *Algo) shifted(alias Alias) ErrorList {
	var errs ErrorList
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			for _, st := range tb.Steps {
				if !st.Reads() || !st.Writes() || st.Cnt < 2 {
					continue
				}
				read := map[chunkKey]int{}
				for k := 0; k < st.Cnt; k++ {
					read[alias.chunk(g.ID, st.SrcBuf, st.SrcOff+k)] = k
				}
				for k := 0; k < st.Cnt; k++ {
					if r, ok := read[alias.chunk(g.ID, st.DstBuf, st.DstOff+k)]; ok && r != k {
						errs = append(errs, &Error{File: a.File, Line: st.Line, Msg: fmt.Sprintf(
							"gpu %d tb %d step %d (%s) reads %s chunks %d-%d and writes %s chunks %d-%d, which share a chunk at different places of the step: what it ends holding depends on the order the step moves its chunks in; read and write the same chunks, or no chunk in common",
							g.ID, tb.ID, st.S, st.Type, st.SrcBuf, st.SrcOff, st.SrcOff+st.Cnt-1, st.DstBuf, st.DstOff, st.DstOff+st.Cnt-1)})
						break
					}
				}
			}
		}
	}
	return errs
}

// raceError says that steps x and y (x writing if wx, y if wy) touch
// chunk c with nothing ordering them, at the later one's line, naming
// the chunk as that step does.
func (a *Algo) raceError(x StepRef, wx bool, y StepRef, wy bool, c chunkKey, alias Alias) *Error {
	sx, sy := a.step(x), a.step(y)
	if sy.Line < sx.Line {
		x, y, sx, sy, wx, wy = y, x, sy, sx, wy, wx
	}
	verb := func(w bool) string {
		if w {
			return "writes"
		}
		return "reads"
	}
	name := fmt.Sprintf("%s chunk %d", c.buf, c.idx)
	for k := 0; k < sy.Cnt; k++ {
		if wy && alias.chunk(y.GPU, sy.DstBuf, sy.DstOff+k) == c {
			name = fmt.Sprintf("%s chunk %d", sy.DstBuf, sy.DstOff+k)
		} else if !wy && alias.chunk(y.GPU, sy.SrcBuf, sy.SrcOff+k) == c {
			name = fmt.Sprintf("%s chunk %d", sy.SrcBuf, sy.SrcOff+k)
		}
	}
	// Which should go first the schedule's author knows: both ways.
	wait := func(p StepRef, sp *Step, q StepRef, sq *Step) string {
		if sp.DepID >= 0 {
			// A step waits for one step at most: a nop before it can
			// wait for the other.
			return fmt.Sprintf("a nop step before line %d with depid=\"%d\" deps=\"%d\" (the %s waits for the %s; that step already waits for tb %d step %d)", sp.Line, q.TB, q.S, sp.Type, sq.Type, sp.DepID, sp.Deps)
		}
		return fmt.Sprintf("depid=\"%d\" deps=\"%d\" on line %d (the %s waits for the %s)", q.TB, q.S, sp.Line, sp.Type, sq.Type)
	}
	fix := "make one wait for the other: " + wait(x, sx, y, sy) + ", or " + wait(y, sy, x, sx)
	return &Error{File: a.File, Line: sy.Line, Msg: fmt.Sprintf(
		"gpu %d: tb %d step %d (%s) %s %s while tb %d step %d (%s, line %d) %s it, and nothing orders the two (program order, depid/deps, or a chain of messages between them), so the result depends on which runs first; %s",
		y.GPU, y.TB, y.S, sy.Type, verb(wy), name, x.TB, x.S, sx.Type, sx.Line, verb(wx), fix)}
}
