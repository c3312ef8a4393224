// Package script loads and runs kernbench .star files: module resolution and
// the load() cache (with cycle detection), the predeclared names every file
// sees (struct, json, math, print), step limits, and the conversion of
// Starlark errors into messages with positions and backtraces.
//
// It depends on go.starlark.net only; the tl and host builtins live in
// sibling packages and are passed in as extra predeclared names.
package script

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.starlark.net/lib/json"
	"go.starlark.net/lib/math"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"kernbench/engine/spelling"
)

// FileOptions are the dialect options of every kernbench file: while, set,
// recursion and top-level control flow are allowed (algorithm authors write
// ordinary loops and helpers).
func FileOptions() *syntax.FileOptions {
	return &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}
}

// Source reads script files. Relative paths are tried on disk first (in
// Env.Dir), then in the embedded copy of the shipped algorithms and benches.
type Source struct {
	Env      Env   // the working directory and environment of the command
	Embedded fs.FS // may be nil
	// Overlay holds files made by the program itself (e.g. the kernel that
	// runs an imported MSCCL schedule), found by exact name before the
	// disk and the embedded copy.
	Overlay map[string][]byte
}

// ReadFile returns the contents of name, or an error naming it.
func (s Source) ReadFile(name string) ([]byte, error) {
	if data, ok := s.Overlay[name]; ok {
		return data, nil
	}
	data, err := s.Env.ReadInput(name)
	if err == nil {
		return data, nil
	}
	if s.Embedded != nil && !filepath.IsAbs(name) && isNotExist(err) {
		if d, e2 := fs.ReadFile(s.Embedded, path.Clean(filepath.ToSlash(name))); e2 == nil {
			return d, nil
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file", name)
	}
	return nil, err
}

// Exists reports whether ReadFile would find name.
func (s Source) Exists(name string) bool {
	if _, ok := s.Overlay[name]; ok {
		return true
	}
	if _, err := s.Env.Stat(name); err == nil {
		return true
	}
	if s.Embedded != nil && !filepath.IsAbs(name) {
		_, err := fs.Stat(s.Embedded, path.Clean(filepath.ToSlash(name)))
		return err == nil
	}
	return false
}

// StarFiles names the .star files of folder dir that ReadFile finds, on
// disk and in the embedded copy, without their .star and leaving out
// test files (*_test.star): what a "no such file" suggests instead.
// Sorted, each once.
func (s Source) StarFiles(dir string) []string {
	seen := map[string]bool{}
	add := func(name string, isDir bool) {
		if !isDir && strings.HasSuffix(name, ".star") && !strings.HasSuffix(name, "_test.star") {
			seen[strings.TrimSuffix(name, ".star")] = true
		}
	}
	if !s.Env.NoDisk {
		if ents, err := os.ReadDir(s.Env.Path(dir)); err == nil {
			for _, e := range ents {
				add(e.Name(), e.IsDir())
			}
		}
	}
	if s.Embedded != nil && !filepath.IsAbs(dir) {
		if ents, err := fs.ReadDir(s.Embedded, path.Clean(filepath.ToSlash(dir))); err == nil {
			for _, e := range ents {
				add(e.Name(), e.IsDir())
			}
		}
	}
	return sortedKeys(seen)
}

// Loader executes modules and caches them; load() goes through it.
type Loader struct {
	Src Source
	// Predeclared names in addition to the standard ones (struct, json, math).
	Predeclared starlark.StringDict
	// Builtin modules addressed as "@kernbench//NAME".
	Builtin map[string]starlark.StringDict
	// Search is the folder tried after the loading file's own folder.
	Search string
	// Fallback is the folder tried after Search (the shipped algorithms
	// folder when Search is a local ccl.yaml's).
	Fallback string
	// LoadPath are folders the user named (--load-path): load() tries
	// them after the loading file's folder, before Search, and may read
	// the files under them.
	LoadPath []string
	// MaxSteps bounds each file's top-level execution (0 = unbounded).
	MaxSteps uint64
	// Stderr receives print() output.
	Stderr io.Writer
	// PrintPrefix, when set, adds context such as "[t=… rank=…] " to print.
	PrintPrefix func(th *starlark.Thread) string
	// Watchdog, when set, cancels every thread of this loader at its
	// wall-clock limit (--timeout).
	Watchdog *Watchdog
	// MemoryWatch, when set, cancels every thread of this loader when the
	// host memory passes --max-memory (ccl's memory guard fires it).
	MemoryWatch *Watchdog
	// MaxMemory bounds the host memory of the simulations this loader's
	// code starts (run_l3 in kernbench test; 0 = none): --max-memory.
	MaxMemory int64

	cache map[string]*entry
	// entries are the folders of the files loaded from Go (Load): the
	// script's folder trees, where its load() statements may read.
	entries []string
}

type entry struct {
	globals starlark.StringDict
	err     error
	loading bool
}

// Predeclared returns the names every file sees.
func (l *Loader) predeclared() starlark.StringDict {
	d := starlark.StringDict{
		"fail":   failBuiltin,
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
		"json":   json.Module,
		"math":   math.Module,
	}
	for k, v := range l.Predeclared {
		d[k] = v
	}
	return d
}

// printSinkKey holds a thread's PrintSink (SetPrintSink).
const printSinkKey = "kernbench/script.printSink"

// A PrintSink takes a thread's print line (its position, prefix and
// message, with its newline) bound for w instead of writing it there: a
// partitioned run buffers the lines of each partition and writes them in
// an order that does not depend on its threads.
type PrintSink func(w io.Writer, line string)

// SetPrintSink sends th's print lines to sink (nil: to the loader's
// Stderr, as before). A loader without Stderr prints nothing either way.
func SetPrintSink(th *starlark.Thread, sink PrintSink) { th.SetLocal(printSinkKey, sink) }

// NewThread makes a thread whose print goes to Stderr with the caller's
// position, whose load uses this loader, and which is bounded by MaxSteps.
func (l *Loader) NewThread(name string) *starlark.Thread {
	th := &starlark.Thread{Name: name, Load: l.load}
	th.SetLocal(stateKey, &cancelRecord{})
	th.Print = func(th *starlark.Thread, msg string) {
		if l.Stderr == nil {
			return
		}
		// print called from Go (no Starlark caller) has no position.
		pos := th.Name
		if th.CallStackDepth() > 1 {
			pos = th.CallFrame(1).Pos.String()
		}
		prefix := ""
		if l.PrintPrefix != nil {
			prefix = l.PrintPrefix(th)
		}
		line := fmt.Sprintf("%s: %s%s\n", pos, prefix, msg)
		if sink, ok := th.Local(printSinkKey).(PrintSink); ok && sink != nil {
			sink(l.Stderr, line)
			return
		}
		io.WriteString(l.Stderr, line)
	}
	sched := &stepSchedule{budget: l.MaxSteps, nextPoll: noPoll}
	if l.MemoryWatch != nil && l.MemoryWatch.poll != nil {
		sched.poll = l.MemoryWatch.poll
		sched.nextPoll = coldPollSteps
	}
	if sched.budget > 0 || sched.poll != nil {
		th.SetLocal(scheduleKey, sched)
		th.OnMaxSteps = func(th *starlark.Thread) {
			steps := th.ExecutionSteps()
			if steps >= sched.nextPoll {
				every := uint64(coldPollSteps)
				if sched.poll(&sched.seen) {
					every = hotPollSteps
				}
				sched.nextPoll = steps + every
			}
			if sched.budget > 0 && steps >= sched.budget {
				l.overBudget(th, sched)
			}
			sched.arm(th)
		}
		sched.arm(th)
	}
	l.Watchdog.Watch(th)
	l.MemoryWatch.Watch(th)
	return th
}

// overBudget is the step limit's turn: th ran its budget of steps.
// go.starlark.net gives a loop's back edge the position of the function
// itself or of the instruction laid out before it, which may be in a
// branch after the loop that never runs: a few more steps are allowed so
// the backtrace points into a loop of the function, not at the def line
// or elsewhere. A loop of nothing but jumps (while True: pass) never
// moves: then the message names the loops.
func (l *Loader) overBudget(th *starlark.Thread, sched *stepSchedule) {
	reason := "too many steps"
	if th.CallStackDepth() > 0 {
		fn, isFn := th.DebugFrame(0).Callable().(*starlark.Function)
		pos := th.CallFrame(0).Pos
		if sched.grace == 0 {
			sched.first = pos
			if isFn {
				sched.loops = l.loopSpans(fn)
			}
		} else if pos != sched.first {
			sched.moved = true
		}
		if isFn && sched.grace < 16 && (!sched.moved || pos == fn.Position() || !sched.inLoop(pos)) {
			sched.grace++
			sched.budget = th.ExecutionSteps() + 1
			return
		}
		if isFn && !sched.moved {
			reason += l.loopsOf(fn)
		}
	}
	cancel(th, ErrStepLimit, reason)
}

// resolvePath finds a load() target: relative to the loading file's folder,
// then in the --load-path folders, then in the search folders.
func (l *Loader) resolvePath(from, module string) string {
	if filepath.IsAbs(module) {
		return module
	}
	cand := filepath.Join(filepath.Dir(from), module)
	if l.Src.Exists(cand) {
		return cand
	}
	for _, dir := range append(slices.Clone(l.LoadPath), l.Search, l.Fallback) {
		if dir == "" {
			continue
		}
		if alt := filepath.Join(dir, module); l.Src.Exists(alt) {
			return alt
		}
	}
	return cand
}

func (l *Loader) load(th *starlark.Thread, module string) (starlark.StringDict, error) {
	if strings.HasPrefix(module, "@kernbench//") {
		name := strings.TrimPrefix(module, "@kernbench//")
		if m, ok := l.Builtin[name]; ok {
			return m, nil
		}
		return nil, fmt.Errorf("load: unknown builtin module %q (have: %s)", module, strings.Join(sortedKeys(l.Builtin), ", "))
	}
	at := th.CallFrame(0).Pos
	if !strings.HasSuffix(module, ".star") {
		return nil, &LoadRefusedError{At: at, Module: module, Reason: fmt.Sprintf("load() reads .star files only, and %s is not one (nothing of it was read)", module)}
	}
	p := l.resolvePath(at.Filename(), module)
	if err := l.CheckPlace(p); err != nil {
		err.At, err.Module = at, module
		return nil, err
	}
	return l.exec(p)
}

// LoadRefusedError is a load() (or a file named by a script, as
// run_kernel_in_mock's) that reads outside the folders a script may read:
// its message names the statement and why, never anything of the file.
type LoadRefusedError struct {
	At     syntax.Position // the load statement ("" outside one)
	Module string          // as the script wrote it
	Reason string
}

func (e *LoadRefusedError) Error() string {
	if e.At.IsValid() {
		return fmt.Sprintf("%s: refused: %s", e.At, e.Reason)
	}
	return "refused: " + e.Reason
}

// CheckPlace refuses a file on disk outside the folders a script may read:
// the folder tree of each file loaded from Go (the script the user named:
// an algorithm, a bench, a test file), the --load-path folders and the
// algorithms folders (Search, Fallback) that stand for the shipped
// library, each after its links; links are followed, so a link inside
// those folders to a file outside them is refused. A file of Src.Overlay
// or one not on disk (the embedded library, or no file at all: reading it
// says which) passes.
func (l *Loader) CheckPlace(p string) *LoadRefusedError {
	if _, ok := l.Src.Overlay[p]; ok {
		return nil
	}
	full := l.Src.Env.Path(p)
	if _, err := l.Src.Env.Stat(p); err != nil {
		return nil
	}
	real, err := filepath.EvalSymlinks(full)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return &LoadRefusedError{Module: p, Reason: fmt.Sprintf("%s cannot be placed (%v); nothing of it was read", p, err)}
	}
	var entries, paths, library []string
	for _, dir := range l.allowedDirs() {
		root, err := filepath.EvalSymlinks(l.Src.Env.Path(dir))
		if err == nil {
			root, err = filepath.Abs(root)
		}
		if err != nil {
			continue // not on disk
		}
		if rel, err := filepath.Rel(root, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil
		}
		shown := filepath.Clean(dir) + string(filepath.Separator)
		switch {
		case slices.Contains(l.entries, dir):
			entries = append(entries, shown)
		case slices.Contains(l.LoadPath, dir):
			paths = append(paths, shown)
		default:
			library = append(library, shown)
		}
	}
	where := p
	if abs, err := filepath.Abs(full); err != nil || abs != real {
		where = fmt.Sprintf("%s (which leads to %s)", p, real)
	}
	var allowed []string
	switch len(entries) {
	case 0:
	case 1:
		allowed = append(allowed, "the script's folder "+entries[0])
	default:
		allowed = append(allowed, "the scripts' folders "+strings.Join(entries, ", "))
	}
	if len(paths) > 0 {
		allowed = append(allowed, "--load-path "+strings.Join(paths, ", "))
	}
	if len(library) > 0 {
		allowed = append(allowed, "the algorithms folder "+strings.Join(library, ", "))
	}
	list := "the shipped library"
	if len(allowed) > 0 {
		list = strings.Join(allowed, ", ") + " and " + list
	}
	return &LoadRefusedError{Module: p, Reason: fmt.Sprintf("%s is outside %s (nothing of it was read); --load-path FOLDER lets scripts load from a folder of yours",
		where, list)}
}

