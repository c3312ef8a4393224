package dtype

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// enc encodes values as d's bytes: floats with Put, integers with PutInt.
func enc(d DType, vals ...float64) []byte {
	b := make([]byte, d.Size()*len(vals))
	for i, v := range vals {
		if d.IsFloat() {
			Put(d, b, i, v)
		} else {
			PutInt(d, b, i, int64(v))
		}
	}
	return b
}

// dec decodes all elements of b as float64 (exact for the test values).
func dec(d DType, b []byte) []float64 {
	out := make([]float64, len(b)/d.Size())
	for i := range out {
		out[i] = Get(d, b, i)
	}
	return out
}

// refOp is the slow reference for one element: floats computed in float64
// and rounded once by Put (float64 has more than 2p+2 bits for every
// narrower format, so this is the correctly rounded result); integers
// computed exactly with math/big and wrapped to the dtype width.
func refOp(op Op, d DType, dst []byte, i int, x, y []byte, xi, yi int) {
	if d.IsFloat() {
		a, b := Get(d, x, xi), Get(d, y, yi)
		var r float64
		switch op {
		case Add:
			r = a + b
		case Sub:
			r = a - b
		case Mul:
			r = a * b
		case Div:
			r = a / b
		case Max:
			r = max(a, b)
		case Min:
			r = min(a, b)
		}
		Put(d, dst, i, r)
		return
	}
	a, b := big.NewInt(GetInt(d, x, xi)), big.NewInt(GetInt(d, y, yi))
	r := new(big.Int)
	switch op {
	case Add:
		r.Add(a, b)
	case Sub:
		r.Sub(a, b)
	case Mul:
		r.Mul(a, b)
	case Div:
		if b.Sign() != 0 {
			r.Quo(a, b) // truncated division
		}
	case Max:
		r = a
		if b.Cmp(a) > 0 {
			r = b
		}
	case Min:
		r = a
		if b.Cmp(a) < 0 {
			r = b
		}
	}
	r.Mod(r, new(big.Int).Lsh(big.NewInt(1), 64))
	PutInt(d, dst, i, int64(r.Uint64()))
}

// randomOperands returns n elements of d mixing edge values and random ones.
func randomOperands(rng *rand.Rand, d DType, n int) []byte {
	b := make([]byte, n*d.Size())
	floatEdges := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, math.Inf(1), math.Inf(-1), math.NaN(),
		65504, -65504, 0x1p-24, 1e-30, 3e38, -3e38, 1e300}
	intEdges := []int64{0, 1, -1, 2, -2, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, 255, 128}
	for i := range n {
		switch {
		case d.IsFloat() && rng.IntN(4) == 0:
			Put(d, b, i, floatEdges[rng.IntN(len(floatEdges))])
		case d.IsFloat():
			Put(d, b, i, (rng.Float64()*2-1)*math.Ldexp(1, rng.IntN(20)-10))
		case rng.IntN(4) == 0:
			PutInt(d, b, i, intEdges[rng.IntN(len(intEdges))])
		default:
			PutInt(d, b, i, int64(rng.Uint64())>>rng.IntN(64))
		}
	}
	return b
}

func TestBinaryMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 3000
	for _, d := range All() {
		for op := Add; op <= Min; op++ {
			a, b := randomOperands(rng, d, n), randomOperands(rng, d, n)
			want := make([]byte, len(a))
			for i := range n {
				refOp(op, d, want, i, a, b, i, i)
			}
			got := make([]byte, len(a))
			Binary(op, d, got, a, b)
			if diff := cmp.Diff(dec(d, want), dec(d, got), equateNaN); diff != "" {
				t.Errorf("Binary(%v, %v) (-want +got):\n%s", op, d, diff)
			}
			if !d.IsFloat() && !cmp.Equal(want, got) {
				t.Errorf("Binary(%v, %v) bytes differ", op, d)
			}
		}
	}
}

