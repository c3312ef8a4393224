package dtype

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"

	"github.com/x448/float16"
)

var le = binary.LittleEndian

// Loads and stores of one element at the start of b. They are small enough
// to be inlined into the element loops.

func ldF32(b []byte) float32     { return math.Float32frombits(le.Uint32(b)) }
func stF32(b []byte, v float32)  { le.PutUint32(b, math.Float32bits(v)) }
func ldF64(b []byte) float64     { return math.Float64frombits(le.Uint64(b)) }
func stF64(b []byte, v float64)  { le.PutUint64(b, math.Float64bits(v)) }
func ldF16(b []byte) float32     { return float16.Frombits(le.Uint16(b)).Float32() }
func stF16(b []byte, v float32)  { le.PutUint16(b, float16.Fromfloat32(v).Bits()) }
func ldBF16(b []byte) float32    { return bf16ToF32(le.Uint16(b)) }
func stBF16(b []byte, v float32) { le.PutUint16(b, bf16FromF32(v)) }
func ldI32(b []byte) int32       { return int32(le.Uint32(b)) }
func stI32(b []byte, v int32)    { le.PutUint32(b, uint32(v)) }
func ldI64(b []byte) int64       { return int64(le.Uint64(b)) }
func stI64(b []byte, v int64)    { le.PutUint64(b, uint64(v)) }

// bf16ToF32 widens a bfloat16 bit pattern; every bf16 value is a float32.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// bf16FromF32 rounds f to bfloat16, to nearest with ties to even. A NaN
// keeps its sign and top payload bits and gets the quiet bit, so a NaN whose
// payload lives only in the low half does not turn into an infinity.
func bf16FromF32(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x0040
	}
	// Adding 0x7fff plus the lowest kept bit rounds half to even; a carry
	// out of the significand bumps the exponent, up to infinity, as it should.
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// f32Odd rounds v to float32 with round-to-odd: an inexact result is
// truncated toward zero and gets its lowest significand bit set. Rounding
// that value to nearest-even at 16 bits gives the correctly rounded 16-bit
// result, whereas rounding v to float32 to nearest first could create a false
// tie (double rounding).
func f32Odd(v float64) float32 {
	f := float32(v)
	if float64(f) == v || v != v {
		return f
	}
	if math.Abs(float64(f)) > math.Abs(v) {
		f = math.Nextafter32(f, 0) // also turns an overflowed ±Inf into ±MaxFloat32
	}
	return math.Float32frombits(math.Float32bits(f) | 1)
}

// i64Odd converts v to float32 with round-to-odd, for the same reason as
// f32Odd.
func i64Odd(v int64) float32 {
	u := uint64(v)
	if v < 0 {
		u = -u // also right for MinInt64: 2^63 as uint64
	}
	var f float32
	if n := bits.Len64(u); n > 24 {
		sh := n - 24
		m := u >> sh
		if u&(1<<sh-1) != 0 {
			m |= 1
		}
		f = float32(math.Ldexp(float64(m), sh)) // m has 24 bits: exact
	} else {
		f = float32(u) // exact
	}
	if v < 0 {
		f = -f
	}
	return f
}

// Float-to-integer conversions: truncate toward zero, saturate, NaN → 0.

func satI64(v float64) int64 {
	switch {
	case v != v:
		return 0
	case v >= 0x1p63:
		return math.MaxInt64
	case v <= -0x1p63:
		return math.MinInt64
	}
	return int64(v)
}

func satI32(v float64) int32 {
	switch {
	case v != v:
		return 0
	case v >= math.MaxInt32:
		return math.MaxInt32
	case v <= math.MinInt32:
		return math.MinInt32
	}
	return int32(v)
}

func satU8(v float64) uint8 {
	switch {
	case v != v, v <= 0:
		return 0
	case v >= math.MaxUint8:
		return math.MaxUint8
	}
	return uint8(v)
}

