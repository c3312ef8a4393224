package selftest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// GenOptions change what Generate makes.
type GenOptions struct {
	// MinimalFlush leaves out, in about half of the cases, the tl.flush
	// between passes that the model's rules do not ask for (passes on
	// disjoint buffers). Without a flush, a fused primitive of a pass may
	// store into a TCM staging slot that a slow send of the previous pass
	// still reads: the case that found the staging store writing bytes it
	// had given back (fixed). On in the tests (DefaultGen).
	MinimalFlush bool
	// ZeroDivision lets the odd kernels divide an integer tile by a tile
	// of zeros: a ZeroDivision (exit 4) in a full run, which --timing-only
	// (no values) refuses with TimingOnly, as any integer Tile ÷ Tile. On
	// in the tests (DefaultGen).
	ZeroDivision bool
}

// DefaultGen is what the tests generate: every kind of case.
func DefaultGen() GenOptions { return GenOptions{MinimalFlush: true, ZeroDivision: true} }

// elemSize is the size of each dtype the generator uses.
var elemSize = map[string]int{"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i32": 4, "i64": 8, "u8": 1}

var dtypes = []string{"f32", "f16", "bf16", "f64", "i32", "i64", "u8"}

// reduces are the collectives with a reduction; perRank those whose count
// is per rank (a buffer holds world_size chunks of count elements).
var (
	reduces = map[string]bool{"allreduce": true, "reduce_scatter": true, "reduce": true}
	perRank = map[string]bool{"allgather": true, "reduce_scatter": true, "alltoall": true}
)
var redops = []string{"sum", "prod", "max", "min", "avg"}

// gen holds what one case's generation has decided.
type gen struct {
	r        *rand.Rand
	c        *Case
	esize    int
	slot     int    // slot_size in force
	nSlots   int    // n_slots in force
	channels int    // channels in force
	kind     string // buffer_kind in force
	rows     int    // mesh_2d shape
	cols     int
	custom   string // custom topology: "skip" (one-way ring) or "named"
	skip     int    // the skip ring's stride
	funcs    emitter
	nfn      int
	notes    []string
	// plainSent is set when a stage sent from a user or staging buffer
	// with a plain send after its first step (its source is then in
	// flight past the stage's end).
	plainSent bool
	minFlush  bool
	zeroDiv   bool
	// needCopier: the kernel uses the copier thread function.
	needCopier bool
}

// Generate makes the case of seed: a machine, a configuration and a
// kernel computing its collective correctly by the model's rules.
func Generate(seed uint64, o GenOptions) *Case {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x5eed5e1f7e57)), c: &Case{Seed: seed, Opts: o}}
	g.minFlush = o.MinimalFlush && g.r.IntN(2) == 0
	g.c.NoFlush = g.minFlush
	g.c.Odd = g.r.IntN(100) < 15
	g.zeroDiv = g.c.Odd && o.ZeroDivision
	g.c.ZeroDiv = g.zeroDiv
	g.config()
	g.c.Source = g.kernel()
	return g.c
}

func (g *gen) intn(n int) int      { return g.r.IntN(n) }
func (g *gen) chance(pct int) bool { return g.r.IntN(100) < pct }

