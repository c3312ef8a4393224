// Package target resolves what a run means before anything of it is
// built, and nothing else: the configuration (--config or ./ccl.yaml over
// the embedded default, with --set), which module file and ccl.yaml entry
// an argument names, its entry points, the entry's params as keyword
// arguments and whether its kernel takes what the benches pass, the --set
// and --vary items that cannot take effect, and the settings to name
// when a run stops for want of ring or staging memory. starlark/ccl
// resolves every run through it.
package target

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/collective"
	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/starlark/errkind"
	"kernbench/starlark/registry"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// LoadConfig reads --config or ./ccl.yaml (both in env's working
// directory) laid over the embedded default (config.LoadOverlay), or the
// embedded default alone, applying --set overrides. It returns the config
// and its directory (module paths of its own entries are relative to it,
// see moduleFile; "" for the embedded one).
func LoadConfig(env script.Env, path string, sets []string, embedded fs.FS) (*config.Config, string, error) {
	name, dir := path, filepath.Dir(path)
	var data []byte
	var err error
	switch {
	case path != "":
		data, err = env.ReadInput(path)
	default:
		if _, statErr := env.Stat("ccl.yaml"); statErr == nil {
			name, dir = "ccl.yaml", "."
			data, err = env.ReadInput(name)
		} else {
			name, dir = "ccl.yaml (embedded default)", ""
		}
	}
	if err != nil {
		return nil, "", report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: fmt.Sprintf("--config: %v", err), Err: err})
	}
	var cfg *config.Config
	if dir == "" {
		cfg, err = config.LoadDefault(name, sets)
	} else {
		cfg, err = config.LoadOverlay(name, data, sets)
	}
	if err != nil {
		return nil, "", report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	return cfg, dir, nil
}

