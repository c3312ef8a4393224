package dtype

// Binary computes dst[i] = a[i] op b[i] for the len(dst)/d.Size() elements
// of dst; a and b must be at least as long. dst may alias a or b.
//
// Floats follow IEEE 754 (f16/bf16 computed in float32 and rounded once);
// Max/Min propagate NaN. Integers wrap on overflow (u8 too), divide
// truncating toward zero, and x/0 yields 0.
//
// Binary does not allocate; the dtype and op are switched on once per call.
func Binary(op Op, d DType, dst, a, b []byte) {
	checkOp(op)
	sz := d.Size()
	if sz == 0 {
		panic(badDType(d))
	}
	n := len(dst) - len(dst)%sz
	need("Binary", "a", a, n)
	need("Binary", "b", b, n)
	switch d {
	case F32:
		binF32(op, dst, a, b)
	case F64:
		binF64(op, dst, a, b)
	case I32:
		binI32(op, dst, a, b)
	case I64:
		binI64(op, dst, a, b)
	case F16:
		binF16(op, dst, a, b)
	case BF16:
		binBF16(op, dst, a, b)
	case U8:
		binU8(op, dst, a, b)
	}
}

// scalarChunk is the size of the on-stack buffer holding the broadcast
// scalar in BinaryScalar; a multiple of every element size.
const scalarChunk = 512

// BinaryScalar computes dst[i] = a[i] op s, or s op a[i] when scalarLeft, for
// the len(dst)/d.Size() elements of dst. Float dtypes use s, first converted
// to d as Put does; integer dtypes use si, wrapped to d's width as PutInt
// does. The result equals Binary with a second operand full of that value.
// dst may alias a. It does not allocate.
func BinaryScalar(op Op, d DType, dst, a []byte, s float64, si int64, scalarLeft bool) {
	checkOp(op)
	sz := d.Size()
	if sz == 0 {
		panic(badDType(d))
	}
	// Broadcast the scalar into a stack buffer and reuse Binary's
	// specialised loops chunk by chunk.
	var buf [scalarChunk]byte
	if d.IsFloat() {
		Put(d, buf[:], 0, s)
	} else {
		PutInt(d, buf[:], 0, si)
	}
	for n := sz; n < len(buf); n *= 2 {
		copy(buf[n:], buf[:n])
	}
	n := len(dst) - len(dst)%sz
	need("BinaryScalar", "a", a, n)
	for off := 0; off < n; off += scalarChunk {
		end := min(off+scalarChunk, n)
		c := buf[:end-off]
		if scalarLeft {
			Binary(op, d, dst[off:end], c, a[off:end])
		} else {
			Binary(op, d, dst[off:end], a[off:end], c)
		}
	}
}

// The loops below re-slice a and b to the length of dst (Binary checked
// they are long enough), so the compiler knows the three lengths are equal.

func binF32(op Op, dst, a, b []byte) {
	n := len(dst) &^ 3
	dst, a, b = dst[:n], a[:n], b[:n]
	if dv, ok := f32View(dst); ok {
		if av, ok := f32View(a); ok {
			if bv, ok := f32View(b); ok {
				binF32Native(op, dv, av, bv)
				return
			}
		}
	}
	switch op {
	case Add:
		for i := 0; i+4 <= len(dst); i += 4 {
			stF32(dst[i:i+4], ldF32(a[i:i+4])+ldF32(b[i:i+4]))
		}
	case Sub:
		for i := 0; i+4 <= len(dst); i += 4 {
			stF32(dst[i:i+4], ldF32(a[i:i+4])-ldF32(b[i:i+4]))
		}
	case Mul:
		for i := 0; i+4 <= len(dst); i += 4 {
			stF32(dst[i:i+4], ldF32(a[i:i+4])*ldF32(b[i:i+4]))
		}
	case Div:
		for i := 0; i+4 <= len(dst); i += 4 {
			stF32(dst[i:i+4], ldF32(a[i:i+4])/ldF32(b[i:i+4]))
		}
	case Max:
		for i := 0; i+4 <= len(dst); i += 4 {
			stF32(dst[i:i+4], max(ldF32(a[i:i+4]), ldF32(b[i:i+4])))
		}
	case Min:
		for i := 0; i+4 <= len(dst); i += 4 {
			stF32(dst[i:i+4], min(ldF32(a[i:i+4]), ldF32(b[i:i+4])))
		}
	}
}

// binF32Native is binF32 on in-place views (f32View): the same float32
// arithmetic without decoding. It is not one generic function with binU8's
// loops: measured, the generic version ran Add at half the speed (Go's
// generic code reaches the element operations through a dictionary).
func binF32Native(op Op, dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	switch op {
	case Add:
		addF32(dst, a, b)
	case Sub:
		for i := range dst {
			dst[i] = a[i] - b[i]
		}
	case Mul:
		for i := range dst {
			dst[i] = a[i] * b[i]
		}
	case Div:
		for i := range dst {
			dst[i] = a[i] / b[i]
		}
	case Max:
		for i := range dst {
			dst[i] = max(a[i], b[i])
		}
	case Min:
		for i := range dst {
			dst[i] = min(a[i], b[i])
		}
	}
}

