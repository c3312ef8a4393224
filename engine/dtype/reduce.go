package dtype

import (
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
		_ = in[:n*sz] // fail before writing anything
	}
	if d.IsFloat() {
		for i := range n {
			var acc float64
			switch r {
			case Sum, Avg:
				acc = sumAt(d, inputs, i)
				if r == Avg {
					acc /= float64(p)
				}
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

// sumAt returns the sum over ranks of element i, with Neumaier's
// compensated summation: for the f64 dtype a plain float64 sum would carry a
// rounding error as large as the simulated result's own, and Tolerance is
// meant to bound the latter.
func sumAt(d DType, inputs [][]byte, i int) float64 {
	s, c := 0.0, 0.0
	for _, in := range inputs {
		x := Get(d, in, i)
		t := s + x
		if math.Abs(s) >= math.Abs(x) {
			c += (s - t) + x
		} else {
			c += (x - t) + s
		}
		s = t
	}
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return s // the compensation would turn ±Inf into NaN
	}
	return s + c
}

// prodAt returns the product over ranks of element i, carrying the rounding
// error of each float64 multiplication (exact with FMA) along, for the same
// reason as sumAt.
func prodAt(d DType, inputs [][]byte, i int) float64 {
	h, l := 1.0, 0.0
	for _, in := range inputs {
		x := Get(d, in, i)
		t := h * x
		l = l*x + math.FMA(h, x, -t)
		h = t
	}
	if math.IsInf(h, 0) || math.IsNaN(h) || math.IsNaN(l) {
		return h
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
// Integers are exact: (0, 0). Max and Min never round: (0, 0). For Sum, Avg
// and Prod over p ranks, the simulated algorithm accumulates in the dtype,
// pairwise, in an order of its choosing; with u = 2^-p the unit roundoff of
// d (p = 24, 11, 8, 53 for f32, f16, bf16, f64) the bounds are
//
//	Sum:  abs = 2·u·ranks           rel = u·(2 + sqrt(ranks))
//	Avg:  abs = 2·u                 rel = u·(3 + sqrt(ranks))
//	Prod: abs = ranks·tiny          rel = 2·u·ranks
//
// where tiny is the smallest positive subnormal of d. The absolute terms
// assume inputs of magnitude at most about 1, as Fill produces: the rounding
// error of a sum with cancellation scales with the magnitude of the inputs,
// not of the result. Sum's bound is about eight standard deviations of the
// accumulated rounding error of a sequential (ring) sum of values uniform in
// [-1, 1), and at least twice the largest error seen in the package's tests
// over tree, ring and random orders; Avg's also covers dividing by the rank
// count at the end or multiplying every input by 1/ranks first. Prod's
// relative term is twice the rigorous first-order bound (ranks-1)·u; its
// absolute term absorbs gradual underflow. For f64 the reference itself is
// rounded in float64, which the same bounds cover.
func Tolerance(d DType, r RedOp, ranks int) (abs, rel float64) {
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
	}
	if !d.IsFloat() {
		for i := range m {
			if !bytesEqual(got[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz]) {
				note(i)
			}
		}
	} else {
		abs, rel := Tolerance(d, r, ranks)
		for i := range m {
			// Get is exact for floats; the dtype switch inside it is
			// predictable and this is not the hot path.
			if !floatClose(Get(d, got, i), Get(d, want, i), abs, rel) {
				note(i)
			}
		}
	}
	for i := m; i < n; i++ {
		note(i)
	}
	return wrong, first
}

func bytesEqual(a, b []byte) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

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
