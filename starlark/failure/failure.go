// Package failure is the report's Failure for what ended a run, its one
// job: the error that stopped a simulation (a kernel's or an L3
// process's error, a deadlock, a slow wait, a stopping fault, the step,
// time and memory limits) or a module's load becomes a Failure of the
// right kind, with its message, traceback, blocked processes, wait-for
// graph and hint (starlark/deadlock reads the blocked processes).
package failure

import (
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/deadlock"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

// sliceHint names the view a Ptr slice means: Starlark's own message for
// p[a:b] says only "invalid slice operand Ptr" (its slice operator cannot
// report an error of the value's, so a Ptr does not take one).
func sliceHint(msg string) string {
	switch msg {
	case "invalid slice operand Ptr":
		return " (a Ptr has no [a:b]: p.slice(start, count) is the view of count elements from start, p.chunk(i, n) the i-th of n equal parts)"
	case "invalid slice operand Tile":
		return " (a Tile has no [a:b]: load the part you need, tl.fetch(p.slice(start, count)))"
	}
	return ""
}

// Sim turns the error that ended a simulation into a Failure with the
// right exit status and a report of every blocked process. note, when not
// nil, adds a line (when it returns one) under each blocked process's
// backtrace; held names the resources a fault stopped that held
// transfers: then processes that stopped waiting wait for those
// transfers, and the failure is the fault's (FaultStopped), with the
// blocked processes but no deadlock's wait-for graph, cycle or hint, nor
// a slow run's analysis.
func Sim(err error, note func(p *sim.Proc) string, held []string) *report.Failure {
	var stall *sim.StallError
	var wt *sim.WaitTimeoutError
	var wd *sim.WatchdogError
	var blocked []*sim.Proc
	switch {
	case errors.As(err, &stall):
		blocked = stall.Blocked
	case errors.As(err, &wt):
		blocked = wt.Blocked
	case errors.As(err, &wd):
		blocked = wd.Blocked
	}
	f := report.WithKind(errkind.Of(err), &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	if len(held) > 0 && len(blocked) > 0 {
		report.WithKind(errkind.FaultStopped, f)
		f.Msg = fmt.Sprintf("a fault stopped the run: %s; they never arrive, and %d process(es) wait for ever (below)", strings.Join(held, "; "), len(blocked))
		f.Blocked = deadlock.BlockedProcs(blocked)
		f.Detail = fmt.Sprintf("%d process(es) blocked:\n%s", len(blocked), strings.TrimRight(deadlock.DescribeBlocked(blocked, f.Blocked, note), "\n"))
		return f
	}
	if wi, ok := waitedRecvInFlight(wt); ok {
		// The message it waits for is on its way: slow, not stuck.
		report.WithKind(errkind.WaitTimeout, f)
		f.Msg = fmt.Sprintf("%s has waited longer than deadlock_timeout_ns (%v) in %v: not a deadlock, rank %d's message to it is still in flight, "+
			"but the configured latencies and bandwidths make it slower than the timeout; "+
			"raise defaults.deadlock_timeout_ns (--set defaults.deadlock_timeout_ns=N) if that is meant", wt.Proc.Name, wt.Limit, wi, wi.QP.Peer)
	} else if op, ok := waitedOp(wt); ok {
		// A memory operation always completes: a wait on one that passes
		// the deadlock timeout is a slow machine (a huge latency, a tiny
		// bandwidth), not a deadlock, and calling it one sends the user
		// looking for a bug in the algorithm.
		report.WithKind(errkind.WaitTimeout, f)
		f.Msg = fmt.Sprintf("%s has waited longer than deadlock_timeout_ns (%v) for its %s: not a deadlock, a memory operation "+
			"always completes, but the configured latencies and bandwidths make this one slower than the timeout; "+
			"raise defaults.deadlock_timeout_ns (--set defaults.deadlock_timeout_ns=N) if that is meant", wt.Proc.Name, wt.Limit, op)
	} else if chain := deadlock.WaitsOnWork(wt); chain != nil {
		// What it waits for depends on a rank still working: slow, not
		// stuck (starlark/deadlock, WaitsOnWork).
		report.WithKind(errkind.WaitTimeout, f)
		f.Msg = fmt.Sprintf("%s has waited longer than deadlock_timeout_ns (%v) in %v: not a deadlock, it waits for rank %d, which is still working (%s), "+
			"but the configured latencies and bandwidths make the run slower than the timeout; "+
			"raise defaults.deadlock_timeout_ns (--set defaults.deadlock_timeout_ns=N) if that is meant", wt.Proc.Name, wt.Limit, wt.Proc.Wait, chain[len(chain)-1], deadlock.ChainText(chain))
	}
	var re *RankError
	if errors.As(err, &re) {
		f.Rank = re.Rank
		f.Backtrace = script.Backtrace(re.Err)
		f.Detail = script.Format(re.Err)
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			// The message is the first line; the traceback follows
			// without repeating it.
			f.Msg = fmt.Sprintf("rank %d: %s%s", re.Rank, ee.Msg, sliceHint(ee.Msg))
			f.Detail = script.Traceback(re.Err)
		}
		// who names the failing process: the rank, the thread when a
		// spawned one failed, and the process's note (an MSCCL run: the
		// XML step it was at, as a deadlock report gives for each blocked
		// process; the backtrace points into the runner, not the schedule).
		who, failed := fmt.Sprintf("rank %d", re.Rank), re.Proc
		var the *tl.ThreadError
		if errors.As(err, &the) {
			// A spawned thread failed: say which, and where it was spawned.
			who, failed = who+" "+the.Thread, the.Proc
			f.SpawnedAt = the.SpawnedAt
			f.Detail += "\nthe thread was spawned at:\n  " + strings.Join(the.SpawnedAt, "\n  ")
		}
		if note != nil && failed != nil {
			if n := note(failed); n != "" {
				who += " " + n
			}
		}
		if rankOnly := fmt.Sprintf("rank %d", re.Rank); who != rankOnly {
			f.Msg = who + ": " + strings.TrimPrefix(f.Msg, rankOnly+": ")
		}
		switch f.ErrorKind() {
		case errkind.StepLimit:
			f.Msg += " (raise --max-steps if the kernel is meant to run this long)"
		case errkind.Timeout:
			f.Msg += " (raise --timeout if the kernel is meant to run this long)"
		case errkind.HostMemory:
			// The memory watch's reason names the limit and what to try.
			f.Msg = strings.Replace(f.Msg, "Starlark computation cancelled: ", "", 1)
		}
	}
	if len(blocked) > 0 {
		var bld strings.Builder
		fmt.Fprintf(&bld, "%d process(es) blocked:\n", len(blocked))
		views := deadlock.BlockedProcs(blocked)
		bld.WriteString(deadlock.DescribeBlocked(blocked, views, note))
		edges := deadlock.WaitGraph(blocked)
		cycle := deadlock.FindCycle(edges)
		bld.WriteString(deadlock.DescribeWaitGraph(edges, cycle))
		f.Hint = deadlock.RingHint(cycle, views)
		if f.Hint != "" {
			fmt.Fprintf(&bld, "\nhint: %s", f.Hint)
		}
		f.Detail = strings.TrimRight(bld.String(), "\n")
		f.WaitFor, f.Blocked, f.Cycle = edges, views, cycle
	}
	return f
}

// waitedOp is the memory operation a WaitTimeoutError's process waits
// for, if it waits for one.
func waitedOp(wt *sim.WaitTimeoutError) (*machine.MemOp, bool) {
	if wt == nil || wt.Proc == nil {
		return nil, false
	}
	op, ok := wt.Proc.Wait.(*machine.MemOp)
	return op, ok && op != nil
}

// waitedRecvInFlight is the recv a WaitTimeoutError's process waits in
// when a message toward it is still in flight (its sender's DMA has not
// completed).
func waitedRecvInFlight(wt *sim.WaitTimeoutError) (*machine.WaitInfo, bool) {
	if wt == nil || wt.Proc == nil {
		return nil, false
	}
	wi, ok := wt.Proc.Wait.(*machine.WaitInfo)
	if !ok || wi == nil || wi.QP == nil || !strings.HasPrefix(wi.Op, "recv") {
		return nil, false
	}
	peer := wi.QP.PeerQP()
	return wi, peer != nil && peer.InFlight > 0
}

// StepLimit turns a failure caused by the Starlark step limit, the
// wall-clock timeout or the memory watch outside a kernel (a module's top level, neighbors())
// into a step-limit or timeout failure: exit 3 and the hint, as inside
// kernels.
func StepLimit(f *report.Failure) *report.Failure {
	var ee *starlark.EvalError
	if !errors.As(f.Err, &ee) {
		return f
	}
	switch k := errkind.Of(f.Err); k {
	case errkind.HostMemory:
		// The reason names the limit and what to try.
		report.WithKind(k, f)
		f.Msg = strings.TrimPrefix(ee.Msg, "Starlark computation cancelled: ")
		f.Detail, f.Backtrace = script.Traceback(ee), script.Backtrace(ee)
	case errkind.StepLimit, errkind.Timeout:
		flag := "--max-steps"
		if k == errkind.Timeout {
			flag = "--timeout"
		}
		report.WithKind(k, f)
		f.Msg = ee.Msg + " (raise " + flag + " if the script is meant to run this long)"
		f.Detail, f.Backtrace = script.Traceback(ee), script.Backtrace(ee)
	}
	return f
}

// RankError is a failure raised while rank's kernel ran.
type RankError struct {
	Rank int
	Proc *sim.Proc // the rank's process, when the error is its own
	Err  error
}

func (e *RankError) Error() string { return fmt.Sprintf("rank %d: %v", e.Rank, e.Err) }
func (e *RankError) Unwrap() error { return e.Err }

// ProcError is a failure raised while an L3 or L2 process ran.
type ProcError struct {
	Proc string
	Err  error
}

func (e *ProcError) Error() string { return e.Proc + ": " + e.Err.Error() }
func (e *ProcError) Unwrap() error { return e.Err }

// L3 converts a failed L3 run into a Failure: errors raised in main or
// an L2 function exit 4 with the kind taken from the error.
func L3(err error) error {
	f := Sim(err, nil, nil)
	var pe *ProcError
	if !errors.As(err, &pe) {
		return f
	}
	report.WithKind(errkind.Of(pe.Err), f)
	f.Backtrace = script.Backtrace(pe.Err)
	f.Detail = script.Format(pe.Err)
	var ee *starlark.EvalError
	if errors.As(pe.Err, &ee) {
		f.Msg = fmt.Sprintf("%s: %s", pe.Proc, ee.Msg)
		f.Detail = script.Traceback(pe.Err)
	}
	return f
}

// Load is a module's load error as a LoadError failure.
func Load(err error) error {
	f := report.WithKind(errkind.Load, &report.Failure{Rank: -1, Msg: script.Format(err), Err: err})
	if msg, tb, bt, ok := script.LoadFailure(err); ok {
		// file:line and the error first, the traceback after it, as a
		// kernel's error is reported.
		f.Msg, f.Detail, f.Backtrace = msg, tb, bt
	}
	return StepLimit(f)
}
