package ccl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.starlark.net/starlark"

	"kernbench/engine/config"
	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/engine/sim"
	"kernbench/engine/topology"
	"kernbench/engine/trace"
	"kernbench/starlark/orch"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

// Options are the inputs of one `kernbench run`.
type Options struct {
	ConfigPath string   // --config; "" = ./ccl.yaml if present, else the embedded default
	Sets       []string // --set key.path=value
	WorldSize  int      // 0 = configured
	Topology   string
	Collective string
	Algorithm  string  // the algorithm behind a host bench (default: defaults.algorithm)
	Counts     []int64 // elements per rank buffer, one result row each (nil = 1 MiB worth)
	Sizes      []int64 // bytes per rank buffer (converted with the dtype); used when Counts is nil
	DType      string
	RedOp      string
	InPlace    bool
	Seed       uint64
	DataSpace  string // tcm | sram | hbm (default hbm)
	Root       int
	MaxSteps   uint64
	// Strict turns warnings about lost work into errors: an L3 main that
	// returns with messages still queued or regions live (exit 4).
	Strict bool
	// Watchdog, when set, stops the run's Starlark threads at a wall-clock
	// limit (--timeout): exit 3, like the step limit.
	Watchdog   *script.Watchdog
	JitterSeed uint64
	Verify     bool
	// Detail adds the busiest resources to each result (-v).
	Detail bool
	// OpLog, when set, receives every run's op_log as JSON lines.
	OpLog io.Writer
	// CCLTrace, when set, receives one line per send and recv
	// (KERNBENCH_CCL_TRACE=1).
	CCLTrace io.Writer
	// Trace, when set, receives the timeline (Chrome Trace Event JSON) of
	// the run; with several sizes, of the last one.
	Trace io.Writer
	// TraceRanks and TraceKinds, when set, limit the trace to those ranks
	// (links stay) and those event kinds (trace.Kinds).
	TraceRanks []int
	TraceKinds []string
	// Progress, when set, is told before each size of a sweep is simulated.
	Progress func(i, n int, count int64)
	// OnStart, when set, sees the report's header (algorithm, collective,
	// topology) before the first size runs; an error it returns ends the
	// run (a comparison refuses an algorithm of another collective).
	OnStart func(*Report) error
	// TimingOnly moves and stores no bytes (--timing-only): the same
	// simulated time, events and operation counts, without data, so no
	// reference check and no phase 2; a kernel that reads values fails.
	TimingOnly bool
	// Jobs > 1 runs up to that many sizes of a sweep at once (-j); the
	// report and every output are the same as with 1.
	Jobs int
	// OnResult, when set, receives each size's row as soon as it is done
	// (the CLI prints rows as they finish, so a failure at a later size
	// keeps them).
	OnResult func(r *Result)
	// Check re-verifies every queue pair's pointer invariants after each
	// delivery and credit (--check; costly).
	Check bool
	// DumpPointers, when set, receives every queue pair's pointers at the
	// end of each run (also after a failure).
	DumpPointers io.Writer
	// Untimed runs on a machine where nothing takes time (the mock
	// runtime): only the order of events matters, and JitterSeed picks it.
	Untimed bool
	// KeepOutputs copies every rank's recv buffer into Result.Outputs.
	KeepOutputs bool
	// Params are extra keyword arguments for kernel(), over the ccl.yaml
	// entry's params.
	Params []starlark.Tuple
	// ExportMSCCL, when set, receives the run's schedule as MSCCL XML
	// (--export-msccl; one size only).
	ExportMSCCL io.Writer
	// MaxMemory bounds the host memory of a run (--max-memory; 0 = no
	// bound): a size whose estimate is over it is refused (exit 2), and a
	// run that passes it anyway stops (exit 3, OutOfMemory).
	MaxMemory int64

	Embedded fs.FS     // the shipped ccl.yaml, algorithms and benches
	Stderr   io.Writer // print() and diagnostics
}

// Report is the result of a run, shaped like `--json` output.
type Report struct {
	Algorithm    string    `json:"algorithm"`
	File         string    `json:"file"`
	Collective   string    `json:"collective"`
	Topology     string    `json:"topology"`
	MeshShape    []int     `json:"mesh_shape,omitempty"` // mesh_2d: [rows, cols] in force
	TimingOnly   bool      `json:"timing_only,omitempty"`
	WorldSize    int       `json:"world_size"`
	BufferKind   string    `json:"buffer_kind"`
	Backpressure string    `json:"backpressure"`
	DataSpace    string    `json:"data_space"`
	Results      []Result  `json:"results"`
	WallS        float64   `json:"wall_s"`
	Error        *ErrorOut `json:"error,omitempty"`
}

