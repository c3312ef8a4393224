// Package machine is the simulated accelerator: SIPs of cubes of PEs, the
// directed links between them, memories with ports, and each PE's IPCQ, DMA
// (two virtual channels) and math unit. It is built on engine/sim and is
// free of Starlark: scripts reach it through starlark/… packages.
package machine

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"kernbench/engine/oplog"
	"kernbench/engine/sim"
	"kernbench/engine/trace"
)

// LinkParams describe a directed link or a memory port's timing.
type LinkParams struct {
	BytesPerUs int64 // GB/s × 1000
	Latency    sim.Time
}

// MemParams describe one kind of memory.
type MemParams struct {
	Capacity int64
	LinkParams
}

// Params is everything needed to build a machine. The starlark layer fills it
// from ccl.yaml; tests build it directly.
type Params struct {
	Sips, CubesPerSip, PesPerCube int
	PeNoc, Ucie, Pcie             LinkParams
	Tcm, Sram, Hbm                MemParams
	Math                          LinkParams
	VCWeightCompute, VCWeightComm int64
	// VCChunkSize is the bytes of one round-robin turn slot between the
	// DMA channels (vc_chunk_size); 0 takes ccl.yaml's default.
	VCChunkSize int64
	Placement   []int // rank -> global PE index (nil: identity)
	// Untimed makes every transfer, latency and math operation take no
	// time: the mock runtime, where only the order of events matters.
	Untimed bool
	// Faults are resources that deviate from their kind (faults.go): at
	// most one per resource.
	Faults []Fault
	// SplitAtSIP books a transfer that crosses SIPs in two segments, its
	// own SIP's when it starts and the far SIP's when its head gets
	// there (dmaEngine.startSplit): the rule a partitioned run needs
	// (engine/sim, partition.go), which NewPartitioned sets.
	SplitAtSIP bool
}

// PE is one processing element.
type PE struct {
	ID, Sip, Cube, Local int // global index; sip; global cube index; index in cube
	Rank                 int // rank placed on this PE, -1 if none
	TCM, HBM             *Memory
	SRAM                 *Memory // the cube's shared SRAM
	NocUp, NocDown       *Resource
	// mathAt is the entry of Machine.links its math unit takes: made at
	// its first use (MathReady, the unit in mathPath), which a leaf of a
	// tree never comes to (192 bytes and a name a rank), in the place
	// the PE kept for it (reports list resources in creation order).
	mathAt int
	dma    *dmaEngine
	loc    *local // its SIP's (Machine.localOf)

	tcmPath, tcmCopyPath, mathPath Path // direct-access paths, built once (mathPath at first use)
	// The last load source and store destination and their paths: a
	// kernel mostly reads and writes the same memories, and the machine's
	// route map is a cache miss away at a thousand PEs.
	loadFrom, storeTo   *Memory
	loadPath, storePath Path
}

func (p *PE) String() string { return fmt.Sprintf("pe %d (%d.%d.%d)", p.ID, p.Sip, p.Cube, p.Local) }

// Coord is "sip.cube.pe" with the cube index local to its SIP.
func (p *PE) Coord(cubesPerSip int) string {
	return fmt.Sprintf("%d.%d.%d", p.Sip, p.Cube%cubesPerSip, p.Local)
}

