package ccl

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"

	"kernbench/engine/l3l2"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// stepLimited is the error of a script stopped by its step limit.
func stepLimited(t *testing.T) error {
	t.Helper()
	l := &script.Loader{MaxSteps: 500}
	th := l.NewThread("rank 0")
	_, err := starlark.ExecFileOptions(script.FileOptions(), th, "k.star", "while True:\n    pass\n", nil)
	if err == nil {
		t.Fatal("the loop returned")
	}
	return script.Stopped(th, err)
}

// The failures the benches build take their kind and exit status from the
// errkind classifier, whatever the error is wrapped in.
func TestFailureKinds(t *testing.T) {
	limit := stepLimited(t)
	cases := []struct {
		name    string
		failure func() error
		want    *errkind.Kind
		msg     string // a part of the message
	}{
		{"deadlock", func() error { return simFailure(fmt.Errorf("run: %w", &sim.StallError{}), "") }, errkind.Deadlock, "deadlock"},
		{"host memory", func() error { return simFailure(fmt.Errorf("run: %w", &hostmem.OutOfMemoryError{Limit: 1 << 20}), "") }, errkind.HostMemory, "over --max-memory"},
		{"stale slot", func() error {
			return simFailure(&rankError{rank: 1, err: fmt.Errorf("tl.fetch: %w", &machine.IPCQError{Kind: "StaleSlot", Msg: "m"})}, "")
		}, errkind.StaleSlot, "StaleSlot: m"},
		{"kernel step limit", func() error { return simFailure(&rankError{rank: 0, err: limit}, "") }, errkind.StepLimit, "raise --max-steps"},
		{"load step limit", func() error { return loadFailure(fmt.Errorf("cannot load x.star: %w", limit)) }, errkind.StepLimit, "raise --max-steps if the script"},
		{"l3 remote abort", func() error {
			return l3Failure(&l3ProcError{proc: "l3 main", err: fmt.Errorf("q: %w", &l3l2.QueueError{Kind: l3l2.QueueRemoteAborted, Msg: "peer"})})
		}, errkind.RemoteAborted, "REMOTE_ABORTED"},
		{"l3 timeout", func() error {
			return l3Failure(&l3ProcError{proc: "l3 main", err: fmt.Errorf("wait: %w", &l3l2.TimeoutError{Op: "counter.wait"})})
		}, errkind.L3Timeout, "timed out"},
		{"l3 step limit", func() error { return l3Failure(&l3ProcError{proc: "l3 main", err: limit}) }, errkind.StepLimit, "too many steps"},
		{"l3 fail", func() error { return l3Failure(&l3ProcError{proc: "l2", err: fmt.Errorf("fail: nope")}) }, errkind.Runtime, "nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, ok := c.failure().(*report.Failure)
			if !ok {
				t.Fatalf("got %T, want a *Failure", c.failure())
			}
			// The kind is the failure's one kind field: the exit status
			// and the JSON kind are read from it.
			got := []any{errkind.Of(f), errkind.Status(f), f.Out().Kind}
			if diff := cmp.Diff([]any{c.want, c.want.Status, c.want.Name}, got); diff != "" {
				t.Errorf("kind, exit status, JSON kind (-want +got):\n%s", diff)
			}
			if !strings.Contains(f.Msg, c.msg) {
				t.Errorf("message %q lacks %q", f.Msg, c.msg)
			}
		})
	}
}

// Every Failure the program builds gets its kind where it is built: each
// Failure literal outside tests is the argument of WithKind, so none
// reaches the CLI without a kind (it would be reported as InternalError).
func TestFailuresAreBuiltWithKind(t *testing.T) {
	root := "../.."
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		kinded := map[ast.Expr]bool{} // the literals given to WithKind
		ast.Inspect(file, func(x ast.Node) bool {
			if call, ok := x.(*ast.CallExpr); ok && len(call.Args) == 2 && calleeName(call.Fun) == "WithKind" {
				arg := call.Args[1]
				if u, ok := arg.(*ast.UnaryExpr); ok && u.Op == token.AND {
					arg = u.X
				}
				kinded[arg] = true
			}
			return true
		})
		ast.Inspect(file, func(x ast.Node) bool {
			lit, ok := x.(*ast.CompositeLit)
			if !ok || calleeName(lit.Type) != "Failure" {
				return true
			}
			n++
			if !kinded[lit] {
				t.Errorf("%s: a Failure built without WithKind", fset.Position(lit.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Errorf("found %d Failure literals; the walk missed the sources", n)
	}
}

// calleeName is the name an identifier or a selector (pkg.Name) ends with.
func calleeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}
