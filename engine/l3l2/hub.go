package l3l2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/engine/sim"
)

// Options configure a Hub.
type Options struct {
	// Backpressure is how counter waits (and the queue waits built on
	// them) block: machine.Sleep wakes a waiter exactly when the counter
	// it waits on is written; machine.Poll re-reads it every
	// PollInterval. Zero means Sleep. Results are identical; only timing
	// differs, as for IPCQ (docs/architecture.md, IPCQ).
	Backpressure machine.Backpressure
	PollInterval sim.Time
	// SessionID is the session_instance_id_bits every queue binding of
	// this hub carries (may be zero).
	SessionID uint64
}

// Hub is the L3-L2 communication layer of one simulated machine: it creates
// regions and queues in chip HBM, resolves the descriptors L2 code receives
// back to them, and owns what they share: the single-writer line table,
// the waiters of counter waits and deferred physical release. Create one
// per machine (the Starlark runtime keeps it next to the machine).
type Hub struct {
	m      *machine.Machine
	opts   Options
	nextID uint64

	regions []*regionState // creation order
	queues  []*Queue

	violations []Violation

	// Sleep-mode waits: parked waiters in registration order, and the
	// times of this hub's deadline events still in the event heap.
	waiters []*waiter
	timers  []sim.Time
}

// NewHub returns the hub of m.
func NewHub(m *machine.Machine, opts Options) (*Hub, error) {
	if opts.Backpressure == 0 {
		opts.Backpressure = machine.Sleep
	}
	switch opts.Backpressure {
	case machine.Sleep:
	case machine.Poll:
		if opts.PollInterval <= 0 {
			return nil, fmt.Errorf("l3l2: poll_interval_ns must be > 0 in poll mode (got %v)", opts.PollInterval)
		}
	default:
		return nil, fmt.Errorf("l3l2: unknown backpressure mode %d", opts.Backpressure)
	}
	return &Hub{m: m, opts: opts, nextID: 1}, nil
}

// Machine is the machine the hub lives on.
func (h *Hub) Machine() *machine.Machine { return h.m }

// Violation is a breach of the single-writer-per-64-byte-line rule: two
// different writers wrote counters in one cache line of a region.
type Violation struct {
	RegionID uint64
	Line     uint64 // physical address of the 64-byte line
	Addr     uint64 // the counter the second writer wrote
	First    string // the line's writer
	Second   string // the offending writer
	At       sim.Time
}

func (v Violation) String() string {
	return fmt.Sprintf("region %d: counter %#x in line %#x written by %s, but the line belongs to %s (t=%v)",
		v.RegionID, v.Addr, v.Line, v.Second, v.First, v.At)
}

// Violations lists every single-writer violation so far, in order.
func (h *Hub) Violations() []Violation { return append([]Violation(nil), h.violations...) }

// regionState is one allocated region: what the L3 handle, its queue and
// every L2 endpoint decoded from its descriptor share.
type regionState struct {
	h        *Hub
	id       uint64
	worker   int
	pe       *machine.PE // PE 0 of the worker chip; its HBM holds the region
	alloc    machine.Region
	payload  machine.Region
	counters machine.Region
	l3       *Region
	freed    bool              // physically released
	lines    map[uint64]string // line address -> its writer
	// endpoint is the queue endpoint built on this region's binding (a
	// queue is single-producer single-consumer: one L2 endpoint).
	endpoint *QueueEndpoint

	hostDown, hostUp, local machine.Path
}

// chipPE is PE 0 of SIP worker (the chip a worker id names).
func (h *Hub) chipPE(worker int) (*machine.PE, error) {
	p := h.m.Params
	if worker < 0 || worker >= p.Sips {
		return nil, fmt.Errorf("worker_id %d is not a chip of this machine (%d SIP(s))", worker, p.Sips)
	}
	return h.m.PE(worker * p.CubesPerSip * p.PesPerCube), nil
}

// hostPaths are the PCIe routes between the host and pe's HBM.
func (h *Hub) hostPaths(pe *machine.PE) (down, up machine.Path, err error) {
	pUp, pDown := h.m.PCIe(pe.Sip)
	return machine.Path{pDown, pe.NocDown, pe.HBM.Port}, machine.Path{pe.HBM.Port, pe.NocUp, pUp}, nil
}

