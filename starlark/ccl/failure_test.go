package ccl

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

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
