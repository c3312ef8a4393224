// Package testrun is `kernbench test`: it finds *_test.star files, runs
// every top-level test_* function with go.starlark.net's assert module
// predeclared and @kernbench//testing.star loadable (run_kernel_in_mock),
// and reports go-test-like results.
package testrun

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/starlarktest"

	"kernbench/engine/dtype"
	"kernbench/starlark/ccl"
	"kernbench/starlark/check"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/mock"
	"kernbench/starlark/orch"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// Options configure a test run.
type Options struct {
	Run      *regexp.Regexp // only tests whose name matches (nil = all)
	Verbose  bool
	Env      script.Env // the working directory and environment variables
	Embedded fs.FS
	Stderr   io.Writer // print() output of tests and kernels
	MaxSteps uint64    // Starlark step limit of each thread (tests and the kernels they run)
	// LoadPath are folders the tests' load() and run_kernel_in_mock may
	// read besides the test file's own folder tree (--load-path).
	LoadPath []string
	// Timeout bounds one test file's wall-clock time (0: none): at the
	// limit the running test and the rest of the file stop with an error.
	Timeout time.Duration
	// MaxMemory bounds the host memory of each simulation a test starts
	// (0: none), as kernbench run's --max-memory does: an estimate over it
	// is refused, one that passes it while simulating stops.
	MaxMemory int64
	// OnTest, when set, is called as each test starts (progress reports).
	OnTest func(file, name string)

	watchdog *script.Watchdog // the running file's Timeout
}

// Result is one test function's outcome.
type Result struct {
	File     string   `json:"file"`
	Name     string   `json:"name"`
	Pass     bool     `json:"pass"`
	Messages []string `json:"messages,omitempty"`
	TimedOut bool     `json:"timed_out,omitempty"` // stopped by the file's -timeout
	// OutOfMemory: a simulation the test started passed --max-memory.
	OutOfMemory bool    `json:"out_of_memory,omitempty"`
	Seconds     float64 `json:"seconds"`
}

