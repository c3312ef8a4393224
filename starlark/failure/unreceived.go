package failure

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"kernbench/engine/machine"
	"kernbench/engine/topology"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

// Unreceived is the failure of a run that ended with messages sent and
// never received (invariant I1): its message is one line (the queue pair
// when there is one; how many messages on how many queue pairs
// otherwise), its detail the queue pairs grouped by shape
// (UnreceivedLines), so that a ring of a thousand ranks that each send
// one message too many is one line, as its deadlock would be. --json
// lists every queue pair (report.ErrorOut's Unreceived), by sender rank.
func Unreceived(e *machine.UnreceivedError) *report.Failure {
	sends := slices.Clone(e.Sends)
	slices.SortStableFunc(sends, func(a, b machine.Unreceived) int {
		return cmp.Or(cmp.Compare(a.Sender, b.Sender), strings.Compare(a.SendDir, b.SendDir))
	})
	f := report.WithKind(errkind.Unreceived, &report.Failure{Rank: -1, Msg: e.Error(), Err: e, Unreceived: sends})
	if len(sends) > 1 {
		f.Detail = strings.Join(UnreceivedLines(sends), "\n")
	}
	return f
}

// Bounds of the grouped report: a group of fewer than minUnreceivedGroup
// queue pairs is listed pair by pair (two lines are as short as a
// group's); a group's line spells out its first unreceivedExamples pairs
// (all of them when one more is left) and counts the rest, and names at most unreceivedRankParts ranks or
// ranges of them; at most maxUnreceivedLines lines, the last counting
// what was left out.
const (
	minUnreceivedGroup  = 3
	unreceivedExamples  = 3
	unreceivedRankParts = 8
	maxUnreceivedLines  = 16
)

// UnreceivedLines are the report's lines for sends (in sender rank
// order), each indented by two spaces: one line per group of queue pairs
// of one shape (the directions, how many messages each holds, the first
// one's number and where it was sent), in the order of each group's
// lowest sender, naming its sender ranks as ranges and its first few
// pairs: "ranks 0-7 (8): each sent 1 message(s) on E that its peer never
// received on W (the first, #0, sent at f.star:4:12): 0 -> 1, 1 -> 2,
// 2 -> 3 and 5 more". A group too small to shorten anything is a line per
// queue pair, as specific as a report of one.
func UnreceivedLines(sends []machine.Unreceived) []string {
	type group struct{ pairs []machine.Unreceived }
	shape := func(u machine.Unreceived) machine.Unreceived {
		u.Sender, u.Receiver = 0, 0
		return u
	}
	var groups []*group
	byShape := map[machine.Unreceived]*group{}
	for _, u := range sends {
		g := byShape[shape(u)]
		if g == nil {
			g = &group{}
			byShape[shape(u)] = g
			groups = append(groups, g)
		}
		g.pairs = append(g.pairs, u)
	}
	type line struct {
		text  string
		pairs int
	}
	var lines []line
	for _, g := range groups {
		if len(g.pairs) < minUnreceivedGroup {
			for _, u := range g.pairs {
				lines = append(lines, line{"  " + u.String(), 1})
			}
			continue
		}
		u := g.pairs[0]
		senders := make([]int, len(g.pairs))
		for i, p := range g.pairs {
			senders[i] = p.Sender
		}
		// "and 1 more" would take the room of the pair it counts.
		shown := unreceivedExamples
		if len(g.pairs) == shown+1 {
			shown++
		}
		var examples []string
		for _, p := range g.pairs[:shown] {
			examples = append(examples, fmt.Sprintf("%d -> %d", p.Sender, p.Receiver))
		}
		pairs := strings.Join(examples, ", ")
		if more := len(g.pairs) - shown; more > 0 {
			pairs += fmt.Sprintf(" and %d more", more)
		}
		lines = append(lines, line{fmt.Sprintf("  ranks %s (%d): each sent %d message(s) on %s that its peer never received on %s%s: %s",
			clipRanks(senders), len(g.pairs), u.Count, u.SendDir, u.RecvDir, u.First(), pairs), len(g.pairs)})
	}
	out := make([]string, 0, min(len(lines), maxUnreceivedLines))
	for i, l := range lines {
		if len(lines) > maxUnreceivedLines && i == maxUnreceivedLines-1 {
			left := 0
			for _, m := range lines[i:] {
				left += m.pairs
			}
			out = append(out, fmt.Sprintf("  ... %d more queue pair(s) on %d more line(s), not shown (--json lists every queue pair)", left, len(lines)-i))
			break
		}
		out = append(out, l.text)
	}
	return out
}

// clipRanks is ranks as ranges ("0-7, 9"), at most unreceivedRankParts
// of them: ranks of every other rank would otherwise be a wall of
// numbers again.
func clipRanks(ranks []int) string {
	parts := strings.Split(topology.RankRanges(ranks), ", ")
	if len(parts) <= unreceivedRankParts {
		return strings.Join(parts, ", ")
	}
	return strings.Join(parts[:unreceivedRankParts], ", ") + ", ..."
}
