package prims

import (
	"testing"

	"kernbench/engine/dtype"
)

// A tile's size is its elements', whether or not it holds their bytes
// (a timing-only tile has none).
func TestTileNBytes(t *testing.T) {
	tests := []struct {
		name string
		tile Tile
		want int64
	}{
		{"f32 with bytes", Tile{DT: dtype.F32, Count: 3, Data: make([]byte, 12)}, 12},
		{"f16 timing-only", Tile{DT: dtype.F16, Count: 5}, 10},
		{"empty", Tile{DT: dtype.F64}, 0},
	}
	for _, tt := range tests {
		if got := tt.tile.NBytes(); got != tt.want {
			t.Errorf("%s: NBytes() = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// Tiles combine elementwise when their dtypes and counts agree; an
// integer division needs a divisor without zeros, which a timing-only run
// cannot tell.
func TestCheckCombine(t *testing.T) {
	i32 := func(vs ...int64) *Tile {
		tl := &Tile{DT: dtype.I32, Count: int64(len(vs)), Data: make([]byte, 4*len(vs))}
		for e, v := range vs {
			dtype.PutInt(dtype.I32, tl.Data, e, v)
		}
		return tl
	}
	f32 := &Tile{DT: dtype.F32, Count: 2, Data: make([]byte, 8)}
	tests := []struct {
		name       string
		op         dtype.Op
		a, b       *Tile
		timingOnly bool
		want       string // "" for none
	}{
		{"sum", dtype.Add, i32(1, 2), i32(3, 4), false, ""},
		{"dtypes differ", dtype.Add, i32(1, 2), f32, false, "DtypeMismatch: Tile +: dtypes differ (i32 and f32)"},
		{"counts differ", dtype.Mul, i32(1, 2), i32(3), false, "OutOfBounds: Tile +: counts differ (2 and 1)"},
		{"integer division", dtype.Div, i32(4, 6), i32(2, 3), false, ""},
		{"by a zero element", dtype.Div, i32(4, 6), i32(2, 0), false, "ZeroDivision: Tile +: integer division by zero: the divisor Tile is 0 (element 1)"},
		{"timing-only integer division", dtype.Div, i32(4, 6), i32(2, 3), true,
			"TimingOnly: Tile +: an integer Tile divided by a Tile fails when an element of the divisor is 0, and a timing-only run keeps no values to tell: run without --timing-only, or divide by a scalar"},
		{"float division by zero", dtype.Div, f32, f32, false, ""},
	}
	for _, tt := range tests {
		err := CheckCombine(tt.op, tt.a, tt.b, "Tile +", tt.timingOnly)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
	if e := i32(1, 0, 0).ZeroElement(); e != 1 {
		t.Errorf("ZeroElement = %d, want 1", e)
	}
	if e := (&Tile{DT: dtype.I32, Count: 3}).ZeroElement(); e != -1 {
		t.Errorf("ZeroElement of a timing-only tile = %d, want -1", e)
	}
}
