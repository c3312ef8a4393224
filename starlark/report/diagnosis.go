package report

import (
	"fmt"

	"kernbench/engine/oplog"
)

// Phase2Diagnosis explains a phase-2 mismatch: where the two phases
// differ, which records wrote there last in each, and the first record
// whose effect differs between them, each with the call that issued it.
// It comes from running the same size again with a witnessed op_log
// (oplog.Log.Witness): the run is deterministic, so the second run is the
// first one, seen more closely.
type Phase2Diagnosis struct {
	Address    uint64 `json:"address"`
	Phase1Byte byte   `json:"phase1_byte"`
	Phase2Byte byte   `json:"phase2_byte"`
	// Phase1Writer wrote the address last as phase 1 ran; Phase2Writer
	// last in the op_log's effect order (the replay's). Usually the same.
	Phase1Writer *RecordRef `json:"phase1_last_writer,omitempty"`
	Phase2Writer *RecordRef `json:"phase2_last_writer,omitempty"`
	// FirstDivergent is the first record, in effect order, whose effect
	// in the replay differs from what it produced in phase 1: where phase
	// 1 did something its op_log does not describe. Nil when every
	// record's effect matched (memory changed outside any record).
	FirstDivergent *RecordRef `json:"first_divergent_record,omitempty"`
	// Reproduced: the diagnosing run found the same mismatch. When it is
	// false the run is not deterministic, itself a kernbench bug, and the
	// records above are the second run's.
	Reproduced bool `json:"reproduced"`
}

// RecordRef names an op_log record and the tl call that issued it.
type RecordRef struct {
	Seq    uint64  `json:"seq"`
	Rank   int     `json:"rank"`
	Kind   string  `json:"kind"`
	Name   string  `json:"name"`
	Dir    string  `json:"dir,omitempty"`
	TEndNs float64 `json:"t_end_ns"`
	Origin string  `json:"issued_by,omitempty"`
}

// NewRecordRef names r, issued by origin (nil for no record).
func NewRecordRef(r *oplog.Record, origin string) *RecordRef {
	if r == nil {
		return nil
	}
	return &RecordRef{Seq: r.Seq, Rank: r.Rank, Kind: r.Kind.String(), Name: r.Name, Dir: r.Dir, TEndNs: r.TEnd.Ns(), Origin: origin}
}

func (r *RecordRef) String() string {
	s := fmt.Sprintf("record %d (%s %s", r.Seq, r.Kind, r.Name)
	if r.Dir != "" {
		s += " " + r.Dir
	}
	s += fmt.Sprintf(", rank %d, t_end %vns)", r.Rank, r.TEndNs)
	if r.Origin != "" {
		s += ", issued by " + r.Origin
	}
	return s
}

// Lines is the diagnosis as a report prints it, a line each.
func (d *Phase2Diagnosis) Lines() []string {
	var out []string
	switch {
	case d.Phase1Writer != nil && d.Phase2Writer != nil && d.Phase1Writer.Seq == d.Phase2Writer.Seq:
		out = append(out, "last write there, in both phases: "+d.Phase1Writer.String())
	default:
		for _, w := range []struct {
			what string
			r    *RecordRef
		}{{"last write there in phase 1 (as it ran)", d.Phase1Writer}, {"last write there in phase 2 (the op_log's order)", d.Phase2Writer}} {
			if w.r == nil {
				out = append(out, w.what+": none (no record writes this address)")
			} else {
				out = append(out, w.what+": "+w.r.String())
			}
		}
	}
	if d.FirstDivergent != nil {
		out = append(out, "first record whose effect differs between the phases (phase 1 made other bytes than the replay makes from the op_log): "+d.FirstDivergent.String())
	} else {
		out = append(out, "every record's effect in phase 2 equals its effect in phase 1: the memory changed outside any record")
	}
	if !d.Reproduced {
		out = append(out, "the run diagnosing it did not find the same mismatch: the run is not deterministic (a kernbench bug); the records above are that run's")
	}
	return out
}

// Phase2Advice is what a report says after a phase-2 mismatch.
const Phase2Advice = "phase 2 replays the op_log and must reproduce phase 1 exactly: a difference is either a race the checks did not report (two operations whose order the model leaves open) or a kernbench bug. Next: --oplog FILE writes the records (the ones named above by seq); --jitter-seed S runs other orders of same-instant events, which shows whether the result depends on an order; please report it with the .star file and command line if the kernel has no race."
