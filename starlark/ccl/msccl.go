package ccl

import (
	_ "embed"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"kernbench/engine/config"
	"kernbench/engine/msccl"
	"kernbench/engine/sim"
	"kernbench/engine/topology"
	"kernbench/starlark/errkind"
	"kernbench/starlark/orch"
	"kernbench/starlark/script"
)

// An MSCCL XML schedule runs through the same path as a .star algorithm:
// engine/msccl parses and validates it, and msccl_runner.star is its
// kernel (one tl.spawn thread per thread block, each step one tl
// primitive) and its neighbors() hook (the directions its thread blocks
// use). The bench, reference check, phase 2, traces and deadlock reports
// are those of every run.

//go:embed msccl_runner.star
var mscclRunner []byte

// mscclRunnerName is the runner's file name in backtraces.
const mscclRunnerName = "msccl_runner.star"

// IsMSCCL reports whether a run or check argument names an MSCCL XML file.
func IsMSCCL(arg string) bool { return strings.EqualFold(filepath.Ext(arg), ".xml") }

// loadMSCCL reads and validates an MSCCL XML file; every problem is an
// exit-2 failure with the file's line.
func loadMSCCL(arg string, src script.Source) (*msccl.Algo, error) {
	data, err := src.ReadFile(arg)
	if err != nil {
		return nil, WithKind(errkind.Usage, &Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	a, err := msccl.Parse(arg, data)
	if err != nil {
		return nil, WithKind(errkind.MSCCL, &Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	return a, nil
}

// mscclDir names the direction of a gpu towards peer on channel ch: one
// queue pair per (peer, channel), as an MSCCL connection.
func mscclDir(peer, ch int) string {
	return topology.ChannelDir(fmt.Sprintf("g%d", peer), ch)
}

// mscclNeighbors is every rank's map of direction -> peer: a direction for
// each (peer, channel) a thread block sends to or receives from, on both
// ends (a queue pair has both).
func mscclNeighbors(a *msccl.Algo) []map[string]int {
	maps := make([]map[string]int, a.NGPUs)
	for i := range maps {
		maps[i] = map[string]int{}
	}
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			for _, peer := range []int{tb.Send, tb.Recv} {
				if peer >= 0 {
					maps[g.ID][mscclDir(peer, tb.Chan)] = peer
					maps[peer][mscclDir(g.ID, tb.Chan)] = g.ID
				}
			}
		}
	}
	return maps
}

// mscclParams are the runner's keyword arguments: the schedule and the
// neighbour maps, frozen (parallel sweeps share them). final are the steps
// that divide the sum by the world size (--redop avg; nil otherwise).
func mscclParams(a *msccl.Algo, final map[msccl.StepRef]bool) []starlark.Tuple {
	str := func(kv starlark.StringDict) starlark.Value {
		return starlarkstruct.FromStringDict(starlarkstruct.Default, kv)
	}
	depended := map[msccl.StepRef]bool{}
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			for _, st := range tb.Steps {
				if st.DepID >= 0 {
					depended[msccl.StepRef{GPU: g.ID, TB: st.DepID, S: st.Deps}] = true
				}
			}
		}
	}
	var gpus []starlark.Value
	maxCnt := 1
	for _, g := range a.GPUs {
		signals := starlark.NewDict(0)
		var tbs []starlark.Value
		for _, tb := range g.TBs {
			var steps []starlark.Value
			for i, st := range tb.Steps {
				if st.Sends() || st.Recvs() {
					maxCnt = max(maxCnt, st.Cnt) // what must fit a ring
				}
				var src, dst, dep starlark.Value = starlark.None, starlark.None, starlark.None
				if st.Reads() {
					src = starlark.String(st.SrcBuf.String())
				}
				if st.Writes() {
					dst = starlark.String(st.DstBuf.String())
				}
				if st.DepID >= 0 {
					dep = starlark.Tuple{starlark.MakeInt(st.DepID), starlark.MakeInt(st.Deps)}
				}
				// Every step another waits for signals, whatever its
				// hasdep says: the runtimes rely on hasdep, we need not.
				signal := depended[msccl.StepRef{GPU: g.ID, TB: tb.ID, S: st.S}]
				if signal {
					_ = signals.SetKey(starlark.Tuple{starlark.MakeInt(tb.ID), starlark.MakeInt(st.S)}, starlark.MakeInt(st.Line))
				}
				steps = append(steps, starlark.Tuple{starlark.String(st.Type), src, starlark.MakeInt(st.SrcOff), dst, starlark.MakeInt(st.DstOff),
					starlark.MakeInt(st.Cnt), dep, starlark.Bool(signal), starlark.MakeInt(st.Line), starlark.Bool(prefetchNext(g, tb, i, a.InPlace)),
					starlark.Bool(final[msccl.StepRef{GPU: g.ID, TB: tb.ID, S: st.S}])})
			}
			dir := func(peer int) starlark.Value {
				if peer < 0 {
					return starlark.None
				}
				return starlark.String(mscclDir(peer, tb.Chan))
			}
			tbs = append(tbs, str(starlark.StringDict{"id": starlark.MakeInt(tb.ID), "send": dir(tb.Send), "recv": dir(tb.Recv), "steps": starlark.NewList(steps)}))
		}
		gpus = append(gpus, str(starlark.StringDict{"i_chunks": starlark.MakeInt(g.IChunks), "o_chunks": starlark.MakeInt(g.OChunks),
			"s_chunks": starlark.MakeInt(g.SChunks), "tbs": starlark.NewList(tbs), "signals": signals}))
	}
	var pieceBytes starlark.Value = starlark.None
	if a.PieceBytes > 0 {
		pieceBytes = starlark.MakeInt(a.PieceBytes)
	}
	sched := str(starlark.StringDict{"file": starlark.String(a.File), "nchunksperloop": starlark.MakeInt(a.NChunksPerLoop), "max_cnt": starlark.MakeInt(maxCnt),
		"piece_bytes": pieceBytes, "gpus": starlark.NewList(gpus)})
	var maps []starlark.Value
	for _, m := range mscclNeighbors(a) {
		d := starlark.NewDict(len(m))
		for _, k := range sortedDirs(m) {
			_ = d.SetKey(starlark.String(k), starlark.MakeInt(m[k]))
		}
		maps = append(maps, d)
	}
	nm := starlark.NewList(maps)
	sched.Freeze()
	nm.Freeze()
	return []starlark.Tuple{{starlark.String("schedule"), sched}, {starlark.String("neighbor_maps"), nm}}
}