// Machine is the whole simulated system.
type Machine struct {
	Sim    *sim.Sim
	Params Params
	Mems   []*Memory // every memory materialised so far, by ID
	Ranks  []*PE     // rank -> PE, set by Place
	// keepingPreRun: memories keep their pre-run bytes copy-on-first-write
	// (KeepPreRun).
	keepingPreRun bool
	// buffers hands out the memories' large slices (UseBuffers); spentPre
	// are pre-run blocks phase 2 used, kept for ReleaseBuffers.
	buffers  *Buffers
	spentPre [][]byte

	// PEs, cube SRAMs and links are materialised on first use (PE, Place,
	// routes), so a machine of a million PEs with 8 busy ones costs what 8
	// cost. Creation order is deterministic: it follows the run.
	pes      map[int]*PE
	sram     map[int]*Memory      // per cube
	ucie     map[[2]int]*Resource // [from cube, to cube] within a SIP
	pcieUp   map[int]*Resource    // per SIP
	pcieDown map[int]*Resource
	links    []*Resource // every link and port, in creation order (reports)

	// Log, when set, receives an OpRecord for every data operation
	// (phase 1 of the two-pass verification).
	Log *oplog.Log
	// splitLogs: each SIP writes its own op_log (SplitLogs, logOf).
	splitLogs bool
	// OriginOf, set with a witnessed Log (a run diagnosing a phase-2
	// mismatch), describes the call issuing an operation now on s (the
	// issuing PE's Sim: its SIP's partition in a partitioned run); each
	// operation keeps it for its record.
	OriginOf func(s *sim.Sim) string

	// Trace, when set (EnableTrace), receives the timeline (with
	// splitTrace: each SIP's recorder does, TraceOf).
	Trace      *trace.Recorder
	splitTrace bool

	// faults are Params.Faults by resource name.
	faults map[string]Fault
	// slowBooking: every booking takes the general path (Path.bookSlow),
	// as the machine records a trace, has a fault that acts on each
	// booking (jitter, a stop) or splits transfers (splitAtSIP).
	slowBooking bool
	// splitAtSIP: Params.SplitAtSIP on a timed machine of several SIPs.
	splitAtSIP bool
	// one is the machine's local state (pools) on one Sim; locals are
	// each SIP's in a partitioned run (localOf).
	one    local
	locals []*local
	// parts is the partitioned run the machine runs on (nil: one Sim,
	// Sim); pathsMu guards paths there, which any SIP may fill.
	parts   *sim.Partitioned
	pathsMu sync.Mutex
	// partOf is each used SIP's partition when the run has partitions
	// for some SIPs only (NewPartitionedOn; nil: SIP i is partition i).
	partOf map[int]int32
	// endHook: the DMA engines call injected at each injection end (a
	// trace, split transfers).
	endHook bool
	// look is the least delay of a message from one SIP to another
	// (Params.Lookahead), which post checks.
	look sim.Time

	// TimingOnly (SetTimingOnly) moves no bytes: loads, stores, copies and
	// IPCQ deliveries book the same resources at the same times and keep
	// every pointer, credit and hazard check, but copy nothing, and no
	// memory is ever backed.
	TimingOnly bool

	// paths caches routes by (kind, from, to) so the hot path allocates
	// nothing; routes never change after New.
	paths map[pathKey]Path
}

// Buffer returns n bytes (contents undefined) for a tile, reusing a
// buffer handed back with PutBuffer when one is large enough; nil when the
// machine moves no bytes. (The machine's pool on one Sim, which PE.Buffer
// takes there too; a partitioned run has one per SIP.)
func (m *Machine) Buffer(n int64) []byte {
	if m.TimingOnly {
		return nil
	}
	return m.one.buffer(n)
}

// PutBuffer hands back a tile's bytes that nothing reads any more.
func (m *Machine) PutBuffer(b []byte) { m.one.putBuffer(b) }

// maxFreeBufs bounds the buffer pool (a few per PE in flight is typical).
const maxFreeBufs = 1 << 14

type pathKey struct {
	kind     uint8 // 0 mem->mem, 1 mem->pe, 2 pe->mem, 3 pe->pe
	from, to int
}

// New builds the machine hierarchy and its resources.
func New(s *sim.Sim, p Params) (*Machine, error) {
	if p.Sips < 1 || p.CubesPerSip < 1 || p.PesPerCube < 1 {
		return nil, fmt.Errorf("machine: sips, cubes_per_sip and pes_per_cube must be >= 1 (got %d, %d, %d)", p.Sips, p.CubesPerSip, p.PesPerCube)
	}
	if p.VCWeightCompute < 1 || p.VCWeightComm < 1 {
		return nil, fmt.Errorf("machine: vc_weights must be >= 1 (got compute %d, comm %d)", p.VCWeightCompute, p.VCWeightComm)
	}
	if p.VCChunkSize < 0 {
		return nil, fmt.Errorf("machine: vc_chunk_size must be >= 1 (got %d)", p.VCChunkSize)
	}
	if p.VCChunkSize == 0 {
		// Tests and tools that build Params by hand get the shipped default.
		p.VCChunkSize = defaultVCChunkSize
	}
	if p.Untimed {
		for _, lp := range []*LinkParams{&p.PeNoc, &p.Ucie, &p.Pcie, &p.Tcm.LinkParams, &p.Sram.LinkParams, &p.Hbm.LinkParams, &p.Math} {
			*lp = LinkParams{}
		}
	}
	for _, lp := range []struct {
		name string
		bw   int64
	}{{"pe_noc", p.PeNoc.BytesPerUs}, {"ucie", p.Ucie.BytesPerUs}, {"pcie", p.Pcie.BytesPerUs},
		{"tcm", p.Tcm.BytesPerUs}, {"sram", p.Sram.BytesPerUs}, {"hbm", p.Hbm.BytesPerUs}, {"math", p.Math.BytesPerUs}} {
		if lp.bw <= 0 && !p.Untimed {
			return nil, fmt.Errorf("machine: %s bandwidth must be > 0", lp.name)
		}
	}
	m := &Machine{Sim: s, Params: p, paths: map[pathKey]Path{},
		pes: map[int]*PE{}, sram: map[int]*Memory{}, ucie: map[[2]int]*Resource{}, pcieUp: map[int]*Resource{}, pcieDown: map[int]*Resource{}}
	if m.NumPEs() <= 0 || m.NumPEs()/p.PesPerCube/p.CubesPerSip != p.Sips {
		return nil, fmt.Errorf("machine: %d SIP(s) × %d cubes × %d PEs is too large", p.Sips, p.CubesPerSip, p.PesPerCube)
	}
	if err := p.validFaults(); err != nil {
		return nil, err
	}
	m.splitAtSIP = p.SplitAtSIP && !p.Untimed && p.Sips > 1
	// (Only a transfer that crosses SIPs takes the general path to be
	// split, dmaEngine.start: the others keep the plain booking.)
	if m.splitAtSIP {
		m.look, m.endHook = p.Lookahead(), true
	}
	if len(p.Faults) > 0 {
		m.faults = make(map[string]Fault, len(p.Faults))
		for _, f := range p.Faults {
			m.faults[f.Resource] = f
			m.slowBooking = m.slowBooking || f.perBooking()
		}
	}
	return m, nil
}

