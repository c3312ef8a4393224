package prims

import "fmt"

// Error is a primitive's failure that the script's face reports with a
// kind of the reference, named by Kind (DtypeMismatch, OutOfBounds, …):
// this package knows no kinds, starlark/errkind maps the name as it maps
// machine.IPCQError's. It reads as the kinded errors of tl do: the kind,
// a colon, the message.
type Error struct {
	Kind string
	Msg  string
	// Cause, when set, tells callers what happened beyond the kind
	// (ErrNoStagingRoom): errors.Is finds it.
	Cause error
}

func (e *Error) Error() string { return e.Kind + ": " + e.Msg }
func (e *Error) Unwrap() error { return e.Cause }

// The kinds this package's errors carry (their names in the reference).
const (
	KindDtypeMismatch       = "DtypeMismatch"
	KindOutOfBounds         = "OutOfBounds"
	KindIpcqMessageTooLarge = "IpcqMessageTooLarge"
	KindStaleSlot           = "StaleSlot"
	KindPendingStoreHazard  = "PendingStoreHazard"
	KindWriteWriteHazard    = "WriteWriteHazard"
	KindSendBufferHazard    = "SendBufferHazard"
	KindDirectionInUse      = "DirectionInUse"
	KindLocalOperandHazard  = "LocalOperandHazard"
	KindTimingOnly          = "TimingOnly"
	KindZeroDivision        = "ZeroDivision"
	KindOutOfMemory         = "OutOfMemory"
)

// Kinds lists the kinds of this package's errors (starlark/errkind's test
// checks that each is declared there).
var Kinds = []string{KindDtypeMismatch, KindOutOfBounds, KindIpcqMessageTooLarge, KindStaleSlot,
	KindPendingStoreHazard, KindWriteWriteHazard, KindSendBufferHazard, KindDirectionInUse, KindLocalOperandHazard,
	KindTimingOnly, KindZeroDivision, KindOutOfMemory}

// errorf is an Error of kind.
func errorf(kind, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}
