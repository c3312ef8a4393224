// Package check is kernbench check, its one job: it loads, lints and
// validates an algorithm (or an MSCCL schedule) without simulating, and
// lists every problem found. It resolves the run as kernbench run would
// (starlark/target, the plan of starlark/ccl), builds the neighbour maps
// of each world size (starlark/wiring), prints one with --show-map, and
// reads the syntax tree with starlark/lint.
package check

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/engine/topology"
	"kernbench/starlark/ccl"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/hostmem/admit"
	"kernbench/starlark/lint"
	"kernbench/starlark/orch"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
	"kernbench/starlark/wiring"
)

// Options configure Run.
type Options struct {
	ConfigPath string
	Sets       []string
	Faults     []string // --fault items (ccl.Options.Faults)
	// WorldSize, Topology and Collective are run's flags of the same
	// names: the algorithm is checked as `kernbench run` with them would
	// run it (WorldSize > 0 checks that world size alone).
	WorldSize  int
	Topology   string
	Collective string
	LoadPath   []string   // --load-path: folders load() may read besides the file's own
	WorldSizes []int      // neighbors() is validated for each (default 1..16)
	Env        script.Env // the working directory and environment variables
	Embedded   fs.FS
	// Watchdog, when set, stops the checked file's Starlark (its top level,
	// neighbors()) at a wall-clock limit: check runs the code it loads.
	Watchdog *script.Watchdog
	// ShowMap > 0 writes the neighbour map at that world size, with the
	// physical route of every direction, to MapOut.
	ShowMap int
	MapOut  io.Writer
}

// The bounds of what check builds maps for (--world-sizes, --world-size,
// --show-map): a map of a million ranks takes about 800 MB and seconds,
// and a run of more than 65536 ranks needs over 12 GiB of host memory.
const (
	MaxWorldSize = 1 << 16
	MaxSizes     = 1024
)

