package tl

import (
	"fmt"

	"go.starlark.net/starlark"

	"kernbench/starlark/errkind"
)

// Argument types of tl builtins, as starlark.Unpacker for UnpackArgs. An
// Unpack keeps the value and never fails: the check comes after
// UnpackArgs, in the builtin's own order, so that its arity errors come
// first and its messages stay its own ("tl.fetch: ptr must be a Ptr, got
// int") rather than UnpackArgs' "for parameter" form.

// PtrArg is a Ptr parameter.
type PtrArg struct{ v starlark.Value }

var _ starlark.Unpacker = (*PtrArg)(nil)

func (a *PtrArg) Unpack(v starlark.Value) error { a.v = v; return nil }

// Given reports whether the argument was passed and is not None.
func (a *PtrArg) Given() bool { return a.v != nil && a.v != starlark.None }

// Ptr is the argument of parameter param of builtin fn: a Ptr whose memory
// still belongs to it (an L2 view after its release is not).
func (a *PtrArg) Ptr(fn, param string) (*Ptr, error) { return asPtr(a.v, fn, param) }

// Dst is Ptr for a parameter the call writes: a return_slot Ptr is refused
// (SlotWrite).
func (a *PtrArg) Dst(fn, param string) (*Ptr, error) { return asDst(a.v, fn, param) }

// asDst is asPtr for a Ptr the call writes. A return_slot Ptr's credit
// went back when it was received: the sender's next messages may land in
// the slot while it is written or after, so what the kernel stored there
// would silently become another message's bytes (or a message this
// kernel's bytes).
func asDst(v starlark.Value, fn, param string) (*Ptr, error) {
	p, err := asPtr(v, fn, param)
	if err != nil || p.Slot.Q == nil {
		return p, err
	}
	q := p.Slot.Q
	return nil, errorf(errkind.SlotWrite, "%s: rank %d writes into %s, the rx slot %d of direction %s (a return_slot Ptr): its credit went back when it was received, so rank %d's next message may overwrite what is written; write into a buffer of the kernel's (tl.alloc, or recv dst=) instead",
		fn, q.Rank, param, p.Slot.Idx, q.Dir, q.Peer)
}

// TileArg is a Tile parameter.
type TileArg struct{ v starlark.Value }

var _ starlark.Unpacker = (*TileArg)(nil)

func (a *TileArg) Unpack(v starlark.Value) error { a.v = v; return nil }

// Tile is the argument of parameter param of builtin fn.
func (a *TileArg) Tile(fn, param string) (*Tile, error) {
	t, ok := a.v.(*Tile)
	if !ok {
		return nil, fmt.Errorf("%s: %s must be a Tile, got %s", fn, param, a.v.Type())
	}
	return t, nil
}

func asPtr(v starlark.Value, fn, param string) (*Ptr, error) {
	p, ok := v.(*Ptr)
	if !ok {
		return nil, fmt.Errorf("%s: %s must be a Ptr, got %s", fn, param, v.Type())
	}
	if err := p.CheckLease(); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", fn, param, err)
	}
	return p, nil
}

func unpackPtr(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple, param string) (*Ptr, error) {
	var p PtrArg
	if err := starlark.UnpackArgs(b.Name(), args, kw, param, &p); err != nil {
		return nil, err
	}
	return p.Ptr(b.Name(), param)
}
