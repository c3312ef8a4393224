package report

import (
	"fmt"
	"strings"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/engine/topology"
)

// FaultUse is one fault of system.faults as the run met it: the resource,
// what deviates, and what went through it.
type FaultUse struct {
	Resource string `json:"resource"`
	Fault    string `json:"fault"` // what deviates: "bandwidth ×0.5, latency +20ns"
	// Used: the run made the resource; a fault on a resource it never
	// used changed nothing.
	Used        bool    `json:"used"`
	Bytes       int64   `json:"bytes"`
	Utilisation float64 `json:"utilisation"`
	// Stalled counts the transfers a stop held for ever, StalledRanks the
	// ranks whose DMA issued them (a stopped resource).
	Stalled      int64 `json:"stalled,omitempty"`
	StalledRanks []int `json:"stalled_ranks,omitempty"`
	// Charged is the bytes of L3/L2 region accesses charged at the
	// resource's bandwidth and latency without a booking.
	Charged int64 `json:"charged_bytes,omitempty"`
}

// FaultUses is the machine's faults after a run that ended at end.
func FaultUses(m *machine.Machine, end sim.Time) []FaultUse {
	var out []FaultUse
	for _, st := range m.Faults() {
		u := FaultUse{Resource: st.Resource, Fault: strings.TrimPrefix(st.Fault.String(), st.Resource+": "), Used: st.Used, Bytes: st.Bytes, Stalled: st.Stalled, Charged: st.Charged}
		if end > 0 {
			u.Utilisation = float64(st.BusyTime) / float64(end)
		}
		for _, pe := range st.StalledFrom {
			rank := -1
			if pe >= 0 {
				rank = m.PE(pe).Rank
			}
			u.StalledRanks = append(u.StalledRanks, rank)
		}
		out = append(out, u)
	}
	return out
}

// String is the fault as a report line names it.
func (u FaultUse) String() string {
	s := u.Resource + " " + u.Fault
	switch {
	case !u.Used:
		s += " (not used by this run)"
	case u.Stalled > 0:
		s += fmt.Sprintf(" (%d transfer(s) held by the stop, from %s)", u.Stalled, RanksText(u.StalledRanks))
	case u.Bytes == 0 && u.Charged > 0:
		// (An L3/L2 region's accesses take its time without a booking:
		// "no transfer was booked" read as if the fault changed nothing.)
		s += fmt.Sprintf(" (carried %d bytes of L3/L2 region accesses, charged at its bandwidth and latency)", u.Charged)
	case u.Bytes == 0:
		s += " (no transfer was booked on it)"
	default:
		s += fmt.Sprintf(" (carried %d bytes, busy %.1f%%)", u.Bytes, 100*u.Utilisation)
	}
	return s
}

// RanksText names the ranks that issued transfers: "rank 7", "ranks 7,
// 8", and "direct accesses" for transfers a PE made without its DMA (its
// own TCM, its math unit).
func RanksText(ranks []int) string {
	var named []int
	direct := false
	for _, r := range ranks {
		if r < 0 {
			direct = true
			continue
		}
		named = append(named, r)
	}
	var parts []string
	switch len(named) {
	case 0:
	case 1:
		parts = append(parts, fmt.Sprint("rank ", named[0]))
	default:
		parts = append(parts, "ranks "+topology.RankRanges(named))
	}
	if direct {
		parts = append(parts, "direct accesses")
	}
	return strings.Join(parts, " and ")
}
