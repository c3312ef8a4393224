package topology

import (
	"fmt"
	"slices"
	"strings"
)

// RankRanges writes ranks, sorted, as ranges: "0-3, 5, 7-9". Reports
// name groups of ranks this way (blocked processes, ranks sharing a
// memory, the senders a stopped link held).
func RankRanges(ranks []int) string {
	rs := slices.Clone(ranks)
	slices.Sort(rs)
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		} else {
			parts = append(parts, fmt.Sprint(rs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
