package ccl

// The plan of a run: the validated sizes, bench and settings (makePlan),
// and the sweep over sizes, in order or in parallel (-j).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.starlark.net/starlark"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/engine/topology"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
)

// sweep runs one simulation per size and collects the report; only the
// last size records a timeline (one trace document per run). With
// opts.Jobs > 1 and a loader, up to Jobs sizes run at once, each on its own
// machine, writing its print output, op_log, CCL trace and pointer dumps
// into buffers that are copied out in size order: the report and every
// output are byte for byte those of a sequential sweep.
func (p *plan) sweep(tgt *target.Target, file string, loader *script.Loader, once func(p *plan, loader *script.Loader, count int64) (*report.Result, error)) (*report.Report, error) {
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
	deliver := func(res *report.Result) {
		rep.Results = append(rep.Results, *res)
		if p.opts.OnResult != nil {
			p.opts.OnResult(res)
		}
	}
	if !p.opts.TimingOnly && p.bufs == nil {
		p.bufs = sweepBuffers()
		defer func() { p.bufs = nil }()
	}
	if p.opts.Jobs > 1 && loader != nil && len(p.counts) > 1 {
		return rep, p.parallelSweep(loader, once, deliver)
	}
	traceOut := p.opts.Trace
	defer func() { p.opts.Trace = traceOut }()
	for i, count := range p.counts {
		if p.opts.Progress != nil {
			p.opts.Progress(i, len(p.counts), count)
		}
		p.opts.Trace = nil
		if i == len(p.counts)-1 {
			p.opts.Trace = traceOut
		}
		res, err := once(p, loader, count)
		if p.bufs != nil && i < len(p.counts)-1 {
			// What the size left besides the pool's slices (phase 2's
			// scan, the kernels' objects) is collected now, so that the
			// next size's heap reuses it instead of growing on top of it
			// (debug.FreeOSMemory also handed the pages back, and the
			// next size faulted them in again: 11 % more CPU on a sweep
			// of 1.25 × steps).
			runtime.GC()
		}
		if row := p.refusedRow(count, err); row != nil {
			res, err = row, nil
		}
		if err != nil {
			return rep, err
		}
		deliver(res)
	}
	return rep, nil
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

// InternalError is a panic (a bug in kernbench) caught on a goroutine of
// its own and carried to the caller with the goroutine's backtrace.
type InternalError struct {
	Value any
	Stack []byte
}

func (e *InternalError) Error() string { return fmt.Sprintf("internal error: %v", e.Value) }

// pointOutput is what one size of a parallel sweep wrote.
type pointOutput struct {
	stderr, oplog, cclTrace, dump bytes.Buffer
	res                           *report.Result
	err                           error
	done                          chan struct{}
}

// parallelSweep runs the sizes Jobs at a time and delivers them in order;
// at the first size that fails (in size order) it stops starting new ones
// and returns that error after the sizes before it are delivered.
func (p *plan) parallelSweep(loader *script.Loader, once func(p *plan, loader *script.Loader, count int64) (*report.Result, error), deliver func(*report.Result)) error {
	n := len(p.counts)
	points := make([]*pointOutput, n)
	for i := range points {
		points[i] = &pointOutput{done: make(chan struct{})}
	}
	slots := make(chan struct{}, p.opts.Jobs)
	stop := make(chan struct{})
	p.budget = hostmem.NewBudget(p.opts.MaxMemory)
	defer func() { p.budget = nil }()
	var wg sync.WaitGroup
	go func() {
		for i, count := range p.counts {
			select {
			case slots <- struct{}{}:
			case <-stop:
				for ; i < n; i++ {
					points[i].err = errSweepStopped
					close(points[i].done)
				}
				return
			}
			wg.Add(1)
			go func(i int, count int64, out *pointOutput) {
				defer wg.Done()
				defer func() { <-slots }()
				defer close(out.done)
				// A panic here would kill the process past the CLI's error
				// boundary: carry it to the delivering goroutine instead.
				defer func() {
					if r := recover(); r != nil {
						out.err = &InternalError{Value: r, Stack: debug.Stack()}
					}
				}()
				pp := *p
				pp.opts.Stderr = &out.stderr
				if pp.opts.OpLog != nil {
					pp.opts.OpLog = &out.oplog
				}
				if pp.opts.CCLTrace != nil {
					pp.opts.CCLTrace = &out.cclTrace
				}
				if pp.opts.DumpPointers != nil {
					pp.opts.DumpPointers = &out.dump
				}
				if i != n-1 {
					pp.opts.Trace = nil
				}
				lc := *loader
				lc.Stderr = &out.stderr
				out.res, out.err = once(&pp, &lc, count)
			}(i, count, points[i])
		}
	}()
	var firstErr error
	for i, out := range points {
		if p.opts.Progress != nil && firstErr == nil {
			p.opts.Progress(i, n, p.counts[i])
		}
		<-out.done
		if firstErr != nil {
			continue
		}
		if ie := (*InternalError)(nil); errors.As(out.err, &ie) {
			close(stop)
			wg.Wait()
			panic(ie) // to the CLI's error boundary, as in a sequential sweep
		}
		for _, c := range []struct {
			buf *bytes.Buffer
			w   io.Writer
		}{{&out.stderr, p.opts.Stderr}, {&out.oplog, p.opts.OpLog}, {&out.cclTrace, p.opts.CCLTrace}, {&out.dump, p.opts.DumpPointers}} {
			if c.w != nil && c.buf.Len() > 0 {
				_, _ = c.w.Write(c.buf.Bytes())
			}
		}
		if row := p.refusedRow(p.counts[i], out.err); row != nil {
			out.res, out.err = row, nil
		}
		if out.err != nil {
			firstErr = out.err
			close(stop)
			continue
		}
		deliver(out.res)
	}
	wg.Wait()
	return firstErr
}

// errSweepStopped marks sizes a parallel sweep did not start because an
// earlier size failed.
var errSweepStopped = errors.New("not run: an earlier size failed")

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
	case tgt.Entry != nil:
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
		return nil, usage("%s: unknown topology %q: want one of %s", topoFrom, p.topology, strings.Join(topology.Names(), ", "))
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
	switch {
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
	if opts.Collective != "" && !opts.Keywords && opts.Stderr != nil {
		declared, where := "", ""
		switch {
		case tgt.Entry != nil && tgt.Entry.Collective != "":
			declared, where = tgt.Entry.Collective, "its ccl.yaml entry"
		case globals["COLLECTIVE"] != nil:
			s, _ := globals["COLLECTIVE"].(starlark.String)
			declared, where = string(s), "its COLLECTIVE"
		}
		if declared != "" && declared != p.coll.Name {
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
		return nil, usage("--data-space: %v", err)
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
		return nil, usage("root %d is outside world_size %d", p.root, p.world)
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
	if tgt.Entry != nil {
		keys := make([]string, 0, len(tgt.Entry.Params))
		for k := range tgt.Entry.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, err := toStarlark(tgt.Entry.Params[k])
			if err != nil {
				return nil, usage("%s: algorithms.%s.params.%s: %v", tgt.Settings.Algorithm, tgt.Name, k, err)
			}
			if k == "root" {
				continue // passed below, after --root is applied
			}
			p.params = append(p.params, starlark.Tuple{starlark.String(k), v})
		}
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

func toStarlark(v any) (starlark.Value, error) {
	switch v := v.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(v), nil
	case int64:
		return starlark.MakeInt64(v), nil
	case int:
		return starlark.MakeInt(v), nil
	case float64:
		return starlark.Float(v), nil
	case string:
		return starlark.String(v), nil
	case []any:
		out := make([]starlark.Value, len(v))
		for i, x := range v {
			sv, err := toStarlark(x)
			if err != nil {
				return nil, err
			}
			out[i] = sv
		}
		return starlark.NewList(out), nil
	case map[string]any:
		d := starlark.NewDict(len(v))
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sv, err := toStarlark(v[k])
			if err != nil {
				return nil, err
			}
			_ = d.SetKey(starlark.String(k), sv)
		}
		return d, nil
	}
	return nil, fmt.Errorf("unsupported value %v (%T)", v, v)
}
