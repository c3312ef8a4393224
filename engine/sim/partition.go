package sim

// Parallel simulation: a design, an audit, and the partitioned loop.
//
// # Model
//
// A Partitioned simulation is a fixed set of partitions, one per SIP of
// the machine, each a Sim of its own: its own event queue, clock,
// sequence of scheduling and processes. The partitions are fixed by the
// machine, whatever the number of threads K: K only decides how many
// goroutines execute the partitions of a window, so output cannot depend
// on K as long as a partition's processing depends on nothing but its
// own state and the messages delivered to it at window barriers.
//
// Everything one partition does to another is a message (Partition.Send):
// a handler of the destination partition and the time it fires there, at
// least the lookahead L after the sender's clock. L is the least latency
// of any cross-partition effect (for the machine: what a transfer's head
// takes from its issue to the first resource of another SIP, the PCIe
// up-link's latency and more), computed from the machine's parameters
// (machine.Params.Lookahead: 502 ns with the shipped links); a machine
// where it is 0 (the untimed mock, one SIP) runs on one Sim.
//
// The run is a sequence of windows [T, T+L): T is the earliest pending
// event or message of any partition, and each partition fires its events
// before T+L. A message sent in a window is at or after its end, so no
// partition can receive one for a time it has passed. At the barrier
// after the window every partition takes the messages sent to it, in the
// order (sending partition, order of sending), into its queue; they fire
// at their times after the events scheduled there before the barrier (a
// message is scheduled at the barrier). That is the same-instant rule of
// a partitioned run: within a partition, (time, sequence of scheduling)
// as in Sim, where a message is scheduled at the barrier after the
// window it was sent in. Window boundaries follow from the partitions'
// states (T) and L alone, so the order is the same for every K and every
// run. Within a window, a process's sleep passes in place only before
// the window's end (a message may arrive there), and only when its own
// partition has no event before its end (Sim's rule, with the
// partition's queue for the whole one): the events a multi-SIP run
// counts (a sleep that does not pass in place is one) are those of this
// rule, the same for every K, and not those of one queue for the whole
// machine, where a sleep passes in place only when no rank anywhere has
// an event before its end.
//
// One barrier per window: the boxes a partition sends into alternate
// between windows, so a partition takes the previous window's messages
// while the others write this window's; the next T is computed from each
// partition's earliest pending event and earliest message sent, and the
// coordinator lists each partition's incoming boxes (work in the boxes
// used, not in the square of the partitions).
//
// Stops: a partition that stops (Sim.Stop) ends its window there, the
// others run theirs to its end, and the run ends at the barrier with the
// error of the earliest stop, ties to the lower partition. The watchdogs
// (MaxTime: a window never passes it, and the run stops when T would;
// WaitWatchdog: a daemon per partition over its own processes) and the
// deadlock detection (no pending event and no message anywhere while
// processes are blocked) are the coordinator's, with the blocked
// processes of every partition in the order they were spawned.
//
// # What the machine needs (the plan)
//
// A transfer whose path crosses SIPs is split at the boundary: the
// issuing partition books its own segment (source port, NoC, UCIe, the
// PCIe up-link) when the transfer starts, as Path.book does today, and
// sends the head's arrival at the boundary (a time at least the up-link's
// latency later) to the owner of the rest, which books its segment (PCIe
// down-link, NoC, destination port) then. A resource is booked only by
// its owner partition, in that partition's order. This orders contention
// on a remote segment by the head's arrival instead of by issue order,
// so it is the rule of every multi-SIP run, K = 1 included: its goldens
// change once and docs/architecture.md says so. A single-SIP machine has
// no boundary and keeps today's results exactly.
//
// The audit of state a cross-SIP run touches from two partitions, with
// the plan for each:
//
//   - Transfer completion (dma.go): completes at max(path end, injection
//     end + path latency). The sender knows its injection end, the far
//     partition its path end; each sends the other its half (injection
//     end + latency is ≥ L after the injection end; the path end ≥ the
//     down-link's latency after the head's arrival), and each side
//     completes its own half at the same max. Machine.SplitAtSIP does
//     this on one Sim today (dmaEngine.startSplit) with objects that only
//     exchange messages (Machine.post, which checks the lookahead of
//     each): the far side (crossFar) goes to the far SIP at the head's
//     arrival, books there and sends the far end back (crossEnd); the
//     near side (crossNear) is the transfer's owner until the
//     completion, at the later of the injection end's bound and the far
//     end's message; at the injection end (the engine's hook,
//     Machine.endHook, out of the hot line as the trace's was) an IPCQ
//     message's near side sends the far side that bound with the
//     source's bytes (crossInjected). Post schedules on the one Sim; on
//     partitions it becomes Partition.Send, and the one-Sim mode then
//     runs as a partitioned run with K = 1 instead of keeping its own
//     order.
//   - IPCQ (ipcq.go): Message.Complete writes the receiver's slot, its
//     peer_head_cache and wakes its receiver (receiver partition), and
//     drops the sender's in-flight send, wakes its flushes and
//     sent-waiters (sender partition). With SplitAtSIP a message that
//     crosses SIPs completes in those two halves, Message.deliverFar on
//     the far side (a copy of the message; it reads only the sender's
//     fixed fields, and publishes without the sender's my_head) and
//     Message.sentNear on the near side, at the same time; the op_log
//     record and the trace's delivery are the far half's. (Complete keeps
//     one body for a run that splits nothing.) A memory operation that
//     crosses SIPs still completes whole on the issuing side, writing or
//     reading the far memory from there (MemOp.Complete): on partitions
//     it needs halves too (or the run stays on one Sim); to be checked
//     against what kernels can issue. Credits travel back with a delay
//     (creditDelay, a cross-SIP path's idle time ≥ L); with SplitAtSIP
//     one that crosses SIPs is a
//     message (Group.postCredit) carrying its value and the receiver's
//     my_tail when it left, for the I2 check on the sender's side (the
//     one-SIP creditEvent reads them from the receiver's queue pair at
//     arrival). The group's pools of free messages and credits
//     (freeMsgs, freeCredits) become per partition. The hazard scans
//     (inFlightReading, readers) only read the sends of ranks in the
//     region's own SIP: local. HoldSends (a receive releasing the
//     sender's held sends) and Paranoid (a scan of every queue pair
//     after each delivery) are the untimed mock's and --check's, which
//     run on one Sim.
//   - rx-ring bytes: a delivery copies the source's bytes at completion.
//     A source written while a send reads it is an error
//     (SendBufferHazard, StaleSlot) at the write, in the writer's own
//     partition, so the bytes do not change between issue and
//     completion in any run that goes on: with SplitAtSIP the sender
//     copies them at its injection end and the receiver's half writes
//     that copy. Values never depend on partition timing.
//   - DMA engines, resources, memories, math units: per PE or per SIP,
//     each touched by its own partition only once transfers are split;
//     the machine's events go to the Sim of their PE (PE.Sim,
//     Endpoint.sim). The pools a partition touches are its SIP's
//     (machine.local: IPCQ messages, credits that cross SIPs, the split
//     transfers' sides, messages and byte copies, each freed into the
//     pool of the SIP it ends at; memory operations and their buffers,
//     through PE.loc, and the kernels' tile buffers, PE.Buffer). The
//     route cache (Machine.paths) is locked in a
//     partitioned run (any partition may fill it; its paths are the same
//     whoever does).
//   - Materialisation on first use (machine.go): memory IDs are
//     addresses and follow creation order, and Machine.Resources lists
//     links in creation order. Place already makes every placed PE with
//     its memories before the run; in a partitioned run it makes the
//     links of every SIP with a placed PE too (makeLinks: PCIe up and
//     down, every UCIe pair of its cubes, in SIP order), so routes made
//     during the run only read them and Resources is the same for every
//     K (in an order of its own: a one-Sim run lists links as routes
//     first need them). Memories made during a run (none but a placed
//     PE's today) would need IDs per partition.
//   - Events: a sleep passes in place on a partition's own queue (Model),
//     so a multi-SIP run counts its own number; the engine's own
//     bookkeeping events (a transfer's crossing, the halves of a split
//     completion) are not work (Sim.NotWork). Counting every sleep as one
//     event, in place or not, would make the figure the same as one
//     queue's; that changes every run's figure once, and is the lead's
//     call.
//   - Fault jitter: each resource has its own splitmix stream, seeded by
//     its name (faults.go), and only its owner books it: already keyed.
//     A stop's stall notes the source PE (StalledFrom): the booking
//     carries it in the message.
//   - op_log and phase 2: a log per partition; each record keeps the
//     time of the event that wrote it, and the logs are merged in (time,
//     partition, order of writing) (MergeByTime) before phase 2 and
//     before --op-log is written.
//   - Trace: a recorder per partition, merged the same way; an arrow's
//     start (the sender's SIP) and end (the receiver's) are paired at
//     the merge, and rx tracks are numbered per partition (a PE's
//     deliveries are its own SIP's).
//   - Counters and statistics (Resource.Bytes, BusyTime, events,
//     resumptions, per-process Spent): per partition, summed.
//   - Host-memory guard: Partitioned.Guard runs between windows on the
//     coordinator (every GuardEvery events or more); it may end a run,
//     never change it.
//   - Deadlock detection, watchdogs: the coordinator's (above); the
//     deadlock report reads every partition's blocked processes after
//     the run, on one goroutine.
//   - Starlark threads: a kernel runs as a process of its rank's
//     partition. go.starlark.net threads may run concurrently when they
//     share only frozen values: the module's globals are frozen after
//     load (script.go). What the ranks of a run share besides
//     (starlark/ccl/run.go) becomes per partition: the pool of load
//     handles (tl.HandlePool, one for all ranks), the --export-msccl
//     recorder (maps and a sequence over all ranks: per partition, its
//     operations merged by time), the kernel's Fail (stops its own
//     partition's Sim). hostmem.NoteAlloc is atomic and only ends a run.
//     A host bench's torch state and the L3 orchestrator are one
//     process's: a host bench or an L3 bench whose host side spans SIPs
//     needs its own plan (the host as a partition of its own, one PCIe
//     link away: lookahead the PCIe latency), else it runs on one Sim.
//   - print output: lines are buffered per partition with their time and
//     written at each barrier in (time, partition, order) for the part
//     that is final (before the window's end), so output still streams.
//   - Step limits, the watchdog of Starlark steps: per thread already.
//
// # Where it stands
//
// Done: every timed run of the builtin bench (Starlark kernels, MSCCL
// schedules, tl threads, channels; verified or timing-only) whose ranks
// sit on several SIPs runs on partitions, a partition per SIP with
// ranks (machine.NewPartitionedOn; a SIP without ranks has no events),
// on K = --threads goroutines (starlark/ccl, threads.go and world.go).
// The partitioned order is the rule of such runs for every K, K = 1
// included; runs whose ranks sit on one SIP keep the one-Sim run (one
// partition would be that run, event for event). The op_log and the
// trace are split per SIP and merged by time after the run, witnessed
// logs too (a phase-2 diagnosis reruns the same partitioned run:
// oplog.WitnessAll); print lines are buffered per partition and written
// at every barrier (Partitioned.AtBarrier) in (time, partition, order);
// the memory guard runs between windows, and a kernel's return over the
// limit stops its partition and is made the guard's error at the
// barrier. Runs that cannot use several goroutines run the same
// partitioned run on one (--export-msccl's recorder, --check's scans of
// every queue pair, KERNBENCH_CCL_TRACE's lines, memory probes); host
// and L3 benches (their host side reaches every SIP) and the untimed
// mock (lookahead 0) stay on one Sim. Tested: every output of several
// multi-SIP jobs is byte-identical for K = 1, 2, 4 under -race
// (cmd/kernbench TestThreadsSameOutput), and the phase-2 diagnosis
// (starlark/ccl TestPhase2DiagnosisOnPartitions).
//
// Left: memory operations that cross SIPs are an internal error
// (dmaEngine.startSplit), which no collective kernel can issue (its
// pointers are its own rank's); a host or L3 bench on partitions needs
// the host as a partition of its own. The K = 1 run costs more than the
// one-Sim run of the same machine: an instant that ranks of P SIPs share
// is taken from P queues (docs/performance.md, Parallel simulation).
//
// # Cost
//
// The hot path adds a comparison per instant (the window's end) and one
// per in-place sleep; a message is an append into a slice that is kept
// from window to window, so a run allocates nothing per message once
// the boxes have grown. On one Sim, a writer of the op_log or the trace
// checks one flag of the machine (Machine.LogOf, TraceOf) before taking
// Machine.Log or Trace: +0.4 to +0.8 % instructions on the default job
// of docs/instructions.sh (470.2 M for the old binary over three runs,
// which span 0.2 %; 472.5 and 473.8 M with it).

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
)

