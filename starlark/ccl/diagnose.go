package ccl

import (
	"go.starlark.net/starlark"

	"kernbench/engine/config"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
)

// runOnce simulates one size of the builtin bench, diagnosed.
func runOnce(p *plan, cfg *config.Config, tgt *target.Target, loader *script.Loader, kernel, hook starlark.Callable, count int64) (*report.Result, error) {
	res, err := diagnosed(p.opts, func(o Options) (*report.Result, error) {
		pp := *p
		pp.opts = o
		return simulateOnce(&pp, cfg, tgt, quiet(loader, o), kernel, hook, count)
	})
	if err != nil {
		// A run short of ring or staging memory names the settings that
		// run it, each tried here at this size (fixes.go).
		err = target.MemoryFixes(err, cfg, tgt, p.opts.given(), func(t *target.Target) error {
			pp := *p
			pp.opts = silent(p.opts)
			_, err := simulateOnce(&pp, cfg, t, quiet(loader, pp.opts), kernel, hook, count)
			return err
		})
	}
	return res, err
}

// silent is opts for a run made only to learn whether it completes (a
// phase-2 diagnosis, a tried fix): it writes no output and prints nothing.
func silent(opts Options) Options {
	o := opts
	o.silent = true
	o.OpLog, o.Trace, o.ExportMSCCL, o.ExportChakra, o.DumpPointers, o.CCLTrace = nil, nil, nil, nil, nil, nil
	o.KeepOutputs, o.Detail, o.Stderr = false, false, nil
	return o
}

// quiet is the loader a run with opts uses: the diagnosing run's prints
// nothing (the first run printed what the kernels print).
func quiet(l *script.Loader, opts Options) *script.Loader {
	if !opts.silent {
		return l
	}
	q := *l // the same modules (its cache), another print
	q.Stderr = nil
	return &q
}

// diagnosed runs simulate with opts; after a phase-2 mismatch it runs it
// again with a witnessed op_log to diagnose it (Result.Phase2Diagnosis).
func diagnosed(opts Options, simulate func(Options) (*report.Result, error)) (*report.Result, error) {
	res, err := simulate(opts)
	if err != nil || res.Mismatch == nil || opts.witness {
		return res, err
	}
	// The second run writes nothing the first one wrote (its outputs are
	// the same, or the first one's are the ones asked for).
	o := silent(opts)
	o.witness = true
	again, err := simulate(o)
	first := res.Mismatch
	d := &report.Phase2Diagnosis{Address: first.Addr, Phase1Byte: first.Want, Phase2Byte: first.Got,
		Phase1Writer: report.NewRecordRef(first.LogWriter, ""), Phase2Writer: report.NewRecordRef(first.LastWriter, "")}
	if err == nil && again.Mismatch != nil {
		mm := again.Mismatch
		d.Reproduced = mm.Addr == first.Addr && mm.Got == first.Got && mm.Want == first.Want
		d.Phase1Writer, d.Phase2Writer = report.NewRecordRef(mm.LogWriter, mm.LogOrigin), report.NewRecordRef(mm.LastWriter, mm.LastOrigin)
		if dv := mm.Divergence; dv != nil {
			d.FirstDivergent = report.NewRecordRef(dv.Record, dv.Origin)
		}
	}
	res.Phase2, res.Phase2Diagnosis = first.Where(), d
	return res, nil
}
