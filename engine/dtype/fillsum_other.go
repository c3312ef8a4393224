//go:build !amd64

package dtype

// fillF32SumVec writes nothing here: fillF32Sum's scalar loop does all
// (see fillsum_amd64.go).
func fillF32SumVec(v []float32, state uint64, sums []int32) (int, uint64) {
	return 0, state
}

// fillVector: there is no vector loop here.
var fillVector = false