// Run loads, lints and validates an algorithm without simulating: the
// file parses and resolves (every resolve error), kernel exists with a
// signature the benches can call, neighbors() gives valid maps for the
// world sizes, and the ccl.yaml entry (if any) fits. It returns every
// problem found, each starting with file:line:col where one is known.
func Run(file string, o Options) []string {
	if ccl.IsMSCCL(file) {
		return checkMSCCL(file, o)
	}
	cfg, cfgDir, err := target.LoadConfigWithFaults(o.Env, o.ConfigPath, o.Sets, o.Faults, o.Embedded)
	if err != nil {
		return target.ConfigProblems(err)
	}
	src := script.Source{Env: o.Env, Embedded: o.Embedded}
	tgt, err := target.Resolve(file, cfg, cfgDir, src)
	if err != nil {
		return []string{err.Error()}
	}
	if err := target.Ineffective(cfg, tgt.RunOf(false), o.given()); err != nil {
		return []string{err.Error()}
	}
	loader := &script.Loader{Src: src, Search: filepath.Join(cfgDir, "algorithms"), LoadPath: o.LoadPath, MaxSteps: 10_000_000, Watchdog: o.Watchdog, Predeclared: orch.Predeclared()}
	if cfgDir == "" {
		loader.Search = "algorithms"
	} else {
		// A local ccl.yaml lies over the embedded one: its modules may
		// load the shipped helpers.
		loader.Fallback = "algorithms"
	}
	globals, err := loader.Load(tgt.File)
	if err != nil {
		return LoadProblems(err)
	}
	var problems []string
	add := func(pos syntax.Position, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if pos.IsValid() {
			msg = pos.String() + ": " + msg
		} else {
			msg = tgt.File + ": " + msg
		}
		problems = append(problems, msg)
	}
	for _, entry := range []string{"run_rank", "main"} { // host and L3 benches
		if v, isBench := globals[entry]; isBench && globals["kernel"] == nil {
			if _, ok := v.(starlark.Callable); !ok {
				add(syntax.Position{}, "%s must be a function", entry)
			}
			if fn, ok := v.(*starlark.Function); ok {
				args := []string{"orch"}
				if entry == "run_rank" {
					args = []string{"rank", "world_size", "torch"}
				}
				for _, p := range target.BenchSignature(fn, entry, args...) {
					add(fn.Position(), "%s", p)
				}
			}
			if entry == "run_rank" {
				// What run refuses before any size, check names too.
				if _, err := ccl.DeclaredRedOps(tgt.File, globals); err != nil {
					problems = append(problems, err.Error())
				}
			}
			return problems
		}
	}
	var kernelFn *starlark.Function
	v, ok := globals["kernel"]
	switch {
	case !ok:
		add(syntax.Position{}, "%s", target.MissingKernel(globals, tgt.File))
	default:
		fn, ok := v.(*starlark.Function)
		if !ok {
			add(syntax.Position{}, "%q must be a function (got a %s)", "kernel", v.Type())
			break
		}
		params := map[string]bool{}
		if tgt.Entry != nil {
			for k := range tgt.Entry.Params {
				params[k] = true
			}
		}
		kernelFn = fn
		for _, p := range target.KernelSignature(fn, params) {
			add(fn.Position(), "%s", p)
		}
	}
	var hook starlark.Callable
	if v, ok := globals["neighbors"]; ok {
		fn, ok := v.(*starlark.Function)
		if !ok {
			add(syntax.Position{}, "%q must be a function (got a %s)", "neighbors", v.Type())
		} else if msg := hookSignature(fn, tgt.Entry); msg != "" {
			add(fn.Position(), "%s", msg)
		} else {
			hook = fn
		}
	}
	if globals["kernel"] != nil {
		if err := target.Ineffective(cfg, tgt.RunOf(true), o.given()); err != nil {
			return append(problems, err.Error())
		}
	}
	p, kwProblems, err := ccl.PlanKernel(tgt, globals, hook != nil, o.runOptions(), kernelFn, cfg.File)
	if err != nil {
		problems = append(problems, err.Error())
		return problems
	}
	problems = append(problems, kwProblems...)
	if topology.RequiresNeighborsHook(p.Topology) && hook == nil {
		add(syntax.Position{}, "topology %q requires neighbors(rank, world_size, neighbor_map)", p.Topology)
		return problems
	}
	machine := wiring.MachineParams(cfg.System, tgt.Settings)
	if err := wiring.CheckFaults(cfg.System, machine); err != nil {
		// One problem per bad entry.
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				problems = append(problems, e.Error())
			}
		} else {
			problems = append(problems, err.Error())
		}
	}
	sizes := o.WorldSizes
	if len(sizes) == 0 && o.WorldSize > 0 {
		sizes = []int{o.WorldSize}
	}
	if len(sizes) == 0 && machine.Placement != nil {
		// A placement places its own number of ranks.
		sizes = []int{len(machine.Placement)}
	}
	if len(sizes) == 0 {
		// The default sizes stop where a small machine does: only sizes
		// asked for by name are reported as not fitting.
		for w := 1; w <= 16 && (w == 1 || machine.Holds(w) == nil); w++ {
			sizes = append(sizes, w)
		}
	}
	var admissible []string
	var failures []sizeFailure
	// Sizes whose map is valid but that the machine cannot place: run
	// refuses them, so check says so rather than ok.
	var unplaceable []int
	var unplaceableErr error
	dirs := map[string]bool{} // every direction installed at an admissible size
	// tables builds the neighbour tables of world size w and, when they
	// are valid, adds their directions to into.
	tables := func(w int, into map[string]bool) error {
		spec := wiring.MapSpec{File: tgt.File, Hook: hook, Params: p.Params, Sys: cfg.System}
		spec.Shape(p.Topology, w, tgt.Settings)
		links, _, err := wiring.NeighborTables(spec, loader.NewThread("check"))
		if err != nil {
			return err
		}
		for _, ls := range links {
			for _, l := range ls {
				into[l.Dir] = true
			}
		}
		return nil
	}
	var tooLarge []string
	// Why the builtin topology refused the first size it refused (a
	// mesh_shape of another number of ranks).
	var firstSizeErr *topology.SizeError
	for _, w := range sizes {
		if why := setUpTooLarge(p.Topology, w, tgt.Settings.Channels); why != "" {
			// Not built: a full_mesh of 8000 ranks filled the memory
			// with 64 million directions and ended in a Go fatal error.
			tooLarge = append(tooLarge, why)
			continue
		}
		err := tables(w, dirs)
		if err == nil {
			if err := machine.Holds(w); err != nil {
				unplaceable, unplaceableErr = append(unplaceable, w), err
			}
			admissible = append(admissible, fmt.Sprint(w))
			continue
		}
		if isFail(err) {
			continue // neighbors() rejects this size on purpose (a documented restriction)
		}
		var ve *topology.ValidationError
		var se *topology.SizeError
		if firstSizeErr == nil && hook == nil && errors.As(err, &se) {
			firstSizeErr = se
		}
		if errors.As(err, &ve) || hook != nil {
			// An invalid map from the hook is a mistake at any size; a
			// builtin topology merely not admitting a size is not.
			if ve != nil || !errors.As(err, &se) {
				failures = append(failures, newSizeFailure(w, tgt.File, err, ve))
			}
		}
	}
	grouped := groupSizeFailures(failures)
	if hook != nil && len(grouped) > 0 && len(admissible) > 0 {
		// The sizes below some size fail and those above pass: likely
		// sizes the algorithm does not support (a ring of next and
		// prev needs 3 ranks), which neighbors() says with fail().
		var ok, bad []int
		for _, a := range admissible {
			w, _ := strconv.Atoi(a)
			ok = append(ok, w)
		}
		for _, f := range failures {
			bad = append(bad, f.w)
		}
		slices.Sort(ok)
		slices.Sort(bad)
		sizesText := func(ws []int) string {
			if len(ws) == 1 {
				return "world_size " + topology.RankRanges(ws)
			}
			return "world_sizes " + topology.RankRanges(ws)
		}
		if bad[len(bad)-1] < ok[0] {
			verb := "pass"
			if len(ok) == 1 {
				verb = "passes"
			}
			grouped[len(grouped)-1] += fmt.Sprintf("\nhint: %s %s; if the algorithm does not support %s, its neighbors() says so with fail(...), and check skips the sizes it refuses",
				sizesText(ok), verb, sizesText(bad))
		}
	}
	problems = append(problems, grouped...)
	if len(tooLarge) > 0 {
		more := ""
		if n := len(tooLarge) - 1; n > 0 {
			more = fmt.Sprintf(" (and %d more world size(s) of this check)", n)
		}
		problems = append(problems, tooLarge[0]+more)
	}
	switch {
	case len(unplaceable) == 1:
		flag := "--world-sizes"
		if len(o.WorldSizes) == 0 && o.WorldSize > 0 {
			flag = "--world-size"
		}
		problems = append(problems, fmt.Sprintf("%s: %v", flag, unplaceableErr))
	case len(unplaceable) > 1:
		problems = append(problems, fmt.Sprintf("--world-sizes: world_sizes %s do not fit the machine; %v", topology.RankRanges(unplaceable), unplaceableErr))
	}
	if o.ShowMap > 0 && o.MapOut != nil {
		spec := wiring.MapSpec{File: tgt.File, Hook: hook, Params: p.Params, Sys: cfg.System}
		spec.Shape(p.Topology, o.ShowMap, tgt.Settings)
		// A map the machine cannot place is not built: it could not be
		// printed.
		err := machine.Holds(o.ShowMap)
		if why := setUpTooLarge(p.Topology, o.ShowMap, tgt.Settings.Channels); err == nil && why != "" {
			err = errors.New(why)
		}
		if err == nil {
			err = showMap(o, spec, loader, p.Topology, tgt, machine)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("--show-map %d: %s", o.ShowMap, script.Format(err)))
		}
	}
	if len(admissible) == 0 {
		why := ""
		if firstSizeErr != nil {
			why = ": " + firstSizeErr.Error()
			if from, ok := tgt.SettingGiven(cfg, "mesh_shape", o.given().Items()); ok && p.Topology == "mesh_2d" && len(tgt.Settings.MeshShape) > 0 {
				why += " (mesh_shape from " + from + ")"
			}
		}
		add(syntax.Position{}, "no world size in %s is admissible for topology %q%s", topology.RankRanges(slices.Sorted(slices.Values(sizes))), p.Topology, why)
		dirs = nil
	}
	if dirs != nil && hook != nil && len(o.WorldSizes) == 0 && o.WorldSize == 0 {
		// A module's neighbors() may install other directions at world
		// sizes above the default check's 16 (the shipped alltoall: a full
		// mesh up to 32 ranks, a ring of E and W above): its kernel's
		// literal directions are checked against those too, so that a
		// kernel that supports both is not told its ring's "W" is never
		// installed. Only the directions count; a size refused or too
		// large here is nobody's problem.
		for _, w := range lintWorldSizes {
			if slices.Contains(sizes, w) || setUpTooLarge(p.Topology, w, tgt.Settings.Channels) != "" {
				continue
			}
			_ = tables(w, dirs) // (an error here is nobody's problem)
		}
	}
	if data, err := src.ReadFile(tgt.File); err == nil {
		problems = append(problems, lint.Calls(tgt.File, data, globals, dirs, max(1, tgt.Settings.Channels), p.Topology)...)
	}
	return problems
}

