package ccl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"kernbench/starlark/deadlock"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"math"
	"slices"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

// bench is the builtin collective bench: per-rank send and recv buffers in
// the data space, deterministic inputs, a sentinel in out-of-place recv
// buffers, and the reference check after the run.
type bench struct {
	p      *plan
	count  int64
	send   []*tl.Ptr
	recv   []*tl.Ptr
	inputs [][]byte // copies of the send buffers before the run
	before [][]byte // recv buffers before the run
	// sums adds up the send buffers as they are filled, for a reference
	// that reduces them (nil: it reads them; see Collective.Expected).
	sums *dtype.FillSum
}

func dataMemory(pe *machine.PE, s machine.Space) *machine.Memory {
	switch s {
	case machine.TCM:
		return pe.TCM
	case machine.SRAM:
		return pe.SRAM
	}
	return pe.HBM
}

// fitHint says what makes a bench's buffers fit: HBM, the largest memory,
// unless they are there already (then only a smaller size helps).
func fitHint(s machine.Space) string {
	if s == machine.HBM {
		return "use a smaller --count or --bytes (or a larger system.memory.hbm.capacity)"
	}
	return "try --data-space hbm or a smaller --count or --bytes"
}

// checkFits refuses a count whose buffers cannot fit the simulated memory
// at all (before the host-memory estimate: the simulated machine's limit
// is the one to name).
func checkFits(p *plan, m *machine.Machine, count int64) error {
	sz := int64(p.dt.Size())
	if mem := dataMemory(m.Ranks[0], p.dataSpace); count > mem.Capacity/sz {
		// (count × size may pass 2^63: --count 2^63-1 of f32 said "-4 bytes".)
		bytes := fmt.Sprintf("%d bytes", count*sz)
		if count > math.MaxInt64/sz {
			bytes = "more than 2^63 bytes"
		}
		return report.WithKind(errkind.MemoryLimit, &report.Failure{Rank: 0,
			Msg: fmt.Sprintf("bench: rank 0's buffer of %d × %s (%s) does not fit: %v holds %d bytes; %s", count, p.dt, bytes, mem, mem.Capacity, fitHint(p.dataSpace))})
	}
	return nil
}

// buffersFit reports whether every rank's bench buffers fit its data
// memory; when they do not, newBench says so (the host-memory estimate
// would name the wrong limit).
func buffersFit(p *plan, m *machine.Machine, count int64) bool {
	sz := int64(p.dt.Size())
	sc, rc := p.coll.sendCount(count, p.world), p.coll.recvCount(count, p.world)
	for r := 0; r < p.world; r++ {
		mem := dataMemory(m.Ranks[r], p.dataSpace)
		free := (mem.Capacity - mem.Used()) / sz
		need := sc + rc
		if p.opts.InPlace {
			need = max(sc, rc)
		}
		if sc > free || rc > free || need > free {
			return false
		}
	}
	return true
}

func newBench(p *plan, m *machine.Machine, count int64) (*bench, error) {
	b := &bench{p: p, count: count}
	sz := int64(p.dt.Size())
	if err := checkFits(p, m, count); err != nil {
		return nil, err
	}
	sc, rc := p.coll.sendCount(count, p.world), p.coll.recvCount(count, p.world)
	if p.opts.Verify && !m.TimingOnly && p.coll.Reduces {
		b.sums = dtype.NewFillSum(p.dt, sc, p.world)
	}
	ahead := p.roomAhead(count)
	for r := 0; r < p.world; r++ {
		mem := dataMemory(m.Ranks[r], p.dataSpace)
		mem.ReserveAhead((sc+rc)*sz, ahead)
		alloc := func(n int64, what string) (machine.Region, error) {
			off, err := mem.Alloc(n * sz)
			if err != nil {
				return machine.Region{}, report.WithKind(errkind.MemoryLimit, &report.Failure{Rank: r,
					Msg: fmt.Sprintf("bench: rank %d %s (%d × %s) does not fit: %v; %s", r, what, n, p.dt, err, fitHint(p.dataSpace)), Err: err})
			}
			return machine.Region{Mem: mem, Off: off, N: n * sz}, nil
		}
		var sendReg, recvReg machine.Region
		var err error
		if p.opts.InPlace {
			// NCCL in-place conventions: one buffer; for reduce_scatter the
			// recv view is the rank's chunk, for allgather the send view is.
			big := max(sc, rc)
			whole, err := alloc(big, "buffer")
			if err != nil {
				return nil, err
			}
			sendReg, recvReg = whole.Sub(0, sc*sz), whole.Sub(0, rc*sz)
			// (the count-sized buffer of a collective whose other buffer
			// holds count × world_size elements).
			switch {
			case p.coll.SendMul && !p.coll.RecvMul:
				recvReg = whole.Sub(int64(r)*count*sz, count*sz)
			case p.coll.RecvMul && !p.coll.SendMul:
				sendReg = whole.Sub(int64(r)*count*sz, count*sz)
			}
		} else {
			if sendReg, err = alloc(sc, "sendbuf"); err != nil {
				return nil, err
			}
			if recvReg, err = alloc(rc, "recvbuf"); err != nil {
				return nil, err
			}
			if !m.TimingOnly {
				hostmem.Populate(recvReg.Bytes())
				fillSentinel(p.dt, recvReg)
			}
		}
		if !m.TimingOnly {
			hostmem.Populate(sendReg.Bytes())
			if b.sums != nil {
				b.sums.Fill(sendReg.Bytes(), p.opts.Seed, r)
			} else {
				dtype.Fill(p.dt, sendReg.Bytes(), p.opts.Seed, r)
			}
		}
		b.send = append(b.send, tl.NewPtr(sendReg, p.dt, sc, r))
		b.recv = append(b.recv, tl.NewPtr(recvReg, p.dt, rc, r))
	}
	return b, nil
}

