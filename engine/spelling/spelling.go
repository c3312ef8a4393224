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

// synonyms are other names of a memory kind, a topology, a reduction or a
// collective, which a user coming from another machine or library types:
// the nearest spelling would be wrong there ("dram" is one edit from
// "sram", but the package's DRAM is the HBM; "mean" is two from "max",
// but means avg), or there is none ("bcast", MPI's broadcast). Kept to
// names with no other reading; a synonym applies only where its target is
// one of the names.
var synonyms = map[string]string{
	"dram": "hbm", "ddr": "hbm", "gddr": "hbm", // the package's DRAM
	"scratchpad": "tcm", "spm": "tcm", // a PE's private scratchpad
	"shared": "sram", "smem": "sram", // a cube's shared memory
	// The builtin topologies by the names a collective engineer uses:
	// "ring" is a prefix of two of them and far from both.
	"ring": "ring_1d", "torus": "mesh_2d", "2d_torus": "mesh_2d", "torus_2d": "mesh_2d",
	// Reductions as numpy, MPI (MPI_SUM, MPI_PROD) and torch name them.
	"mean": "avg", "average": "avg", "add": "sum", "maximum": "max", "minimum": "min",
	"product": "prod", "mul": "prod",
	// Collectives by MPI's short names (MPI_Bcast) and the usual abbreviations.
	"bcast": "broadcast", "a2a": "alltoall", "all2all": "alltoall",
}

// Closest is the name of names that s differs from only in case, else
// the name of names s is a synonym of (a memory kind, topology, reduction
// or collective by another name), else the nearest (first on ties) within
// edit distance 2 of s, and within half the longer name's length: two
// edits make any short word another ("add" is not a misspelt "avg"),
// else the one name that begins with s when s has three letters or more
// and no other name does ("mesh" for mesh_2d, "tree" for tree_binary), or "".
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
	if best == "" && len(s) >= 3 {
		for _, n := range names {
			if len(n) > len(s) && strings.HasPrefix(strings.ToLower(n), strings.ToLower(s)) {
				if best != "" {
					return "" // two names begin so: neither is meant
				}
				best = n
			}
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
