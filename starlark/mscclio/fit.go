package mscclio

import (
	"fmt"
	"strings"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/engine/msccl"
	"kernbench/engine/topology"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
)

// Where an MSCCL run's memory goes. On a GPU a schedule's connection
// buffers live in device memory, however many connections its thread
// blocks open; here every (peer, channel) is a queue pair whose rx ring
// lives in buffer_kind memory (TCM by default), and every thread block
// that forwards what it receives (rcs, rrs, rrcs) takes a staging ring of
// n_slots + 2 slots in TCM, plus two landing slots when the rings are
// outside TCM. A schedule with many connections (msccl-tools'
// hierarchical allreduce on 16 GPUs opens 45 on one rank) does not fit
// TCM. The schedule says exactly what each rank takes, so before anything
// runs kernbench puts the rings, and if need be the staging, where they
// fit, and says so in the report. A buffer_kind the user gave is kept: if
// the rings do not fit there, the run stops with the settings that do.

// rankUse is what one rank of a schedule allocates besides the
// bench's buffers.
type rankUse struct {
	rings    int // queue pairs, one rx ring each
	forwards int // thread blocks that forward (rcs, rrs, rrcs): a staging ring each
	receives int // thread blocks that receive: two landing slots each when the rings are outside TCM
	sChunks  int // the schedule's scratch buffer s, in chunks (allocated in the data space)
	sLine    int // the line of the rank's <gpu> element, which gives s_chunks
}

// layout is where the rx rings and the staging rings and landing
// slots of the thread blocks go.
type layout struct{ rings, staging machine.Space }

// Fit holds what a run of a schedule allocates, per rank and memory.
type Fit struct {
	use       []rankUse
	tcm, sram int64 // capacities
	hbm       int64
	cube      []int // each rank's global cube (whose SRAM it shares)
	nSlots    int
	slotSize  int64
	dataSpace machine.Space
	// data is each rank's bench buffers and s buffer at the run's
	// largest size, in bytes as allocated; scratch is the s buffer's
	// part of it, of chunkElems elements a chunk.
	data       []int64
	scratch    []int64
	chunkElems int64
	count      int64 // the largest size's --count
}

// NewFit works out what a run of a at the sizes sz allocates (sz nil:
// without the bench's buffers, for kernbench check). ok is false when the
// machine cannot place the ranks (its own error comes later).
func NewFit(a *msccl.Algo, sz *Sizes, sys config.System, set config.Settings) (f *Fit, ok bool) {
	f = &Fit{tcm: sys.Memory.Tcm.Capacity, sram: sys.Memory.Sram.Capacity, hbm: sys.Memory.Hbm.Capacity,
		nSlots: set.NSlots, slotSize: set.SlotSize, dataSpace: machine.HBM}
	for r := range a.NGPUs {
		sip, cube, _, err := sys.Location(r)
		if err != nil {
			return nil, false
		}
		f.cube = append(f.cube, sip*sys.CubesPerSip+cube)
	}
	f.use = make([]rankUse, a.NGPUs)
	for r, m := range Neighbors(a) {
		f.use[r].rings = len(m)
	}
	for _, g := range a.GPUs {
		u := &f.use[g.ID]
		u.sChunks, u.sLine = g.SChunks, g.Line
		for _, tb := range g.TBs {
			fwd, recv := false, false
			for _, st := range tb.Steps {
				recv = recv || st.Recvs()
				fwd = fwd || st.Recvs() && st.Sends()
			}
			if fwd {
				u.forwards++
			}
			if recv {
				u.receives++
			}
		}
	}
	f.data = make([]int64, a.NGPUs)
	f.scratch = make([]int64, a.NGPUs)
	if sz == nil {
		return f, true
	}
	f.dataSpace = sz.DataSpace
	es := sz.ElemSize
	for _, size := range sz.Sizes {
		count, sc, rc := size.Count, size.Send, size.Recv
		big := max(sc, rc)
		bufs := machine.AllocSize(sc*es) + machine.AllocSize(rc*es)
		if sz.InPlace {
			bufs = machine.AllocSize(big * es)
		}
		chunk := big / int64(a.NChunksPerLoop)
		if count >= f.count {
			f.count, f.chunkElems = count, chunk
		}
		for r, u := range f.use {
			n := bufs
			if u.sChunks > 0 {
				// (s_chunks may be up to 2^30: the product saturates
				// rather than wrap into a size that fits.)
				s := machine.AllocSize(min(hostmem.SatMul(hostmem.SatMul(int64(u.sChunks), chunk), es), 1<<62))
				f.scratch[r] = max(f.scratch[r], s)
				n = min(n+s, 1<<62)
			}
			f.data[r] = max(f.data[r], n)
		}
	}
	return f, true
}