// LoadConfigWithFaults is LoadConfig with the --fault items (key=value
// pairs, config.ParseFaults) added after the configuration's own
// system.faults.
func LoadConfigWithFaults(env script.Env, path string, sets, faults []string, embedded fs.FS) (*config.Config, string, error) {
	cfg, dir, err := LoadConfig(env, path, sets, embedded)
	if err != nil || len(faults) == 0 {
		return cfg, dir, err
	}
	extra, err := config.ParseFaults(faults)
	if err != nil {
		return nil, "", report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	cfg.System.Faults = append(cfg.System.Faults, extra...)
	return cfg, dir, nil
}

// ConfigProblems are the problems of a configuration that does not load:
// one per mistake the decoder found.
func ConfigProblems(err error) []string {
	var es config.Errors
	if !errors.As(err, &es) {
		return []string{err.Error()}
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Error()
	}
	return out
}

// NameOrEmpty is t's algorithm name, "" for none or a nil t.
func (t *Target) NameOrEmpty() string {
	if t == nil {
		return ""
	}
	return t.Name
}

// RunOf is what a run of t uses of the configuration; loaded says t's
// file is known to hold a kernel (not a bench that runs another
// algorithm).
func (t *Target) RunOf(loaded bool) RunOf {
	what := t.Name
	if what == "" {
		what = t.File
	}
	return RunOf{Algorithm: t.Name, Entry: t.Entry, Known: loaded || t.Entry != nil, What: what}
}

// Target is what `kernbench run X` resolved to.
type Target struct {
	Name     string // algorithm name ("" if the file has no ccl.yaml entry)
	File     string
	Entry    *config.Algorithm
	Settings config.Settings
	// Staging is where the fused primitives' staging rings and landing
	// slots go (0: TCM); BufferKindWhy and StagingWhy say why kernbench
	// put the rx rings (Settings.BufferKind) and the staging elsewhere
	// than the configuration and TCM (an MSCCL schedule, mscclio.Place).
	Staging                   machine.Space
	BufferKindWhy, StagingWhy string
	// NSlotsWhy says why kernbench chose Settings.NSlots (an MSCCL
	// schedule whose steps need deeper rings than the default, mscclio.Slots).
	NSlotsWhy string
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

// Resolve is the target arg names under cfg (cfgDir its directory): a
// ccl.yaml algorithm, or a .star file (with the entry whose module it is,
// if any).
func Resolve(arg string, cfg *config.Config, cfgDir string, src script.Source) (*Target, error) {
	isFile := strings.HasSuffix(arg, ".star") || strings.ContainsRune(arg, '/')
	if !isFile {
		a, ok := cfg.Algorithms[arg]
		if !ok {
			hint := ""
			if near := registry.Closest(arg, cfg.AlgorithmNames); near != "" {
				hint = fmt.Sprintf("; did you mean %q?", near)
			}
			switch arg {
			case config.AutoAlgorithm:
				// auto is kernbench run's own: per size, the algorithm
				// select: records, on the builtin bench.
				hint = "; auto picks an algorithm per size from select: for kernbench run on its builtin bench (kernbench run auto): here, name the algorithm"
			case "true", "false", "0", "1":
				// --verify-data false: the value after a space is an
				// argument to a boolean flag.
				hint = "; a boolean flag takes its value after =, as --verify-data=false"
			default:
				if h := collectiveHint(arg, cfg); h != "" {
					hint = h
				}
			}
			return nil, report.WithKind(errkind.Usage, &report.Failure{Rank: -1,
				Msg: fmt.Sprintf("%q is neither a .star file nor an algorithm of %s (known: %s)%s", arg, cfg.File, strings.Join(cfg.AlgorithmNames, ", "), hint)})
		}
		set, _ := cfg.Settings(arg)
		file := moduleFile(a, cfgDir)
		if !src.Exists(file) {
			cfgFile := cfg.File
			if a.Shipped {
				cfgFile = config.DefaultName + " (embedded default)"
			}
			where := fmt.Sprintf("%s:%d", cfgFile, a.Line)
			if a.ModuleSet != "" {
				where = a.ModuleSet // not the entry's line in the file
			}
			hint := ""
			if near := registry.Closest(strings.TrimSuffix(filepath.Base(file), ".star"), src.StarFiles(filepath.Dir(file))); near != "" {
				hint = fmt.Sprintf("; did you mean %s?", filepath.Join(filepath.Dir(a.Module), near+".star"))
			}
			return nil, report.WithKind(errkind.Config, &report.Failure{Rank: -1,
				Msg: fmt.Sprintf("%s: algorithms.%s.module: %s: no such file%s", where, arg, file, hint)})
		}
		return &Target{Name: arg, File: file, Entry: a, Settings: set}, nil
	}
	t := &Target{File: arg, Settings: cfg.Defaults}
	if !src.Exists(arg) {
		return nil, report.WithKind(errkind.Usage, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%s: no such file%s", arg, missingHint(arg, cfg, src))})
	}
	// The file's ccl.yaml entry, if any: the one whose module is this very
	// file. A file that merely shares a shipped algorithm's base name (a
	// user's own rd_allreduce.star) is not that algorithm and must not
	// receive its params or topology.
	abs := func(p string) string { a, _ := src.Env.Abs(p); return a }
	for _, n := range cfg.AlgorithmNames {
		a := cfg.Algorithms[n]
		if abs(moduleFile(a, cfgDir)) == abs(arg) {
			t.Name, t.Entry = n, a
			break
		}
	}
	if t.Entry != nil {
		t.Settings, _ = cfg.Settings(t.Name)
	}
	return t, nil
}

// MissingKernel is the message for file, loaded as an algorithm, without
// a kernel: what it is instead when it defines a bench's entry point (an
// L3 main, a host bench's run_rank, which run runs by themselves), else
// what each kind of file defines.
func MissingKernel(globals starlark.StringDict, file string) string {
	msg := fmt.Sprintf("no %q function found in %q", "kernel", file)
	switch {
	case globals["main"] != nil:
		return msg + fmt.Sprintf(": it defines main(orch), an L3 bench, which runs no algorithm: run it alone (kernbench run %s)", file)
	case globals["run_rank"] != nil:
		return msg + fmt.Sprintf(": it defines run_rank, a host bench, not an algorithm: run it with kernbench run --bench %s [ALGORITHM]", file)
	}
	return msg + " (an algorithm defines kernel(sendbuf, recvbuf, rank, world_size, tl); an L3 bench main(orch); a host bench run_rank(rank, world_size, torch))"
}

// EntryPoint is the function name of a loaded module (file), or the
// LoadError that it is missing or not a function.
func EntryPoint(globals starlark.StringDict, file, name string) (starlark.Callable, error) {
	v, ok := globals[name]
	if !ok {
		msg := fmt.Sprintf("no %q function found in %q", name, file)
		if name == "kernel" {
			msg = MissingKernel(globals, file)
		}
		return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: msg})
	}
	c, ok := v.(starlark.Callable)
	if !ok {
		return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%q must be a function (got a %s)", name, v.Type())})
	}
	return c, nil
}

// missingHint is what a file argument that does not exist may have meant,
// as the unknown algorithm name's error gives it: a bench of benches/
// (--bench NAME looks for benches/NAME.star) or, for any other path, an
// .star file beside the one named or an algorithm of ccl.yaml, the
// closest by edit distance (registry.Closest), with the names to choose
// from.
func missingHint(arg string, cfg *config.Config, src script.Source) string {
	dir, base := filepath.Dir(arg), strings.TrimSuffix(filepath.Base(arg), ".star")
	if dir == "benches" {
		benches := src.StarFiles(dir)
		if len(benches) == 0 {
			return ""
		}
		hint := fmt.Sprintf(" (the benches kernbench run --bench NAME runs: %s)", strings.Join(benches, ", "))
		if near := registry.Closest(base, benches); near != "" {
			hint += fmt.Sprintf("; did you mean --bench %s?", near)
		}
		return hint
	}
	if _, ok := cfg.Algorithms[base]; ok {
		// A shipped (or configured) algorithm named by its file name, from
		// a folder that does not hold the file.
		return fmt.Sprintf("; %s is an algorithm of %s: kernbench run %s runs it", base, cfg.File, base)
	}
	siblings := src.StarFiles(dir)
	known := ""
	if dir == "." {
		// A bare file name: perhaps an algorithm's name with .star added.
		known = fmt.Sprintf(" (algorithms of %s: %s; kernbench run NAME runs one)", cfg.File, strings.Join(cfg.AlgorithmNames, ", "))
	}
	// A file beside it first: the path was typed with its folder.
	if near := registry.Closest(base, siblings); near != "" {
		return fmt.Sprintf("; did you mean %s?", filepath.Join(dir, near+".star"))
	}
	if near := registry.Closest(base, cfg.AlgorithmNames); near != "" {
		return known + fmt.Sprintf("; did you mean the algorithm %s (kernbench run %s)?", near, near)
	}
	return known
}

// collectiveHint answers a collective named where an algorithm goes
// (kernbench run allreduce), or nccl-tests' bench of one (all_reduce_perf,
// the name its users type first), with the algorithms of cfg that run it;
// "" for any other name.
func collectiveHint(arg string, cfg *config.Config) string {
	name := strings.TrimSuffix(arg, "_perf")
	c, ok := collective.Lookup(name)
	if !ok {
		c, ok = collective.Lookup(strings.Replace(name, "all_", "all", 1))
	}
	if !ok {
		return ""
	}
	var algs []string
	for _, n := range cfg.AlgorithmNames {
		if cfg.Algorithms[n].Collective == c.Name {
			algs = append(algs, n)
		}
	}
	what := fmt.Sprintf("%s is a collective", arg)
	switch {
	case name != arg:
		what = fmt.Sprintf("%s is nccl-tests' bench of %s", arg, c.Name)
	case arg != c.Name:
		what = fmt.Sprintf("%s is the collective %s", arg, c.Name)
	}
	if len(algs) == 0 {
		return fmt.Sprintf("; %s, and %s has no algorithm of it: add one (docs/ccl-author-guide.md)", what, cfg.File)
	}
	return fmt.Sprintf("; %s: kernbench run ALGORITHM runs one of its algorithms (%s), several compare them in one table, kernbench tune %s finds the fastest per size",
		what, strings.Join(algs, ", "), c.Name)
}
