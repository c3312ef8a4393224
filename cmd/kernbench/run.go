package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"kernbench/cmd/kernbench/internal/flagcompat"
	"maps"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kernbench"
	"kernbench/cmd/kernbench/internal/compare"
	"kernbench/cmd/kernbench/internal/hugepages"
	"kernbench/cmd/kernbench/internal/listflag"
	"kernbench/cmd/kernbench/internal/output"
	"kernbench/cmd/kernbench/internal/render"
	"kernbench/cmd/kernbench/internal/shards"
	"kernbench/engine/chakra"
	"kernbench/engine/config"
	"kernbench/engine/dtype"
	"kernbench/engine/spelling"
	"kernbench/engine/trace"
	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
)

type runOptions struct {
	ccl.Options
	count                  int64
	bench                  string
	sweep                  string
	minBytes               string
	maxBytes               string
	factor                 float64
	oplog                  string
	dot                    string
	dumpPtrs               bool
	trace                  string
	cpuprofile             string
	export                 string
	exportChakra           string
	traceRanks, traceKinds string
	bytes                  string
	json                   bool
	jsonl                  bool
	shard                  string
	shards                 int
	quiet                  bool
	verbose                bool
	maxSteps               uint64
	timeout                time.Duration
	maxMemory              string
	vary                   []string
	csv                    string
	plot                   string
	// outputs are the output flags given, resolved (output.go);
	// outStdout is the command's stdout, where "-" sends an output.
	outputs   map[string]*output.Dest
	outStdout io.Writer
}

func newRunCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	return newRunCmdWith(env, stdout, stderr, runRun)
}

// runFunc runs a `kernbench run` whose flags are parsed into o: arg is the
// target ("" for a comparison, whose targets are compare).
type runFunc func(cmd *cobra.Command, o *runOptions, arg string, stdout, stderr io.Writer, compare ...string) error