// showMap writes the neighbour map of spec (at --show-map's world size) to
// o.MapOut, with the links each direction crosses on the machine mp.
func showMap(o Options, spec wiring.MapSpec, loader *script.Loader, topo string, tgt *target.Target, mp machine.Params) error {
	links, _, err := wiring.NeighborTables(spec, loader.NewThread("check"))
	if err != nil {
		return err
	}
	if topo == "mesh_2d" {
		// The shape in force, as a run's header gives it.
		if rows, cols, err := topology.MeshDims(o.ShowMap, tgt.Settings.MeshShape); err == nil {
			topo += fmt.Sprintf(" %d x %d", rows, cols)
		}
	}
	return writeMap(o.MapOut, tgt, topo, links, mp)
}

// runOptions are the options of the run o checks.
func (o Options) runOptions() ccl.Options {
	return ccl.Options{ConfigPath: o.ConfigPath, Sets: o.Sets, Faults: o.Faults, WorldSize: o.WorldSize, Topology: o.Topology, Collective: o.Collective,
		Env: o.Env, Embedded: o.Embedded}
}

// checkMSCCL checks an MSCCL schedule. Its ngpus is the one world size
// it has: --world-sizes cannot take effect, and --show-map prints the
// map of its thread blocks' connections at that size.
func checkMSCCL(file string, o Options) []string {
	problems, mp := ccl.CheckMSCCL(file, o.runOptions())
	if mp == nil {
		return problems
	}
	var flags []string
	if len(o.WorldSizes) > 0 {
		flags = append(flags, fmt.Sprintf("--world-sizes: %s is a schedule for ngpus=%d ranks, checked at that size alone; drop --world-sizes", file, mp.NGPUs))
	}
	switch {
	case o.ShowMap <= 0:
	case o.ShowMap != mp.NGPUs:
		flags = append(flags, fmt.Sprintf("--show-map %d: %s is a schedule for ngpus=%d ranks: --show-map %d prints its map", o.ShowMap, file, mp.NGPUs, mp.NGPUs))
	case mp.Links != nil && o.MapOut != nil:
		if err := writeMap(o.MapOut, &target.Target{File: file}, "custom (the thread blocks' connections)", mp.Links, mp.Machine); err != nil {
			flags = append(flags, fmt.Sprintf("--show-map %d: %v", o.ShowMap, err))
		}
	}
	return append(flags, problems...)
}