// Partitioned is a simulation of partitions run in conservative windows
// on K goroutines (see above).
type Partitioned struct {
	parts []*Partition
	look  Time
	// threads is K, at most the number of partitions.
	threads int
	// MaxTime is the simulated-time watchdog (0 = none), as Sim.MaxTime.
	MaxTime Time
	// AtBarrier, when set, is called on the goroutine that called Run at
	// every barrier, after the window's partitions have all stopped (a
	// partitioned run's buffered print output is written there).
	AtBarrier func()
	// Guard, when set, is called between windows once GuardEvery events
	// or more have fired since its last call; an error it returns stops
	// the run. As Sim.Guard, it may end a run, never change it.
	Guard func() error
	// procs are the processes of every partition spawned before the
	// run, in the order they were spawned (their IDs); running: Run has
	// started, and processes are spawned by their partition
	// (Partition.Spawn), numbered from base.
	procs   []*Proc
	running bool
	base    int
	// par is the parity of the boxes partitions send into: the window's
	// (setup sends into 0, the first window takes them).
	par uint8
	// active: at the last barrier some partition had work pending (an
	// event that is not a daemon's, or a message): the wait watchdogs
	// keep checking while it holds.
	active  bool
	windows uint64
	guardAt uint64
	stopErr error
	// panicked are the panics of a window's partitions on several
	// goroutines, raised again on the coordinator (the lowest first).
	panicked []any
}

