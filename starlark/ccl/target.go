package ccl

// Target resolution: which configuration, module file and ccl.yaml entry a
// `kernbench run ARG` means, and the module's entry points.

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/starlark/errkind"
	"kernbench/starlark/mscclio"
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

// loadConfig is LoadConfig of opts' configuration with its --set and
// --vary items.
func (o Options) loadConfig() (*config.Config, string, error) {
	cfg, dir, err := LoadConfig(o.Env, o.ConfigPath, o.allSets(), o.Embedded)
	if err != nil || len(o.Faults) == 0 {
		return cfg, dir, err
	}
	faults, err := config.ParseFaults(o.Faults)
	if err != nil {
		return nil, "", report.WithKind(errkind.Config, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	cfg.System.Faults = append(cfg.System.Faults, faults...)
	return cfg, dir, nil
}

// Resolve checks, without running anything, that `kernbench run arg`
// with opts' configuration (--config, --set, --vary) names something to
// run: the configuration loads and arg is an algorithm of it, a file, or
// an MSCCL schedule that parses; and that no --set or --vary item is
// one that cannot take effect in the run (ineffectiveSet). A comparison
// resolves every variant first, so that a misspelt name or a bad --vary
// value is reported before the variants ahead of it have spent their
// simulation time.
//
// It returns the ccl.yaml algorithm arg names or whose module it is ("" for
// none). With check false it only resolves (a comparison first learns
// which algorithms its variants run, to set Options.Compared).
func Resolve(arg string, opts Options, check bool) (algorithm string, err error) {
	cfg, cfgDir, err := opts.loadConfig()
	if err != nil {
		return "", err
	}
	if IsMSCCL(arg) {
		a, err := loadMSCCL(arg, script.Source{Env: opts.Env, Embedded: opts.Embedded, Overlay: map[string][]byte{mscclio.RunnerName: mscclio.Runner}})
		if err != nil || !check {
			return "", err
		}
		return "", ineffectiveSet(cfg, mscclRun(arg, a), opts)
	}
	tgt, err := resolveTarget(arg, cfg, cfgDir, script.Source{Env: opts.Env, Embedded: opts.Embedded})
	if err != nil || !check {
		return tgt.nameOrEmpty(), err
	}
	return tgt.name, ineffectiveSet(cfg, tgt.runOf(false), opts)
}

func (t *target) nameOrEmpty() string {
	if t == nil {
		return ""
	}
	return t.name
}

// runOf is what a run of t uses of the configuration; loaded says t's
// file is known to hold a kernel (not a bench that runs another
// algorithm).
func (t *target) runOf(loaded bool) runOf {
	what := t.name
	if what == "" {
		what = t.file
	}
	return runOf{algorithm: t.name, entry: t.entry, known: loaded || t.entry != nil, what: what}
}

// target is what `kernbench run X` resolved to.
type target struct {
	name     string // algorithm name ("" if the file has no ccl.yaml entry)
	file     string
	entry    *config.Algorithm
	settings config.Settings
	// staging is where the fused primitives' staging rings and landing
	// slots go (0: TCM); bufferKindWhy and stagingWhy say why kernbench
	// put the rx rings (settings.BufferKind) and the staging elsewhere
	// than the configuration and TCM (an MSCCL schedule, mscclio.Place).
	staging                   machine.Space
	bufferKindWhy, stagingWhy string
	// nSlotsWhy says why kernbench chose settings.NSlots (an MSCCL
	// schedule whose steps need deeper rings than the default, mscclio.Slots).
	nSlotsWhy string
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
			hint := ""
			if near := registry.Closest(arg, cfg.AlgorithmNames); near != "" {
				hint = fmt.Sprintf("; did you mean %q?", near)
			}
			switch arg {
			case "true", "false", "0", "1":
				// --verify-data false: the value after a space is an
				// argument to a boolean flag.
				hint = "; a boolean flag takes its value after =, as --verify-data=false"
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
			return nil, report.WithKind(errkind.Config, &report.Failure{Rank: -1,
				Msg: fmt.Sprintf("%s: algorithms.%s.module: %s: no such file", where, arg, file)})
		}
		return &target{name: arg, file: file, entry: a, settings: set}, nil
	}
	t := &target{file: arg, settings: cfg.Defaults}
	if !src.Exists(arg) {
		return nil, report.WithKind(errkind.Usage, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%s: no such file", arg)})
	}
	// The file's ccl.yaml entry, if any: the one whose module is this very
	// file. A file that merely shares a shipped algorithm's base name (a
	// user's own rd_allreduce.star) is not that algorithm and must not
	// receive its params or topology.
	abs := func(p string) string { a, _ := src.Env.Abs(p); return a }
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

const kernelKey = "kernbench.kernel"

func entryPoint(globals starlark.StringDict, file, name string) (starlark.Callable, error) {
	v, ok := globals[name]
	if !ok {
		return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: fmt.Sprintf("no %q function found in %q", name, file)})
	}
	c, ok := v.(starlark.Callable)
	if !ok {
		return nil, report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%q must be a function (got a %s)", name, v.Type())})
	}
	return c, nil
}

func loadFailure(err error) error {
	return stepLimit(report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: script.Format(err), Err: err}))
}