// hookSignature says why neighbors() cannot be called as
// neighbors(rank, world_size, neighbor_map, **kw) with kw its declared
// params, location and machine; "" when it can.
func hookSignature(fn *starlark.Function, entry *config.Algorithm) string {
	n, positional := script.ParamCounts(fn)
	if positional < 3 && !fn.HasVarargs() {
		return fmt.Sprintf("neighbors must take (rank, world_size, neighbor_map), it takes %d positional parameter(s)", positional)
	}
	for i := 3; i < n; i++ {
		name, _ := fn.Param(i)
		_, isParam := entry.ParamsOrNil()[name]
		if fn.ParamDefault(i) == nil && !isParam && name != "location" && name != "machine" {
			return fmt.Sprintf("neighbors parameter %q has no default and is neither location, machine nor a ccl.yaml params entry", name)
		}
	}
	return ""
}

// LoadProblems lists a load error's problems: every resolve error, or
// the formatted error.
func LoadProblems(err error) []string {
	var el resolve.ErrorList
	if errors.As(err, &el) {
		out := make([]string, len(el))
		for i, e := range el {
			out[i] = e.Error()
		}
		return out
	}
	return []string{script.FormatLoad(err)}
}

// isFail reports an error raised by the script's own fail(): an intended
// rejection rather than a bug.
func isFail(err error) bool {
	var fe *script.FailError
	return errors.As(err, &fe)
}

// checkRanksShown is how many ranks of one world size's bad neighbour map
// check lists before "and N more".
const checkRanksShown = 3

// sizeFailure is why the neighbour maps of one world size are invalid.
type sizeFailure struct {
	w    int
	text string // the report, capped to checkRanksShown ranks
	key  string // the problems with every number blanked: alike failures share it
}

var digits = regexp.MustCompile(`[0-9]+`)