// Partition is one partition of a Partitioned simulation.
type Partition struct {
	// Sim is the partition's own simulation: its queue, clock and
	// processes. Events are scheduled on it as on any Sim.
	Sim *Sim
	// ID is the partition's index.
	ID int
	g  *Partitioned
	// out[par] are the boxes of the messages sent in the window of
	// parity par, one per destination in the order of the first message
	// to it; boxOf[par][dst] is 1 + the index of dst's box there (0:
	// none; made on the first message). minSent[par] is the earliest time
	// of those messages (Never: none). The boxes and their messages are
	// kept from window to window.
	out     [2][]box
	boxOf   [2][]int32
	minSent [2]Time
	// from are the boxes sent to p in the last window, in the order of
	// their senders (the coordinator lists them at the barrier).
	from []boxRef
	// daemons counts the partition's pending daemon events (its wait
	// watchdog): they are not work that keeps a run going.
	daemons int
	// received counts the messages the partition has taken.
	received uint64
	// spawned are the processes the partition spawned during the run,
	// with their times, in order.
	spawned []spawned
}

// spawned is a process spawned during a run and when.
type spawned struct {
	p  *Proc
	at Time
}

// message is a handler to fire in another partition at a time.
type message struct {
	at Time
	h  Handler
}

// box is a partition's messages to one destination in one window.
type box struct {
	dst  int
	msgs []message
}

