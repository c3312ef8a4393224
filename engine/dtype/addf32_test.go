package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
)

// addF32Groups4 is addF32's contract written out: groups of four elements
// in order, each group read whole before it is written, the tail one by
// one; a's NaN wins when both are NaN (x86's first operand).
func addF32Groups4(dst, a, b []float32) {
	n := len(dst) &^ 3
	for i := 0; i < n; i += 4 {
		var s [4]float32
		for j := range s {
			s[j] = a[i+j] + b[i+j]
			if math.IsNaN(float64(a[i+j])) {
				s[j] = math.Float32frombits(math.Float32bits(a[i+j]) | 1<<22) // quieted
			}
		}
		copy(dst[i:i+4], s[:])
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] + b[i]
		if math.IsNaN(float64(a[i])) {
			dst[i] = math.Float32frombits(math.Float32bits(a[i]) | 1<<22)
		}
	}
}

// TestAddF32_GroupsOfFour checks addF32 bit for bit against its contract
// on every length up to 40, aligned or not, with NaN payloads in both
// operands and with dst overlapping a or b at every small offset (an
// in-place reduction of a tile writes one of its operands).
func TestAddF32_GroupsOfFour(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	val := func() float32 {
		switch rng.IntN(8) {
		case 0:
			return math.Float32frombits(0x7f800000 | rng.Uint32()&0x7fffff | 1) // a NaN with a payload
		case 1:
			return math.Float32frombits(0xff800000 | rng.Uint32()&0x3fffff | 1)
		default:
			return float32(rng.NormFloat64() * 1e3)
		}
	}
	for n := 0; n <= 40; n++ {
		for off := 0; off < 8; off++ {
			for mode := 0; mode < 3; mode++ { // 0: apart, 1: dst in a, 2: dst in b
				mem := make([]float32, 3*64)
				for i := range mem {
					mem[i] = val()
				}
				want := append([]float32(nil), mem...)
				var dst, a, b, wd, wa, wb []float32
				at := func(m []float32, lo int) []float32 { return m[lo : lo+n] }
				switch mode {
				case 0:
					dst, a, b = at(mem, off), at(mem, 64+off/2), at(mem, 128)
					wd, wa, wb = at(want, off), at(want, 64+off/2), at(want, 128)
				case 1:
					dst, a, b = at(mem, off), at(mem, 4), at(mem, 128)
					wd, wa, wb = at(want, off), at(want, 4), at(want, 128)
				case 2:
					dst, a, b = at(mem, 64+off), at(mem, 0), at(mem, 68)
					wd, wa, wb = at(want, 64+off), at(want, 0), at(want, 68)
				}
				addF32(dst, a, b)
				addF32Groups4(wd, wa, wb)
				for i := range mem {
					if math.Float32bits(mem[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n=%d off=%d mode=%d: element %d is %#x, want %#x", n, off, mode, i, math.Float32bits(mem[i]), math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}