// Discover lists the *_test.star files under paths (files or folders,
// recursively; relative ones in env's working directory), sorted, named
// as paths name them. With no paths it searches the working directory.
func Discover(env script.Env, paths []string) ([]string, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var out []string
	for _, p := range paths {
		st, err := env.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file or folder", p)
		}
		if err != nil {
			return nil, env.UserError(err, p)
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		root := env.Path(p)
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, "_test.star") {
				rel, err := filepath.Rel(root, path)
				if err != nil {
					return err
				}
				out = append(out, filepath.Join(p, rel))
			}
			return nil
		})
		if err != nil {
			return nil, env.UserError(err, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// DiscoverEmbedded lists the *_test.star files of fsys (the copy of the
// shipped files inside the binary) under paths, files or folders of fsys
// ("algorithms", "algorithms/ring_allreduce_test.star"), sorted; no paths
// means all of them. A path that fsys does not hold is an error that says
// what it holds.
func DiscoverEmbedded(fsys fs.FS, paths []string) ([]string, error) {
	var all []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return fs.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, "_test.star") {
			all = append(all, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(all)
	if len(paths) == 0 {
		return all, nil
	}
	var out []string
	for _, p := range paths {
		clean := path.Clean(filepath.ToSlash(p))
		n := len(out)
		for _, f := range all {
			if (f == clean || clean == "." || strings.HasPrefix(f, clean+"/")) && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
		if len(out) == n {
			if _, err := fs.Stat(fsys, clean); err == nil {
				continue // a shipped file or folder without tests: "no *_test.star files"
			}
			folders := map[string]bool{}
			for _, f := range all {
				folders[path.Dir(f)] = true
			}
			return nil, fmt.Errorf("%s: no such file or folder among the files shipped with kernbench (--builtin runs the tests under %s/)",
				p, strings.Join(sortedKeys(folders), "/, "))
		}
	}
	sort.Strings(out)
	return out, nil
}

// reporter collects assertion failures of one test.
type reporter struct{ msgs []string }

func (r *reporter) Error(args ...any) {
	r.msgs = append(r.msgs, strings.TrimSpace(fmt.Sprint(args...)))
}

// CheckFile lints a test file as kernbench test loads it (assert
// predeclared, @kernbench//testing.star loadable) without running its
// tests: every load problem and every test_* function that takes
// parameters. It also returns the number of test_* functions.
func CheckFile(file string, o Options) (problems []string, tests int) {
	loader, err := newLoader(file, &o)
	if err != nil {
		return []string{err.Error()}, 0
	}
	defer o.watchdog.Stop()
	globals, err := loader.Load(file)
	if err != nil {
		return check.LoadProblems(err), 0
	}
	names := make([]string, 0, len(globals))
	for name := range globals {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if fn, ok := globals[name].(*starlark.Function); ok && strings.HasPrefix(name, "test_") {
			tests++
			if fn.NumParams() > 0 {
				problems = append(problems, fmt.Sprintf("%s: %s takes parameters; test functions take none", fn.Position(), name))
			}
		}
	}
	return problems, tests
}

// newLoader is the loader of a test file: assert predeclared,
// @kernbench//testing.star loadable, o's step and time limits.
func newLoader(file string, o *Options) (*script.Loader, error) {
	assert, err := starlarktest.LoadAssertModule()
	if err != nil {
		return nil, fmt.Errorf("internal error: assert module: %w", err)
	}
	if o.watchdog == nil { // the package's tests give their own, to fire it
		o.watchdog = script.NewWatchdog(o.Timeout, fmt.Sprintf("-timeout %v (per test file)", o.Timeout))
	}
	l := &script.Loader{
		Watchdog:    o.watchdog,
		Src:         script.Source{Env: o.Env, Embedded: o.Embedded},
		Search:      "algorithms",
		LoadPath:    o.LoadPath,
		Predeclared: predeclared(assert["assert"]),
		MaxSteps:    o.MaxSteps,
		Stderr:      o.Stderr,
	}
	// run_kernel_in_mock reads algorithm files where the test's load()
	// statements may read.
	place := func(p string) error {
		if err := l.CheckPlace(p); err != nil {
			return err
		}
		return nil
	}
	l.Builtin = map[string]starlark.StringDict{"testing.star": Module(filepath.Dir(file), *o, place)}
	return l, nil
}

// loadError is a test file that did not load: its report, and the error
// behind it (errkind.Of tells a file stopped by -timeout as it loaded).
type loadError struct {
	text string
	err  error
}

func (e *loadError) Error() string { return e.text }
func (e *loadError) Unwrap() error { return e.err }

// RunFile runs every test_* function of file in source order.
func RunFile(file string, o Options) ([]Result, error) {
	loader, err := newLoader(file, &o)
	if err != nil {
		return nil, err
	}
	defer o.watchdog.Stop()
	// The file's own Starlark is watched for --max-memory too (its
	// simulations have the guard): a watch for its top level, then one per
	// test, so one test over the limit does not stop those after it.
	var release func()
	loader.MemoryWatch, release = hostmem.Watch(o.MaxMemory, false)
	globals, err := loader.Load(file)
	release()
	if err != nil {
		return nil, &loadError{script.FormatLoad(err), err}
	}
	type test struct {
		name string
		fn   *starlark.Function
	}
	var tests []test
	for name, v := range globals {
		if fn, ok := v.(*starlark.Function); ok && strings.HasPrefix(name, "test_") {
			if o.Run == nil || o.Run.MatchString(name) {
				tests = append(tests, test{name, fn})
			}
		}
	}
	sort.Slice(tests, func(i, j int) bool {
		pi, pj := tests[i].fn.Position(), tests[j].fn.Position()
		if pi.Line != pj.Line {
			return pi.Line < pj.Line
		}
		return tests[i].name < tests[j].name
	})
	var results []Result
	for _, t := range tests {
		if o.OnTest != nil {
			o.OnTest(file, t.name)
		}
		loader.MemoryWatch, release = hostmem.Watch(o.MaxMemory, false)
		th := loader.NewThread(t.name)
		err = nil
		rep := &reporter{}
		starlarktest.SetReporter(th, rep)
		start := time.Now()
		if t.fn.NumParams() > 0 {
			rep.msgs = append(rep.msgs, fmt.Sprintf("%s: %s takes parameters; test functions take none", t.fn.Position(), t.name))
		} else if _, err = starlark.Call(th, t.fn, nil, nil); err != nil {
			err = script.Stopped(th, err)
			msg := script.Format(err)
			// As run says it of a kernel: the limit is a flag. A kernel the
			// test ran in the mock has said it already, in its error line.
			if errkind.Of(err) == errkind.StepLimit && !strings.Contains(msg, "raise --max-steps") {
				msg += " (raise --max-steps if the test is meant to run this long)"
			}
			rep.msgs = append(rep.msgs, msg)
		}
		release()
		results = append(results, Result{File: file, Name: t.name, Pass: len(rep.msgs) == 0, Messages: rep.msgs,
			TimedOut: script.IsTimeout(err), OutOfMemory: isOutOfMemory(err) || script.IsMemory(err), Seconds: time.Since(start).Seconds()})
	}
	return results, nil
}

// isOutOfMemory reports whether err comes from a simulation stopped by
// the memory guard.
func isOutOfMemory(err error) bool {
	var oom *hostmem.OutOfMemoryError
	return errors.As(err, &oom)
}

// Module is @kernbench//testing.star for tests in folder dir; place, when
// set, refuses an algorithm file the tests may not read.
func Module(dir string, o Options, place func(string) error) starlark.StringDict {
	return starlark.StringDict{
		"run_kernel_in_mock": starlark.NewBuiltin("run_kernel_in_mock", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return runKernelInMock(dir, o, place, th, b, args, kw)
		}),
		"run_l3": starlark.NewBuiltin("run_l3", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return runL3(o, th, b, args, kw)
		}),
	}
}

func runKernelInMock(dir string, o Options, place func(string) error, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var (
		path                        string
		world                       = 4
		count                       = 1024
		dt                          = "f32"
		collective, topology, redop string
		params                      *starlark.Dict
		schedules                   = 1
		seed                        = 0
		inPlace                     bool
		root                        = 0
		sets                        *starlark.List
		timingOnly                  bool
	)
	if err := starlark.UnpackArgs(b.Name(), args, kw, "path", &path, "world_size?", &world, "count?", &count, "dtype?", &dt,
		"collective?", &collective, "topology?", &topology, "redop?", &redop, "params?", &params,
		"schedules?", &schedules, "seed?", &seed, "in_place?", &inPlace, "root?", &root, "set?", &sets, "timing_only?", &timingOnly); err != nil {
		return nil, err
	}
	// Read as "not given", world_size = 0 ran the configuration's world
	// size (8) and schedules = 0 one schedule.
	if world < 1 {
		return nil, fmt.Errorf("%s: world_size must be >= 1 (got %d)", mockCall(b.Name(), args, kw), world)
	}
	if schedules < 1 {
		return nil, fmt.Errorf("%s: schedules must be >= 1 (got %d)", mockCall(b.Name(), args, kw), schedules)
	}
	// world_size is the second parameter: given positionally too.
	rootGiven, redopGiven, worldGiven := false, false, len(args) > 1
	for _, kv := range kw {
		switch k, _ := starlark.AsString(kv[0]); k {
		case "root":
			rootGiven = true
		case "redop":
			redopGiven = true
		case "world_size":
			worldGiven = true
		}
	}
	mo := mock.Options{Path: path, Dir: dir, WorldSize: world, WorldSizeGiven: worldGiven, RootGiven: rootGiven, RedOpGiven: redopGiven, Count: int64(count), DType: dt, Collective: collective,
		Topology: topology, RedOp: redop, InPlace: inPlace, Root: root, Schedules: schedules, Seed: uint64(seed), TimingOnly: timingOnly,
		Env: o.Env, Embedded: o.Embedded, Stderr: o.Stderr, MaxSteps: o.MaxSteps, Watchdog: o.watchdog, MaxMemory: o.MaxMemory,
		LoadPath: o.LoadPath, CheckPlace: place}
	if params != nil {
		for _, kv := range params.Items() {
			if _, ok := kv[0].(starlark.String); !ok {
				return nil, fmt.Errorf("%s: params keys must be strings, got %s", mockCall(b.Name(), args, kw), kv[0].Type())
			}
			mo.Params = append(mo.Params, starlark.Tuple{kv[0], kv[1]})
		}
	}
	if sets != nil {
		for i := 0; i < sets.Len(); i++ {
			s, ok := starlark.AsString(sets.Index(i))
			if !ok {
				return nil, fmt.Errorf("%s: set must be a list of \"key.path=value\" strings", mockCall(b.Name(), args, kw))
			}
			mo.Sets = append(mo.Sets, s)
		}
	}
	res, err := mock.RunKernel(mo)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mockCall(b.Name(), args, kw), err)
	}
	if timingOnly {
		// No bytes were moved: there are no outputs to check.
		return starlarkstruct.FromStringDict(starlark.String("mock_result"), starlark.StringDict{
			"wrong":            starlark.None,
			"first_wrong":      starlark.None,
			"wrong_ranges":     starlark.None,
			"sendbuf_written":  starlark.None,
			"sends":            starlark.MakeInt64(res.Sends),
			"recvs":            starlark.MakeInt64(res.Recvs),
			"outputs":          starlark.None,
			"schedules":        starlark.MakeInt(res.Schedules),
			"failing_schedule": starlark.MakeInt(-1),
		}), nil
	}
	outs := make([]starlark.Value, len(res.Outputs))
	for r, buf := range res.Outputs {
		n := len(buf) / res.DType.Size()
		vals := make([]starlark.Value, n)
		for i := range vals {
			if res.DType.IsFloat() {
				vals[i] = starlark.Float(dtype.Get(res.DType, buf, i))
			} else {
				vals[i] = starlark.MakeInt64(dtype.GetInt(res.DType, buf, i))
			}
		}
		outs[r] = starlark.NewList(vals)
	}
	firstWrong := starlark.Value(starlark.None)
	if fw := res.FirstWrong; fw != nil {
		firstWrong = starlarkstruct.FromStringDict(starlark.String("wrong_element"), starlark.StringDict{
			"rank": starlark.MakeInt(fw.Rank), "index": starlark.MakeInt(fw.Index),
			"got": starlark.String(fw.Got), "want": starlark.String(fw.Want),
		})
	}
	ranges := make([]starlark.Value, 0, len(res.WrongRanges))
	for _, rw := range res.WrongRanges {
		rs := make([]starlark.Value, len(rw.Ranges))
		for i, g := range rw.Ranges {
			rs[i] = starlarkstruct.FromStringDict(starlark.String("wrong_range"), starlark.StringDict{
				"start": starlark.MakeInt(g.Start), "end": starlark.MakeInt(g.End), "sentinel": starlark.Bool(g.Sentinel),
			})
		}
		ranges = append(ranges, starlarkstruct.FromStringDict(starlark.String("rank_wrong"), starlark.StringDict{
			"rank": starlark.MakeInt(rw.Rank), "wrong": starlark.MakeInt(rw.Wrong),
			"ranges": starlark.NewList(rs), "more_ranges": starlark.MakeInt(rw.More),
		}))
	}
	written := make([]starlark.Value, len(res.SendWritten))
	for i, r := range res.SendWritten {
		written[i] = starlark.MakeInt(r)
	}
	return starlarkstruct.FromStringDict(starlark.String("mock_result"), starlark.StringDict{
		"first_wrong":      firstWrong,
		"wrong_ranges":     starlark.NewList(ranges),
		"sendbuf_written":  starlark.NewList(written),
		"wrong":            starlark.MakeInt64(res.Wrong),
		"sends":            starlark.MakeInt64(res.Sends),
		"recvs":            starlark.MakeInt64(res.Recvs),
		"outputs":          starlark.NewList(outs),
		"schedules":        starlark.MakeInt(res.Schedules),
		"failing_schedule": starlark.MakeInt(res.FailingSchedule),
	}), nil
}