// scratchOverfull is the error for a schedule whose s buffer (s_chunks of
// a <gpu>) does not fit the data memory beside the bench's buffers, which
// do fit: the runner's tl.alloc of it failed once the run had started
// (exit 4), though the file had passed validation.
func (f *Fit) scratchOverfull(file string) error {
	g := *f
	g.use = make([]rankUse, len(f.use))
	m := g.overfull(layout{machine.TCM, machine.TCM})
	if m == nil {
		return nil
	}
	bench := g
	bench.data = make([]int64, len(f.data))
	for r := range f.data {
		bench.data[r] = f.data[r] - f.scratch[r]
	}
	if bench.overfull(layout{machine.TCM, machine.TCM}) != nil {
		return nil // the bench's buffers alone do not fit: the bench says so
	}
	r := m.ranks[0]
	for _, x := range m.ranks {
		if f.scratch[x] > 0 {
			r = x
			break
		}
	}
	u := f.use[r]
	where := fmt.Sprintf("rank %d's %s (%d bytes)", r, strings.ToUpper(m.space.String()), m.capacity)
	if len(m.ranks) > 1 {
		where = fmt.Sprintf("cube %d's %s (%d bytes, shared by ranks %s)", f.cube[r], strings.ToUpper(m.space.String()), m.capacity, topology.RankRanges(m.ranks))
	}
	msg := fmt.Sprintf("%s:%d: gpu %d's scratch buffer (s_chunks=%d, chunks of %d elements at --count %d: %d bytes) does not fit %s beside the bench's buffers (%d bytes); use a smaller s_chunks, --count or --bytes",
		file, u.sLine, r, u.sChunks, f.chunkElems, f.count, f.scratch[r], where, f.data[r]-f.scratch[r])
	if h := *f; f.dataSpace != machine.HBM {
		h.use, h.dataSpace = make([]rankUse, len(f.use)), machine.HBM
		if h.overfull(layout{machine.TCM, machine.TCM}) == nil {
			msg += " (or --data-space hbm)"
		}
	}
	return &Error{Kind: errkind.MemoryLimit, Msg: msg}
}

// memory is one memory's share of a layout: a rank's TCM or HBM, or
// a cube's SRAM.
type memory struct {
	space    machine.Space
	ranks    []int
	capacity int64
	rings    int   // rx rings
	staging  int   // staging rings
	landing  int   // pairs of landing slots
	data     int64 // the bench's buffers and s buffers
}

func (f *Fit) ringBytes() int64    { return machine.AllocSize(int64(f.nSlots) * f.slotSize) }
func (f *Fit) stagingBytes() int64 { return machine.AllocSize(int64(f.nSlots+2) * f.slotSize) }
func (f *Fit) landingBytes() int64 { return machine.AllocSize(2 * f.slotSize) }

func (m *memory) need(f *Fit) int64 {
	return int64(m.rings)*f.ringBytes() + int64(m.staging)*f.stagingBytes() + int64(m.landing)*f.landingBytes() + m.data
}

