package mscclio

import (
	_ "embed"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/engine/msccl"
	"kernbench/engine/sim"
	"kernbench/engine/topology"
	"kernbench/starlark/errkind"
)

// Running an MSCCL XML schedule: engine/msccl parses and validates it,
// msccl_runner.star is its kernel (one tl.spawn thread per thread block,
// each step one tl primitive) and its neighbors() hook (the directions
// its thread blocks use), and this file turns the schedule into the
// runner's keyword arguments and checks it against the run's flags and
// sizes. ccl runs it through the bench, reference check, phase 2, traces
// and deadlock reports of every run.

// Runner is the Starlark kernel that runs a schedule.
//
//go:embed msccl_runner.star
var Runner []byte

// RunnerName is the runner's file name in backtraces.
const RunnerName = "msccl_runner.star"

// IsSchedule reports whether a run or check argument names an MSCCL XML
// file.
func IsSchedule(arg string) bool { return strings.EqualFold(filepath.Ext(arg), ".xml") }

// Error is a problem with a schedule or its placement, of the kind ccl
// reports it as (a failure with no rank).
type Error struct {
	Kind *errkind.Kind
	Msg  string
	Err  error // the cause, if any
}

func (e *Error) Error() string            { return e.Msg }
func (e *Error) Unwrap() error            { return e.Err }
func (e *Error) ErrorKind() *errkind.Kind { return e.Kind }

func usage(format string, args ...any) error {
	return &Error{Kind: errkind.Usage, Msg: fmt.Sprintf(format, args...)}
}

// Sizes are a run's sizes as the bench allocates them on every rank.
type Sizes struct {
	Coll      string // the collective
	InPlace   bool
	ElemSize  int64         // bytes per element
	DataSpace machine.Space // where the bench's buffers live
	Sizes     []Size
}

// Size is one size of a run: its --count and the elements of each rank's
// sendbuf and recvbuf (out of place).
type Size struct{ Count, Send, Recv int64 }

// Dir names the direction of a gpu towards peer on channel ch: one
// queue pair per (peer, channel), as an MSCCL connection.
func Dir(peer, ch int) string {
	return topology.ChannelDir(fmt.Sprintf("g%d", peer), ch)
}

// Neighbors is every rank's map of direction -> peer: a direction for
// each (peer, channel) a thread block sends to or receives from, on both
// ends (a queue pair has both).
func Neighbors(a *msccl.Algo) []map[string]int {
	nm := make([]map[string]int, a.NGPUs)
	for i := range nm {
		nm[i] = map[string]int{}
	}
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			for _, peer := range []int{tb.Send, tb.Recv} {
				if peer >= 0 {
					nm[g.ID][Dir(peer, tb.Chan)] = peer
					nm[peer][Dir(g.ID, tb.Chan)] = g.ID
				}
			}
		}
	}
	return nm
}

// Params are the runner's keyword arguments: the schedule and the
// neighbour maps, frozen (parallel sweeps share them). final are the steps
// that divide the sum by the world size (--redop avg; nil otherwise).
func Params(a *msccl.Algo, final map[msccl.StepRef]bool) []starlark.Tuple {
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
				return starlark.String(Dir(peer, tb.Chan))
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
	var dicts []starlark.Value
	for _, m := range Neighbors(a) {
		d := starlark.NewDict(len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			_ = d.SetKey(starlark.String(k), starlark.MakeInt(m[k]))
		}
		dicts = append(dicts, d)
	}
	nm := starlark.NewList(dicts)
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

// Avg finds where --redop avg divides: the reductions that complete a
// chunk's sum (the XML does not mark them). Those must be rrc or rrcs,
// the primitives that can divide what they store (final=True); an rrs
// sends the complete sum without storing it and tl.reduce (re) has no
// such option, so a schedule completing a sum there is refused (an
// MSCCLError, as a step completing only some of its chunks is).
func Avg(a *msccl.Algo) (map[msccl.StepRef]bool, error) {
	final, err := a.Completing(alias(a))
	if err != nil {
		return nil, &Error{Kind: errkind.MSCCL, Msg: err.Error(), Err: err}
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
			return nil, &Error{Kind: errkind.MSCCL, Msg: fmt.Sprintf("%s:%d: --redop avg: gpu %d tb %d step %d (%s) completes a sum, where avg divides by the world size; kernbench divides in the step that stores the complete sum (rrc or rrcs), and %s cannot", a.File, st.Line, ref.GPU, ref.TB, ref.S, st.Type, st.Type)}
		}
	}
	return final, nil
}

