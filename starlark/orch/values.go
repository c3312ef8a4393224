package orch

import (
	"errors"
	"fmt"
	"math"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"kernbench/engine/dtype"
	"kernbench/engine/l3l2"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/tl"
)

func constStruct(name string, keys []string, vals []int64) *starlarkstruct.Struct {
	d := starlark.StringDict{}
	for i, k := range keys {
		d[k] = starlark.MakeInt64(vals[i])
	}
	return starlarkstruct.FromStringDict(starlark.String(name), d)
}

func mkStruct(name string, d starlark.StringDict) *starlarkstruct.Struct {
	return starlarkstruct.FromStringDict(starlark.String(name), d)
}

func u64(v uint64) starlark.Value { return starlark.MakeUint64(v) }

func u64List(s []uint64) *starlark.List {
	out := make([]starlark.Value, len(s))
	for i, v := range s {
		out[i] = u64(v)
	}
	return starlark.NewList(out)
}

// toU64 converts a non-negative Starlark int.
func toU64(fn, what string, v starlark.Value) (uint64, error) {
	i, ok := v.(starlark.Int)
	if !ok {
		return 0, fmt.Errorf("%s: %s must be an int, got %s", fn, what, v.Type())
	}
	u, ok := i.Uint64()
	if !ok {
		return 0, fmt.Errorf("%s: %s must be a non-negative int below 2^64, got %s", fn, what, i)
	}
	return u, nil
}