// Result is one size's row.
type Result struct {
	Bytes       int64      `json:"bytes"`
	Count       int64      `json:"count"`
	DType       string     `json:"dtype"`
	RedOp       string     `json:"redop"`
	InPlace     bool       `json:"in_place"`
	SimTimeNs   float64    `json:"sim_time_ns"`
	AlgBW       float64    `json:"algbw_gbps"`
	BusBW       float64    `json:"busbw_gbps"`
	LinkBW      float64    `json:"link_bw_gbps"`
	Eff         float64    `json:"eff"`
	Wrong       int64      `json:"wrong"`
	Verified    bool       `json:"verified"`
	Phase2Match *bool      `json:"phase2_match"`
	FirstWrong  *WrongElem `json:"first_wrong,omitempty"`
	// WrongRanges are the wrong elements of each rank that has some.
	WrongRanges []RankWrong `json:"wrong_ranges,omitempty"`
	Phase2      string      `json:"phase2_mismatch,omitempty"`
	Ops         OpCounts    `json:"ops"`
	Busiest     []Usage     `json:"busiest,omitempty"`
	// Unfinished is what an L3 orchestration left behind when main
	// returned (queued messages, regions never freed); an error under
	// Options.Strict.
	Unfinished []string `json:"unfinished,omitempty"`
	// Time is where the ranks' time went (per rank with -v).
	Time *TimeSummary `json:"time,omitempty"`
	// Classes sums the resources by kind (with -v): links (pe_noc,
	// ucie, pcie), memory ports (tcm, sram, hbm) and math units.
	Classes []ClassUsage `json:"resource_classes,omitempty"`
	// Interp is the interpreter work of the kernels (-v only).
	Interp *InterpCounts `json:"starlark,omitempty"`
	// HostMemory is the run's host memory estimate (-v only).
	HostMemory *MemoryEstimate `json:"host_memory_estimate,omitempty"`
	// OpLog is what the op_log cost in host memory (-v only).
	OpLog *OpLogCost `json:"oplog,omitempty"`
	// Outputs are the recv buffers after the run (Options.KeepOutputs).
	Outputs [][]byte `json:"-"`
	Events  uint64   `json:"events"`
}

// Usage is one resource's load over a run.
type Usage struct {
	Resource    string  `json:"resource"`
	Bytes       int64   `json:"bytes"`
	Utilisation float64 `json:"utilisation"`
}

// InterpCounts are the Starlark steps and tl builtin calls of all ranks'
// kernels and threads: what an interpreted kernel costs per message.
type InterpCounts struct {
	Steps        int64 `json:"steps"`
	BuiltinCalls int64 `json:"builtin_calls"`
}

// OpCounts are operation totals over ranks.
type OpCounts struct {
	Send  int64 `json:"send"`
	Recv  int64 `json:"recv"`
	Load  int64 `json:"load"`
	Store int64 `json:"store"`
	Math  int64 `json:"math"`
}

// WrongElem is the first element that differs from the reference.
type WrongElem struct {
	Rank  int    `json:"rank"`
	Index int    `json:"index"`
	Got   string `json:"got"`
	Want  string `json:"want"`
}

// RankWrong are one rank's wrong elements as merged index ranges: at most
// MaxWrongRanges, More counts the ranges left out.
type RankWrong struct {
	Rank   int          `json:"rank"`
	Wrong  int          `json:"wrong"`
	Ranges []WrongRange `json:"ranges"`
	More   int          `json:"more_ranges,omitempty"`
}

// WrongRange is the element indices [Start, End) of a recv buffer that
// differ from the reference. Sentinel: every one of them still holds the
// value the out-of-place recvbuf was filled with (NaN for floats, 0xA5
// bytes for integers), i.e. the kernel never wrote them.
type WrongRange struct {
	Start    int  `json:"start"`
	End      int  `json:"end"`
	Sentinel bool `json:"sentinel,omitempty"`
}

// MaxWrongRanges bounds the ranges kept per rank (RankWrong.More counts the rest).
const MaxWrongRanges = 16

// rangeBuilder merges the increasing wrong indices of one rank into
// ranges of consecutive indices with the same sentinel state.
type rangeBuilder struct {
	rw         RankWrong
	isSentinel func(i int) bool // nil: the buffer had no sentinel (in place)
	open       bool             // a run is under way (kept or only counted)
	end        int
	sentinel   bool
}

func (b *rangeBuilder) add(i int) {
	b.rw.Wrong++
	s := b.isSentinel != nil && b.isSentinel(i)
	if b.open && b.end == i && b.sentinel == s {
		b.end++
		if b.rw.More == 0 {
			b.rw.Ranges[len(b.rw.Ranges)-1].End++
		}
		return
	}
	b.open, b.end, b.sentinel = true, i+1, s
	if len(b.rw.Ranges) < MaxWrongRanges {
		b.rw.Ranges = append(b.rw.Ranges, WrongRange{Start: i, End: i + 1, Sentinel: s})
	} else {
		b.rw.More++
	}
}

// ErrorOut is the error object of the JSON report.
type ErrorOut struct {
	Kind      string   `json:"kind"`
	Message   string   `json:"message"`
	Rank      *int     `json:"rank,omitempty"`
	Backtrace []string `json:"backtrace,omitempty"`
	// SpawnedAt is where a failing tl.spawn thread was spawned.
	SpawnedAt []string `json:"spawned_at,omitempty"`
}

// Exit statuses (spec/cli.md).
const (
	ExitOK       = 0
	ExitWrong    = 1
	ExitUsage    = 2
	ExitDeadlock = 3
	ExitRuntime  = 4
)

// Failure is an error with its exit status, kind, rank and the full text
// the user sees on stderr.
type Failure struct {
	Code      int
	Kind      string
	Rank      int // -1 when no rank is involved
	Msg       string
	Detail    string // multi-line report (backtrace, blocked processes)
	Backtrace []string
	SpawnedAt []string // a failing thread's spawn stack
	Err       error
	// WaitFor is the wait-for graph of a deadlock.
	WaitFor []waitEdge
}

// WriteDOT writes the failure's wait-for graph as Graphviz DOT (--dot).
func (f *Failure) WriteDOT(w io.Writer) error { return writeDOT(w, f.WaitFor) }

func (f *Failure) Error() string { return f.Msg }
func (f *Failure) Unwrap() error { return f.Err }

