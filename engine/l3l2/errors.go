package l3l2

import (
	"fmt"

	"kernbench/engine/sim"
)

// ArgError is a malformed call detected before anything was issued: a bad
// argument, a non-positive L3 timeout, or a handle that is not active where
// the call only reads (L3 output.read, L2 read/view/write). It never
// poisons; the Starlark layer raises it (as a ValueError-like error) on both
// levels.
type ArgError struct {
	Op  string
	Msg string
}

func (e *ArgError) Error() string { return e.Op + ": " + e.Msg }

func argErr(op, format string, args ...any) error {
	return &ArgError{Op: op, Msg: fmt.Sprintf(format, args...)}
}

// TimeoutError is an L3 blocking call whose timeout expired: a counter wait
// (Observed is the last observed value) or a blocking queue call. It is not
// poison: the handle stays LIVE. The message contains "timed out".
type TimeoutError struct {
	Op       string
	Timeout  sim.Time
	Observed int32 // counter waits only
	Counter  bool  // Observed is meaningful
}

func (e *TimeoutError) Error() string {
	if e.Counter {
		return fmt.Sprintf("%s timed out after %v (observed %d)", e.Op, e.Timeout, e.Observed)
	}
	return fmt.Sprintf("%s timed out after %v", e.Op, e.Timeout)
}

// RegionError is a failed L3 region operation. Code is a validation result
// name (BAD_PAYLOAD_RANGE, BAD_COUNTER_RANGE, OUT_OF_BOUNDS), BAD_ARGUMENT,
// RELEASED, POISONED, SINGLE_WRITER or LOCAL_OPERATION. Whether the region
// was poisoned is its State; Cause is the first poison cause for POISONED.
type RegionError struct {
	Op       string
	Code     Code
	RegionID uint64
	Msg      string
	Cause    error
}

// Region error codes beyond the validation result names.
const (
	CodeBadArgument    Code = "BAD_ARGUMENT"
	CodeReleased       Code = "RELEASED"
	CodePoisoned       Code = "POISONED"
	CodeSingleWriter   Code = "SINGLE_WRITER"
	CodeLocalOperation Code = "LOCAL_OPERATION"
)

func (e *RegionError) Error() string {
	return fmt.Sprintf("l3l2 region %d %s: %s: %s", e.RegionID, e.Op, e.Code, e.Msg)
}

func (e *RegionError) Unwrap() error { return e.Cause }

// EndpointErrorKind classifies an L2 region endpoint error.
type EndpointErrorKind string

// L2 region endpoint error kinds (docs/l3l2.md, "Error kinds").
const (
	EndpointNone           EndpointErrorKind = "NONE"
	EndpointBadDescriptor  EndpointErrorKind = "BAD_DESCRIPTOR"
	EndpointOutOfBounds    EndpointErrorKind = "OUT_OF_BOUNDS"
	EndpointSignalTimeout  EndpointErrorKind = "SIGNAL_TIMEOUT"
	EndpointSignalProtocol EndpointErrorKind = "SIGNAL_PROTOCOL"
	EndpointLocalOperation EndpointErrorKind = "LOCAL_OPERATION"
)

// EndpointError is the sticky error of an L2 region endpoint: once set,
// every later endpoint operation returns it. Its text is the reference
// runtime's canonical fatal format ("L3-L2 endpoint error ... region=<id>"),
// which the L3 side parses to poison the right region (Hub.PoisonRegion).
type EndpointError struct {
	Kind        EndpointErrorKind
	Op          string // init, counter_addr, payload_read, payload_write, signal_notify, signal_test, signal_wait
	RegionID    uint64
	CounterAddr uint64
	Operand     int32
	Observed    int32
	Msg         string
}

func (e *EndpointError) Error() string {
	return fmt.Sprintf("L3-L2 endpoint error op=%s kind=%s region=%d counter_addr=%#x operand=%d observed=%d msg=%s",
		e.Op, e.Kind, e.RegionID, e.CounterAddr, e.Operand, e.Observed, e.Msg)
}

// QueueErrorKind classifies an SPSC queue error (docs/l3l2.md, "Error
// kinds").
type QueueErrorKind string

// Queue error kinds.
const (
	QueueNone              QueueErrorKind = "NONE"
	QueueBadArgument       QueueErrorKind = "BAD_ARGUMENT"
	QueueBadDescriptor     QueueErrorKind = "BAD_DESCRIPTOR"
	QueueInvalidDescriptor QueueErrorKind = "INVALID_DESCRIPTOR"
	QueueOwnership         QueueErrorKind = "OWNERSHIP"
	QueueRemoteAborted     QueueErrorKind = "REMOTE_ABORTED"
	QueueEndpointError     QueueErrorKind = "ENDPOINT_ERROR"
)

// Operation names carried by queue errors. The L2 names are the reference
// runtime's; L3 errors use the L3 call's name (input.try_enqueue,
// output.try_peek, output.read, output.release) and "timeout".
const (
	OpInit             = "init"
	OpTimeout          = "timeout"
	OpInputTryPeek     = "input.try_peek"
	OpInputRelease     = "input.release"
	OpOutputTryReserve = "output.try_reserve"
	OpOutputPublish    = "output.publish"

	OpInputTryEnqueue = "input.try_enqueue"
	OpOutputTryPeek   = "output.try_peek"
	OpOutputRead      = "output.read"
	OpOutputRelease   = "output.release"
)

// QueueError is a queue failure: on L2 the endpoint's first, terminal error
// (QueueEndpoint.Err); on L3 the error a call raised (the queue's state says
// whether it poisoned). Session and Transaction identify the region instance.
type QueueError struct {
	Kind        QueueErrorKind
	Op          string
	Session     uint64
	Transaction uint64
	Msg         string
}

func (e *QueueError) Error() string {
	return fmt.Sprintf("SPSC queue error op=%s kind=%s session=%#016x transaction=%d msg=%s",
		e.Op, e.Kind, e.Session, e.Transaction, e.Msg)
}
