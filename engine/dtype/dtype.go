package dtype

import (
	"fmt"
	"math"
	"strings"

	"kernbench/engine/spelling"
)

// DType is an element type. The zero value is invalid.
type DType uint8

// The element types, in the order All returns them.
const (
	F32  DType = iota + 1 // IEEE 754 binary32
	F16                   // IEEE 754 binary16
	BF16                  // bfloat16: the top half of a binary32
	F64                   // IEEE 754 binary64
	I32                   // two's complement 32-bit integer
	I64                   // two's complement 64-bit integer
	U8                    // unsigned 8-bit integer
)

var (
	shortNames = [...]string{F32: "f32", F16: "f16", BF16: "bf16", F64: "f64", I32: "i32", I64: "i64", U8: "u8"}
	longNames  = [...]string{F32: "float32", F16: "float16", BF16: "bfloat16", F64: "float64", I32: "int32", I64: "int64", U8: "uint8"}
	sizes      = [...]int{F32: 4, F16: 2, BF16: 2, F64: 8, I32: 4, I64: 8, U8: 1}
	// mantBits is the significand precision p (including the implicit bit)
	// of the float types; the unit roundoff is 2^-p.
	mantBits = [...]int{F32: 24, F16: 11, BF16: 8, F64: 53}
)

// All returns every valid DType: F32, F16, BF16, F64, I32, I64, U8.
func All() []DType { return []DType{F32, F16, BF16, F64, I32, I64, U8} }

// Valid reports whether d is one of the defined element types.
func (d DType) Valid() bool { return d >= F32 && d <= U8 }

// String returns the canonical short name ("f32", "bf16", ...), or
// "dtype(N)" for an invalid value.
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
	return shortNames[d]
}

// Size returns the number of bytes per element, or 0 for an invalid value.
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return sizes[d]
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	switch d {
	case F32, F16, BF16, F64:
		return true
	}
	return false
}

// IntRange is the values an integer type holds, lo to hi; ok is false
// for a floating-point type (or an invalid one).
func (d DType) IntRange() (lo, hi int64, ok bool) {
	switch d {
	case I32:
		return math.MinInt32, math.MaxInt32, true
	case I64:
		return math.MinInt64, math.MaxInt64, true
	case U8:
		return 0, math.MaxUint8, true
	}
	return 0, 0, false
}

// Parse returns the DType named s: a short name (f32 f16 bf16 f64 i32 i64
// u8) or its long alias (float32 float16 bfloat16 float64 int32 int64 uint8).
// Names are case sensitive.
func Parse(s string) (DType, error) {
	for _, d := range All() {
		if s == shortNames[d] || s == longNames[d] {
			return d, nil
		}
	}
	hint := ""
	if d, ok := otherSpellings[strings.ToLower(s)]; ok {
		hint = "; did you mean " + shortNames[d] + "?"
	}
	return 0, fmt.Errorf("unknown dtype %q: want one of %s (or %s)%s",
		s, strings.Join(shortNames[F32:], ", "), strings.Join(longNames[F32:], ", "), hint)
}

// otherSpellings are names users of NCCL (ncclFloat, ncclHalf, ncclDouble)
// and of other frameworks give the types, lower-cased, with the short
// names and long aliases in another case. Parse does not accept them (a
// type has one short name and one long one) but names the type they mean.
var otherSpellings = func() map[string]DType {
	m := map[string]DType{
		"float": F32, "half": F16, "double": F64, "bfloat": BF16, "int": I32,
		"fp32": F32, "fp16": F16, "fp64": F64, "bfp16": BF16,
	}
	for _, d := range All() {
		m[shortNames[d]], m[longNames[d]] = d, d
	}
	return m
}()

// Op is an elementwise binary operation. The zero value is invalid.
type Op uint8

// The elementwise operations.
const (
	Add Op = iota + 1
	Sub
	Mul
	Div
	Max
	Min
)

var opNames = [...]string{Add: "add", Sub: "sub", Mul: "mul", Div: "div", Max: "max", Min: "min"}

// Valid reports whether op is one of the defined operations.
func (op Op) Valid() bool { return op >= Add && op <= Min }

// String returns the op's name ("add", "sub", "mul", "div", "max", "min"),
// or "op(N)" for an invalid value.
func (op Op) String() string {
	if !op.Valid() {
		return fmt.Sprintf("op(%d)", uint8(op))
	}
	return opNames[op]
}

// ParseOp returns the Op named s (add sub mul div max min).
func ParseOp(s string) (Op, error) {
	for op := Add; op <= Min; op++ {
		if s == opNames[op] {
			return op, nil
		}
	}
	return 0, fmt.Errorf("unknown op %q: want one of %s", s, strings.Join(opNames[Add:], ", "))
}

// RedOp is an NCCL reduction. The zero value is invalid.
type RedOp uint8

// The reductions, named as in NCCL (ncclSum, ncclProd, ncclMax, ncclMin,
// ncclAvg). RMax and RMin carry an R so they do not clash with the Ops.
const (
	Sum RedOp = iota + 1
	Prod
	RMax
	RMin
	Avg
)

var redOpNames = [...]string{Sum: "sum", Prod: "prod", RMax: "max", RMin: "min", Avg: "avg"}

// Valid reports whether r is one of the defined reductions.
func (r RedOp) Valid() bool { return r >= Sum && r <= Avg }

// String returns the reduction's name ("sum", "prod", "max", "min", "avg"),
// or "redop(N)" for an invalid value.
func (r RedOp) String() string {
	if !r.Valid() {
		return fmt.Sprintf("redop(%d)", uint8(r))
	}
	return redOpNames[r]
}

// ParseRedOp returns the RedOp named s (sum prod max min avg).
func ParseRedOp(s string) (RedOp, error) {
	for r := Sum; r <= Avg; r++ {
		if s == redOpNames[r] {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown reduction %q: want one of %s%s", s, strings.Join(redOpNames[Sum:], ", "), spelling.Hint(s, redOpNames[Sum:]))
}

// Pairwise returns the elementwise Op that combines two partial results of
// the reduction: Sum→Add, Prod→Mul, RMax→Max, RMin→Min, and Avg→Add,
// because an average accumulates as a sum and is divided by the number of
// ranks once at the end.
func (r RedOp) Pairwise() Op {
	switch r {
	case Sum, Avg:
		return Add
	case Prod:
		return Mul
	case RMax:
		return Max
	case RMin:
		return Min
	}
	panic(fmt.Sprintf("internal error: dtype: Pairwise of invalid %v", r))
}

func badDType(d DType) string {
	return fmt.Sprintf("internal error: dtype: invalid %v", d)
}

func checkOp(op Op) {
	if !op.Valid() {
		panic(fmt.Sprintf("internal error: dtype: invalid %v", op))
	}
}

// need panics unless b holds at least n bytes. Re-slicing b[:n] alone would
// not catch a short slice that has spare capacity.
func need(fn, what string, b []byte, n int) {
	if len(b) < n {
		panic(fmt.Sprintf("internal error: dtype.%s: %s has %d bytes, want at least %d", fn, what, len(b), n))
	}
}
