package msccl

import (
	"fmt"
	"kernbench/engine/collective"
	"slices"
	"strings"
)

// validate checks what the runtimes would trip over, in order: the
// header, the gpu and thread block tables, each step on its own, the
// pairing of sends with receives, and finally that the steps' waits
// (program order, depid/deps, a receive waiting for its send) have no
// cycle. Later stages run only when the earlier ones found nothing, since
// they index what the earlier ones check.
func validate(a *Algo) ErrorList {
	v := &validator{a: a}
	v.header()
	if len(v.errs) == 0 {
		v.tables()
	}
	if len(v.errs) == 0 {
		v.steps()
	}
	if len(v.errs) == 0 {
		v.pairs()
	}
	if len(v.errs) == 0 {
		v.cycles()
	}
	return v.errs
}

// MaxGPUs bounds ngpus (far beyond any simulated machine).
const MaxGPUs = 1 << 16

type validator struct {
	a    *Algo
	errs ErrorList
}

func (v *validator) errorf(line int, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.a.File, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) header() {
	a := v.a
	if _, ok := collective.Lookup(a.Coll); !ok {
		v.errorf(a.Line, "collective %q is not one kernbench can check (want one of %s)", a.Coll, strings.Join(collective.Names(), ", "))
	}
	switch {
	case a.NGPUs < 1:
		v.errorf(a.Line, "ngpus %d: want at least 1", a.NGPUs)
	case a.NGPUs > MaxGPUs:
		// The gpu table is allocated by ngpus: a typo must not exhaust memory.
		v.errorf(a.Line, "ngpus %d: want at most %d", a.NGPUs, MaxGPUs)
	}
	if a.NChunksPerLoop < 1 {
		v.errorf(a.Line, "nchunksperloop %d: want at least 1", a.NChunksPerLoop)
	}
	if a.NChannels < 1 {
		v.errorf(a.Line, "nchannels %d: want at least 1", a.NChannels)
	}
}

// tables checks gpu and thread block ids and sorts both by id.
func (v *validator) tables() {
	a := v.a
	byID := make([]*GPU, a.NGPUs)
	for i := range a.GPUs {
		g := &a.GPUs[i]
		switch {
		case g.ID < 0 || g.ID >= a.NGPUs:
			v.errorf(g.Line, "gpu id %d is outside [0, ngpus=%d)", g.ID, a.NGPUs)
			continue
		case byID[g.ID] != nil:
			v.errorf(g.Line, "gpu %d is defined twice (first at line %d)", g.ID, byID[g.ID].Line)
			continue
		}
		byID[g.ID] = g
		for _, c := range []struct {
			name string
			n    int
		}{{"i_chunks", g.IChunks}, {"o_chunks", g.OChunks}, {"s_chunks", g.SChunks}} {
			if c.n < 0 {
				v.errorf(g.Line, "gpu %d %s %d: want at least 0", g.ID, c.name, c.n)
			}
		}
		v.tbTable(g)
	}
	for id, g := range byID {
		if g == nil {
			v.errorf(a.Line, "gpu %d is missing (ngpus=%d wants ids 0..%d)", id, a.NGPUs, a.NGPUs-1)
		}
	}
	if len(v.errs) > 0 {
		return
	}
	slices.SortFunc(a.GPUs, func(x, y GPU) int { return x.ID - y.ID })
}

