package tl

import (
	"math"

	"go.starlark.net/starlark"

	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
)

// A kernel's process runs as a coroutine of the event loop: while its
// Starlark runs, nothing else in the simulation does, and simulated time
// moves only when the process waits. A loop whose calls never wait
// (tl.done, tl.ready, tl.time, views, tiles, tile math, events already
// set) therefore spins at one instant forever, each call costing far more
// host time than a Starlark step and some (tiles, tile math, tl.trace)
// adding an op_log record: the step limit ended such a loop only after
// tens of seconds and gigabytes. What no kernel needs is very many calls
// within one simulated instant: each rank counts the calls of tl, Ptr and
// Tile of its kernel and threads since simulated time last moved, and the
// call that passes its limit (InstantCallLimit) fails the run. Counting
// calls, not host time, keeps the run deterministic and the same for
// every --threads.
//
// A kernel's set-up, at time 0, is where it makes most calls at one
// instant, and it grows with its buffers: ring_allreduce_manual cuts both
// into tables of views of 2 KiB and more, 4,110 calls at 4 MiB a rank
// (the most of the shipped algorithms at 256 ranks) and 131,086 at 256
// MiB (8 ranks). The limit is a million calls plus one per 16 bytes of
// the rank's buffers, over 250 times those, and it grows with --max-steps
// past its default (a kernel meant to run that long may need that much
// set-up too).
const (
	baseInstantCalls    = 1_000_000
	bytesPerInstantCall = 16
	defaultMaxSteps     = 100_000_000 // --max-steps 0 (cmd/kernbench's defaultMaxSteps)
)

// InstantCallLimit is the calls a kernel whose rank's buffers hold
// bufferBytes, or one of its threads, may make within one simulated
// instant, under a step limit of maxSteps (0: the default).
func InstantCallLimit(bufferBytes int64, maxSteps uint64) int64 {
	n := baseInstantCalls + max(bufferBytes, 0)/bytesPerInstantCall
	if maxSteps > defaultMaxSteps {
		// (float: the product may pass 64 bits; the limit saturates.)
		f := float64(n) * (float64(maxSteps) / defaultMaxSteps)
		if f >= math.MaxInt64 {
			return math.MaxInt64
		}
		n = int64(f)
	}
	return n
}

// instantCalls counts a rank's calls since simulated time last moved.
type instantCalls struct {
	at    sim.Time // the instant of the calls counted
	calls int64    // calls at that instant
}

// noteCall counts one call of the kernel's thread at the current instant,
// failing it when that makes too many (an untimed machine, the mock's,
// where time never moves, counts nothing).
func (k *Kernel) noteCall() error {
	if k.PE == nil || k.M == nil || k.M.Params.Untimed {
		return nil
	}
	root := k.rootKernel()
	c := root.instant
	if c == nil {
		c = new(instantCalls)
		root.instant = c
	}
	if now := k.PE.Sim().Now(); now != c.at || c.calls == 0 {
		c.at, c.calls = now, 0
	}
	c.calls++
	limit := k.Stats.InstantCalls
	if limit <= 0 {
		limit = baseInstantCalls
	}
	if c.calls <= limit {
		return nil
	}
	return errorf(errkind.NoTimeProgress, "%s made %d calls of tl, Ptr and Tile at t=%v without simulated time advancing, the most one instant allows (a million plus one per 16 bytes of the rank's buffers; more under a --max-steps above its default): a loop of calls that never wait (tl.done, tl.ready or tl.time polled, views, tiles, tile math or events made over and over) spins at one instant, since the simulation moves on only while a kernel waits; wait for what it polls instead (tl.wait, tl.recv)", k.spinners(), c.calls-1, c.at)
}

// spinners names who made the calls: the kernel, or the kernel and its
// threads.
func (k *Kernel) spinners() string {
	if k.Threads() {
		return "the kernel and its threads"
	}
	return "the kernel"
}

// noteCallOn counts a call of a Ptr or Tile method on the kernel or
// thread that th runs (nothing outside a kernel: host code, tests).
func noteCallOn(th *starlark.Thread) error {
	k, ok := th.Local(threadKernelKey).(*Kernel)
	if !ok {
		k, ok = th.Local(ViewsKey).(*Kernel)
	}
	if !ok || k == nil {
		return nil
	}
	return k.noteCall()
}
