// Package errkind declares every kind of failure a kernbench command can
// end with — its name (in messages and as error.kind in --json), its exit
// status and its meaning — and Of, the one classifier that maps any error
// to its kind with errors.As and errors.Is. No error is recognised by its
// text.
//
// The engine and the Starlark layers declare their own typed errors
// (sim.StallError, machine.IPCQError, prims.Error, l3l2.QueueError,
// script.ErrStepLimit, …); this package sits above them and says which
// kind each one is and how the process exits. It imports the engine and starlark/script; tl and ccl
// import it (tl raises its kinds as *Kind values, ccl builds its failures
// from them, the CLI takes its exit status from Of).
//
// Adding a kind: declare the variable below with its Table row (name,
// status, group, doc), make the error that raises it recognisable in Of (a
// typed error, or an error carrying the *Kind through Kinded), and run
// go test ./cmd/kernbench -run TestDocsInSync -update to regenerate
// docs/builtins.md.
package errkind

import (
	"errors"
	"slices"

	"kernbench/engine/l3l2"
	"kernbench/engine/machine"
	"kernbench/engine/prims"
	"kernbench/engine/sim"
	"kernbench/starlark/script"
)

// Exit statuses of the kernbench command.
const (
	ExitOK       = 0
	ExitWrong    = 1 // a wrong result, a failed test
	ExitUsage    = 2 // usage, config, load or input errors
	ExitDeadlock = 3 // deadlock, watchdog, step limit, timeout
	ExitRuntime  = 4 // a run-time error in a script, or a kernbench bug
)

// Group says who raises a kind; it orders the reference.
type Group int

const (
	// Run kinds end a command: the bench, the simulation, the CLI.
	Run Group = iota
	// TL kinds are raised by tl builtins and the simulated IPCQ.
	TL
	// L3 kinds are raised by the L3/L2 runtime (docs/l3l2.md).
	L3
)

// Kind is one kind of failure. Kinds are compared by identity: two kinds
// may share a name where the same word means different things at
// different exit statuses (OutOfMemory before and during a run).
type Kind struct {
	Name   string // as users see it
	Status int    // exit status
	Group  Group
	Doc    string // when it is raised
}

func (k *Kind) String() string { return k.Name }

// Kinded is an error that knows its kind (a report.Failure, a tl.Error).
type Kinded interface {
	error
	ErrorKind() *Kind
}

// The run kinds.
var (
	Usage          = &Kind{"UsageError", ExitUsage, Run, "a bad flag value, argument or file name"}
	Config         = &Kind{"ConfigError", ExitUsage, Run, "ccl.yaml, --config or --set does not decode or validate"}
	Load           = &Kind{"LoadError", ExitUsage, Run, "a .star file does not parse, resolve or load, fails while its top level runs, or lacks its entry function"}
	Init           = &Kind{"InitError", ExitUsage, Run, "the simulated machine cannot be built for the run (topology, neighbors(), the bench's set-up)"}
	MSCCL          = &Kind{"MSCCLError", ExitUsage, Run, "an MSCCL XML schedule does not parse or validate"}
	IO             = &Kind{"IOError", ExitUsage, Run, "an output (--trace, --oplog, --cpuprofile, --csv, --plot, --export-msccl, --export-chakra, docs --stubs) cannot be written, while the run writes it or after; a path refused before the run (a folder, a block device, a missing folder) is a UsageError"}
	Export         = &Kind{"ExportError", ExitUsage, Run, "--export-msccl or --export-chakra cannot express the run"}
	MemoryLimit    = &Kind{"OutOfMemory", ExitUsage, Run, "before the run: the bench buffers do not fit the simulated memory, or the run's host-memory estimate exceeds --max-memory"}
	CheckFailed    = &Kind{"CheckFailed", ExitUsage, Run, "`kernbench check` found problems"}
	Deadlock       = &Kind{"Deadlock", ExitDeadlock, Run, "every remaining process waits for another, or one waited longer than deadlock_timeout_ns with nothing on its way"}
	WaitTimeout    = &Kind{"WaitTimeout", ExitDeadlock, Run, "a process waited longer than deadlock_timeout_ns for a memory operation, a message still on its way or a rank still working: slow, not stuck"}
	Watchdog       = &Kind{"Watchdog", ExitDeadlock, Run, "the simulated-time limit was reached (processes that never return)"}
	FaultStopped   = &Kind{"FaultStopped", ExitDeadlock, Run, "a resource a fault stops (stop_at_ns in system.faults or --fault) held transfers that processes waited for"}
	StepLimit      = &Kind{"StepLimit", ExitDeadlock, Run, "a script ran more Starlark steps than --max-steps allows"}
	NoTimeProgress = &Kind{"NoTimeProgress", ExitDeadlock, Run, "a rank's kernel and threads made a million calls of tl, Ptr and Tile (plus one per 16 bytes of the rank's buffers) within one simulated instant: a loop that polls, or spins on calls that never wait, while time cannot move on; or the simulation fired 2^25 events at one instant (threads spawned without end, or a kernbench bug)"}
	Timeout        = &Kind{"Timeout", ExitDeadlock, Run, "a script ran longer than --timeout (wall clock)"}
	HostMemory     = &Kind{"OutOfMemory", ExitDeadlock, Run, "during the run: the host memory it uses outgrew --max-memory"}
	TestTimeout    = &Kind{"TestTimeout", ExitDeadlock, Run, "a `kernbench test` test ran longer than -timeout"}
	WrongResult    = &Kind{"WrongResult", ExitWrong, Run, "the run finished but its result differs from the reference"}
	Phase2Mismatch = &Kind{"Phase2Mismatch", ExitWrong, Run, "the two-pass verification of a schedule disagrees with its first pass"}
	TestFailed     = &Kind{"TestFailed", ExitWrong, Run, "a `kernbench test` test failed"}
	Runtime        = &Kind{"RuntimeError", ExitRuntime, Run, "a script failed at run time (fail(), a Starlark error, an L2 function's failure)"}
	Unreceived     = &Kind{"UnreceivedMessages", ExitRuntime, Run, "the run ended with messages sent that no rank received (a receive missing or a send too many; invariant I1)"}
	Invariant      = &Kind{"InvariantViolation", ExitRuntime, Run, "the engine found one of its invariants broken (a kernbench bug)"}
	Unfinished     = &Kind{"Unfinished", ExitRuntime, Run, "an L3 main returned with work still queued, under --strict"}
	Internal       = &Kind{"InternalError", ExitRuntime, Run, "a kernbench bug: a panic, or an error no kind describes"}
)