func binF64(op Op, dst, a, b []byte) {
	n := len(dst) &^ 7
	dst, a, b = dst[:n], a[:n], b[:n]
	switch op {
	case Add:
		for i := 0; i+8 <= len(dst); i += 8 {
			stF64(dst[i:i+8], ldF64(a[i:i+8])+ldF64(b[i:i+8]))
		}
	case Sub:
		for i := 0; i+8 <= len(dst); i += 8 {
			stF64(dst[i:i+8], ldF64(a[i:i+8])-ldF64(b[i:i+8]))
		}
	case Mul:
		for i := 0; i+8 <= len(dst); i += 8 {
			stF64(dst[i:i+8], ldF64(a[i:i+8])*ldF64(b[i:i+8]))
		}
	case Div:
		for i := 0; i+8 <= len(dst); i += 8 {
			stF64(dst[i:i+8], ldF64(a[i:i+8])/ldF64(b[i:i+8]))
		}
	case Max:
		for i := 0; i+8 <= len(dst); i += 8 {
			stF64(dst[i:i+8], max(ldF64(a[i:i+8]), ldF64(b[i:i+8])))
		}
	case Min:
		for i := 0; i+8 <= len(dst); i += 8 {
			stF64(dst[i:i+8], min(ldF64(a[i:i+8]), ldF64(b[i:i+8])))
		}
	}
}

func binI32(op Op, dst, a, b []byte) {
	n := len(dst) &^ 3
	dst, a, b = dst[:n], a[:n], b[:n]
	switch op {
	case Add:
		for i := 0; i+4 <= len(dst); i += 4 {
			stI32(dst[i:i+4], ldI32(a[i:i+4])+ldI32(b[i:i+4]))
		}
	case Sub:
		for i := 0; i+4 <= len(dst); i += 4 {
			stI32(dst[i:i+4], ldI32(a[i:i+4])-ldI32(b[i:i+4]))
		}
	case Mul:
		for i := 0; i+4 <= len(dst); i += 4 {
			stI32(dst[i:i+4], ldI32(a[i:i+4])*ldI32(b[i:i+4]))
		}
	case Div:
		for i := 0; i+4 <= len(dst); i += 4 {
			x, y := ldI32(a[i:i+4]), ldI32(b[i:i+4])
			var q int32 // x/0 = 0; MinInt32/-1 wraps to MinInt32 (Go defines it)
			if y != 0 {
				q = x / y
			}
			stI32(dst[i:i+4], q)
		}
	case Max:
		for i := 0; i+4 <= len(dst); i += 4 {
			stI32(dst[i:i+4], max(ldI32(a[i:i+4]), ldI32(b[i:i+4])))
		}
	case Min:
		for i := 0; i+4 <= len(dst); i += 4 {
			stI32(dst[i:i+4], min(ldI32(a[i:i+4]), ldI32(b[i:i+4])))
		}
	}
}

func binI64(op Op, dst, a, b []byte) {
	n := len(dst) &^ 7
	dst, a, b = dst[:n], a[:n], b[:n]
	switch op {
	case Add:
		for i := 0; i+8 <= len(dst); i += 8 {
			stI64(dst[i:i+8], ldI64(a[i:i+8])+ldI64(b[i:i+8]))
		}
	case Sub:
		for i := 0; i+8 <= len(dst); i += 8 {
			stI64(dst[i:i+8], ldI64(a[i:i+8])-ldI64(b[i:i+8]))
		}
	case Mul:
		for i := 0; i+8 <= len(dst); i += 8 {
			stI64(dst[i:i+8], ldI64(a[i:i+8])*ldI64(b[i:i+8]))
		}
	case Div:
		for i := 0; i+8 <= len(dst); i += 8 {
			x, y := ldI64(a[i:i+8]), ldI64(b[i:i+8])
			var q int64
			if y != 0 {
				q = x / y
			}
			stI64(dst[i:i+8], q)
		}
	case Max:
		for i := 0; i+8 <= len(dst); i += 8 {
			stI64(dst[i:i+8], max(ldI64(a[i:i+8]), ldI64(b[i:i+8])))
		}
	case Min:
		for i := 0; i+8 <= len(dst); i += 8 {
			stI64(dst[i:i+8], min(ldI64(a[i:i+8]), ldI64(b[i:i+8])))
		}
	}
}

func binU8(op Op, dst, a, b []byte) {
	n := len(dst)
	a, b = a[:n], b[:n]
	switch op {
	case Add:
		for i := range dst {
			dst[i] = a[i] + b[i]
		}
	case Sub:
		for i := range dst {
			dst[i] = a[i] - b[i]
		}
	case Mul:
		for i := range dst {
			dst[i] = a[i] * b[i]
		}
	case Div:
		for i := range dst {
			var q uint8
			if b[i] != 0 {
				q = a[i] / b[i]
			}
			dst[i] = q
		}
	case Max:
		for i := range dst {
			dst[i] = max(a[i], b[i])
		}
	case Min:
		for i := range dst {
			dst[i] = min(a[i], b[i])
		}
	}
}

// opF32 is the float32 arithmetic shared by the 16-bit formats, whose cost
// is dominated by the conversions, so one loop per dtype suffices.
func opF32(op Op, x, y float32) float32 {
	switch op {
	case Add:
		return x + y
	case Sub:
		return x - y
	case Mul:
		return x * y
	case Div:
		return x / y
	case Max:
		return max(x, y)
	}
	return min(x, y)
}

func binF16(op Op, dst, a, b []byte) {
	n := len(dst) &^ 1
	dst, a, b = dst[:n], a[:n], b[:n]
	for i := 0; i+2 <= len(dst); i += 2 {
		stF16(dst[i:i+2], opF32(op, ldF16(a[i:i+2]), ldF16(b[i:i+2])))
	}
}

func binBF16(op Op, dst, a, b []byte) {
	n := len(dst) &^ 1
	dst, a, b = dst[:n], a[:n], b[:n]
	for i := 0; i+2 <= len(dst); i += 2 {
		stBF16(dst[i:i+2], opF32(op, ldBF16(a[i:i+2]), ldBF16(b[i:i+2])))
	}
}