// Out converts the failure into the JSON error object.
func (f *Failure) Out() *ErrorOut {
	o := &ErrorOut{Kind: f.Kind, Message: f.Msg, Backtrace: f.Backtrace, SpawnedAt: f.SpawnedAt}
	if f.Rank >= 0 {
		r := f.Rank
		o.Rank = &r
	}
	return o
}

// LoadConfig reads --config or ./ccl.yaml laid over the embedded default
// (config.LoadOverlay), or the embedded default alone, applying --set
// overrides. It returns the config and its directory (module paths of its
// own entries are relative to it, see moduleFile; "" for the embedded one).
func LoadConfig(path string, sets []string, embedded fs.FS) (*config.Config, string, error) {
	name, dir := path, filepath.Dir(path)
	var data []byte
	var err error
	switch {
	case path != "":
		data, err = script.ReadInput(path)
	default:
		if _, statErr := os.Stat("ccl.yaml"); statErr == nil {
			name, dir = "ccl.yaml", "."
			data, err = script.ReadInput(name)
		} else {
			name, dir = "ccl.yaml (embedded default)", ""
			data = config.DefaultYAML()
		}
	}
	if err != nil {
		return nil, "", &Failure{Code: ExitUsage, Kind: "ConfigError", Rank: -1, Msg: fmt.Sprintf("--config: %v", err), Err: err}
	}
	load := config.LoadOverlay
	if dir == "" {
		load = config.Load
	}
	cfg, err := load(name, data, sets)
	if err != nil {
		return nil, "", &Failure{Code: ExitUsage, Kind: "ConfigError", Rank: -1, Msg: err.Error(), Err: err}
	}
	return cfg, dir, nil
}

// target is what `kernbench run X` resolved to.
type target struct {
	name     string // algorithm name ("" if the file has no ccl.yaml entry)
	file     string
	entry    *config.Algorithm
	settings config.Settings
}

// moduleFile is the path of a's module: relative to the directory of the
// ccl.yaml that names it, cfgDir for a local one and the working directory
// (then the embedded files) for a shipped entry.
func moduleFile(a *config.Algorithm, cfgDir string) string {
	if a.Shipped {
		return a.Module
	}
	return filepath.Join(cfgDir, a.Module)
}

func resolveTarget(arg string, cfg *config.Config, cfgDir string, src script.Source) (*target, error) {
	isFile := strings.HasSuffix(arg, ".star") || strings.ContainsRune(arg, '/')
	if !isFile {
		a, ok := cfg.Algorithms[arg]
		if !ok {
			return nil, &Failure{Code: ExitUsage, Kind: "UsageError", Rank: -1,
				Msg: fmt.Sprintf("%q is neither a .star file nor an algorithm of %s (known: %s)", arg, cfg.File, strings.Join(cfg.AlgorithmNames, ", "))}
		}
		set, _ := cfg.Settings(arg)
		file := moduleFile(a, cfgDir)
		if !src.Exists(file) {
			cfgFile := cfg.File
			if a.Shipped {
				cfgFile = config.DefaultName + " (embedded default)"
			}
			return nil, &Failure{Code: ExitUsage, Kind: "ConfigError", Rank: -1,
				Msg: fmt.Sprintf("%s:%d: algorithms.%s.module: %s: no such file", cfgFile, a.Line, arg, file)}
		}
		return &target{name: arg, file: file, entry: a, settings: set}, nil
	}
	t := &target{file: arg, settings: cfg.Defaults}
	if !src.Exists(arg) {
		return nil, &Failure{Code: ExitUsage, Kind: "UsageError", Rank: -1, Msg: fmt.Sprintf("%s: no such file", arg)}
	}
	// The file's ccl.yaml entry, if any: the one whose module is this very
	// file. A file that merely shares a shipped algorithm's base name (a
	// user's own rd_allreduce.star) is not that algorithm and must not
	// receive its params or topology.
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	for _, n := range cfg.AlgorithmNames {
		a := cfg.Algorithms[n]
		if abs(moduleFile(a, cfgDir)) == abs(arg) {
			t.name, t.entry = n, a
			break
		}
	}
	if t.entry != nil {
		t.settings, _ = cfg.Settings(t.name)
	}
	return t, nil
}

