package report

import (
	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// Where a rank's time went: every picosecond of a rank's kernel process is
// spent blocked in some call (a kernel's own Starlark code takes no
// simulated time), and the machine layer says what each blocking call was
// (machine.Act*). The split explains a slow kernel without summing trace
// slices: a ring waiting in recv is latency-bound, one waiting in send is
// credit-bound (a deeper ring helps), one waiting on memory is bound by
// its loads, stores and math.

// TimeSplit is the time of one rank's kernel process by activity, in ns.
type TimeSplit struct {
	Rank     int     `json:"rank"`
	SendNs   float64 `json:"send_ns"`   // per-message overhead and waiting for credits
	RecvNs   float64 `json:"recv_ns"`   // waiting for messages to arrive
	MemoryNs float64 `json:"memory_ns"` // waiting for loads, stores, copies and their math
	FlushNs  float64 `json:"flush_ns"`  // waiting for sends' DMAs to finish reading their source
	OtherNs  float64 `json:"other_ns"`  // joins, events, sleeps
}

// TimeSummary is the report of where the time went at one size.
type TimeSummary struct {
	// MostBlocked is the rank that waited longest on other ranks (recv,
	// send and flush), whose split the table prints.
	MostBlocked TimeSplit `json:"most_blocked"`
	// All is the sum over ranks.
	All TimeSplit `json:"all"`
	// Ranks is every rank's split (with -v).
	Ranks []TimeSplit `json:"ranks,omitempty"`
}

func splitOf(rank int, spent [sim.MaxActivities]sim.Time) TimeSplit {
	return TimeSplit{Rank: rank, SendNs: spent[machine.ActSend].Ns(), RecvNs: spent[machine.ActRecv].Ns(),
		MemoryNs: spent[machine.ActMemory].Ns(), FlushNs: spent[machine.ActFlush].Ns(), OtherNs: spent[machine.ActOther].Ns()}
}

func (t TimeSplit) total() float64 { return t.SendNs + t.RecvNs + t.MemoryNs + t.FlushNs + t.OtherNs }

// SummarizeTime builds the summary from each rank's spent time.
func SummarizeTime(spent [][sim.MaxActivities]sim.Time, perRank bool) *TimeSummary {
	if len(spent) == 0 {
		return nil
	}
	s := &TimeSummary{All: TimeSplit{Rank: -1}}
	best := -1.0
	for r, sp := range spent {
		t := splitOf(r, sp)
		if w := t.RecvNs + t.SendNs + t.FlushNs; w > best {
			best, s.MostBlocked = w, t
		}
		s.All.SendNs += t.SendNs
		s.All.RecvNs += t.RecvNs
		s.All.MemoryNs += t.MemoryNs
		s.All.FlushNs += t.FlushNs
		s.All.OtherNs += t.OtherNs
		if perRank {
			s.Ranks = append(s.Ranks, t)
		}
	}
	if s.All.total() == 0 {
		return nil
	}
	return s
}