func (v *validator) tbTable(g *GPU) {
	a := v.a
	byID := make([]*TB, len(g.TBs))
	type conn struct{ peer, ch int }
	senders, receivers := map[conn]*TB{}, map[conn]*TB{}
	for i := range g.TBs {
		tb := &g.TBs[i]
		if tb.ID < 0 || tb.ID >= len(g.TBs) {
			v.errorf(tb.Line, "gpu %d tb id %d: want ids 0..%d (one per <tb>, in any order)", g.ID, tb.ID, len(g.TBs)-1)
			continue
		}
		if byID[tb.ID] != nil {
			v.errorf(tb.Line, "gpu %d tb %d is defined twice (first at line %d)", g.ID, tb.ID, byID[tb.ID].Line)
			continue
		}
		byID[tb.ID] = tb
		for _, pr := range []struct {
			what string
			peer int
		}{{"send", tb.Send}, {"recv", tb.Recv}} {
			switch {
			case pr.peer < -1 || pr.peer >= a.NGPUs:
				v.errorf(tb.Line, "gpu %d tb %d %s peer %d is outside [0, ngpus=%d) (-1 for none)", g.ID, tb.ID, pr.what, pr.peer, a.NGPUs)
			case pr.peer == g.ID:
				v.errorf(tb.Line, "gpu %d tb %d %s peer is the gpu itself", g.ID, tb.ID, pr.what)
			}
		}
		if tb.Chan < 0 || tb.Chan >= a.NChannels {
			v.errorf(tb.Line, "gpu %d tb %d chan %d is outside [0, nchannels=%d)", g.ID, tb.ID, tb.Chan, a.NChannels)
		}
		// A connection (peer, channel) has one sending and one receiving
		// thread block, as in the MSCCL runtimes: two would race for it.
		if tb.Send >= 0 {
			if o := senders[conn{tb.Send, tb.Chan}]; o != nil {
				v.errorf(tb.Line, "gpu %d tb %d sends to gpu %d on channel %d, as tb %d (line %d) does: one thread block per connection and direction", g.ID, tb.ID, tb.Send, tb.Chan, o.ID, o.Line)
			} else {
				senders[conn{tb.Send, tb.Chan}] = tb
			}
		}
		if tb.Recv >= 0 {
			if o := receivers[conn{tb.Recv, tb.Chan}]; o != nil {
				v.errorf(tb.Line, "gpu %d tb %d receives from gpu %d on channel %d, as tb %d (line %d) does: one thread block per connection and direction", g.ID, tb.ID, tb.Recv, tb.Chan, o.ID, o.Line)
			} else {
				receivers[conn{tb.Recv, tb.Chan}] = tb
			}
		}
	}
	slices.SortFunc(g.TBs, func(x, y TB) int { return x.ID - y.ID })
}

// Chunks is how many chunks gpu g declares for buffer b.
func (g *GPU) Chunks(b Buffer) int {
	switch b {
	case Input:
		return g.IChunks
	case Output:
		return g.OChunks
	case Scratch:
		return g.SChunks
	}
	return 0
}

func bufName(b Buffer) string {
	switch b {
	case Input:
		return "i (input)"
	case Output:
		return "o (output)"
	case Scratch:
		return "s (scratch)"
	}
	return "?"
}

func (v *validator) steps() {
	for gi := range v.a.GPUs {
		g := &v.a.GPUs[gi]
		for ti := range g.TBs {
			tb := &g.TBs[ti]
			for si := range tb.Steps {
				v.step(g, tb, si)
			}
		}
	}
}

func (v *validator) step(g *GPU, tb *TB, si int) {
	st := &tb.Steps[si]
	at := fmt.Sprintf("gpu %d tb %d step %d", g.ID, tb.ID, st.S)
	if st.S != si {
		v.errorf(st.Line, "gpu %d tb %d: step s=%d is step number %d of its thread block (steps are numbered 0, 1, ... in order)", g.ID, tb.ID, st.S, si)
		return
	}
	k, ok := kinds[st.Type]
	if !ok {
		v.errorf(st.Line, "%s: unknown step type %q (want one of %s)", at, st.Type, strings.Join(stepTypes, ", "))
		return
	}
	if k.sends && tb.Send < 0 {
		v.errorf(st.Line, "%s: type %s sends, but tb %d has no send peer (send=-1)", at, st.Type, tb.ID)
	}
	if k.recvs && tb.Recv < 0 {
		v.errorf(st.Line, "%s: type %s receives, but tb %d has no recv peer (recv=-1)", at, st.Type, tb.ID)
	}
	if st.Type != "nop" && st.Cnt < 1 {
		v.errorf(st.Line, "%s: cnt %d: want at least 1 chunk", at, st.Cnt)
	}
	operand := func(what string, b Buffer, off int) {
		if b == 0 {
			v.errorf(st.Line, "%s: type %s needs %sbuf", at, st.Type, what)
			return
		}
		if n := g.Chunks(b); off < 0 || st.Cnt >= 1 && off+st.Cnt > n {
			v.errorf(st.Line, "%s: %s chunks [%d, %d) of buffer %s are outside the %d chunk(s) gpu %d declares", at, what, off, off+st.Cnt, bufName(b), n, g.ID)
		}
	}
	if k.readsSrc {
		operand("src", st.SrcBuf, st.SrcOff)
	}
	if k.writesDst {
		operand("dst", st.DstBuf, st.DstOff)
	}
	if (st.DepID == -1) != (st.Deps == -1) {
		// The runtimes read deps only when depid is set: half a
		// dependency is either dropped or names a step that is not there.
		v.errorf(st.Line, "%s: depid %d with deps %d: a dependency names both the thread block (depid) and its step (deps), or neither (-1, -1)", at, st.DepID, st.Deps)
	} else if st.DepID != -1 {
		switch {
		case st.DepID < 0 || st.DepID >= len(g.TBs):
			v.errorf(st.Line, "%s: depid %d is not a thread block of gpu %d (tbs 0..%d)", at, st.DepID, g.ID, len(g.TBs)-1)
		case st.Deps < 0 || st.Deps >= len(g.TBs[st.DepID].Steps):
			v.errorf(st.Line, "%s: deps %d is not a step of gpu %d tb %d (steps 0..%d)", at, st.Deps, g.ID, st.DepID, len(g.TBs[st.DepID].Steps)-1)
		}
	}
}

