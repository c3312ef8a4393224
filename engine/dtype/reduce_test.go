package dtype

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fillRanks returns p buffers of n elements of Fill data.
func fillRanks(d DType, seed uint64, p, n int) [][]byte {
	ins := make([][]byte, p)
	for r := range ins {
		ins[r] = make([]byte, n*d.Size())
		Fill(d, ins[r], seed, r)
	}
	return ins
}

// slowReduce is the test's reference: exact arithmetic with math/big, then
// one rounding to float64 and one conversion to d (floats), or wrapping to
// the dtype width (integers).
func slowReduce(r RedOp, d DType, inputs [][]byte) []byte {
	n := len(inputs[0]) / d.Size()
	p := len(inputs)
	out := make([]byte, len(inputs[0]))
	for i := range n {
		if d.IsFloat() {
			acc := new(big.Float).SetPrec(8192)
			acc.SetFloat64(Get(d, inputs[0], i))
			for _, in := range inputs[1:] {
				x := new(big.Float).SetPrec(8192).SetFloat64(Get(d, in, i))
				switch r {
				case Sum, Avg:
					acc.Add(acc, x)
				case Prod:
					acc.Mul(acc, x)
				case RMax:
					if x.Cmp(acc) > 0 {
						acc = x
					}
				case RMin:
					if x.Cmp(acc) < 0 {
						acc = x
					}
				}
			}
			if r == Avg {
				acc.Quo(acc, new(big.Float).SetInt64(int64(p)))
			}
			f, _ := acc.Float64()
			Put(d, out, i, f)
			continue
		}
		acc := big.NewInt(GetInt(d, inputs[0], i))
		for _, in := range inputs[1:] {
			x := big.NewInt(GetInt(d, in, i))
			switch r {
			case Sum, Avg:
				acc.Add(acc, x)
			case Prod:
				acc.Mul(acc, x)
			case RMax:
				if x.Cmp(acc) > 0 {
					acc = x
				}
			case RMin:
				if x.Cmp(acc) < 0 {
					acc = x
				}
			}
		}
		// Wrap to the dtype width: keep the low bits, then read them back
		// as the dtype's (signed or unsigned) value.
		acc.Mod(acc, new(big.Int).Lsh(big.NewInt(1), 64))
		PutInt(d, out, i, int64(acc.Uint64()))
		if r == Avg {
			acc.Quo(big.NewInt(GetInt(d, out, i)), big.NewInt(int64(p))) // truncating
			PutInt(d, out, i, acc.Int64())
		}
	}
	return out
}

func TestReduceMatchesSlowReference(t *testing.T) {
	const n = 300
	for _, d := range All() {
		for r := Sum; r <= Avg; r++ {
			for _, p := range []int{1, 2, 3, 4, 7, 8, 16, 33, 64} {
				ins := fillRanks(d, uint64(p), p, n)
				want := slowReduce(r, d, ins)
				got := make([]byte, n*d.Size())
				Reduce(r, d, got, ins)
				if !bytes.Equal(want, got) {
					t.Errorf("Reduce(%v, %v, %d ranks) (-want +got):\n%s", r, d, p,
						cmp.Diff(dec(d, want), dec(d, got)))
				}
			}
		}
	}
}