// prefetchNext reports whether step i of thread block tb may start loading
// the local operand of the thread block's next step, as a kernel on the
// fused primitives passes prefetch= (ring_allreduce): the next step
// combines a local operand (rrs, rrc, rrcs), waits for no other thread
// block, and nothing else writes that operand meanwhile (step i, or
// another thread block of the gpu, whose writes a load issued early could
// miss). In place, i and o may alias: a write to the other one counts.
func prefetchNext(g msccl.GPU, tb msccl.TB, i int, inPlace bool) bool {
	if i+1 >= len(tb.Steps) {
		return false
	}
	next, cur := tb.Steps[i+1], tb.Steps[i]
	switch next.Type {
	case "rrs", "rrc", "rrcs":
	default:
		return false
	}
	if next.DepID >= 0 {
		return false
	}
	overlaps := func(w msccl.Step) bool {
		if !w.Writes() {
			return false
		}
		if w.DstBuf != next.SrcBuf {
			return inPlace && w.DstBuf != msccl.Scratch && next.SrcBuf != msccl.Scratch
		}
		return w.DstOff < next.SrcOff+next.Cnt && next.SrcOff < w.DstOff+w.Cnt
	}
	if overlaps(cur) {
		return false
	}
	for _, other := range g.TBs {
		if other.ID == tb.ID {
			continue
		}
		for _, w := range other.Steps {
			if overlaps(w) {
				return false
			}
		}
	}
	return true
}

