package script_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"

	"kernbench/starlark/script"
)

// writeFiles creates files (slash-separated names) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// str returns the string global name of g.
func str(t *testing.T, g starlark.StringDict, name string) string {
	t.Helper()
	s, ok := g[name].(starlark.String)
	if !ok {
		t.Fatalf("global %s = %v, want a string", name, g[name])
	}
	return string(s)
}

// lines splits print output into lines.
func lines(b *bytes.Buffer) []string {
	s := strings.TrimSuffix(b.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// load() resolves relative to the loading file's folder first, then in the
// Search folder; files found in the search folder load relative to their own
// folder; "../x.star" names the same module as "x.star" from the parent.
func TestLoadRelativeThenSearch(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"algos/main.star": `
load("helper.star", "who")
load("shared.star", "shared")
load("sub/deep.star", "deep")
WHO, SHARED, DEEP = who, shared, deep
`,
		"algos/helper.star":   "print('helper executed')\nwho = 'local'\n",
		"algos/sub/deep.star": "load('../helper.star', 'who')\ndeep = 'deep:' + who\n",
		"search/helper.star":  "who = 'search'\n", // shadowed by algos/helper.star
		"search/shared.star":  "load('inner.star', 'inner')\nshared = 'search:' + inner\n",
		"search/inner.star":   "inner = 'inner'\n",
		"algos/missing.star":  "load('nope.star', 'x')\n",
	})
	var stderr bytes.Buffer
	l := &script.Loader{Search: filepath.Join(root, "search"), Stderr: &stderr}
	g, err := l.Load(filepath.Join(root, "algos", "main.star"))
	if err != nil {
		t.Fatal(script.Format(err))
	}
	got := []string{str(t, g, "WHO"), str(t, g, "SHARED"), str(t, g, "DEEP")}
	if diff := cmp.Diff([]string{"local", "search:inner", "deep:local"}, got); diff != "" {
		t.Errorf("WHO, SHARED, DEEP (-want +got):\n%s", diff)
	}
	if n := strings.Count(stderr.String(), "helper executed"); n != 1 {
		t.Errorf("helper.star executed %d times (via helper.star and sub/../helper.star), want once; stderr:\n%s", n, stderr.String())
	}

	_, err = l.Load(filepath.Join(root, "algos", "missing.star"))
	want := filepath.Join(root, "algos", "nope.star") + ": no such file"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("loading a missing module: error %v, want it to contain %q", err, want)
	}
	if _, err := l.Load(filepath.Join(root, "algos", "absent.star")); err == nil || !strings.Contains(err.Error(), "absent.star: no such file") {
		t.Errorf("Load of a missing file: error %v, want \"absent.star: no such file\"", err)
	}
}

// Relative paths are read from disk first, then from the embedded copy;
// load() resolution works the same inside the embedded tree.
func TestLoadEmbedded(t *testing.T) {
	emb := fstest.MapFS{
		"emb/algorithms/main.star": {Data: []byte("load('lib.star', 'lib')\nload('only.star', 'only')\nOUT = lib + '+' + only\n")},
		"emb/algorithms/lib.star":  {Data: []byte("lib = 'lib'\n")},
		"emb/search/only.star":     {Data: []byte("only = 'only'\n")},
		// Shadowed by the file on disk (the tests run in starlark/script).
		"testdata/print.star": {Data: []byte("embedded copy\n")},
	}
	src := script.Source{Embedded: emb}
	l := &script.Loader{Src: src, Search: "emb/search"}
	g, err := l.Load("emb/algorithms/main.star")
	if err != nil {
		t.Fatal(script.Format(err))
	}
	if got := str(t, g, "OUT"); got != "lib+only" {
		t.Errorf("OUT = %q, want %q", got, "lib+only")
	}

	disk, err := os.ReadFile("testdata/print.star")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := src.ReadFile("testdata/print.star"); err != nil || !bytes.Equal(got, disk) {
		t.Errorf("ReadFile(testdata/print.star) = %q, %v; want the file on disk", got, err)
	}
	if got, err := src.ReadFile("emb/search/../algorithms/lib.star"); err != nil || string(got) != "lib = 'lib'\n" {
		t.Errorf("ReadFile of an unclean embedded path = %q, %v", got, err)
	}
	for name, want := range map[string]bool{
		"testdata/print.star":      true,
		"emb/algorithms/lib.star":  true,
		"emb/nope.star":            false,
		"/emb/algorithms/lib.star": false, // absolute paths never reach the embedded copy
	} {
		if got := src.Exists(name); got != want {
			t.Errorf("Exists(%q) = %v, want %v", name, got, want)
		}
	}
	if _, err := src.ReadFile("emb/nope.star"); err == nil || err.Error() != "emb/nope.star: no such file" {
		t.Errorf("ReadFile(emb/nope.star) error = %v, want %q", err, "emb/nope.star: no such file")
	}
	if _, err := (script.Source{}).ReadFile("emb/algorithms/lib.star"); err == nil {
		t.Error("a Source without Embedded read an embedded file")
	}
}

