package selftest

// oddSide writes a side computation that is odd but legal: integer tile
// arithmetic (wrapping, truncating division by non-zero scalars and
// tiles), conversions, empty tiles, float division by zero, and stores
// into scratch memory. It changes nothing of the collective's result but
// costs math, loads and stores: --timing-only must simulate it exactly as
// the full run does. With zeroDiv it also divides an integer tile by a
// tile of zeros: a ZeroDivision in a full run, which --timing-only (no
// values) refuses (TimingOnly), as it refuses any integer Tile ÷ Tile.
func (g *gen) oddSide(e *emitter, zeroDiv bool) {
	k := 1 + g.intn(300)
	it := pick(g, "i32", "i64", "u8")
	e.l("# An odd but legal side computation (integer tiles).")
	e.l("junk = tl.alloc(%d, %q, %q)", k, it, pick(g, "tcm", "sram", "hbm"))
	e.l("a = tl.full(%d, %d, %q)", k, 1+g.intn(100), it)
	e.l("b = tl.full(%d, %d, %q)", k, 1+g.intn(9), it)
	e.l("q = (a * %d - %d) / b", 1+g.intn(5), g.intn(3))
	e.l("q = q / %d + a / (b + b)", 1+g.intn(7))
	if it == "u8" {
		e.l("q = q + tl.full(%d, 250, \"u8\") + 17  # wraps", k)
	} else {
		e.l("q = q * %d - (1 << 20)", 1+g.intn(1000))
	}
	e.l("q = tl.maximum(q, tl.minimum(a, b))")
	e.l("f = q.astype(\"f32\") / 0.0")
	e.l("tl.store(junk, q)")
	e.l("fz = tl.alloc(%d, \"f32\", \"hbm\")", k)
	e.l("tl.wait(tl.store_async(fz, f - f.astype(\"f64\").astype(\"f32\")))")
	e.l("tl.store(junk.slice(0, 0), tl.zeros(0, %q) / tl.full(0, 1, %q))", it, it)
	if g.c.DType == "i32" || g.c.DType == "i64" || g.c.DType == "u8" {
		// Integer data: divide the collective's result (read back, its
		// stores waited for) by a scalar and a tile that are not zero.
		e.block("if n > 0:", func() {
			e.l("got = tl.fetch(recvbuf)")
			e.l("side = tl.alloc(n, dt, \"hbm\")")
			e.l("tl.store(side, got / %d - got / tl.full(n, %d, dt))", 1+g.intn(9), 1+g.intn(9))
		})
	}
	if zeroDiv {
		e.l("tl.store(junk, a / tl.zeros(%d, %q))  # ZeroDivision (timing-only cannot tell)", k, it)
	}
	g.note("odd side computation (%s%s)", it, map[bool]string{true: ", dividing by a zero tile", false: ""}[zeroDiv])
}
