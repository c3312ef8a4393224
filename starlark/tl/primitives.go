package tl

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench/engine/dtype"
	"kernbench/starlark/errkind"
)

// The fused primitives' Starlark face: their arguments, unpacked into
// the kernel's reused slots, become a prims.Call that the engine kernel
// runs (engine/prims: the pipeline of pieces, its costs and its order).

// boxes are the boxed positions of a kernel's recent calls (a kernel
// calls from a few sites, over and over), as a T (a message's origin, a
// write's prims.Site): the same value for every use of a position while
// it is among the recent ones, so that a use allocates nothing.
type boxes[T comparable] struct {
	pos  [8]syntax.Position
	v    [8]T
	next int
}

// box returns pos as a T.
func (b *boxes[T]) box(pos syntax.Position) T {
	var none T
	for i := range b.pos {
		if b.pos[i] == pos && b.v[i] != none {
			return b.v[i]
		}
	}
	v := any(pos).(T)
	b.pos[b.next], b.v[b.next] = pos, v
	b.next = (b.next + 1) % len(b.pos)
	return v
}

// fusedArgs are a fused primitive's arguments as UnpackArgs fills them.
type fusedArgs struct {
	inDir, outDir        string
	local, dst, prefetch PtrArg
	pieceV               starlark.Value
	final                bool
}

// primitiveSpec says which arguments a fused primitive takes.
type primitiveSpec struct {
	name                        string
	local, dst, out, finalParam bool
}

// unpackPairs appends starlark.UnpackArgs' name and destination pairs
// for the primitive's parameters, into a's fields, to buf.
func (spec primitiveSpec) unpackPairs(buf []any, a *fusedArgs) []any {
	buf = append(buf, "in_dir", &a.inDir)
	if spec.local {
		buf = append(buf, "local", &a.local)
	}
	if spec.dst {
		buf = append(buf, "dst", &a.dst)
	}
	if spec.out {
		buf = append(buf, "out_dir", &a.outDir)
	}
	if spec.finalParam {
		buf = append(buf, "final?", &a.final)
	}
	return append(buf, "piece_bytes?", &a.pieceV, "prefetch?", &a.prefetch)
}

// fusedParam is a parameter of a fused primitive: its name, whether it
// may be left out, and how a value is kept (false: the value is not of
// the parameter's type, and UnpackArgs says so).
type fusedParam struct {
	name     string
	optional bool
	set      func(a *fusedArgs, v starlark.Value) bool
}

// fusedSig is a fused primitive's parameters in signature order (the
// order of the UnpackArgs pairs).
type fusedSig []fusedParam

func setDir(dst *string, v starlark.Value) bool {
	s, ok := v.(starlark.String)
	*dst = string(s)
	return ok
}

// signature lists spec's parameters.
func (spec primitiveSpec) signature() fusedSig {
	sig := fusedSig{{name: "in_dir", set: func(a *fusedArgs, v starlark.Value) bool { return setDir(&a.inDir, v) }}}
	if spec.local {
		sig = append(sig, fusedParam{name: "local", set: func(a *fusedArgs, v starlark.Value) bool { a.local.v = v; return true }})
	}
	if spec.dst {
		sig = append(sig, fusedParam{name: "dst", set: func(a *fusedArgs, v starlark.Value) bool { a.dst.v = v; return true }})
	}
	if spec.out {
		sig = append(sig, fusedParam{name: "out_dir", set: func(a *fusedArgs, v starlark.Value) bool { return setDir(&a.outDir, v) }})
	}
	if spec.finalParam {
		sig = append(sig, fusedParam{name: "final", optional: true, set: func(a *fusedArgs, v starlark.Value) bool {
			b, ok := v.(starlark.Bool)
			a.final = bool(b)
			return ok
		}})
	}
	return append(sig,
		fusedParam{name: "piece_bytes", optional: true, set: func(a *fusedArgs, v starlark.Value) bool { a.pieceV = v; return true }},
		fusedParam{name: "prefetch", optional: true, set: func(a *fusedArgs, v starlark.Value) bool { a.prefetch.v = v; return true }})
}

