package tl

import (
	"math/big"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"

	"kernbench/engine/dtype"
)

// Issue 13 (6): tl.full refuses values an integer dtype cannot hold
// instead of wrapping or saturating them.
func TestCheckIntValue(t *testing.T) {
	huge := starlark.MakeBigInt(new(big.Int).Lsh(big.NewInt(1), 70))
	for _, tc := range []struct {
		d    dtype.DType
		v    starlark.Value
		want string // "" = accepted
	}{
		{dtype.U8, starlark.MakeInt(255), ""},
		{dtype.U8, starlark.MakeInt(256), "tl.full: value 256 is outside the range of u8 [0, 255]"},
		{dtype.U8, starlark.MakeInt(-1), "tl.full: value -1 is outside the range of u8 [0, 255]"},
		{dtype.I32, starlark.MakeInt(-2147483648), ""},
		{dtype.I32, starlark.MakeInt64(2147483648), "tl.full: value 2147483648 is outside the range of i32 [-2147483648, 2147483647]"},
		{dtype.I64, starlark.MakeInt64(-1 << 63), ""},
		{dtype.I64, huge, "tl.full: value 1180591620717411303424 is outside the range of i64 [-9223372036854775808, 9223372036854775807]"},
		{dtype.I32, starlark.Float(3), ""},
		{dtype.I32, starlark.Float(1.5), "tl.full: value 1.5 is not an integer, and i32 holds integers"},
		{dtype.I64, starlark.Float(1e30), "tl.full: value 1e+30 is outside the range of i64 [-9223372036854775808, 9223372036854775807]"},
		{dtype.F32, huge, ""}, // floats round, as documented
	} {
		got := ""
		if err := checkIntValue("tl.full", tc.d, tc.v); err != nil {
			got = err.Error()
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("checkIntValue(%s, %v) (-want +got):\n%s", tc.d, tc.v, diff)
		}
	}
}
