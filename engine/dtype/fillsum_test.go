package dtype

import (
	"bytes"
	"testing"
)

// Rule (docs/architecture.md, Two-pass verification; the reference computed
// independently, in float64 for floats): FillSum's buffers are Fill's, and
// its reference is Reduce's over them, bit for bit: for one rank and many
// (past the 64 below which Fill's sums are exact even in f32), an element
// count with a remainder after the four-at-a-time loop, and a buffer Fill
// cannot view as []float32.
func TestFillSumMatchesFillAndReduce(t *testing.T) {
	for _, ranks := range []int{1, 2, 5, 64, 300} {
		for _, unaligned := range []bool{false, true} {
			const n = 1003
			sums := NewFillSum(F32, n, ranks)
			var inputs [][]byte
			for r := range ranks {
				want := make([]byte, 4*n)
				Fill(F32, want, 7, r)
				got := make([]byte, 4*n+1)
				if unaligned {
					got = got[1:]
				} else {
					got = got[:4*n]
				}
				sums.Fill(got, 7, r)
				if !bytes.Equal(got, want) {
					t.Fatalf("%d ranks: rank %d's buffer differs from Fill's", ranks, r)
				}
				inputs = append(inputs, want)
			}
			for _, red := range []RedOp{Sum, Avg} {
				want := make([]byte, 4*n)
				Reduce(red, F32, want, inputs)
				for _, lo := range []int{0, 17} {
					got := make([]byte, 4*(n-lo)+1)
					if unaligned {
						got = got[1:]
					} else {
						got = got[:4*(n-lo)]
					}
					if !sums.Reduce(red, got, lo) {
						t.Fatalf("%d ranks: Reduce(%v) refused", ranks, red)
					}
					if !bytes.Equal(got, want[4*lo:]) {
						t.Fatalf("%d ranks, unaligned %v: Reduce(%v) from element %d differs from dtype.Reduce of the buffers", ranks, unaligned, red, lo)
					}
				}
			}
		}
	}
}

// The sums refuse what they cannot answer exactly: other dtypes and
// reductions, and more ranks than int32 sums hold.
func TestFillSumRefuses(t *testing.T) {
	for _, d := range []DType{F16, BF16, F64, I32, I64, U8} {
		if NewFillSum(d, 8, 4) != nil {
			t.Errorf("NewFillSum(%v) = non-nil, want nil", d)
		}
	}
	if NewFillSum(F32, 8, fillSumMaxRanks+1) != nil {
		t.Errorf("NewFillSum with %d ranks = non-nil, want nil", fillSumMaxRanks+1)
	}
	s := NewFillSum(F32, 8, 2)
	s.Fill(make([]byte, 32), 1, 0)
	for _, red := range []RedOp{Prod, RMax, RMin} {
		if s.Reduce(red, make([]byte, 32), 0) {
			t.Errorf("Reduce(%v) = true, want false", red)
		}
	}
}

// TestFillSumScalarMatchesFill runs TestFillSumMatchesFillAndReduce on
// the scalar loop alone, which a processor without AVX2 runs.
func TestFillSumScalarMatchesFill(t *testing.T) {
	defer func(v bool) { fillVector = v }(fillVector)
	fillVector = false
	TestFillSumMatchesFillAndReduce(t)
}
