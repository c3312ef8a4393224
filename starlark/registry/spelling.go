package registry

import (
	"fmt"

	"kernbench/engine/spelling"
)

// Closest is spelling.Closest: the name s differs from only in case, else
// the one within edit distance 2 of s (the nearest, first on ties), or "". The static check (kernbench check) and the run-time
// attribute error both hint with it, so a misspelt name gets the same
// "did you mean" from either.
func Closest(s string, names []string) string {
	return spelling.Closest(s, names)
}

// NoSuchAttr is the error for recv.name when recv (spelt as scripts spell
// it, e.g. "tl") has no member name: go.starlark.net's wording with
// Closest's hint. Returned from Attr as a plain error, the interpreter
// reports it as it is (its own hint, for a nil Attr, only catches one
// typo in two letters: tl.sned got none).
func NoSuchAttr(recv, name string, names []string) error {
	if near := Closest(name, names); near != "" {
		return fmt.Errorf("%s has no .%s field or method (did you mean %s.%s?)", recv, name, recv, near)
	}
	return fmt.Errorf("%s has no .%s field or method", recv, name)
}