// boxRef is a box of partition src (index k of its boxes of the last
// window).
type boxRef struct {
	src *Partition
	k   int
}

// NewPartitioned returns n empty partitions at time 0 whose messages
// arrive at least lookahead after they are sent, run on one goroutine
// until SetThreads. A lookahead that is not positive leaves no window to
// run in parallel: the caller runs one Sim instead. A run of one
// partition is the plain Sim's, event for event (one window).
func NewPartitioned(n int, lookahead Time) (*Partitioned, error) {
	if n < 1 {
		return nil, fmt.Errorf("partitioned simulation: %d partitions, want at least 1", n)
	}
	if lookahead <= 0 {
		return nil, fmt.Errorf("partitioned simulation: lookahead %v, want > 0", lookahead)
	}
	g := &Partitioned{look: lookahead, threads: 1, parts: make([]*Partition, n), panicked: make([]any, n)}
	for i := range g.parts {
		g.parts[i] = &Partition{Sim: New(), ID: i, g: g, minSent: [2]Time{Never, Never}}
	}
	return g, nil
}

// SetJitter makes each partition's same-instant process wake-ups a
// reproducible pseudo-random permutation, as Sim.SetJitter does, with a
// stream per partition derived from seed and its ID (never one stream
// shared by partitions, whose draws would interleave by timing). Seed 0
// turns jitter off. It is called before the first event is scheduled.
func (g *Partitioned) SetJitter(seed uint64) {
	for _, p := range g.parts {
		s := uint64(0)
		if seed != 0 {
			// A splitmix64 step of seed and the partition: distinct
			// partitions get unrelated streams, and none gets 0 (off).
			s = seed + uint64(p.ID+1)*0x9e3779b97f4a7c15
			s = (s ^ s>>30) * 0xbf58476d1ce4e5b9
			s = (s ^ s>>27) * 0x94d049bb133111eb
			s ^= s >> 31
			s = max(s, 1)
		}
		p.Sim.SetJitter(s)
	}
}

// SetThreads sets K, the goroutines that run a window's partitions (at
// most the number of partitions; k < 1 is an error). The run is the same
// for every K.
func (g *Partitioned) SetThreads(k int) error {
	if k < 1 {
		return fmt.Errorf("partitioned simulation: %d threads, want at least 1", k)
	}
	g.threads = min(k, len(g.parts))
	return nil
}

// Threads is K (SetThreads).
func (g *Partitioned) Threads() int { return g.threads }

// Lookahead is the least delay of a message.
func (g *Partitioned) Lookahead() Time { return g.look }