func TestReduceSpecialValues(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name  string
		r     RedOp
		d     DType
		ranks [][]float64
		want  []float64
	}{
		{"nan poisons sum", Sum, F32, [][]float64{{nan, 1}, {1, 2}}, []float64{nan, 3}},
		{"nan poisons max and min", RMax, F16, [][]float64{{nan, 1}, {1, nan}}, []float64{nan, nan}},
		{"nan poisons min", RMin, F64, [][]float64{{1, 2}, {nan, 1}}, []float64{nan, 1}},
		{"inf stays inf in sum", Sum, F64, [][]float64{{inf, -inf}, {1, 1}, {2, 2}}, []float64{inf, -inf}},
		{"inf minus inf is nan", Sum, F32, [][]float64{{inf}, {-inf}}, []float64{nan}},
		{"inf in prod", Prod, F32, [][]float64{{inf, inf}, {2, 0}}, []float64{inf, nan}},
		{"f16 sum overflows", Sum, F16, [][]float64{{60000}, {60000}}, []float64{inf}},
		{"avg of a sum above the f16 range", Avg, F16, [][]float64{{60000}, {60000}}, []float64{60000}},
		{"max of zeros", RMax, F32, [][]float64{{math.Copysign(0, -1)}, {0}}, []float64{0}},
		{"i32 sum wraps", Sum, I32, [][]float64{{math.MaxInt32}, {1}}, []float64{math.MinInt32}},
		{"i32 prod wraps", Prod, I32, [][]float64{{65536}, {65536}, {3}}, []float64{0}},
		{"i64 prod wraps", Prod, I64, [][]float64{{1 << 62}, {4}}, []float64{0}},
		{"u8 sum wraps", Sum, U8, [][]float64{{200}, {100}}, []float64{44}},
		{"u8 avg divides the wrapped sum", Avg, U8, [][]float64{{200}, {100}}, []float64{22}},
		{"i32 avg truncates toward zero", Avg, I32, [][]float64{{-7, 7}, {0, 0}}, []float64{-3, 3}},
		{"i32 avg divides the wrapped sum", Avg, I32, [][]float64{{math.MaxInt32}, {math.MaxInt32}}, []float64{-1}},
		{"u8 max min", RMin, U8, [][]float64{{200, 0}, {100, 255}}, []float64{100, 0}},
	}
	for _, tt := range tests {
		var ins [][]byte
		for _, vals := range tt.ranks {
			ins = append(ins, enc(tt.d, vals...))
		}
		dst := make([]byte, len(tt.want)*tt.d.Size())
		Reduce(tt.r, tt.d, dst, ins)
		if diff := cmp.Diff(tt.want, dec(tt.d, dst), equateNaN); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	// Signed zeros survive the compensated sum and product.
	negZero := math.Copysign(0, -1)
	for _, c := range []struct {
		r     RedOp
		ranks [][]float64
	}{
		{Sum, [][]float64{{negZero}, {negZero}}},
		{Prod, [][]float64{{-0.5}, {0}}},
		{Avg, [][]float64{{negZero}, {negZero}, {negZero}}},
	} {
		for _, d := range []DType{F32, F16, BF16, F64} {
			var ins [][]byte
			for _, vals := range c.ranks {
				ins = append(ins, enc(d, vals...))
			}
			dst := make([]byte, d.Size())
			Reduce(c.r, d, dst, ins)
			if v := Get(d, dst, 0); v != 0 || !math.Signbit(v) {
				t.Errorf("Reduce(%v, %v, %v) = %v, want -0", c.r, d, c.ranks, v)
			}
		}
	}
	mustPanic(t, "no inputs", func() { Reduce(Sum, F32, make([]byte, 4), nil) })
	mustPanic(t, "dtype.Reduce: an input has 4 bytes, want at least 8", func() {
		Reduce(Sum, F32, make([]byte, 8), [][]byte{make([]byte, 8), make([]byte, 4)})
	})
	mustPanic(t, "invalid redop(0)", func() { Reduce(0, F32, make([]byte, 4), [][]byte{make([]byte, 4)}) })
}