// A module is executed once however many files load it, and a failed
// module keeps its error.
func TestLoadCache(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"main.star": "load('a.star', 'a')\nload('b.star', 'b')\nOUT = a + b\n",
		"a.star":    "load('lib.star', 'n')\na = n + 1\n",
		"b.star":    "load('lib.star', 'n')\nb = n + 2\n",
		"lib.star":  "print('lib executed')\nn = 10\n",
		"bad.star":  "print('bad executed')\nx = 1 // 0\n",
	})
	var stderr bytes.Buffer
	l := &script.Loader{Stderr: &stderr}
	g, err := l.Load(filepath.Join(root, "main.star"))
	if err != nil {
		t.Fatal(script.Format(err))
	}
	if got := g["OUT"]; got != starlark.MakeInt(23) {
		t.Errorf("OUT = %v, want 23", got)
	}
	lib1, err := l.Load(filepath.Join(root, "lib.star"))
	if err != nil {
		t.Fatal(err)
	}
	lib2, _ := l.Load(filepath.Join(root, ".", "lib.star"))
	if reflect.ValueOf(lib1).Pointer() != reflect.ValueOf(lib2).Pointer() {
		t.Error("two loads of lib.star returned different globals")
	}
	_, err1 := l.Load(filepath.Join(root, "bad.star"))
	_, err2 := l.Load(filepath.Join(root, "bad.star"))
	if err1 == nil || err1 != err2 {
		t.Errorf("loading a failing module twice: errors %v and %v, want the same cached error", err1, err2)
	}
	want := []string{filepath.Join(root, "lib.star") + ":1:6: lib executed", filepath.Join(root, "bad.star") + ":1:6: bad executed"}
	if diff := cmp.Diff(want, lines(&stderr)); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}

// A file that loads itself, directly or through others, is reported as a
// cycle instead of recursing.
func TestLoadCycle(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"a.star":    "load('b.star', 'b')\na = 1\n",
		"b.star":    "load('a.star', 'a')\nb = 2\n",
		"self.star": "load('self.star', 'x')\nx = 1\n",
		"c.star":    "load('b.star', 'b')\n",
	})
	l := &script.Loader{}
	for _, f := range []string{"a.star", "self.star"} {
		_, err := l.Load(filepath.Join(root, f))
		if err == nil || !strings.Contains(err.Error(), "cycle in load graph") {
			t.Errorf("%s: error %v, want a cycle in load graph", f, err)
		}
	}
	// b.star failed (its load of a.star was the cycle); loading it again
	// reports that, not a new cycle.
	_, err := l.Load(filepath.Join(root, "c.star"))
	if err == nil || !strings.Contains(err.Error(), "cycle in load graph") {
		t.Errorf("c.star: error %v, want b.star's cycle error", err)
	}
}