// NewPartitioned builds a machine that runs on g, a partition per SIP
// (engine/sim, partition.go): each SIP's PEs, DMA engines and resources
// are its partition's, transfers that cross SIPs are split
// (SplitAtSIP), and what one SIP does to another is a message of g,
// which must have one partition per SIP and a lookahead of at most the
// machine's (Params.Lookahead). Processes go on their rank's partition
// (g.Spawn with PE.Sip).
//
// The machine's IPCQ traffic and memory operations within a SIP run on
// it, with faults (each resource's jitter stream and stop are its
// owner's), and the op_log and the trace, a log and a recorder per SIP
// merged by time after the run (SplitLogs, SplitTrace); a memory
// operation that crosses SIPs (completed whole on the issuing side) is an
// internal error, and the untimed mock runs on one Sim.
func NewPartitioned(g *sim.Partitioned, p Params) (*Machine, error) {
	sips := make([]int, p.Sips)
	for i := range sips {
		sips[i] = i
	}
	return NewPartitionedOn(g, p, sips)
}

// NewPartitionedOn is NewPartitioned with a partition for each SIP of
// sips only (in increasing order; UsedSips), the SIPs that hold ranks: a
// machine of many SIPs of which a run uses few runs as many partitions
// as it uses. Partition i is SIP sips[i]'s; the others have no events.
func NewPartitionedOn(g *sim.Partitioned, p Params, sips []int) (*Machine, error) {
	look := p.Lookahead()
	if look <= 0 || g.Lookahead() > look {
		return nil, fmt.Errorf("machine: a partitioned run needs a machine of several SIPs with a lookahead (%v) of at least the run's (%v)", look, g.Lookahead())
	}
	if n := len(g.Partitions()); n != len(sips) {
		return nil, fmt.Errorf("machine: %d partitions for %d SIPs", n, len(sips))
	}
	p.SplitAtSIP = true
	m, err := New(nil, p)
	if err != nil {
		return nil, err
	}
	m.parts = g
	if len(sips) != p.Sips {
		m.partOf = make(map[int]int32, len(sips))
		for i, sip := range sips {
			if sip < 0 || sip >= p.Sips || i > 0 && sip <= sips[i-1] {
				return nil, fmt.Errorf("machine: SIP %d out of order or range in a partitioned run's SIPs", sip)
			}
			m.partOf[sip] = int32(i)
		}
	}
	m.locals = make([]*local, len(sips))
	for i := range m.locals {
		m.locals[i] = &local{}
	}
	return m, nil
}