// allowedDirs are the folders CheckPlace accepts files under, as given:
// the scripts' folders, --load-path, then the algorithms folders.
func (l *Loader) allowedDirs() []string {
	var out []string
	for _, d := range slices.Concat(l.entries, l.LoadPath, []string{l.Search, l.Fallback}) {
		if d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// Load executes the file at path once and returns its globals: the file a
// command runs (the user named it, or ccl.yaml does), whose folder tree
// its load() statements may then read. A file that loads itself, directly
// or through others, is a "cycle in load graph".
func (l *Loader) Load(p string) (starlark.StringDict, error) {
	if _, ok := l.Src.Overlay[p]; !ok {
		if dir := filepath.Dir(p); !slices.Contains(l.entries, dir) {
			l.entries = append(l.entries, dir)
		}
	}
	return l.exec(p)
}

// exec executes the file at path once (cached) and returns its globals.
func (l *Loader) exec(p string) (starlark.StringDict, error) {
	if l.cache == nil {
		l.cache = map[string]*entry{}
	}
	key := filepath.Clean(p)
	if e, ok := l.cache[key]; ok {
		if e.loading {
			return nil, fmt.Errorf("cycle in load graph: %s is still loading", p)
		}
		return e.globals, e.err
	}
	e := &entry{loading: true}
	l.cache[key] = e
	data, err := l.Src.ReadFile(p)
	if err == nil {
		th := l.NewThread("load " + p)
		pre := l.predeclared()
		var prog *starlark.Program
		if prog, err = compile(p, data, pre); err == nil {
			// (What starlark.ExecFileOptions does after compiling.)
			e.globals, err = prog.Init(th, pre)
			e.globals.Freeze()
		}
		err = Stopped(th, Annotate(err, data, pre.Keys()))
		if _, made := l.Src.Overlay[p]; err != nil && !made && !strings.HasSuffix(p, ".star") {
			err = notStarlark(p, err)
		}
	}
	e.err, e.loading = err, false
	return e.globals, err
}

// notStarlark is the error of a file whose name does not end in .star and
// that did not run as Starlark: Starlark's own messages quote the text
// they stumble on (an identifier, a string), which for a file that is not
// Starlark (a credentials file, a key) would copy its content into a
// report. Its step limit and timeout are kept (they quote nothing).
func notStarlark(p string, err error) error {
	if IsStepLimit(err) || IsTimeout(err) || IsMemory(err) {
		return err
	}
	what := "it fails while running"
	var se syntax.Error
	var el resolve.ErrorList
	switch {
	case errors.As(err, &se):
		what = "it does not parse"
	case errors.As(err, &el):
		what = "it does not resolve"
	}
	return fmt.Errorf("%s: not a Starlark file: its name does not end in .star and %s as Starlark (kernbench shows nothing of its content; name it .star to see the errors)", p, what)
}

// Annotate adds kernbench hints to errors from parsing src: a syntax error at
// ".load" gets the tl.fetch hint, and a name the file never defines the
// nearest of Starlark's builtins, the predeclared names and the file's
// own names ("undefined: rnage (did you mean range?)").
func Annotate(err error, src []byte, predeclared []string) error {
	var se syntax.Error
	if errors.As(err, &se) && se.Msg == "not an identifier" {
		if hasLoadAttr(src, se.Pos) {
			se.Msg += `: use tl.fetch(ptr): "load" is a Starlark keyword`
			return se
		}
	}
	var el resolve.ErrorList
	if errors.As(err, &el) {
		var names []string
		for i, e := range el {
			name, ok := strings.CutPrefix(e.Msg, "undefined: ")
			if !ok || strings.ContainsAny(name, " (") {
				continue
			}
			if names == nil {
				names = definedNames(src, predeclared)
			}
			if near := spelling.Closest(name, slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == name })); near != "" {
				el[i].Msg += fmt.Sprintf(" (did you mean %s?)", near)
			}
		}
		return el
	}
	return err
}