// allocate places a region of payloadBytes and counterBytes in the HBM of
// the worker chip's PE 0: payload first, counters at the next 64-byte
// boundary, in one allocation that reads as zero.
func (h *Hub) allocate(worker int, payloadBytes, counterBytes uint64) (*regionState, error) {
	pe, err := h.chipPE(worker)
	if err != nil {
		return nil, err
	}
	mem := pe.HBM
	payAligned, c1 := bits.Add64(payloadBytes, LineBytes-1, 0)
	payAligned &^= LineBytes - 1
	total, c2 := bits.Add64(payAligned, counterBytes, 0)
	if c1 != 0 || c2 != 0 || total > uint64(mem.Capacity) {
		return nil, &machine.OutOfMemoryError{Mem: mem, Requested: int64(min(total, 1<<62)), InUse: mem.Used()}
	}
	off, err := mem.Alloc(int64(total))
	if err != nil {
		return nil, err
	}
	down, up, err := h.hostPaths(pe)
	if err != nil {
		mem.Free(off, int64(total))
		return nil, err
	}
	st := &regionState{
		h: h, id: h.nextID, worker: worker, pe: pe,
		alloc:    machine.Region{Mem: mem, Off: off, N: int64(total)},
		payload:  machine.Region{Mem: mem, Off: off, N: int64(payloadBytes)},
		counters: machine.Region{Mem: mem, Off: off + int64(payAligned), N: int64(counterBytes)},
		lines:    map[uint64]string{},
		hostDown: down, hostUp: up, local: machine.Path{mem.Port},
	}
	h.nextID++
	h.regions = append(h.regions, st)
	h.logWrite("alloc", st.alloc, h.m.Sim.Now(), false)
	return st, nil
}

func (st *regionState) descriptor() Descriptor {
	return Descriptor{
		MagicVersion: RegionMagicVersion, RegionID: st.id,
		PayloadBase: st.payload.Addr(), PayloadBytes: uint64(st.payload.N),
		CounterBase: st.counters.Addr(), CounterBytes: uint64(st.counters.N),
	}
}

// contains reports whether [base, base+n) lies inside r.
func contains(r machine.Region, base, n uint64) bool {
	lo := r.Addr()
	end, c := bits.Add64(base, n, 0)
	return c == 0 && base >= lo && end <= lo+uint64(r.N)
}

// resolve finds the region (not yet physically released) whose payload and
// counter ranges contain those of d: L2 addresses are physical, and this is
// how an L2 endpoint reaches the simulated bytes behind them.
func (h *Hub) resolve(d Descriptor) *regionState {
	for _, st := range h.regions {
		if !st.freed && contains(st.payload, d.PayloadBase, d.PayloadBytes) && contains(st.counters, d.CounterBase, d.CounterBytes) {
			return st
		}
	}
	return nil
}

// ReleaseFreed physically releases every region whose L3 handle was freed
// (free() is logical). Call it only when no submitted L2 work that may hold
// their descriptors is still running. It returns how many were released.
func (h *Hub) ReleaseFreed() int {
	n := 0
	for _, st := range h.regions {
		if st.freed || st.l3.state != RegionReleased {
			continue
		}
		st.alloc.Mem.Free(st.alloc.Off, st.alloc.N)
		st.freed = true
		st.lines = nil
		n++
	}
	return n
}

// ReleaseAll is the end-of-execution cleanup, run after submitted L2 work
// has drained: it marks every live region and queue released and then
// releases the physical memory of all of them.
func (h *Hub) ReleaseAll() {
	for _, q := range h.queues {
		q.Free()
	}
	for _, st := range h.regions {
		st.l3.Free()
	}
	h.ReleaseFreed()
}

