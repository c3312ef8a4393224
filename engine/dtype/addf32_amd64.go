package dtype

// addF32 is dst[i] = a[i] + b[i] over dst (a and b at least as long), in
// groups of four elements in order (each group stored before the next is
// read, as the portable loop does): SSE's ADDPS, part of every amd64
// processor, adds four lanes in one instruction with the scalar addition's
// bits, where Go's compiler emits one ADDSS per element. The sums of a
// verified 64-rank ring (hundreds of megabytes, in phase 1 and again in
// the replay) took about 8 instructions per element in Go.
func addF32(dst, a, b []float32) {
	n := len(dst) &^ 3
	if n > 0 {
		_, _ = a[n-1], b[n-1]
		addF32Groups(&dst[0], &a[0], &b[0], n/4)
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] + b[i]
	}
}

//go:noescape
func addF32Groups(dst, a, b *float32, groups int)