// definedNames are the names a file's code may use: Starlark's builtins,
// the predeclared ones and every identifier the file spells (its own
// globals, parameters and locals among them), sorted.
func definedNames(src []byte, predeclared []string) []string {
	seen := map[string]bool{}
	for n := range starlark.Universe {
		seen[n] = true
	}
	for _, n := range predeclared {
		seen[n] = true
	}
	if f, err := FileOptions().Parse("", src, 0); err == nil {
		syntax.Walk(f, func(n syntax.Node) bool {
			if id, ok := n.(*syntax.Ident); ok {
				seen[id.Name] = true
			}
			return true
		})
	}
	return sortedKeys(seen)
}

func hasLoadAttr(src []byte, pos syntax.Position) bool {
	lines := strings.Split(string(src), "\n")
	if int(pos.Line) < 1 || int(pos.Line) > len(lines) {
		return false
	}
	// The parser reports the column just after the keyword: look back for
	// ". load" (spaces allowed) ending there.
	line := lines[pos.Line-1]
	c := int(pos.Col) - 1
	if c < 0 || c > len(line) {
		return false
	}
	before := strings.TrimRight(line[:c], " \t")
	if !strings.HasSuffix(before, "load") {
		return false
	}
	return strings.HasSuffix(strings.TrimRight(strings.TrimSuffix(before, "load"), " \t"), ".")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Format renders an error for the user: every resolve error on its own line,
// Starlark backtraces for runtime errors, and the plain message otherwise.
func Format(err error) string {
	var el resolve.ErrorList
	if errors.As(err, &el) {
		var b strings.Builder
		for i, e := range el {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(e.Error())
		}
		return b.String()
	}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		// go.starlark.net's EvalError.Backtrace layout, with runs of one
		// repeated frame collapsed (frameLines).
		stack := ee.CallStack
		suffix := ""
		if last := len(stack) - 1; last >= 0 && stack[last].Pos.Filename() == "<builtin>" {
			suffix = " in " + stack[last].Name
			stack = stack[:last]
		}
		var b strings.Builder
		if len(stack) > 0 {
			b.WriteString("Traceback (most recent call last):\n")
		}
		for _, l := range frameLines(stack) {
			b.WriteString("  " + l + "\n")
		}
		fmt.Fprintf(&b, "Error%s: %s", suffix, ee.Msg)
		return b.String()
	}
	return err.Error()
}

