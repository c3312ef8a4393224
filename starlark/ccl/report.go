package ccl

// Filling the report (starlark/report) from a run: a row's identity, its
// timing and bandwidth columns, and a rank's wrong elements as ranges.

import (
	"kernbench/engine/sim"
	"kernbench/starlark/hostmem/admit"
	"kernbench/starlark/report"
	"kernbench/starlark/tl"
	"kernbench/starlark/wiring"
)

// row is what identifies count's row: its size, elements, type, reduction
// and placement. Like nccl-tests, the size of a row is the larger
// per-rank buffer (allgather's recvbuf, reduce_scatter's sendbuf,
// alltoall's buffers): algbw counts all the data a rank ends up with or
// started from.
func (p *plan) row(count int64) *report.Result {
	elems := max(p.coll.sendCount(count, p.world), p.coll.recvCount(count, p.world))
	redop := p.red.String()
	if !p.coll.Reduces {
		redop = "none" // as nccl-tests prints for collectives without a reduction
	}
	return &report.Result{Count: elems, Bytes: elems * int64(p.dt.Size()), DType: p.dt.String(), RedOp: redop, InPlace: p.opts.InPlace}
}

// result fills the timing and bandwidth columns of a row.
func (w *world) result(p *plan, count int64, stats []tl.Stats) *report.Result {
	res := p.row(count)
	res.Events = w.events()
	var end sim.Time
	for r, f := range w.finish {
		end = max(end, f)
		res.Ops.Send += stats[r].Send
		res.Ops.Recv += stats[r].Recv
		res.Ops.Load += stats[r].Load
		res.Ops.Store += stats[r].Store
		res.Ops.Math += stats[r].Math
	}
	res.SimTimeNs = end.Ns()
	res.Time = report.SummarizeTime(w.spent, p.opts.Detail)
	if end > 0 {
		res.AlgBW = float64(res.Bytes) / end.Ns()
	}
	res.BusBW = res.AlgBW * p.coll.BusFactor(p.world)
	if w.g != nil {
		res.LinkBW = wiring.LinkBandwidth(w.m, w.g)
	}
	if res.LinkBW > 0 {
		res.Eff = res.BusBW / res.LinkBW
	}
	res.Faults = report.FaultUses(w.m, end)
	if p.opts.Detail && end > 0 {
		res.Busiest = report.Busiest(w.m, end, 8)
		res.Classes = report.ResourceClasses(w.m, end)
		res.Interp = &report.InterpCounts{}
		for r := range stats {
			res.Interp.Steps += stats[r].Steps
			res.Interp.BuiltinCalls += stats[r].Calls
		}
		res.OpLog = report.NewOpLogCost(w.m.Log, res.Ops.Send)
	}
	res.Counts = admit.Counts(res.Ops, stats)
	return res
}