// overfull is the first memory, in rank order, that l overfills (nil: l
// fits).
func (f *Fit) overfull(l layout) *memory {
	type key struct {
		space machine.Space
		id    int
	}
	mems := map[key]*memory{}
	var order []*memory
	at := func(space machine.Space, r int) *memory {
		k, capacity := key{space, r}, f.tcm
		switch space {
		case machine.SRAM:
			k.id, capacity = f.cube[r], f.sram
		case machine.HBM:
			capacity = f.hbm
		}
		m := mems[k]
		if m == nil {
			m = &memory{space: space, capacity: capacity}
			mems[k] = m
			order = append(order, m)
		}
		if len(m.ranks) == 0 || m.ranks[len(m.ranks)-1] != r {
			m.ranks = append(m.ranks, r)
		}
		return m
	}
	for r, u := range f.use {
		at(l.rings, r).rings += u.rings
		at(l.staging, r).staging += u.forwards
		if l.rings != machine.TCM {
			at(l.staging, r).landing += u.receives
		}
		at(f.dataSpace, r).data += f.data[r]
	}
	for _, m := range order {
		if m.need(f) > m.capacity {
			return m
		}
	}
	return nil
}

// dataOverfull reports whether the bench's buffers alone overfill a
// memory: the bench says so itself, with its own advice.
func (f *Fit) dataOverfull() bool {
	g := *f
	g.use = make([]rankUse, len(f.use))
	return g.overfull(layout{machine.TCM, machine.TCM}) != nil
}

// withoutData is f without the bench's buffers.
func (f *Fit) withoutData() *Fit {
	g := *f
	g.data = make([]int64, len(f.data))
	return &g
}