// mscclAvg finds where --redop avg divides: the reductions that complete a
// chunk's sum (the XML does not mark them). Those must be rrc or rrcs,
// the primitives that can divide what they store (final=True); an rrs
// sends the complete sum without storing it and tl.reduce (re) has no
// such option, so a schedule completing a sum there is refused (an
// MSCCLError, as a step completing only some of its chunks is).
func mscclAvg(a *msccl.Algo) (map[msccl.StepRef]bool, error) {
	final, err := a.Completing(mscclAlias(a))
	if err != nil {
		return nil, WithKind(errkind.MSCCL, &Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	var refs []msccl.StepRef
	for ref := range final {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool {
		x, y := refs[i], refs[j]
		return x.GPU < y.GPU || x.GPU == y.GPU && (x.TB < y.TB || x.TB == y.TB && x.S < y.S)
	})
	for _, ref := range refs {
		st := a.GPUs[ref.GPU].TBs[ref.TB].Steps[ref.S]
		if st.Type == "rrs" || st.Type == "re" {
			return nil, WithKind(errkind.MSCCL, &Failure{Rank: -1, Msg: fmt.Sprintf("%s:%d: --redop avg: gpu %d tb %d step %d (%s) completes a sum, where avg divides by the world size; kernbench divides in the step that stores the complete sum (rrc or rrcs), and %s cannot", a.File, st.Line, ref.GPU, ref.TB, ref.S, st.Type, st.Type)})
		}
	}
	return final, nil
}

// mscclAlias says which chunks of i and o share memory in an in-place
// schedule, as NCCL aliases them: allreduce and reduce use one buffer,
// reduce_scatter's recvbuf is the rank's chunk of sendbuf, allgather's
// sendbuf the rank's chunk of recvbuf. Chunks are named by the larger
// buffer.
func mscclAlias(a *msccl.Algo) msccl.Alias {
	if !a.InPlace {
		return nil
	}
	per := a.NChunksPerLoop / a.NGPUs // chunks of the smaller buffer
	return func(g int, b msccl.Buffer, idx int) (msccl.Buffer, int) {
		switch {
		case (a.Coll == "allreduce" || a.Coll == "reduce") && b == msccl.Output:
			return msccl.Input, idx
		case a.Coll == "reduce_scatter" && b == msccl.Output:
			return msccl.Input, g*per + idx
		case a.Coll == "allgather" && b == msccl.Input:
			return msccl.Output, g*per + idx
		}
		return b, idx
	}
}

// mscclChunks checks that a size of the run cuts into the schedule's
// chunks: the larger per-rank buffer into nchunksperloop equal chunks, and
// every gpu's declared input and output chunks within its buffers.
func mscclChunks(a *msccl.Algo, p *plan) error {
	for _, count := range p.counts {
		sc, rc := p.coll.sendCount(count, p.world), p.coll.recvCount(count, p.world)
		if p.opts.InPlace && p.coll.Name == "allgather" {
			sc = count
		}
		big := max(sc, rc)
		if big%int64(a.NChunksPerLoop) != 0 {
			return usage("%s: count %d: the %s buffer of %d elements does not cut into nchunksperloop=%d equal chunks; use a count whose larger buffer is a multiple of %d",
				a.File, count, p.coll.Name, big, a.NChunksPerLoop, a.NChunksPerLoop)
		}
		chunk := big / int64(a.NChunksPerLoop)
		if chunk == 0 {
			continue
		}
		for _, g := range a.GPUs {
			if n := int64(g.IChunks) * chunk; n > sc {
				return usage("%s:%d: gpu %d declares i_chunks=%d (%d elements at count %d), but its %s sendbuf holds %d", a.File, g.Line, g.ID, g.IChunks, n, count, p.coll.Name, sc)
			}
			if n := int64(g.OChunks) * chunk; n > rc {
				return usage("%s:%d: gpu %d declares o_chunks=%d (%d elements at count %d), but its %s recvbuf holds %d", a.File, g.Line, g.ID, g.OChunks, n, count, p.coll.Name, rc)
			}
		}
	}
	return nil
}

// mscclSlotNeed is the ring depth a schedule needs: the loop moves a slice
// of each of a step's cnt chunks as a message of its own, a slot each, so a
// step that sends or receives cnt chunks takes cnt slots of its
// connection's ring per loop iteration, and a thread block that sends a
// whole step before it receives (msccl-tools' allreduce_1step sends 16
// chunks to every peer, then receives 16) stalls for good on a smaller
// ring when its peer does the same. step is the first step with the
// largest cnt (zero need: the schedule moves nothing).
type mscclSlotNeed struct {
	slots int
	step  msccl.StepRef
	line  int
	typ   string
}

func mscclSlotsNeeded(a *msccl.Algo) mscclSlotNeed {
	var n mscclSlotNeed
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			for _, st := range tb.Steps {
				if (st.Sends() || st.Recvs()) && st.Cnt > n.slots {
					n = mscclSlotNeed{slots: st.Cnt, step: msccl.StepRef{GPU: g.ID, TB: tb.ID, S: st.S}, line: st.Line, typ: st.Type}
				}
			}
		}
	}
	return n
}