// Result checks without running that a schedule leaves every output
// chunk holding what its collective wants (msccl.Algo.CheckResult, with
// the in-place aliasing of a run and root, the run's root: Root's when
// the schedule implies one, else --root's): each gpu whose result would
// be wrong is a problem at its <gpu> line.
func Result(a *msccl.Algo, root int) error {
	return a.CheckResult(alias(a), root)
}

// Races reports the steps of a schedule that touch a chunk from two
// thread blocks with nothing ordering them (msccl.Algo.Races, with the
// in-place aliasing of a run): each pair is a problem at the later
// step's line.
func Races(a *msccl.Algo) error { return a.Races(alias(a)) }

// alias says which chunks of i and o share memory in an in-place
// schedule, as the bench lays its buffers out (NCCL's conventions):
// allreduce, reduce, broadcast and alltoall use one buffer,
// reduce_scatter's recvbuf is the rank's chunk of sendbuf, allgather's
// sendbuf the rank's chunk of recvbuf. Chunks are named by the larger
// buffer.
func alias(a *msccl.Algo) msccl.Alias {
	if !a.InPlace {
		return nil
	}
	per := a.NChunksPerLoop / a.NGPUs // chunks of the smaller buffer
	return func(g int, b msccl.Buffer, idx int) (msccl.Buffer, int) {
		switch {
		case a.Coll != "reduce_scatter" && a.Coll != "allgather" && b == msccl.Output:
			return msccl.Input, idx
		case a.Coll == "reduce_scatter" && b == msccl.Output:
			return msccl.Input, g*per + idx
		case a.Coll == "allgather" && b == msccl.Input:
			return msccl.Output, g*per + idx
		}
		return b, idx
	}
}

// Chunks checks that every size of the run cuts into the schedule's
// chunks: the larger per-rank buffer into nchunksperloop equal chunks, and
// every gpu's declared input and output chunks within its buffers.
func Chunks(a *msccl.Algo, sz Sizes) error {
	for _, s := range sz.Sizes {
		count, sc, rc := s.Count, s.Send, s.Recv
		if sz.InPlace && sz.Coll == "allgather" {
			sc = count
		}
		big := max(sc, rc)
		if big%int64(a.NChunksPerLoop) != 0 {
			return usage("%s: count %d: the %s buffer of %d elements does not cut into nchunksperloop=%d equal chunks; use a count whose larger buffer is a multiple of %d",
				a.File, count, sz.Coll, big, a.NChunksPerLoop, a.NChunksPerLoop)
		}
		chunk := big / int64(a.NChunksPerLoop)
		if chunk == 0 {
			continue
		}
		for _, g := range a.GPUs {
			if n := int64(g.IChunks) * chunk; n > sc {
				return usage("%s:%d: gpu %d declares i_chunks=%d (%d elements at count %d), but its %s sendbuf holds %d", a.File, g.Line, g.ID, g.IChunks, n, count, sz.Coll, sc)
			}
			if n := int64(g.OChunks) * chunk; n > rc {
				return usage("%s:%d: gpu %d declares o_chunks=%d (%d elements at count %d), but its %s recvbuf holds %d", a.File, g.Line, g.ID, g.OChunks, n, count, sz.Coll, rc)
			}
		}
	}
	return nil
}

