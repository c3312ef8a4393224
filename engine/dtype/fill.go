package dtype

import "math"

// splitmix64 step constants (Steele, Lea, Flood 2014). The generator is
// written out here so that test data is identical across Go releases.
const (
	smGamma = 0x9e3779b97f4a7c15
	smMul1  = 0xbf58476d1ce4e5b9
	smMul2  = 0x94d049bb133111eb
)

// k·smGamma modulo 2^64: the states k elements on.
const (
	smGamma2 = 2 * smGamma & (1<<64 - 1)
	smGamma3 = 3 * smGamma & (1<<64 - 1)
	smGamma4 = 4 * smGamma & (1<<64 - 1)
)

func smMix(z uint64) uint64 {
	z = (z ^ z>>30) * smMul1
	z = (z ^ z>>27) * smMul2
	return z ^ z>>31
}

// fillGridExp gives, per float dtype, the exponent e of Fill's value grid
// k·2^-e: e = p - 6 for a p-bit significand, so that every partial sum of up
// to 64 values (|s| ≤ 64 = 2^6) is a multiple of 2^-e below 2^(p-e) in
// magnitude, hence exactly representable.
var fillGridExp = [...]int{F32: fillExpF32, F16: 11 - 6, BF16: 8 - 6, F64: 53 - 6}

// fillExpF32 is f32's grid exponent, a constant for Fill's f32 loop (a
// constant shift is one instruction; a variable one needs range checks).
const fillExpF32 = 24 - 6

// Fill writes deterministic pseudo-random test data for (seed, rank) into
// the len(b)/d.Size() elements of b. Element i depends only on (seed, rank,
// i, d), so a longer buffer extends a shorter one.
//
// Values:
//
//   - floats: k·2^-e with k uniform in [-2^e, 2^e), i.e. uniform on a grid in
//     [-1, 1), with e = 18 (f32), 5 (f16), 2 (bf16), 47 (f64). Every partial
//     sum of up to 64 such values is exact in the dtype, so a sum over up to
//     64 ranks gives the same bits in any order and association; only avg
//     and prod involve rounding. bf16 therefore has only 8 distinct values
//     (-1, -0.75, ..., 0.75) and f16 64.
//   - i32, i64: odd integers uniform in [-15, 15] (16 values). Sums over 64
//     ranks stay within ±960; products wrap, but odd numbers are units
//     modulo 2^n, so a product never collapses to 0 and a missing or extra
//     factor other than 1 always changes it. Wrapped sums and products do
//     not depend on the order.
//   - u8: odd integers uniform in [1, 15] (8 values); sums of up to 17 ranks
//     fit, larger sums wrap modulo 256 (order independent).
//
// The generator is splitmix64 on a stream chosen by mixing seed and rank.
func Fill(d DType, b []byte, seed uint64, rank int) {
	sz := d.Size()
	if sz == 0 {
		panic(badDType(d))
	}
	n := len(b) / sz
	state := smMix(smMix(seed) + uint64(rank)*smGamma + 1)
	next := func() uint64 {
		state += smGamma
		return smMix(state)
	}
	if d.IsFloat() {
		e := fillGridExp[d]
		scale := math.Ldexp(1, -e)
		if d == F32 { // the common case, without Put's per-element dispatch
			if v, ok := f32View(b); ok {
				fillF32(v, state)
				return
			}
			for i := range n {
				k := int64(next()>>(63-e)) - 1<<e
				stF32(b[4*i:], float32(float64(k)*scale))
			}
			return
		}
		for i := range n {
			k := int64(next()>>(63-e)) - 1<<e // top e+1 bits
			Put(d, b, i, float64(k)*scale)    // exact
		}
		return
	}
	switch d {
	case I32:
		for i := range n {
			stI32(b[4*i:], int32(next()>>60)*2-15)
		}
	case I64:
		for i := range n {
			stI64(b[8*i:], int64(next()>>60)*2-15)
		}
	case U8:
		for i := range n {
			b[i] = uint8(next()>>61)*2 + 1
		}
	}
}

// fillF32 is Fill's f32 loop on a view of the buffer, state the stream's
// state before element 0. It fills four elements per iteration (each
// depends only on its own state, so their multiplies overlap) and reads
// only the top 19 bits of smMix: its last step, z ^ z>>31, leaves those
// as they are (z>>31 < 2^33), so it is left out.
func fillF32(v []float32, state uint64) {
	i := 0
	for ; i+4 <= len(v); i += 4 {
		w := v[i : i+4 : i+4]
		w[0] = f32Grid(state + smGamma)
		w[1] = f32Grid(state + smGamma2)
		w[2] = f32Grid(state + smGamma3)
		w[3] = f32Grid(state + smGamma4)
		state += smGamma4
	}
	for ; i < len(v); i++ {
		state += smGamma
		v[i] = f32Grid(state)
	}
}

// f32Grid is the f32 Fill value of state z: k·2^-18 with k the top 19
// bits of smMix(z) less 2^18. k has at most 19 bits and the scale is a
// power of two: the float32 product is exact, the same value as Put's.
func f32Grid(z uint64) float32 {
	return float32(f32GridK(z)) * (1.0 / (1 << fillExpF32))
}

// FillValue sets every element of b (len(b)/d.Size() of them) to v,
// converted as Put does.
func FillValue(d DType, b []byte, v float64) {
	sz := d.Size()
	if sz == 0 {
		panic(badDType(d))
	}
	n := len(b) - len(b)%sz
	if n == 0 {
		return
	}
	Put(d, b, 0, v)
	// Double the filled prefix up to a block that stays in the cache, then
	// repeat that block: doubling all the way would read back megabytes
	// of a large buffer (the sentinel of every recv buffer) from memory.
	k := sz
	for ; k < n && k < fillValueBlock; k *= 2 {
		copy(b[k:n], b[:k])
	}
	for blk := k; k < n; k += blk {
		copy(b[k:n], b[:blk])
	}
}

// fillValueBlock is the prefix FillValue repeats (a multiple of every
// element size once doubled up to it).
const fillValueBlock = 4096
