package topology

import (
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
)

// compass maps the points of the compass, written out, to the one-letter
// directions of ring_1d and mesh_2d: "east" is no misspelling of "E" by
// edits, yet it is the name a new author writes for it.
var compass = map[string]string{"east": "E", "west": "W", "north": "N", "south": "S"}

// NearestDirection is the direction of installed that dir is most likely
// a misspelling of ("Ee" → "E", "e" → "E", "parnet" → "parent", "east"
// → "E"), or "": a point of the compass written out, when its letter is
// installed, else a name equal but for case, else the one closest in
// edits (at most 1 for names up to 3 letters, 2 for longer ones), when no
// other is as close.
// Two one-letter names are never taken for each other ("N" is not a
// misspelt "E"), nor a channel of an installed direction for another
// channel ("E_2" needs more channels, not "E_1").
func NearestDirection(dir string, installed []string) string {
	if c, ok := compass[strings.ToLower(dir)]; ok && slices.Contains(installed, c) {
		return c
	}
	if base, c := SplitChannel(dir); c > 0 {
		for _, d := range installed {
			if d == base {
				return ""
			}
		}
	}
	for _, d := range installed {
		if strings.EqualFold(d, dir) {
			return d
		}
	}
	best, bestD, tie := "", 0, false
	for _, d := range installed {
		if len(d) == 1 && len(dir) == 1 {
			continue
		}
		limit := 1
		if max(len(d), len(dir)) > 3 {
			limit = 2
		}
		dist := levenshtein.ComputeDistance(strings.ToLower(dir), strings.ToLower(d))
		switch {
		case dist > limit:
		case best == "" || dist < bestD:
			best, bestD, tie = d, dist, false
		case dist == bestD:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}