// SlotNeed is the ring depth a schedule needs: the loop moves a slice
// of each of a step's cnt chunks as a message of its own, a slot each, so a
// step that sends or receives cnt chunks takes cnt slots of its
// connection's ring per loop iteration, and a thread block that sends a
// whole step before it receives (msccl-tools' allreduce_1step sends 16
// chunks to every peer, then receives 16) stalls for good on a smaller
// ring when its peer does the same. step is the first step with the
// largest cnt (zero need: the schedule moves nothing).
type SlotNeed struct {
	slots int
	step  msccl.StepRef
	line  int
	typ   string
}

func SlotsNeeded(a *msccl.Algo) SlotNeed {
	var n SlotNeed
	for _, g := range a.GPUs {
		for _, tb := range g.TBs {
			for _, st := range tb.Steps {
				if (st.Sends() || st.Recvs()) && st.Cnt > n.slots {
					n = SlotNeed{slots: st.Cnt, step: msccl.StepRef{GPU: g.ID, TB: tb.ID, S: st.S}, line: st.Line, typ: st.Type}
				}
			}
		}
	}
	return n
}

// what says which step needs the slots and why.
func (n SlotNeed) what(file string) string {
	return fmt.Sprintf("gpu %d tb %d step %d (%s, %s:%d) moves %d chunks, a slot each per loop iteration",
		n.step.GPU, n.step.TB, n.step.S, n.typ, file, n.line, n.slots)
}

// Slots chooses n_slots for a run of a when the user left it to
// kernbench and the configured rings are shallower than the schedule
// needs; why says so for the report ("" when set.NSlots stands). A value
// the user gave is never changed: a run that stalls on it says what the
// schedule needs (SlotNeed.Hint).
func Slots(file string, a *msccl.Algo, set config.Settings, given bool) (nSlots int, why string) {
	need := SlotsNeeded(a)
	if given || need.slots <= set.NSlots {
		return set.NSlots, ""
	}
	return need.slots, fmt.Sprintf("chosen: %s, more than a ring of the default %d slots holds", need.what(file), set.NSlots)
}

// Hint is what a deadlock of a run with n_slots nSlots (the user's)
// below what the schedule needs adds to its message: the setting that
// gives it that ("" when nSlots suffices).
func (n SlotNeed) Hint(file string, nSlots int) string {
	if n.slots <= nSlots {
		return ""
	}
	return fmt.Sprintf("; the schedule needs n_slots >= %d (%s, and n_slots is %d): --set defaults.n_slots=%d", n.slots, n.what(file), nSlots, n.slots)
}

// Flags are the run's flags that a schedule fixes.
type Flags struct {
	WorldSize            int
	Collective, Topology string
	InPlace              bool
	// Keywords: they are run_kernel_in_mock's keywords, and a refusal
	// names the keyword the test wrote (world_size=4), not a flag it
	// never gave (--world-size 4).
	Keywords bool
}

// given is the flag with its value as the user gave it: "--world-size 4",
// or the keyword "world_size=4".
func (f Flags) given(flag string, value any) string {
	if !f.Keywords {
		if value == true {
			return flag
		}
		return fmt.Sprintf("%s %v", flag, value)
	}
	kw := strings.ReplaceAll(strings.TrimPrefix(flag, "--"), "-", "_")
	switch v := value.(type) {
	case string:
		return fmt.Sprintf("%s=%q", kw, v)
	case bool:
		return fmt.Sprintf("%s=%s", kw, map[bool]string{true: "True", false: "False"}[v])
	}
	return fmt.Sprintf("%s=%v", kw, value)
}

// CheckFlags refuses the flags that would change what the schedule a in
// file arg fixes (a UsageError).
func CheckFlags(arg string, a *msccl.Algo, f Flags) error {
	switch {
	case f.WorldSize != 0 && f.WorldSize != a.NGPUs:
		return usage("%s is a schedule for ngpus=%d ranks; drop %s", arg, a.NGPUs, f.given("--world-size", f.WorldSize))
	case f.Collective != "" && f.Collective != a.Coll:
		return usage("%s is an %s schedule; drop %s", arg, a.Coll, f.given("--collective", f.Collective))
	case f.Topology != "":
		return usage("%s: an MSCCL schedule's neighbour map comes from its thread blocks; drop %s", arg, f.given("--topology", f.Topology))
	case f.InPlace && !a.InPlace:
		return usage("%s is an out-of-place schedule (inplace=0); drop %s", arg, f.given("--in-place", true))
	}
	return nil
}

