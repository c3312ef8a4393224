// Package dtype interprets the raw little-endian bytes of simulated memory as
// typed elements, and does the element arithmetic of the simulated
// accelerator.
//
// What lives here:
//
//   - DType, the element types a kernel can name (f32 f16 bf16 f64 i32 i64
//     u8), with Parse for user-facing names;
//   - Op, the elementwise binary operations of tiles and tl.reduce, and
//     RedOp, the NCCL reductions (sum prod max min avg);
//   - the elementwise kernels Binary, BinaryScalar and Convert, which run on
//     the simulator's hot path and therefore never allocate and keep the
//     dtype (and, for Binary, the op) switch outside the element loop;
//   - element access (Get, GetInt, Put, PutInt, Format);
//   - test data and checking: Fill, FillValue, the reference Reduce, and
//     Tolerance/CountWrong, which decide whether a simulated collective
//     produced the right numbers.
//
// Semantics in one place:
//
//   - Floating point follows IEEE 754 with round-to-nearest-even. f16 and
//     bf16 arithmetic is done in float32 and rounded once to the 16-bit
//     format; float32 has more than 2p+2 bits for both formats, so this gives
//     the correctly rounded 16-bit result. f16 conversion uses
//     github.com/x448/float16; bf16 is converted here. Conversions from
//     float64 or int64 to f16/bf16 are correctly rounded too (they go through
//     a round-to-odd float32, avoiding double rounding). NaN stays NaN.
//   - Max and Min propagate NaN and order -0 below +0 (Go's builtin max/min).
//   - Integer arithmetic wraps at the dtype width; integer division truncates
//     toward zero and division by zero yields 0 (the simulated hardware does
//     not trap). Float-to-integer conversions truncate toward zero and
//     saturate at the dtype range, NaN becomes 0; integer-to-integer
//     conversions wrap.
//
// Buffers are []byte; element counts come from the destination length
// divided by the element size (a trailing partial element is ignored). A
// destination may alias a source exactly (same start), but must not partially
// overlap it. Invalid DType or Op values are programming errors and panic.
//
// The package is pure computation: it imports only the standard library and
// github.com/x448/float16, keeps no global mutable state and uses its own
// seeded PRNG (splitmix64) so that test data never depends on the Go release.
package dtype