// unpack fills a from plain arguments, as UnpackArgs would, and reports
// whether it could; anything else (which UnpackArgs rejects) is left to
// UnpackArgs. It saves a call most of its work: building the pairs,
// trimming the optional marks off every name for every keyword, the
// conversions through interfaces.
func (sig fusedSig) unpack(a *fusedArgs, args starlark.Tuple, kw []starlark.Tuple) bool {
	if len(args) > len(sig) {
		return false
	}
	var given uint32
	for i, v := range args {
		if !sig[i].set(a, v) {
			return false
		}
		given |= 1 << i
	}
next:
	for _, item := range kw {
		name := string(item[0].(starlark.String))
		for i := range sig {
			if sig[i].name != name {
				continue
			}
			if given&(1<<i) != 0 || !sig[i].set(a, item[1]) {
				return false
			}
			given |= 1 << i
			continue next
		}
		return false
	}
	for i := range sig {
		if !sig[i].optional && given&(1<<i) == 0 {
			return false
		}
	}
	return true
}

func builtinFused(spec primitiveSpec) func(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	sig := spec.signature()
	return func(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		// The arguments unpack into the kernel's reused slots: a call
		// allocates nothing for them (a primitive runs once per few
		// messages, and its allocations were most of a message's).
		f := k.fusedState()
		a := &f.args
		*a = fusedArgs{pieceV: starlark.None}
		if !sig.unpack(a, args, kw) {
			// Anything but plain arguments (a wrong type, an unknown,
			// repeated or missing one) goes through UnpackArgs, for its
			// errors.
			*a = fusedArgs{pieceV: starlark.None}
			pairs := spec.unpackPairs(f.pairs[:0], a)
			f.pairs = pairs
			err := starlark.UnpackArgs(b.Name(), args, kw, pairs...)
			clear(pairs)
			if err != nil {
				return nil, err
			}
		}
		inDir, outDir, local, dst, prefetch, pieceV, final := a.inDir, a.outDir, a.local, a.dst, a.prefetch, a.pieceV, a.final
		*a = fusedArgs{}
		g, err := k.group(b.Name())
		if err != nil {
			return nil, err
		}
		// The call's position is decoded from the line table once: it is
		// the call site of the pieces' writes and, boxed once per site,
		// the origin of their messages (boxing allocated per call).
		site := th.CallFrame(1).Pos
		writeSite := site
		if d, ok := k.Proc.Data.(*starlark.Thread); !ok || d != th {
			writeSite = k.lookupCallSite() // what a write's site is otherwise
		}
		c := k.NewCall(b.Name(), f.origins.box(site))
		c.Final, f.site = final, writeSite
		if c.Piece, err = k.pieceBytes(b.Name(), pieceV); err != nil {
			return nil, err
		}
		if c.In, err = g.LookupRecv(k.Rank, inDir); err != nil {
			return nil, err
		}
		if spec.out {
			if c.Out, err = g.Lookup(k.Rank, outDir, true); err != nil {
				return nil, err
			}
			if err := k.CheckSendSide(c.Out); err != nil {
				return nil, err
			}
		}
		var lp, dp *Ptr
		if spec.local {
			if lp, err = local.Ptr(b.Name(), "local"); err != nil {
				return nil, err
			}
			c.Local = &lp.View
		}
		if spec.dst {
			if dp, err = dst.Dst(b.Name(), "dst"); err != nil {
				return nil, err
			}
			c.Dst = &dp.View
		}
		if lp != nil && dp != nil {
			if lp.DT != dp.DT {
				return nil, errorf(errkind.DtypeMismatch, "%s: rank %d: local is %s, dst is %s", b.Name(), k.Rank, lp.DT, dp.DT)
			}
			if lp.Count != dp.Count {
				return nil, errorf(errkind.OutOfBounds, "%s: rank %d: local has %d elements, dst has %d", b.Name(), k.Rank, lp.Count, dp.Count)
			}
		}
		if prefetch.Given() {
			// The next primitive's local operand starts loading first, as a
			// tl.prefetch call just before this one would (one call less).
			next, err := prefetch.Ptr(b.Name(), "prefetch")
			if err != nil {
				return nil, err
			}
			if err := k.Prefetch(b.Name(), &next.View, c.Piece); err != nil {
				return nil, err
			}
		}
		return starlark.None, k.RunFused(c)
	}
}