// The tl kinds (exit 4), in the order of the reference.
var (
	IpcqInvalidDirection = &Kind{"IpcqInvalidDirection", ExitRuntime, TL, "the direction is not installed on this rank (or is receive-only and you sent on it, or send-only and you received on it)"}
	IpcqMessageTooLarge  = &Kind{"IpcqMessageTooLarge", ExitRuntime, TL, "a single element larger than slot_size (tl.send cuts longer buffers into several messages)"}
	OutOfBounds          = &Kind{"OutOfBounds", ExitRuntime, TL, "a view outside its Ptr, or operands whose counts differ"}
	DtypeMismatch        = &Kind{"DtypeMismatch", ExitRuntime, TL, "operands or a destination of another dtype (also a recv into a dst of another dtype)"}
	StaleSlot            = &Kind{"StaleSlot", ExitRuntime, TL, "a return_slot Ptr read after a later message overwrote its slot"}
	SlotWrite            = &Kind{"SlotWrite", ExitRuntime, TL, "a store, copy or recv into a return_slot Ptr, whose slot the sender may refill at any time (write into the kernel's own buffer)"}
	SendBufferHazard     = &Kind{"SendBufferHazard", ExitRuntime, TL, "a store, copy or recv into a range that an unfinished send still reads (tl.flush first)"}
	DirectionInUse       = &Kind{"DirectionInUse", ExitRuntime, TL, "a send on a direction whose send side a tl.send_async is still using (tl.wait its handle first), or a direction side (send or receive) used by two threads of one rank at once"}
	LocalOperandHazard   = &Kind{"LocalOperandHazard", ExitRuntime, TL, "a write by one thread into a buffer that a fused primitive of another thread still reads as its local operand"}
	TLOutOfMemory        = &Kind{"OutOfMemory", ExitRuntime, TL, "tl.alloc beyond the memory's capacity (also the TCM staging of the fused primitives, a host bench's torch tensors)"}
	TimingOnly           = &Kind{"TimingOnly", ExitRuntime, TL, "a kernel read simulated values (Tile.tolist, Ptr.tolist, Ptr.tobytes, p[i]), or divided an integer Tile by a Tile (which fails on a 0 element), in a --timing-only run, which keeps no bytes"}
	PendingStoreHazard   = &Kind{"PendingStoreHazard", ExitRuntime, TL, "a send, fetch or copy (also tl.reduce's operands, a fused primitive's local operand) reads a range that a tl.store_async or tl.copy_async of the rank still writes, or the dst of a tl.recv_async not waited for yet (its receive happens at the wait): tl.wait its handle first (the mock counts the write as pending until that wait, as nothing takes time there)"}
	WriteWriteHazard     = &Kind{"WriteWriteHazard", ExitRuntime, TL, "a store or copy into a range that an earlier store or copy of the rank (tl.store_async, tl.copy_async, another thread, the last stores of a fused primitive) is still writing: tl.wait its handle, or tl.flush() for a fused primitive, first; another thread's write is ordered with the thread (tl.wait its handle, tl.signal/tl.wait an event)"}
	ZeroDivision         = &Kind{"ZeroDivision", ExitRuntime, TL, "an integer Tile divided by zero (by a 0 scalar or a Tile with a 0 element); float Tiles give ±inf or NaN"}
)