// fillSentinel makes recv read as the sentinel without writing it
// (Region.FillPattern): the run's stores overwrite most of it, and the
// blocks they do not are written with it when read.
func fillSentinel(dt dtype.DType, recv machine.Region) {
	var pat [8]byte
	if 8%dt.Size() != 0 {
		sentinel(dt, recv.Bytes())
		return
	}
	sentinel(dt, pat[:])
	recv.FillPattern(binary.LittleEndian.Uint64(pat[:]))
}

// roomAhead is the bytes of a rank's bench buffers at the largest size
// of the sweep above count, which its memory keeps room for (pages not
// touched until used, machine.Memory.ReserveAhead): the sizes after it
// take its slices and back only what they add, instead of new slices
// (the collector would clear reused heap pages, faulting them one by
// one). It is at most --max-memory over the ranks, which a size must fit
// to run, and 0 without that bound, under an address-space limit (where
// untouched room counts too), or with no larger size.
func (p *plan) roomAhead(count int64) int64 {
	largest := slices.Max(p.counts)
	if largest <= count || p.bufs == nil || p.opts.MaxMemory <= 0 || hostmem.AddressSpaceLimited() {
		return 0
	}
	need := (p.coll.sendCount(largest, p.world) + p.coll.recvCount(largest, p.world)) * int64(p.dt.Size())
	return min(need, p.opts.MaxMemory/int64(p.world))
}

// keepSentinels tells the pre-run image that every recv buffer holds its
// sentinel (newBench wrote it, a value repeated from the buffer's start):
// the run's first write to each of their blocks then saves it without
// checking its bytes for a pattern (128 MiB read in the verified 64-rank
// ring). An in-place buffer holds the send data instead.
func (b *bench) keepSentinels(w *world) {
	if !w.keptImage || b.p.opts.InPlace {
		return
	}
	for _, r := range b.recv {
		r.Reg.KeepPreRunPattern()
	}
}

// keepInputs records what the reference check compares against: every
// rank's send and recv buffer before the run, as views of the pre-run
// image (which phase 2 needs anyway) or, for a buffer the run never
// wrote, of the live memory, so the bench copies nothing. It runs after
// phase 1 (the image is complete then) and before phase 2 (which replays
// onto the image). Without verification there is nothing to keep.
func (b *bench) keepInputs(w *world) {
	if !b.p.opts.Verify || !w.keptImage {
		return
	}
	for r := range b.send {
		b.inputs = append(b.inputs, b.send[r].Reg.PreRun())
		if b.p.coll.KeepsRecv() {
			// Only then: a view of a recv buffer's pre-run bytes writes
			// out the blocks kept as a pattern (its sentinel).
			b.before = append(b.before, b.recv[r].Reg.PreRun())
		}
	}
}

// verify compares every rank's recv buffer with the reference and fills
// Wrong, FirstWrong and Verified.
func (b *bench) verify(res *report.Result) {
	p := b.p
	want := p.coll.Expected(p.dt, p.red, p.root, b.count, b.inputs, b.before, b.sums)
	ranks := 1
	if p.coll.Reduces {
		ranks = p.world
	}
	for r := 0; r < p.world; r++ {
		got := b.recv[r].Reg.View()
		rb := rangeBuilder{rw: report.RankWrong{Rank: r}}
		if !p.opts.InPlace {
			rb.isSentinel = func(i int) bool { return isSentinel(p.dt, got, i) }
		}
		wrong, first := dtype.EachWrong(p.dt, p.red, ranks, got, want[r], rb.add)
		if wrong > 0 && res.FirstWrong == nil {
			res.FirstWrong = &report.WrongElem{Rank: r, Index: first, Got: dtype.Format(p.dt, got, first), Want: dtype.Format(p.dt, want[r], first)}
		}
		if wrong > 0 {
			res.WrongRanges = append(res.WrongRanges, rb.rw)
		}
		res.Wrong += int64(wrong)
	}
	res.Verified = res.Wrong == 0
}

// simFailure turns the error that ended a simulation into a Failure with the
// right exit status and a report of every blocked process.
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

func simFailure(err error, file string) *report.Failure { return simFailureNoted(err, file, nil, nil) }

// simFailureNoted is simFailure with note adding a line (when it returns
// one) under each blocked process's backtrace, and held the resources a
// fault stopped that held transfers (faultsHeld): then processes that
// stopped waiting wait for those transfers, and the failure is the
// fault's (FaultStopped), with the blocked processes but no deadlock's
// wait-for graph, cycle or hint, nor a slow run's analysis.
func simFailureNoted(err error, file string, note func(p *sim.Proc) string, held []string) *report.Failure {
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
	var re *rankError
	if errors.As(err, &re) {
		f.Rank = re.rank
		f.Backtrace = script.Backtrace(re.err)
		f.Detail = script.Format(re.err)
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			// The message is the first line; the traceback follows
			// without repeating it.
			f.Msg = fmt.Sprintf("rank %d: %s%s", re.rank, ee.Msg, sliceHint(ee.Msg))
			f.Detail = script.Traceback(re.err)
		}
		// who names the failing process: the rank, the thread when a
		// spawned one failed, and the process's note (an MSCCL run: the
		// XML step it was at, as a deadlock report gives for each blocked
		// process; the backtrace points into the runner, not the schedule).
		who, failed := fmt.Sprintf("rank %d", re.rank), re.proc
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
		if rankOnly := fmt.Sprintf("rank %d", re.rank); who != rankOnly {
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
