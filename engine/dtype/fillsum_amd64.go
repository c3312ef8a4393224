package dtype

import "golang.org/x/sys/cpu"

// fillF32SumVec runs fillF32Sum's first groups of four elements with
// AVX2 where the processor has it (about a third of the scalar loop's
// instructions: the verified 64-rank ring fills 128 MiB this way, and the
// scalar loop was a third of that run's instructions), and returns how
// many elements it wrote and the state after them (0 and state: none).
func fillF32SumVec(v []float32, state uint64, sums []int32) (int, uint64) {
	g := len(v) / 4
	if !fillVector || g == 0 {
		return 0, state
	}
	_ = sums[4*g-1]
	fillF32SumAVX2(&v[0], &sums[0], g, state)
	return 4 * g, state + uint64(g)*smGamma4
}

// fillVector is whether fillF32SumVec runs (tests turn it off to check
// the scalar loop on a processor with AVX2).
var fillVector = cpu.X86.HasAVX2

//go:noescape
func fillF32SumAVX2(v *float32, sums *int32, groups int, state uint64)
