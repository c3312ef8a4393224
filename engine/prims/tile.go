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
