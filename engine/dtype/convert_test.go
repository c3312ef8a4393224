package dtype

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConvert(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name   string
		sd, dd DType
		in     []float64 // integer sources hold integral values
		want   []float64
	}{
		{"f32 to i32 truncates and saturates", F32, I32,
			[]float64{2.9, -2.9, 3e9, -3e9, nan, -inf, 0.5},
			[]float64{2, -2, math.MaxInt32, math.MinInt32, 0, math.MinInt32, 0}},
		{"f64 to u8 saturates", F64, U8,
			[]float64{-1, 255.9, 256, 1e300, 17.5, nan},
			[]float64{0, 255, 255, 255, 17, 0}},
		{"f64 to i64 saturates", F64, I64,
			[]float64{1e19, -1e19, -0x1p63, 123.99},
			[]float64{math.MaxInt64, math.MinInt64, math.MinInt64, 123}},
		{"bf16 to i32", BF16, I32, []float64{-3.5, 1e10}, []float64{-3, math.MaxInt32}},
		{"i32 to u8 wraps", I32, U8, []float64{-1, 256, 300}, []float64{255, 0, 44}},
		{"u8 to i32", U8, I32, []float64{255, 0}, []float64{255, 0}},
		{"i32 to f32 rounds", I32, F32, []float64{1<<24 + 1, 1<<24 + 3, -7}, []float64{1 << 24, 1<<24 + 4, -7}},
		{"i32 to f16 rounds and overflows", I32, F16, []float64{2049, 70000, -70000}, []float64{2048, inf, -inf}},
		{"f32 to f16", F32, F16, []float64{0.1, 1e5, 1e-8, nan}, []float64{0.0999755859375, inf, 0, nan}},
		{"f16 to bf16 rounds", F16, BF16, []float64{1 + 0x1p-10, 1 + 0x1p-7 + 0x1p-8, 65504}, []float64{1, 1 + 0x1p-6, 65536}},
		{"bf16 to f16 overflow and subnormal", BF16, F16, []float64{1e10, 0x1p-20, nan}, []float64{inf, 0x1p-20, nan}},
		{"f64 to bf16 without double rounding", F64, BF16, []float64{1 + 0x1p-8 + 0x1p-40}, []float64{1 + 0x1p-7}},
		{"f64 to f32", F64, F32, []float64{0.1, 1e39}, []float64{float64(float32(0.1)), inf}},
		{"f32 to f64 exact", F32, F64, []float64{0.1, -inf}, []float64{float64(float32(0.1)), -inf}},
		{"f16 to f32 exact", F16, F32, []float64{0x1p-24, -65504}, []float64{0x1p-24, -65504}},
		{"bf16 to f32 exact", BF16, F32, []float64{0x1p-133, 3}, []float64{0x1p-133, 3}},
		{"f32 to bf16", F32, BF16, []float64{1 + 0x1p-8}, []float64{1}},
	}
	for _, tt := range tests {
		src := enc(tt.sd, tt.in...)
		dst := make([]byte, len(tt.in)*tt.dd.Size())
		Convert(dst, tt.dd, src, tt.sd)
		if diff := cmp.Diff(tt.want, dec(tt.dd, dst), equateNaN); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestConvertI64Exact(t *testing.T) {
	src := make([]byte, 8*3)
	PutInt(I64, src, 0, math.MaxInt64)
	PutInt(I64, src, 1, 1<<40+1<<32+1)
	PutInt(I64, src, 2, -5)
	dst := make([]byte, 4*3)
	Convert(dst, I32, src, I64)
	if got := []int64{GetInt(I32, dst, 0), GetInt(I32, dst, 1), GetInt(I32, dst, 2)}; !cmp.Equal(got, []int64{-1, 1, -5}) {
		t.Errorf("i64 to i32 = %v, want wrapped [-1 1 -5]", got)
	}
	b16 := make([]byte, 2*3)
	Convert(b16, BF16, src, I64)
	if got := Get(BF16, b16, 1); got != 1<<40+1<<33 {
		t.Errorf("i64 to bf16 = %v, want %v (correct rounding)", got, float64(1<<40+1<<33))
	}
}

// Convert's fast paths agree with the element-by-element definition, and
// converting through f64 and back is the identity on Fill data.
func TestConvertAllPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const n = 500
	for _, sd := range All() {
		src := randomOperands(rng, sd, n)
		for _, dd := range All() {
			got := make([]byte, n*dd.Size())
			Convert(got, dd, src, sd)
			want := make([]byte, n*dd.Size())
			for i := range n {
				if sd.IsFloat() {
					Put(dd, want, i, Get(sd, src, i))
				} else {
					PutInt(dd, want, i, GetInt(sd, src, i))
				}
			}
			if diff := cmp.Diff(dec(dd, want), dec(dd, got), equateNaN); diff != "" {
				t.Errorf("Convert %v to %v (-want +got):\n%s", sd, dd, diff)
			}
		}
		fill := make([]byte, n*sd.Size())
		Fill(sd, fill, 1, 0)
		wide := make([]byte, n*8)
		Convert(wide, F64, fill, sd)
		back := make([]byte, len(fill))
		Convert(back, sd, wide, F64)
		if !cmp.Equal(fill, back) {
			t.Errorf("%v -> f64 -> %v is not the identity on Fill data", sd, sd)
		}
	}
	mustPanic(t, "dtype.Convert: src has 4 bytes, want at least 8", func() { Convert(make([]byte, 8), F32, make([]byte, 4), F32) })
	mustPanic(t, "invalid dtype(0)", func() { Convert(make([]byte, 8), 0, make([]byte, 8), F32) })
}