// LoadFailure splits an error raised while a file's top level ran (its
// own statements, or those of a file it load()s) into the line a report
// leads with, "file:line:col: message" at the innermost Starlark frame
// that failed, and the Starlark traceback that follows it: the frames of
// every load() on the way, outermost first, as Traceback prints them.
// A load()ed file that does not parse leads with its syntax error. ok is
// false when err is no Starlark evaluation error (a syntax error of the
// file itself, a missing file) or holds resolve errors (of the file or one
// it loads, every one listed): Format renders those.
func LoadFailure(err error) (msg, traceback string, backtrace []string, ok bool) {
	var ee *starlark.EvalError
	var el resolve.ErrorList
	if !errors.As(err, &ee) || errors.As(err, &el) {
		return "", "", nil, false
	}
	var stack starlark.CallStack
	for {
		stack = append(stack, ee.CallStack...)
		var inner *starlark.EvalError
		if !errors.As(ee.Unwrap(), &inner) {
			break
		}
		ee = inner
	}
	var se syntax.Error
	if errors.As(ee.Unwrap(), &se) {
		msg = se.Error()
	} else {
		// The innermost frame of the script's own code: a builtin that
		// raised the error names itself in the message ("int: …").
		var at syntax.Position
		for i := len(ee.CallStack) - 1; i >= 0; i-- {
			if p := ee.CallStack[i].Pos; p.Filename() != "<builtin>" {
				at = p
				break
			}
		}
		msg = ee.Msg
		if at.IsValid() {
			msg = at.String() + ": " + msg
			if i := strings.Index(ee.Msg, at.String()+": "); i >= 0 {
				// A refused load() names its statement already
				// ("f.star:1:1: refused: …"): from there on.
				msg = ee.Msg[i:]
			}
		}
	}
	if len(stack) > 0 {
		traceback = "Traceback (most recent call last):\n  " + strings.Join(frameLines(stack), "\n  ")
	}
	for _, fr := range stack {
		backtrace = append(backtrace, fmt.Sprintf("%s: in %s", fr.Pos, fr.Name))
	}
	return msg, traceback, backtrace, true
}