// describe says what m cannot hold.
func (m *memory) describe(f *Fit) string {
	name := strings.ToUpper(m.space.String())
	who, its := fmt.Sprintf("rank %d's %s (%d bytes)", m.ranks[0], name, m.capacity), "its"
	if len(m.ranks) > 1 {
		who, its = fmt.Sprintf("cube %d's %s (%d bytes, shared by ranks %s)", f.cube[m.ranks[0]], name, m.capacity, topology.RankRanges(m.ranks)), "their"
	}
	var parts []string
	if m.rings > 0 {
		parts = append(parts, fmt.Sprintf("%s of %d bytes", plural(m.rings, "rx ring", "rx rings"), f.ringBytes()))
	}
	if m.staging > 0 {
		parts = append(parts, fmt.Sprintf("%s of %d bytes", plural(m.staging, "staging ring", "staging rings"), f.stagingBytes()))
	}
	if m.landing > 0 {
		parts = append(parts, fmt.Sprintf("%s of %d bytes", plural(m.landing, "pair of landing slots", "pairs of landing slots"), f.landingBytes()))
	}
	if m.data > 0 {
		parts = append(parts, fmt.Sprintf("the bench's buffers (%d bytes)", m.data))
	}
	return fmt.Sprintf("%s cannot hold %s %s: %d bytes", who, its, andList(parts), m.need(f))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func andList(parts []string) string {
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// layouts are the layouts kernbench may use, in order of preference: the
// configured buffer_kind with the staging in TCM, then (buffer_kind not
// given) the rings in HBM, then the staging in HBM too. The staging has no
// setting of its own: it leaves TCM only when nothing else fits.
func layouts(kind machine.Space, given bool) []layout {
	ls := []layout{{kind, machine.TCM}}
	if !given && kind != machine.HBM {
		ls = append(ls, layout{machine.HBM, machine.TCM})
		kind = machine.HBM
	}
	return append(ls, layout{kind, machine.HBM})
}

// pick is the first of ls that fits, or nil.
func (f *Fit) pick(ls []layout) *layout {
	for i := range ls {
		if f.overfull(ls[i]) == nil {
			return &ls[i]
		}
	}
	return nil
}

// Placement is the outcome of Place: where the rx rings and the staging
// go, and why when kernbench moved them (for the report; "" when it did
// not).
type Placement struct {
	Rings, Staging       machine.Space
	RingsWhy, StagingWhy string
}

// Items names the user's --set and --vary items in what Place says.
type Items interface {
	// Given names where the user gave a defaults key, from its position
	// as the configuration records it ("--set ITEM" or file:line).
	Given(pos string) string
	// Set is the --set that gives the key path the value, naming the
	// user's own item for path that it replaces.
	Set(path string, value any) string
}

// Place decides where the rx rings and the thread blocks' staging of a
// run of a go (see the top of this file). given is where the user gave
// buffer_kind ("" for nowhere: the embedded default's), items the run's
// --set and --vary items (to name them in hints). With nothing that fits,
// it is an InitError (exit 2) that lists the settings that do, each one
// checked to fit.
func Place(file string, f *Fit, set config.Settings, given string, items Items, itemSize int64) (*Placement, error) {
	kind, err := machine.ParseSpace(set.BufferKind)
	if err != nil {
		return nil, &Error{Kind: errkind.Config, Msg: err.Error(), Err: err}
	}
	ls := layouts(kind, given != "")
	if f.dataOverfull() {
		if err := f.scratchOverfull(file); err != nil {
			return nil, err
		}
		// The bench's buffers alone do not fit: the bench says so with its
		// own advice. The rings and staging are placed as if they were
		// elsewhere.
		f = f.withoutData()
	}
	if l := f.pick(ls); l != nil {
		pl := &Placement{Rings: l.rings, Staging: l.staging}
		if l.rings != kind {
			pl.RingsWhy = "chosen: " + f.overfull(layout{kind, machine.TCM}).describe(f)
		}
		if l.staging != machine.TCM {
			pl.StagingWhy = "chosen: " + f.overfull(layout{l.rings, machine.TCM}).describe(f)
		}
		return pl, nil
	}
	last := f.overfull(ls[len(ls)-1])
	what := "the rx rings and staging"
	if given != "" {
		what = fmt.Sprintf("buffer_kind %s (%s)", set.BufferKind, items.Given(given))
	}
	msg := fmt.Sprintf("%s: %s do not fit: %s", file, what, last.describe(f))
	if given != "" {
		msg = fmt.Sprintf("%s: %s does not fit: %s", file, what, last.describe(f))
	}
	hints := f.fixes(kind, given != "", items, itemSize)
	if len(hints) == 0 {
		msg += "; use a smaller --count or --bytes"
	} else {
		msg += "; any one of these fits: " + strings.Join(hints, ", ")
	}
	return nil, &Error{Kind: errkind.Init, Msg: msg}
}

// fixes are the settings that make a run fit, each checked: the rings in
// HBM (when the user put them elsewhere), the largest n_slots and
// slot_size (a power of two of at least 64 bytes) below the current ones,
// and the bench's buffers in HBM.
func (f *Fit) fixes(kind machine.Space, given bool, items Items, itemSize int64) []string {
	var out []string
	fits := func(g *Fit, kind machine.Space) bool { return g.pick(layouts(kind, given)) != nil }
	with := func(key string, value any) string { return items.Set("defaults."+key, value) }
	if given && kind != machine.HBM && fits(f, machine.HBM) {
		out = append(out, with("buffer_kind", "hbm"))
	}
	g := *f
	lo, hi := 0, f.nSlots // the largest n in [1, nSlots) that fits, or lo = 0
	for lo+1 < hi {
		mid := (lo + hi) / 2
		g.nSlots = mid
		if fits(&g, kind) {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo >= 1 {
		out = append(out, with("n_slots", lo))
	}
	g = *f
	s := int64(1)
	for s*2 < f.slotSize {
		s *= 2
	}
	for ; s >= max(64, itemSize) && s < f.slotSize; s /= 2 {
		g.slotSize = s
		if fits(&g, kind) {
			out = append(out, with("slot_size", s))
			break
		}
	}
	if f.dataSpace != machine.HBM {
		g = *f
		g.dataSpace = machine.HBM
		if fits(&g, kind) {
			out = append(out, "--data-space hbm")
		}
	}
	return out
}
