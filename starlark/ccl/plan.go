package ccl

// The plan of a run: the validated sizes, bench and settings (makePlan),
// and the sweep over sizes, in order or in parallel (-j).

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/config"
	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/engine/spelling"
	"kernbench/engine/topology"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/sweep"
	"kernbench/starlark/target"
	"kernbench/starlark/wiring"
)

// sweep runs one simulation per size (starlark/sweep: in order, or with
// opts.Jobs > 1 and a loader up to Jobs at once, each on its own
// machine) and collects the report.
func (p *plan) sweep(cfg *config.Config, tgt *target.Target, file string, loader *script.Loader, once func(p *plan, loader *script.Loader, count int64) (*report.Result, error)) (*report.Report, error) {
	if err := p.preflight(cfg, tgt); err != nil {
		return nil, err
	}
	rep := &report.Report{Algorithm: p.algoName, File: file, Collective: p.coll.Name, Topology: p.topology,
		WorldSize: p.world, BufferKind: tgt.Settings.BufferKind, Backpressure: tgt.Settings.Backpressure, DataSpace: p.dataSpace.String(),
		TimingOnly: p.opts.TimingOnly, BufferKindWhy: tgt.BufferKindWhy, StagingWhy: tgt.StagingWhy}
	if tgt.NSlotsWhy != "" {
		rep.NSlots, rep.NSlotsWhy = tgt.Settings.NSlots, tgt.NSlotsWhy
	}
	if tgt.Staging != 0 && tgt.Staging != machine.TCM {
		rep.Staging = tgt.Staging.String()
	}
	if p.coll.Rooted {
		root := p.root
		rep.Root = &root
	}
	if p.topology == "mesh_2d" {
		if rows, cols, err := topology.MeshDims(p.world, tgt.Settings.MeshShape); err == nil {
			rep.MeshShape = []int{rows, cols}
		}
	}
	if p.opts.OnStart != nil {
		if err := p.opts.OnStart(rep); err != nil {
			return rep, err
		}
	}
	jobs := p.opts.Jobs
	if loader == nil {
		jobs = 1 // a host bench's sizes share its loader
	}
	sw := &sweep.Sweep{Counts: p.counts, Jobs: jobs, Progress: p.opts.Progress, Refused: p.refusedRow,
		Out: sweep.Outputs{Stderr: p.opts.Stderr, OpLog: p.opts.OpLog, CCLTrace: p.opts.CCLTrace, DumpPointers: p.opts.DumpPointers, Trace: p.opts.Trace},
		Size: func(count int64, out sweep.Outputs, own bool) (*report.Result, error) {
			pp := *p
			pp.opts.Stderr, pp.opts.OpLog, pp.opts.CCLTrace, pp.opts.DumpPointers, pp.opts.Trace = out.Stderr, out.OpLog, out.CCLTrace, out.DumpPointers, out.Trace
			l := loader
			if own {
				lc := *loader
				lc.Stderr = out.Stderr
				l = &lc
			}
			return once(&pp, l, count)
		},
		Deliver: func(res *report.Result) {
			rep.Results = append(rep.Results, *res)
			if p.opts.OnResult != nil {
				p.opts.OnResult(res)
			}
		}}
	if !p.opts.TimingOnly && p.bufs == nil {
		p.bufs = sweepBuffers()
		defer func() { p.bufs = nil }()
		// What a size left besides the pool's slices (phase 2's scan,
		// the kernels' objects) is collected before the next, so that
		// its heap reuses it instead of growing on top of it
		// (debug.FreeOSMemory also handed the pages back, and the next
		// size faulted them in again: 11 % more CPU on a sweep of
		// 1.25 × steps).
		sw.Between = runtime.GC
	}
	if sw.Parallel() {
		// --max-memory is shared between the sizes running at once.
		p.budget = hostmem.NewBudget(p.opts.MaxMemory)
		defer func() { p.budget = nil }()
	}
	err := sw.Run()
	rep.NoteAvgBusBW()
	return rep, err
}

