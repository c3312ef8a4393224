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