// The L3/L2 kinds (exit 4): the reference runtime's queue, endpoint and
// region result names, and the two Starlark-level ones.
var (
	L3Timeout         = &Kind{"Timeout", ExitRuntime, L3, "an L3 blocking call's timeout expired (a counter wait, a blocking queue call)"}
	L3ValueError      = &Kind{"ValueError", ExitRuntime, L3, "a malformed L3 or L2 call detected before anything was issued (a bad argument, a non-positive timeout, an inactive handle, input to a queue stopped by request_stop)"}
	BadArgument       = &Kind{"BAD_ARGUMENT", ExitRuntime, L3, "a queue's init got a window out of range or sizes that disagree, or a region call a bad argument"}
	BadDescriptor     = &Kind{"BAD_DESCRIPTOR", ExitRuntime, L3, "a binding or region descriptor that fails decoding or validation"}
	InvalidDescriptor = &Kind{"INVALID_DESCRIPTOR", ExitRuntime, L3, "a queue message descriptor that breaks the protocol (sequence, opcode, STOP rules, payload placement)"}
	Ownership         = &Kind{"OWNERSHIP", ExitRuntime, L3, "a queue handle or reservation used out of turn (second peek with window 1, a released or stale handle, a second reservation, a double publish)"}
	RemoteAborted     = &Kind{"REMOTE_ABORTED", ExitRuntime, L3, "the peer of a queue aborted (its flag seen after a timeout)"}
	EndpointError     = &Kind{"ENDPOINT_ERROR", ExitRuntime, L3, "a counter or payload operation failed underneath a queue"}
	L3OutOfBounds     = &Kind{"OUT_OF_BOUNDS", ExitRuntime, L3, "a counter address or payload access outside its region"}
	SignalTimeout     = &Kind{"SIGNAL_TIMEOUT", ExitRuntime, L3, "an L2 signal wait timed out"}
	SignalProtocol    = &Kind{"SIGNAL_PROTOCOL", ExitRuntime, L3, "an L2 signal operation with an invalid NotifyOp or WaitCmp"}
	LocalOperation    = &Kind{"LOCAL_OPERATION", ExitRuntime, L3, "a region operation the local side may not perform"}
	BadMagicVersion   = &Kind{"BAD_MAGIC_VERSION", ExitRuntime, L3, "a region descriptor with the wrong magic or major version"}
	BadRegionID       = &Kind{"BAD_REGION_ID", ExitRuntime, L3, "a region descriptor with region id 0"}
	BadPayloadRange   = &Kind{"BAD_PAYLOAD_RANGE", ExitRuntime, L3, "an empty or overflowing payload range (also a payload access of 0 bytes)"}
	BadCounterRange   = &Kind{"BAD_COUNTER_RANGE", ExitRuntime, L3, "a counter range that is empty, misaligned, overflowing or overlaps the payload (also a misaligned counter address)"}
	BadScalarCount    = &Kind{"BAD_SCALAR_COUNT", ExitRuntime, L3, "fewer than 6 descriptor scalars"}
	Released          = &Kind{"RELEASED", ExitRuntime, L3, "a region used after it was released"}
	Poisoned          = &Kind{"POISONED", ExitRuntime, L3, "a region used after an earlier failure poisoned it"}
	SingleWriter      = &Kind{"SINGLE_WRITER", ExitRuntime, L3, "a second writer on a single-writer region"}
)

// Table is every kind, in the reference's order (a copy).
func Table() []*Kind { return slices.Clone(kindTable) }

