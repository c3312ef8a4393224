package prims

import (
	"kernbench/engine/dtype"
	"kernbench/engine/sim"
)

// Tile is a tile's value on the machine: Count elements of DT, their
// bytes (nil under timing-only runs, which move no bytes), when they are
// ready, and the tile's name in the op_log's dataflow (0 when no log is
// kept). starlark/tl's Tile is this value (its first field) and the
// kernel that made it.
type Tile struct {
	DT    dtype.DType
	Count int64
	Data  []byte
	Ready sim.Time
	ID    int64
}

// NBytes is the size of the tile's elements (whether or not Data holds
// them).
func (t *Tile) NBytes() int64 { return t.Count * int64(t.DT.Size()) }

// ZeroElement is the index of t's first zero element, or -1 (also when t
// holds no bytes: a timing-only tile).
func (t *Tile) ZeroElement() int {
	for e := range len(t.Data) / t.DT.Size() {
		if dtype.GetInt(t.DT, t.Data, e) == 0 {
			return e
		}
	}
	return -1
}

// CheckCombine is the error of combining tiles a and b elementwise with
// op (what names the operation), or nil: their dtypes and counts must
// agree, and an integer division must have no zero divisor, which a
// timing-only run (timingOnly), keeping no values to tell, refuses to
// guess so that the two runs never end differently.
func CheckCombine(op dtype.Op, a, b *Tile, what string, timingOnly bool) error {
	if a.DT != b.DT {
		return errorf(KindDtypeMismatch, "%s: dtypes differ (%s and %s)", what, a.DT, b.DT)
	}
	if a.Count != b.Count {
		return errorf(KindOutOfBounds, "%s: counts differ (%d and %d)", what, a.Count, b.Count)
	}
	if op == dtype.Div && !a.DT.IsFloat() {
		if timingOnly {
			return errorf(KindTimingOnly, "%s: an integer Tile divided by a Tile fails when an element of the divisor is 0, and a timing-only run keeps no values to tell: run without --timing-only, or divide by a scalar", what)
		}
		if e := b.ZeroElement(); e >= 0 {
			return errorf(KindZeroDivision, "%s: integer division by zero: the divisor Tile is 0 (element %d)", what, e)
		}
	}
	return nil
}