// Get returns element i of b as a float64. Float values are exact; integers
// are exact up to 2^53 in magnitude and rounded to nearest beyond.
func Get(d DType, b []byte, i int) float64 {
	switch d {
	case F32:
		return float64(ldF32(b[4*i:]))
	case F16:
		return float64(ldF16(b[2*i:]))
	case BF16:
		return float64(ldBF16(b[2*i:]))
	case F64:
		return ldF64(b[8*i:])
	case I32:
		return float64(ldI32(b[4*i:]))
	case I64:
		return float64(ldI64(b[8*i:]))
	case U8:
		return float64(b[i])
	}
	panic(badDType(d))
}

// GetInt returns element i of b as an int64. Integers are exact; floats are
// truncated toward zero and saturated, NaN gives 0.
func GetInt(d DType, b []byte, i int) int64 {
	switch d {
	case I32:
		return int64(ldI32(b[4*i:]))
	case I64:
		return ldI64(b[8*i:])
	case U8:
		return int64(b[i])
	}
	return satI64(Get(d, b, i))
}

// Put stores v as element i of b with d's conversion: floats round to
// nearest even (correctly, also for f16/bf16), integers truncate toward zero
// and saturate at the dtype range, NaN stores 0.
func Put(d DType, b []byte, i int, v float64) {
	switch d {
	case F32:
		stF32(b[4*i:], float32(v))
	case F16:
		le.PutUint16(b[2*i:], float16.Fromfloat32(f32Odd(v)).Bits())
	case BF16:
		le.PutUint16(b[2*i:], bf16FromF32(f32Odd(v)))
	case F64:
		stF64(b[8*i:], v)
	case I32:
		stI32(b[4*i:], satI32(v))
	case I64:
		stI64(b[8*i:], satI64(v))
	case U8:
		b[i] = satU8(v)
	default:
		panic(badDType(d))
	}
}

// PutInt stores v as element i of b. Integer dtypes keep the low bits
// (two's complement wrap, as a C cast); float dtypes round to nearest even,
// correctly also for int64 → f32/f16/bf16.
func PutInt(d DType, b []byte, i int, v int64) {
	switch d {
	case F32:
		stF32(b[4*i:], float32(v)) // Go converts int64 → float32 in one rounding
	case F16:
		le.PutUint16(b[2*i:], float16.Fromfloat32(i64Odd(v)).Bits())
	case BF16:
		le.PutUint16(b[2*i:], bf16FromF32(i64Odd(v)))
	case F64:
		stF64(b[8*i:], float64(v))
	case I32:
		stI32(b[4*i:], int32(v))
	case I64:
		stI64(b[8*i:], v)
	case U8:
		b[i] = uint8(v)
	default:
		panic(badDType(d))
	}
}

// Format returns element i of b as text: integers in decimal, floats in
// strconv's 'g' format with the fewest digits that read back to the same
// value of d (so an f16 0.1 prints "0.1", not "0.0999755859375"). NaN and
// infinities print as "NaN", "+Inf" and "-Inf".
func Format(d DType, b []byte, i int) string {
	switch d {
	case F32:
		return strconv.FormatFloat(float64(ldF32(b[4*i:])), 'g', -1, 32)
	case F64:
		return strconv.FormatFloat(ldF64(b[8*i:]), 'g', -1, 64)
	case F16, BF16:
		return format16(d, le.Uint16(b[2*i:]))
	case I32, I64, U8:
		return strconv.FormatInt(GetInt(d, b, i), 10)
	}
	panic(badDType(d))
}

// format16 finds the shortest decimal that rounds back to the 16-bit pattern
// h; strconv has no 16-bit shortest mode. Five significant digits always
// suffice for f16 (four for bf16).
func format16(d DType, h uint16) string {
	var v float64
	var buf [2]byte
	le.PutUint16(buf[:], h)
	v = Get(d, buf[:], 0)
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	for digits := 1; digits < 17; digits++ {
		w, err := strconv.ParseFloat(strconv.FormatFloat(v, 'e', digits-1, 64), 64)
		if err != nil {
			break
		}
		Put(d, buf[:], 0, w)
		if le.Uint16(buf[:]) == h {
			// Print w in the same style as the f32/f64 shortest output;
			// w's shortest float64 digits are the ones just found.
			return strconv.FormatFloat(w, 'g', -1, 64)
		}
	}
	return strconv.FormatFloat(v, 'g', -1, 64) // not reached: v itself reads back
}