// Table is every kind, by group in the order of the reference.
var kindTable = []*Kind{
	Usage, Config, Load, Init, MSCCL, IO, Export, MemoryLimit, CheckFailed,
	Deadlock, WaitTimeout, Watchdog, FaultStopped, StepLimit, NoTimeProgress, Timeout, HostMemory, TestTimeout,
	WrongResult, Phase2Mismatch, TestFailed,
	Runtime, Unreceived, Invariant, Unfinished, Internal,

	IpcqInvalidDirection, IpcqMessageTooLarge, OutOfBounds, DtypeMismatch, StaleSlot, SlotWrite,
	SendBufferHazard, DirectionInUse, LocalOperandHazard, TLOutOfMemory, TimingOnly,
	PendingStoreHazard, WriteWriteHazard, ZeroDivision,

	L3Timeout, L3ValueError, BadArgument, BadDescriptor, InvalidDescriptor, Ownership,
	RemoteAborted, EndpointError, L3OutOfBounds, SignalTimeout, SignalProtocol,
	LocalOperation, BadMagicVersion, BadRegionID, BadPayloadRange, BadCounterRange,
	BadScalarCount, Released, Poisoned, SingleWriter,
}

// byName finds the kinds of groups that engine errors carry as names
// (machine.IPCQError, prims.Error, the l3l2 errors); names are unique within a group.
var byName = func() map[Group]map[string]*Kind {
	m := map[Group]map[string]*Kind{}
	for _, k := range kindTable {
		if m[k.Group] == nil {
			m[k.Group] = map[string]*Kind{}
		}
		m[k.Group][k.Name] = k
	}
	return m
}()

// Named is the kind of group g called name, or nil.
func Named(g Group, name string) *Kind { return byName[g][name] }

// named is Named, with an engine name missing from the table an
// internal error (TestEngineNames keeps that from happening).
func named(g Group, name string) *Kind {
	if k := Named(g, name); k != nil {
		return k
	}
	return Internal
}

// Of is the kind of err (nil for nil): the kind of the first error in its
// chain that carries one (Kinded), else the limit that stopped a script,
// else the kind of the engine error it wraps, else RuntimeError.
func Of(err error) *Kind {
	if err == nil {
		return nil
	}
	var kd Kinded
	if errors.As(err, &kd) && kd.ErrorKind() != nil {
		return kd.ErrorKind()
	}
	if k := limit(err); k != nil {
		return k
	}
	if k := l3Kind(err); k != nil {
		return k
	}
	if k := engineKind(err); k != nil {
		return k
	}
	return Runtime
}

// Status is the exit status of err: 0 for nil, else its kind's.
func Status(err error) int {
	if err == nil {
		return ExitOK
	}
	return Of(err).Status
}

// limit is StepLimit or Timeout when a limit stopped the script err comes
// from.
func limit(err error) *Kind {
	switch {
	case script.IsStepLimit(err):
		return StepLimit
	case script.IsTimeout(err):
		return Timeout
	case script.IsMemory(err):
		return HostMemory
	}
	return nil
}

func l3Kind(err error) *Kind {
	var qe *l3l2.QueueError
	var re *l3l2.RegionError
	var ee *l3l2.EndpointError
	var te *l3l2.TimeoutError
	var ae *l3l2.ArgError
	var de *l3l2.DescriptorError
	switch {
	case errors.As(err, &qe):
		return named(L3, string(qe.Kind))
	case errors.As(err, &re):
		return named(L3, string(re.Code))
	case errors.As(err, &ee):
		return named(L3, string(ee.Kind))
	case errors.As(err, &te):
		return L3Timeout
	case errors.As(err, &ae):
		return L3ValueError
	case errors.As(err, &de):
		return named(L3, string(de.Code))
	}
	return nil
}

// engineKind is the kind of a simulation-ending engine error.
func engineKind(err error) *Kind {
	var ie *machine.IPCQError
	var pe *prims.Error
	var inv *machine.InvariantError
	var unrecv *machine.UnreceivedError
	var stall *sim.StallError
	var wt *sim.WaitTimeoutError
	var wd *sim.WatchdogError
	var stuck *sim.StuckInstantError
	var oom *machine.OutOfMemoryError
	switch {
	case errors.As(err, &stuck):
		return NoTimeProgress
	case errors.As(err, &ie):
		return named(TL, ie.Kind)
	case errors.As(err, &pe):
		return named(TL, pe.Kind)
	case errors.As(err, &oom):
		return TLOutOfMemory
	case errors.As(err, &unrecv):
		return Unreceived
	case errors.As(err, &inv):
		return Invariant
	case errors.As(err, &stall), errors.As(err, &wt):
		return Deadlock
	case errors.As(err, &wd):
		return Watchdog
	}
	return nil
}