// mockCall is the run_kernel_in_mock call as the test made it, its
// arguments' values written out ("run_kernel_in_mock("algo.star",
// world_size=5, count=37)"): the failure of a call made in a loop says
// which case failed, and the call reruns it. A value's text is cut at
// maxArgText characters.
func mockCall(name string, args starlark.Tuple, kw []starlark.Tuple) string {
	const maxArgText = 60
	text := func(v starlark.Value) string {
		s := v.String()
		if r := []rune(s); len(r) > maxArgText {
			s = string(r[:maxArgText]) + "…"
		}
		return s
	}
	parts := make([]string, 0, len(args)+len(kw))
	for _, a := range args {
		parts = append(parts, text(a))
	}
	for _, kv := range kw {
		k, _ := starlark.AsString(kv[0])
		parts = append(parts, k+"="+text(kv[1]))
	}
	return name + "(" + strings.Join(parts, ", ") + ")"
}

// predeclared are the names every *_test.star file sees: assert and the
// L3/L2 constants and helpers (NotifyOp, WaitCmp, Opcode, pack_u64, …).
func predeclared(assert starlark.Value) starlark.StringDict {
	d := orch.Predeclared()
	d["assert"] = assert
	return d
}

// runL3 is run_l3(main, config={}): main(orch) on a fresh simulated machine,
// returning None when main and the L2 work it submitted have finished. An
// error raised in main or an L2 function is raised again (so assert.fails
// can match it); config holds --set style overrides ("key.path" → value).
func runL3(o Options, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var fn starlark.Callable
	var cfg *starlark.Dict
	if err := starlark.UnpackArgs(b.Name(), args, kw, "main", &fn, "config?", &cfg); err != nil {
		return nil, err
	}
	var sets []string
	if cfg != nil {
		for _, kv := range cfg.Items() {
			k, ok := starlark.AsString(kv[0])
			if !ok {
				return nil, fmt.Errorf("%s: config keys must be strings, got %s", b.Name(), kv[0].Type())
			}
			v := kv[1].String()
			if s, ok := starlark.AsString(kv[1]); ok {
				v = s
			} else if bv, ok := kv[1].(starlark.Bool); ok {
				v = strings.ToLower(bv.String())
			}
			sets = append(sets, k+"="+v)
		}
	}
	if err := ccl.RunL3(fn, th, sets, o.Embedded, &script.Loader{Src: script.Source{Env: o.Env}, MaxSteps: o.MaxSteps, Watchdog: o.watchdog, MaxMemory: o.MaxMemory}); err != nil {
		msg := err.Error()
		var f *report.Failure
		if errors.As(err, &f) && f.Detail != "" && f.Detail != f.Msg {
			msg += "\n" + f.Detail
		}
		return nil, &runL3Error{msg: b.Name() + ": " + msg, err: err}
	}
	return starlark.None, nil
}

// runL3Error is run_l3's failure raised again in the test: the report's
// text (message and detail), and the failure underneath for errors.As
// (the kind's classifier, the memory guard's stop).
type runL3Error struct {
	msg string
	err error
}

func (e *runL3Error) Error() string { return e.msg }
func (e *runL3Error) Unwrap() error { return e.err }

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