// Root finds the root of a broadcast (the one rank that receives
// nothing) or a reduce (the one rank that sends nothing): the XML has no
// root attribute, the reference check needs one. Without one such rank
// it is 0 and false: a run takes --root (default 0).
func Root(a *msccl.Algo) (int, bool) {
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
	if n != 1 {
		return 0, false
	}
	return root, true
}

// Progress records the step each thread block (Starlark thread) has
// started, so that a deadlock report names it in the XML.
type Progress struct {
	file string
	// mu guards at: the thread blocks of a partitioned run's SIPs
	// record their steps on several goroutines.
	mu sync.Mutex
	at map[*starlark.Thread]progressAt
}

// NewProgress is the record of a run of the schedule in file.
func NewProgress(file string) *Progress {
	return &Progress{file: file, at: map[*starlark.Thread]progressAt{}}
}

type progressAt struct{ rank, tb, step, line, iteration int }

// Builtin is the runner's progress(rank, tb, step, line, iteration).
func (pr *Progress) Builtin() *starlark.Builtin {
	return starlark.NewBuiltin("progress", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var at progressAt
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 5, &at.rank, &at.tb, &at.step, &at.line, &at.iteration); err != nil {
			return nil, err
		}
		pr.mu.Lock()
		pr.at[th] = at
		pr.mu.Unlock()
		return starlark.None, nil
	})
}

// Note is the line a deadlock report adds about the blocked process p:
// the step its thread block is at ("" for another process).
func (pr *Progress) Note(p *sim.Proc) string {
	th, ok := p.Data.(*starlark.Thread)
	if !ok {
		return ""
	}
	pr.mu.Lock()
	at, ok := pr.at[th]
	pr.mu.Unlock()
	if !ok {
		return ""
	}
	return fmt.Sprintf("at gpu %d tb %d step %d (%s:%d), loop iteration %d", at.rank, at.tb, at.step, pr.file, at.line, at.iteration)
}

// The sends a SendBufferHazard names, by the direction they went on: a
// send still reading ("rank 0's send g1_1 #0 issued at …") or one not
// yet issued ("rank 0 writes … while the tl.send_async("g1") …").
var (
	hazardSendInFlight = regexp.MustCompile(`rank (\d+)'s send (g\d+(?:_\d+)?) #\d+`)
	hazardSendIssuing  = regexp.MustCompile(`rank (\d+) writes .* while the tl\.send(?:_async)?\("(g\d+(?:_\d+)?)"\)`)
)

// SendHint is what a SendBufferHazard's message msg adds for a schedule:
// the direction it names (g1_1) is a connection of the file, and the
// thread block that sends on it is where the writing step's missing
// dependency points ("" when msg names no such send).
func SendHint(file string, a *msccl.Algo, msg string) string {
	m := hazardSendInFlight.FindStringSubmatch(msg)
	if m == nil {
		m = hazardSendIssuing.FindStringSubmatch(msg)
	}
	if m == nil {
		return ""
	}
	gpu, err := strconv.Atoi(m[1])
	if err != nil {
		return ""
	}
	for _, g := range a.GPUs {
		if g.ID != gpu {
			continue
		}
		for _, tb := range g.TBs {
			if tb.Send >= 0 && Dir(tb.Send, tb.Chan) == m[2] {
				return fmt.Sprintf("; %s is gpu %d's connection to gpu %d on channel %d, which tb %d (%s:%d) sends on: make the step that writes wait (depid/deps) for tb %d's step that sends this chunk, or write elsewhere",
					m[2], gpu, tb.Send, tb.Chan, tb.ID, file, tb.Line, tb.ID)
			}
		}
	}
	return ""
}