// "@kernbench//NAME" loads a builtin module; unknown names list the known
// ones.
func TestBuiltinModules(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"ok.star":      "load('@kernbench//testing.star', 'answer')\nOUT = answer\n",
		"unknown.star": "load('@kernbench//nope.star', 'x')\n",
	})
	l := &script.Loader{Builtin: map[string]starlark.StringDict{
		"testing.star": {"answer": starlark.MakeInt(42)},
		"other.star":   {},
	}}
	g, err := l.Load(filepath.Join(root, "ok.star"))
	if err != nil {
		t.Fatal(script.Format(err))
	}
	if g["OUT"] != starlark.MakeInt(42) {
		t.Errorf("OUT = %v, want 42", g["OUT"])
	}
	_, err = l.Load(filepath.Join(root, "unknown.star"))
	want := `load: unknown builtin module "@kernbench//nope.star" (have: other.star, testing.star)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want it to contain %q", err, want)
	}
}

// print goes to Stderr as "file:LINE:COL: PREFIXmsg" with the position of
// the print call; without Stderr it is dropped.
func TestPrint(t *testing.T) {
	var stderr bytes.Buffer
	l := &script.Loader{Stderr: &stderr, PrintPrefix: func(th *starlark.Thread) string {
		if r := th.Local("rank"); r != nil {
			return "[rank=" + r.(string) + "] "
		}
		return "[" + th.Name + "] "
	}}
	g, err := l.Load("testdata/print.star")
	if err != nil {
		t.Fatal(script.Format(err))
	}
	th := l.NewThread("rank 3")
	th.SetLocal("rank", "3")
	if _, err := starlark.Call(th, g["greet"], starlark.Tuple{starlark.String("again")}, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"testdata/print.star:1:6: [load testdata/print.star] top",
		"testdata/print.star:4:10: [load testdata/print.star] hello world",
		"testdata/print.star:4:10: [rank=3] hello again",
	}
	if diff := cmp.Diff(want, lines(&stderr)); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}

	// No prefix function: just the position.
	stderr.Reset()
	if _, err := (&script.Loader{Stderr: &stderr}).Load("testdata/print.star"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"testdata/print.star:1:6: top", "testdata/print.star:4:10: hello world"}, lines(&stderr)); diff != "" {
		t.Errorf("stderr without PrintPrefix (-want +got):\n%s", diff)
	}
	// No Stderr: print is dropped.
	if _, err := (&script.Loader{}).Load("testdata/print.star"); err != nil {
		t.Fatal(err)
	}
}

// MaxSteps bounds a file's top level and every thread the loader makes.
func TestMaxSteps(t *testing.T) {
	l := &script.Loader{MaxSteps: 10_000}
	_, err := l.Load("testdata/forever.star")
	if err == nil || !strings.Contains(err.Error(), "too many steps") {
		t.Fatalf("while True at top level: error %v, want \"too many steps\"", err)
	}
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"spin.star": "def spin():\n    while True:\n        pass\n"})
	g, err := l.Load(filepath.Join(root, "spin.star"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = starlark.Call(l.NewThread("spin"), g["spin"], nil, nil)
	if err == nil || !strings.Contains(err.Error(), "too many steps") {
		t.Errorf("spin() on a loader thread: error %v, want \"too many steps\"", err)
	}
}

// Format lists every resolve error on its own line, gives a backtrace for
// runtime errors and the plain message otherwise.
func TestFormat(t *testing.T) {
	l := &script.Loader{}
	_, err := l.Load("testdata/resolve_errors.star")
	if err == nil {
		t.Fatal("resolve_errors.star loaded")
	}
	want := "testdata/resolve_errors.star:1:5: undefined: undefined_one\n" +
		"testdata/resolve_errors.star:3:5: undefined: undefined_two"
	if got := script.Format(err); got != want {
		t.Errorf("Format(resolve errors) =\n%s\nwant\n%s", got, want)
	}
	if !script.IsLoadError(err) {
		t.Error("IsLoadError(resolve errors) = false")
	}

	_, err = l.Load("testdata/runtime_error.star")
	if err == nil {
		t.Fatal("runtime_error.star loaded")
	}
	want = "Traceback (most recent call last):\n" +
		"  testdata/runtime_error.star:7:6: in <toplevel>\n" +
		"  testdata/runtime_error.star:5:17: in outer\n" +
		"  testdata/runtime_error.star:2:15: in inner\n" +
		"Error: floored division by zero"
	if got := script.Format(err); got != want {
		t.Errorf("Format(runtime error) =\n%s\nwant\n%s", got, want)
	}
	wantBT := []string{
		"testdata/runtime_error.star:7:6: in <toplevel>",
		"testdata/runtime_error.star:5:17: in outer",
		"testdata/runtime_error.star:2:15: in inner",
	}
	if diff := cmp.Diff(wantBT, script.Backtrace(err)); diff != "" {
		t.Errorf("Backtrace (-want +got):\n%s", diff)
	}
	if script.IsLoadError(err) {
		t.Error("IsLoadError(runtime error) = true")
	}

	plain := errors.New("plain failure")
	if got := script.Format(plain); got != "plain failure" {
		t.Errorf("Format(plain) = %q", got)
	}
	if bt := script.Backtrace(plain); bt != nil {
		t.Errorf("Backtrace(plain) = %q, want nil", bt)
	}
	if script.IsLoadError(plain) {
		t.Error("IsLoadError(plain) = true")
	}
}

// A resolve error in a loaded module still lists every error, and says
// which load failed.
func TestFormatNestedResolveErrors(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"main.star": "load('bad.star', 'x')\n",
		"bad.star":  "x = one\ny = two\n",
	})
	_, err := (&script.Loader{}).Load(filepath.Join(root, "main.star"))
	if err == nil {
		t.Fatal("main.star loaded")
	}
	got := script.Format(err)
	for _, want := range []string{"bad.star:1:5: undefined: one", "bad.star:2:5: undefined: two"} {
		if !strings.Contains(got, want) {
			t.Errorf("Format =\n%s\nwant it to contain %q", got, want)
		}
	}
}

// A syntax error at ".load" carries the tl.fetch hint; other "not an
// identifier" errors do not.
func TestAnnotateLoadHint(t *testing.T) {
	const hint = `not an identifier: use tl.fetch(ptr): "load" is a Starlark keyword`
	for _, tc := range []struct {
		file, want string
	}{
		{"testdata/tl_load.star", "testdata/tl_load.star:2:16: " + hint},
		{"testdata/tl_load_space.star", "testdata/tl_load_space.star:2:13: " + hint},
		{"testdata/not_identifier.star", "testdata/not_identifier.star:2:16: not an identifier"},
		{"testdata/def_load.star", "testdata/def_load.star:1:9: not an identifier"},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			_, err := (&script.Loader{}).Load(tc.file)
			if err == nil {
				t.Fatal("loaded without error")
			}
			if got := script.Format(err); got != tc.want {
				t.Errorf("Format = %q, want %q", got, tc.want)
			}
			if !script.IsLoadError(err) {
				t.Error("IsLoadError = false, want true (a syntax error)")
			}
		})
	}
	// Through a load() of the bad file.
	root := t.TempDir()
	src, _ := os.ReadFile("testdata/tl_load.star")
	writeFiles(t, root, map[string]string{"main.star": "load('k.star', 'kernel')\n", "k.star": string(src)})
	_, err := (&script.Loader{}).Load(filepath.Join(root, "main.star"))
	if err == nil || !strings.Contains(err.Error(), hint) {
		t.Errorf("loading a module with tl.load: error %v, want the hint", err)
	}

	if script.Annotate(nil, src, nil) != nil {
		t.Error("Annotate(nil) != nil")
	}
	other := errors.New("not an identifier")
	if got := script.Annotate(other, src, nil); got != other {
		t.Errorf("Annotate(non-syntax error) = %v, want it unchanged", got)
	}
}

// The kernbench dialect (while, set, recursion, top-level control flow,
// global reassignment) and the predeclared struct, json and math.
func TestDialectAndPredeclared(t *testing.T) {
	g, err := (&script.Loader{}).Load("testdata/dialect.star")
	if err != nil {
		t.Fatal(script.Format(err))
	}
	if g["RESULT"] != starlark.String("ok") {
		t.Errorf("RESULT = %v, want \"ok\"", g["RESULT"])
	}
}

// Loader.Predeclared adds names to (and may override) the standard ones.
func TestExtraPredeclared(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"p.star": "OUT = (answer, math)\n"})
	l := &script.Loader{Predeclared: starlark.StringDict{"answer": starlark.MakeInt(42), "math": starlark.String("mine")}}
	g, err := l.Load(filepath.Join(root, "p.star"))
	if err != nil {
		t.Fatal(script.Format(err))
	}
	if got := g["OUT"].String(); got != `(42, "mine")` {
		t.Errorf("OUT = %s, want (42, \"mine\")", got)
	}
}

// print called directly from Go (a bench's run_rank or an algorithm's
// neighbors bound to print) has no Starlark caller; it must still print
// rather than panic.
func TestPrintCalledFromGo(t *testing.T) {
	var stderr bytes.Buffer
	l := &script.Loader{Stderr: &stderr}
	th := l.NewThread("go caller")
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("print called from Go panicked: %v", r)
			}
		}()
		if _, err := starlark.Call(th, starlark.Universe["print"], starlark.Tuple{starlark.String("hi")}, nil); err != nil {
			t.Errorf("print: %v", err)
		}
	}()
	if !strings.Contains(stderr.String(), "hi") {
		t.Errorf("stderr = %q, want the message", stderr.String())
	}
}

// Rule (script errors carry the Starlark backtrace,
// file:LINE:COL of every frame). The text backtrace of deep recursion shows
// a run of one repeated frame as three lines and a count of the rest (a
// stack overflow is 100000 frames, which used to be 100000 lines of
// stderr): every frame is still accounted for, and frames that differ are
// all shown. The --json list (Backtrace) keeps every frame.
func TestFormatCollapsesRepeatedFrames(t *testing.T) {
	l := &script.Loader{}
	_, err := l.Load("testdata/recursion_error.star")
	if err == nil {
		t.Fatal("recursion_error.star loaded")
	}
	down := "testdata/recursion_error.star:4:16: in down"
	var all []string
	all = append(all, "testdata/recursion_error.star:9:10: in <toplevel>", "testdata/recursion_error.star:7:16: in twice")
	for range 10 {
		all = append(all, down)
	}
	all = append(all, "testdata/recursion_error.star:3:18: in down")
	if diff := cmp.Diff(all, script.Backtrace(err)); diff != "" {
		t.Errorf("Backtrace (-want +got):\n%s", diff)
	}
	text := []string{all[0], all[1], down, down, down, "[the frame above repeats 7 more times]", all[len(all)-1]}
	want := "Traceback (most recent call last):\n  " + strings.Join(text, "\n  ") + "\nError: floored division by zero"
	if got := script.Format(err); got != want {
		t.Errorf("Format =\n%s\nwant\n%s", got, want)
	}
}