// FormatLoad renders a load error for the user: LoadFailure's message with
// its traceback on the lines after it, or Format's text for any other
// error.
func FormatLoad(err error) string {
	msg, tb, _, ok := LoadFailure(err)
	if !ok {
		return Format(err)
	}
	if tb == "" {
		return msg
	}
	return msg + "\n" + tb
}

// Traceback is err's Starlark call stack without its message, for a report
// whose first line gives the message already (Format repeats it on its last
// line): "Traceback (most recent call last):" and a line per frame, the
// builtin that raised the error last ("<builtin>: in tl.send", as in
// Backtrace). "" when err is no EvalError or has no frames.
func Traceback(err error) string {
	var ee *starlark.EvalError
	if !errors.As(err, &ee) || len(ee.CallStack) == 0 {
		return ""
	}
	return "Traceback (most recent call last):\n  " + strings.Join(frameLines(ee.CallStack), "\n  ")
}

// shownRepeats is how many consecutive identical frames a backtrace shows
// before it says how many more there are.
const shownRepeats = 3

// frameLines renders a call stack as "file:line:col: in fn" lines, a run of
// more than shownRepeats identical frames (deep recursion: a stack
// overflow is 100000 of them) cut to shownRepeats lines and one
// "[the frame above repeats N more times]", as Python does.
func frameLines(stack starlark.CallStack) []string {
	var out []string
	for i := 0; i < len(stack); {
		line := fmt.Sprintf("%s: in %s", stack[i].Pos, stack[i].Name)
		j := i + 1
		for j < len(stack) && stack[j] == stack[i] {
			j++
		}
		for k := 0; k < min(j-i, shownRepeats); k++ {
			out = append(out, line)
		}
		if n := j - i - shownRepeats; n > 0 {
			out = append(out, fmt.Sprintf("[the frame above repeats %d more times]", n))
		}
		i = j
	}
	return out
}