// Partitions are the partitions, by ID.
func (g *Partitioned) Partitions() []*Partition { return g.parts }

// Partition is partition i.
func (g *Partitioned) Partition(i int) *Partition { return g.parts[i] }

// Windows is the number of windows run so far.
func (g *Partitioned) Windows() uint64 { return g.windows }

// Spawn creates a process in partition part that starts at that
// partition's current time; its ID is its place among every partition's
// processes. Before the run only (in a run, Partition.Spawn).
func (g *Partitioned) Spawn(part int, name string, body func(p *Proc)) *Proc {
	return g.spawn(part, name, false, body)
}

// SpawnDeep is Spawn for a process whose body needs a deep stack from
// the start (Sim.SpawnDeep): a kernel's Starlark frames.
func (g *Partitioned) SpawnDeep(part int, name string, body func(p *Proc)) *Proc {
	return g.spawn(part, name, true, body)
}

func (g *Partitioned) spawn(part int, name string, deep bool, body func(p *Proc)) *Proc {
	if g.running {
		panic("internal error: Partitioned.Spawn during the run (Partition.Spawn spawns in a partition's events)")
	}
	p := g.parts[part].Sim.spawn(name, deep, body)
	p.ID = len(g.procs)
	g.procs = append(g.procs, p)
	return p
}

// Spawn creates a process in partition p that starts at its current
// time: before the run as Partitioned.Spawn, during it in p's events
// and processes. A process spawned during the run is numbered by p
// alone, the same for every K: the k-th process p spawns gets ID
// base + k·P + p.ID, where base counts the processes spawned before the
// run and P the partitions.
func (p *Partition) Spawn(name string, body func(q *Proc)) *Proc {
	g := p.g
	if !g.running {
		return g.Spawn(p.ID, name, body)
	}
	q := p.Sim.Spawn(name, body)
	q.ID = g.base + len(p.spawned)*len(g.parts) + p.ID
	p.spawned = append(p.spawned, spawned{q, p.Sim.now})
	return q
}

// Send schedules h to fire in partition dst at time at, which is at
// least the lookahead after p's clock; h then belongs to dst (it runs on
// dst's goroutine and touches dst's state only). Called in p's events
// and processes, or before the run.
func (p *Partition) Send(dst int, at Time, h Handler) {
	g := p.g
	if dst == p.ID || at < Add(p.Sim.now, g.look) {
		p.sendPanic(dst, at)
	}
	par := g.par
	of := p.boxOf[par]
	if of == nil {
		of = make([]int32, len(g.parts))
		p.boxOf[par] = of
	}
	k := of[dst]
	if k == 0 {
		k = p.newBox(par, dst)
	}
	b := &p.out[par][k-1]
	b.msgs = append(b.msgs, message{at, h})
	if at < p.minSent[par] {
		p.minSent[par] = at
	}
}

// newBox adds p's box to dst for the window of parity par, reusing the
// room of an earlier window's box, and returns 1 + its index.
func (p *Partition) newBox(par uint8, dst int) int32 {
	out := p.out[par]
	if n := len(out); n < cap(out) {
		out = out[:n+1]
		out[n].dst = dst
	} else {
		out = append(out, box{dst: dst})
	}
	p.out[par] = out
	k := int32(len(out))
	p.boxOf[par][dst] = k
	return k
}

// sendPanic reports a message that breaks the lookahead (out of line, as
// Sim.pastPanic).
func (p *Partition) sendPanic(dst int, at Time) {
	if dst == p.ID {
		panic(fmt.Sprintf("internal error: partition %d sent a message to itself", dst))
	}
	panic(fmt.Sprintf("internal error: partition %d sent a message for %v at %v, within the lookahead %v", p.ID, at, p.Sim.now, p.g.look))
}

// take schedules the messages sent to p in the previous window (of
// parity par), in the order (sending partition, order of sending).
func (p *Partition) take(par uint8) {
	for _, in := range p.from {
		b := &in.src.out[par][in.k]
		for i, m := range b.msgs {
			p.Sim.At(m.at, m.h)
			b.msgs[i].h = nil // the box keeps no handler alive
		}
		p.received += uint64(len(b.msgs))
		b.msgs = b.msgs[:0]
	}
}

// route lists, at a barrier, the boxes of the window just run (parity
// prev) in their receivers' from, in the order of their senders, and
// empties the senders' boxes of the window to come (taken in the window
// just run). Its work is in the boxes used, not in the square of the
// partitions.
func (g *Partitioned) route(prev uint8) {
	for _, p := range g.parts {
		p.from = p.from[:0]
	}
	next := 1 - prev
	for _, src := range g.parts {
		for _, b := range src.out[next] {
			src.boxOf[next][b.dst] = 0
		}
		src.out[next] = src.out[next][:0]
		src.minSent[next] = Never
		for k, b := range src.out[prev] {
			dst := g.parts[b.dst]
			dst.from = append(dst.from, boxRef{src, k})
		}
	}
}

