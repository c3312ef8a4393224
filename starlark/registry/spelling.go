package registry

import "fmt"

// Closest is the name within edit distance 2 of s (the nearest, first on
// ties), or "". The static check (kernbench check) and the run-time
// attribute error both hint with it, so a misspelt name gets the same
// "did you mean" from either.
func Closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
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
