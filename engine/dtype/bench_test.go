package dtype

import "testing"

// The benchmark suffix is the message size in bytes: the simulator reduces
// 1-4 KiB messages.

func benchBinary(b *testing.B, op Op, d DType, nbytes int) {
	x, y, dst := make([]byte, nbytes), make([]byte, nbytes), make([]byte, nbytes)
	Fill(d, x, 1, 0)
	Fill(d, y, 1, 1)
	if !d.IsFloat() && op == Div {
		FillValue(d, y, 3)
	}
	b.SetBytes(int64(nbytes))
	b.ReportAllocs()
	for b.Loop() {
		Binary(op, d, dst, x, y) // not in place: repeated products would underflow
	}
}

func BenchmarkBinaryAddF32_1024(b *testing.B)  { benchBinary(b, Add, F32, 1024) }
func BenchmarkBinaryAddF32_4096(b *testing.B)  { benchBinary(b, Add, F32, 4096) }
func BenchmarkBinaryAddF16_1024(b *testing.B)  { benchBinary(b, Add, F16, 1024) }
func BenchmarkBinaryAddBF16_1024(b *testing.B) { benchBinary(b, Add, BF16, 1024) }
func BenchmarkBinaryAddF64_1024(b *testing.B)  { benchBinary(b, Add, F64, 1024) }
func BenchmarkBinaryAddI32_1024(b *testing.B)  { benchBinary(b, Add, I32, 1024) }
func BenchmarkBinaryAddI64_1024(b *testing.B)  { benchBinary(b, Add, I64, 1024) }
func BenchmarkBinaryAddU8_1024(b *testing.B)   { benchBinary(b, Add, U8, 1024) }
func BenchmarkBinaryMaxF32_1024(b *testing.B)  { benchBinary(b, Max, F32, 1024) }
func BenchmarkBinaryMulF64_4096(b *testing.B)  { benchBinary(b, Mul, F64, 4096) }
func BenchmarkBinaryDivI32_1024(b *testing.B)  { benchBinary(b, Div, I32, 1024) }
func BenchmarkBinaryAddBF16_4096(b *testing.B) { benchBinary(b, Add, BF16, 4096) }

func BenchmarkBinaryScalarMulF32_1024(b *testing.B) {
	x, dst := make([]byte, 1024), make([]byte, 1024)
	Fill(F32, x, 1, 0)
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		BinaryScalar(Mul, F32, dst, x, 1.0001, 0, false)
	}
}

func benchConvert(b *testing.B, dd, sd DType, n int) {
	src, dst := make([]byte, n*sd.Size()), make([]byte, n*dd.Size())
	Fill(sd, src, 1, 0)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		Convert(dst, dd, src, sd)
	}
}

func BenchmarkConvertF32ToBF16_1024(b *testing.B) { benchConvert(b, BF16, F32, 256) }
func BenchmarkConvertF32ToF16_1024(b *testing.B)  { benchConvert(b, F16, F32, 256) }
func BenchmarkConvertF16ToF64_1024(b *testing.B)  { benchConvert(b, F64, F16, 512) }

func BenchmarkCountWrongF32_4096(b *testing.B) {
	got, want := make([]byte, 4096), make([]byte, 4096)
	Fill(F32, got, 1, 0)
	copy(want, got)
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		CountWrong(F32, Sum, 8, got, want)
	}
}

func BenchmarkReduceSumF32_4096x8(b *testing.B) {
	ins := fillRanks(F32, 1, 8, 1024)
	dst := make([]byte, 4096)
	b.SetBytes(4096 * 8)
	b.ReportAllocs()
	for b.Loop() {
		Reduce(Sum, F32, dst, ins)
	}
}

// BenchmarkReduceSumF32_4096x64 is the reference check of a 64-rank
// allreduce, per 4 KiB of result.
func BenchmarkReduceSumF32_4096x64(b *testing.B) {
	ins := fillRanks(F32, 1, 64, 1024)
	dst := make([]byte, 4096)
	b.SetBytes(4096 * 64)
	b.ReportAllocs()
	for b.Loop() {
		Reduce(Sum, F32, dst, ins)
	}
}

// The elementwise functions must not allocate.
func TestNoAllocs(t *testing.T) {
	for _, d := range All() {
		x, y := make([]byte, 4096), make([]byte, 4096)
		Fill(d, x, 1, 0)
		Fill(d, y, 1, 1)
		wide := make([]byte, 4096/d.Size()*8)
		for op := Add; op <= Min; op++ {
			checks := map[string]func(){
				"Binary":       func() { Binary(op, d, x, x, y) },
				"BinaryScalar": func() { BinaryScalar(op, d, x, y, 2, 2, true) },
				"Convert":      func() { Convert(wide, F64, x, d) },
				"Fill":         func() { Fill(d, x, 3, 4) },
				"FillValue":    func() { FillValue(d, y, 1.5) },
				"CountWrong":   func() { CountWrong(d, Sum, 8, x, y) },
				"Reduce":       func() { Reduce(Sum, d, x, [][]byte{x, y}) },
				"GetPut":       func() { Put(d, x, 3, Get(d, y, 5)); PutInt(d, x, 3, GetInt(d, y, 5)) },
			}
			for name, f := range checks {
				if allocs := testing.AllocsPerRun(10, f); allocs != 0 {
					t.Errorf("%s(%v, %v): %v allocations per call, want 0", name, op, d, allocs)
				}
			}
		}
	}
}

func BenchmarkFillF32_4096(b *testing.B) {
	x := make([]byte, 4096)
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		Fill(F32, x, 1, 3)
	}
}

func BenchmarkFillValueF32_2M(b *testing.B) {
	x := make([]byte, 2<<20)
	b.SetBytes(int64(len(x)))
	b.ReportAllocs()
	for b.Loop() {
		FillValue(F32, x, 1.5)
	}
}

// BenchmarkFillSumF32_2M is one rank's 2 MiB send buffer of the verified
// 64-rank ring filled with its sums kept (the vector loop where there is
// one); BenchmarkFillSumF32Scalar_2M the same on the scalar loop.
func BenchmarkFillSumF32_2M(b *testing.B) { benchFillSum(b, fillVector) }

func BenchmarkFillSumF32Scalar_2M(b *testing.B) { benchFillSum(b, false) }

func benchFillSum(b *testing.B, vector bool) {
	defer func(v bool) { fillVector = v }(fillVector)
	fillVector = vector
	const n = 512 << 10
	s := NewFillSum(F32, n, 64)
	buf := make([]byte, 4*n)
	b.SetBytes(4 * n)
	for i := 0; b.Loop(); i++ {
		s.Fill(buf, 1, i%64)
	}
}