// UsedSips are the SIPs, in increasing order, that hold a rank of a
// world of worldSize ranks (placed as Place places them; Holds must
// accept worldSize, and an entry of Placement outside the machine is
// left out, for Place to refuse).
func (p Params) UsedSips(worldSize int) []int {
	perSip := p.CubesPerSip * p.PesPerCube
	if p.Placement == nil {
		n := (worldSize + perSip - 1) / perSip
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	used := map[int]bool{}
	for _, id := range p.Placement {
		if id >= 0 && id < p.Sips*perSip {
			used[id/perSip] = true
		}
	}
	out := make([]int, 0, len(used))
	for sip := range used {
		out = append(out, sip)
	}
	slices.Sort(out)
	return out
}

// RankPartition is rank's partition in a partitioned run (its SIP's).
func (m *Machine) RankPartition(rank int) *sim.Partition { return m.part(m.Ranks[rank].Sip) }

// part is SIP sip's partition in a partitioned run.
func (m *Machine) part(sip int) *sim.Partition {
	if m.partOf == nil {
		return m.parts.Partition(sip)
	}
	return m.parts.Partition(m.partIndex(sip))
}

// partIndex is SIP sip's partition's index (its local state's, locals).
func (m *Machine) partIndex(sip int) int {
	if m.partOf == nil {
		return sip
	}
	i, ok := m.partOf[sip]
	if !ok {
		panic(fmt.Sprintf("internal error: SIP %d holds no rank and has no partition", sip))
	}
	return int(i)
}

// Partitioned reports whether the machine runs on partitions, a Sim per
// SIP (NewPartitioned).
func (m *Machine) Partitioned() bool { return m.parts != nil }

// SplitLogs gives each SIP of a partitioned machine an op_log of its
// own, written only by its partition and keeping the time of each record
// (oplog.Log.Clock): MergedLog makes the run's one log of them after the
// run. Call it before the run, in place of setting Log (which must be
// nil: every record goes to its SIP's log).
func (m *Machine) SplitLogs() error {
	if m.parts == nil {
		return fmt.Errorf("machine: split op_logs need a partitioned machine")
	}
	if m.Log != nil {
		return fmt.Errorf("machine: split op_logs replace Log, which is set")
	}
	for i, loc := range m.locals {
		loc.log = &oplog.Log{Clock: m.parts.Partition(i).Sim.Now}
	}
	m.splitLogs = true
	return nil
}

// Logging reports whether the run keeps an op_log: Log, or a log per SIP
// (SplitLogs).
func (m *Machine) Logging() bool { return m.Log != nil || m.splitLogs }

// WitnessSplitLogs makes the SIPs' op_logs (SplitLogs) witnessed alike
// (oplog.WitnessAll), for a run diagnosing a phase-2 mismatch: MergedLog
// is then witnessed too. Call it after SplitLogs, before the run.
func (m *Machine) WitnessSplitLogs() error {
	if !m.splitLogs {
		return fmt.Errorf("machine: the op_logs were not split")
	}
	oplog.WitnessAll(m.splitLogParts())
	return nil
}

// splitLogParts are the SIPs' op_logs (SplitLogs), by SIP.
func (m *Machine) splitLogParts() []*oplog.Log {
	parts := make([]*oplog.Log, len(m.locals))
	for i, loc := range m.locals {
		parts[i] = loc.log
	}
	return parts
}

// MergedLog is the op_log of a run whose logs were split (SplitLogs), the
// SIPs' logs merged by time (oplog.MergeLogs): the same for every number
// of threads.
func (m *Machine) MergedLog() (*oplog.Log, error) {
	if !m.splitLogs {
		return nil, fmt.Errorf("machine: the op_logs were not split")
	}
	return oplog.MergeLogs(m.splitLogParts())
}

// MergeSplitLogs ends the split of the op_logs after the run: Log
// becomes the merged log (MergedLog's) and the SIPs' own logs are let
// go as they are merged (oplog.MergeLogsConsuming), so that neither the
// merge nor phase 2 holds a second copy of every record.
func (m *Machine) MergeSplitLogs() error {
	if !m.splitLogs {
		return fmt.Errorf("machine: the op_logs were not split")
	}
	log, err := oplog.MergeLogsConsuming(m.splitLogParts())
	if err != nil {
		return err
	}
	for _, loc := range m.locals {
		loc.log = nil
	}
	m.Log, m.splitLogs = log, false
	return nil
}

// LogOf is the op_log the events of pe's SIP write: its own when the
// logs are split (SplitLogs), else the machine's (nil: none). The one-Sim
// path reads only the machine (a PE's local state is a cache miss away
// at a thousand ranks).
func (m *Machine) LogOf(pe *PE) *oplog.Log {
	if m.splitLogs {
		return pe.loc.log
	}
	return m.Log
}

// SplitTrace gives each SIP of a partitioned machine whose trace is
// enabled (EnableTrace) a recorder of its own, written only by its
// partition (trace.Recorder.Split), links included (a link's counters
// are its SIP's): MergedTrace makes the run's one trace of them after
// the run. Call it before the run.
func (m *Machine) SplitTrace() error {
	if m.parts == nil || m.Trace == nil {
		return fmt.Errorf("machine: a split trace needs a partitioned machine with its trace enabled")
	}
	clocks := make([]func() sim.Time, len(m.locals))
	for i := range clocks {
		clocks[i] = m.parts.Partition(i).Sim.Now
	}
	parts := m.Trace.Split(clocks)
	for sip, loc := range m.locals {
		loc.trace = parts[sip]
	}
	for _, r := range m.links {
		if r != nil && r.trace() != nil {
			r.rare.trace = parts[m.partIndex(int(r.sip))]
		}
	}
	m.splitTrace = true
	return nil
}

// MergedTrace is the trace of a run whose trace was split (SplitTrace),
// the SIPs' recorders merged by time (trace.Merge): the same for every
// number of threads.
func (m *Machine) MergedTrace() (*trace.Recorder, error) {
	if !m.splitTrace {
		return nil, fmt.Errorf("machine: the trace was not split")
	}
	parts := make([]*trace.Recorder, len(m.locals))
	for i, loc := range m.locals {
		parts[i] = loc.trace
	}
	return trace.Merge(parts)
}

// TraceOf is the recorder the events of pe's SIP write: its own when the
// trace is split (SplitTrace), else the machine's (nil: none).
func (m *Machine) TraceOf(pe *PE) *trace.Recorder {
	if m.splitTrace {
		return pe.loc.trace
	}
	return m.Trace
}

// epLog is LogOf for an endpoint's SIP.
func (m *Machine) epLog(ep *Endpoint) *oplog.Log {
	if m.splitLogs {
		return ep.loc.log
	}
	return m.Log
}

// RankLog is the op_log rank's events write: its PE's (LogOf), or the
// machine's for a rank that is not placed (as RankSim).
func (m *Machine) RankLog(rank int) *oplog.Log {
	if rank >= 0 && rank < len(m.Ranks) {
		return m.LogOf(m.Ranks[rank])
	}
	return m.Log
}

// NumPEs is the number of PEs of the machine (materialised or not).
func (m *Machine) NumPEs() int { return m.Params.Sips * m.Params.CubesPerSip * m.Params.PesPerCube }

func (m *Machine) resource(name, kind string, sip int, lp LinkParams) *Resource {
	r := newResource(name, kind, sip, lp)
	if m.faults != nil {
		m.applyFault(r)
	}
	m.links = append(m.links, r)
	if m.Trace != nil && !m.splitTrace {
		// Made after EnableTrace (a route's first use, such as the UCIe
		// link a ring's boundary crosses): traced as those before it.
		m.traceLink(r)
	}
	return r
}

func newResource(name, kind string, sip int, lp LinkParams) *Resource {
	r := &Resource{Name: name, Kind: kind, BytesPerUs: lp.BytesPerUs, Latency: lp.Latency, sip: int32(sip)}
	r.older = r.olderBuf[:0]
	return r
}

// mathName is the name of PE id's math unit.
func mathName(id int) string { return fmt.Sprintf("math pe%d", id) }

// makeMath makes pe's math unit at its first use, in the entry of links
// the PE kept for it. On partitions each SIP's thread makes its own PEs'
// units: links does not grow during a run (a route reads only links made
// before it, makeLinks), and each writes an entry of its own.
//
//go:noinline
func (m *Machine) makeMath(pe *PE) {
	r := newResource(mathName(pe.ID), "math", pe.Sip, m.Params.Math)
	m.links[pe.mathAt] = r
	pe.mathPath = Path{r}
}

func (m *Machine) memory(space Space, pe, cube int, mp MemParams, name string) *Memory {
	port := m.resource(name, space.String(), cube/m.Params.CubesPerSip, mp.LinkParams)
	mm := newMemory(len(m.Mems), space, pe, cube, mp.Capacity, port)
	mm.useBuffers(m.buffers)
	if m.TimingOnly {
		mm.noData = true
	}
	if m.keepingPreRun {
		mm.keepPreRun() // its pre-run bytes are zeros
	}
	m.Mems = append(m.Mems, mm)
	return mm
}

// cubeSRAM is cube's shared SRAM.
func (m *Machine) cubeSRAM(cube int) *Memory {
	if mem, ok := m.sram[cube]; ok {
		return mem
	}
	mem := m.memory(SRAM, -1, cube, m.Params.Sram, fmt.Sprintf("sram c%d", cube))
	m.sram[cube] = mem
	return mem
}

func (m *Machine) ucieLink(from, to int) *Resource {
	k := [2]int{from, to}
	if r, ok := m.ucie[k]; ok {
		return r
	}
	r := m.resource(fmt.Sprintf("ucie c%d->c%d", from, to), "ucie", from/m.Params.CubesPerSip, m.Params.Ucie)
	m.ucie[k] = r
	return r
}

func (m *Machine) pcieLink(sip int, up bool) *Resource {
	links := m.pcieDown
	if up {
		links = m.pcieUp
	}
	if r, ok := links[sip]; ok {
		return r
	}
	// Named when made: a route across SIPs asks for both links, and
	// naming them on every call made 426,000 strings for the routes of a
	// 65,536-rank tree.
	name := fmt.Sprintf("pcie host->s%d", sip)
	if up {
		name = fmt.Sprintf("pcie s%d->host", sip)
	}
	r := m.resource(name, "pcie", sip, m.Params.Pcie)
	links[sip] = r
	return r
}

// PCIe returns SIP sip's links to the host switch (up) and from it (down).
func (m *Machine) PCIe(sip int) (up, down *Resource) {
	return m.pcieLink(sip, true), m.pcieLink(sip, false)
}

// PE returns PE id (0 <= id < NumPEs), materialising it on first use.
func (m *Machine) PE(id int) *PE {
	if pe, ok := m.pes[id]; ok {
		return pe
	}
	p := m.Params
	cube := id / p.PesPerCube
	pe := &PE{ID: id, Sip: cube / p.CubesPerSip, Cube: cube, Local: id % p.PesPerCube, SRAM: m.cubeSRAM(cube), Rank: -1}
	pe.TCM = m.memory(TCM, id, cube, p.Tcm, fmt.Sprintf("tcm pe%d", id))
	pe.HBM = m.memory(HBM, id, cube, p.Hbm, fmt.Sprintf("hbm pe%d", id))
	pe.TCM.owner, pe.HBM.owner = pe, pe
	pe.NocUp = m.resource(fmt.Sprintf("pe_noc pe%d->c%d", id, cube), "pe_noc", pe.Sip, p.PeNoc)
	pe.NocDown = m.resource(fmt.Sprintf("pe_noc c%d->pe%d", cube, id), "pe_noc", pe.Sip, p.PeNoc)
	pe.mathAt = len(m.links)
	if m.faults != nil {
		// A fault may name it, and acts from the start.
		pe.mathPath = Path{m.resource(mathName(id), "math", pe.Sip, p.Math)}
	} else {
		m.links = append(m.links, nil) // (makeMath)
	}
	pe.dma = newDMAEngine(m.sipSim(pe.Sip), uint64(id)+1, p.VCWeightCompute, p.VCWeightComm, p.VCChunkSize)
	pe.dma.m, pe.dma.pe = m, pe
	pe.loc = m.localOf(pe.Sip)
	pe.tcmPath = Path{pe.TCM.Port}
	pe.tcmCopyPath = Path{pe.TCM.Port, pe.TCM.Port}
	m.pes[id] = pe
	return pe
}

// Resources lists every link, memory port and math unit in creation order
// (a math unit never used was never made: it is left out).
func (m *Machine) Resources() []*Resource {
	if !slices.Contains(m.links, nil) {
		return m.links
	}
	out := make([]*Resource, 0, len(m.links))
	for _, r := range m.links {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}

// Holds says why a machine of these parameters cannot place worldSize
// ranks (nil when it can): Place refuses such a world size, and check
// reports it for the sizes it validates.
func (p Params) Holds(worldSize int) error {
	if worldSize < 1 {
		return fmt.Errorf("world_size must be >= 1 (got %d)", worldSize)
	}
	if p.Placement != nil {
		// One PE per rank: the entries past the last rank were dropped
		// without a word.
		if len(p.Placement) != worldSize {
			return fmt.Errorf("system.placement lists %d PEs but world_size is %d; give one PE per rank", len(p.Placement), worldSize)
		}
		return nil
	}
	perSip := p.CubesPerSip * p.PesPerCube
	if pes := p.Sips * perSip; worldSize > pes {
		// The SIPs it needs, rounded up without wrapping at the largest
		// world sizes (which gave a negative system.sips).
		sips := worldSize / perSip
		if worldSize%perSip != 0 {
			sips++
		}
		grow := fmt.Sprintf("grow it with --set system.sips=%d", sips)
		if sips > math.MaxInt32/perSip {
			grow = fmt.Sprintf("no system.sips holds it: %d SIPs of %d PEs are more than the %d PEs a machine can have (sips × cubes_per_sip × pes_per_cube)", sips, perSip, math.MaxInt32)
		}
		return fmt.Errorf("world_size %d exceeds the machine's %d PEs (%d SIP(s) × %d cubes × %d PEs); %s",
			worldSize, pes, p.Sips, p.CubesPerSip, p.PesPerCube, grow)
	}
	return nil
}

// Place maps ranks 0..worldSize-1 to PEs: the placement list when given,
// otherwise rank r on the r-th PE in (sip, cube, pe) order.
func (m *Machine) Place(worldSize int) error {
	if err := m.Params.Holds(worldSize); err != nil {
		return err
	}
	pl := m.Params.Placement
	m.Ranks = make([]*PE, worldSize)
	seen := map[int]bool{}
	for r := range m.Ranks {
		id := r
		if pl != nil {
			id = pl[r]
		}
		if id < 0 || id >= m.NumPEs() {
			return fmt.Errorf("system.placement: rank %d -> PE %d is outside the machine's %d PEs", r, id, m.NumPEs())
		}
		if seen[id] {
			return fmt.Errorf("system.placement: PE %d is used by two ranks", id)
		}
		seen[id] = true
		m.Ranks[r] = m.PE(id)
		m.Ranks[r].Rank = r
	}
	if m.parts != nil {
		m.makeLinks()
	}
	return nil
}

// makeLinks makes the links of every SIP that has a placed PE, in SIP
// order, before a partitioned run: routes made during the run then only
// read the link maps, from any partition, and the links' order
// (Resources) is the same for every number of threads.
func (m *Machine) makeLinks() {
	cps := m.Params.CubesPerSip
	for sip := range m.Params.Sips {
		used := false
		for _, pe := range m.Ranks {
			used = used || pe.Sip == sip
		}
		if !used {
			continue
		}
		m.PCIe(sip)
		for a := sip * cps; a < (sip+1)*cps; a++ {
			for b := sip * cps; b < (sip+1)*cps; b++ {
				if a != b {
					m.ucieLink(a, b)
				}
			}
		}
	}
}

// location is a fabric node: a PE's port, or a cube router (SRAM side).
type location struct {
	pe   *PE // nil for a cube router
	cube int
}

func (m *Machine) memLocation(mem *Memory) location {
	if mem.Space == SRAM {
		return location{cube: mem.Cube}
	}
	return location{pe: mem.owner, cube: mem.Cube}
}

// route appends the links from a to b. PE-local memories (tcm, hbm) sit at
// the PE; SRAM sits at its cube router. Cubes of one SIP are connected by a
// UCIe link per ordered pair; SIPs meet through PCIe (up, then down).
func (m *Machine) route(p Path, a, b location) Path {
	if a.pe != nil && b.pe == a.pe {
		return p
	}
	if a.pe != nil {
		p = append(p, a.pe.NocUp)
	}
	if a.cube != b.cube {
		cps := m.Params.CubesPerSip
		if a.cube/cps == b.cube/cps {
			p = append(p, m.ucieLink(a.cube, b.cube))
		} else {
			p = append(p, m.pcieLink(a.cube/cps, true), m.pcieLink(b.cube/cps, false))
		}
	}
	if b.pe != nil {
		p = append(p, b.pe.NocDown)
	}
	return p
}

// MemToMem is the path of a DMA from src to dst memory: source port, links,
// destination port.
func (m *Machine) MemToMem(src, dst *Memory) Path {
	if m.parts != nil {
		return m.lockedPath(func() Path { return m.memToMem(src, dst) })
	}
	return m.memToMem(src, dst)
}

func (m *Machine) memToMem(src, dst *Memory) Path {
	k := pathKey{0, src.ID, dst.ID}
	if p, ok := m.paths[k]; ok {
		return p
	}
	p := Path{src.Port}
	p = m.route(p, m.memLocation(src), m.memLocation(dst))
	p = append(p, dst.Port)
	m.paths[k] = p
	return p
}

// MemToPE is the path of a load from mem into pe.
func (m *Machine) MemToPE(mem *Memory, pe *PE) Path {
	if pe.loadFrom == mem {
		return pe.loadPath
	}
	var p Path
	if m.parts != nil {
		p = m.lockedPath(func() Path { return m.memToPE(mem, pe) })
	} else {
		p = m.memToPE(mem, pe)
	}
	pe.loadFrom, pe.loadPath = mem, p
	return p
}

func (m *Machine) memToPE(mem *Memory, pe *PE) Path {
	k := pathKey{1, mem.ID, pe.ID}
	if p, ok := m.paths[k]; ok {
		return p
	}
	p := m.route(Path{mem.Port}, m.memLocation(mem), location{pe: pe, cube: pe.Cube})
	m.paths[k] = p
	return p
}

// PEToMem is the path of a store from pe into mem.
func (m *Machine) PEToMem(pe *PE, mem *Memory) Path {
	if pe.storeTo == mem {
		return pe.storePath
	}
	var p Path
	if m.parts != nil {
		p = m.lockedPath(func() Path { return m.peToMem(pe, mem) })
	} else {
		p = m.peToMem(pe, mem)
	}
	pe.storeTo, pe.storePath = mem, p
	return p
}

func (m *Machine) peToMem(pe *PE, mem *Memory) Path {
	k := pathKey{2, pe.ID, mem.ID}
	if p, ok := m.paths[k]; ok {
		return p
	}
	p := append(m.route(nil, location{pe: pe, cube: pe.Cube}, m.memLocation(mem)), mem.Port)
	m.paths[k] = p
	return p
}

// lockedPath is a route cache's path in a partitioned run, where any
// partition may fill the cache: make looks it up or computes and stores
// it, under the lock (a route reads only links made before the run,
// makeLinks).
func (m *Machine) lockedPath(make func() Path) Path {
	m.pathsMu.Lock()
	defer m.pathsMu.Unlock()
	return make()
}

// PEToPE is the link path between two PEs (no memory ports): the credit
// return fast path's route.
func (m *Machine) PEToPE(a, b *PE) Path {
	return m.route(nil, location{pe: a, cube: a.Cube}, location{pe: b, cube: b.Cube})
}

// Submit starts a transfer. Transfers that go through DMA use pe's engine on
// channel vc; direct transfers (own TCM, no DMA) book their path at once.
func (m *Machine) Submit(pe *PE, t *Transfer, direct bool) {
	if !direct {
		m.submitDMA(pe, t)
		return
	}
	t.sim = pe.dma.sim
	now := t.sim.Now()
	t.Issued, t.Started = now, now
	arrival, _ := t.Path.book(now, now, t.N, nil, 0, m.slowBooking)
	t.sim.At(arrival, t)
}

// submitDMA is Submit's DMA case, small enough to inline where a message
// or a memory operation is issued (one call less per message).
func (m *Machine) submitDMA(pe *PE, t *Transfer) {
	t.sim = pe.dma.sim
	pe.dma.submit(t)
}

// Image copies every memory's bytes: a full image, for tests (phase 2 keeps
// its pre-run image copy-on-first-write instead, KeepPreRun).
func (m *Machine) Image() oplog.Image {
	im := make(oplog.Image, len(m.Mems))
	for i, mem := range m.Mems {
		im[i] = mem.Snapshot()
	}
	return im
}

// KeepPreRun starts keeping the machine's memory as it is now, the image
// phase 2 replays from, copy-on-first-write: a block of a memory is
// copied only when something first writes it (Memory.Bytes), so memory
// that the run only reads costs no copy. Memories materialised later
// start from zeros.
func (m *Machine) KeepPreRun() {
	if m.TimingOnly {
		return
	}
	m.keepingPreRun = true
	for _, mem := range m.Mems {
		mem.keepPreRun()
	}
}

// PreRunOverlay is the kept pre-run image with the live memory under it
// (no copies), for phase 2 right after the run: the replay writes the
// overlay's blocks only, and the blocks it holds are the machine's saved
// copies, which it takes over.
func (m *Machine) PreRunOverlay() *oplog.Overlay {
	ov := &oplog.Overlay{Mems: make([]oplog.OverlayMem, len(m.Mems)), BlockShift: preRunBlockShift}
	for i, mem := range m.Mems {
		mem.writeLazy() // the overlay reads the live bytes whole
		om := oplog.OverlayMem{Live: mem.data}
		if p := mem.preRun; p != nil {
			om = p.overlay(mem.data)
		}
		ov.Mems[i] = om
	}
	return ov
}

// DropPreRun stops keeping the pre-run image and lets it go.
func (m *Machine) DropPreRun() {
	m.keepingPreRun = false
	for _, mem := range m.Mems {
		if mem.preRun != nil {
			m.keepSpent(mem.preRun.pre)
		}
		mem.preRun = nil
	}
}

// SetTimingOnly makes the machine move no bytes (see TimingOnly).
func (m *Machine) SetTimingOnly() {
	m.TimingOnly = true
	for _, mem := range m.Mems {
		mem.noData = true
		mem.data = nil
	}
}

// EnableTrace starts recording the timeline into rec: PE processes, DMA
// channel slices, deliveries, credit and link counters.
func (m *Machine) EnableTrace(rec *trace.Recorder) {
	m.Trace = rec
	m.slowBooking, m.endHook = true, true
	for _, pe := range m.Ranks {
		rec.Process(pe.ID+1, fmt.Sprintf("rank %d (%s)", pe.Rank, pe.Coord(m.Params.CubesPerSip)))
	}
	for _, r := range m.links {
		if r != nil {
			m.traceLink(r)
		}
	}
}

// traceLink has r, if it is a link, record its busy counter in m.Trace.
func (m *Machine) traceLink(r *Resource) {
	if r.Kind == "pe_noc" || r.Kind == "ucie" || r.Kind == "pcie" {
		r.rareOf().trace = m.Trace
	}
}

// Sim is the simulation PE p's events go to (its SIP's; the machine's
// one Sim unless the run is partitioned).
func (p *PE) Sim() *sim.Sim { return p.dma.sim }

// Buffer returns n bytes (contents undefined) for a tile of p, from its
// SIP's pool (the machine's on one Sim, as Machine.Buffer); nil when the
// machine moves no bytes.
func (p *PE) Buffer(n int64) []byte {
	if p.dma.m.TimingOnly {
		return nil
	}
	return p.loc.buffer(n)
}

// PutBuffer hands back a tile's bytes of p that nothing reads any more.
func (p *PE) PutBuffer(b []byte) { p.loc.putBuffer(b) }

// RankSim is the simulation of rank's PE, the machine's one Sim for the
// host (rank < 0).
func (m *Machine) RankSim(rank int) *sim.Sim {
	if rank >= 0 && rank < len(m.Ranks) {
		return m.Ranks[rank].Sim()
	}
	return m.Sim
}

// Spawn creates a process of pe's SIP (a kernel's thread, an
// asynchronous send) that starts now: on the machine's one Sim, or on
// the SIP's partition (sim.Partition.Spawn).
func (m *Machine) Spawn(pe *PE, name string, body func(p *sim.Proc)) *sim.Proc {
	if m.parts != nil {
		return m.part(pe.Sip).Spawn(name, body)
	}
	return m.Sim.Spawn(name, body)
}