func newSizeFailure(w int, file string, err error, ve *topology.ValidationError) sizeFailure {
	if ve == nil {
		text := script.Format(err)
		return sizeFailure{w: w, text: text, key: digits.ReplaceAllString(text, "#")}
	}
	shapes := map[string]bool{}
	for _, p := range ve.Problems {
		shapes[digits.ReplaceAllString(p.Msg, "#")] = true
	}
	return sizeFailure{w: w, text: file + ": " + ve.Capped(checkRanksShown), key: strings.Join(slices.Sorted(maps.Keys(shapes)), "\n")}
}

// groupSizeFailures reports world sizes that fail alike (the same problems
// up to rank numbers) as one entry showing the first of them, so a one-way
// map gives a few lines rather than one per rank per world size.
func groupSizeFailures(fs []sizeFailure) []string {
	var order []string
	groups := map[string][]sizeFailure{}
	for _, f := range fs {
		if groups[f.key] == nil {
			order = append(order, f.key)
		}
		groups[f.key] = append(groups[f.key], f)
	}
	var out []string
	for _, k := range order {
		g := groups[k]
		if len(g) == 1 {
			out = append(out, fmt.Sprintf("world_size %d: %s", g[0].w, g[0].text))
			continue
		}
		ws := make([]int, len(g))
		for i, f := range g {
			ws[i] = f.w
		}
		out = append(out, fmt.Sprintf("world_sizes %s fail alike (%d sizes); world_size %d: %s", topology.RankRanges(ws), len(ws), g[0].w, g[0].text))
	}
	return out
}

// writeMap prints every rank's directions at one world size: the peer, the
// peer's end of the queue pair, and the links a message from the rank to
// that peer crosses (pe_noc up and down inside a cube, ucie between cubes,
// pcie between SIPs), as placed on the configured machine.
func writeMap(w io.Writer, tgt *target.Target, topo string, links [][]machine.Link, mp machine.Params) error {
	m, err := machine.New(sim.New(), mp)
	if err != nil {
		return err
	}
	if err := m.Place(len(links)); err != nil {
		return err
	}
	name := tgt.Name
	if name == "" {
		name = tgt.File
	}
	fmt.Fprintf(w, "neighbour map of %s: topology %s, world_size %d\n", name, topo, len(links))
	// Directions padded to the longest of the map (at least 4), so that
	// the arrows line up also for names such as child_right.
	width := 4
	for _, ls := range links {
		for _, l := range ls {
			width = max(width, len(l.Dir))
		}
	}
	for r, ls := range links {
		pe := m.Ranks[r]
		fmt.Fprintf(w, "rank %d (sip %d, cube %d, pe %d):", r, pe.Sip, pe.Cube, pe.Local)
		if len(ls) == 0 {
			fmt.Fprint(w, " no directions")
		}
		fmt.Fprintln(w)
		for _, l := range ls {
			var hops []string
			for _, res := range m.PEToPE(pe, m.Ranks[l.Peer]) {
				hops = append(hops, res.Name)
			}
			ro := ""
			if l.RecvOnly {
				ro = ", receive only"
			}
			fmt.Fprintf(w, "  %-*s -> rank %d (its %s%s): %s\n", width, l.Dir, l.Peer, l.PeerDir, ro, strings.Join(hops, " > "))
		}
	}
	return nil
}

// setUpTooLarge says why check does not build a world of w ranks on topo:
// its ranks and directions alone pass the memory kernbench may use (the
// default --max-memory); "" when it may.
// lintWorldSizes are the larger world sizes whose neighbour maps a
// module's neighbors() is asked for, for the literal directions of its
// kernel only (kernbench check's default sizes stop at 16).
var lintWorldSizes = []int{32, 33, 64, 65}

func setUpTooLarge(topo string, w, channels int) string {
	need, limit := hostmem.SatAdd(admit.WorldSetUpBytes(topo, w, channels), hostmem.RuntimeBytes), hostmem.DefaultMaxMemory()
	if limit <= 0 || need <= limit {
		return ""
	}
	return fmt.Sprintf("world_size %d on topology %s needs about %s of host memory to set up (%d directions), over the %s kernbench may use (%s); check a smaller world size",
		w, topo, hostmem.FormatBytes(need), hostmem.SatMul(int64(w), topology.Degree(topo, w, channels)), hostmem.FormatBytes(limit), hostmem.DefaultLimitWhy())
}

// given is what of o decides whether its --set items take effect.
func (o Options) given() target.Given {
	return target.Given{Sets: o.Sets, WorldSize: o.WorldSize, Topology: o.Topology, Collective: o.Collective}
}
