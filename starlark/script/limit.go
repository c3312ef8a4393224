package script

import (
	"errors"
	"sync"

	"go.starlark.net/starlark"
)

// The limits that stop a thread before it finishes. A thread's error says
// which one stopped it (errors.Is) once Stopped has marked it, so nothing
// needs to read the cancellation message go.starlark.net makes.
var (
	// ErrStepLimit: the thread ran more steps than --max-steps allows.
	ErrStepLimit = errors.New("step limit")
	// ErrTimeout: a Watchdog stopped the thread at its wall-clock limit.
	ErrTimeout = errors.New("wall-clock timeout")
	// ErrMemory: a memory watch (NewMemoryWatch) stopped the thread when
	// the process's host memory passed --max-memory.
	ErrMemory = errors.New("host memory limit")
	// errCancelled: anything else cancelled it (Cancel).
	errCancelled = errors.New("cancelled")
)

// stateKey is the thread-local key of a thread's cancel record.
const stateKey = "kernbench/script.cancel"

// cancelRecord is why a thread was cancelled first. go.starlark.net keeps
// only the first reason, as text; this keeps the matching cause, typed.
type cancelRecord struct {
	mu    sync.Mutex
	cause error
}

func record(th *starlark.Thread) *cancelRecord {
	r, _ := th.Local(stateKey).(*cancelRecord)
	return r
}

// cancel cancels th with reason and records cause, unless th was
// cancelled before (then both keep the first).
func cancel(th *starlark.Thread, cause error, reason string) {
	cancelRecorded(th, record(th), cause, reason)
}

// cancelRecorded is cancel with th's record already looked up (nil: th
// keeps none).
func cancelRecorded(th *starlark.Thread, r *cancelRecord, cause error, reason string) {
	if r != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.cause == nil {
			r.cause = cause
		}
	}
	th.Cancel(reason)
}

// Cancel cancels th for a reason that is neither limit (the simulation
// ended under it). Threads made by a Loader must be cancelled through
// here, so a later limit is not taken for the cause.
func Cancel(th *starlark.Thread, reason string) { cancel(th, errCancelled, reason) }

// Stopped returns err, the error a call on th returned, marked with the
// limit that stopped th (ErrStepLimit, ErrTimeout) when one did; its text
// is err's. Every call of a Loader's thread passes its error through here
// before the error leaves the Starlark layer.
func Stopped(th *starlark.Thread, err error) error {
	if err == nil || th == nil {
		return err
	}
	r := record(th)
	if r == nil {
		return err
	}
	r.mu.Lock()
	cause := r.cause
	r.mu.Unlock()
	if cause != ErrStepLimit && cause != ErrTimeout && cause != ErrMemory {
		return err
	}
	if errors.Is(err, cause) {
		return err
	}
	return &limitError{limit: cause, err: err}
}

// limitError is a thread's error marked with the limit that stopped it.
type limitError struct {
	limit error
	err   error
}

func (e *limitError) Error() string   { return e.err.Error() }
func (e *limitError) Unwrap() []error { return []error{e.err, e.limit} }

// IsStepLimit reports whether err comes from a thread stopped by its step
// limit.
func IsStepLimit(err error) bool { return errors.Is(err, ErrStepLimit) }

// IsTimeout reports whether err comes from a thread a Watchdog cancelled.
func IsTimeout(err error) bool { return errors.Is(err, ErrTimeout) }

// IsMemory reports whether err comes from a thread a memory watch
// cancelled.
func IsMemory(err error) bool { return errors.Is(err, ErrMemory) }