// newRunCmdWith is the run command with run as what it runs: tests give
// their own to see the options a command line makes, without simulating.
func newRunCmdWith(env script.Env, stdout, stderr io.Writer, run runFunc) *cobra.Command {
	o := &runOptions{}
	o.Env = env
	cmd := &cobra.Command{
		Use:   "run [FILE.star | FILE.xml | NAME]... | --bench BENCH [ALGORITHM]",
		Short: "Run an algorithm (with its collective's builtin bench) and report time, bandwidth and correctness",
		Long: `Run an algorithm file or an algorithm named in ccl.yaml (without one:
defaults.algorithm of ccl.yaml) on the simulated machine. The builtin
bench of its collective allocates per-rank buffers, launches kernel() on
every rank, checks the result against the collective's definition and
prints one nccl-tests-style row per size. An .xml file is an
MSCCL schedule (docs/msccl.md), run through the same bench and checks.
The name auto runs each size with the algorithm ccl.yaml's select:
records for it (kernbench tune writes it; docs/tune.md).

Several algorithms (run A B C) or --vary key=v1,v2 (repeatable: every
combination) run on the same bench and sizes and print one table with a
column naming each and one giving its world_size (--jsonl rows carry both);
--csv and --plot write the figures for a spreadsheet or as a
busbw-against-size chart. A run of a comparison that fails is a
row naming its error (the sizes before it keep theirs; --json and --jsonl
give it its "error") and the others still run. A --set or --vary value
that cannot take effect (the algorithm's ccl.yaml entry, a flag or a later
item overrides it) is refused before anything runs.

Output files (--trace, --oplog, --cpuprofile, --dot, --csv, --plot,
--export-msccl): - is stdout (the table then goes to stderr); a regular
file is replaced whole, through a temporary file in its folder, and
left as it was by a run that fails before writing it (a misspelt --set,
a file that does not load); a link stays and the file it names gets the
output; a named pipe or character
device is written into, never replaced; an empty name is refused, as
an empty value of any flag is, and so is a file the command reads (its
script, bench, --config or ./ccl.yaml). The rows are printed as each size
finishes, with output files too; an interrupt keeps the rows printed,
removes the output files under way and exits 130 (143 for SIGTERM).

Host memory is bounded by --max-memory (default: 80% of the machine's
memory, MemTotal, or of the cgroup limit when lower; never what other
processes leave free, so one command is admitted the same way each time): a run whose estimated
peak (simulated memory, the pre-run image of a verified run, IPCQ rings,
op_log, phase 2, per-rank and kernel state and the collector's headroom;
calibrated on the shipped algorithms, not an upper bound; over half the
limit, counted by a --timing-only run of the same size first) is over it
is refused before it starts, naming what would fit (--timing-only,
--verify-data=false, a smaller --bytes); a sweep of several sizes runs
those that fit and prints a "refused:" row for each other one (why, and
whether --timing-only reaches it; --json's and --jsonl's row has
"refused", --csv's last column), then exits 2; so does a sweep whose
larger sizes' buffers do not fit the simulated memory. One that passes it while
simulating stops with "out of memory at t=…" (exit 3). -v prints the
estimate and the op_log's cost per record and per message.

Exit status: 0 ok, 1 wrong result, 2 usage/config/script load error
(including a run, or sizes of a sweep, estimated over --max-memory or
whose buffers do not fit the simulated memory), 3 deadlock or watchdog
or step limit or --max-memory passed while simulating, or a rank making
a million calls (more with large buffers) without simulated time
advancing (NoTimeProgress: a loop that polls or spins on calls that
never wait; also 2^25 events at one instant), 4 error raised while
running. A comparison exits with the worst status of its runs, the highest
of these (its last line names that failure's kind).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.bench != "" {
				return cobra.MaximumNArgs(1)(cmd, args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if msg := flagcompat.CheckValue(o.Check, args); msg != "" {
				return usageErr(msg)
			}
			arg := ""
			if o.bench != "" {
				arg = target.BenchFile(o.bench)
				if len(args) == 1 {
					o.Algorithm = args[0]
				}
			} else if len(args) > 1 || len(o.vary) > 0 {
				return run(cmd, o, "", stdout, stderr, args...)
			} else if len(args) == 1 {
				arg = args[0]
			} else {
				// No argument: the configuration's defaults.algorithm.
				cfg, _, err := target.LoadConfig(o.Env, o.ConfigPath, o.Sets, kernbench.Files)
				if err != nil {
					return err // a ConfigError, as when an algorithm is named
				}
				arg = cfg.Defaults.Algorithm
			}
			return run(cmd, o, arg, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.bench, "bench", "", "run benches/NAME.star, or the bench file at a path (host code), with defaults.algorithm, or with the algorithm given as argument")
	addConfigFlags(f, &o.Options)
	addLoadPath(f, &o.LoadPath)
	f.Int64Var(&o.count, "count", 0, "elements of each buffer of allreduce, broadcast and reduce, of allgather's sendbuf, reduce_scatter's recvbuf and an alltoall chunk (the count column is world_size times it for those three)")
	f.StringVar(&o.bytes, "bytes", "", "count in bytes, e.g. 64K, 4M (default 1M; K, KB and KiB all mean 1024, M 1024², G 1024³); the size column is world_size times it for allgather, reduce_scatter and alltoall")
	f.StringVar(&o.sweep, "sweep", "", "sweep of --bytes MIN:MAX[:FACTOR], e.g. 1K:4M (factor 2), one row per size; MIN is whole elements and a FACTOR that is not an integer has its sizes rounded down to whole elements")
	f.StringVarP(&o.minBytes, "minbytes", "b", "", "smallest --bytes of a sweep, with nccl-tests' suffixes (8, 64K, 128M); unlike nccl-tests' -b, the size column is world_size times it for allgather, reduce_scatter and alltoall (nccl-tests' other flags: docs/report.md)")
	f.StringVarP(&o.maxBytes, "maxbytes", "e", "", "largest --bytes of a sweep (see -b); -b or -e alone runs that one size")
	f.Float64VarP(&o.factor, "stepfactor", "f", 2, "nccl-tests style: size multiplier between sweep rows")
	f.StringVar(&o.DType, "dtype", "f32", "f32 | f16 | bf16 | f64 | i32 | i64 | u8")
	f.StringVar(&o.RedOp, "redop", "sum", "sum | prod | max | min | avg: the reduction of allreduce, reduce_scatter and reduce (refused by the collectives without one)")
	f.BoolVar(&o.InPlace, "in-place", false, "use one buffer for send and recv (NCCL in-place)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the deterministic input data")
	f.StringVar(&o.DataSpace, "data-space", "hbm", "where the bench puts sendbuf/recvbuf: tcm | sram | hbm")
	f.IntVar(&o.Root, "root", 0, "root rank of broadcast and reduce (0 by default), passed to kernel() as the keyword root; refused for a collective without a root")
	f.BoolVar(&o.Verify, "verify-data", true, "check results against the reference (=false skips; --timing-only checks nothing and refuses =true)")
	f.BoolVar(&o.TimingOnly, "timing-only", false, "move and store no bytes: the same simulated time, events and op counts, far less memory; no reference check or phase 2 (#wrong N/A), and a kernel that reads values fails")
	f.StringVar(&o.export, "export-msccl", "", "write the run's schedule as MSCCL XML to FILE (one size; see docs/msccl.md)")
	f.StringVar(&o.exportChakra, "export-chakra", "", "write the run's schedule as Chakra execution traces for ASTRA-sim into the new folder DIR, with its configuration and a README (one size; see docs/astra-sim.md)")
	f.StringVar(&o.cpuprofile, "cpuprofile", "", "write a Go CPU profile of the run to FILE (go tool pprof FILE; for work on kernbench's own speed)")
	f.StringVar(&o.trace, "trace", "", "write the timeline as Chrome/Perfetto trace JSON to FILE (ui.perfetto.dev); a sweep traces its last size")
	f.StringVar(&o.traceRanks, "trace-ranks", "", "with --trace, keep only these ranks' events (like 0,3,8-15; the links stay; ranks below 2^20)")
	f.StringVar(&o.traceKinds, "trace-kinds", "", "with --trace, keep only these kinds of events: "+strings.Join(trace.Kinds(), ", ")+" (comma-separated)")
	f.BoolVar(&o.Check, "check", false, "re-verify every queue pair's pointer invariants (I2) after each delivery and credit (slow; the cheap invariant checks are always on)")
	f.BoolVar(&o.dumpPtrs, "dump-pointers", false, "print every queue pair's pointers (my_head, my_tail, peer_head_cache, peer_tail_cache) on stderr at the end of each run")
	f.StringVar(&o.dot, "dot", "", "on deadlock, write the wait-for graph as Graphviz DOT to FILE")
	f.StringVar(&o.oplog, "oplog", "", "write the op_log (every data operation) as JSON lines to FILE; a failed run writes the operations up to the failure")
	f.BoolVar(&o.json, "json", false, "print one JSON document instead of the table")
	f.BoolVar(&o.jsonl, "jsonl", false, "print JSON lines instead of the table: one result object per size as it finishes (as in --json's results), then one line with the report's other fields (or its error)")
	f.Uint64Var(&o.maxSteps, "max-steps", 0, "Starlark step limit per thread: each rank's kernel and each tl.spawn counts its own steps, a spawned thread from what its spawner had left (0 = default 10^8)")
	f.BoolVar(&o.Strict, "strict", false, "treat lost work as an error (exit 4): an L3 main that returns with messages still queued or regions never freed (a warning otherwise)")
	f.StringVar(&o.maxMemory, "max-memory", "", "host memory a run may use, e.g. 4G (default: 80% of the machine's memory, cgroup limit included, at most half the address space a ulimit -v leaves); a run estimated over it is refused (exit 2, naming what fits; a sweep runs the sizes that fit and prints a refused row for each other one, exit 2), one that passes it while simulating stops (exit 3)")
	f.DurationVar(&o.timeout, "timeout", 0, "stop the run's Starlark code after this wall-clock time, exit 3 (like 30s or 10m; 0 = none): ends what the step limit cannot, such as a loop on ever larger integers")
	f.Uint64Var(&o.JitterSeed, "jitter-seed", 0, "perturb the order of same-time events reproducibly (0 = off)")
	f.IntVarP(&o.Jobs, "jobs", "j", 1, "simulate up to N sizes of a sweep at once (output identical to -j 1)")
	addThreads(f, &o.Threads)
	f.StringVar(&o.shard, "shard", "", "run only shard I/N of the sweep: every N-th size starting at the I-th (0-based); join the shards' --json reports with kernbench merge (default: from SLURM_ARRAY_TASK_ID/COUNT, or JOB_COMPLETION_INDEX with --shards)")
	f.IntVar(&o.shards, "shards", 0, "number of shards (>= 1) when the shard index comes from JOB_COMPLETION_INDEX (a Kubernetes Indexed Job)")
	f.StringArrayVar(&o.vary, "vary", nil, "run once per value of a ccl.yaml key: key.path=v1,v2,… (a list value such as [2,4] is one value; repeatable: every combination), in one table")
	f.StringVar(&o.csv, "csv", "", "also write the results as CSV to FILE (one line per algorithm and size)")
	f.StringVar(&o.plot, "plot", "", "also draw busbw against size (one line per algorithm) as SVG to FILE")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the table")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "also print, per size: the busiest links and resources by kind, Starlark steps and tl calls, the host-memory estimate, the op_log cost and the time split; on an error, the Go backtrace")
	return cmd
}

// defaultMaxSteps bounds a runaway kernel per thread: 10^8 Starlark steps is
// ~100x what a shipped algorithm needs at 64 ranks x 16 MiB and stops a
// spinning script within a few seconds.
const defaultMaxSteps = 100_000_000

// runRun runs arg, or with compare set (several algorithms or --vary)
// every variant of those targets (none: defaults.algorithm), in steps:
// resolve the options (complete, the shard, the trace's filters, the
// output files), simulate, render the report or the failure.
func runRun(cmd *cobra.Command, o *runOptions, arg string, stdout, stderr io.Writer, compare ...string) error {
	if err := o.complete(cmd, stderr); err != nil {
		return usageErr(err.Error())
	}
	o.Watchdog = script.NewWatchdog(o.timeout, "--timeout "+o.timeout.String())
	defer o.Watchdog.Stop()
	// A sweep runs the sizes that fit --max-memory and the simulated
	// memory and gives each other one a refused row; a run of one size is
	// refused whole. Decided on
	// the whole sweep: a shard of it may hold one size.
	o.RefusedAsRows = len(o.Sizes) > 1 || len(o.Counts) > 1
	shardInfo, err := o.resolveShard(cmd, compare, stderr)
	if err != nil {
		return usageErr(err.Error())
	}
	if shardInfo != nil && len(o.Sizes) == 0 && len(o.Counts) == 0 {
		fmt.Fprintf(stderr, "kernbench: shard %d/%d has no sizes of this sweep; nothing to run\n", shardInfo.Index, shardInfo.Count)
		if o.json {
			render.JSON(stdout, &report.Report{Results: []report.Result{}, Shard: shardInfo})
		}
		return nil
	}
	if err := o.resolveTraceFilters(); err != nil {
		return usageErr(err.Error())
	}
	// The table goes to stdout, or to stderr when an output has stdout.
	table, err := o.resolveOutputs(arg, compare, stdout, stderr)
	if err != nil {
		return usageErr(err.Error())
	}
	if err := output.CheckChakraDir(o.Env, o.exportChakra, compare != nil || len(o.vary) > 0); err != nil && cmd.Flags().Changed("export-chakra") {
		return usageErr(err.Error())
	}
	if arg == config.AutoAlgorithm && o.bench == "" || slices.Contains(compare, config.AutoAlgorithm) {
		// Per size, the algorithm select: records (tune.go).
		return runAuto(o, compare, shardInfo != nil, table, stderr)
	}
	if compare != nil || len(o.vary) > 0 {
		return o.runComparison(arg, compare, table, stderr)
	}
	run, err := o.simulate(arg, table, stderr)
	switch {
	case err != nil && !run.started:
		return err // an output file that could not be created
	case err != nil:
		if run.rep != nil {
			run.rep.WallS = run.wallS // as a run that succeeds reports it
		}
		return o.renderFailure(arg, run.rep, err, shardInfo, table, stderr)
	}
	return o.render(run, shardInfo, table, stderr)
}

// resolveShard reads the shard to run (--shard, --shards or the
// environment) and keeps of o's sweep the sizes it runs; nil when the
// run is not sharded. The shard's Sweep is the whole sweep's sizes (or
// counts): o has none left when the shard holds none of them.
func (o *runOptions) resolveShard(cmd *cobra.Command, compare []string, stderr io.Writer) (*report.Shard, error) {
	shard, sharded, err := shards.FromEnv(o.Env.Var, o.shards)
	if o.shard != "" {
		shard, err = shards.Parse(o.shard)
		sharded = true
	}
	if err != nil {
		return nil, err
	}
	if sharded && o.shard == "" && o.shards == 0 {
		// Slurm's variables shard a run that never asked for it (an
		// array job may use its tasks for something else): say so, and
		// how to run everything.
		low := ""
		if m := o.Env.Var("SLURM_ARRAY_TASK_MIN"); m != "" && m != "0" {
			low = fmt.Sprintf(" (minus SLURM_ARRAY_TASK_MIN=%s)", m)
		}
		if st := o.Env.Var("SLURM_ARRAY_TASK_STEP"); st != "" && st != "1" {
			low += fmt.Sprintf(" (divided by SLURM_ARRAY_TASK_STEP=%s)", st)
		}
		fmt.Fprintf(stderr, "kernbench: running shard %d/%d of the sweep, from SLURM_ARRAY_TASK_ID=%s%s and SLURM_ARRAY_TASK_COUNT=%s; --shard 0/1 runs the whole sweep\n",
			shard.Index, shard.Count, o.Env.Var("SLURM_ARRAY_TASK_ID"), low, o.Env.Var("SLURM_ARRAY_TASK_COUNT"))
	}
	if idx := o.Env.Var("JOB_COMPLETION_INDEX"); idx != "" && !sharded && o.shards == 0 {
		fmt.Fprintf(stderr, "kernbench: warning: JOB_COMPLETION_INDEX is %s but --shards is not given: this runs the whole sweep (--shards N runs shard %s of N)\n", idx, idx)
	}
	if !sharded && o.shards > 0 {
		return nil, fmt.Errorf("--shards %d takes the shard index from JOB_COMPLETION_INDEX, which is not set (it is inside a Kubernetes Indexed Job); elsewhere use --shard I/%d", o.shards, o.shards)
	}
	if sharded && (compare != nil || len(o.vary) > 0) {
		// Its reports were written, then refused by merge, which joins
		// the shards of one algorithm's sweep.
		from := "--shard"
		if o.shard == "" {
			from = "the shard from the environment (--shard 0/1 runs the whole sweep)"
		}
		return nil, fmt.Errorf("%s: a comparison (several algorithms or --vary) is not sharded: kernbench merge joins the shards of one algorithm's sweep; shard each algorithm's run on its own (kernbench run ALGORITHM --shard I/N)", from)
	}
	if !sharded {
		return nil, nil
	}
	if len(o.Counts) == 0 && len(o.Sizes) == 0 {
		o.Sizes = []int64{1 << 20}
	}
	sweep := &o.Sizes
	if len(o.Counts) > 0 {
		sweep = &o.Counts
	}
	info := &report.Shard{Index: shard.Index, Count: shard.Count, Sweep: *sweep,
		Settings: rowSettings(cmd), Config: configDigest(o)}
	*sweep = shard.Pick(*sweep)
	return info, nil
}

// resolveTraceFilters reads --trace-ranks and --trace-kinds into o.
func (o *runOptions) resolveTraceFilters() error {
	if (o.traceRanks != "" || o.traceKinds != "") && o.trace == "" {
		return errors.New("--trace-ranks and --trace-kinds limit a trace: give --trace FILE too")
	}
	if o.traceRanks != "" {
		ranks, err := listflag.Ranks(o.traceRanks)
		if err != nil {
			return err
		}
		o.TraceRanks = ranks
	}
	if o.traceKinds != "" {
		for _, k := range strings.Split(o.traceKinds, ",") {
			k = strings.TrimSpace(k)
			if !slices.Contains(trace.Kinds(), k) {
				return fmt.Errorf("--trace-kinds: unknown kind %q (want %s)%s", k, strings.Join(trace.Kinds(), ", "), spelling.Hint(k, trace.Kinds()))
			}
			o.TraceKinds = append(o.TraceKinds, k)
		}
	}
	return nil
}

// resolveOutputs resolves the output flags into o.outputs (refusing one
// over a file the run reads, or on stdout beside --json) and returns
// where the table goes: stdout, or stderr when an output has stdout.
func (o *runOptions) resolveOutputs(arg string, compare []string, stdout, stderr io.Writer) (io.Writer, error) {
	dests, err := output.ResolveAll(o.Env, o.outputPaths())
	if err != nil {
		return nil, err
	}
	inputs := append([]string{arg, o.bench, o.ConfigPath}, compare...)
	if o.ConfigPath == "" {
		inputs = append(inputs, "ccl.yaml") // read when present
	}
	if err := output.OverInput(o.Env, dests, inputs); err != nil {
		return nil, err
	}
	o.outputs, o.outStdout = dests, stdout
	table := stdout
	for _, flag := range slices.Sorted(maps.Keys(dests)) {
		if !dests[flag].Stdout() {
			continue
		}
		if o.json || o.jsonl {
			return nil, fmt.Errorf("%s - writes to stdout, where --json and --jsonl print the report; give %s a file", flag, flag)
		}
		// The output has stdout to itself: the table and the summary
		// go to stderr.
		table = stderr
	}
	return table, nil
}

// runComparison runs the variants of targets (or of arg, a bench with
// --vary; none: each variant's defaults.algorithm) in one table.
func (o *runOptions) runComparison(arg string, targets []string, stdout, stderr io.Writer) error {
	if o.export != "" {
		return usageErr("--export-msccl writes the schedule of one algorithm at one size; drop the other algorithms and --vary")
	}
	axes, err := compare.ParseVary(o.vary, o.Sets)
	if err != nil {
		return usageErr(err.Error())
	}
	for i, t := range targets {
		if slices.Contains(targets[:i], t) {
			// Runs are deterministic: the second would print the first's
			// rows again, under the same label.
			return usageErr(fmt.Sprintf("%s is named twice: a comparison runs each algorithm once (--vary KEY=A,B runs one under several settings)", t))
		}
	}
	defaultAlgorithm := ""
	switch {
	case arg != "":
		// --bench BENCH with --vary: the bench, with its algorithm.
		targets = []string{arg}
	case len(targets) == 0:
		cfg, _, err := target.LoadConfig(o.Env, o.ConfigPath, o.Sets, kernbench.Files)
		if err != nil {
			return err // a ConfigError, as when an algorithm is named
		}
		// No algorithm named: each variant runs the defaults.algorithm
		// of its configuration, which --vary defaults.algorithm may set.
		targets, defaultAlgorithm = []string{""}, cfg.Defaults.Algorithm
	}
	return runCompare(o, compare.Expand(targets, axes, defaultAlgorithm), stdout, stderr)
}

// simulated is what simulate leaves for the report: whether ccl.Run
// started, the report (nil when the run failed before simulating), the
// rows the table printed as they finished, the --export-msccl schedule
// and the wall time.
type simulated struct {
	started  bool
	rep      *report.Report
	rows     int
	exported bytes.Buffer
	chakra   *chakra.Trace // the --export-chakra schedule
	wallS    float64
}

// simulate runs arg with o, its rows printed on table as each size
// finishes and its output files (--oplog, --trace, --cpuprofile)
// written and closed; it fails with the run's error, or an output's.
func (o *runOptions) simulate(arg string, table, stderr io.Writer) (*simulated, error) {
	run := &simulated{}
	dests := o.outputs
	// The output files are written while the rows stream (output.Set).
	var outputs output.Set
	for _, out := range []struct {
		flag string
		dst  *io.Writer
	}{{"--oplog", &o.OpLog}, {"--trace", &o.Trace}} {
		d := dests[out.flag]
		if d == nil {
			continue
		}
		of, err := output.Create(o.Env, d, o.outStdout)
		if err != nil {
			return run, usageErr(out.flag + ": " + err.Error())
		}
		outputs.Hold(of)
		*out.dst = of.Writer()
	}
	closeOutputs := func() *report.Failure { return outputs.Close(stderr) }
	// On the ways out below that report a failure of their own, an output
	// file's failure is one more diagnostic.
	closeAfterFailure := func() {
		if f := closeOutputs(); f != nil {
			fmt.Fprintf(stderr, "kernbench: %s\n", f.Msg)
		}
	}
	defer closeAfterFailure()
	// Progress only on an interactive terminal: never in pipes, logs or CI.
	if f, ok := stderr.(*os.File); ok && !o.quiet && !o.json {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			o.Progress = func(i, n int, count int64) {
				fmt.Fprintf(stderr, "\r\x1b[K[%d/%d] simulating count %d…", i+1, n, count)
			}
		}
	}
	// The table's rows are printed as each size finishes.
	switch {
	case o.jsonl:
		o.OnResult = func(r *report.Result) {
			run.rows++
			render.JSONLine(table, r)
		}
	case !o.json:
		o.OnResult = func(r *report.Result) {
			if run.rows == 0 {
				fmt.Fprintln(table, render.Header())
			}
			run.rows++
			fmt.Fprintln(table, render.Row(r))
		}
	}
	if o.export != "" {
		o.ExportMSCCL = &run.exported
	}
	if o.exportChakra != "" {
		o.ExportChakra = func(t *chakra.Trace) { run.chakra = t }
	}
	if o.TimingOnly {
		// No data: the heap is the ranks' state (internal/hugepages).
		defer hugepages.Advise(o.WorldSize)()
	}
	stopProfile := func() {}
	if o.cpuprofile != "" {
		of, err := output.Create(o.Env, dests["--cpuprofile"], o.outStdout)
		if err == nil {
			err = pprof.StartCPUProfile(of.Writer())
		}
		if err != nil {
			closeAfterFailure()
			return run, usageErr("--cpuprofile: " + err.Error())
		}
		outputs.Hold(of)
		stopProfile = pprof.StopCPUProfile
	}
	run.started = true
	var rep *report.Report
	var err error
	run.wallS = wallSeconds(func() {
		rep, err = ccl.Run(arg, o.Options)
		stopProfile()
		if o.Progress != nil {
			fmt.Fprint(stderr, "\r\x1b[K")
		}
	})
	run.rep = rep
	if err != nil && asFailure(err).ErrorKind().Status != errkind.ExitUsage {
		// It failed while simulating (a failure of exit status 2 stops a
		// run before it simulates, or is an output's): an --oplog of no
		// records, of a run that deadlocked before any data operation, is
		// its op_log. (A run that succeeded and wrote nothing, a sweep
		// whose last size, the one traced, was refused, writes no file.)
		outputs.KeepEmpty()
	}
	// A run whose output file could not be written failed, also when its
	// simulation succeeded.
	if f := closeOutputs(); f != nil && err == nil {
		err = f
	} else if f != nil {
		fmt.Fprintf(stderr, "kernbench: %s\n", f.Msg)
	}
	return run, err
}

// renderFailure reports a run that failed with err: --csv and --plot of
// the sizes before the failing one, its report with the error (--json,
// --jsonl; rep is nil when it failed before simulating), the wait-for
// graph of a deadlock (--dot), and the failure, named with its position
// in the sweep, for mainIn to print.
func (o *runOptions) renderFailure(arg string, rep *report.Report, err error, shardInfo *report.Shard, stdout, stderr io.Writer) error {
	f := asFailure(err)
	at := sweepPosition(o, rep)
	if rep != nil && len(rep.Results) > 0 {
		// The sizes before the failing one, as the table and --json give
		// them and a comparison's --csv and --plot do; the failed size
		// has no line, as it has no row.
		if werr := writeExtras(o, []compare.Labeled{{Label: rep.Algorithm, Rep: rep}}); werr != nil {
			fmt.Fprintf(stderr, "kernbench: %s\n", asFailure(werr).Msg)
		}
	}
	if o.json || o.jsonl {
		if rep == nil {
			rep = &report.Report{File: arg}
		}
		rep.Error = f.Out()
		// The size of the sweep it failed at, as stderr says it.
		rep.Error.At = strings.TrimSuffix(at, ": ")
		rep.Shard = shardInfo
		if o.jsonl {
			rep.Results = nil
			render.JSONLine(stdout, rep)
		} else {
			render.JSON(stdout, rep)
		}
	}
	if o.dot != "" && len(f.WaitFor) > 0 {
		var dot bytes.Buffer
		_ = f.WriteDOT(&dot)
		if derr := output.Write(o.Env, o.outputs["--dot"], o.outStdout, dot.Bytes()); derr != nil {
			fmt.Fprintf(stderr, "kernbench: %s\n", derr.Msg)
		}
	}
	return atPosition(at, f)
}

// render reports a run that simulated: the files written after it
// (--export-msccl, --csv, --plot), its report (the table's last rows
// and summary, or --json's document, or --jsonl's last lines) and the
// verdict of its results (a wrong result or a refused size fails it).
func (o *runOptions) render(run *simulated, shardInfo *report.Shard, stdout, stderr io.Writer) error {
	rep := run.rep
	rep.WallS = run.wallS
	rep.Shard = shardInfo
	if shardInfo != nil {
		shardInfo.Rows = report.RowsDigest(rep.Results)
	}
	if n := len(rep.Results); o.trace != "" && n > 0 && rep.Results[n-1].Refused != nil {
		// A sweep traces its last size; refused, it left the trace empty
		// (no file is written), which would otherwise pass unremarked.
		fmt.Fprintf(stderr, "kernbench: --trace: no trace written: a sweep traces its last size, and %d was refused over --max-memory; trace one size that runs (--bytes)\n", rep.Results[n-1].Bytes)
	}
	if o.export != "" {
		if f := output.Write(o.Env, o.outputs["--export-msccl"], o.outStdout, run.exported.Bytes()); f != nil {
			return f
		}
	}
	if o.exportChakra != "" {
		if f := output.WriteChakraDir(o.Env, o.exportChakra, run.chakra); f != nil {
			return f
		}
	}
	if err := writeExtras(o, []compare.Labeled{{Label: rep.Algorithm, Rep: rep}}); err != nil {
		return asFailure(err)
	}
	switch {
	case o.json:
		render.JSON(stdout, rep)
	case o.jsonl:
		for i := run.rows; i < len(rep.Results); i++ {
			o.OnResult(&rep.Results[i])
		}
		summary := *rep
		summary.Results = nil
		render.JSONLine(stdout, &summary)
	default:
		// Benches that build their report in one piece (L3) print here.
		for i := run.rows; i < len(rep.Results); i++ {
			o.OnResult(&rep.Results[i])
		}
		render.Summary(stdout, rep, o.quiet, o.verbose)
	}
	return checkResults([]compare.Labeled{{Rep: rep}}, stderr)
}

// complete checks the flags of a run and fills the options they set
// (sizes, limits, what the run reports): every mistake in them is a usage
// error, found before anything runs.
func (o *runOptions) complete(cmd *cobra.Command, stderr io.Writer) error {
	o.Embedded = kernbench.Files
	o.Detail = o.verbose
	if o.dumpPtrs {
		o.DumpPointers = stderr
	}
	if v := o.Env.Var("KERNBENCH_CCL_TRACE"); v != "" && v != "0" {
		o.CCLTrace = stderr
	}
	// The memory estimate of every run counted by its probe, not only of
	// one near --max-memory (the tests that hold it against peaks).
	o.ProbeMemory = o.Env.Var("KERNBENCH_MEMORY_PROBE") == "always"
	o.Stderr = stderr
	o.MaxSteps = o.maxSteps
	if o.MaxSteps == 0 {
		o.MaxSteps = defaultMaxSteps
	}
	if err := emptyOutput(cmd.Flags(), o.outputPaths()); err != nil {
		return usageError(err.Error())
	}
	if err := emptyValue(cmd.Flags()); err != nil {
		return usageError(err.Error())
	}
	if err := checkLoadPath(o.Env, o.LoadPath); err != nil {
		return usageError(err.Error())
	}
	if o.timeout < 0 {
		return usageError(fmt.Sprintf("--timeout must be >= 0 (got %v)", o.timeout))
	}
	o.RootGiven = cmd.Flags().Changed("root")
	o.RedOpGiven = cmd.Flags().Changed("redop")
	for _, name := range benchFlags {
		if cmd.Flags().Changed(name) {
			o.BenchFlags = append(o.BenchFlags, "--"+name)
		}
	}
	if o.bench != "" && o.Algorithm != "" {
		// --bench NAME ALGORITHM: a host bench runs it, an L3 bench none.
		o.BenchFlags = append(o.BenchFlags, "the algorithm argument "+o.Algorithm)
	}
	if o.Jobs < 1 {
		return usageError(fmt.Sprintf("-j/--jobs must be >= 1 (got %d)", o.Jobs))
	}
	if cmd.Flags().Changed("threads") && o.Threads < 1 {
		return usageError(fmt.Sprintf("--threads must be >= 1 (got %d)", o.Threads))
	}
	if o.maxMemory != "" {
		n, err := config.ParseSize(o.maxMemory)
		if err != nil || n <= 0 {
			if err == nil {
				err = fmt.Errorf("must be > 0 (got %s)", o.maxMemory)
			}
			return usageError("--max-memory: " + err.Error())
		}
		o.MaxMemory = n
	} else {
		o.MaxMemory = hostmem.DefaultMaxMemory()
		o.MaxMemoryIsDefault = true
	}
	if o.TimingOnly && o.Verify && cmd.Flags().Changed("verify-data") {
		return usageError("--verify-data=true cannot take effect: --timing-only moves no bytes to check; give one of them")
	}
	if o.TimingOnly && cmd.Flags().Changed("seed") {
		// The seed picks the input data, which a timing-only run does not
		// make (the times do not depend on it).
		return usageError("--seed cannot take effect: --timing-only makes no input data for it to pick; give one of them")
	}
	if cmd.Flags().Changed("shards") && o.shards < 1 {
		return usageError(fmt.Sprintf("--shards must be >= 1 (got %d)", o.shards))
	}
	if o.TimingOnly && o.oplog != "" {
		return usageError("--oplog records data, which --timing-only does not move")
	}
	if o.json && o.jsonl {
		return usageError("--json and --jsonl are mutually exclusive")
	}
	sizeFlags := 0
	for _, set := range []bool{cmd.Flags().Changed("count"), o.bytes != "", o.sweep != "", o.minBytes != "" || o.maxBytes != ""} {
		if set {
			sizeFlags++
		}
	}
	if sizeFlags > 1 {
		return usageError("--count, --bytes, --sweep and -b/-e are mutually exclusive")
	}
	// Anywhere but beside -b/-e, -f would be ignored without a word.
	if cmd.Flags().Changed("stepfactor") && o.minBytes == "" && o.maxBytes == "" {
		if o.sweep != "" && strings.Count(o.sweep, ":") == 1 {
			return usageError(fmt.Sprintf("-f/--stepfactor steps a -b/-e sweep; --sweep takes its factor as MIN:MAX:FACTOR (--sweep %s:%s)", o.sweep, cmd.Flags().Lookup("stepfactor").Value))
		}
		if o.sweep != "" {
			return usageError("-f/--stepfactor steps a -b/-e sweep; --sweep takes its factor as MIN:MAX:FACTOR")
		}
		return usageError("-f/--stepfactor steps a -b/-e sweep; give -b and -e too")
	}
	if cmd.Flags().Changed("world-size") && o.WorldSize < 1 {
		return usageError(fmt.Sprintf("--world-size must be >= 1 (got %d)", o.WorldSize))
	}
	if o.sweep != "" || o.minBytes != "" || o.maxBytes != "" {
		spec := o.sweep
		if spec == "" && !(o.factor > 1 && !math.IsInf(o.factor, 0)) {
			return usageError(fmt.Sprintf("-f/--stepfactor must be a number > 1 (got %g)", o.factor))
		}
		if spec == "" {
			lo, hi := o.minBytes, o.maxBytes
			if lo == "" {
				lo = hi
			}
			if hi == "" {
				hi = lo
			}
			// Checked here under the flags' own names: the user typed
			// -b/-e, and a message about the --sweep they become would
			// name a flag they never gave.
			if msg := listflag.CheckMinMax(lo, hi); msg != "" {
				return usageError(msg)
			}
			spec = fmt.Sprintf("%s:%s:%g", lo, hi, o.factor)
		}
		sizes, err := listflag.Sweep(spec)
		if err != nil {
			return usageError(err.Error())
		}
		if dt, err := dtype.Parse(o.DType); err == nil {
			name := "--sweep " + o.sweep
			if o.sweep == "" {
				name = "-b/--minbytes " + o.minBytes
				if o.minBytes == "" {
					name = "-e/--maxbytes " + o.maxBytes
				}
			}
			if sizes, err = listflag.WholeElements(sizes, dt, name); err != nil {
				return usageError(err.Error())
			}
		}
		o.Sizes = sizes
	} else if cmd.Flags().Changed("count") {
		if o.count < 0 {
			return usageError(fmt.Sprintf("--count must be >= 0 (got %d)", o.count))
		}
		o.Counts = []int64{o.count}
	} else if o.bytes != "" {
		n, err := config.ParseSize(o.bytes)
		if err != nil {
			return usageError("--bytes: " + err.Error())
		}
		if dt, err := dtype.Parse(o.DType); err == nil && n%int64(dt.Size()) != 0 {
			return usageError(fmt.Sprintf("--bytes %s is not a whole number of %s elements (%d bytes each); use a multiple of %d or --count", o.bytes, dt, dt.Size(), dt.Size()))
		}
		o.Sizes = []int64{n}
	}
	if o.plot != "" && allZero(o.Sizes, o.Counts) {
		// Refused before simulating, not after (the chart has no point
		// on its log scale).
		return usageError("--plot: no sizes above 0 bytes to plot (the sweep's only size is 0); give a larger --bytes or --count, or drop --plot")
	}
	return nil
}

// sweepPosition is "at size 3 of 5 of the sweep (4096 bytes per rank
// buffer): " for a sweep that failed while simulating, so that a log
// (or a failed shard's) says which size to run again; "" for one size or
// a run that failed before simulating (no report). The sizes before the
// failing one were delivered, in order, with -j too.
func sweepPosition(o *runOptions, rep *report.Report) string {
	points, unit := o.Sizes, "bytes"
	if len(o.Counts) > 0 {
		points, unit = o.Counts, "elements"
	}
	return positionIn(points, unit, rep)
}

// positionIn is sweepPosition for a sweep of points (of unit).
func positionIn(points []int64, unit string, rep *report.Report) string {
	if rep == nil || len(points) < 2 || len(rep.Results) >= len(points) {
		return ""
	}
	i := len(rep.Results)
	return fmt.Sprintf("at size %d of %d of the sweep (%d %s per rank buffer): ", i+1, len(points), points[i], unit)
}

// atPosition is f with its message preceded by at (where in a sweep or
// comparison it failed), for mainIn to print; f itself, with the message
// the JSON report gives, when at is "".
func atPosition(at string, f *report.Failure) *report.Failure {
	if at == "" {
		return f
	}
	g := *f
	g.Msg = at + f.Msg
	if g.Detail == f.Msg {
		g.Detail = "" // said by the message
	}
	return &g
}

// asFailure is the report.Failure err is or wraps; an error of ccl.Run that
// is none (a bug: the runs report their failures as Failures) is one of
// the kind errkind.Of gives it.
func asFailure(err error) *report.Failure {
	var f *report.Failure
	if errors.As(err, &f) {
		return f
	}
	return report.WithKind(errkind.Of(err), &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
}

// usageErr is a usage error (exit 2) saying msg, for mainIn to report.
func usageErr(msg string) error {
	return report.WithKind(errkind.Usage, &report.Failure{Rank: -1, Msg: msg})
}

// benchFlags shape the collective bench's buffers and machine, or look at
// its ranks' queue pairs (--check, --dump-pointers): an L3 bench
// (main(orch)), which makes its own traffic and has no queue pairs,
// refuses them (ccl.Options.BenchFlags).
var benchFlags = []string{"count", "bytes", "sweep", "minbytes", "maxbytes", "stepfactor", "dtype", "redop", "in-place", "seed",
	"data-space", "root", "world-size", "topology", "collective", "timing-only", "export-msccl", "export-chakra", "check", "dump-pointers"}

// allZero reports whether a run's sizes (bytes, or counts) are all 0;
// false when none are given (the default is 1 MiB).
func allZero(sizes, counts []int64) bool {
	all := append(slices.Clone(sizes), counts...)
	return len(all) > 0 && !slices.ContainsFunc(all, func(n int64) bool { return n != 0 })
}

// usageError is a usage mistake's message, for complete.
func usageError(msg string) error { return errors.New(msg) }
