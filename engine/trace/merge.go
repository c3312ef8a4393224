package trace

import (
	"fmt"
	"maps"

	"kernbench/engine/sim"
)

// A partitioned run (engine/sim's Partitioned) records a trace per
// partition (per SIP), each written by its own partition only (Split),
// and Merge makes the run's one trace of them:
//
//   - events in (time recorded, partition, order of recording), as
//     sim.MergeByTime: the same for every number of threads;
//   - an arrow (FlowStart, FlowEnd) may start in one partition and end
//     in another: its end is kept in place (a placeholder) with its key,
//     and the merge writes the start and the end there, numbered in the
//     merged order, when the start was recorded (as FlowEnd does on one
//     recorder);
//   - rx tracks (RxTid) are numbered per partition: a PE's deliveries
//     are its own partition's, so a track's number is unique within its
//     process (as on one recorder, where the numbers run over all PEs).

// flowEnd is an arrow's end recorded by a partition (FlowEnd), its start
// not yet known.
type flowEnd struct {
	key  string
	kept bool // the filter keeps the end's process (Only)
}

// stamp keeps the time of the event just recorded, in a partition's
// recorder.
func (r *Recorder) stamp() {
	if r.clock != nil {
		r.when = append(r.when, r.clock())
	}
}

// splitFlowEnd is FlowEnd in a partition's recorder: a placeholder for
// the end, paired with its start by Merge.
func (r *Recorder) splitFlowEnd(key string, pid, tid int, at sim.Time) {
	kept := (r.kinds == nil || r.kinds["flows"]) && (r.pids == nil || pid == LinksPid || r.pids[pid])
	if r.ends == nil {
		r.ends = map[int]flowEnd{}
	}
	r.ends[len(r.events)] = flowEnd{key: key, kept: kept}
	r.events = append(r.events, Event{Name: "message", Cat: "ipcq", Ph: "f", Bp: "e", Ts: us(at), Pid: pid, Tid: tid})
	r.stamp()
}

// Split makes a recorder per partition, with r's filter (Only) and
// process names, partition i recording at clocks[i]'s time. Record into
// them, not into r, and Merge them after the run.
func (r *Recorder) Split(clocks []func() sim.Time) []*Recorder {
	parts := make([]*Recorder, len(clocks))
	for i, c := range clocks {
		p := New()
		p.pids, p.kinds = r.pids, r.kinds
		maps.Copy(p.procs, r.procs)
		p.clock = c
		parts[i] = p
	}
	return parts
}

// Merge is the trace of a run recorded by parts (Split), in the order
// above. It fails when a part recorded no times (not made by Split).
func Merge(parts []*Recorder) (*Recorder, error) {
	type ref struct {
		p, i int
		at   sim.Time
	}
	out := New()
	refs := make([][]ref, len(parts))
	for p, r := range parts {
		if r.clock == nil || len(r.when) != len(r.events) {
			return nil, fmt.Errorf("trace: partition %d's recorder has %d events and %d times (not made by Split)", p, len(r.events), len(r.when))
		}
		if p == 0 {
			out.pids, out.kinds = r.pids, r.kinds
		}
		maps.Copy(out.procs, r.procs)
		maps.Copy(out.names, r.names)
		out.dropped += r.dropped
		refs[p] = make([]ref, len(r.events))
		for i := range r.events {
			refs[p][i] = ref{p, i, r.when[i]}
		}
	}
	// An arrow's start is in the pending starts of the partition that
	// recorded it (each key once: a message is sent once).
	start := func(key string) (Event, bool) {
		for _, r := range parts {
			if s, ok := r.pending[key]; ok {
				return s, true
			}
		}
		return Event{}, false
	}
	used := map[string]bool{}
	for _, rf := range sim.MergeByTime(refs, func(r ref) sim.Time { return r.at }) {
		e := parts[rf.p].events[rf.i]
		end, isEnd := parts[rf.p].ends[rf.i]
		if !isEnd {
			out.events = append(out.events, e)
			continue
		}
		s, ok := start(end.key)
		if !ok || used[end.key] {
			continue
		}
		used[end.key] = true
		if !end.kept {
			out.dropped++
			continue
		}
		out.flows++
		id := fmt.Sprint(out.flows)
		s.ID, e.ID = id, id
		e.Ts = flowEndTs(s.Ts, e.Ts)
		out.events = append(out.events, s, e)
	}
	return out, nil
}