// accumulate combines the buffers pairwise in the dtype with op, the way a
// simulated algorithm does, in one of several orders:
//
//	0: ring, starting at a random rank
//	1: reverse rank order
//	2: balanced tree (recursive halving)
//	3: random tree (combine two random partial results until one is left)
//
// The inputs are not modified.
func accumulate(rng *rand.Rand, order int, op Op, d DType, inputs [][]byte) []byte {
	p := len(inputs)
	parts := make([][]byte, p)
	for i, in := range inputs {
		parts[i] = bytes.Clone(in)
	}
	switch order {
	case 0, 1:
		start := rng.IntN(p)
		acc := parts[start]
		if order == 1 {
			acc = parts[p-1]
		}
		for k := 1; k < p; k++ {
			j := (start + k) % p
			if order == 1 {
				j = p - 1 - k
			}
			Binary(op, d, acc, parts[j], acc) // the incoming operand first: order must not matter
		}
		return acc
	case 2:
		for len(parts) > 1 {
			var next [][]byte
			for i := 0; i+1 < len(parts); i += 2 {
				Binary(op, d, parts[i], parts[i], parts[i+1])
				next = append(next, parts[i])
			}
			if len(parts)%2 == 1 {
				next = append(next, parts[len(parts)-1])
			}
			parts = next
		}
		return parts[0]
	default:
		for len(parts) > 1 {
			i := rng.IntN(len(parts))
			j := rng.IntN(len(parts) - 1)
			if j >= i {
				j++
			}
			Binary(op, d, parts[i], parts[i], parts[j])
			parts[j] = parts[len(parts)-1]
			parts = parts[:len(parts)-1]
		}
		return parts[0]
	}
}

// simulate computes the reduction the way a simulated collective might:
// pairwise in the dtype, in the given order; avg in one of three ways
// (divide the sum by p, multiply it by 1/p, or scale every input by 1/p
// first).
func simulate(rng *rand.Rand, order, avgWay int, r RedOp, d DType, inputs [][]byte) []byte {
	p := len(inputs)
	if r == Avg && avgWay == 2 {
		scaled := make([][]byte, p)
		for k, in := range inputs {
			scaled[k] = make([]byte, len(in))
			BinaryScalar(Mul, d, scaled[k], in, 1/float64(p), 0, false)
		}
		return accumulate(rng, order, Add, d, scaled)
	}
	got := accumulate(rng, order, r.Pairwise(), d, inputs)
	if r == Avg {
		if avgWay == 0 || !d.IsFloat() {
			BinaryScalar(Div, d, got, got, float64(p), int64(p), false)
		} else {
			BinaryScalar(Mul, d, got, got, 1/float64(p), 0, false)
		}
	}
	return got
}

var rankCounts = []int{1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 32, 63, 64}

// The property the simulator's checks rely on: Fill data of up to 64 ranks,
// reduced pairwise in the dtype in any order, is within Tolerance of Reduce;
// sums, max and min are even bit-exact.
func TestPairwiseFillWithinTolerance(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	const n = 1024
	for _, d := range All() {
		for r := Sum; r <= Avg; r++ {
			for _, p := range rankCounts {
				ins := fillRanks(d, uint64(100+p), p, n)
				want := make([]byte, n*d.Size())
				Reduce(r, d, want, ins)
				for order := range 4 {
					for avgWay := range 3 {
						if avgWay > 0 && (r != Avg || !d.IsFloat()) {
							continue
						}
						got := simulate(rng, order, avgWay, r, d, ins)
						if wrong, first := CountWrong(d, r, p, got, want); wrong != 0 {
							t.Errorf("%v %v %d ranks order %d avg way %d: %d wrong, first %d: got %s want %s",
								d, r, p, order, avgWay, wrong, first, Format(d, got, first), Format(d, want, first))
						}
						exact := r == Sum || r == RMax || r == RMin || !d.IsFloat()
						if exact && !bytes.Equal(got, want) {
							t.Errorf("%v %v %d ranks order %d: not bit-exact on Fill data", d, r, p, order)
						}
					}
				}
			}
		}
	}
}