// window takes p's messages and fires its events before end.
func (p *Partition) window(end Time) {
	p.take(1 - p.g.par)
	p.Sim.runUntil(end)
}

// windowOnWorker is window on one of several goroutines: a panic is kept
// for the coordinator, which raises it again after the barrier (the
// other partitions' windows end first, so nothing runs when it unwinds).
func (p *Partition) windowOnWorker(end Time) {
	defer func() {
		if r := recover(); r != nil {
			p.g.panicked[p.ID] = &PartitionPanic{Value: r, Partition: p.ID, Stack: debug.Stack()}
		}
	}()
	p.window(end)
}

// PartitionPanic is a panic of a partition's window on a run of several
// goroutines, raised again on the one that called Run.
type PartitionPanic struct {
	Value     any
	Partition int
	Stack     []byte // where the partition panicked
}

func (e *PartitionPanic) Error() string {
	return fmt.Sprintf("%v (partition %d)\n%s", e.Value, e.Partition, e.Stack)
}

// runUntil fires the events before end: a partition's window. Events at
// or after end stay pending, and sleeps do not pass end in place.
func (s *Sim) runUntil(end Time) {
	s.bound = end
	_ = s.Run() // (nil in a window)
	s.bound = Never
}

// limit is as Sim.limit for the whole run.
func (g *Partitioned) limit() Time {
	if g.MaxTime <= 0 || g.MaxTime > Horizon {
		return Horizon
	}
	return g.MaxTime
}

// next is the start of the next window: the earliest pending event or
// message of any partition (Never: none). It also notes whether work is
// pending (active).
func (g *Partitioned) next() Time {
	t, active := Never, false
	for _, p := range g.parts {
		t = min(t, p.Sim.NextEventTime(), p.minSent[g.par])
		active = active || p.Sim.Pending() > p.daemons || p.minSent[g.par] != Never
	}
	g.active = active
	return t
}

// Run runs windows until no event or message is pending anywhere, or
// the run is stopped. It returns the error of the earliest stop (ties to
// the lower partition), a *WatchdogError, the Guard's error, or a
// *StallError when processes are still blocked with nothing left that
// could wake them. Blocked processes stay suspended; call Close.
func (g *Partitioned) Run() error {
	if !g.running {
		g.running, g.base = true, len(g.procs)
	}
	limit := g.limit()
	var pool *workers
	if g.threads > 1 {
		pool = g.startWorkers()
		defer pool.stop()
	}
	for g.stopErr == nil {
		if err := g.earliestStop(); err != nil {
			g.stopErr = err
			break
		}
		if g.Guard != nil {
			if ev := g.Events(); ev >= g.guardAt {
				g.guardAt = ev + GuardEvery
				if err := g.Guard(); err != nil {
					g.stopErr = err
					break
				}
			}
		}
		t := g.next()
		if t == Never {
			break
		}
		if t > limit {
			g.stopAtLimit(limit, t)
			break
		}
		end := limit + 1
		if len(g.parts) > 1 {
			end = min(Add(t, g.look), end)
		} // (one partition receives no message: one window, the plain Sim's run)
		g.route(g.par)
		g.par ^= 1
		g.windows++
		if pool != nil {
			pool.window(end)
		} else {
			for _, p := range g.parts {
				p.window(end)
			}
		}
		for _, r := range g.panicked {
			if r != nil {
				panic(r)
			}
		}
		if g.AtBarrier != nil {
			g.AtBarrier()
		}
	}
	if g.stopErr != nil {
		return g.stopErr
	}
	if blocked := g.Blocked(); len(blocked) > 0 {
		var at Time
		for _, p := range g.parts {
			at = max(at, p.Sim.lastWork)
		}
		return &StallError{At: at, Blocked: blocked}
	}
	return nil
}

// earliestStop is the error of the partition that stopped first (nil if
// none did), with every partition's blocked processes where the error
// lists them.
func (g *Partitioned) earliestStop() error {
	var first *Partition
	for _, p := range g.parts {
		if p.Sim.stopErr != nil && (first == nil || p.Sim.now < first.Sim.now) {
			first = p
		}
	}
	if first == nil {
		return nil
	}
	err := first.Sim.stopErr
	if w, ok := err.(*WaitTimeoutError); ok {
		w.Blocked = g.Blocked()
	}
	return err
}