func TestBinaryEdgeCases(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	negZero := math.Copysign(0, -1)
	tests := []struct {
		name    string
		op      Op
		d       DType
		a, b    []float64
		want    []float64
		signbit []bool // checked when set
	}{
		{"i32 div by zero is 0", Div, I32, []float64{7, -7, 0}, []float64{0, 0, 0}, []float64{0, 0, 0}, nil},
		{"i64 div by zero is 0", Div, I64, []float64{7, -7}, []float64{0, 0}, []float64{0, 0}, nil},
		{"u8 div by zero is 0", Div, U8, []float64{7, 0}, []float64{0, 0}, []float64{0, 0}, nil},
		{"i32 div truncates", Div, I32, []float64{-7, 7, -7}, []float64{2, -2, -2}, []float64{-3, -3, 3}, nil},
		{"i32 MinInt32/-1 wraps", Div, I32, []float64{math.MinInt32}, []float64{-1}, []float64{math.MinInt32}, nil},
		{"i32 add wraps", Add, I32, []float64{math.MaxInt32}, []float64{1}, []float64{math.MinInt32}, nil},
		{"i32 mul wraps", Mul, I32, []float64{65536}, []float64{65536}, []float64{0}, nil},
		{"u8 add wraps", Add, U8, []float64{250}, []float64{10}, []float64{4}, nil},
		{"u8 sub wraps", Sub, U8, []float64{3}, []float64{5}, []float64{254}, nil},
		{"u8 mul wraps", Mul, U8, []float64{16, 15}, []float64{16, 17}, []float64{0, 255}, nil},
		{"u8 max min", Max, U8, []float64{200, 3}, []float64{100, 4}, []float64{200, 4}, nil},
		{"bf16 add tie rounds to even (down)", Add, BF16, []float64{1}, []float64{0x1p-8}, []float64{1}, nil},
		{"bf16 add tie rounds to even (up)", Add, BF16, []float64{1 + 0x1p-7}, []float64{0x1p-8}, []float64{1 + 0x1p-6}, nil},
		{"bf16 above tie rounds up", Add, BF16, []float64{1}, []float64{0x1p-8 + 0x1p-15}, []float64{1 + 0x1p-7}, nil},
		{"bf16 nan propagates", Add, BF16, []float64{nan}, []float64{1}, []float64{nan}, nil},
		{"bf16 mul overflows to inf", Mul, BF16, []float64{3e38}, []float64{2}, []float64{inf}, nil},
		{"f16 add tie rounds to even", Add, F16, []float64{2048, 2050}, []float64{1, 1}, []float64{2048, 2052}, nil},
		{"f16 overflow", Add, F16, []float64{60000, 65504}, []float64{60000, 16}, []float64{inf, inf}, nil},
		{"f16 below overflow tie", Add, F16, []float64{65504}, []float64{15.99}, []float64{65504}, nil},
		{"f16 subnormal result", Mul, F16, []float64{0x1p-14}, []float64{0.5}, []float64{0x1p-15}, nil},
		{"f16 div by zero", Div, F16, []float64{1, -1, 0}, []float64{0, 0, 0}, []float64{inf, -inf, nan}, nil},
		{"f32 max propagates nan", Max, F32, []float64{nan, 1}, []float64{1, nan}, []float64{nan, nan}, nil},
		{"f64 min propagates nan", Min, F64, []float64{nan, 1}, []float64{1, nan}, []float64{nan, nan}, nil},
		{"f32 max of zeros is +0", Max, F32, []float64{negZero, 0}, []float64{0, negZero}, []float64{0, 0}, []bool{false, false}},
		{"f64 min of zeros is -0", Min, F64, []float64{negZero, 0}, []float64{0, negZero}, []float64{0, 0}, []bool{true, true}},
		{"f32 inf - inf", Sub, F32, []float64{inf}, []float64{inf}, []float64{nan}, nil},
	}
	for _, tt := range tests {
		dst := make([]byte, len(tt.a)*tt.d.Size())
		Binary(tt.op, tt.d, dst, enc(tt.d, tt.a...), enc(tt.d, tt.b...))
		got := dec(tt.d, dst)
		if diff := cmp.Diff(tt.want, got, equateNaN); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
		for i, s := range tt.signbit {
			if math.Signbit(got[i]) != s {
				t.Errorf("%s: element %d = %v, want signbit %v", tt.name, i, got[i], s)
			}
		}
	}
}

func TestBinaryAliasing(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const n = 257
	for _, d := range All() {
		for op := Add; op <= Min; op++ {
			a, b := randomOperands(rng, d, n), randomOperands(rng, d, n)
			want := make([]byte, len(a))
			Binary(op, d, want, a, b)
			wantSelf := make([]byte, len(a))
			Binary(op, d, wantSelf, a, a)

			dstA := append([]byte(nil), a...)
			Binary(op, d, dstA, dstA, b)
			dstB := append([]byte(nil), b...)
			Binary(op, d, dstB, a, dstB)
			dstAA := append([]byte(nil), a...)
			Binary(op, d, dstAA, dstAA, dstAA)
			for _, c := range []struct {
				name      string
				want, got []byte
			}{{"dst=a", want, dstA}, {"dst=b", want, dstB}, {"dst=a=b", wantSelf, dstAA}} {
				if diff := cmp.Diff(dec(d, c.want), dec(d, c.got), equateNaN); diff != "" {
					t.Errorf("%v %v %s (-want +got):\n%s", op, d, c.name, diff)
				}
			}
		}
	}
}