// Tolerance also holds for data that is not on Fill's grid: values uniform
// in [-1, 1) (cancellation) and in [0, 1) (errors pile up one way).
func TestPairwiseGeneralDataWithinTolerance(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	n := 2048
	if testing.Short() {
		n = 256
	}
	for _, d := range []DType{F16, BF16, F32, F64} {
		for _, lo := range []float64{-1, 0} {
			for _, r := range []RedOp{Sum, Avg, Prod} {
				worst := 0.0
				for _, p := range rankCounts {
					ins := make([][]byte, p)
					for k := range ins {
						ins[k] = make([]byte, n*d.Size())
						for i := range n {
							Put(d, ins[k], i, lo+rng.Float64()*(1-lo))
						}
					}
					want := make([]byte, n*d.Size())
					Reduce(r, d, want, ins)
					abs, rel := Tolerance(d, r, p)
					for order := range 4 {
						for avgWay := range 3 {
							if avgWay > 0 && r != Avg {
								continue
							}
							got := simulate(rng, order, avgWay, r, d, ins)
							for i := range n {
								g, w := Get(d, got, i), Get(d, want, i)
								worst = max(worst, math.Abs(g-w)/(abs+rel*math.Abs(w)))
							}
						}
					}
				}
				// Ask for a safety factor of 1.5 here; the constants were
				// chosen for at least 2 with many more samples.
				if worst > 1/1.5 {
					t.Errorf("%v %v data in [%v, 1): error reaches %.2f of the tolerance", d, r, lo, worst)
				}
				t.Logf("%v %v data in [%v, 1): largest error %.2f of the tolerance", d, r, lo, worst)
			}
		}
	}
}

func TestTolerance(t *testing.T) {
	for _, d := range All() {
		for r := Sum; r <= Avg; r++ {
			abs, rel := Tolerance(d, r, 8)
			exact := !d.IsFloat() || r == RMax || r == RMin
			if exact != (abs == 0 && rel == 0) {
				t.Errorf("Tolerance(%v, %v, 8) = %v, %v; want exact = %v", d, r, abs, rel, exact)
			}
		}
	}
	type tol struct{ Abs, Rel float64 }
	get := func(d DType, r RedOp, p int) tol {
		a, b := Tolerance(d, r, p)
		return tol{a, b}
	}
	u32 := 0x1p-24
	want := map[string]tol{
		"f32 sum 16":  {3 * u32 * 16, u32 * 10},
		"f32 avg 16":  {4 * u32, u32 * 11},
		"f32 prod 16": {16 * math.SmallestNonzeroFloat32, 2 * u32 * 16},
	}
	got := map[string]tol{
		"f32 sum 16":  get(F32, Sum, 16),
		"f32 avg 16":  get(F32, Avg, 16),
		"f32 prod 16": get(F32, Prod, 16),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tolerance (-want +got):\n%s", diff)
	}
	// Looser for narrower types, growing with the rank count.
	for _, r := range []RedOp{Sum, Avg, Prod} {
		for _, p := range []int{2, 8, 64} {
			var prev tol
			for i, d := range []DType{F64, F32, F16, BF16} {
				cur := get(d, r, p)
				if i > 0 && !(cur.Rel > prev.Rel) {
					t.Errorf("Tolerance(%v, %v, %d) rel %v not looser than the wider type's %v", d, r, p, cur.Rel, prev.Rel)
				}
				prev = cur
			}
		}
		for _, d := range []DType{F16, BF16, F32, F64} {
			small, big := get(d, r, 2), get(d, r, 64)
			if !(big.Rel > small.Rel) || big.Abs < small.Abs {
				t.Errorf("Tolerance(%v, %v) does not grow with ranks: %v -> %v", d, r, small, big)
			}
		}
	}
	if a, b := Tolerance(F32, Sum, 0); a != 3*u32 || b != 4*u32 {
		t.Errorf("Tolerance with 0 ranks = %v, %v; want the 1-rank bounds", a, b)
	}
}

