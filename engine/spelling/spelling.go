// Package spelling finds the name a misspelt one was meant to be, for the
// "did you mean" of every unknown-name error: a ccl.yaml key or value, a
// flag value, a builtin's member, an algorithm or a file.
package spelling

import (
	"fmt"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Closest is the name of names that s differs from only in case, else
// the nearest (first on ties) within edit distance 2 of s, and within
// half the longer name's length: two edits make any short word another
// ("add" is not a misspelt "avg"), or "".
func Closest(s string, names []string) string {
	for _, n := range names {
		if n != s && strings.EqualFold(n, s) {
			return n
		}
	}
	best, bestD := "", 3
	for _, n := range names {
		d := levenshtein.ComputeDistance(s, n)
		if d < bestD && 2*d <= max(len(s), len(n)) {
			best, bestD = n, d
		}
	}
	return best
}

// Hint is `; did you mean "NAME"?` for Closest's name, "" when there is
// none: the ending of an error that lists what is allowed.
func Hint(s string, names []string) string {
	if near := Closest(s, names); near != "" {
		return fmt.Sprintf("; did you mean %q?", near)
	}
	return ""
}
