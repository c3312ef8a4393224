package dtype

// Convert converts the len(dst)/dd.Size() elements of dst from src, which
// holds elements of type sd and must be at least that long. Floats convert
// to floats with round-to-nearest-even (NaN stays NaN); floats convert to
// integers truncating toward zero and saturating at the range (NaN → 0);
// integers convert to floats exactly where representable, otherwise rounded
// to nearest even; integers convert to integers by wrapping (keeping the low
// bits, as a C cast). Convert does not allocate. dst and src must not
// overlap unless dd == sd.
func Convert(dst []byte, dd DType, src []byte, sd DType) {
	dsz, ssz := dd.Size(), sd.Size()
	if dsz == 0 {
		panic(badDType(dd))
	}
	if ssz == 0 {
		panic(badDType(sd))
	}
	n := len(dst) / dsz
	need("Convert", "src", src, n*ssz)
	src = src[:n*ssz]
	if dd == sd {
		copy(dst, src)
		return
	}
	// Fast paths between the common float types.
	switch {
	case sd == F32 && dd == F64:
		for i := range n {
			stF64(dst[8*i:8*i+8], float64(ldF32(src[4*i:4*i+4])))
		}
		return
	case sd == F64 && dd == F32:
		for i := range n {
			stF32(dst[4*i:4*i+4], float32(ldF64(src[8*i:8*i+8])))
		}
		return
	case sd == F32 && dd == F16:
		for i := range n {
			stF16(dst[2*i:2*i+2], ldF32(src[4*i:4*i+4]))
		}
		return
	case sd == F32 && dd == BF16:
		for i := range n {
			stBF16(dst[2*i:2*i+2], ldF32(src[4*i:4*i+4]))
		}
		return
	case sd == F16 && dd == F32:
		for i := range n {
			stF32(dst[4*i:4*i+4], ldF16(src[2*i:2*i+2]))
		}
		return
	case sd == BF16 && dd == F32:
		for i := range n {
			stF32(dst[4*i:4*i+4], ldBF16(src[2*i:2*i+2]))
		}
		return
	}
	switch {
	case sd.IsFloat():
		// Every float value is exact as a float64, and Put rounds (or
		// truncates and saturates) once.
		for i := range n {
			Put(dd, dst, i, Get(sd, src, i))
		}
	default:
		// Integers go through int64 exactly; PutInt wraps or rounds once.
		for i := range n {
			PutInt(dd, dst, i, GetInt(sd, src, i))
		}
	}
}
