package report

import "kernbench/engine/oplog"

// Refusal is a size refused before it ran: its host-memory estimate is
// over --max-memory, or (Simulated) its buffers do not fit the simulated
// machine's memory. A run of one size fails with it (exit 2); in a sweep
// of several (Options.RefusedAsRows) it is that size's row,
// Result.Refused, and the other sizes run.
type Refusal struct {
	Kind string `json:"kind"` // errkind's name: OutOfMemory
	// Simulated: the bench's buffers do not fit the simulated memory
	// (Estimate, Limit and TimingOnly are 0: no host memory is in
	// question, and no mode makes them fit).
	Simulated bool `json:"simulated_memory,omitempty"`
	// Reason is the refusal in one line, as the table's row gives it: the
	// estimate, the limit, and what reaches the size (--timing-only, or
	// a larger limit).
	Reason string `json:"reason"`
	// Message is the refusal as a run of that one size reports it: the
	// estimate's parts and every alternative.
	Message  string `json:"message"`
	Estimate int64  `json:"estimate_bytes,omitempty"`
	Limit    int64  `json:"max_memory_bytes,omitempty"`
	// TimingOnly is the size's estimate with --timing-only; 0 when the run
	// is timing-only already.
	TimingOnly int64 `json:"timing_only_estimate_bytes,omitempty"`
}

func (r *Refusal) Error() string { return r.Message }

// Reachable says whether --timing-only would run the size under the same
// limit.
func (r *Refusal) Reachable() bool { return r.TimingOnly > 0 && r.TimingOnly <= r.Limit }

// OpLogCost is what the op_log of a run cost (-v): its records, their
// host bytes each (the Record, its pointer and the data it carries) and
// records per message sent.
type OpLogCost struct {
	Records           int64   `json:"records"`
	BytesPerRecord    float64 `json:"bytes_per_record"`
	RecordsPerMessage float64 `json:"records_per_message,omitempty"`
}

// NewOpLogCost is the cost of l after sent messages (nil for no records).
func NewOpLogCost(l *oplog.Log, sent int64) *OpLogCost {
	if l == nil || l.Len() == 0 {
		return nil
	}
	n := int64(l.Len())
	c := &OpLogCost{Records: n, BytesPerRecord: float64(l.HostBytes()) / float64(n)}
	if sent > 0 {
		c.RecordsPerMessage = float64(n) / float64(sent)
	}
	return c
}
