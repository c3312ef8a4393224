package ccl

import (
	"errors"

	"kernbench/engine/sim"

	"kernbench/starlark/hostmem"
	"kernbench/starlark/hostmem/admit"
	"kernbench/starlark/script"
)

// The memory guard (--max-memory). Host memory is what a run can run out
// of long before its simulated machine does: the simulated memory of the
// bench's buffers, the pre-run image phase 2 keeps, the op_log (a record
// per data operation), per-rank state and what the kernels keep in their
// Starlark values. Before a run starlark/hostmem/admit compares hostmem's
// estimate with the limit (over it: exit 2, naming what would fit);
// during the run hostmem's guard, installed below, ends a run whose
// process passes the limit with exit 3 instead of the Go runtime's fatal
// error. This file is the glue: what of the plan and the world they need.

// memRun is what the host-memory estimate knows of a run of count
// elements per rank in modes m (hostmem.Run): the collective's buffers
// and bus bytes at this size and world, and the run's modes. A
// timing-only run's estimate reads none of the collective's figures:
// they are left out.
func (p *plan) memRun(count int64, m admit.Modes) hostmem.Run {
	r := hostmem.Run{World: p.world, TimingOnly: m.TimingOnly, Verify: m.Verify, KeepsLog: p.opts.OpLog != nil || p.opts.ExportChakra != nil, InPlace: p.opts.InPlace}
	if !m.TimingOnly {
		sz := int64(p.dt.Size())
		r.SendBytes, r.RecvBytes = hostmem.SatMul(p.coll.sendCount(count, p.world), sz), hostmem.SatMul(p.coll.recvCount(count, p.world), sz)
		r.CountBytes = hostmem.SatMul(count, sz)
		r.BusFactor = p.coll.BusFactor(p.world)
		r.Alltoall, r.KeepsRecv = p.coll.Name == "alltoall", p.coll.KeepsRecv()
	}
	return r
}

// admission is what starlark/hostmem/admit knows of the plan's run.
func (p *plan) admission() admit.Run {
	return admit.Run{ElemSize: int64(p.dt.Size()), Modes: admit.Modes{TimingOnly: p.opts.TimingOnly, Verify: p.opts.Verify}, Of: p.memRun,
		Limit: p.opts.MaxMemory, LimitIsDefault: p.opts.MaxMemoryIsDefault, ProbeAlways: p.opts.ProbeMemory,
		World: p.world, GrowsWithWorld: p.coll.SendMul || p.coll.RecvMul, IsProbe: p.opts.probe}
}

// checkMemory admits a size of count elements per rank, rg the installed
// receive rings (admit.Run.Check).
func (p *plan) checkMemory(count int64, rg hostmem.Rings, probe admit.Probe) (hostmem.Estimate, error) {
	return p.admission().Check(count, rg, probe)
}

// installGuard makes the world's simulation, and its phase 2, stop when
// the process passes limit (hostmem's run-time guard).
func (w *world) installGuard(limit int64, defaultLimit bool) {
	w.releaseGuard = hostmem.GuardRun(limit)
	if limit <= 0 {
		return
	}
	w.memoryLimit = limit
	hostmem.Settle(limit)
	try := hostmem.TryLessMemory(w.m.TimingOnly, w.verifies)
	w.outOfMemoryAt = func(at sim.Time, held int64) error {
		return &hostmem.OutOfMemoryError{At: at, Messages: w.messages(), Held: held, Limit: limit, DefaultLimit: defaultLimit, Try: try}
	}
	w.outOfMemory = func(held int64) error { return w.outOfMemoryAt(w.now(), held) }
	guard := hostmem.TurnGuard(limit, w.m.TimingOnly, w.outOfMemory)
	if w.parts != nil {
		w.parts.Guard = guard // (between windows, on the run's goroutine)
	} else {
		w.s.Guard = guard
	}
}

// checkAtReturn is the guard's sample when a rank's kernel returns: its
// error when the process is over the limit. A kernel of a few steps that
// sends nothing reaches neither its thread's polls (the first at 64
// steps, and one samples only after a collection) nor the event loop's
// guard turns: `x = [0] * 100000000` under --max-memory 200M held 1.6 GB
// per rank and returned unseen, 8 ranks reached 3 to 9 GB and the run ended as
// a WrongResult. Unlike TurnGuard this does not collect and sample again
// before calling the run over the limit: what the kernel held is garbage
// once it returned, so a second sample after debug.FreeOSMemory would
// pass exactly the kernel this is for. Garbage of an earlier run (a
// sweep's larger size) is what that retry is for: installGuard returned
// it as the run started (hostmem.Settle), and the soft limit (90 % of the
// limit) keeps the collector returning freed memory while the run goes
// on, so a resident set over the limit here is memory this run held.
// The error stops the simulation as the event loop's guard does (exit 3).
// The sample is hostmem.SampleAtReturn's, which reads the resident set
// only when it may have passed the limit since its last read: a large
// world's kernels return one after another, and 65,536 reads took half a
// second of system time.
//
// On partitions the kernel's partition stops with an overAtReturn, which
// the run makes the guard's error once it is over (memoryAtReturn): the
// error counts the messages of every SIP, which only the goroutine that
// runs the partitions may read.
func (w *world) checkAtReturn(at sim.Time) error {
	if h := hostmem.SampleAtReturn(w.memoryLimit); h > w.memoryLimit {
		if w.parts != nil {
			return &overAtReturn{at: at, held: h}
		}
		return w.outOfMemoryAt(at, h)
	}
	return nil
}

// overAtReturn is a partitioned run's checkAtReturn stop.
type overAtReturn struct {
	at   sim.Time
	held int64
}

func (e *overAtReturn) Error() string { return "over the memory limit at a kernel's return" }

// memoryAtReturn is err, the error that ended a partitioned run, with an
// overAtReturn made the guard's error.
func (w *world) memoryAtReturn(err error) error {
	var over *overAtReturn
	if errors.As(err, &over) {
		return w.outOfMemoryAt(over.at, over.held)
	}
	return err
}

// memoryStop is err, the error that ended a simulation, unless the memory
// watch caused it (a process's Starlark thread cancelled over the limit):
// then the simulation's own guard error, which says when the run stopped
// and what to try for its mode, as when the event loop finds the run over
// the limit.
func (w *world) memoryStop(err error) error {
	if w.outOfMemory == nil || !script.IsMemory(err) {
		return err
	}
	stop := w.outOfMemory(hostmem.Held())
	var refused *hostmem.AllocRefused
	if e, ok := stop.(*hostmem.OutOfMemoryError); ok && errors.As(err, &refused) {
		// A tile refused before it was allocated: what the run held then,
		// and the tile.
		e.Held, e.Asked = refused.Held, refused.Bytes
	}
	return stop
}

// messages is the number of messages sent so far.
func (w *world) messages() uint64 {
	var n uint64
	if w.g != nil {
		for _, ep := range w.g.EPs {
			for _, q := range ep.QPs {
				n += q.MyHead
			}
		}
	}
	return n
}