// scalarList converts a list or tuple of ints.
func scalarList(fn string, v starlark.Value) ([]uint64, error) {
	it, ok := v.(starlark.Iterable)
	if !ok || v.Type() == "string" || v.Type() == "bytes" {
		return nil, fmt.Errorf("%s: scalars must be a list of ints, got %s", fn, v.Type())
	}
	iter := it.Iterate()
	defer iter.Done()
	var out []uint64
	var x starlark.Value
	for iter.Next(&x) {
		u, err := toU64(fn, "each scalar", x)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// dataArg accepts bytes, or None for a zero-byte message; nbytes (None or
// an int) may cut the data short.
func dataArg(fn string, data, nbytes starlark.Value) ([]byte, error) {
	var b []byte
	switch d := data.(type) {
	case starlark.NoneType:
	case starlark.Bytes:
		b = []byte(d)
	default:
		return nil, fmt.Errorf("%s: data must be bytes or None, got %s", fn, data.Type())
	}
	if nbytes == nil || nbytes == starlark.None {
		return b, nil
	}
	n, err := toU64(fn, "nbytes", nbytes)
	if err != nil {
		return nil, err
	}
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%s: nbytes=%d is more than the %d bytes of data", fn, n, len(b))
	}
	return b[:n], nil
}

// valueError is a malformed L3 or L2 call, refused before anything is
// issued: the engine's ArgError, which errkind classifies as ValueError.
func valueError(fn, format string, args ...any) error {
	return &l3l2.ArgError{Op: fn, Msg: fmt.Sprintf(format, args...)}
}

// seconds converts an L3 timeout (seconds, > 0) to simulated time.
func seconds(fn string, v starlark.Value) (sim.Time, error) {
	if v == nil || v == starlark.None {
		return 0, valueError(fn, "timeout (seconds, > 0) is required")
	}
	f, ok := starlark.AsFloat(v)
	if !ok {
		return 0, valueError(fn, "timeout must be a number of seconds, got %s", v.Type())
	}
	if !(f > 0) || math.IsInf(f, 0) {
		return 0, valueError(fn, "timeout must be finite and > 0 seconds, got %v", f)
	}
	t := math.Round(f * float64(sim.Second))
	if t < 1 || t > float64(sim.Never/2) {
		return 0, valueError(fn, "timeout %v s is out of range", f)
	}
	return sim.Time(t), nil
}

// nanos converts an L2 timeout (int ns, >= 0; 0 = live no-attempt).
func nanos(fn string, ns int64) (sim.Time, error) {
	if ns < 0 {
		return 0, fmt.Errorf("%s: timeout_ns must be >= 0, got %d", fn, ns)
	}
	if ns > int64(sim.Never/2/sim.Nanosecond) {
		return 0, fmt.Errorf("%s: timeout_ns %d is out of range", fn, ns)
	}
	return sim.Time(ns) * sim.Nanosecond, nil
}

func notifyOp(fn string, v int64) (l3l2.NotifyOp, error) {
	if v < 0 || v > math.MaxUint32 {
		return 0, fmt.Errorf("%s: invalid NotifyOp %d", fn, v)
	}
	return l3l2.NotifyOp(v), nil
}

func waitCmp(fn string, v int64) (l3l2.WaitCmp, error) {
	if v < 0 || v > math.MaxUint32 {
		return 0, fmt.Errorf("%s: invalid WaitCmp %d", fn, v)
	}
	return l3l2.WaitCmp(v), nil
}

func opcode(fn string, v int64) (l3l2.Opcode, error) {
	if v < 0 {
		return 0, fmt.Errorf("%s: invalid opcode %d", fn, v)
	}
	return l3l2.Opcode(v), nil
}

// objArg is an argument that must be an orch object of engine type T (a
// message, an input handle, a reservation), as a starlark.Unpacker. Unpack
// keeps the value; get checks it after UnpackArgs, with the builtin's own
// message ("queue.output.read: message must be a message, got int").
type objArg[T any] struct{ v starlark.Value }

func (a *objArg[T]) Unpack(v starlark.Value) error { a.v = v; return nil }

// get is the engine object of the argument what of builtin fn.
func (a *objArg[T]) get(fn, what string) (T, error) {
	var zero T
	o, ok := a.v.(*Obj)
	if !ok {
		return zero, fmt.Errorf("%s: %s must be a %s, got %s", fn, what, what, a.v.Type())
	}
	r, ok := o.Recv.(T)
	if !ok {
		return zero, fmt.Errorf("%s: %s must be a %s, got %s", fn, what, what, o.Kind)
	}
	return r, nil
}

type (
	messageArg     = objArg[*l3l2.Message]
	handleArg      = objArg[*l3l2.InputHandle]
	reservationArg = objArg[*l3l2.Reservation]
)

var (
	_ starlark.Unpacker = (*messageArg)(nil)
	_ starlark.Unpacker = (*handleArg)(nil)
	_ starlark.Unpacker = (*reservationArg)(nil)
)

// l2Err applies the L2 convention: malformed calls (*l3l2.ArgError) raise,
// anything else is recorded by the endpoint (error()) and the call returns
// False/None.
func l2Err(err error) error {
	var ae *l3l2.ArgError
	if errors.As(err, &ae) {
		return err
	}
	return nil
}

func testResult(r l3l2.TestResult) *starlarkstruct.Struct {
	return mkStruct("test_result", starlark.StringDict{"matched": starlark.Bool(r.Matched), "observed": starlark.MakeInt(int(r.Observed))})
}

func layoutStruct(l l3l2.Layout) *starlarkstruct.Struct {
	return mkStruct("layout", starlark.StringDict{
		"depth":                   u64(l.Depth),
		"input_arena_bytes":       u64(l.InputArenaBytes),
		"output_arena_bytes":      u64(l.OutputArenaBytes),
		"input_desc_offset":       u64(l.InputDescOffset),
		"output_desc_offset":      u64(l.OutputDescOffset),
		"input_arena_offset":      u64(l.InputArenaOffset),
		"output_arena_offset":     u64(l.OutputArenaOffset),
		"payload_bytes":           u64(l.PayloadBytes),
		"counter_bytes":           u64(l.CounterBytes),
		"input_desc_tail_offset":  u64(l.InputDescTailOffset),
		"input_desc_head_offset":  u64(l.InputDescHeadOffset),
		"output_desc_tail_offset": u64(l.OutputDescTailOffset),
		"output_desc_head_offset": u64(l.OutputDescHeadOffset),
		"initiator_abort_offset":  u64(l.InitiatorAbortOffset),
		"peer_abort_offset":       u64(l.PeerAbortOffset),
	})
}

// bindingFields are the ten binding scalars in ABI order.
var bindingFields = []string{"magic_version", "session_instance_id_bits", "transaction_id", "payload_base", "payload_bytes",
	"counter_base", "counter_bytes", "depth", "input_arena_bytes", "output_arena_bytes"}

func bindingStruct(b l3l2.Binding) *starlarkstruct.Struct {
	d := starlark.StringDict{}
	for i, v := range b.Scalars() {
		d[bindingFields[i]] = u64(v)
	}
	return mkStruct("binding", d)
}

// bindingArg accepts a binding struct (decode_endpoint_binding) or the ten
// scalars.
func bindingArg(fn string, v starlark.Value) (l3l2.Binding, error) {
	var s []uint64
	if st, ok := v.(*starlarkstruct.Struct); ok {
		for _, f := range bindingFields {
			x, err := st.Attr(f)
			if err != nil || x == nil {
				return l3l2.Binding{}, fmt.Errorf("%s: binding has no field %q", fn, f)
			}
			u, err := toU64(fn, f, x)
			if err != nil {
				return l3l2.Binding{}, err
			}
			s = append(s, u)
		}
	} else {
		var err error
		if s, err = scalarList(fn, v); err != nil {
			return l3l2.Binding{}, err
		}
		if len(s) != len(bindingFields) {
			return l3l2.Binding{}, fmt.Errorf("%s: a binding has %d scalars, got %d", fn, len(bindingFields), len(s))
		}
	}
	return l3l2.Binding{MagicVersion: s[0], SessionInstanceIDBits: s[1], TransactionID: s[2], PayloadBase: s[3], PayloadBytes: s[4],
		CounterBase: s[5], CounterBytes: s[6], Depth: s[7], InputArenaBytes: s[8], OutputArenaBytes: s[9]}, nil
}

// view makes a Ptr of dtype dt over reg (a live view, no copy).
// leaseFunc is a tl.Lease from a function.
type leaseFunc func() error

func (f leaseFunc) Check() error { return f() }

func view(fn string, reg machine.Region, dt string) (*tl.Ptr, error) {
	d, err := dtype.Parse(dt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if reg.N%int64(d.Size()) != 0 {
		return nil, fmt.Errorf("%s: %d bytes are not a whole number of %s elements", fn, reg.N, d)
	}
	return tl.NewPtr(reg, d, reg.N/int64(d.Size()), -1), nil
}

func endpointErrStruct(kind, op, msg string) *starlarkstruct.Struct {
	return mkStruct("error", starlark.StringDict{"kind": starlark.String(kind), "op": starlark.String(op), "message": starlark.String(msg)})
}