// what says which step needs the slots and why.
func (n mscclSlotNeed) what(file string) string {
	return fmt.Sprintf("gpu %d tb %d step %d (%s, %s:%d) moves %d chunks, a slot each per loop iteration",
		n.step.GPU, n.step.TB, n.step.S, n.typ, file, n.line, n.slots)
}

// mscclSlots chooses n_slots for a run of a when the user left it to
// kernbench and the configured rings are shallower than the schedule
// needs; why says so for the report ("" when set.NSlots stands). A value
// the user gave is never changed: a run that stalls on it says what the
// schedule needs (mscclSlotsHint).
func mscclSlots(file string, a *msccl.Algo, set config.Settings, given bool) (nSlots int, why string) {
	need := mscclSlotsNeeded(a)
	if given || need.slots <= set.NSlots {
		return set.NSlots, ""
	}
	return need.slots, fmt.Sprintf("chosen: %s, more than a ring of the default %d slots holds", need.what(file), set.NSlots)
}

// mscclSlotsHint adds to a deadlock of a run with n_slots (the user's)
// below what the schedule needs the setting that gives it that.
func mscclSlotsHint(err error, file string, a *msccl.Algo, nSlots int) error {
	need := mscclSlotsNeeded(a)
	var f *Failure
	if need.slots <= nSlots || errkind.Of(err) != errkind.Deadlock || !errors.As(err, &f) {
		return err
	}
	f.Msg += fmt.Sprintf("; the schedule needs n_slots >= %d (%s, and n_slots is %d): --set defaults.n_slots=%d", need.slots, need.what(file), nSlots, need.slots)
	return err
}

// mscclRun is what a run of the schedule a in file uses of the
// configuration: no algorithm entry, and its own world size and channels.
func mscclRun(file string, a *msccl.Algo) runOf {
	return runOf{known: true, what: file, fixed: map[string]string{
		"world_size": fmt.Sprintf("%s is a schedule for ngpus=%d ranks", file, a.NGPUs),
		"channels":   fmt.Sprintf("%s's thread blocks give its channels", file),
	}}
}

