package prims

import (
	"fmt"

	"kernbench/engine/dtype"
	"kernbench/engine/oplog"
	"kernbench/engine/sim"
)

// Tile arithmetic as the machine does it: each result is costed on the
// PE's math unit (ready when the unit is done with it, without blocking
// the kernel) and recorded in the op_log.

// MathReady books n bytes of math on the PE's unit from t and returns
// when the result is ready.
func (k *Kernel) MathReady(t sim.Time, n int64) sim.Time {
	k.Counts.Math++
	return k.M.MathReady(k.PE, t, n)
}

// LogMath records a tile computed from a (and b, or a scalar) in the
// op_log; fill adds what the operation needs.
func (k *Kernel) LogMath(out *Tile, op string, a, b *Tile, fill func(*oplog.Record)) {
	l := k.M.LogOf(k.PE)
	if l == nil {
		return
	}
	out.ID = l.NewTile()
	r := &oplog.Record{Rank: k.Rank, Kind: oplog.KindMath, Name: "math", TStart: k.PE.Sim().Now(), TEnd: out.Ready,
		Op: op, TileOut: out.ID, DType: out.DT, Count: out.Count, NBytes: out.NBytes()}
	if a != nil {
		r.TileA = a.ID
	}
	if b != nil {
		r.TileB = b.ID
	}
	if fill != nil {
		fill(r)
	}
	if l.Witnessed() {
		r.Produced = out.Data
		if k.M.OriginOf != nil {
			r.Origin = k.M.OriginOf(k.PE.Sim())
		}
	}
	l.Add(r)
}

// LogConst records a tile made of constants (tl.zeros, tl.full).
func (k *Kernel) LogConst(t *Tile) {
	k.LogMath(t, "const", nil, nil, func(r *oplog.Record) { r.Data = append([]byte(nil), t.Data...) })
}

// NewData is the backing of a new tile of n bytes: nil when the machine
// moves no bytes.
func (k *Kernel) NewData(n int64) ([]byte, error) {
	if k.M.TimingOnly {
		return nil, nil
	}
	if err := k.noteAlloc(n); err != nil {
		return nil, err
	}
	return make([]byte, n), nil
}

// noteAlloc tells the root kernel's NoteAlloc of n bytes of a new tile,
// which may refuse them (the host-memory guard).
func (k *Kernel) noteAlloc(n int64) error {
	if note := k.root0().NoteAlloc; note != nil {
		return note(n)
	}
	return nil
}

// like is a tile of t's dtype and count whose bytes are buf when it is
// large enough (a fused primitive's recycled buffer), new ones otherwise
// (none under timing-only).
func (k *Kernel) like(t *Tile, buf []byte) (Tile, error) {
	out := Tile{DT: t.DT, Count: t.Count}
	if !k.M.TimingOnly {
		if n := t.NBytes(); int64(cap(buf)) >= n {
			out.Data = buf[:n]
		} else {
			if err := k.noteAlloc(n); err != nil {
				return out, err
			}
			out.Data = make([]byte, n)
		}
	}
	return out, nil
}

// Combine sets out to a op b, a new tile (backed by buf when it is large
// enough), costed on the math unit and logged. out is neither a nor b
// (its bytes are set before theirs are read); it is filled in place, as a
// fused primitive's piece keeps its tiles on its stack.
func (k *Kernel) Combine(out *Tile, op dtype.Op, a, b *Tile, what string, buf []byte) error {
	if a.DT != b.DT || a.Count != b.Count || op == dtype.Div { // (no call for a fused primitive's piece)
		if err := CheckCombine(op, a, b, what, k.M.TimingOnly); err != nil {
			return err
		}
	}
	v, err := k.like(a, buf)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	*out = v
	if out.Data != nil {
		dtype.Binary(op, a.DT, out.Data, a.Data, b.Data)
	}
	out.Ready = k.MathReady(max(a.Ready, b.Ready), out.NBytes())
	if k.M.LogOf(k.PE) != nil { // (op.String() is not free)
		k.LogMath(out, op.String(), a, b, nil)
	}
	return nil
}

// Scalar is t op the scalar (f, or i for an integer dtype; right: the
// scalar is the left operand), into a tile backed by buf when it is
// large enough (buf may be t's own bytes: the operation is elementwise).
func (k *Kernel) Scalar(t *Tile, op dtype.Op, f float64, i int64, right bool, buf []byte) (Tile, error) {
	out, err := k.like(t, buf)
	if err != nil {
		return out, err
	}
	if out.Data != nil {
		dtype.BinaryScalar(op, t.DT, out.Data, t.Data, f, i, right)
	}
	out.Ready = k.MathReady(t.Ready, out.NBytes())
	k.LogMath(&out, op.String(), t, nil, func(r *oplog.Record) { r.Scalar, r.ScalarI, r.Left = f, i, right })
	return out, nil
}

// Convert is t converted to dt.
func (k *Kernel) Convert(t *Tile, dt dtype.DType) (Tile, error) {
	data, err := k.NewData(t.Count * int64(dt.Size()))
	if err != nil {
		return Tile{}, err
	}
	out := Tile{DT: dt, Count: t.Count, Data: data}
	if out.Data != nil {
		dtype.Convert(out.Data, dt, t.Data, t.DT)
	}
	out.Ready = k.MathReady(t.Ready, out.NBytes())
	k.LogMath(&out, "convert", t, nil, func(r *oplog.Record) { r.DType, r.OutType, r.NBytes = t.DT, dt, out.NBytes() })
	return out, nil
}

// NewTile is a tile of count elements of d (zeros; no bytes under
// timing-only), ready now.
func (k *Kernel) NewTile(fn string, count int, d dtype.DType) (Tile, error) {
	if count < 0 {
		return Tile{}, fmt.Errorf("%s: count must be >= 0, got %d", fn, count)
	}
	if limit := k.PE.HBM.Capacity; int64(count) > limit/int64(d.Size()) {
		return Tile{}, errorf(KindOutOfMemory, "%s: %d × %s is larger than any memory of the PE (%d bytes)", fn, count, d, limit)
	}
	data, err := k.NewData(int64(count * d.Size()))
	if err != nil {
		return Tile{}, fmt.Errorf("%s: %w", fn, err)
	}
	return Tile{DT: d, Count: int64(count), Data: data, Ready: k.PE.Sim().Now()}, nil
}

// Fill sets every element of t to f, or to i exactly when exact (an
// integer dtype given an integer: full precision).
func (t *Tile) Fill(f float64, i int64, exact bool) {
	if !exact {
		dtype.FillValue(t.DT, t.Data, f)
		return
	}
	for e := range len(t.Data) / t.DT.Size() {
		dtype.PutInt(t.DT, t.Data, e, i)
	}
}
