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
		rest := inputs[1:]
		for k := 0; k < len(rest); k++ {
			in := rest[k]
			if d == F32 {
				if v, ok := f32View(in[4*lo : 4*(lo+m)]); ok {
					// Four or two inputs per pass when the next ones are
					// f32 views too: the same additions, in the same order.
					if k+3 < len(rest) {
						w, ok1 := f32View(rest[k+1][4*lo : 4*(lo+m)])
						x, ok2 := f32View(rest[k+2][4*lo : 4*(lo+m)])
						y, ok3 := f32View(rest[k+3][4*lo : 4*(lo+m)])
						if ok1 && ok2 && ok3 {
							twoSumBlock4(s[:m], c[:m], v, w, x, y)
							k += 3
							continue
						}
					}
					if k+1 < len(rest) {
						if w, ok := f32View(rest[k+1][4*lo : 4*(lo+m)]); ok {
							twoSumBlock2(s[:m], c[:m], v, w)
							k++
							continue
						}
					}
					twoSumBlock(s[:m], c[:m], v)
					continue
				}
			}
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
		// Which NaN a sum of NaNs yields depends on the order of the
		// operands the compiler picked for a loop: a NaN element is summed
		// again by the definition, so its bits are those of sumAt whichever
		// loop ran.
		for j := range m {
			if math.IsNaN(s[j]) {
				s[j] = sumAt(d, inputs, lo+j)
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
			s[j] = acc
		}
		encode(d, dst, lo, s[:m])
	}
}

// twoSumBlock adds x into s elementwise, accumulating each addition's
// rounding error into c, with Knuth's branch-free TwoSum. For finite
// operands whose sum does not overflow, TwoSum and the Fast2Sum of
// Neumaier's loop both compute the exact rounding error, so the bits are
// the same; with an infinity or NaN the sum is not finite, and the
// compensation is then ignored. f32 inputs (below 2^128, at most a few
// billion ranks) never overflow float64, so sumBlocks uses it for f32 only:
// the branch on |s| >= |x| mispredicts often on random data.
func twoSumBlock(s, c []float64, x []float32) {
	c, x = c[:len(s)], x[:len(s)]
	for j, a := range s {
		b := float64(x[j])
		t := a + b
		bv := t - a
		c[j] += (a - (t - bv)) + (b - bv)
		s[j] = t
	}
}

// twoSumBlock2 is twoSumBlock of x then of y, in one pass: s and c are
// loaded and stored once for both.
func twoSumBlock2(s, c []float64, x, y []float32) {
	c, x, y = c[:len(s)], x[:len(s)], y[:len(s)]
	for j, a := range s {
		b := float64(x[j])
		t := a + b
		bv := t - a
		cj := c[j] + ((a - (t - bv)) + (b - bv))
		a, b = t, float64(y[j])
		t = a + b
		bv = t - a
		c[j] = cj + ((a - (t - bv)) + (b - bv))
		s[j] = t
	}
}

// twoSumBlock4 is twoSumBlock of w, x, y and z in turn, in one pass.
func twoSumBlock4(s, c []float64, w, x, y, z []float32) {
	c, w, x, y, z = c[:len(s)], w[:len(s)], x[:len(s)], y[:len(s)], z[:len(s)]
	for j, a := range s {
		cj := c[j]
		b := float64(w[j])
		t := a + b
		bv := t - a
		cj += (a - (t - bv)) + (b - bv)
		a, b = t, float64(x[j])
		t = a + b
		bv = t - a
		cj += (a - (t - bv)) + (b - bv)
		a, b = t, float64(y[j])
		t = a + b
		bv = t - a
		cj += (a - (t - bv)) + (b - bv)
		a, b = t, float64(z[j])
		t = a + b
		bv = t - a
		c[j] = cj + ((a - (t - bv)) + (b - bv))
		s[j] = t
	}
}

// encode writes vals as elements [lo, lo+len(vals)) of b, as Put does.
func encode(d DType, b []byte, lo int, vals []float64) {
	if d == F32 {
		if v, ok := f32View(b[4*lo : 4*(lo+len(vals))]); ok {
			v = v[:len(vals)]
			for j, x := range vals {
				v[j] = float32(x)
			}
			return
		}
	}
	for j, x := range vals {
		Put(d, b, lo+j, x)
	}
}

// decode reads elements [lo, lo+len(out)) of b as float64.
func decode(d DType, b []byte, lo int, out []float64) {
	if d == F32 {
		if v, ok := f32View(b[4*lo : 4*(lo+len(out))]); ok {
			v = v[:len(out)]
			for j, x := range v {
				out[j] = float64(x)
			}
			return
		}
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
	abs, rel := Tolerance(d, r, ranks)
	// A block whose bytes are equal holds no wrong element (equal bits are
	// equal values, and two NaNs count as equal): the element loop runs
	// only where some bytes differ, which is rare.
	for lo := 0; lo < m; lo += cmpBlock {
		hi := min(lo+cmpBlock, m)
		if !bytes.Equal(got[lo*sz:hi*sz], want[lo*sz:hi*sz]) {
			eachWrongIn(d, abs, rel, got, want, lo, hi, note)
		}
	}
	for i := m; i < n; i++ {
		note(i)
	}
	return wrong, first
}

// cmpBlock is how many elements EachWrong compares as bytes at a time.
const cmpBlock = 1024

// eachWrongIn calls note with every wrong element of [lo, hi), in order.
func eachWrongIn(d DType, abs, rel float64, got, want []byte, lo, hi int, note func(i int)) {
	sz := d.Size()
	switch d {
	case F32:
		for i := lo; i < hi; i++ {
			g, w := ldF32(got[4*i:4*i+4]), ldF32(want[4*i:4*i+4])
			if g != w && !floatClose(float64(g), float64(w), abs, rel) {
				note(i)
			}
		}
	case F64:
		for i := lo; i < hi; i++ {
			g, w := ldF64(got[8*i:8*i+8]), ldF64(want[8*i:8*i+8])
			if g != w && !floatClose(g, w, abs, rel) {
				note(i)
			}
		}
	case F16, BF16:
		for i := lo; i < hi; i++ {
			if !floatClose(Get(d, got, i), Get(d, want, i), abs, rel) {
				note(i)
			}
		}
	default:
		for i := lo; i < hi; i++ {
			if !bytes.Equal(got[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz]) {
				note(i)
			}
		}
	}
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