// primitiveBuiltins are the fused primitives' entries in the tl table.
func primitiveBuiltins() []Builtin {
	const pieces = " Works on buffers of any length, cut into pieces of slot_size (or piece_bytes) bytes like tl.send; piece i is combined and forwarded as soon as it has arrived while piece i+1 may still be on the wire. The sender's buffer must have the same length and dtype."
	const final = " final=True divides by world_size when the redop is avg (the last reduction of an allreduce)."
	const prefetch = " prefetch=ptr first starts loading ptr as tl.prefetch(ptr) would (the next primitive's local operand), saving a call."
	return []Builtin{
		{Name: "recv_reduce_send", Sig: "recv_reduce_send(in_dir, local, out_dir, piece_bytes=None, prefetch=None)",
			Doc: "Receive a buffer from in_dir, combine it with local (the run's redop) and send the result on out_dir (MSCCL rrs)." + pieces + prefetch,
			Fn:  builtinFused(primitiveSpec{local: true, out: true})},
		{Name: "recv_reduce_copy", Sig: "recv_reduce_copy(in_dir, local, dst, final=False, piece_bytes=None, prefetch=None)",
			Doc: "Receive a buffer from in_dir, combine it with local and store the result into dst (MSCCL rrc; dst may be local)." + final + pieces + prefetch,
			Fn:  builtinFused(primitiveSpec{local: true, dst: true, finalParam: true})},
		{Name: "recv_reduce_copy_send", Sig: "recv_reduce_copy_send(in_dir, local, dst, out_dir, final=False, piece_bytes=None, prefetch=None)",
			Doc: "Receive a buffer from in_dir, combine it with local, store the result into dst and send it on out_dir (MSCCL rrcs; dst may be local)." + final + pieces + prefetch,
			Fn:  builtinFused(primitiveSpec{local: true, dst: true, out: true, finalParam: true})},
		{Name: "prefetch", Sig: "prefetch(local, piece_bytes=None)",
			Doc: "Start loading the first n_slots pieces of local, the local operand of a fused primitive called later, so that its first pieces are ready when it starts (the next step of a pipeline). The loads are used by the first primitive whose local operand begins with the same pieces; a write to local before that discards them.",
			Fn:  builtinPrefetch},
		{Name: "recv_copy", Sig: "recv_copy(in_dir, dst, piece_bytes=None, prefetch=None)",
			Doc: "Receive a buffer from in_dir into dst the way the fused primitives do: each piece is loaded from its slot (the credit returns at once when the rings are in this PE's TCM) and stored into dst, and the call returns while the last stores finish (later reads of dst wait for them; a later write into dst is a WriteWriteHazard until tl.flush()). tl.recv(dir, dst=) instead copies every slot by DMA and returns when the copies are done (MSCCL r)." + pieces + prefetch,
			Fn:  builtinFused(primitiveSpec{dst: true})},
		{Name: "recv_copy_send", Sig: "recv_copy_send(in_dir, dst, out_dir, piece_bytes=None, prefetch=None)",
			Doc: "Receive a buffer from in_dir, store it into dst and send it on out_dir (MSCCL rcs)." + pieces + prefetch,
			Fn:  builtinFused(primitiveSpec{dst: true, out: true})},
	}
}

func builtinPrefetch(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var local PtrArg
	var pieceV starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kw, "local", &local, "piece_bytes?", &pieceV); err != nil {
		return nil, err
	}
	p, err := local.Ptr(b.Name(), "local")
	if err != nil {
		return nil, err
	}
	piece, err := k.pieceBytes(b.Name(), pieceV)
	if err != nil {
		return nil, err
	}
	return starlark.None, k.Prefetch(b.Name(), &p.View, piece)
}

// scalar is t op s, costed and logged like a tile-by-scalar expression.
func (t *Tile) scalar(op dtype.Op, f float64, i int64, right bool) (starlark.Value, error) {
	out, err := t.k.Scalar(&t.Tile, op, f, i, right, nil)
	if err != nil {
		return nil, fmt.Errorf("Tile %s: %w", op, err)
	}
	return &Tile{Tile: out, k: t.k}, nil
}