// Run executes `kernbench run arg`.
func Run(arg string, opts Options) (*Report, error) {
	if IsMSCCL(arg) {
		return runMSCCL(arg, opts)
	}
	cfg, cfgDir, err := LoadConfig(opts.ConfigPath, opts.Sets, opts.Embedded)
	if err != nil {
		return nil, err
	}
	src := script.Source{Embedded: opts.Embedded}
	tgt, err := resolveTarget(arg, cfg, cfgDir, src)
	if err != nil {
		return nil, err
	}
	if n, def := tgt.settings.VCChunkSize, config.Default().Defaults.VCChunkSize; n != def && opts.Stderr != nil {
		// The DMA model is the fluid limit of chunked service: the chunk
		// size changes no result, and a user who set it must know.
		fmt.Fprintf(opts.Stderr, "kernbench: warning: vc_chunk_size %d has no effect: links and DMA channels are modelled as the limit of chunk-by-chunk service (within one chunk of it), whatever the chunk size\n", n)
	}
	loader := &script.Loader{Src: src, Search: filepath.Join(cfgDir, "algorithms"), MaxSteps: opts.MaxSteps, Watchdog: opts.Watchdog, Stderr: opts.Stderr, Predeclared: orch.Predeclared()}
	if cfgDir == "" {
		loader.Search = "algorithms"
	} else {
		// A local ccl.yaml lies over the embedded one: its modules may
		// load the shipped helpers.
		loader.Fallback = "algorithms"
	}
	loader.PrintPrefix = printPrefix
	globals, err := loader.Load(tgt.file)
	if err != nil {
		return nil, loadFailure(err)
	}
	if v, ok := globals["run_rank"]; ok {
		rr, ok := v.(starlark.Callable)
		if !ok {
			return nil, &Failure{Code: ExitUsage, Kind: "LoadError", Rank: -1, Msg: fmt.Sprintf("%q must be a function (got a %s)", "run_rank", v.Type())}
		}
		return runHostBench(tgt.file, rr, cfg, cfgDir, loader, opts)
	}
	if v, ok := globals["main"]; ok && globals["kernel"] == nil {
		mf, ok := v.(starlark.Callable)
		if !ok {
			return nil, &Failure{Code: ExitUsage, Kind: "LoadError", Rank: -1, Msg: fmt.Sprintf("%q must be a function (got a %s)", "main", v.Type())}
		}
		return runL3Bench(tgt.file, mf, cfg, loader, opts)
	}
	kernel, err := entryPoint(globals, tgt.file, "kernel")
	if err != nil {
		return nil, err
	}
	var hook starlark.Callable
	if v, ok := globals["neighbors"]; ok {
		c, ok := v.(starlark.Callable)
		if !ok {
			return nil, &Failure{Code: ExitUsage, Kind: "LoadError", Rank: -1, Msg: fmt.Sprintf("%s: \"neighbors\" must be a function (got a %s)", tgt.file, v.Type())}
		}
		hook = c
	}
	pl, err := makePlan(tgt, globals, hook != nil, opts)
	if err != nil {
		return nil, err
	}
	return pl.sweep(tgt, tgt.file, loader, func(p *plan, loader *script.Loader, count int64) (*Result, error) {
		return runOnce(p, cfg, tgt, loader, kernel, hook, count)
	})
}

// sweep runs one simulation per size and collects the report; only the
// last size records a timeline (one trace document per run). With
// opts.Jobs > 1 and a loader, up to Jobs sizes run at once, each on its own
// machine, writing its print output, op_log, CCL trace and pointer dumps
// into buffers that are copied out in size order: the report and every
// output are byte for byte those of a sequential sweep.
func (p *plan) sweep(tgt *target, file string, loader *script.Loader, once func(p *plan, loader *script.Loader, count int64) (*Result, error)) (*Report, error) {
	rep := &Report{Algorithm: p.algoName, File: file, Collective: p.coll.Name, Topology: p.topology,
		WorldSize: p.world, BufferKind: tgt.settings.BufferKind, Backpressure: tgt.settings.Backpressure, DataSpace: p.dataSpace.String(),
		TimingOnly: p.opts.TimingOnly}
	if p.topology == "mesh_2d" {
		if rows, cols, err := topology.MeshDims(p.world, tgt.settings.MeshShape); err == nil {
			rep.MeshShape = []int{rows, cols}
		}
	}
	if p.opts.OnStart != nil {
		if err := p.opts.OnStart(rep); err != nil {
			return rep, err
		}
	}
	deliver := func(res *Result) {
		rep.Results = append(rep.Results, *res)
		if p.opts.OnResult != nil {
			p.opts.OnResult(res)
		}
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
		if err != nil {
			return rep, err
		}
		deliver(res)
	}
	return rep, nil
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
	res                           *Result
	err                           error
	done                          chan struct{}
}