// StepRef names one step.
type StepRef struct{ GPU, TB, S int }

// Peer is one matched transfer: the sending step and the receiving step.
type Peer struct{ Send, Recv StepRef }

// unpaired reports the steps of a connection from gpu from to gpu to on
// channel ch whose other end has no step at all (ss or rs empty), once
// per thread block with more than one such step, at the thread block's
// line; false when every thread block has one (pairs reports it at the
// step's line).
func (v *validator) unpaired(from, to, ch int, ss, rs []StepRef) bool {
	steps, sending := ss, true
	if len(ss) == 0 {
		steps, sending = rs, false
	}
	byTB := map[[2]int][]StepRef{}
	var tbs [][2]int
	for _, r := range steps {
		k := [2]int{r.GPU, r.TB}
		if _, ok := byTB[k]; !ok {
			tbs = append(tbs, k)
		}
		byTB[k] = append(byTB[k], r)
	}
	many := false
	for _, k := range tbs {
		many = many || len(byTB[k]) > 1
	}
	if !many {
		return false
	}
	for _, k := range tbs {
		mine := byTB[k]
		tb := &v.a.GPUs[k[0]].TBs[k[1]]
		first := v.a.step(mine[0])
		if sending {
			v.errorf(tb.Line, "gpu %d tb %d sends to gpu %d on channel %d (%d step(s), the first at line %d), but no thread block of gpu %d receives from gpu %d on channel %d: check send=\"%d\" here and the recv= of gpu %d's thread blocks",
				k[0], k[1], to, ch, len(mine), first.Line, to, from, ch, to, to)
		} else {
			v.errorf(tb.Line, "gpu %d tb %d receives from gpu %d on channel %d (%d step(s), the first at line %d), but no thread block of gpu %d sends to gpu %d on channel %d: check recv=\"%d\" here and the send= of gpu %d's thread blocks",
				k[0], k[1], from, ch, len(mine), first.Line, from, to, ch, from, from)
		}
	}
	return true
}

// pairs checks that the sends of gpu A to gpu B on channel c and B's
// receives from A on c match one for one, in order, with equal counts: the
// runtimes match them by order on the connection.
func (v *validator) pairs() {
	type conn struct{ from, to, ch int }
	sends, recvs := map[conn][]StepRef{}, map[conn][]StepRef{}
	var conns []conn
	note := func(c conn) {
		if _, ok := sends[c]; !ok {
			if _, ok := recvs[c]; !ok {
				conns = append(conns, c)
			}
		}
	}
	for _, g := range v.a.GPUs {
		for _, tb := range g.TBs {
			for _, st := range tb.Steps {
				ref := StepRef{g.ID, tb.ID, st.S}
				if st.Sends() {
					c := conn{g.ID, tb.Send, tb.Chan}
					note(c)
					sends[c] = append(sends[c], ref)
				}
				if st.Recvs() {
					c := conn{tb.Recv, g.ID, tb.Chan}
					note(c)
					recvs[c] = append(recvs[c], ref)
				}
			}
		}
	}
	for _, c := range conns {
		ss, rs := sends[c], recvs[c]
		if len(ss) == 0 || len(rs) == 0 {
			// No step at all on the other end: a thread block's send= or
			// recv= (or the peer's) names the wrong gpu or channel. Said
			// once per thread block, at its line, not once per step.
			if v.unpaired(c.from, c.to, c.ch, ss, rs) {
				continue
			}
		}
		for i := range max(len(ss), len(rs)) {
			switch {
			case i >= len(rs):
				s := v.a.step(ss[i])
				v.errorf(s.Line, "gpu %d tb %d step %d sends to gpu %d on channel %d, but gpu %d has no receive for it (%d send(s), %d receive(s) on that connection)",
					ss[i].GPU, ss[i].TB, ss[i].S, c.to, c.ch, c.to, len(ss), len(rs))
			case i >= len(ss):
				r := v.a.step(rs[i])
				v.errorf(r.Line, "gpu %d tb %d step %d receives from gpu %d on channel %d, but gpu %d has no send for it (%d send(s), %d receive(s) on that connection)",
					rs[i].GPU, rs[i].TB, rs[i].S, c.from, c.ch, c.from, len(ss), len(rs))
			default:
				s, r := v.a.step(ss[i]), v.a.step(rs[i])
				if s.Cnt != r.Cnt {
					v.errorf(r.Line, "gpu %d tb %d step %d receives cnt %d, but the send it matches (gpu %d tb %d step %d, line %d) has cnt %d",
						rs[i].GPU, rs[i].TB, rs[i].S, r.Cnt, ss[i].GPU, ss[i].TB, ss[i].S, s.Line, s.Cnt)
				}
			}
		}
		if len(v.errs) >= maxErrors {
			return
		}
	}
}