func pick[T any](g *gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

func (g *gen) set(key string, v any) { g.c.Sets = append(g.c.Sets, fmt.Sprintf("%s=%v", key, v)) }

func (g *gen) note(format string, a ...any) { g.notes = append(g.notes, fmt.Sprintf(format, a...)) }

// config picks the machine, the topology, the world size, the run's
// settings and the bench's parameters.
func (g *gen) config() {
	c := g.c
	sips, cubes, pes := 1, 4, 8
	if g.chance(60) {
		sips = pick(g, 1, 1, 1, 2)
		cubes = pick(g, 1, 2, 4)
		pes = pick(g, 2, 4, 8)
		if sips != 1 {
			g.set("system.sips", sips)
		}
		if cubes != 4 {
			g.set("system.cubes_per_sip", cubes)
		}
		if pes != 8 {
			g.set("system.pes_per_cube", pes)
		}
	}
	total := sips * cubes * pes
	c.Topology = pick(g, "ring_1d", "ring_1d", "ring_1d_unidir", "mesh_2d", "mesh_2d", "tree_binary", "full_mesh", "custom")
	maxWS := min(total, 16)
	if c.Topology == "full_mesh" {
		maxWS = min(total, 8)
	}
	switch {
	case g.chance(10):
		c.WorldSize = 1 + g.intn(min(maxWS, 3))
	default:
		c.WorldSize = 2 + g.intn(max(1, maxWS-1))
		c.WorldSize = min(c.WorldSize, maxWS)
	}
	ws := c.WorldSize
	if c.Topology == "custom" {
		g.custom = "skip"
		if ws >= 3 && g.chance(50) {
			g.custom = "named"
		}
		if g.custom == "skip" {
			var ks []int
			for k := 1; k < max(ws, 2); k++ {
				if gcd(k, ws) == 1 {
					ks = append(ks, k)
				}
			}
			g.skip = ks[g.intn(len(ks))]
		}
	}
	if c.Topology == "mesh_2d" {
		var shapes [][2]int
		for r := 1; r <= ws; r++ {
			if ws%r == 0 {
				shapes = append(shapes, [2]int{r, ws / r})
			}
		}
		s := shapes[g.intn(len(shapes))]
		g.rows, g.cols = s[0], s[1]
		g.set("defaults.mesh_shape", fmt.Sprintf("[%d, %d]", g.rows, g.cols))
	}
	if g.chance(50) && ws > 1 {
		perm := g.r.Perm(total)[:ws]
		parts := make([]string, ws)
		for i, p := range perm {
			parts[i] = strconv.Itoa(p)
		}
		g.set("system.placement", "["+strings.Join(parts, ", ")+"]")
	}

	c.Collective = "allreduce"
	switch c.Topology {
	case "ring_1d", "ring_1d_unidir", "custom":
		c.Collective = pick(g, "allreduce", "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce")
	case "tree_binary":
		c.Collective = pick(g, "allreduce", "allreduce", "broadcast", "reduce")
	case "full_mesh":
		c.Collective = pick(g, "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall")
	}
	if c.Collective == "broadcast" || c.Collective == "reduce" {
		c.Root = g.intn(ws)
		if c.Topology == "tree_binary" {
			c.Root = 0 // the tree's root
		}
	}
	c.DType = pick(g, dtypes...)
	c.RedOp = pick(g, redops...)
	if !reduces[c.Collective] {
		c.RedOp = "sum"
	}
	g.esize = elemSize[c.DType]
	c.InPlace = g.chance(35)
	c.DataSpace = pick(g, "hbm", "hbm", "hbm", "sram", "tcm")
	c.InputSeed = uint64(1 + g.intn(1000))
	if g.chance(50) {
		c.JitterSeed = uint64(1 + g.intn(1<<30))
	}

	g.nSlots = pick(g, 1, 2, 3, 4, 8, 8)
	g.slot = pick(g, 64, 128, 256, 512, 1024, 4096, 4096)
	g.channels = 1
	if c.Topology != "custom" && g.chance(30) {
		g.channels = pick(g, 2, 3)
	}
	g.kind = pick(g, "tcm", "tcm", "sram", "hbm")
	// The rx rings of a PE stay within a quarter of its TCM (the bench's
	// buffers and the kernel's staging need the rest).
	dirs := map[string]int{"ring_1d": 2, "ring_1d_unidir": 2, "mesh_2d": 4, "tree_binary": 3, "full_mesh": max(1, ws-1), "custom": 2}[c.Topology]
	for g.kind == "tcm" && dirs*g.channels*g.nSlots*g.slot > 256<<10 {
		if g.slot > 256 {
			g.slot /= 2
		} else {
			g.nSlots = max(1, g.nSlots/2)
		}
	}
	if g.nSlots != 8 {
		g.set("defaults.n_slots", g.nSlots)
	}
	if g.slot != 4096 {
		g.set("defaults.slot_size", g.slot)
	}
	if g.kind != "tcm" {
		g.set("defaults.buffer_kind", g.kind)
	}
	if g.channels != 1 {
		g.set("defaults.channels", g.channels)
	}
	if g.chance(40) {
		g.set("defaults.backpressure", "poll")
		if g.chance(50) {
			g.set("defaults.poll_interval_ns", pick(g, 1, 3, 25, 100))
		}
	}
	if g.chance(25) {
		g.set("defaults.vc_chunk_size", pick(g, 64, 1024, 8192))
	}
	if g.chance(20) {
		g.set("defaults.vc_weights", fmt.Sprintf("{compute: %d, comm: %d}", 1+g.intn(4), 1+g.intn(4)))
	}
	if g.chance(20) {
		g.set("defaults.ipcq_overhead_ns", pick(g, 1, 5, 40, 300))
	}
	if g.chance(30) {
		g.set("system.links.ucie.bandwidth_gbps", pick(g, 4, 16, 256))
	}
	if g.chance(15) {
		g.set("system.links.pcie.latency_ns", pick(g, 50, 2000))
	}

	maxBytes := 48 << 10
	if c.DataSpace == "tcm" {
		maxBytes = 16 << 10
	}
	if perRank[c.Collective] {
		maxBytes = max(64, maxBytes/ws) // a buffer holds world_size chunks
	}
	maxElems := maxBytes / g.esize
	switch n := g.intn(10); {
	case n < 3:
		c.Count = int64(g.intn(3*ws + 2))
	case n < 7:
		c.Count = int64(1 + g.intn(min(2000, maxElems)))
	default:
		c.Count = int64(1 + g.intn(maxElems))
	}
	g.note("%s %s world %d count %d %s %s", c.Collective, c.Topology, ws, c.Count, c.DType, c.RedOp)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// ringStage is one ring of a lane: p ranks, this rank's position along
// out (a Starlark expression of rank), the directions (expressions).
type ringStage struct {
	p       int
	pos     string
	out, in string
	order   []int // rank at each position along out (one-stage lanes)
}

// lane is one thread's share of the work: a chain of rings, a tree or a
// full-mesh exchange, on directions no other lane uses.
type lane struct {
	kind   string // "rings", "tree", "fm"
	stages []ringStage
	ch     int // channel of a tree or full-mesh lane
	name   string
}

// chDir is the Starlark expression of channel ch of direction d.
func chDir(d string, ch int) string {
	if ch == 0 {
		return strconv.Quote(d)
	}
	if ch == 1 {
		return strconv.Quote(d + "_1") // as tl.channel names it
	}
	return fmt.Sprintf("tl.channel(%q, %d)", d, ch)
}

// forward and backward are the ranks at each position of a ring of p
// ranks along r+1 and along r-1.
func forward(p int) []int {
	o := make([]int, p)
	for q := range o {
		o[q] = q
	}
	return o
}

func backward(p int) []int {
	o := make([]int, p)
	for q := range o {
		o[q] = (p - q) % p
	}
	return o
}

// lanes lists the lanes the topology offers (their directions disjoint).
func (g *gen) lanes() []lane {
	ws := g.c.WorldSize
	var out []lane
	for ch := 0; ch < g.channels; ch++ {
		switch g.c.Topology {
		case "ring_1d", "ring_1d_unidir":
			if ws == 1 {
				break
			}
			out = append(out, lane{kind: "rings", name: fmt.Sprintf("ring E ch%d", ch), stages: []ringStage{{ws, "rank", chDir("E", ch), chDir("W", ch), forward(ws)}}})
			if g.c.Topology == "ring_1d" {
				out = append(out, lane{kind: "rings", name: fmt.Sprintf("ring W ch%d", ch), stages: []ringStage{{ws, "(world_size - rank) % world_size", chDir("W", ch), chDir("E", ch), backward(ws)}}})
			}
		case "mesh_2d":
			R, C := g.rows, g.cols
			row := ringStage{C, fmt.Sprintf("rank %% %d", C), chDir("E", ch), chDir("W", ch), nil}
			col := ringStage{R, fmt.Sprintf("rank // %d", C), chDir("S", ch), chDir("N", ch), nil}
			rrow := ringStage{C, fmt.Sprintf("(%d - rank %% %d) %% %d", C, C, C), chDir("W", ch), chDir("E", ch), nil}
			rcol := ringStage{R, fmt.Sprintf("(%d - rank // %d) %% %d", R, C, R), chDir("N", ch), chDir("S", ch), nil}
			out = append(out, lane{kind: "rings", name: fmt.Sprintf("rows then columns ch%d", ch), stages: []ringStage{row, col}})
			out = append(out, lane{kind: "rings", name: fmt.Sprintf("columns then rows (reversed) ch%d", ch), stages: []ringStage{rcol, rrow}})
		case "tree_binary":
			out = append(out, lane{kind: "tree", ch: ch, name: fmt.Sprintf("tree ch%d", ch)})
		case "full_mesh":
			out = append(out, lane{kind: "fm", ch: ch, name: fmt.Sprintf("full mesh ch%d", ch)})
		case "custom":
			if ws == 1 {
				break
			}
			if g.custom == "skip" {
				// Position along E: rank r is r * k^-1 (mod p) steps after 0.
				inv := 1
				for inv < ws && (inv*g.skip)%ws != 1%ws {
					inv++
				}
				order := make([]int, ws)
				for q := range order {
					order[q] = q * g.skip % ws
				}
				out = append(out, lane{kind: "rings", name: fmt.Sprintf("skip ring %d", g.skip), stages: []ringStage{{ws, fmt.Sprintf("rank * %d %% world_size", inv), `"E"`, `"W"`, order}}})
			} else {
				out = append(out, lane{kind: "rings", name: "named ring nx", stages: []ringStage{{ws, "rank", `"nx"`, `"pv"`, forward(ws)}}})
				out = append(out, lane{kind: "rings", name: "named ring pv", stages: []ringStage{{ws, "(world_size - rank) % world_size", `"pv"`, `"nx"`, backward(ws)}}})
			}
		}
	}
	return out
}

// weights are n random chunk weights (some may be 0) and their sum (> 0).
func (g *gen) weights(n int) (string, int) {
	w := make([]string, n)
	total := 0
	for i := range w {
		v := pick(g, 0, 1, 1, 2, 3, 5)
		if g.chance(50) {
			v = 1
		}
		w[i] = strconv.Itoa(v)
		total += v
	}
	if total == 0 {
		w[0], total = "1", 1
	}
	return "[" + strings.Join(w, ", ") + "]", total
}

// kernel writes the module.
func (g *gen) kernel() string {
	c := g.c
	all := g.lanes()
	nl := 1
	if len(all) > 1 {
		nl = 1 + g.intn(min(3, len(all)))
	}
	g.r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	lanes := all[:min(nl, len(all))]
	if len(lanes) == 0 {
		// One rank on a ring: nothing to send.
		lanes = []lane{{kind: "rings", name: "one rank", stages: []ringStage{{1, "0", "", "", []int{0}}}}}
	}
	passes := pick(g, 1, 1, 2, 3, 5)
	coll := c.Collective
	staging := pick(g, "", "", "inplace", "out")
	switch coll {
	case "allgather", "reduce_scatter", "alltoall":
		staging = "" // lists of chunks
	case "reduce":
		if staging == "inplace" {
			staging = "out" // the other ranks' recvbuf stays as it was
		}
	}
	stageSpace := pick(g, "tcm", "sram", "hbm")
	if int64(g.esize)*c.Count > 16<<10 && stageSpace == "tcm" {
		stageSpace = "hbm"
	}
	tmpSpace := pick(g, "tcm", "sram", "hbm")
	if int64(g.esize)*c.Count > 16<<10 && tmpSpace == "tcm" {
		tmpSpace = "sram"
	}
	var names []string
	for _, l := range lanes {
		names = append(names, l.name)
	}
	g.note("lanes [%s], %d pass(es), staging %q in %s, tmp in %s, n_slots %d slot_size %d channels %d buffer_kind %s", strings.Join(names, "; "), passes, staging, stageSpace, tmpSpace, g.nSlots, g.slot, g.channels, g.kind)
	if c.Root != 0 {
		g.note("root %d", c.Root)
	}

	laneFns := make([]string, len(lanes))
	for i, l := range lanes {
		laneFns[i] = g.laneFunc(i, l)
	}

	var e emitter // the kernel function, written first (it adds notes)
	lw, lt := g.weights(len(lanes))
	sig := "def kernel(sendbuf, recvbuf, rank, world_size, tl):"
	root := "0"
	if coll == "broadcast" || coll == "reduce" {
		sig = "def kernel(sendbuf, recvbuf, rank, world_size, tl, root = 0):"
		root = "root"
	}
	e.block(sig, func() {
		e.l("dt = sendbuf.dtype")
		e.l("n = len(recvbuf)")
		e.l("tmps = [tl.alloc(max(len(sendbuf), n) + 1, dt, %q) for _ in range(%d)]", tmpSpace, len(lanes))
		if staging != "" {
			e.l("stage = tl.alloc(n // %d + 1, dt, %q)", passes, stageSpace)
		}
		switch coll {
		case "allgather":
			e.l("SRC, DST = sendbuf, [recvbuf.slice(r * len(sendbuf), len(sendbuf)) for r in range(world_size)]")
		case "reduce_scatter":
			e.l("SRC, DST = [sendbuf.slice(r * n, n) for r in range(world_size)], recvbuf")
		case "alltoall":
			e.l("c = len(sendbuf) // world_size")
			e.l("SRC, DST = [sendbuf.slice(r * c, c) for r in range(world_size)], [recvbuf.slice(r * c, c) for r in range(world_size)]")
		default:
			e.l("SRC, DST = sendbuf, recvbuf")
		}
		g.sprinkle(&e, "rank")
		loop := passes > 1 && g.chance(50)
		body := func(i string) {
			e.l("src = passpart(SRC, %d, %s)", passes, i)
			e.l("dst = passpart(DST, %d, %s)", passes, i)
			switch staging {
			case "inplace":
				e.l("s = stage.slice(0, len(src))")
				g.copyIn(&e, "s", "src")
				e.l("work_src, work_dst = s, s")
			case "out":
				e.l("s = stage.slice(0, len(src))")
				g.copyIn(&e, "s", "src")
				e.l("work_src, work_dst = s, dst")
			default:
				e.l("work_src, work_dst = src, dst")
			}
			e.l("lsrc = split(work_src, %s, %d)", lw, lt)
			e.l("ldst = split(work_dst, %s, %d)", lw, lt)
			var joins []string
			for k := 1; k < len(lanes); k++ {
				useEv := g.chance(50)
				ev := "None"
				if useEv {
					ev = fmt.Sprintf("ev%d", k)
					e.l("%s = tl.event(\"lane %d\")", ev, k)
				}
				e.l("h%d = tl.spawn(%s, lsrc[%d], ldst[%d], tmps[%d], rank, world_size, %s, %s)", k, laneFns[k], k, k, k, root, ev)
				if useEv {
					joins = append(joins, fmt.Sprintf("tl.wait(%s)", ev))
				}
				joins = append(joins, fmt.Sprintf("tl.wait(h%d)", k))
			}
			e.l("%s(tl, lsrc[0], ldst[0], tmps[0], rank, world_size, %s, None)", laneFns[0], root)
			for _, j := range joins {
				e.l("%s", j)
			}
			if staging == "inplace" {
				g.copyIn(&e, "dst", "s")
			}
		}
		between := func() {
			// A staging buffer is written again by the next pass: every
			// send that reads it, and the last stores into it, must be
			// done first. Passes on disjoint buffers need no flush.
			if staging != "" || !g.minFlush {
				e.l("tl.flush()")
			}
		}
		if loop {
			e.block(fmt.Sprintf("for i in range(%d):", passes), func() {
				if staging != "" || !g.minFlush {
					e.block("if i > 0:", between)
				}
				body("i")
			})
		} else {
			for i := 0; i < passes; i++ {
				if i > 0 {
					between()
				}
				body(strconv.Itoa(i))
			}
		}
		g.sprinkle(&e, "n")
		if c.Odd {
			g.oddSide(&e, g.zeroDiv)
		}
	})
	if g.needCopier {
		g.funcs.l("def copier(tl, dst, src, ev):")
		g.funcs.l("    tl.wait(tl.store_async(dst, tl.fetch(src)))")
		g.funcs.l("    tl.signal(ev)")
		g.funcs.l("")
	}
	return g.header() + g.funcs.String() + e.String()
}

// header writes the module's docstring, constants, helpers and
// neighbors().
func (g *gen) header() string {
	c := g.c
	var e emitter
	c.Summary = strings.Join(g.notes, "; ")
	e.l(`"""Generated by the kernbench self-test (seed %d): %s."""`, c.Seed, c.Summary)
	e.l("")
	e.l("TOPOLOGY = %q", c.Topology)
	e.l("COLLECTIVE = %q", c.Collective)
	e.l("")
	e.b.WriteString(prelude)
	e.l("")
	if c.Topology == "custom" {
		e.block("def neighbors(rank, world_size, neighbor_map):", func() {
			e.block("if world_size == 1:", func() { e.l("return {}") })
			if g.custom == "skip" {
				e.l("return {\"E\": (rank + %d) %% world_size}", g.skip)
			} else {
				e.l("%s", `return {"nx": (rank + 1) % world_size, "pv": (rank - 1) % world_size}`)
			}
		})
		e.l("")
	}
	return e.String()
}

// copyIn copies src into dst (same length) one of the ways a kernel can.
func (g *gen) copyIn(e *emitter, dst, src string) {
	switch g.intn(6) {
	case 5:
		// In a thread of its own, which signals an event once the copy is
		// in memory: the kernel goes on when the event is set.
		g.needCopier = true
		e.l("ev_c = tl.event(\"copied\")")
		e.l("hc = tl.spawn(copier, %s, %s, ev_c)", dst, src)
		e.l("tl.wait(ev_c)")
		e.l("tl.wait(hc)")
	case 0:
		e.l("tl.copy(%s, %s)", dst, src)
	case 1:
		e.l("tl.wait(tl.copy_async(%s, %s))", dst, src)
	case 2:
		e.l("tl.store(%s, tl.fetch(%s))", dst, src)
	case 3:
		e.l("tl.wait(tl.store_async(%s, tl.wait(tl.fetch_async(%s))))", dst, src)
	default:
		e.l("hc = tl.copy_async(%s, %s)", dst, src)
		e.l("tl.done(hc)")
		e.l("tl.wait(hc)")
	}
}

// sprinkle adds calls that change nothing: queries, markers.
func (g *gen) sprinkle(e *emitter, arg string) {
	switch g.intn(6) {
	case 0:
		e.l("tl.trace(\"mark\", v = %s)", arg)
	case 1:
		e.l("_ = (tl.time(), tl.program_id(0), tl.program_id(1), tl.directions(), tl.machine, tl.location(rank))")
	case 2:
		e.l("_ = (tl.slot_size, tl.n_slots, tl.buffer_kind, tl.channels, tl.redop, tl.world_size, tl.rank)")
	case 3:
		e.l("_ = [(d, tl.peer(d), tl.ready(d)) for d in tl.directions()]")
	}
}

// laneFunc writes lane i's function and returns its name. A lane's
// function takes (tl, src, dst, tmp, rank, world_size, root, ev): its part
// of the collective's buffers (views, or lists of views by rank for the
// chunked buffers of allgather, reduce_scatter and alltoall), tmp scratch
// of at least one buffer's length + 1 elements, the root of broadcast and
// reduce, and an event to signal at the end (or None).
func (g *gen) laneFunc(i int, l lane) string {
	name := fmt.Sprintf("lane_%d", i)
	var body emitter
	body.ind = 1
	coll := g.c.Collective
	switch {
	case coll == "allreduce" && l.kind == "rings":
		g.ringAllreduceLane(&body, l)
	case coll == "allreduce" && l.kind == "tree":
		body.l("%s(tl, src, dst, tmp, rank, world_size)", g.treeFunc(l.ch))
	case coll == "allreduce" && l.kind == "fm":
		body.l("%s(tl, src, dst, tmp, rank, world_size)", g.fullMeshFunc(l.ch))
	case l.kind == "rings":
		g.ringLane(&body, l)
	case l.kind == "tree":
		body.l("%s(tl, src, dst, tmp, rank, world_size)", g.treeOneWay(l.ch, coll))
	case l.kind == "fm":
		body.l("%s(tl, src, dst, tmp, rank, world_size, root)", g.fullMeshOther(l.ch, coll))
	}
	g.sprinkle(&body, "rank")
	body.block("if ev != None:", func() { body.l("tl.signal(ev)") })
	g.funcs.l("def %s(tl, src, dst, tmp, rank, world_size, root, ev):", name)
	g.funcs.b.WriteString(body.String())
	g.funcs.l("")
	return name
}

// ringAllreduceLane writes an allreduce lane of rings: src reduced into
// dst by each stage in turn.
func (g *gen) ringAllreduceLane(body *emitter, l lane) {
	// final: the last stage with more than one rank completes avg.
	last := -1
	for s, st := range l.stages {
		if st.p > 1 {
			last = s
		}
	}
	for s, st := range l.stages {
		from := "src"
		if s > 0 {
			from = "dst"
			if g.plainSent || !g.minFlush {
				body.l("tl.flush()")
			}
		}
		g.plainSent = false
		if st.p == 1 {
			body.block(fmt.Sprintf("if %s != dst:", from), func() { body.l("tl.copy(dst, %s)", from) })
			continue
		}
		fn := g.ringFunc(st.p, "ar")
		w, t := g.weights(st.p)
		final := "False"
		if s == last {
			final = "True"
		}
		body.l("%s(tl, cut(%s, %s, %d), cut(dst, %s, %d), %s, %s, %s, %s, tmp)", fn, from, w, t, w, t, st.pos, st.out, st.in, final)
	}
}

// ringLane writes a lane of one ring (ring_1d, ring_1d_unidir, custom)
// for the collectives other than allreduce.
func (g *gen) ringLane(body *emitter, l lane) {
	st := l.stages[0]
	p := st.p
	order := make([]string, len(st.order))
	for q, r := range st.order {
		order[q] = strconv.Itoa(r)
	}
	body.l("ORDER = [%s]  # the rank at each position along %s", strings.Join(order, ", "), st.out)
	body.l("pos = %s", st.pos)
	switch g.c.Collective {
	case "allgather":
		body.block("if src != dst[rank]:", func() { g.copyIn(body, "dst[rank]", "src") })
		if p > 1 {
			body.l("D = [dst[r] for r in ORDER]")
			body.l("%s(tl, D, D, pos, %s, %s, True, tmp)", g.ringFunc(p, "ag"), st.out, st.in)
		}
	case "reduce_scatter":
		if p == 1 {
			body.block("if src[rank] != dst:", func() { body.l("tl.copy(dst, src[rank])") })
			break
		}
		// The rank at position q completes the chunk of position q + 1:
		// there goes the chunk of the rank at position q.
		body.l("S = [src[ORDER[(q - 1) %% %d]] for q in range(%d)]", p, p)
		body.l("D = [dst if q == (pos + 1) %% %d else S[q] for q in range(%d)]", p, p)
		body.l("%s(tl, S, D, pos, %s, %s, True, tmp)", g.ringFunc(p, "rs"), st.out, st.in)
	case "broadcast":
		g.chainBroadcast(body, st)
	case "reduce":
		g.chainReduce(body, st)
	}
}

// pieceChoice picks a ring's message size: slot_size (written as
// tl.slot_size or left out) or a smaller multiple of the element size.
// It returns the expression of piece, the keyword argument to pass and
// whether messages are full slots (tl.recv(dst=) then works).
func (g *gen) pieceChoice() (expr string, kw string, full bool) {
	if g.chance(45) {
		if g.chance(50) {
			return "tl.slot_size", "", true
		}
		return "tl.slot_size", ", piece_bytes = piece", true
	}
	k := 1 + g.intn(g.slot/g.esize)
	p := k * g.esize
	if p == g.slot {
		return strconv.Itoa(p), ", piece_bytes = piece", true
	}
	return strconv.Itoa(p), ", piece_bytes = piece", false
}

// step writes one of the ways of sending buf on dir (one message of at
// most piece bytes per piece).
func (g *gen) send(e *emitter, dir, buf, kw string) {
	switch g.intn(5) {
	case 0, 1:
		e.l("tl.send(%s, %s%s)", dir, buf, kw)
	case 2:
		e.l("tl.wait(tl.send_async(%s, %s%s))", dir, buf, kw)
	case 3:
		e.l("hs = tl.send_async(%s, %s%s)", dir, buf, kw)
		e.l("tl.done(hs)")
		e.l("tl.wait(hs)")
	default:
		e.l("tl.send(%s, %s, nbytes = len(%s) * esize%s)", dir, buf, buf, kw)
	}
}

// recvDst writes a receive of whole slots into buf.
func (g *gen) recvDst(e *emitter, dir, buf string) {
	switch g.intn(3) {
	case 0:
		e.l("tl.recv(%s, dst = %s)", dir, buf)
	case 1:
		e.l("tl.wait(tl.recv_async(%s, dst = %s))", dir, buf)
	default:
		e.l("tl.recv(dir = %s, dst = %s)", dir, buf)
	}
}

// perMessageOK: reading received slots in place (tl.recv without dst)
// is only safe when they are in the PE's own TCM: a slow load from HBM
// could still be reading a slot its sender is refilling (StaleSlot).
func (g *gen) perMessageOK() bool { return g.kind == "tcm" }

// ringFunc writes a ring function for p ranks and returns its name. mode
// "ar": allreduce of the p chunks src[c] into dst[c] (position labels);
// "rs": reduce-scatter, the rank at position pos reduces chunk pos+1 of
// src into dst[pos+1]; "ag": allgather, dst[pos] (which src is) holds this
// rank's chunk and every other dst[c] receives the chunk of position c.
// Signature: (tl, src, dst, pos, out_dir, in_dir, final, tmp).
func (g *gen) ringFunc(p int, mode string) string {
	name, e, pieceExpr, kw, full := g.function("ring")
	avg := g.c.RedOp == "avg"
	budget := 1 + g.intn(g.nSlots)
	overlap := g.chance(50)
	e.block(fmt.Sprintf("def %s(tl, src, dst, pos, out_dir, in_dir, final, tmp):", name), func() {
		e.l("piece = %s", pieceExpr)
		e.l("esize = ELEM_SIZE[dst[0].dtype]")
		e.l("pe = piece // esize")
		e.l("most = max([len(c) for c in src + dst])")
		e.l("rounds = max(1, cdiv(cdiv(most * esize, piece), %d))", budget)
		e.l("S = views(src, rounds, 0)")
		// The next round's first send may start before this round's last
		// receive only in the background: the ring towards the next rank
		// may still hold this round's last messages.
		async := overlap || g.chance(60)
		first := func(buf string) {
			if async {
				e.l("h = tl.send_async(out_dir, %s%s)", buf, kw)
			} else {
				g.send(e, "out_dir", buf, kw)
			}
		}
		first(fmt.Sprintf("S[pos %% %d]", p))
		e.block("for r in range(rounds):", func() {
			e.l("D = views(dst, rounds, r)")
			if async {
				if g.chance(30) {
					e.block("if not tl.done(h):", func() { e.l("tl.wait(h)") })
					e.block("else:", func() { e.l("tl.wait(h)") })
				} else {
					e.l("tl.wait(h)")
				}
			}
			// Reduce-scatter: step s receives chunk pos-s, combines it
			// with its own and forwards it; the last step completes chunk
			// pos+1. The allgather passes every completed chunk on.
			if mode != "ag" {
				for s := 1; s <= p-2; s++ {
					g.rsMiddle(e, fmt.Sprintf("S[(pos - %d) %% %d]", s, p), fmt.Sprintf("S[(pos - %d) %% %d]", s+1, p), kw, full)
				}
			}
			if mode == "ar" {
				g.rsFinal(e, fmt.Sprintf("S[(pos + 1) %% %d]", p), fmt.Sprintf("D[(pos + 1) %% %d]", p), kw, full, avg)
			}
			// The allgather's steps: in "ar" chunk pos+1 was sent by the
			// last reduce step, in "ag" chunk pos by the first send.
			shift := 1
			if mode == "ag" {
				shift = 0
			}
			if mode != "rs" {
				for s := 1; s <= p-2; s++ {
					g.agMiddle(e, fmt.Sprintf("D[(pos - %d) %% %d]", s-shift, p), kw, full)
				}
			}
			next := func() {
				e.block("if r + 1 < rounds:", func() {
					e.l("S = views(src, rounds, r + 1)")
					first(fmt.Sprintf("S[pos %% %d]", p))
				})
			}
			if mode == "rs" {
				e.l("C = S")
			}
			if overlap {
				next()
			}
			switch mode {
			case "rs":
				g.rsLast(e, fmt.Sprintf("C[(pos + 1) %% %d]", p), fmt.Sprintf("D[(pos + 1) %% %d]", p), kw, full, avg, overlap)
			default:
				g.agLast(e, fmt.Sprintf("D[(pos + %d) %% %d]", 1+shift, p), kw, full)
			}
			if !overlap {
				next()
			}
		})
	})
	e.l("")
	return name
}

// rsMiddle writes a reduce-scatter step: receive, combine with local,
// forward. nextLocal is the next step's local operand (to prefetch).
func (g *gen) rsMiddle(e *emitter, local, nextLocal, kw string, full bool) {
	v := g.intn(10)
	switch {
	case v < 4:
		pf := ""
		switch g.intn(3) {
		case 0:
			pf = ", prefetch = " + nextLocal
		case 1:
			e.l("tl.prefetch(%s%s)", local, kw)
		}
		e.l("tl.recv_reduce_send(in_dir, %s, out_dir%s%s)", local, kw, pf)
	case v < 6:
		g.plainSent = true
		e.l("tl.flush()")
		e.l("T = tmp.slice(0, len(%s))", local)
		e.l("tl.recv_reduce_copy(in_dir, %s, T%s)", local, kw)
		g.send(e, "out_dir", "T", kw)
	case v < 7 && full:
		g.plainSent = true
		e.l("tl.flush()")
		e.l("T = tmp.slice(0, len(%s))", local)
		g.recvDst(e, "in_dir", "T")
		e.l("tl.reduce(T, T, %s, op = tl.redop)", local)
		g.send(e, "out_dir", "T", kw)
	case v < 8 || !g.perMessageOK():
		g.plainSent = true
		e.l("tl.flush()")
		e.l("T = tmp.slice(0, len(%s))", local)
		e.l("tl.recv_copy(in_dir, T%s)", kw)
		e.l("tl.reduce(T, %s, T, op = tl.redop)", local)
		g.send(e, "out_dir", "T", kw)
	default:
		g.plainSent = true
		e.l("tl.flush()")
		e.l("T = tmp.slice(0, len(%s))", local)
		e.l("TP = msgs(T, pe)")
		e.block(fmt.Sprintf("for j, lp in enumerate(msgs(%s, pe)):", local), func() {
			e.l("m = tl.recv(in_dir)")
			if g.chance(50) {
				e.l("hx = tl.fetch_async(m)")
				e.l("y = tl.fetch(lp)")
				e.l("x = tl.wait(hx)")
			} else {
				e.l("x = tl.fetch(m)")
				e.l("y = getattr(tl, \"load\")(lp)")
			}
			if g.chance(50) {
				e.l("tl.store(TP[j], combine(tl, x, y))")
			} else {
				e.l("tl.wait(tl.store_async(TP[j], combine(tl, x, y)))")
			}
			e.l("tl.send(out_dir, TP[j])")
		})
	}
}

// rsFinal writes the reduce-scatter's last step: receive, combine with
// local into dst (final: avg divides) and forward dst (the allgather's
// first send).
func (g *gen) rsFinal(e *emitter, local, dst, kw string, full, avg bool) {
	v := g.intn(10)
	if avg {
		v = min(v, 5) // avg divides in the fused primitives only
	}
	switch {
	case v < 3:
		e.l("tl.recv_reduce_copy_send(in_dir, %s, %s, out_dir, final = final%s)", local, dst, kw)
	case v < 6:
		g.plainSent = true
		e.l("tl.recv_reduce_copy(in_dir, %s, %s, final = final%s)", local, dst, kw)
		g.send(e, "out_dir", dst, kw)
	case v < 8 && full:
		g.plainSent = true
		e.l("tl.flush()")
		e.l("T = tmp.slice(0, len(%s))", local)
		g.recvDst(e, "in_dir", "T")
		e.l("tl.reduce(%s, T, %s, op = tl.redop)", dst, local)
		g.send(e, "out_dir", dst, kw)
	case !g.perMessageOK():
		e.l("tl.recv_reduce_copy_send(in_dir, %s, %s, out_dir, final = final%s)", local, dst, kw)
	default:
		g.plainSent = true
		e.l("DP = msgs(%s, pe)", dst)
		e.block(fmt.Sprintf("for j, lp in enumerate(msgs(%s, pe)):", local), func() {
			e.l("m = tl.recv(in_dir)")
			e.l("x = tl.fetch(m)")
			e.l("tl.store(DP[j], combine(tl, x, tl.fetch(lp)))")
			e.l("tl.send(out_dir, DP[j])")
		})
	}
}

// rsLast writes a reduce-scatter's last step: receive, combine with
// local into dst (final: avg divides), no forward.
func (g *gen) rsLast(e *emitter, local, dst, kw string, full, avg, overlap bool) {
	v := g.intn(10)
	if avg {
		v = 0 // avg divides in the fused primitives only
	}
	if overlap && v >= 5 {
		// The next round's first send is under way: a tl.flush would wait
		// for it, and it for the next rank, which waits for this one.
		v = 9
		if !g.perMessageOK() {
			v = 0
		}
	}
	switch {
	case v < 5:
		e.l("tl.recv_reduce_copy(in_dir, %s, %s, final = final%s)", local, dst, kw)
	case v < 8 && full:
		e.l("tl.flush()")
		e.l("T = tmp.slice(0, len(%s))", local)
		g.recvDst(e, "in_dir", "T")
		e.l("tl.reduce(%s, %s, T, op = tl.redop)", dst, local)
	case v < 8 || !g.perMessageOK():
		e.l("tl.flush()")
		e.l("T = tmp.slice(0, len(%s))", local)
		e.l("tl.recv_copy(in_dir, T%s)", kw)
		e.l("tl.reduce(%s, T, %s, op = tl.redop)", dst, local)
	default:
		e.l("DP = msgs(%s, pe)", dst)
		e.block(fmt.Sprintf("for j, lp in enumerate(msgs(%s, pe)):", local), func() {
			e.l("m = tl.recv(in_dir)")
			e.l("x = tl.fetch(m)")
			e.l("tl.store(DP[j], combine(tl, x, tl.fetch(lp)))")
		})
	}
}

// agMiddle writes an allgather step: receive into dst and forward.
func (g *gen) agMiddle(e *emitter, dst, kw string, full bool) {
	v := g.intn(10)
	switch {
	case v < 4:
		e.l("tl.recv_copy_send(in_dir, %s, out_dir%s)", dst, kw)
	case v < 7:
		g.plainSent = true
		e.l("tl.recv_copy(in_dir, %s%s)", dst, kw)
		g.send(e, "out_dir", dst, kw)
	case v < 9 && full:
		g.plainSent = true
		g.recvDst(e, "in_dir", dst)
		g.send(e, "out_dir", dst, kw)
	case !g.perMessageOK():
		e.l("tl.recv_copy_send(in_dir, %s, out_dir%s)", dst, kw)
	default:
		g.plainSent = true
		e.block(fmt.Sprintf("for dp in msgs(%s, pe):", dst), func() {
			e.l("m = tl.recv(in_dir)")
			e.l("tl.store(dp, tl.fetch(m))")
			e.l("tl.send(out_dir, dp)")
		})
	}
}

// agLast writes the allgather's last step: receive into dst.
func (g *gen) agLast(e *emitter, dst, kw string, full bool) { g.recvInto(e, "in_dir", dst, kw, full) }

// recvInto writes a receive of a buffer from dir into dst (messages of
// piece bytes, pe elements).
func (g *gen) recvInto(e *emitter, dir, dst, kw string, full bool) {
	v := g.intn(10)
	switch {
	case v < 5:
		e.l("tl.recv_copy(%s, %s%s)", dir, dst, kw)
	case v < 8 && full:
		g.recvDst(e, dir, dst)
	case !g.perMessageOK():
		e.l("tl.recv_copy(%s, %s%s)", dir, dst, kw)
	default:
		e.block(fmt.Sprintf("for dp in msgs(%s, pe):", dst), func() {
			e.l("m = tl.recv(%s)", dir)
			e.l("tl.store(dp, tl.fetch(m))")
		})
	}
}

// forward writes a receive of a buffer from in_dir into dst and its
// forward on out_dir.
func (g *gen) forward(e *emitter, dst, kw string, full bool) { g.agMiddle(e, dst, kw, full) }

// chainBroadcast writes a broadcast along the ring of st from root: each
// rank receives the buffer from the one before and passes it on.
func (g *gen) chainBroadcast(e *emitter, st ringStage) {
	p := st.p
	if p == 1 {
		e.block("if src != dst:", func() { e.l("tl.copy(dst, src)") })
		return
	}
	pieceExpr, kw, full := g.pieceChoice()
	e.l("out_dir, in_dir = %s, %s", st.out, st.in)
	e.l("piece = %s", pieceExpr)
	e.l("esize = ELEM_SIZE[dst.dtype]")
	e.l("pe = piece // esize")
	e.l("c = (pos - ORDER.index(root)) %% %d  # the root is first", p)
	e.block("if c == 0:", func() {
		e.block("if src != dst:", func() { g.copyIn(e, "dst", "src") })
		g.send(e, "out_dir", pick(g, "src", "dst"), kw)
	})
	e.block(fmt.Sprintf("elif c < %d:", p-1), func() { g.forward(e, "dst", kw, full) })
	e.block("else:", func() { g.recvInto(e, "in_dir", "dst", kw, full) })
}

// chainReduce writes a reduce along the ring of st to root: the rank after
// the root starts, each one adds its own and passes the sum on, the root
// completes it into its recvbuf (the others' recvbuf is left alone).
func (g *gen) chainReduce(e *emitter, st ringStage) {
	p := st.p
	if p == 1 {
		e.block("if src != dst:", func() { e.l("tl.copy(dst, src)") })
		return
	}
	avg := g.c.RedOp == "avg"
	pieceExpr, kw, full := g.pieceChoice()
	e.l("out_dir, in_dir = %s, %s", st.out, st.in)
	e.l("piece = %s", pieceExpr)
	e.l("esize = ELEM_SIZE[dst.dtype]")
	e.l("pe = piece // esize")
	e.l("final = True")
	e.l("c = (pos - ORDER.index(root) - 1) %% %d  # the root is last", p)
	e.block("if c == 0:", func() { g.send(e, "out_dir", "src", kw) })
	e.block(fmt.Sprintf("elif c < %d:", p-1), func() {
		g.rsMiddle(e, "src", "src", kw, full)
	})
	e.block("else:", func() { g.rsLast(e, "src", "dst", kw, full, avg, false) })
}

// treeFunc writes an allreduce over channel ch of the binary tree: reduce
// to rank 0, then broadcast. Signature (tl, src, dst, tmp, rank,
// world_size).
func (g *gen) treeFunc(ch int) string {
	name, e, pieceExpr, kw, full := g.function("tree")
	avg := g.c.RedOp == "avg"
	reverse := g.chance(50)
	e.block(fmt.Sprintf("def %s(tl, src, dst, tmp, rank, world_size):", name), func() {
		e.l("piece = %s", pieceExpr)
		e.l("esize = ELEM_SIZE[dst.dtype]")
		treeLinks(e, ch, reverse)
		// Reduce towards the root.
		e.block("if not kids:", func() {
			e.block("if root:", func() {
				e.block("if src != dst:", func() { e.l("tl.copy(dst, src)") })
			})
			e.block("else:", func() { g.send(e, "parent", "src", kw) })
		})
		e.block("else:", func() {
			e.l("acc = src")
			e.block("for i, kid in enumerate(kids):", func() {
				e.l("last = i == len(kids) - 1")
				e.block("if last and not root:", func() {
					switch g.intn(3) {
					case 0:
						e.l("tl.recv_reduce_copy(kid, acc, dst%s)", kw)
						g.send(e, "parent", "dst", kw)
					default:
						e.l("tl.recv_reduce_send(kid, acc, parent%s)", kw)
					}
				})
				e.block("else:", func() {
					v := g.intn(3)
					if avg {
						v = 0
					}
					switch {
					case v == 1 && full:
						e.l("tl.flush()")
						e.l("T = tmp.slice(0, len(dst))")
						g.recvDst(e, "kid", "T")
						e.l("tl.reduce(dst, acc, T, op = tl.redop)")
					case v == 2:
						e.l("tl.flush()")
						e.l("T = tmp.slice(0, len(dst))")
						e.l("tl.recv_copy(kid, T%s)", kw)
						e.l("tl.reduce(dst, T, acc, op = tl.redop)")
					default:
						e.l("tl.recv_reduce_copy(kid, acc, dst, final = root and last%s)", kw)
					}
					e.l("acc = dst")
				})
			})
		})
		// Broadcast from the root.
		e.block("if root:", func() {
			if g.chance(50) {
				e.l("hs = [tl.send_async(kid, dst%s) for kid in kids]", kw)
				e.block("for h in hs:", func() { e.l("tl.wait(h)") })
			} else {
				e.block("for kid in kids:", func() { g.send(e, "kid", "dst", kw) })
			}
		})
		e.block("elif not kids:", func() {
			if full && g.chance(40) {
				g.recvDst(e, "parent", "dst")
			} else {
				e.l("tl.recv_copy(parent, dst%s)", kw)
			}
		})
		e.block("else:", func() {
			if g.chance(60) {
				e.l("tl.recv_copy_send(parent, dst, kids[0]%s)", kw)
			} else {
				e.l("tl.recv_copy(parent, dst%s)", kw)
				g.send(e, "kids[0]", "dst", kw)
			}
			e.block("for kid in kids[1:]:", func() { g.send(e, "kid", "dst", kw) })
		})
	})
	e.l("")
	return name
}

// function starts a kernel function of the case: its name (prefix_N),
// the emitter it is written with, and its piece size (pieceChoice).
func (g *gen) function(prefix string) (name string, e *emitter, pieceExpr, kw string, full bool) {
	g.nfn++
	pieceExpr, kw, full = g.pieceChoice()
	return fmt.Sprintf("%s_%d", prefix, g.nfn), &g.funcs, pieceExpr, kw, full
}

// treeLinks writes a tree function's view of the binary tree over channel
// ch: its children (kids, in reverse order when reverse), whether it is
// the root, and its parent's direction.
func treeLinks(e *emitter, ch int, reverse bool) {
	e.l("kids = []")
	e.block("if 2 * rank + 1 < world_size:", func() { e.l("kids.append(%s)", chDir("child_left", ch)) })
	e.block("if 2 * rank + 2 < world_size:", func() { e.l("kids.append(%s)", chDir("child_right", ch)) })
	if reverse {
		e.l("kids = kids[::-1]")
	}
	e.l("root = rank == 0")
	e.l("parent = %s", chDir("parent", ch))
}

// treeOneWay writes a broadcast from, or a reduce to, rank 0 over
// channel ch of the binary tree. Signature (tl, src, dst, tmp, rank,
// world_size).
func (g *gen) treeOneWay(ch int, coll string) string {
	name, e, pieceExpr, kw, full := g.function("tree")
	reverse := g.chance(50)
	e.block(fmt.Sprintf("def %s(tl, src, dst, tmp, rank, world_size):", name), func() {
		e.l("in_dir, out_dir = None, None")
		e.l("piece = %s", pieceExpr)
		e.l("esize = ELEM_SIZE[dst.dtype]")
		e.l("pe = piece // esize")
		treeLinks(e, ch, reverse)
		if coll == "broadcast" {
			e.block("if root:", func() {
				e.block("if src != dst:", func() { g.copyIn(e, "dst", "src") })
				if g.chance(50) {
					e.l("hs = [tl.send_async(kid, dst%s) for kid in kids]", kw)
					e.block("for h in hs:", func() { e.l("tl.wait(h)") })
				} else {
					e.block("for kid in kids:", func() { g.send(e, "kid", "dst", kw) })
				}
			})
			e.block("elif not kids:", func() { g.recvInto(e, "parent", "dst", kw, full) })
			e.block("else:", func() {
				e.l("in_dir, out_dir = parent, kids[0]")
				g.forward(e, "dst", kw, full)
				e.block("for kid in kids[1:]:", func() { g.send(e, "kid", "dst", kw) })
			})
			return
		}
		// Reduce: only the root writes its recvbuf; the others sum into
		// tmp, which the last call's sends may still read.
		e.block("if not kids:", func() {
			e.block("if root:", func() {
				e.block("if src != dst:", func() { e.l("tl.copy(dst, src)") })
			})
			e.block("else:", func() { g.send(e, "parent", "src", kw) })
			e.l("return")
		})
		e.l("tl.flush()")
		e.l("buf = dst if root else tmp.slice(0, len(src))")
		e.l("acc = src")
		e.block("for i, kid in enumerate(kids):", func() {
			e.l("last = i == len(kids) - 1")
			e.block("if last and not root:", func() {
				if g.chance(30) {
					e.l("tl.recv_reduce_copy(kid, acc, buf%s)", kw)
					g.send(e, "parent", "buf", kw)
				} else {
					e.l("tl.recv_reduce_send(kid, acc, parent%s)", kw)
				}
			})
			e.block("else:", func() {
				e.l("tl.recv_reduce_copy(kid, acc, buf, final = root and last%s)", kw)
				e.l("acc = buf")
			})
		})
	})
	e.l("")
	return name
}

// fullMeshOther writes allgather, reduce_scatter, broadcast, reduce or
// alltoall over channel ch of the full mesh, directly between ranks.
// Signature (tl, src, dst, tmp, rank, world_size, root).
func (g *gen) fullMeshOther(ch int, coll string) string {
	name, e, pieceExpr, kw, full := g.function("fm")
	p := g.c.WorldSize
	dir := func(j string) string {
		if ch == 0 {
			return fmt.Sprintf("\"r%%d\" %% %s", j)
		}
		return fmt.Sprintf("tl.channel(\"r%%d\" %% %s, %d)", j, ch)
	}
	e.block(fmt.Sprintf("def %s(tl, src, dst, tmp, rank, world_size, root):", name), func() {
		e.l("piece = %s", pieceExpr)
		e.l("esize = ELEM_SIZE[tmp.dtype]")
		e.l("pe = piece // esize")
		peers := fmt.Sprintf("[(rank + k) %% %d for k in range(1, %d)]", p, p)
		switch coll {
		case "allgather":
			e.block("if src != dst[rank]:", func() { g.copyIn(e, "dst[rank]", "src") })
			e.l("hs = [tl.send_async(%s, %s%s) for j in %s]", dir("j"), pick(g, "src", "dst[rank]"), kw, peers)
			e.block(fmt.Sprintf("for k in range(1, %d):", p), func() {
				e.l("j = (rank - k) %% %d", p)
				g.recvInto(e, dir("j"), "dst[j]", kw, full)
			})
			e.block("for h in hs:", func() { e.l("tl.wait(h)") })
		case "reduce_scatter":
			e.l("hs = [tl.send_async(%s, src[j]%s) for j in %s]", dir("j"), kw, peers)
			e.l("acc = src[rank]")
			e.block(fmt.Sprintf("for k in range(1, %d):", p), func() {
				e.l("j = (rank - k) %% %d", p)
				e.l("tl.recv_reduce_copy(%s, acc, dst, final = k == %d%s)", dir("j"), p-1, kw)
				e.l("acc = dst")
			})
			if p == 1 {
				e.block("if src[rank] != dst:", func() { e.l("tl.copy(dst, src[rank])") })
			}
			e.block("for h in hs:", func() { e.l("tl.wait(h)") })
		case "broadcast":
			e.block("if rank == root:", func() {
				e.block("if src != dst:", func() { g.copyIn(e, "dst", "src") })
				e.l("hs = [tl.send_async(%s, dst%s) for j in %s]", dir("j"), kw, peers)
				e.block("for h in hs:", func() { e.l("tl.wait(h)") })
			})
			e.block("else:", func() { g.recvInto(e, dir("root"), "dst", kw, full) })
		case "reduce":
			e.block("if rank != root:", func() { g.send(e, dir("root"), "src", kw) })
			e.block("else:", func() {
				e.l("acc = src")
				e.block(fmt.Sprintf("for k in range(1, %d):", p), func() {
					e.l("j = (root + k) %% %d", p)
					e.l("tl.recv_reduce_copy(%s, acc, dst, final = k == %d%s)", dir("j"), p-1, kw)
					e.l("acc = dst")
				})
				if p == 1 {
					e.block("if src != dst:", func() { e.l("tl.copy(dst, src)") })
				}
			})
		case "alltoall":
			// Sent from a copy: in place, the chunk received from j
			// overwrites the one sent to j, which j need not have taken.
			e.l("c = len(src[0])")
			e.l("tl.flush()")
			e.l("S = [tmp.slice(j * c, c) for j in range(world_size)]")
			e.block("for j in range(world_size):", func() { g.copyIn(e, "S[j]", "src[j]") })
			e.l("hs = [tl.send_async(%s, S[j]%s) for j in %s]", dir("j"), kw, peers)
			e.l("tl.copy(dst[rank], S[rank])")
			e.block(fmt.Sprintf("for k in range(1, %d):", p), func() {
				e.l("j = (rank - k) %% %d", p)
				g.recvInto(e, dir("j"), "dst[j]", kw, full)
			})
			e.block("for h in hs:", func() { e.l("tl.wait(h)") })
		}
	})
	e.l("")
	return name
}

// fullMeshFunc writes a direct allreduce over channel ch of the full
// mesh: every rank reduces its own chunk from everyone's, then sends it
// to everyone. Signature (tl, src, dst, tmp, rank, world_size).
func (g *gen) fullMeshFunc(ch int) string {
	name, e, pieceExpr, kw, full := g.function("fm")
	avg := g.c.RedOp == "avg"
	p := g.c.WorldSize
	w, t := g.weights(p)
	dir := func(j string) string {
		if ch == 0 {
			return fmt.Sprintf("\"r%%d\" %% %s", j)
		}
		return fmt.Sprintf("tl.channel(\"r%%d\" %% %s, %d)", j, ch)
	}
	e.block(fmt.Sprintf("def %s(tl, src, dst, tmp, rank, world_size):", name), func() {
		e.l("piece = %s", pieceExpr)
		e.l("esize = ELEM_SIZE[dst.dtype]")
		e.block("if world_size == 1:", func() {
			e.block("if src != dst:", func() { e.l("tl.copy(dst, src)") })
			e.l("return")
		})
		e.l("C = cut(src, %s, %d)", w, t)
		e.l("D = cut(dst, %s, %d)", w, t)
		e.l("hs = [tl.send_async(%s, C[(rank + k) %% %d]%s) for k in range(1, %d)]", dir(fmt.Sprintf("((rank + k) %% %d)", p)), p, kw, p)
		e.l("acc = C[rank]")
		e.block(fmt.Sprintf("for k in range(1, %d):", p), func() {
			e.l("j = (rank - k) %% %d", p)
			v := g.intn(3)
			if avg {
				v = 0
			}
			switch {
			case v == 1 && full:
				// (No flush before tmp is written again: nothing sends
				// from it here, and a flush would wait for the
				// tl.send_async calls above, which wait for this receive.)
				e.l("T = tmp.slice(0, len(acc))")
				g.recvDst(e, dir("j"), "T")
				e.l("tl.reduce(D[rank], acc, T, op = tl.redop)")
			default:
				e.l("tl.recv_reduce_copy(%s, acc, D[rank], final = k == %d%s)", dir("j"), p-1, kw)
			}
			e.l("acc = D[rank]")
		})
		e.block("for h in hs:", func() { e.l("tl.wait(h)") })
		e.l("hs = [tl.send_async(%s, D[rank]%s) for k in range(1, %d)]", dir(fmt.Sprintf("((rank + k) %% %d)", p)), kw, p)
		e.block(fmt.Sprintf("for k in range(1, %d):", p), func() {
			e.l("j = (rank - k) %% %d", p)
			if full && g.chance(40) {
				g.recvDst(e, dir("j"), "D[j]")
			} else {
				e.l("tl.recv_copy(%s, D[j]%s)", dir("j"), kw)
			}
		})
		e.block("for h in hs:", func() { e.l("tl.wait(h)") })
	})
	e.l("")
	return name
}