// mscclFlags refuses the flags that would change what the schedule a in
// file fixes.
func mscclFlags(arg string, a *msccl.Algo, opts Options) error {
	switch {
	case opts.WorldSize != 0 && opts.WorldSize != a.NGPUs:
		return usage("%s is a schedule for ngpus=%d ranks; drop --world-size %d", arg, a.NGPUs, opts.WorldSize)
	case opts.Collective != "" && opts.Collective != a.Coll:
		return usage("%s is an %s schedule; drop --collective %s", arg, a.Coll, opts.Collective)
	case opts.Topology != "":
		return usage("%s: an MSCCL schedule's neighbour map comes from its thread blocks; drop --topology %s", arg, opts.Topology)
	case opts.InPlace && !a.InPlace:
		return usage("%s is an out-of-place schedule (inplace=0); drop --in-place", arg)
	}
	return nil
}

// runMSCCL is `kernbench run FILE.xml`.
func runMSCCL(arg string, opts Options) (*Report, error) {
	cfg, _, err := opts.loadConfig()
	if err != nil {
		return nil, err
	}
	src := script.Source{Env: opts.Env, Embedded: opts.Embedded, Overlay: map[string][]byte{mscclRunnerName: mscclRunner}}
	a, err := loadMSCCL(arg, src)
	if err != nil {
		return nil, err
	}
	if err := ineffectiveSet(cfg, mscclRun(arg, a), opts); err != nil {
		return nil, err
	}
	if err := mscclFlags(arg, a, opts); err != nil {
		return nil, err
	}
	var final map[msccl.StepRef]bool
	if opts.RedOp == "avg" {
		if final, err = mscclAvg(a); err != nil {
			return nil, err
		}
	}
	if root, ok := mscclRoot(a); ok {
		if opts.Root != 0 && opts.Root != root {
			return nil, usage("%s: the schedule's %s root is rank %d (the only rank that %s); drop --root %d", arg, a.Coll, root, map[bool]string{true: "receives nothing", false: "sends nothing"}[a.Coll == "broadcast"], opts.Root)
		}
		opts.Root = root
	}
	opts.WorldSize, opts.Collective, opts.Topology, opts.InPlace = a.NGPUs, a.Coll, "custom", a.InPlace
	opts.Params = append(append([]starlark.Tuple(nil), opts.Params...), mscclParams(a, final)...)
	loader := &script.Loader{Src: src, Search: "algorithms", MaxSteps: opts.MaxSteps, Stderr: opts.Stderr, Predeclared: orch.Predeclared(), PrintPrefix: printPrefix}
	globals, err := loader.Load(mscclRunnerName)
	if err != nil {
		return nil, loadFailure(err)
	}
	kernel, err := entryPoint(globals, mscclRunnerName, "kernel")
	if err != nil {
		return nil, err
	}
	hook, err := entryPoint(globals, mscclRunnerName, "neighbors")
	if err != nil {
		return nil, err
	}
	name := a.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(arg), filepath.Ext(arg))
	}
	set := cfg.Defaults
	set.Channels = 1 // the directions carry the channels (g<peer>_<chan>)
	_, slotsGiven := cfg.DefaultsGiven["n_slots"]
	var slotsWhy string
	set.NSlots, slotsWhy = mscclSlots(arg, a, set, slotsGiven)
	tgt := &target{name: name, file: arg, settings: set, nSlotsWhy: slotsWhy}
	pl, err := makePlan(tgt, globals, true, opts)
	if err != nil {
		return nil, err
	}
	if err := mscclChunks(a, pl); err != nil {
		return nil, err
	}
	if fit, ok := newMSCCLFit(a, pl, cfg.System, set); ok {
		place, err := mscclPlace(arg, fit, set, cfg.DefaultsGiven["buffer_kind"], cfg, opts.setItems(), int64(pl.dt.Size()))
		if err != nil {
			return nil, err
		}
		tgt.settings.BufferKind = place.layout.rings.String()
		tgt.staging, tgt.bufferKindWhy, tgt.stagingWhy = place.layout.staging, place.ringsWhy, place.stagingWhy
	}
	return pl.sweep(tgt, arg, loader, func(p *plan, loader *script.Loader, count int64) (*Result, error) {
		// Each size has its own record of where the thread blocks are.
		pr := &mscclProgress{file: a.File, at: map[*starlark.Thread]progressAt{}}
		pp := *p
		pp.params = append(append([]starlark.Tuple(nil), p.params...), starlark.Tuple{starlark.String("progress"), pr.builtin()})
		pp.procNote = pr.note
		res, err := runOnce(&pp, cfg, tgt, loader, kernel, hook, count)
		if err != nil {
			err = mscclSlotsHint(err, arg, a, tgt.settings.NSlots)
		}
		return res, err
	})
}

