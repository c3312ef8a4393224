//go:build !amd64

package dtype

// addF32 is dst[i] = a[i] + b[i] over dst (a and b at least as long): see
// addf32_amd64.go for the vector form.
func addF32(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	// Eight elements per iteration: the reductions of a verified run add
	// hundreds of megabytes, twice (phase 1 and the replay), and the
	// loop's own instructions (its bounds checks) were half of each
	// element's at one element, a fifth at four.
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		d, x, y := (*[8]float32)(dst[i:i+8]), (*[8]float32)(a[i:i+8]), (*[8]float32)(b[i:i+8])
		d[0], d[1], d[2], d[3] = x[0]+y[0], x[1]+y[1], x[2]+y[2], x[3]+y[3]
		d[4], d[5], d[6], d[7] = x[4]+y[4], x[5]+y[5], x[6]+y[6], x[7]+y[7]
	}
	for ; i < len(dst); i++ {
		dst[i] = a[i] + b[i]
	}
}
