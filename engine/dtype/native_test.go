package dtype

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The f32 loops read aligned buffers in place (f32View) on little-endian
// hosts and decode them otherwise; a buffer one byte off alignment takes
// the portable path, so these tests pin both paths to the same bits.

// misaligned returns a copy of b that starts one byte past an aligned
// address (f32View refuses it).
func misaligned(b []byte) []byte {
	buf := make([]byte, len(b)+1)
	out := buf[1:]
	copy(out, b)
	return out
}

// randomF32 returns n f32 elements of varied magnitudes, with signed zeros,
// infinities, NaNs and subnormals mixed in.
func randomF32(rng *rand.Rand, n int) []byte {
	specials := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1e-42, -3e38, 3e38}
	b := make([]byte, 4*n)
	for i := range n {
		v := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
		if rng.IntN(40) == 0 {
			v = specials[rng.IntN(len(specials))]
		}
		Put(F32, b, i, v)
	}
	return b
}

func TestF32View(t *testing.T) {
	b := make([]byte, 64)
	v, ok := f32View(b)
	if !nativeLE {
		if ok {
			t.Fatal("f32View: a view on a big-endian host")
		}
		return
	}
	if !ok || len(v) != 16 {
		t.Fatalf("f32View(aligned 64 bytes) = %d elements, %v; want 16, true", len(v), ok)
	}
	v[1] = 1.5
	if got := ldF32(b[4:]); got != 1.5 {
		t.Errorf("a store through the view reads back as %v, want 1.5", got)
	}
	if _, ok := f32View(b[1:]); ok {
		t.Error("f32View accepted a misaligned buffer")
	}
}

func TestBinaryF32NativeMatchesPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{0, 1, 7, 1024} {
		a, b := randomF32(rng, n), randomF32(rng, n)
		for op := Add; op <= Min; op++ {
			fast := make([]byte, 4*n)
			Binary(op, F32, fast, a, b)
			slow := misaligned(make([]byte, 4*n))
			Binary(op, F32, slow, misaligned(a), misaligned(b))
			if !bytes.Equal(fast, slow) {
				t.Errorf("%v n=%d: the in-place f32 loop differs from the portable one", op, n)
			}
		}
	}
}

func TestFillF32NativeMatchesPortable(t *testing.T) {
	for _, n := range []int{0, 1, 5, 4096} {
		fast := make([]byte, 4*n+2) // a partial trailing element is left alone
		Fill(F32, fast, 42, 7)
		slow := misaligned(make([]byte, 4*n+2))
		Fill(F32, slow, 42, 7)
		if !bytes.Equal(fast, slow) {
			t.Errorf("n=%d: the in-place Fill differs from the portable one", n)
		}
	}
}

func TestReduceSumF32NativeMatchesPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	for _, p := range []int{1, 2, 5, 64} {
		for _, n := range []int{1, sumBlock + 3} {
			fastIn, slowIn := make([][]byte, p), make([][]byte, p)
			for k := range fastIn {
				fastIn[k] = randomF32(rng, n)
				slowIn[k] = misaligned(fastIn[k])
			}
			for _, r := range []RedOp{Sum, Avg} {
				fast := make([]byte, 4*n)
				Reduce(r, F32, fast, fastIn)
				slow := misaligned(make([]byte, 4*n))
				Reduce(r, F32, slow, slowIn)
				if !bytes.Equal(fast, slow) {
					t.Errorf("%v p=%d n=%d: the in-place reduction differs from the portable one", r, p, n)
				}
				for i := range n {
					want := sumAt(F32, slowIn, i)
					if r == Avg {
						want /= float64(p)
					}
					if g, w := math.Float32bits(ldF32(fast[4*i:])), math.Float32bits(float32(want)); g != w {
						t.Fatalf("%v p=%d n=%d element %d: %#x, sumAt gives %#x", r, p, n, i, g, w)
					}
				}
			}
		}
	}
}

// EachWrong skips blocks of equal bytes: it must still report every wrong
// element, in order, including ones at block edges.
func TestEachWrongBlocks(t *testing.T) {
	for _, d := range All() {
		n := 3*cmpBlock + 5
		want := make([]byte, n*d.Size())
		Fill(d, want, 1, 0)
		got := bytes.Clone(want)
		bad := []int{0, cmpBlock - 1, cmpBlock, 2*cmpBlock + 7, n - 1}
		for _, i := range bad {
			got[(i+1)*d.Size()-1] ^= 0x40 // exponent or high bits: far outside any tolerance
		}
		var seen []int
		wrong, first := EachWrong(d, Sum, 8, got, want, func(i int) { seen = append(seen, i) })
		if wrong != len(bad) || first != 0 || !slices.Equal(seen, bad) {
			t.Errorf("%v: wrong %d first %d at %v; want %d, 0, %v", d, wrong, first, seen, len(bad), bad)
		}
	}
}