func TestCountWrong(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	abs8, rel8 := Tolerance(F32, Sum, 8)
	tests := []struct {
		name      string
		d         DType
		r         RedOp
		got, want []float64
		wrong     int
		first     int
	}{
		{"equal", F32, Sum, []float64{1, 2, 3}, []float64{1, 2, 3}, 0, -1},
		{"one off", F32, Sum, []float64{1, 2.5, 3}, []float64{1, 2, 3}, 1, 1},
		{"two off", F64, Prod, []float64{1, 2.5, 4}, []float64{1, 2, 3}, 2, 1},
		{"within tolerance", F32, Sum, []float64{4 + abs8}, []float64{4}, 0, -1},
		{"just outside tolerance", F32, Sum, []float64{4 + (abs8 + rel8*4) + 4*0x1p-22}, []float64{4}, 1, 0},
		{"nan equals nan", F16, Sum, []float64{nan, 1}, []float64{nan, 1}, 0, -1},
		{"nan is not a number", BF16, Sum, []float64{nan, 1}, []float64{1, nan}, 2, 0},
		{"inf equals inf", F32, Sum, []float64{inf, -inf}, []float64{inf, -inf}, 0, -1},
		{"inf is not finite", F32, Prod, []float64{3e38, inf, -inf}, []float64{inf, 3e38, inf}, 3, 0},
		{"signed zeros are equal", F32, RMax, []float64{math.Copysign(0, -1)}, []float64{0}, 0, -1},
		{"max is exact", F32, RMax, []float64{1 + 0x1p-23}, []float64{1}, 1, 0},
		{"ints are exact", I32, Sum, []float64{5, 7}, []float64{5, 8}, 1, 1},
		{"u8 exact", U8, Avg, []float64{5, 7}, []float64{5, 7}, 0, -1},
		{"bf16 loose", BF16, Sum, []float64{10.125}, []float64{10}, 0, -1},
		{"bf16 not that loose", BF16, Sum, []float64{11}, []float64{10}, 1, 0},
	}
	for _, tt := range tests {
		wrong, first := CountWrong(tt.d, tt.r, 8, enc(tt.d, tt.got...), enc(tt.d, tt.want...))
		if wrong != tt.wrong || first != tt.first {
			t.Errorf("%s: CountWrong = %d, %d; want %d, %d", tt.name, wrong, first, tt.wrong, tt.first)
		}
	}
	// A short got: the missing elements are wrong.
	if wrong, first := CountWrong(I64, Sum, 2, enc(I64, 1), enc(I64, 1, 2, 3)); wrong != 2 || first != 1 {
		t.Errorf("short got: CountWrong = %d, %d; want 2, 1", wrong, first)
	}
}

// The checks catch the bugs they exist for: a lost contribution, a chunk
// taken from the wrong rank, an untouched (sentinel) result.
func TestCountWrongCatchesBugs(t *testing.T) {
	const n, p = 4096, 8
	for _, d := range All() {
		for _, r := range []RedOp{Sum, Avg, Prod, RMax} {
			ins := fillRanks(d, 5, p, n)
			want := make([]byte, n*d.Size())
			Reduce(r, d, want, ins)

			lost := make([]byte, len(want))
			Reduce(r, d, lost, ins[:p-1])
			if r == Avg { // an avg that forgot a rank but divides by p
				Reduce(Sum, d, lost, ins[:p-1])
				BinaryScalar(Div, d, lost, lost, p, p, false)
			}
			sentinel := make([]byte, len(want))
			FillValue(d, sentinel, math.NaN())
			if !d.IsFloat() {
				FillValue(d, sentinel, -77)
			}
			for _, bug := range []struct {
				name string
				got  []byte
			}{{"lost rank", lost}, {"sentinel", sentinel}} {
				wrong, _ := CountWrong(d, r, p, bug.got, want)
				// Every value of the lost rank matters except where
				// the reduction does not depend on it (max, prod by
				// zero, small contributions under the f16/bf16
				// tolerance); ask for a clear majority or, for max,
				// a noticeable share.
				min := n / 2
				if bug.name == "lost rank" && r == RMax {
					min = n / 20
				}
				if bug.name == "lost rank" && r == Prod {
					min = n / 4 // bf16 Fill data is 0 one time in 8
				}
				if wrong < min {
					t.Errorf("%v %v %s: only %d of %d elements wrong", d, r, bug.name, wrong, n)
				}
			}
		}
	}
}

