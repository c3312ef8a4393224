package ccl

import (
	"kernbench/engine/chakra"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

// exportChakra hands the run's schedule, read from its op_log, to
// Options.ExportChakra (--export-chakra; engine/chakra does the work).
func exportChakra(p *plan, w *world, res *report.Result) error {
	route := func(a, b int) []chakra.Hop {
		var hops []chakra.Hop
		for _, l := range w.m.PEToPE(w.m.Ranks[a], w.m.Ranks[b]) {
			hops = append(hops, chakra.Hop{Name: l.Name, Kind: l.Kind, GBps: float64(l.BytesPerUs) / 1000, LatencyNs: l.Latency.Ns(), JitterNs: l.Jitter().Ns()})
		}
		return hops
	}
	run := chakra.Run{Algorithm: p.algoName, Collective: p.coll.Name, World: p.world, Bytes: res.Bytes, DType: p.dt.String(),
		SimTimeNs: res.SimTimeNs, Route: route}
	t, err := chakra.Build(run, w.m.Log.Records())
	if err != nil {
		return report.WithKind(errkind.Export, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	p.opts.ExportChakra(t)
	return nil
}