// Backtrace lists every frame of an EvalError as "file:line:col: in fn",
// for --json (a list a program reads: nothing is collapsed there, unlike
// Format's text).
func Backtrace(err error) []string {
	var ee *starlark.EvalError
	if !errors.As(err, &ee) {
		return nil
	}
	var out []string
	for _, fr := range ee.CallStack {
		out = append(out, fmt.Sprintf("%s: in %s", fr.Pos, fr.Name))
	}
	return out
}

// IsLoadError reports whether err happened before any simulation: syntax or
// resolve errors, missing files, load cycles.
func IsLoadError(err error) bool {
	var se syntax.Error
	var el resolve.ErrorList
	return errors.As(err, &se) || errors.As(err, &el)
}

// loopsOf names the loops of fn, for a step limit that Starlark reports at
// fn's def line: " in the loop at f.star:3:5" or " in one of the loops at
// …" ("" when the source cannot be read).
func (l *Loader) loopsOf(fn *starlark.Function) string {
	var loops []string
	for _, n := range l.loopNodes(fn) {
		start, _ := n.Span()
		loops = append(loops, start.String())
	}
	switch len(loops) {
	case 0:
		return ""
	case 1:
		return " in the loop at " + loops[0]
	}
	return " in one of the loops at " + strings.Join(loops, ", ")
}