// preflight refuses, before the first size runs, what newWorld would
// refuse at every size of the sweep alike: --fault entries the machine
// does not have, a world larger than the machine, --trace-ranks outside
// the world. Found at the first size instead, they were reported "at size
// 1 of N of the sweep" as if another size might run (and --trace-ranks,
// checked only by the size that writes the trace, the last, after every
// other size had run). The messages are newWorld's.
func (p *plan) preflight(cfg *config.Config, tgt *target.Target) error {
	set := tgt.Settings
	mp := wiring.MachineParams(cfg.System, set)
	if err := wiring.CheckFaults(cfg.System, mp); err != nil {
		return report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	if err := mp.Holds(p.world); err != nil {
		return report.WithKind(errkind.Init, &report.Failure{Rank: -1, Msg: p.opts.inOptionTerms(err.Error()), Err: err})
	}
	if p.topology == "mesh_2d" && len(set.MeshShape) > 0 {
		if _, _, err := topology.MeshDims(p.world, set.MeshShape); err != nil {
			// Said where the shape was given: the message alone named the
			// run's file, which has none.
			from, ok := tgt.SettingGiven(cfg, "mesh_shape", p.opts.setItems())
			if !ok {
				from = "mesh_shape"
			}
			return usage("%s: %v: a mesh_2d of %d ranks needs a shape whose rows × cols is %d, or no mesh_shape (the most square one)", from, err, p.world, p.world)
		}
	}
	if p.opts.Trace != nil {
		for _, r := range p.opts.TraceRanks {
			if r < 0 || r >= p.world {
				return usage("--trace-ranks: rank %d is not in this run of %d rank(s)", r, p.world)
			}
		}
	}
	return nil
}

// sweepBuffers is the pool of a sweep's memories: the slices one size's
// memories leave are the next size's (already backed pages, cleared
// where written), and when a larger size lets go of the smaller ones
// their pages go back to the system at once, so that the sweep's peak is
// its largest size's, not the sum of the last two (the collector would
// give them back only minutes later).
func sweepBuffers() *machine.Buffers {
	b := &machine.Buffers{Drop: func(bytes int64) {
		if bytes >= 64<<20 {
			debug.FreeOSMemory()
		}
	}}
	b.PopulateSlabs(hostmem.Populate)
	return b
}

// refusedRow is the row of a size the memory guard refused, when the run
// makes such sizes rows (Options.RefusedAsRows); nil for any other error.
func (p *plan) refusedRow(count int64, err error) *report.Result {
	var ref *report.Refusal
	if !p.opts.RefusedAsRows || !errors.As(err, &ref) {
		return nil
	}
	row := p.row(count)
	row.Refused = ref
	return row
}

type plan struct {
	algoName  string
	world     int
	topology  string
	coll      Collective
	dt        dtype.DType
	red       dtype.RedOp
	counts    []int64
	dataSpace machine.Space
	opts      Options
	params    []starlark.Tuple
	root      int // root rank of broadcast and reduce
	// collDefault: nothing named the collective (no --collective,
	// ccl.yaml entry or COLLECTIVE), so the run is an allreduce.
	collDefault bool
	// bufs passes the simulated memories' large slices from one size of a
	// sweep to the next (and between -j workers' sizes): set by sweep for
	// runs that move data.
	bufs *machine.Buffers
	// procNote, when set, is passed to the run's world (see world.procNote).
	procNote func(p *sim.Proc) string
	// budget shares --max-memory between the sizes of a -j sweep.
	budget *hostmem.Budget
}

func usage(format string, args ...any) error {
	return report.WithKind(errkind.Usage, &report.Failure{Rank: -1, Msg: fmt.Sprintf(format, args...)})
}

func makePlan(tgt *target.Target, globals starlark.StringDict, hasHook bool, opts Options) (*plan, error) {
	p := &plan{opts: opts, algoName: tgt.Name}
	if p.algoName == "" {
		p.algoName = strings.TrimSuffix(filepath.Base(tgt.File), ".star")
	}
	p.world = tgt.Settings.WorldSize
	if opts.WorldSize > 0 {
		p.world = opts.WorldSize
	} else if opts.WorldSize < 0 {
		return nil, usage("%s must be >= 1 (got %d)", opts.optionName("--world-size"), opts.WorldSize)
	}
	// Topology: flag, ccl.yaml entry, module TOPOLOGY, then the default.
	// An unknown name is reported as coming from where it was given: a
	// --topology typo is not the algorithm file's fault.
	topoFrom := ""
	switch {
	case opts.Topology != "":
		p.topology, topoFrom = opts.Topology, opts.optionName("--topology")
	case tgt.Entry != nil && (tgt.Entry.TopologyGiven || globals["TOPOLOGY"] == nil):
		// (An entry without topology: takes the module's TOPOLOGY, as an
		// entry without collective: takes its COLLECTIVE: the entry's
		// default is no choice of its author's, and a kernel written for
		// another map would fail on a direction it does not have.)
		p.topology = tgt.Entry.Topology
	case globals["TOPOLOGY"] != nil:
		s, ok := globals["TOPOLOGY"].(starlark.String)
		if !ok {
			return nil, usage("%s: TOPOLOGY must be a string", tgt.File)
		}
		p.topology, topoFrom = string(s), tgt.File+": TOPOLOGY"
	case hasHook:
		p.topology = "none"
	default:
		p.topology = "ring_1d"
	}
	if topoFrom != "" && !slices.Contains(topology.Names(), p.topology) {
		return nil, usage("%s: unknown topology %q: want one of %s%s", topoFrom, p.topology, strings.Join(topology.Names(), ", "), spelling.Hint(p.topology, topology.Names()))
	}
	if p.topology != "mesh_2d" && len(opts.Compared) == 0 {
		// Only a mesh_2d reads its shape: the run (and a --vary row
		// labelled with the shape) would be the same without it.
		for _, it := range opts.setItems() {
			if n := len(it.Path); it.Path[n-1] == "mesh_shape" && (n == 2 && it.Path[0] == "defaults" || n == 3 && it.Path[0] == "algorithms") {
				return nil, usage("%v cannot take effect: mesh_shape shapes a mesh_2d topology, and this run's topology is %s", it, p.topology)
			}
		}
	}
	coll, collFrom := "allreduce", ""
	p.collDefault = opts.Collective == "" && (tgt.Entry == nil || tgt.Entry.Collective == "") && globals["COLLECTIVE"] == nil
	switch {
	case opts.Collective != "" && opts.CollectiveOf != "":
		coll, collFrom = opts.Collective, opts.CollectiveOf+": "
	case opts.Collective != "":
		coll, collFrom = opts.Collective, opts.optionName("--collective")+": "
	case tgt.Entry != nil && tgt.Entry.Collective != "":
		coll = tgt.Entry.Collective
	case globals["COLLECTIVE"] != nil:
		s, ok := globals["COLLECTIVE"].(starlark.String)
		if !ok {
			return nil, usage("%s: COLLECTIVE must be a string", tgt.File)
		}
		coll, collFrom = string(s), tgt.File+": COLLECTIVE: "
	}
	var err error
	if p.coll, err = LookupCollective(coll); err != nil {
		return nil, usage("%s%v", collFrom, err)
	}
	// A kernel cannot ask which collective it runs: given another one's
	// buffers it fails deep inside (an OutOfBounds, a wrong result) with
	// nothing that says why, so the override is announced first. (Not in
	// the mock, which runs once per schedule: a test's collective = is
	// deliberate.)
	if opts.Collective != "" && !opts.Keywords {
		declared, where := "", ""
		switch {
		case tgt.Entry != nil && tgt.Entry.Collective != "":
			declared, where = tgt.Entry.Collective, "its ccl.yaml entry"
		case globals["COLLECTIVE"] != nil:
			s, _ := globals["COLLECTIVE"].(starlark.String)
			declared, where = string(s), "its COLLECTIVE"
		}
		switch {
		case declared == "" || declared == p.coll.Name:
		case opts.CollectiveOf != "":
			// (A tune's collective is the point of the tune, not an
			// override of the algorithm's.)
			return nil, usage("%s is written for %s (%s), not %s: %s runs the algorithms of %s", p.algoName, declared, where, p.coll.Name, opts.CollectiveOf, p.coll.Name)
		case opts.Stderr != nil:
			fmt.Fprintf(opts.Stderr, "kernbench: warning: %s is written for %s (%s); --collective %s runs its kernel on %s's buffers\n",
				p.algoName, declared, where, p.coll.Name, p.coll.Name)
		}
	}
	dt := opts.DType
	if dt == "" {
		dt = "f32"
	}
	if p.dt, err = dtype.Parse(dt); err != nil {
		return nil, usage("%s: %v", opts.optionName("--dtype"), err)
	}
	red := opts.RedOp
	if red == "" {
		red = "sum"
	}
	if p.red, err = dtype.ParseRedOp(red); err != nil {
		return nil, usage("%s: %v", opts.optionName("--redop"), err)
	}
	ds := opts.DataSpace
	if ds == "" {
		ds = "hbm"
	}
	if p.dataSpace, err = machine.ParseSpace(ds); err != nil {
		return nil, usage("--data-space: %v%s", err, spelling.Hint(ds, []string{"tcm", "sram", "hbm"}))
	}
	if opts.RedOpGiven && !p.coll.Reduces {
		// The bench neither reduces nor checks a reduction: the run would
		// be the same without it, and its redop column says "none".
		return nil, usage("%s %s cannot take effect: %s reduces nothing (allreduce, reduce_scatter and reduce do); drop %s", opts.optionName("--redop"), red, p.coll.Name, opts.optionName("--redop"))
	}
	if opts.RootGiven && !p.coll.Rooted {
		// Only a rooted collective passes root to its kernel and checks
		// the result from it: elsewhere the run would be the same without.
		return nil, usage("%s %d cannot take effect: %s has no root (broadcast and reduce have one); drop %s", opts.optionName("--root"), opts.Root, p.coll.Name, opts.optionName("--root"))
	}
	p.root = opts.Root
	if tgt.Entry != nil && opts.Root == 0 && !opts.RootGiven {
		if v, ok := tgt.Entry.Params["root"].(int64); ok {
			p.root = int(v)
		}
	}
	if p.root < 0 || p.root >= p.world {
		// Named as it was given: --root (or the mock's root=), else the
		// algorithm's ccl.yaml params.
		from := opts.optionName("--root")
		if !opts.RootGiven {
			from = fmt.Sprintf("algorithms.%s.params.root", p.algoName)
		}
		return nil, usage("%s %d is outside world_size %d (ranks 0 to %d)", from, p.root, p.world, p.world-1)
	}
	switch {
	case len(opts.Counts) > 0:
		p.counts = opts.Counts
	case len(opts.Sizes) > 0:
		for _, b := range opts.Sizes {
			p.counts = append(p.counts, b/int64(p.dt.Size()))
		}
	default:
		p.counts = []int64{(1 << 20) / int64(p.dt.Size())}
	}
	for _, c := range p.counts {
		if c < 0 {
			return nil, usage("count must be >= 0 (got %d)", c)
		}
	}
	if opts.ExportChakra != nil && len(p.counts) != 1 {
		return nil, usage("--export-chakra writes the schedule of one size; got %d sizes", len(p.counts))
	}
	if opts.ExportChakra != nil && opts.TimingOnly {
		return nil, usage("--export-chakra reads the schedule from the op_log, which --timing-only does not keep; drop --timing-only")
	}
	if opts.ExportMSCCL != nil && len(p.counts) != 1 {
		return nil, usage("--export-msccl writes the schedule of one size; got %d sizes", len(p.counts))
	}
	// The entry's root is passed below, after --root is applied.
	if p.params, err = tgt.Params("root"); err != nil {
		return nil, usage("%v", err)
	}
	// Extra params (mock runs) replace same-named entry params.
	for _, kv := range opts.Params {
		for i := 0; i < len(p.params); i++ {
			if p.params[i][0] == kv[0] {
				p.params = append(p.params[:i], p.params[i+1:]...)
				i--
			}
		}
		p.params = append(p.params, kv)
	}
	// Rooted collectives get their root as a keyword argument.
	if p.coll.Rooted {
		p.params = append(p.params, starlark.Tuple{starlark.String("root"), starlark.MakeInt(p.root)})
	}
	return p, nil
}
