package ccl

// One size of a run: a bench on a fresh world. Every kind of bench (the
// builtin collective bench, which MSCCL schedules and the mock run too, a
// host bench, an L3 bench) takes this one path; what differs is the bench.

import (
	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/starlark/report"
)

// A bench is what one kind of run puts on a world and reads back.
type bench interface {
	// setUp readies the built world before its pre-run image is kept:
	// queue pairs, the memory admission, buffers and inputs (builtin), the
	// L3-L2 hub. What it holds for the run's length it hands to
	// world.atClose.
	setUp(w *world) error
	// spawn starts the bench's processes (after the image is kept).
	spawn(w *world)
	// failure turns the error that ended the simulation into the run's
	// failure, while the blocked processes can still be read.
	failure(w *world, err error) error
	// finish reads the world after the run (runErr: its failure, nil when
	// it ended well): the bench's check and its row, before phase 2.
	finish(w *world, runErr error) (*report.Result, error)
	// export writes what the run exports (--export-msccl,
	// --export-chakra) once phase 2 is done.
	export(w *world, res *report.Result) error
}

// simulate runs one size of bench b on a fresh world of plan p: build,
// set up, keep the pre-run image, spawn, run, check and fill the row,
// phase 2, exports.
func simulate(p *plan, cfg *config.Config, set config.Settings, b bench) (*report.Result, error) {
	// Only the builtin collective bench runs on partitions (threads.go):
	// a host or L3 bench's host side reaches every SIP.
	cb, partitionable := b.(*collectiveBench)
	var beforeBuild func(machine.Params)
	if partitionable {
		// Its memory admission's probes run before the world is built
		// (probeFirst).
		beforeBuild = cb.probeFirst
	}
	w, err := newWorld(p, cfg, set, partitionable, beforeBuild)
	if err != nil {
		return nil, err
	}
	defer w.close()
	if err := b.setUp(w); err != nil {
		return nil, err
	}
	w.snapshot()
	b.spawn(w)
	res, err := b.finish(w, w.run(func(err error) error { return b.failure(w, err) }))
	if err != nil {
		return nil, err
	}
	if err := w.phase2(p, res); err != nil {
		return nil, err
	}
	res.Verified = res.Verified && (res.Phase2Match == nil || *res.Phase2Match)
	if err := b.export(w, res); err != nil {
		return nil, err
	}
	return res, nil
}
