// Package l3l2 is the L3-L2 host↔device communication layer of the
// simulated machine: regions (payload and int32 counters) and the ordered
// SPSC message queue built on them, as docs/l3l2.md describes them to
// users. It is pure Go on top of engine/machine and engine/sim — no
// Starlark, no wall clock, no global state — and the L3/L2 builtins
// (starlark/orch, docs/builtins.md) are thin wrappers over it.
//
// # What lives here
//
//   - Hub: one per machine. Creates regions and queues, resolves the
//     physical addresses L2 code receives back to simulated memory, and
//     owns what the two levels share: the single-writer line table, the
//     waiters of counter waits, and deferred physical release.
//   - Region / Counter (L3, the host): orch.create_l3_l2_region.
//   - RegionEndpoint (L2, the AICPU): l2.region_endpoint.
//   - Queue, QueueInput, QueueOutput, Message (L3 initiator):
//     orch.create_worker_chip_queue.
//   - QueueEndpoint, EndpointInput, EndpointOutput, InputHandle,
//     Reservation (L2 peer): l2.spsc_queue_endpoint.
//   - Descriptor / DecodeDescriptor (6 scalars), Binding / DecodeBinding
//     (10 scalars), Layout / NewLayout.
//
// # Time and memory
//
// A region lives in the HBM of PE 0 of the worker chip (SIP = worker id):
// payload first, counters at the next 64-byte boundary, one allocation that
// reads as zero. Descriptor bases are physical addresses
// (machine.Region.Addr), so L2 views are real machine.Regions a PE kernel
// can fetch from and store to.
//
// Every operation is charged to the calling *sim.Proc with Proc.Sleep (a nil
// process is charged nothing, for untimed use from Go):
//
//   - L3 operations cross PCIe: T(host→chip HBM path, n) =
//     pcie + pe_noc + hbm port latency + n / min bandwidth (counters: n=4).
//   - L2 operations are local HBM accesses: T(HBM port, n). An L2 payload
//     view (RegionEndpoint.PayloadRead, input/output View) moves no bytes
//     and costs nothing; the kernel that uses it pays.
//   - Writes land at the end of their transfer; reads sample memory when
//     issued and return after the transfer. So Add is a read-modify-write
//     that is not atomic.
//   - Every byte written is recorded in the machine's op_log (kind l3l2), so
//     two-pass verification replays it.
//   - Creation and free are control-path operations and take no time.
//
// # Counter waits
//
// port.wait is the one blocking primitive; queue blocking calls are built on
// it. It samples the counter when it starts, at every wake-up and at the
// deadline. Options.Backpressure picks how it waits, as for IPCQ:
//
//   - machine.Sleep (default): parked, woken exactly when the counter is
//     written; deadlines are served by hub timer events that are never
//     scheduled later than the next pending event (the event heap cannot
//     cancel), so an early wake-up leaves no far-future event to stretch
//     the run or trip max_sim_time.
//   - machine.Poll: re-reads every PollInterval (instants start + k·interval),
//     skipping instants before the next pending event — identical results to
//     polling every interval, without its cost.
//
// A match at time t returns at t + one counter read; a wait that never
// matches returns at exactly start + timeout. Waiting processes are Timed
// and describe themselves in Proc.Wait (*WaitInfo).
//
// # Errors
//
//   - L3 region: *RegionError with a Code (validation names,
//     BAD_ARGUMENT, RELEASED, POISONED, SINGLE_WRITER, LOCAL_OPERATION);
//     *TimeoutError for an expired wait (not poison).
//   - L2 region endpoint: the sticky *EndpointError (kind, op, region_id,
//     counter address, operand, observed, message); its text is the
//     reference's canonical "L3-L2 endpoint error ... region=<id>".
//   - Queues: *QueueError (kind, op, session, transaction, message).
//     L3 raises it and the queue State says whether it poisoned; on L2 it is
//     the endpoint's first, terminal error (Err). *ArgError is a malformed
//     call that touched nothing (never poisons; raised on both levels).
//     *TimeoutError is an L3 blocking timeout; on L2 a timeout is a nil
//     result with no error.
//
// # Spec rules → code
//
//	region in chip HBM, 64-aligned counters      Hub.allocate
//	descriptor magic/order/result names          DecodeDescriptor, Descriptor.Validate
//	counter address / payload access checks      Descriptor.CheckCounterAddr, CheckPayload
//	NotifyOp Set/Add, Add wraps at 32 bits        port.notify
//	WaitCmp signed int32                          WaitCmp.Eval
//	test = one-shot (matched, observed)           Counter.Test, RegionEndpoint.SignalTest
//	wait: positive timeout, observed, no poison   Counter.Wait, port.wait
//	L2 timeout 0 = live no-attempt                RegionEndpoint.SignalWait, QueueEndpoint.blocking
//	single writer per 64-byte line                port.claim (Hub.Violations)
//	LIVE/RELEASED/POISONED, free idempotent       Region.usable, Region.Free
//	pre-validation raises without poison          Region.validation vs Region.failed
//	deferred physical release                     Hub.ReleaseFreed, Hub.ReleaseAll
//	L2 fatal error poisons the named region       Hub.PoisonRegion (called by the runtime)
//	sticky L2 endpoint errors                     RegionEndpoint.set
//	L2 payload_read is a live view                RegionEndpoint.PayloadRead
//	SPSQ magic exact, 10 scalars, txn != 0        DecodeBinding, Binding.Validate
//	layout + overflow checks + worked cases       NewLayout
//	six counters on a 64-byte stride              the *Offset constants, Layout
//	seq i+1, slot (seq-1)&(depth-1)               Layout.slotOffset
//	full/empty on monotonic values, capacity      tryEnqueue, TryReserve (tail-head >= depth)
//	low-32 reconstruction, delta in [0, depth]    reconstruct, Queue.refresh, QueueEndpoint.refresh
//	arenas: skip to start, full, n > arena        tryEnqueue, TryReserve, expectedOffset, advanceCursor
//	consumer replay offset check                  TryPeek (both sides), EndpointInput.Release
//	producer replay of released descriptors       tryEnqueue, TryReserve (replay loops)
//	publication order                             tryEnqueue / Queue.writeDesc, EndpointOutput.Publish
//	window 1..depth + STOP slot                   Hub.QueueEndpoint, EndpointInput.TryPeek
//	FIFO-prefix physical release, drained()       EndpointInput.Release
//	draining after STOP, descriptor after STOP    EndpointInput.TryPeek
//	one active output reservation                 EndpointOutput.TryReserve
//	ownership (release/publish/read handles)      EndpointInput.entry, EndpointOutput.isActive, Queue.isActive
//	abort flags, remote abort after timeout       Queue.poison/blocking, QueueEndpoint.poison/blocking
//	first error wins, terminal                    QueueEndpoint.setErr, Queue.poison, Queue.usable
//	STOP only on input; input after STOP (L3)     QueueInput.validate, tryEnqueue, QueueInput.enqueue, Publish
//
// # Interpretations (see the package tests for each)
//
//   - BAD_SCALAR_COUNT is checked where a missing scalar is first needed,
//     so checks run strictly in the spec's order (a short list with a bad
//     magic reports BAD_MAGIC_VERSION); the reference checks the count
//     first. With six or more scalars both agree.
//   - Queue binding: BAD_DESCRIPTOR for anything Binding.Validate rejects or
//     ranges that name no allocated region; BAD_ARGUMENT for sizes that
//     disagree with the layout or the region's spans, and for the window.
//   - max_inflight 1: a second DATA/ERROR peek while one is active is
//     OWNERSHIP; STOP may still enter its slot. With max_inflight > 1 a full
//     window is no progress. ERROR counts against the window like DATA.
//   - The window counts inputs until they are physically released (a handle
//     released out of order still occupies its slot), as the reference.
//   - The peer abort flag is sampled only when a blocking call's timeout
//     expires (not before each wait, as the reference also does).
//   - Once L3 has published STOP its input is stopped, and refusing more
//     input never poisons (as the reference runtime): try_enqueue and
//     try_request_stop return false; enqueue and request_stop raise an
//     *ArgError saying the queue is stopped, at once, without waiting.
//   - A blocking L3 enqueue of more than the arena is an *ArgError (it can
//     never succeed); try_enqueue returns false.
//   - L2 read/view/write with a handle that is not active raise an
//     *ArgError (no poison), mirroring L3 read. A view obtained while the
//     handle (reservation) was active and used after its release (publish)
//     is a stale-view QueueError, OWNERSHIP input.view (output.view), also
//     without poison (ViewStale; the Starlark Ptr checks it on every use).
//   - A second endpoint on a binding whose endpoint is live is OWNERSHIP at
//     init (no abort flag): an SPSC queue has one consumer.
//   - A blocking L2 reserve of more than the output arena is BAD_ARGUMENT
//     (terminal, no abort flag); try_reserve stays plain no-progress.
//   - Hub.Unfinished lists what L3 main left behind: messages queued in
//     either direction, queues and regions never freed.
//   - A single-writer violation refuses the write; on L3 it poisons the
//     region (SINGLE_WRITER), on L2 it is SIGNAL_PROTOCOL. Writers are "L3
//     host" and "L2 <process name>".
//   - As specified, skipped arena bytes count as used until the consumer
//     passes them, so a payload with pos + n > arena and n > pos (pos =
//     cursor % arena) can never be placed, even into an empty arena
//     (TestQueue_Arena_SkipCanStallLargePayload). Payloads up to half the
//     arena are always placeable.
package l3l2
