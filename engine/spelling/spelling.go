// Package spelling finds the name a misspelt one was meant to be, for the
// "did you mean" of every unknown-name error: a ccl.yaml key or value, a
// flag value, a builtin's member, an algorithm or a file.
package spelling

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
)

// synonyms are other names of a memory kind, which a user coming from
// another machine types: the nearest spelling would be wrong there
// ("dram" is one edit from "sram", but the package's DRAM is the HBM).
// Kept to the memory kinds (tcm, sram, hbm) and names with no other
// reading.
var synonyms = map[string]string{
	"dram": "hbm", "ddr": "hbm", "gddr": "hbm", // the package's DRAM
	"scratchpad": "tcm", "spm": "tcm", // a PE's private scratchpad
	"shared": "sram", "smem": "sram", // a cube's shared memory
}

// Closest is the name of names that s differs from only in case, else
// the name of names s is a synonym of (a memory kind by another name),
// else the nearest (first on ties) within edit distance 2 of s, and
// within half the longer name's length: two edits make any short word
// another ("add" is not a misspelt "avg"), or "".
func Closest(s string, names []string) string {
	for _, n := range names {
		if n != s && strings.EqualFold(n, s) {
			return n
		}
	}
	if syn, ok := synonyms[strings.ToLower(s)]; ok && slices.Contains(names, syn) {
		return syn
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
