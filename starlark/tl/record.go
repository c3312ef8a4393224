package tl

import (
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Recorder sees every tl call of a kernel and of the threads it spawns:
// Call before the builtin runs, Return after (with its result). kernbench
// run --export-msccl records a run's schedule this way.
type Recorder interface {
	Call(k *Kernel, name string, args starlark.Tuple, kw []starlark.Tuple, at syntax.Position)
	Return(k *Kernel, name string, args starlark.Tuple, kw []starlark.Tuple, result starlark.Value, err error)
}

// ThreadNumber is this thread's number on its rank (0 for the kernel).
func (k *Kernel) ThreadNumber() int { return k.Thread }

// ThreadOf returns the tl of the thread behind a tl.spawn handle.
func ThreadOf(v starlark.Value) (*Kernel, bool) {
	h, ok := v.(*threadHandle)
	if !ok {
		return nil, false
	}
	return h.k, true
}
