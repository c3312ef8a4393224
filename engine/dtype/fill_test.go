package dtype

import (
	"bytes"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The generator is pinned: these values must not change with the Go release
// (or at all, without a reason: recorded traces depend on them).
func TestFillGolden(t *testing.T) {
	want := map[DType][]string{
		F32:  {"0.18421936", "-0.48142624", "0.9821243", "0.8980446", "-0.22013092", "-0.22151184"},
		F16:  {"0.1562", "-0.5", "0.9688", "0.875", "-0.25", "-0.25"},
		BF16: {"0", "-0.5", "0.75", "0.75", "-0.25", "-0.25"},
		F64:  {"0.18422199696532715", "-0.48142352892335083", "0.9821243500917873", "0.8980453232879171", "-0.22012995706209892", "-0.22151048904475346"},
		I32:  {"3", "-7", "15", "15", "-3", "-3"},
		I64:  {"3", "-7", "15", "15", "-3", "-3"},
		U8:   {"9", "5", "15", "15", "7", "7"},
	}
	for _, d := range All() {
		b := make([]byte, 6*d.Size())
		Fill(d, b, 42, 3)
		var got []string
		for i := range 6 {
			got = append(got, Format(d, b, i))
		}
		if diff := cmp.Diff(want[d], got); diff != "" {
			t.Errorf("Fill(%v, seed 42, rank 3) (-want +got):\n%s", d, diff)
		}
	}
}

func TestFillDeterminism(t *testing.T) {
	const n = 1000
	for _, d := range All() {
		fill := func(seed uint64, rank, count int) []byte {
			b := make([]byte, count*d.Size())
			Fill(d, b, seed, rank)
			return b
		}
		a := fill(7, 2, n)
		if !bytes.Equal(a, fill(7, 2, n)) {
			t.Errorf("%v: same seed and rank gave different data", d)
		}
		if !bytes.Equal(a[:10*d.Size()], fill(7, 2, 10)) {
			t.Errorf("%v: a shorter buffer is not a prefix of a longer one", d)
		}
		for _, other := range [][]byte{fill(7, 3, n), fill(8, 2, n), fill(7, 0, n), fill(0, 2, n)} {
			same := 0
			for i := range n {
				if bytes.Equal(a[i*d.Size():(i+1)*d.Size()], other[i*d.Size():(i+1)*d.Size()]) {
					same++
				}
			}
			// bf16 and u8 have 8 values, so about n/8 coincide by chance.
			if same > n/4 {
				t.Errorf("%v: %d of %d elements equal for a different seed or rank", d, same, n)
			}
		}
	}
}

func TestFillValues(t *testing.T) {
	const n = 4000
	for _, d := range All() {
		seen := map[float64]bool{}
		for rank := range 4 {
			b := make([]byte, n*d.Size())
			Fill(d, b, 99, rank)
			for i := range n {
				v := Get(d, b, i)
				seen[v] = true
				switch {
				case d.IsFloat():
					k := math.Ldexp(v, fillGridExp[d])
					if v < -1 || v >= 1 || k != math.Trunc(k) {
						t.Fatalf("%v element %d = %v, not on the grid in [-1, 1)", d, i, v)
					}
				case d == U8:
					if v < 1 || v > 15 || int(v)%2 == 0 {
						t.Fatalf("u8 element %d = %v, want odd in [1, 15]", i, v)
					}
				default:
					if v < -15 || v > 15 || int(v)%2 == 0 {
						t.Fatalf("%v element %d = %v, want odd in [-15, 15]", d, i, v)
					}
				}
			}
		}
		wantDistinct := map[DType]int{BF16: 8, F16: 64, U8: 8, I32: 16, I64: 16}[d]
		if wantDistinct > 0 && len(seen) != wantDistinct {
			t.Errorf("%v: %d distinct values, want all %d", d, len(seen), wantDistinct)
		}
		if d == F32 || d == F64 {
			if len(seen) < n*3 {
				t.Errorf("%v: only %d distinct values in %d", d, len(seen), 4*n)
			}
		}
	}
}

func TestFillValue(t *testing.T) {
	tests := []struct {
		d     DType
		bytes int
		v     float64
		want  float64
	}{
		{F32, 4 * 37, 0.1, float64(float32(0.1))},
		{F16, 2*5 + 1, -2, -2},
		{BF16, 2 * 300, math.Inf(1), math.Inf(1)},
		{F64, 8 * 3, math.NaN(), math.NaN()},
		{I32, 4 * 9, 2.7, 2},
		{I64, 8 * 100, -1e30, math.MinInt64},
		{U8, 1000, 300, 255},
		// Past the repeated block, with a partial element at the end.
		{F16, 2*5000 + 1, 0.5, 0.5},
		{F32, 4*fillValueBlock + 4*3 + 2, -1.25, -1.25},
		{I64, 8 * 1025, 7, 7},
		{U8, 3*fillValueBlock + 5, 9, 9},
	}
	for _, tt := range tests {
		b := bytes.Repeat([]byte{0xAA}, tt.bytes)
		FillValue(tt.d, b, tt.v)
		n := tt.bytes / tt.d.Size()
		got := dec(tt.d, b)
		want := make([]float64, n)
		for i := range want {
			want[i] = tt.want
		}
		if diff := cmp.Diff(want, got, equateNaN); diff != "" {
			t.Errorf("FillValue(%v, %v) (-want +got):\n%s", tt.d, tt.v, diff)
		}
		if tail := b[n*tt.d.Size():]; len(tail) > 0 && tail[0] != 0xAA {
			t.Errorf("FillValue(%v) wrote the trailing partial element", tt.d)
		}
	}
	FillValue(F32, nil, 1) // empty is fine
}

// Fill's f32 loop (four elements at a time, without smMix's last step)
// gives the values of the definition: element i is k·2^-18 with k the top
// 19 bits of smMix of the stream's state i+1 steps on, less 2^18. Every
// length up to a few unrolled iterations, and a long buffer, for several
// seeds and ranks.
func TestFillF32MatchesDefinition(t *testing.T) {
	for _, seed := range []uint64{0, 1, 42, 1 << 63} {
		for _, rank := range []int{0, 3, 255} {
			for _, n := range append(func() (ns []int) {
				for n := range 19 {
					ns = append(ns, n)
				}
				return ns
			}(), 1<<16+3) {
				b := make([]byte, 4*n)
				Fill(F32, b, seed, rank)
				state := smMix(smMix(seed) + uint64(rank)*smGamma + 1)
				for i := range n {
					state += smGamma
					k := int64(smMix(state)>>(63-fillExpF32)) - 1<<fillExpF32
					want := float32(math.Ldexp(float64(k), -fillExpF32))
					if got := math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24); got != want {
						t.Fatalf("seed %d rank %d n %d: element %d = %v, want %v", seed, rank, n, i, got, want)
					}
				}
			}
		}
	}
}