// loopNodes are the while and for statements of fn, outside the functions
// nested in it (nil when the source cannot be read).
func (l *Loader) loopNodes(fn *starlark.Function) []syntax.Node {
	pos := fn.Position()
	data, err := l.Src.ReadFile(pos.Filename())
	if err != nil {
		return nil
	}
	f, err := FileOptions().Parse(pos.Filename(), data, 0)
	if err != nil {
		return nil
	}
	var loops []syntax.Node
	syntax.Walk(f, func(n syntax.Node) bool {
		if def, ok := n.(*syntax.DefStmt); ok && def.Name.NamePos.Line == pos.Line {
			syntax.Walk(def, func(n syntax.Node) bool {
				switch n := n.(type) {
				case *syntax.DefStmt, *syntax.LambdaExpr:
					return n == def // nested functions have their own frames
				case *syntax.WhileStmt, *syntax.ForStmt:
					loops = append(loops, n)
				}
				return true
			})
			return false
		}
		return true
	})
	return loops
}

// loopSpans are the source ranges of fn's loops (loopNodes).
func (l *Loader) loopSpans(fn *starlark.Function) [][2]syntax.Position {
	var spans [][2]syntax.Position
	for _, n := range l.loopNodes(fn) {
		start, end := n.Span()
		spans = append(spans, [2]syntax.Position{start, end})
	}
	return spans
}

// programs holds compiled files by name, content and predeclared names. A
// mock test runs a kernel under many schedules, each a fresh run loading
// the same files, and compiling them was a third of a small run's CPU; a
// compiled program is immutable and runs in any number of modules.
var programs struct {
	sync.Mutex
	m map[programKey]compiled
}

type programKey struct{ name, src, predeclared string }

type compiled struct {
	prog *starlark.Program
	err  error
}

// maxPrograms bounds the cache (a long kernbench test of many files).
const maxPrograms = 256

// compile is starlark.SourceProgramOptions, cached in programs.
func compile(name string, src []byte, predeclared starlark.StringDict) (*starlark.Program, error) {
	key := programKey{name: name, src: string(src), predeclared: strings.Join(predeclared.Keys(), ",")}
	programs.Lock()
	defer programs.Unlock()
	if c, ok := programs.m[key]; ok {
		return c.prog, c.err
	}
	_, prog, err := starlark.SourceProgramOptions(FileOptions(), name, src, predeclared.Has)
	if programs.m == nil || len(programs.m) >= maxPrograms {
		programs.m = map[programKey]compiled{}
	}
	programs.m[key] = compiled{prog: prog, err: err}
	return prog, err
}

// ParamCounts is fn's number of named parameters (without *args and
// **kwargs) and how many of them may be passed positionally.
func ParamCounts(fn *starlark.Function) (named, positional int) {
	named = fn.NumParams()
	if fn.HasKwargs() {
		named--
	}
	if fn.HasVarargs() {
		named--
	}
	return named, named - fn.NumKwonlyParams()
}
