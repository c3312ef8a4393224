package dtype

// FillSum is the elementwise sum over ranks of Fill's f32 values, kept
// while the buffers are filled, so that the reference of a sum or an
// average over those buffers needs no second pass over them (hundreds of
// megabytes in a large verified run, read back from memory, with a
// compensated addition per element and rank).
//
// Fill's f32 value is k·2^-18 with k an integer below 2^18 in magnitude,
// and FillSum keeps the sum of the k's, exactly. Reduce's float64
// accumulation of the same values is exact as well (every partial sum is a
// multiple of 2^-18 below 2^35 in magnitude, well within float64's 53
// bits, so its compensation stays 0), hence the two give the same bits.
type FillSum struct {
	k     []int32 // per element, the sum of the ranks' grid integers
	ranks int     // buffers added so far
}

// fillSumMaxRanks bounds the ranks a FillSum adds: a sum of that many k's
// stays within int32 (2^12 · 2^18 = 2^30).
const fillSumMaxRanks = 1 << 12

// NewFillSum returns the sum of n elements of d over ranks buffers, or nil
// when d's values are not summed exactly (every dtype but f32) or there
// are too many ranks: the reference then reduces the buffers themselves.
func NewFillSum(d DType, n int64, ranks int) *FillSum {
	if d != F32 || ranks > fillSumMaxRanks || n < 0 {
		return nil
	}
	return &FillSum{k: make([]int32, n)}
}

// Fill is Fill(F32, b, seed, rank) that also adds the values it writes to
// the sums: element i of b to sum i (b holds at most the sums' elements).
func (s *FillSum) Fill(b []byte, seed uint64, rank int) {
	n := len(b) / 4
	if n > len(s.k) {
		panic("internal error: dtype: FillSum.Fill of a buffer longer than its sums")
	}
	s.ranks++
	state := smMix(smMix(seed) + uint64(rank)*smGamma + 1)
	if v, ok := f32View(b); ok {
		fillF32Sum(v[:n], state, s.k[:n])
		return
	}
	for i := range n {
		state += smGamma
		k := f32GridK(state)
		stF32(b[4*i:], float32(k)*(1.0/(1<<fillExpF32)))
		s.k[i] += int32(k)
	}
}

// fillF32Sum is fillF32 that also adds each element's k to sums.
func fillF32Sum(v []float32, state uint64, sums []int32) {
	sums = sums[:len(v)]
	const scale = 1.0 / (1 << fillExpF32)
	i, state := fillF32SumVec(v, state, sums)
	for ; i+4 <= len(v); i += 4 {
		w, a := v[i:i+4:i+4], sums[i:i+4:i+4]
		k0, k1 := f32GridK(state+smGamma), f32GridK(state+smGamma2)
		k2, k3 := f32GridK(state+smGamma3), f32GridK(state+smGamma4)
		w[0], w[1], w[2], w[3] = float32(k0)*scale, float32(k1)*scale, float32(k2)*scale, float32(k3)*scale
		a[0] += int32(k0)
		a[1] += int32(k1)
		a[2] += int32(k2)
		a[3] += int32(k3)
		state += smGamma4
	}
	for ; i < len(v); i++ {
		state += smGamma
		k := f32GridK(state)
		v[i] = float32(k) * scale
		sums[i] += int32(k)
	}
}

// f32GridK is the k of f32Grid(z).
func f32GridK(z uint64) int64 {
	z = (z ^ z>>30) * smMul1
	z = (z ^ z>>27) * smMul2
	return int64(z>>(63-fillExpF32)) - 1<<fillExpF32
}

// Reduce writes into dst the elements [lo, lo+len(dst)/4) of what
// Reduce(r, F32, dst, inputs) writes for the buffers filled (as
// inputs[rank], each extended or cut to the sums' length), without
// reading them. It reports false, writing nothing, for a reduction other
// than Sum and Avg: the caller then reduces the buffers.
func (s *FillSum) Reduce(r RedOp, dst []byte, lo int) bool {
	if r != Sum && r != Avg || s.ranks == 0 {
		return false
	}
	n := len(dst) / 4
	k := s.k[lo : lo+n]
	const scale = 1.0 / (1 << fillExpF32)
	p := float64(s.ranks)
	if v, ok := f32View(dst[:4*n]); ok && r == Sum {
		v = v[:n]
		for j, x := range k {
			v[j] = float32(float64(x) * scale)
		}
		return true
	}
	for j, x := range k {
		acc := float64(x) * scale
		if r == Avg {
			acc /= p
		}
		stF32(dst[4*(j):], float32(acc))
	}
	return true
}
