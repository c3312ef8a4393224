package dtype

import (
	"bytes"
	"fmt"
	"math"
)

// Reduce writes into dst (len(dst)/d.Size() elements) the reference result
// of reducing inputs over ranks: inputs[r] is rank r's buffer, each at least
// as long as dst.
//
// Floats are reduced in float64 and converted to d once; sums and products
// are compensated (Neumaier summation, FMA-based products), so the result is
// in practice the correctly rounded exact value. Avg divides the sum by the
// rank count. Max and Min propagate NaN.
//
// Integers are reduced in int64 with wrapping, which equals wrapping at the
// dtype width for sum, prod, max and min; Avg wraps the sum to the dtype
// width first and then divides by the rank count, truncating toward zero, as
// an algorithm accumulating in the dtype does.
func Reduce(r RedOp, d DType, dst []byte, inputs [][]byte) {
	if !r.Valid() {
		panic(fmt.Sprintf("internal error: dtype: Reduce with invalid %v", r))
	}
	sz := d.Size()
	if sz == 0 {
		panic(badDType(d))
	}
	p := len(inputs)
	if p == 0 {
		panic("internal error: dtype: Reduce with no inputs")
	}
	n := len(dst) / sz
	for _, in := range inputs {
		need("Reduce", "an input", in, n*sz)
	}
	if d.IsFloat() && (r == Sum || r == Avg) {
		sumBlocks(d, dst, inputs, n, r == Avg)
		return
	}
	if d.IsFloat() {
		for i := range n {
			var acc float64
			switch r {
			case Prod:
				acc = prodAt(d, inputs, i)
			case RMax:
				acc = Get(d, inputs[0], i)
				for _, in := range inputs[1:] {
					acc = max(acc, Get(d, in, i))
				}
			case RMin:
				acc = Get(d, inputs[0], i)
				for _, in := range inputs[1:] {
					acc = min(acc, Get(d, in, i))
				}
			}
			Put(d, dst, i, acc)
		}
		return
	}
	for i := range n {
		acc := GetInt(d, inputs[0], i)
		for _, in := range inputs[1:] {
			x := GetInt(d, in, i)
			switch r {
			case Sum, Avg:
				acc += x
			case Prod:
				acc *= x
			case RMax:
				acc = max(acc, x)
			case RMin:
				acc = min(acc, x)
			}
		}
		if r == Avg {
			acc = wrapInt(d, acc) / int64(p)
		}
		PutInt(d, dst, i, acc)
	}
}

// sumBlock is how many elements sumBlocks reduces at a time.
const sumBlock = 512

// sumBlocks is sumAt for elements [0, n) with the same arithmetic, block
// by block: each input is read sequentially for a block instead of every
// input once per element, which kept dozens of streams in flight and
// made the reference check of a large run slower than the run.
func sumBlocks(d DType, dst []byte, inputs [][]byte, n int, avg bool) {
	var s, c, x [sumBlock]float64
	for lo := 0; lo < n; lo += sumBlock {
		m := min(sumBlock, n-lo)
		decode(d, inputs[0], lo, s[:m])
		clear(c[:m])
		for _, in := range inputs[1:] {
			decode(d, in, lo, x[:m])
			for j := range m {
				t := s[j] + x[j]
				if math.Abs(s[j]) >= math.Abs(x[j]) {
					c[j] += (s[j] - t) + x[j]
				} else {
					c[j] += (x[j] - t) + s[j]
				}
				s[j] = t
			}
		}
		for j := range m {
			acc := s[j]
			if c[j] != 0 && !math.IsInf(acc, 0) && !math.IsNaN(acc) {
				acc += c[j]
			}
			if avg {
				acc /= float64(len(inputs))
			}
			Put(d, dst, lo+j, acc)
		}
	}
}

// decode reads elements [lo, lo+len(out)) of b as float64.
func decode(d DType, b []byte, lo int, out []float64) {
	if d == F32 {
		for j := range out {
			out[j] = float64(ldF32(b[4*(lo+j):]))
		}
		return
	}
	for j := range out {
		out[j] = Get(d, b, lo+j)
	}
}

// sumAt returns the sum over ranks of element i (sumBlocks computes it for
// whole buffers; this per-element form is its definition in tests), with Neumaier's
// compensated summation: for the f64 dtype a plain float64 sum would carry a
// rounding error as large as the simulated result's own, and Tolerance is
// meant to bound the latter.
func sumAt(d DType, inputs [][]byte, i int) float64 {
	s, c := Get(d, inputs[0], i), 0.0
	for _, in := range inputs[1:] {
		x := Get(d, in, i)
		t := s + x
		if math.Abs(s) >= math.Abs(x) {
			c += (s - t) + x
		} else {
			c += (x - t) + s
		}
		s = t
	}
	if c == 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return s // keeps -0, and ±Inf (which the compensation would turn into NaN)
	}
	return s + c
}

// prodAt returns the product over ranks of element i, carrying the rounding
// error of each float64 multiplication (exact with FMA) along, for the same
// reason as sumAt.
func prodAt(d DType, inputs [][]byte, i int) float64 {
	h, l := Get(d, inputs[0], i), 0.0
	for _, in := range inputs[1:] {
		x := Get(d, in, i)
		t := h * x
		l = l*x + math.FMA(h, x, -t)
		h = t
	}
	if l == 0 || math.IsInf(h, 0) || math.IsNaN(h) || math.IsNaN(l) {
		return h // keeps -0 and infinities
	}
	return h + l
}