// parallelSweep runs the sizes Jobs at a time and delivers them in order;
// at the first size that fails (in size order) it stops starting new ones
// and returns that error after the sizes before it are delivered.
func (p *plan) parallelSweep(loader *script.Loader, once func(p *plan, loader *script.Loader, count int64) (*Result, error), deliver func(*Result)) error {
	n := len(p.counts)
	points := make([]*pointOutput, n)
	for i := range points {
		points[i] = &pointOutput{done: make(chan struct{})}
	}
	slots := make(chan struct{}, p.opts.Jobs)
	stop := make(chan struct{})
	p.budget = newMemBudget(p.opts.MaxMemory)
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

func printPrefix(th *starlark.Thread) string {
	if k, ok := th.Local(kernelKey).(*tl.Kernel); ok && k != nil {
		return fmt.Sprintf("[t=%v rank=%d] ", k.M.Sim.Now(), k.Rank)
	}
	// L3 main and L2 orchestrators (and host benches between launches):
	// the simulated time and the process's name.
	if p, ok := th.Local(orch.ProcKey).(*sim.Proc); ok && p != nil {
		return fmt.Sprintf("[t=%v %s] ", p.Sim().Now(), p.Name)
	}
	return ""
}

const kernelKey = "kernbench.kernel"

func entryPoint(globals starlark.StringDict, file, name string) (starlark.Callable, error) {
	v, ok := globals[name]
	if !ok {
		return nil, &Failure{Code: ExitUsage, Kind: "LoadError", Rank: -1, Msg: fmt.Sprintf("no %q function found in %q", name, file)}
	}
	c, ok := v.(starlark.Callable)
	if !ok {
		return nil, &Failure{Code: ExitUsage, Kind: "LoadError", Rank: -1, Msg: fmt.Sprintf("%q must be a function (got a %s)", name, v.Type())}
	}
	return c, nil
}

func loadFailure(err error) error {
	return stepLimit(&Failure{Code: ExitUsage, Kind: "LoadError", Rank: -1, Msg: script.Format(err), Err: err})
}

// stepLimit turns a failure caused by the Starlark step limit outside a
// kernel (a module's top level, neighbors()) into a step-limit failure:
// exit 3 and the --max-steps hint, as inside kernels.
func stepLimit(f *Failure) *Failure {
	var ee *starlark.EvalError
	if errors.As(f.Err, &ee) && strings.Contains(ee.Msg, "too many steps") {
		f.Code, f.Kind = ExitDeadlock, "StepLimit"
		f.Msg = ee.Msg + " (raise --max-steps if the script is meant to run this long)"
		f.Detail, f.Backtrace = ee.Backtrace(), script.Backtrace(ee)
	}
	if errors.As(f.Err, &ee) && script.IsTimeout(ee) {
		f.Code, f.Kind = ExitDeadlock, "Timeout"
		f.Msg = ee.Msg + " (raise --timeout if the script is meant to run this long)"
		f.Detail, f.Backtrace = ee.Backtrace(), script.Backtrace(ee)
	}
	return f
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
	// procNote, when set, is passed to the run's world (see world.procNote).
	procNote func(p *sim.Proc) string
	// budget shares --max-memory between the sizes of a -j sweep.
	budget *memBudget
}

func usage(format string, args ...any) error {
	return &Failure{Code: ExitUsage, Kind: "UsageError", Rank: -1, Msg: fmt.Sprintf(format, args...)}
}

func makePlan(tgt *target, globals starlark.StringDict, hasHook bool, opts Options) (*plan, error) {
	p := &plan{opts: opts, algoName: tgt.name}
	if p.algoName == "" {
		p.algoName = strings.TrimSuffix(filepath.Base(tgt.file), ".star")
	}
	p.world = tgt.settings.WorldSize
	if opts.WorldSize > 0 {
		p.world = opts.WorldSize
	} else if opts.WorldSize < 0 {
		return nil, usage("--world-size must be >= 1 (got %d)", opts.WorldSize)
	}
	// Topology: flag, ccl.yaml entry, module TOPOLOGY, then the default.
	switch {
	case opts.Topology != "":
		p.topology = opts.Topology
	case tgt.entry != nil:
		p.topology = tgt.entry.Topology
	case globals["TOPOLOGY"] != nil:
		s, ok := globals["TOPOLOGY"].(starlark.String)
		if !ok {
			return nil, usage("%s: TOPOLOGY must be a string", tgt.file)
		}
		p.topology = string(s)
	case hasHook:
		p.topology = "none"
	default:
		p.topology = "ring_1d"
	}
	coll := "allreduce"
	switch {
	case opts.Collective != "":
		coll = opts.Collective
	case tgt.entry != nil && tgt.entry.Collective != "":
		coll = tgt.entry.Collective
	case globals["COLLECTIVE"] != nil:
		s, ok := globals["COLLECTIVE"].(starlark.String)
		if !ok {
			return nil, usage("%s: COLLECTIVE must be a string", tgt.file)
		}
		coll = string(s)
	}
	var err error
	if p.coll, err = LookupCollective(coll); err != nil {
		return nil, usage("%v", err)
	}
	dt := opts.DType
	if dt == "" {
		dt = "f32"
	}
	if p.dt, err = dtype.Parse(dt); err != nil {
		return nil, usage("--dtype: %v", err)
	}
	red := opts.RedOp
	if red == "" {
		red = "sum"
	}
	if p.red, err = dtype.ParseRedOp(red); err != nil {
		return nil, usage("--redop: %v", err)
	}
	ds := opts.DataSpace
	if ds == "" {
		ds = "hbm"
	}
	if p.dataSpace, err = machine.ParseSpace(ds); err != nil {
		return nil, usage("--data-space: %v", err)
	}
	p.root = opts.Root
	if tgt.entry != nil && opts.Root == 0 {
		if v, ok := tgt.entry.Params["root"].(int64); ok {
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
	if opts.ExportMSCCL != nil && len(p.counts) != 1 {
		return nil, usage("--export-msccl writes the schedule of one size; got %d sizes", len(p.counts))
	}
	if tgt.entry != nil {
		keys := make([]string, 0, len(tgt.entry.Params))
		for k := range tgt.entry.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, err := toStarlark(tgt.entry.Params[k])
			if err != nil {
				return nil, usage("%s: algorithms.%s.params.%s: %v", tgt.settings.Algorithm, tgt.name, k, err)
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
	if p.coll.Name == "broadcast" || p.coll.Name == "reduce" {
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

// world is one simulation's machine and (once installed) its process group.
type world struct {
	s        *sim.Sim
	m        *machine.Machine
	sys      config.System // the machine description (neighbors(location=, machine=))
	g        *machine.Group
	initial  oplog.Image // memory before the kernels ran (phase 2's start)
	trace    *trace.Recorder
	traceOut io.Writer
	oplogOut io.Writer // --oplog: written by phase2, or by run when the run failed
	dump     io.Writer
	warn     io.Writer // warnings (stderr); may be nil
	// releaseHeap gives up the GC headroom taken for the image (snapshot).
	releaseHeap func()
	// releaseGuard ends the world's registration with the memory guard.
	releaseGuard func()
	// spent is each rank's kernel process time by activity (spawn).
	spent [][sim.MaxActivities]sim.Time
	// procNote adds a line about a blocked process to deadlock reports
	// (an MSCCL run names the step each thread block is at).
	procNote func(p *sim.Proc) string
}

// close ends the world's hold on the collector's settings.
func (w *world) close() {
	if w.releaseHeap != nil {
		w.releaseHeap()
		w.releaseHeap = nil
	}
	if w.releaseGuard != nil {
		w.releaseGuard()
		w.releaseGuard = nil
	}
}

// manyTraceEvents is where a trace gets slow to open: the run says so.
var manyTraceEvents = 1_000_000 // a variable for tests

// writeTrace writes the trace, after a warning when it is very large.
func (w *world) writeTrace() error {
	if n := w.trace.Len(); n > manyTraceEvents && w.warn != nil {
		fmt.Fprintf(w.warn, "kernbench: warning: the trace has %d events (over a million; a viewer may be slow to open it): --trace-ranks LIST and --trace-kinds LIST keep fewer\n", n)
	}
	return w.trace.WriteJSON(w.traceOut)
}

// writeFailedOplog writes the op_log of a failed run, the operations up
// to the failure: the run's other outputs (--trace, --dot) explain a
// failure too, and an empty --oplog file would look like a run that did
// nothing. Phase 2, which writes it for a finished run, is not reached.
func (w *world) writeFailedOplog(failure error) error {
	if failure == nil || w.oplogOut == nil || w.m.Log == nil {
		return failure
	}
	// A write error is not reported: the run's own failure is what the
	// user needs to see.
	_ = w.m.Log.WriteJSONLines(w.oplogOut)
	return failure
}

// newWorld builds a fresh simulation and machine and places the ranks.
func newWorld(p *plan, cfg *config.Config, set config.Settings) (*world, error) {
	s := sim.New()
	s.SetJitter(p.opts.JitterSeed)
	s.MaxTime = sim.Time(set.MaxSimTimeNs) * sim.Nanosecond
	mp := machineParams(cfg.System, set)
	mp.Untimed = p.opts.Untimed
	m, err := machine.New(s, mp)
	if err != nil {
		return nil, &Failure{Code: ExitUsage, Kind: "ConfigError", Rank: -1, Msg: err.Error(), Err: err}
	}
	if err := m.Place(p.world); err != nil {
		return nil, &Failure{Code: ExitUsage, Kind: "InitError", Rank: -1, Msg: err.Error(), Err: err}
	}
	if p.opts.TimingOnly {
		m.SetTimingOnly()
	} else if p.opts.Verify || p.opts.OpLog != nil {
		m.Log = &oplog.Log{}
	}
	w := &world{s: s, m: m, sys: cfg.System, traceOut: p.opts.Trace, oplogOut: p.opts.OpLog, dump: p.opts.DumpPointers, warn: p.opts.Stderr}
	w.installGuard(p.opts.MaxMemory)
	if p.opts.Trace != nil {
		w.trace = trace.New()
		var pids []int
		if p.opts.TraceRanks != nil {
			pids = []int{}
			for _, r := range p.opts.TraceRanks {
				if r < 0 || r >= len(m.Ranks) {
					return nil, &Failure{Code: ExitUsage, Kind: "UsageError", Rank: -1,
						Msg: fmt.Sprintf("--trace-ranks: rank %d is not in this run of %d rank(s)", r, len(m.Ranks))}
				}
				pids = append(pids, m.Ranks[r].ID+1)
			}
		}
		w.trace.Only(pids, p.opts.TraceKinds)
		m.EnableTrace(w.trace)
	}
	return w, nil
}

// snapshot records the initial memory image (phase 2 starts from it).
func (w *world) snapshot() {
	if w.m.Log != nil {
		w.initial = w.m.Image()
		var n int64
		for _, b := range w.initial {
			n += int64(len(b))
		}
		// The image and the memory it copies live until phase 2 is done.
		w.releaseHeap = holdLargeHeap(2 * n)
	}
}

// phase2 replays the op_log on the initial image and compares the result
// with phase 1's memory; it fills Phase2Match and, on a mismatch, Phase2.
func (w *world) phase2(p *plan, res *Result) error {
	if w.m.Log == nil {
		return nil
	}
	if p.opts.OpLog != nil {
		if err := w.m.Log.WriteJSONLines(p.opts.OpLog); err != nil {
			return &Failure{Code: ExitUsage, Kind: "IOError", Rank: -1, Msg: fmt.Sprintf("--oplog: %v", err), Err: err}
		}
	}
	if !p.opts.Verify {
		return nil
	}
	// The replay runs on the pre-run image itself (nothing needs it
	// afterwards) and is compared with the live memory: no copies.
	img := w.initial
	w.initial = nil
	match := true
	if msg := oplog.CheckCausality(w.m.Log.Records); msg != "" {
		match = false
		res.Phase2 = msg
	} else if err := oplog.Replay(&img, w.m.Log.Records); err != nil {
		match = false
		res.Phase2 = err.Error()
	} else if mm := oplog.Compare(img, w.m.LiveImage(), w.m.Log.Records); mm != nil {
		match = false
		res.Phase2 = mm.String()
	}
	res.Phase2Match = &match
	return nil
}

// install resolves the topology and installs the IPCQ group (init_process_group).
func (w *world) install(p *plan, tgt *target, loader *script.Loader, hook starlark.Callable) error {
	set := tgt.settings
	spec := mapSpec{file: tgt.file, hook: hook, params: p.params, sys: w.sys}
	spec.spec(p.topology, p.world, set)
	links, _, err := neighborTables(spec, loader.NewThread("init"))
	if err != nil {
		return stepLimit(&Failure{Code: ExitUsage, Kind: "InitError", Rank: -1, Msg: script.Format(err), Err: err})
	}
	icfg, err := ipcqConfig(set)
	if err != nil {
		return &Failure{Code: ExitUsage, Kind: "ConfigError", Rank: -1, Msg: err.Error(), Err: err}
	}
	if p.opts.Untimed {
		icfg.Overhead, icfg.Backpressure = 0, machine.Sleep
	}
	if w.g, err = w.m.Install(links, icfg); err != nil {
		return &Failure{Code: ExitUsage, Kind: "InitError", Rank: -1, Msg: err.Error(), Err: err}
	}
	w.g.Paranoid = p.opts.Check
	// Nothing takes time in the mock: a send stays in flight for the
	// hazard checks until its receiver takes it or the sender flushes.
	w.g.HoldSends = p.opts.Untimed
	if out := p.opts.CCLTrace; out != nil {
		w.g.OnSend = func(q *machine.QueuePair, meta machine.MsgMeta, at sim.Time) {
			fmt.Fprintf(out, "t=%v rank=%d op=send dir=%s nbytes=%d seq=%d peer=%d\n", at, q.Rank, q.Dir, meta.NBytes, meta.Seq, q.Peer)
		}
		w.g.OnRecv = func(q *machine.QueuePair, meta machine.MsgMeta, _ machine.Region, at sim.Time) {
			fmt.Fprintf(out, "t=%v rank=%d op=recv dir=%s nbytes=%d seq=%d peer=%d\n", at, q.Rank, q.Dir, meta.NBytes, meta.Seq, q.Peer)
		}
	}
	return nil
}

// run simulates to the end, converting a failed run into a Failure.
func (w *world) run(tgt *target) error {
	w.s.WaitWatchdog(sim.Time(tgt.settings.DeadlockTimeoutNs) * sim.Nanosecond)
	var failure error
	if err := w.s.Run(); err != nil {
		// Read the blocked processes' state before Close unwinds them.
		failure = simFailureNoted(err, tgt.file, w.procNote)
	} else if w.g != nil {
		if err := w.g.CheckQuiescent(); err != nil {
			failure = &Failure{Code: ExitRuntime, Kind: "InvariantViolation", Rank: -1, Msg: err.Error(), Err: err}
		}
	}
	if w.g != nil && w.dump != nil {
		fmt.Fprintf(w.dump, "# queue pair pointers at t=%v\n", w.s.Now())
		w.g.DumpPointers(w.dump)
	}
	w.s.Close()
	if w.trace != nil {
		// Written even when the run failed: the timeline up to the failure
		// is what explains it (blocked operations end when the run ended).
		if werr := w.writeTrace(); werr != nil && failure == nil {
			return &Failure{Code: ExitUsage, Kind: "IOError", Rank: -1, Msg: fmt.Sprintf("--trace: %v", werr), Err: werr}
		}
	}
	return w.writeFailedOplog(failure)
}

// spawn starts one process per rank running body; a body error stops the
// simulation. It returns each rank's finish time (filled as they end).
func (w *world) spawn(n int, loader *script.Loader, body func(r int, th *starlark.Thread, p *sim.Proc) error) []sim.Time {
	finish := make([]sim.Time, n)
	w.spent = make([][sim.MaxActivities]sim.Time, n)
	for r := 0; r < n; r++ {
		th := loader.NewThread(fmt.Sprintf("rank %d", r))
		proc := w.s.Spawn(fmt.Sprintf("rank %d", r), func(proc *sim.Proc) {
			err := body(r, th, proc)
			finish[r] = w.s.Now()
			w.spent[r] = proc.Spent
			if err != nil && !errors.Is(err, sim.ErrKilled) {
				w.s.Stop(&rankError{rank: r, err: err})
			}
		})
		proc.Data = th
	}
	return finish
}

// result fills the timing and bandwidth columns of a row.
func (w *world) result(p *plan, count int64, finish []sim.Time, stats []tl.Stats) *Result {
	// Like nccl-tests, the size of a row is the larger per-rank buffer
	// (allgather's recvbuf, reduce_scatter's sendbuf, alltoall's buffers):
	// algbw counts all the data a rank ends up with or started from.
	elems := max(p.coll.sendCount(count, p.world), p.coll.recvCount(count, p.world))
	redop := p.red.String()
	if !p.coll.Reduces {
		redop = "none" // as nccl-tests prints for collectives without a reduction
	}
	res := &Result{Count: elems, Bytes: elems * int64(p.dt.Size()), DType: p.dt.String(), RedOp: redop, InPlace: p.opts.InPlace, Events: w.s.Events()}
	var end sim.Time
	for r := range finish {
		end = max(end, finish[r])
		res.Ops.Send += stats[r].Send
		res.Ops.Recv += stats[r].Recv
		res.Ops.Load += stats[r].Load
		res.Ops.Store += stats[r].Store
		res.Ops.Math += stats[r].Math
	}
	res.SimTimeNs = end.Ns()
	res.Time = summarizeTime(w.spent, p.opts.Detail)
	if end > 0 {
		res.AlgBW = float64(res.Bytes) / end.Ns()
	}
	res.BusBW = res.AlgBW * p.coll.BusFactor(p.world)
	if w.g != nil {
		res.LinkBW = linkBandwidth(w.m, w.g)
	}
	if res.LinkBW > 0 {
		res.Eff = res.BusBW / res.LinkBW
	}
	if p.opts.Detail && end > 0 {
		res.Busiest = busiest(w.m, end, 8)
		res.Classes = resourceClasses(w.m, end)
		res.Interp = &InterpCounts{}
		for r := range stats {
			res.Interp.Steps += stats[r].Steps
			res.Interp.BuiltinCalls += stats[r].Calls
		}
		res.OpLog = opLogCost(w.m.Log, res.Ops.Send)
	}
	return res
}

// busiest lists the n most utilised resources (busy time / run time), ties
// broken by creation order so the list is deterministic.
func busiest(m *machine.Machine, end sim.Time, n int) []Usage {
	rs := append([]*machine.Resource(nil), m.Resources()...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].BusyTime > rs[j].BusyTime })
	var out []Usage
	for _, r := range rs {
		if len(out) == n || r.BusyTime == 0 {
			break
		}
		out = append(out, Usage{Resource: r.Name, Bytes: r.Bytes, Utilisation: float64(r.BusyTime) / float64(end)})
	}
	return out
}

// ClassUsage is the use of one kind of resource over a run.
type ClassUsage struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"` // resources of the kind that carried data
	Bytes int64  `json:"bytes"`
	// Busiest and Mean utilisation among those resources.
	Busiest float64 `json:"busiest"`
	Mean    float64 `json:"mean"`
}

// resourceClasses groups the used resources by kind, in kind order.
func resourceClasses(m *machine.Machine, end sim.Time) []ClassUsage {
	byKind := map[string]*ClassUsage{}
	for _, r := range m.Resources() {
		if r.BusyTime == 0 {
			continue
		}
		c := byKind[r.Kind]
		if c == nil {
			c = &ClassUsage{Kind: r.Kind}
			byKind[r.Kind] = c
		}
		u := float64(r.BusyTime) / float64(end)
		c.Count++
		c.Bytes += r.Bytes
		c.Busiest = max(c.Busiest, u)
		c.Mean += u
	}
	var out []ClassUsage
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		c := byKind[k]
		c.Mean /= float64(c.Count)
		out = append(out, *c)
	}
	return out
}

// runOnce simulates one size of the builtin collective bench.
func runOnce(p *plan, cfg *config.Config, tgt *target, loader *script.Loader, kernel, hook starlark.Callable, count int64) (*Result, error) {
	w, err := newWorld(p, cfg, tgt.settings)
	if err != nil {
		return nil, err
	}
	w.procNote = p.procNote
	defer w.close()
	if err := w.install(p, tgt, loader, hook); err != nil {
		return nil, err
	}
	var est MemoryEstimate
	if err := checkFits(p, w.m, count); err != nil {
		return nil, err
	}
	if buffersFit(p, w.m, count) {
		if est, err = p.checkMemory(count, ringsOf(w.g)); err != nil {
			return nil, err
		}
	}
	defer p.budget.acquire(est.Total())()
	b, err := newBench(p, w.m, count)
	if err != nil {
		return nil, err
	}
	stats := make([]tl.Stats, p.world)
	w.snapshot()
	b.keepInputs(w.initial)
	var rec *exportRecorder
	if p.opts.ExportMSCCL != nil {
		rec = newExportRecorder(p.world)
	}
	finish := w.spawn(p.world, loader, func(r int, th *starlark.Thread, proc *sim.Proc) error {
		kt := &tl.Kernel{M: w.m, G: w.g, EP: w.g.EPs[r], PE: w.m.Ranks[r], Rank: r, World: p.world, RedOp: p.red, Stats: &stats[r], Proc: proc,
			NewThread: func(name string, t *tl.Kernel) *starlark.Thread {
				th := loader.NewThread(name)
				th.SetLocal(kernelKey, t)
				return th
			},
			Fail: func(err error) { w.s.Stop(&rankError{rank: r, err: err}) }}
		if rec != nil {
			kt.Rec = rec
		}
		k := tl.New(kt)
		th.SetLocal(kernelKey, k)
		args := starlark.Tuple{b.send[r], b.recv[r], starlark.MakeInt(r), starlark.MakeInt(p.world)}
		kw := append(append([]starlark.Tuple(nil), p.params...), starlark.Tuple{starlark.String("tl"), k})
		_, err := starlark.Call(th, kernel, args, kw)
		stats[r].Steps += int64(th.ExecutionSteps())
		if err == nil {
			err = k.Finish()
		} else {
			k.Release()
		}
		return err
	})
	if err := w.run(tgt); err != nil {
		return nil, err
	}
	if afterPhase1 != nil {
		afterPhase1(w.m)
	}
	res := w.result(p, count, finish, stats)
	if p.opts.Detail {
		res.HostMemory = &est
	}
	if p.opts.Verify && !p.opts.TimingOnly {
		b.verify(res)
	}
	if p.opts.KeepOutputs && !p.opts.TimingOnly {
		for _, r := range b.recv {
			res.Outputs = append(res.Outputs, append([]byte(nil), r.Reg.Bytes()...))
		}
	}
	if err := w.phase2(p, res); err != nil {
		return nil, err
	}
	res.Verified = res.Verified && (res.Phase2Match == nil || *res.Phase2Match)
	if rec != nil {
		a, err := rec.build(p, b, w.g, count)
		if err == nil {
			err = writeExport(a, p.opts.ExportMSCCL)
		}
		if err != nil {
			return nil, &Failure{Code: ExitUsage, Kind: "ExportError", Rank: -1, Msg: err.Error(), Err: err}
		}
	}
	return res, nil
}

// afterPhase1, when set (tests only), runs on the machine after the kernels
// and before the checks, e.g. to change memory behind the op_log's back.
var afterPhase1 func(m *machine.Machine)

// rankError is a failure raised while rank's kernel ran.
type rankError struct {
	rank int
	err  error
}

func (e *rankError) Error() string { return fmt.Sprintf("rank %d: %v", e.rank, e.err) }
func (e *rankError) Unwrap() error { return e.err }