// stopAtLimit ends the run at the watchdog's limit, which the next
// window, at next, would pass: every clock stands at the limit.
func (g *Partitioned) stopAtLimit(limit, next Time) {
	for _, p := range g.parts {
		s := p.Sim
		s.noteWork()
		s.times.rebaseAll(limit) // (every pending time is past it)
		s.now = limit
	}
	g.stopErr = &WatchdogError{Limit: limit, Horizon: limit != g.MaxTime, Next: next, Blocked: g.Blocked()}
}

// Stop ends the run with err at the next barrier (from the coordinator,
// between windows; in a partition's events, stop its Sim). The first
// error wins.
func (g *Partitioned) Stop(err error) {
	if g.stopErr == nil {
		g.stopErr = err
	}
}

// Now is the latest clock of the partitions: the time of the last event
// anywhere (or the watchdog's limit).
func (g *Partitioned) Now() Time {
	var t Time
	for _, p := range g.parts {
		t = max(t, p.Sim.now)
	}
	return t
}

// Events is the number of events fired in every partition.
func (g *Partitioned) Events() uint64 {
	var n uint64
	for _, p := range g.parts {
		n += p.Sim.Events()
	}
	return n
}

// Messages is the number of messages every partition has taken.
func (g *Partitioned) Messages() uint64 {
	var n uint64
	for _, p := range g.parts {
		n += p.received
	}
	return n
}

// Resumptions is the number of coroutine resumptions in every partition.
func (g *Partitioned) Resumptions() uint64 {
	var n uint64
	for _, p := range g.parts {
		n += p.Sim.Resumptions()
	}
	return n
}

// Blocked lists the live processes of every partition that have not
// finished: those spawned before the run in the order they were
// spawned, then those spawned during it in (time of spawning,
// partition, order of spawning), the same for every K.
func (g *Partitioned) Blocked() []*Proc {
	var out []*Proc
	for _, p := range g.procs {
		if !p.done {
			out = append(out, p)
		}
	}
	lists := make([][]spawned, len(g.parts))
	for i, part := range g.parts {
		for _, s := range part.spawned {
			if !s.p.done {
				lists[i] = append(lists[i], s)
			}
		}
	}
	for _, s := range MergeByTime(lists, func(s spawned) Time { return s.at }) {
		out = append(out, s.p)
	}
	return out
}

// Close unwinds every partition's unfinished coroutines (Sim.Close).
func (g *Partitioned) Close() {
	for _, p := range g.parts {
		p.Sim.Close()
	}
}

// WaitWatchdog stops the run with a *WaitTimeoutError when a process has
// been parked in an untimed wait for longer than limit, as
// Sim.WaitWatchdog does: a daemon per partition checks that partition's
// processes every limit/4, and goes on while work is pending in any
// partition at the last barrier.
func (g *Partitioned) WaitWatchdog(limit Time) {
	if limit <= 0 {
		return
	}
	period := max(limit/4, 1)
	for _, part := range g.parts {
		s := part.Sim
		check := &daemon{s: s}
		check.check = func() {
			part.daemons--
			for _, p := range s.procs {
				if p.Wait != nil && !p.done && !p.Timed && s.now-p.WaitSince > limit {
					s.Stop(&WaitTimeoutError{Limit: limit, Proc: p})
					return
				}
			}
			if s.Pending() > part.daemons || g.active {
				part.daemons++
				s.At(Add(s.now, period), check)
			}
		}
		part.daemons++
		s.At(Add(s.now, period), check)
	}
}

// workers are the goroutines of a run with K > 1: worker w runs the
// partitions [w·P/K, (w+1)·P/K) of each window, the coordinator those
// of worker 0.
//
// The barrier spins before it sleeps. A window is short (a few hundred
// microseconds at 256 ranks on 8 SIPs), and a goroutine that parks on a
// channel between windows puts its thread to sleep: waking it again
// costs tens of microseconds on a virtual machine, a share of every
// window (measured: 2 threads gave 1.3× the wall time of 1 at 256 ranks
// with channels and a WaitGroup). So a waiter first watches an atomic
// for a while (spinFor), and only then parks, on a channel of its own,
// with a flag that the side that wakes it clears (compare-and-swap: of
// the waker and a waiter that finds its condition met after raising the
// flag, exactly one clears it, and the waker sends only when it did).
// The barrier decides when things run, never what they do: output is
// the same whichever side of it waits how.
type workers struct {
	g *Partitioned
	// gen counts the windows published (and the stop); end is the
	// published window's end; left counts the helpers still in it.
	gen    atomic.Uint64
	end    atomic.Int64
	left   atomic.Int32
	closed atomic.Bool
	// helpers are workers 1 … K−1; coordinator is worker 0's side of
	// the barrier, waiting for left to reach 0.
	helpers     []waiter
	coordinator waiter
	// spin is the looks a waiter takes before it parks (spinFor, or 0
	// with more workers than processors).
	spin int
}