func TestBinaryLengths(t *testing.T) {
	// A trailing partial element of dst is left alone; operands may be longer.
	dst := []byte{9, 9, 9, 9, 9, 9, 9}
	a := enc(F32, 1, 2, 3)
	b := enc(F32, 10, 20, 30)
	Binary(Add, F32, dst, a, b)
	want := append(enc(F32, 11), 9, 9, 9)
	if diff := cmp.Diff(want, dst); diff != "" {
		t.Errorf("partial element (-want +got):\n%s", diff)
	}
	// A short operand panics before anything is written.
	dst = make([]byte, 8)
	mustPanic(t, "dtype.Binary: a has 4 bytes, want at least 8", func() { Binary(Add, F32, dst, a[:4], b) })
	if !cmp.Equal(dst, make([]byte, 8)) {
		t.Errorf("short operand: dst written before the panic: %v", dst)
	}
	mustPanic(t, "internal error: dtype: invalid op(0)", func() { Binary(0, F32, dst, dst, dst) })
	mustPanic(t, "internal error: dtype: invalid dtype(0)", func() { Binary(Add, 0, dst, dst, dst) })
	mustPanic(t, "internal error: dtype: invalid op(7)", func() { BinaryScalar(7, F32, dst, dst, 1, 1, false) })
	mustPanic(t, "internal error: dtype: invalid dtype(9)", func() { BinaryScalar(Add, 9, dst, dst, 1, 1, false) })
}

func TestBinaryScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	// 700 elements span several 512-byte chunks for every size.
	const n = 700
	scalars := []struct {
		f float64
		i int64
	}{{0.1, 3}, {-2.5, -2}, {0, 0}, {1e10, 1<<32 + 257}, {math.NaN(), math.MinInt64}}
	for _, d := range All() {
		for op := Add; op <= Min; op++ {
			for _, s := range scalars {
				for _, left := range []bool{false, true} {
					a := randomOperands(rng, d, n)
					full := make([]byte, len(a))
					if d.IsFloat() {
						FillValue(d, full, s.f)
					} else {
						for i := range n {
							PutInt(d, full, i, s.i)
						}
					}
					want := make([]byte, len(a))
					if left {
						Binary(op, d, want, full, a)
					} else {
						Binary(op, d, want, a, full)
					}
					got := make([]byte, len(a))
					BinaryScalar(op, d, got, a, s.f, s.i, left)
					if diff := cmp.Diff(dec(d, want), dec(d, got), equateNaN); diff != "" {
						t.Errorf("BinaryScalar(%v, %v, %v/%d, left=%v) (-want +got):\n%s", op, d, s.f, s.i, left, diff)
					}
					BinaryScalar(op, d, a, a, s.f, s.i, left) // in place
					if diff := cmp.Diff(dec(d, want), dec(d, a), equateNaN); diff != "" {
						t.Errorf("BinaryScalar in place (%v, %v, left=%v) (-want +got):\n%s", op, d, left, diff)
					}
				}
			}
		}
	}
}

func TestBinaryScalarConvertsScalar(t *testing.T) {
	tests := []struct {
		name  string
		op    Op
		d     DType
		a     float64
		s     float64
		si    int64
		left  bool
		want  float64
		isInt bool
	}{
		{"f16 scalar rounded to f16 first", Add, F16, 0, 0.1, 0, false, 0.0999755859375, false},
		{"bf16 scalar rounded to bf16 first", Mul, BF16, 1, 1.0 / 3, 0, false, 0.333984375, false},
		{"sub with scalar left", Sub, F32, 1, 10, 0, true, 9, false},
		{"div with scalar left", Div, F64, 4, 1, 0, true, 0.25, false},
		{"ints use si not s", Add, I32, 5, 100.7, 2, false, 7, true},
		{"u8 scalar wraps", Add, U8, 5, 0, 257, false, 6, true},
		{"i64 scalar left div", Div, I64, 3, 0, 10, true, 3, true},
		{"i32 div by zero scalar", Div, I32, 3, 0, 0, false, 0, true},
	}
	for _, tt := range tests {
		a := enc(tt.d, tt.a)
		dst := make([]byte, len(a))
		BinaryScalar(tt.op, tt.d, dst, a, tt.s, tt.si, tt.left)
		if got := Get(tt.d, dst, 0); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
