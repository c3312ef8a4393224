package prims

import (
	"go/build"
	"strings"
	"testing"
)

// The package is the engine side of the primitives: it imports no
// Starlark and nothing above the engine (dependencies go cmd → starlark →
// engine), in its code and in its tests.
func TestImportsOnlyTheEngine(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imports := range [][]string{pkg.Imports, pkg.TestImports} {
		for _, path := range imports {
			if strings.Contains(path, "starlark") || strings.HasPrefix(path, "kernbench/") && !strings.HasPrefix(path, "kernbench/engine/") {
				t.Errorf("engine/prims imports %s", path)
			}
		}
	}
}