// wrapInt reduces v to the value range of the integer dtype d.
func wrapInt(d DType, v int64) int64 {
	switch d {
	case I32:
		return int64(int32(v))
	case U8:
		return int64(uint8(v))
	}
	return v
}

// Tolerance returns the bounds (abs, rel) within which a simulated result
// got counts as equal to the reference want: |got-want| <= abs + rel·|want|.
// See CountWrong for NaN and infinities.
//
// Integers are exact: (0, 0), for every reduction (wrapping sums and
// products do not depend on the order). Max and Min never round: (0, 0).
// For Sum, Avg and Prod over p ranks the simulated algorithm accumulates in
// the dtype, pairwise, in an order of its choosing (ring, tree, ...). With u
// the unit roundoff of d (2^-11 f16, 2^-8 bf16, 2^-24 f32, 2^-53 f64):
//
//	Sum:  abs = 3·u·p   rel = u·(2 + 2·sqrt(p))
//	Avg:  abs = 4·u     rel = u·(3 + 2·sqrt(p))
//	Prod: abs = p·tiny  rel = 2·u·p
//
// where tiny is the smallest positive subnormal of d. The absolute terms
// assume inputs of magnitude at most about 1, as Fill produces: with
// cancellation, the rounding error of a sum scales with the inputs, not with
// the result. The sum bounds follow the statistics of accumulated rounding
// (the error of a p-term sum of values in [-1, 1) grows like u·p in absolute
// terms, that of same-signed values like u·sqrt(p) relative to the result);
// the constants are at least twice the largest error seen in this package's
// tests (ring, reversed, balanced-tree and random-tree orders; symmetric and
// same-signed data; up to 64 ranks). Avg also allows dividing the sum by p,
// multiplying it by 1/p, or scaling every input by 1/p before summing.
// Prod's relative term is twice the first-order worst case (p-1)·u; its
// absolute term absorbs gradual underflow.
//
// Fill data makes every sum of up to 64 ranks exact in any order, so Sum
// results on Fill data are in practice bit-exact; the bounds matter for
// Avg, Prod and other data. A rank count below 1 counts as 1.
func Tolerance(d DType, r RedOp, ranks int) (abs, rel float64) {
	if !r.Valid() {
		panic(fmt.Sprintf("internal error: dtype: Tolerance with invalid %v", r))
	}
	if !d.IsFloat() {
		return 0, 0
	}
	p := float64(max(ranks, 1))
	u := math.Ldexp(1, -mantBits[d])
	switch r {
	case Sum:
		return 3 * u * p, u * (2 + 2*math.Sqrt(p))
	case Avg:
		return 4 * u, u * (3 + 2*math.Sqrt(p))
	case Prod:
		return p * tinyFloat(d), 2 * u * p
	}
	return 0, 0
}

// tinyFloat returns the smallest positive subnormal of the float dtype d.
func tinyFloat(d DType) float64 {
	switch d {
	case F32:
		return math.SmallestNonzeroFloat32
	case F16:
		return 0x1p-24
	case BF16:
		return 0x1p-133
	}
	return math.SmallestNonzeroFloat64
}

// CountWrong compares got against want elementwise, for the len(want)/
// d.Size() elements of want, with the Tolerance for (d, r, ranks). It
// returns the number of wrong elements and the index of the first one, or
// -1. Elements missing from a short got count as wrong. Two NaNs are equal
// (whatever their payloads); a NaN or an infinity equals only itself;
// integers must match exactly.
func CountWrong(d DType, r RedOp, ranks int, got, want []byte) (wrong int, first int) {
	return EachWrong(d, r, ranks, got, want, nil)
}

// EachWrong is CountWrong calling each (when not nil) with the index of
// every wrong element, in increasing order.
func EachWrong(d DType, r RedOp, ranks int, got, want []byte, each func(i int)) (wrong int, first int) {
	sz := d.Size()
	if sz == 0 {
		panic(badDType(d))
	}
	n := len(want) / sz
	m := min(n, len(got)/sz)
	first = -1
	note := func(i int) {
		if first < 0 {
			first = i
		}
		wrong++
		if each != nil {
			each(i)
		}
	}
	if !d.IsFloat() {
		for i := range m {
			if !bytes.Equal(got[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz]) {
				note(i)
			}
		}
	} else {
		abs, rel := Tolerance(d, r, ranks)
		switch d {
		case F32:
			for i := range m {
				g, w := ldF32(got[4*i:4*i+4]), ldF32(want[4*i:4*i+4])
				if g != w && !floatClose(float64(g), float64(w), abs, rel) {
					note(i)
				}
			}
		case F64:
			for i := range m {
				g, w := ldF64(got[8*i:8*i+8]), ldF64(want[8*i:8*i+8])
				if g != w && !floatClose(g, w, abs, rel) {
					note(i)
				}
			}
		default:
			for i := range m {
				if !floatClose(Get(d, got, i), Get(d, want, i), abs, rel) {
					note(i)
				}
			}
		}
	}
	for i := m; i < n; i++ {
		note(i)
	}
	return wrong, first
}

// floatClose reports whether g is within tolerance of w. The loops test
// g != w first: floatClose is too large to inline, and most elements match.
func floatClose(g, w, abs, rel float64) bool {
	switch {
	case g == w:
		return true
	case math.IsNaN(g) || math.IsNaN(w):
		return math.IsNaN(g) && math.IsNaN(w)
	case math.IsInf(g, 0) || math.IsInf(w, 0):
		return false
	}
	return math.Abs(g-w) <= abs+rel*math.Abs(w)
}