// waiter is one goroutine's way to sleep at the barrier: parked is
// raised before it sleeps on wake (one buffered slot, so a waker never
// blocks).
type waiter struct {
	parked atomic.Bool
	wake   chan struct{}
}

// spinFor is how many looks a waiter takes at its condition before it
// parks, yielding its processor every 64 (tens of microseconds), when
// every worker has a processor of its own; with more workers than
// GOMAXPROCS a spinning waiter would hold up the ones still in the
// window (measured: --threads 4 on 2 cores, 0.50 s → 0.63 s), so it
// parks at once.
const spinFor = 1 << 14

// await returns once ready() holds, after up to spin looks.
//
// A wake-up may be stale: a waker that made the condition true for one
// wait can be held up between that and its rouse (a helper preempted
// after its decrement of left) until the waiter has returned and parked
// for its next wait, whose condition is not true yet; its rouse then
// finds parked raised and sends. So a waiter looks at its condition
// again after every wake-up and parks again while it does not hold
// (returning on a stale wake-up let the coordinator start the next
// window while a helper still ran the last: a data race, a different
// run, or a barrier that never opened).
func (w *waiter) await(spin int, ready func() bool) {
	for i := 0; i < spin; i++ {
		if ready() {
			return
		}
		if i%64 == 63 {
			runtime.Gosched()
		}
	}
	for {
		w.parked.Store(true)
		if ready() && w.parked.CompareAndSwap(true, false) {
			return
		}
		<-w.wake // (the waker cleared parked and sent)
		if ready() {
			return
		}
	}
}

// rouse wakes w if it sleeps (after the condition it waits for was made
// true).
func (w *waiter) rouse() {
	if w.parked.CompareAndSwap(true, false) {
		w.wake <- struct{}{}
	}
}

// share is worker w's partitions.
func (g *Partitioned) share(w int) []*Partition {
	n, k := len(g.parts), g.threads
	return g.parts[w*n/k : (w+1)*n/k]
}

func (g *Partitioned) startWorkers() *workers {
	ws := &workers{g: g, helpers: make([]waiter, g.threads-1), spin: spinFor}
	if g.threads > runtime.GOMAXPROCS(0) {
		ws.spin = 0
	}
	ws.coordinator.wake = make(chan struct{}, 1)
	for i := range ws.helpers {
		me := &ws.helpers[i]
		me.wake = make(chan struct{}, 1)
		mine := g.share(i + 1)
		go func() {
			var seen uint64
			for {
				me.await(ws.spin, func() bool { return ws.gen.Load() != seen })
				seen = ws.gen.Load()
				if ws.closed.Load() {
					return
				}
				end := Time(ws.end.Load())
				for _, p := range mine {
					p.windowOnWorker(end)
				}
				if ws.left.Add(-1) == 0 {
					ws.coordinator.rouse()
				}
			}
		}()
	}
	return ws
}

// publish starts the next window (or the stop) on every helper.
func (ws *workers) publish() {
	ws.gen.Add(1)
	for i := range ws.helpers {
		ws.helpers[i].rouse()
	}
}

// window runs one window on every worker and returns at its barrier.
func (ws *workers) window(end Time) {
	ws.end.Store(int64(end))
	ws.left.Store(int32(len(ws.helpers)))
	ws.publish()
	for _, p := range ws.g.share(0) {
		p.windowOnWorker(end)
	}
	ws.coordinator.await(ws.spin, func() bool { return ws.left.Load() == 0 })
}

func (ws *workers) stop() {
	ws.closed.Store(true)
	ws.publish()
}

// MergeByTime merges per-partition sequences, each in the order its
// partition wrote it with non-decreasing times (at), into one in (time,
// partition, order of writing): the order of a partitioned run's op_log,
// trace and printed lines, the same for every K.
func MergeByTime[T any](parts [][]T, at func(T) Time) []T {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]T, 0, n)
	heads := make([]int, len(parts))
	for len(out) < n {
		best, bestAt := -1, Never
		for i, p := range parts {
			if h := heads[i]; h < len(p) {
				if t := at(p[h]); best < 0 || t < bestAt {
					best, bestAt = i, t
				}
			}
		}
		out = append(out, parts[best][heads[best]])
		heads[best]++
	}
	return out
}