func (a *Algo) step(r StepRef) *Step { return &a.GPUs[r.GPU].TBs[r.TB].Steps[r.S] }

// Matches lists every transfer of a valid schedule: each sending step
// with the receiving step it pairs with, in file order of the sends.
func (a *Algo) Matches() []Peer {
	type conn struct{ from, to, ch int }
	recvs := map[conn][]StepRef{}
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			for _, st := range tb.Steps {
				if st.Recvs() {
					c := conn{tb.Recv, g.ID, tb.Chan}
					recvs[c] = append(recvs[c], StepRef{g.ID, tb.ID, st.S})
				}
			}
		}
	}
	var out []Peer
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			for _, st := range tb.Steps {
				if st.Sends() {
					c := conn{g.ID, tb.Send, tb.Chan}
					out = append(out, Peer{Send: StepRef{g.ID, tb.ID, st.S}, Recv: recvs[c][0]})
					recvs[c] = recvs[c][1:]
				}
			}
		}
	}
	return out
}

// cycles finds a step that waits, directly or through others, for itself:
// such a schedule deadlocks on any machine. A step waits for the previous
// step of its thread block, for its depid/deps step, and a receive for
// the send it matches.
func (v *validator) cycles() {
	a := v.a
	base := map[[2]int]int{} // (gpu, tb) -> index of its step 0
	var refs []StepRef
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			base[[2]int{g.ID, tb.ID}] = len(refs)
			for _, st := range tb.Steps {
				refs = append(refs, StepRef{g.ID, tb.ID, st.S})
			}
		}
	}
	id := func(r StepRef) int { return base[[2]int{r.GPU, r.TB}] + r.S }
	waits := make([][]int, len(refs)) // waits[n]: the steps n waits for
	for n, r := range refs {
		st := a.step(r)
		if r.S > 0 {
			waits[n] = append(waits[n], n-1)
		}
		if st.DepID >= 0 {
			waits[n] = append(waits[n], id(StepRef{r.GPU, st.DepID, st.Deps}))
		}
	}
	for _, m := range a.Matches() {
		waits[id(m.Recv)] = append(waits[id(m.Recv)], id(m.Send))
	}
	// Iterative depth-first search (schedules have many thousand steps).
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]int, len(refs))
	for start := range refs {
		if state[start] != unseen {
			continue
		}
		type frame struct{ n, next int }
		path := []frame{{start, 0}}
		state[start] = onPath
		for len(path) > 0 {
			f := &path[len(path)-1]
			if f.next == len(waits[f.n]) {
				state[f.n] = done
				path = path[:len(path)-1]
				continue
			}
			m := waits[f.n][f.next]
			f.next++
			switch state[m] {
			case onPath:
				// path[i..] from m: each waits for the next, the last for m.
				i := len(path) - 1
				for path[i].n != m {
					i--
				}
				var cyc []StepRef
				for _, f := range path[i:] {
					cyc = append(cyc, refs[f.n])
				}
				v.cycleError(cyc)
				return
			case unseen:
				state[m] = onPath
				path = append(path, frame{m, 0})
			}
		}
	}
}

// cycleError reports a cycle given as a chain of steps each waiting for
// the next (the last waits for the first).
func (v *validator) cycleError(cyc []StepRef) {
	// Start at the step that comes first in the file, for a stable message.
	first := 0
	for i, r := range cyc {
		if v.a.step(r).Line < v.a.step(cyc[first]).Line {
			first = i
		}
	}
	cyc = append(cyc[first:], cyc[:first]...)
	var parts []string
	for i, r := range cyc {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("... (%d steps in all)", len(cyc)))
			break
		}
		parts = append(parts, fmt.Sprintf("gpu %d tb %d step %d (line %d)", r.GPU, r.TB, r.S, v.a.step(r).Line))
	}
	v.errorf(v.a.step(cyc[0]).Line, "dependency cycle: %s waits for %s; no order of the steps can run it", parts[0], strings.Join(append(parts[1:], parts[0]), " which waits for "))
}