// PoisonRegion poisons the live L3 region with the given id (an L2 endpoint
// reported a fatal error naming it, see EndpointError). It reports whether
// a live region was poisoned.
func (h *Hub) PoisonRegion(id uint64, cause error) bool {
	for _, st := range h.regions {
		if st.id == id && st.l3.state == RegionLive {
			st.l3.poison(cause)
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Access ports: the timed, logged byte and counter operations both levels
// are built from.

// port is one side's access to a region: the host over PCIe (L3) or the
// chip's AICPU through the HBM port (L2).
type port struct {
	st          *regionState
	read, write machine.Path
	host        bool
}

func hostPort(st *regionState) *port {
	return &port{st: st, read: st.hostUp, write: st.hostDown, host: true}
}

func localPort(st *regionState) *port {
	return &port{st: st, read: st.local, write: st.local}
}

// errReleased: an operation reached memory that was already physically
// released (an L2 endpoint that outlived its region's drain).
var errReleased = errors.New("region memory was physically released")

// writer names the agent issuing a counter write for the single-writer
// rule: the host for L3, the calling process for L2 (each L2 task is its
// own agent).
func (pt *port) writer(p *sim.Proc) string {
	if pt.host {
		return "L3 host"
	}
	if p == nil {
		return "L2"
	}
	return "L2 " + p.Name
}

func (pt *port) ok() error {
	if pt.st.freed {
		return errReleased
	}
	return nil
}

// charge costs the caller d and draws the operation on the timeline.
func (pt *port) charge(p *sim.Proc, d sim.Time, what string) error {
	if p == nil || d == 0 {
		return nil
	}
	start := p.Sim().Now()
	err := p.Sleep(d)
	if what != "counter wait (matched)" {
		pt.traceSpan(what, start, p.Sim().Now())
	}
	return err
}

// traceSpan draws an L3 (host, over PCIe) or L2 (chip) region operation on
// the chip's "l3 host" or "l2 orchestrator" track when tracing is on.
func (pt *port) traceSpan(what string, start, end sim.Time) {
	tr := pt.st.h.m.Trace
	if tr == nil || end <= start {
		return
	}
	pid := pt.st.pe.ID + 1
	tid, track := traceTidL2, "l2 orchestrator"
	if pt.host {
		tid, track = traceTidL3, "l3 host"
	}
	tr.Slice(pid, tid, track, what, start, end, map[string]any{"region": pt.st.id})
}

// Trace tracks of L3/L2 operations within a chip's PE 0 process.
const (
	traceTidL3 = 40
	traceTidL2 = 41
)

func (pt *port) counterOff(addr uint64) int64 {
	return pt.st.counters.Off + int64(addr-pt.st.counters.Addr())
}

// load32 samples a counter now.
func (pt *port) load32(addr uint64) int32 {
	mem := pt.st.counters.Mem
	return int32(binary.LittleEndian.Uint32(mem.View(pt.counterOff(addr), CounterBytes)))
}

// ViolationError is a counter write refused by the single-writer rule.
type ViolationError struct{ Violation Violation }

func (e *ViolationError) Error() string { return "single-writer violation: " + e.Violation.String() }

// claim applies the single-writer rule before a counter write: the first
// writer of a 64-byte line owns it; another writer is a violation, which
// is recorded and refused.
func (pt *port) claim(p *sim.Proc, addr uint64) *Violation {
	line := addr &^ (LineBytes - 1)
	w := pt.writer(p)
	owner, ok := pt.st.lines[line]
	if !ok {
		pt.st.lines[line] = w
		return nil
	}
	if owner == w {
		return nil
	}
	v := Violation{RegionID: pt.st.id, Line: line, Addr: addr, First: owner, Second: w, At: pt.st.h.m.Sim.Now()}
	pt.st.h.violations = append(pt.st.h.violations, v)
	return &v
}

// notify writes a counter: the operand travels for T(write path, 4) and
// lands at the end, where it wakes the counter's waiters. Add reads the old
// value when issued, so it is not atomic against another writer.
// A write to a line another agent owns is refused with a *ViolationError.
func (pt *port) notify(p *sim.Proc, addr uint64, value int32, op NotifyOp, name string) error {
	if err := pt.ok(); err != nil {
		return err
	}
	if v := pt.claim(p, addr); v != nil {
		return &ViolationError{Violation: *v}
	}
	start := pt.st.h.m.Sim.Now()
	old := pt.load32(addr)
	if err := pt.charge(p, pt.write.ChargeFor(CounterBytes), "counter notify"); err != nil {
		return err
	}
	if err := pt.ok(); err != nil {
		return err
	}
	if op == NotifyAdd {
		value = int32(uint32(old) + uint32(value)) // wraps: INT32_MAX + 1 = INT32_MIN
	}
	off := pt.counterOff(addr)
	mem := pt.st.counters.Mem
	binary.LittleEndian.PutUint32(mem.Bytes(off, CounterBytes), uint32(value))
	pt.st.h.logWrite(name, machine.Region{Mem: mem, Off: off, N: CounterBytes}, start, true)
	pt.st.h.wake(pt.st, addr)
	return nil
}

// test samples a counter when issued; the value reaches the caller after
// T(read path, 4).
func (pt *port) test(p *sim.Proc, addr uint64, value int32, cmp WaitCmp) (TestResult, error) {
	if err := pt.ok(); err != nil {
		return TestResult{}, err
	}
	obs := pt.load32(addr)
	return TestResult{Matched: cmp.Eval(obs, value), Observed: obs}, pt.charge(p, pt.read.ChargeFor(CounterBytes), "counter test")
}

// writePayload copies data to payload offset off: it travels for
// T(write path, n) and lands at the end.
func (pt *port) writePayload(p *sim.Proc, off uint64, data []byte, name string) error {
	if err := pt.ok(); err != nil {
		return err
	}
	start := pt.st.h.m.Sim.Now()
	if err := pt.charge(p, pt.write.ChargeFor(int64(len(data))), "payload write"); err != nil {
		return err
	}
	if err := pt.ok(); err != nil {
		return err
	}
	reg := pt.st.payload.Sub(int64(off), int64(len(data)))
	copy(reg.Bytes(), data)
	pt.st.h.logWrite(name, reg, start, true)
	return nil
}

// readPayload copies n payload bytes at off, sampled when issued, and
// returns after T(read path, n).
func (pt *port) readPayload(p *sim.Proc, off, n uint64) ([]byte, error) {
	if err := pt.ok(); err != nil {
		return nil, err
	}
	out := append([]byte(nil), pt.st.payload.Sub(int64(off), int64(n)).View()...)
	return out, pt.charge(p, pt.read.ChargeFor(int64(n)), "payload read")
}

func (h *Hub) logWrite(name string, reg machine.Region, start sim.Time, withData bool) {
	l := h.m.Log
	if l == nil || reg.N == 0 {
		return
	}
	r := &oplog.Record{Rank: -1, Kind: oplog.KindL3L2, Name: name, TStart: start, TEnd: h.m.Sim.Now(),
		Dst: reg.Addr(), DstSp: reg.Mem.Space.Log(), NBytes: reg.N}
	if withData {
		r.Data = append([]byte(nil), reg.View()...)
		if l.Witnessed() {
			r.Produced = reg.View()
		}
	}
	l.Add(r)
}

// ---------------------------------------------------------------------------
// Counter waits.

// WaitInfo describes a process blocked in a counter wait (sim.Proc.Wait,
// for deadlock and watchdog reports). Such waits are Timed: they are
// governed by their own timeout, not the deadlock watchdog.
type WaitInfo struct {
	Op       string
	RegionID uint64
	Addr     uint64
	Value    int32
	Cmp      WaitCmp
	Deadline sim.Time
}

func (w *WaitInfo) String() string {
	return fmt.Sprintf("%s region %d counter %#x %s %d (until t=%v)", w.Op, w.RegionID, w.Addr, w.Cmp, w.Value, w.Deadline)
}

type waiter struct {
	p        *sim.Proc
	st       *regionState
	addr     uint64
	deadline sim.Time
	parked   bool
}

// wait blocks p until the counter at addr satisfies cmp against value or
// timeout passes. The counter is sampled when the wait starts, at every
// wake-up (a write to that counter in Sleep mode, every poll interval in
// Poll mode) and at the deadline. A match at time t returns at
// t + T(read path, 4) with matched = true; otherwise the call returns at
// exactly start + timeout with the last observed value.
func (pt *port) wait(p *sim.Proc, op string, addr uint64, value int32, cmp WaitCmp, timeout sim.Time) (obs int32, matched bool, err error) {
	h := pt.st.h
	s := p.Sim()
	t0 := s.Now()
	deadline := deadlineAfter(t0, timeout)
	info := &WaitInfo{Op: op, RegionID: pt.st.id, Addr: addr, Value: value, Cmp: cmp, Deadline: deadline}
	p.Wait, p.WaitSince, p.Timed = info, t0, true
	defer func() { p.Wait, p.Timed = nil, false }()
	for {
		if err := pt.ok(); err != nil {
			return obs, false, err
		}
		obs = pt.load32(addr)
		if cmp.Eval(obs, value) {
			err := pt.charge(p, pt.read.ChargeFor(CounterBytes), "counter wait (matched)")
			pt.traceSpan("counter wait", t0, s.Now())
			return obs, true, err
		}
		now := s.Now()
		if now >= deadline {
			return obs, false, nil
		}
		if h.opts.Backpressure == machine.Poll {
			err = p.Sleep(h.nextPoll(t0, now, deadline) - now)
		} else {
			err = h.park(p, pt.st, addr, deadline)
		}
		if err != nil {
			return obs, false, err
		}
	}
}

// deadlineAfter is now + timeout, saturating at sim.Never.
func deadlineAfter(now, timeout sim.Time) sim.Time {
	if timeout >= sim.Never-now {
		return sim.Never
	}
	return now + timeout
}

// nextPoll is the time of the next poll after now: the first instant
// t0 + k·interval after now, skipping instants before the next pending
// event (nothing can change a counter between events, so the result is
// that of polling every interval, without the cost), capped at deadline.
func (h *Hub) nextPoll(t0, now, deadline sim.Time) sim.Time {
	iv := h.opts.PollInterval
	from := now + 1
	if ne := h.m.Sim.NextEventTime(); ne > from {
		from = ne
	}
	if from >= deadline {
		return deadline
	}
	d := from - t0 // k = ⌈d/iv⌉ without overflow of d+iv near Never
	k := d / iv
	if d%iv != 0 {
		k++
	}
	if next := sim.Add(t0, sim.Mul(iv, int64(k))); next < deadline {
		return next
	}
	return deadline
}

// park blocks p until a write to the counter at addr or until deadline.
func (h *Hub) park(p *sim.Proc, st *regionState, addr uint64, deadline sim.Time) error {
	w := &waiter{p: p, st: st, addr: addr, deadline: deadline, parked: true}
	h.waiters = append(h.waiters, w)
	h.arm()
	err := p.Park()
	w.parked = false
	for i, x := range h.waiters {
		if x == w {
			h.waiters = append(h.waiters[:i], h.waiters[i+1:]...)
			break
		}
	}
	return err
}

// wake resumes the parked waiters of a counter (registration order).
func (h *Hub) wake(st *regionState, addr uint64) {
	for _, w := range h.waiters {
		if w.parked && w.st == st && w.addr == addr {
			w.parked = false
			w.p.Wake()
		}
	}
}

// Deadlines of parked waiters are served by this hub's own timer events.
// The event heap cannot cancel an event, so a timer is never scheduled
// later than the next other pending event (or, when nothing else is
// pending, than the earliest deadline): a wait that ends early leaves at
// most a no-op event that fires no later than real work would, and never
// stretches the run or trips the max_sim_time watchdog.
type timerEvent struct {
	h  *Hub
	at sim.Time
}

func (h *Hub) arm() {
	next := sim.Never
	for _, w := range h.waiters {
		if w.parked && w.deadline < next {
			next = w.deadline
		}
	}
	if next == sim.Never {
		return
	}
	if ne := h.m.Sim.NextEventTime(); ne < next {
		next = ne
	}
	for _, t := range h.timers {
		if t <= next {
			return // an earlier or equal timer will re-arm
		}
	}
	h.timers = append(h.timers, next)
	h.m.Sim.At(next, &timerEvent{h: h, at: next})
}

// Late makes the timer, under jitter, fire after its instant's process
// wake-ups (sim.Late): it re-arms at the next pending time, which while
// wake-ups of its instant wait is its own instant, and fired before them
// it would re-arm there for ever.
func (e *timerEvent) Late() {}

func (e *timerEvent) Fire() {
	h := e.h
	for i, t := range h.timers {
		if t == e.at {
			h.timers = append(h.timers[:i], h.timers[i+1:]...)
			break
		}
	}
	now := h.m.Sim.Now()
	for _, w := range h.waiters {
		if w.parked && w.deadline <= now {
			w.parked = false
			w.p.Wake()
		}
	}
	h.arm()
}