func ExampleCountWrong() {
	// Four ranks each hold Fill data; a (simulated) ring sums them in f16.
	const n = 256
	ranks := fillRanks(F16, 1, 4, n)
	acc := bytes.Clone(ranks[1])
	for _, r := range []int{2, 3, 0} {
		Binary(Add, F16, acc, acc, ranks[r])
	}
	want := make([]byte, 2*n)
	Reduce(Sum, F16, want, ranks)
	wrong, first := CountWrong(F16, Sum, 4, acc, want)
	fmt.Println(wrong, first)
	// Output: 0 -1
}

// sumBlocks must give sumAt's bits for every element, including signed
// zeros, infinities and NaN, at lengths around the block size, for inputs
// it adds in pairs and one left over.
func TestSumBlocksMatchesSumAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	specials := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1e308, -1e308, 1e-300}
	for _, d := range []DType{F32, F16, BF16, F64} {
		for _, n := range []int{1, sumBlock - 1, sumBlock, sumBlock + 3, 3*sumBlock + 1} {
			for _, p := range []int{2, 5, 6} {
				inputs := make([][]byte, p)
				for k := range inputs {
					inputs[k] = make([]byte, n*d.Size())
					for i := range n {
						v := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6))
						if rng.IntN(50) == 0 {
							v = specials[rng.IntN(len(specials))]
						}
						Put(d, inputs[k], i, v)
					}
				}
				for _, avg := range []bool{false, true} {
					got := make([]byte, n*d.Size())
					sumBlocks(d, got, inputs, n, avg)
					want := make([]byte, n*d.Size())
					for i := range n {
						acc := sumAt(d, inputs, i)
						if avg {
							acc /= float64(len(inputs))
						}
						Put(d, want, i, acc)
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%v n=%d inputs=%d avg=%v: sumBlocks differs from sumAt", d, n, p, avg)
					}
				}
			}
		}
	}
}

// twoSumBlock2 is twoSumBlock of one input then the other: the same sums
// and the same compensations, bit for bit (the compensation rarely shows
// in an f32 result, so the sums above alone would not notice a change).
func TestTwoSumBlock2IsTwoSumBlockTwice(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	const n = 257
	s, c := make([]float64, n), make([]float64, n)
	x, y := make([]float32, n), make([]float32, n)
	for i := range n {
		s[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(16)-8))
		c[i] = rng.NormFloat64() * 1e-20
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(16)-8)))
		y[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(16)-8)))
	}
	s1, c1 := slices.Clone(s), slices.Clone(c)
	s4, c4 := slices.Clone(s), slices.Clone(c)
	twoSumBlock(s1, c1, x)
	twoSumBlock(s1, c1, y)
	twoSumBlock2(s, c, x, y)
	for i := range n {
		if math.Float64bits(s[i]) != math.Float64bits(s1[i]) || math.Float64bits(c[i]) != math.Float64bits(c1[i]) {
			t.Fatalf("element %d: twoSumBlock2 gives sum %v compensation %v, twoSumBlock twice %v and %v", i, s[i], c[i], s1[i], c1[i])
		}
	}
	// twoSumBlock4 is twoSumBlock four times, inputs in turn.
	s1, c1 = slices.Clone(s4), slices.Clone(c4)
	for _, in := range [][]float32{x, y, y, x} {
		twoSumBlock(s1, c1, in)
	}
	twoSumBlock4(s4, c4, x, y, y, x)
	for i := range n {
		if math.Float64bits(s4[i]) != math.Float64bits(s1[i]) || math.Float64bits(c4[i]) != math.Float64bits(c1[i]) {
			t.Fatalf("element %d: twoSumBlock4 gives sum %v compensation %v, twoSumBlock in turn %v and %v", i, s4[i], c4[i], s1[i], c1[i])
		}
	}
}
