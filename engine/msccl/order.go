package msccl

// steps is what orders a valid schedule's steps, for the analyses that
// follow them (flow, Races): program order within a thread block, a
// step's depid/deps, and a receive after the send it matches.
type steps struct {
	refs  []StepRef // every step, in file order
	id    map[StepRef]int
	succ  [][]int // the steps that wait for each one
	match map[StepRef]StepRef
	// order is every step in an order the waits allow (Kahn's, taking
	// steps ready together in file order); shorter than refs when the
	// steps wait in a cycle (validation reports it).
	order []int
}

// steps builds a's steps and what orders them.
func (a *Algo) steps() *steps {
	s := &steps{id: map[StepRef]int{}, match: map[StepRef]StepRef{}}
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			for _, st := range tb.Steps {
				r := StepRef{g.ID, tb.ID, st.S}
				s.id[r] = len(s.refs)
				s.refs = append(s.refs, r)
			}
		}
	}
	s.succ = make([][]int, len(s.refs))
	indeg := make([]int, len(s.refs))
	edge := func(from, to StepRef) {
		f, t := s.id[from], s.id[to]
		s.succ[f] = append(s.succ[f], t)
		indeg[t]++
	}
	for _, r := range s.refs {
		st := a.step(r)
		if st.S > 0 {
			edge(StepRef{r.GPU, r.TB, st.S - 1}, r)
		}
		if st.DepID >= 0 {
			edge(StepRef{r.GPU, st.DepID, st.Deps}, r)
		}
	}
	for _, m := range a.Matches() {
		edge(m.Send, m.Recv)
		s.match[m.Send] = m.Recv
	}
	s.order = make([]int, 0, len(s.refs))
	for n := range s.refs {
		if indeg[n] == 0 {
			s.order = append(s.order, n)
		}
	}
	for i := 0; i < len(s.order); i++ {
		for _, t := range s.succ[s.order[i]] {
			if indeg[t]--; indeg[t] == 0 {
				s.order = append(s.order, t)
			}
		}
	}
	return s
}

// chunk names chunk idx of buffer b on gpu g after the aliasing (nil: none).
func (al Alias) chunk(g int, b Buffer, idx int) chunkKey {
	if al != nil {
		b, idx = al(g, b, idx)
	}
	return chunkKey{g, b, idx}
}