// checkMSCCL is `kernbench check FILE.xml`: the file parses and validates,
// and its neighbour map is consistent.
func checkMSCCL(arg string, o CheckOptions) []string {
	cfg, _, err := LoadConfig(o.Env, o.ConfigPath, o.Sets, o.Embedded)
	if err != nil {
		return configProblems(err)
	}
	a, err := loadMSCCL(arg, script.Source{Env: o.Env, Embedded: o.Embedded})
	if err != nil {
		return strings.Split(err.Error(), "\n")
	}
	if err := ineffectiveSet(cfg, mscclRun(arg, a), o.runOptions()); err != nil {
		return []string{err.Error()}
	}
	if err := mscclFlags(arg, a, o.runOptions()); err != nil {
		return []string{err.Error()}
	}
	if _, err := topology.Validate(&topology.Topology{Name: "custom", Maps: mscclNeighbors(a)}); err != nil {
		return []string{fmt.Sprintf("%s: %v", arg, err)}
	}
	// A buffer_kind the user gave that cannot hold the rings (the bench's
	// buffers aside: check knows no size).
	set := cfg.Defaults
	_, slotsGiven := cfg.DefaultsGiven["n_slots"]
	set.NSlots, _ = mscclSlots(arg, a, set, slotsGiven)
	if fit, ok := newMSCCLFit(a, nil, cfg.System, set); ok {
		if _, err := mscclPlace(arg, fit, set, cfg.DefaultsGiven["buffer_kind"], cfg, o.runOptions().setItems(), 1); err != nil {
			return []string{err.Error()}
		}
	}
	return nil
}

// mscclRoot finds the root of a broadcast (the one rank that receives
// nothing) or a reduce (the one rank that sends nothing): the XML has no
// root attribute, the reference check needs one.
func mscclRoot(a *msccl.Algo) (int, bool) {
	if a.Coll != "broadcast" && a.Coll != "reduce" {
		return 0, false
	}
	root, n := 0, 0
	for _, g := range a.GPUs {
		quiet := true
		for _, tb := range g.TBs {
			for _, st := range tb.Steps {
				if a.Coll == "broadcast" && st.Recvs() || a.Coll == "reduce" && st.Sends() {
					quiet = false
				}
			}
		}
		if quiet {
			root, n = g.ID, n+1
		}
	}
	return root, n == 1
}

// mscclProgress records the step each thread block (Starlark thread) has
// started, so that a deadlock report names it in the XML.
type mscclProgress struct {
	file string
	at   map[*starlark.Thread]progressAt
}

type progressAt struct{ rank, tb, step, line, iteration int }

func (pr *mscclProgress) builtin() *starlark.Builtin {
	return starlark.NewBuiltin("progress", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var at progressAt
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 5, &at.rank, &at.tb, &at.step, &at.line, &at.iteration); err != nil {
			return nil, err
		}
		pr.at[th] = at
		return starlark.None, nil
	})
}

func (pr *mscclProgress) note(p *sim.Proc) string {
	th, ok := p.Data.(*starlark.Thread)
	if !ok {
		return ""
	}
	at, ok := pr.at[th]
	if !ok {
		return ""
	}
	return fmt.Sprintf("at gpu %d tb %d step %d (%s:%d), loop iteration %d", at.rank, at.tb, at.step, pr.file, at.line, at.iteration)
}
