package script

import (
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

// The compiled-program cache keys on the predeclared names too: a file
// naming `assert` compiles where assert is predeclared (a test) and fails
// to resolve where it is not, whichever was compiled first.
func TestCompileCacheKeysOnPredeclaredNames(t *testing.T) {
	src := []byte("def f():\n    assert.eq(1, 1)\n")
	with := starlark.StringDict{"assert": starlark.None}
	for i := 0; i < 2; i++ {
		if _, err := compile("cache_test.star", src, with); err != nil {
			t.Fatalf("with assert predeclared: %v", err)
		}
		if _, err := compile("cache_test.star", src, starlark.StringDict{}); err == nil || !strings.Contains(err.Error(), "undefined: assert") {
			t.Fatalf("without assert predeclared: err = %v, want undefined: assert", err)
		}
	}
	a, _ := compile("cache_test.star", src, with)
	b, _ := compile("cache_test.star", src, with)
	if a != b {
		t.Error("the same file compiled twice")
	}
}
