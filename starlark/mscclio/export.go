package mscclio

import (
	"bytes"
	"fmt"
	"io"
	"sort"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/msccl"
	"kernbench/starlark/tl"
)

// kernbench run ALGO --export-msccl FILE.xml records the run's data
// movement, call by call, and writes it as an MSCCL schedule for the run's
// world size and count: each rank a gpu, each queue pair a (peer, channel)
// connection, each primitive a step, the order between threads (spawn,
// join, events) as depid/deps. Anything else that touches memory cannot be
// expressed and is refused with its position.

// exportOp is one recorded data movement.
type exportOp struct {
	seq        int // order of the calls over the whole run
	rank       int
	thread     *tl.Kernel
	kind       string // s r rcs rrs rrc rrcs cpy re
	at         syntax.Position
	name       string
	send, recv *machine.QueuePair
	src, dst   machine.Region // src: what is read besides the message; dst: what is written
	n          int64          // bytes moved
	msg        int64          // the size of the messages it sends (piece_bytes, else slot_size); 0 if it sends none
	deps       []*exportOp    // ops of other threads (or earlier ops) it waits for
	local      any            // a copy_async's own thread block key
	joined     bool           // an async op's step is placed
	// Filled when the schedule is built.
	tb   *exportTB
	step int
}

type exportTB struct {
	id         int
	send, recv *machine.QueuePair
	first      int // seq of its first op
	steps      []exportStep
}

type exportStep struct {
	op    *exportOp // nil: a nop carrying one more dependency
	dep   *exportOp
	extra bool
}

// Recorder records a run's data movement for --export-msccl: it is
// every rank's tl.Recorder, and Schedule turns what it recorded into an
// MSCCL schedule.
type Recorder struct {
	seq        int
	last       map[*tl.Kernel]*exportOp     // each thread's latest op
	pending    map[*tl.Kernel][]*exportOp   // what a thread's next op waits for
	events     map[*tl.Event]*exportOp      // the op an event was signalled after
	async      map[starlark.Value]*exportOp // send_async / copy_async handles
	asyncOrder []*exportOp                  // the same, in call order
	copying    map[*tl.Kernel]*exportOp     // each thread's tl.copy_async not yet joined
	ops        []*exportOp
	allocs     [][]machine.Region             // per rank, in allocation order
	at         map[*tl.Kernel]syntax.Position // where each thread's current call is
	err        error                          // the first call that cannot be expressed
}

// NewRecorder is a Recorder for a run of world ranks.
func NewRecorder(world int) *Recorder {
	return &Recorder{last: map[*tl.Kernel]*exportOp{}, pending: map[*tl.Kernel][]*exportOp{},
		events: map[*tl.Event]*exportOp{}, async: map[starlark.Value]*exportOp{}, copying: map[*tl.Kernel]*exportOp{}, allocs: make([][]machine.Region, world), at: map[*tl.Kernel]syntax.Position{}}
}

// exportNeutral are the tl calls that move no data and order nothing.
var exportNeutral = map[string]bool{
	"program_id": true, "directions": true, "peer": true, "ready": true, "channel": true, "location": true,
	"time": true, "trace": true, "flush": true, "prefetch": true, "zeros": true, "full": true,
	"maximum": true, "minimum": true, "event": true,
}

func (r *Recorder) refuse(k *tl.Kernel, name string, at syntax.Position, why string) {
	if r.err == nil {
		r.err = fmt.Errorf("--export-msccl: rank %d: tl.%s at %v %s", k.Rank, name, at, why)
	}
}

func (r *Recorder) Call(k *tl.Kernel, name string, args starlark.Tuple, kw []starlark.Tuple, at syntax.Position) {
	r.at[k] = at
	switch name {
	case "send", "send_async":
		if arg(args, kw, 2, "nbytes") != nil {
			r.refuse(k, name, at, "sends part of a buffer (nbytes=): an MSCCL step sends whole chunks; send a slice instead")
		}
	case "recv":
		if arg(args, kw, 0, "dir") == nil || arg(args, kw, 1, "dst") == nil {
			r.refuse(k, name, at, "receives a message into its rx slot: MSCCL XML can express tl.recv(dir, dst=buffer) only")
		}
	case "recv_reduce_copy", "recv_reduce_copy_send":
		finalAt := 3
		if name == "recv_reduce_copy_send" {
			finalAt = 4
		}
		if f := arg(args, kw, finalAt, "final"); f != nil && bool(f.Truth()) && k.RedOp.String() == "avg" {
			r.refuse(k, name, at, "divides by world_size (redop avg), which MSCCL XML cannot express")
		}
	case "recv_reduce_send", "recv_copy", "recv_copy_send", "copy", "copy_async", "reduce", "spawn", "wait", "signal", "alloc":
	default:
		if !exportNeutral[name] {
			r.refuse(k, name, at, "cannot be expressed in MSCCL XML (only buffer-level tl.send / tl.recv(dir, dst), the fused primitives, tl.copy and tl.reduce move data there)")
		}
	}
}

// arg is positional argument i or keyword name, nil when absent or None.
func arg(args starlark.Tuple, kw []starlark.Tuple, i int, name string) starlark.Value {
	if i < len(args) && args[i] != starlark.None {
		return args[i]
	}
	for _, kv := range kw {
		if string(kv[0].(starlark.String)) == name && kv[1] != starlark.None {
			return kv[1]
		}
	}
	return nil
}

func (r *Recorder) Return(k *tl.Kernel, name string, args starlark.Tuple, kw []starlark.Tuple, result starlark.Value, err error) {
	if err != nil || r.err != nil {
		return
	}
	// An operand that is not a Ptr (a Tile given to tl.reduce) has no
	// place in the XML: noted here, refused below.
	missing := false
	ptr := func(i int, key string) *tl.Ptr {
		p, ok := arg(args, kw, i, key).(*tl.Ptr)
		if !ok {
			missing = true
			return &tl.Ptr{}
		}
		return p
	}
	const notBuffer = "has an operand that is not a buffer (a Tile): MSCCL XML moves buffers only"
	dir := func(i int, key string, sending bool) *machine.QueuePair {
		s, ok := arg(args, kw, i, key).(starlark.String)
		if !ok || k.G == nil {
			return nil
		}
		q, _ := k.G.Lookup(k.Rank, string(s), sending)
		return q
	}
	at := r.at[k]
	op := &exportOp{rank: k.Rank, thread: k, name: name, at: at}
	switch name {
	case "send":
		src := ptr(1, "src")
		op.kind, op.send, op.src, op.n = "s", dir(0, "dir", true), src.Reg, src.Reg.N
	case "send_async", "copy_async":
		// Runs beside the thread's next calls: a thread block of its own
		// (the send's connection, or a local one), joined by tl.wait.
		a := &exportOp{rank: k.Rank, thread: k, name: name, at: at}
		if name == "send_async" {
			src := ptr(1, "src")
			a.kind, a.send, a.src, a.n = "s", dir(0, "dir", true), src.Reg, src.Reg.N
			a.msg = msgBytes(k, name, args, kw)
		} else {
			dst, src := ptr(0, "dst"), ptr(1, "src")
			a.kind, a.src, a.dst, a.n = "cpy", src.Reg, dst.Reg, dst.Reg.N
			a.local = result
		}
		if missing {
			r.refuse(k, name, at, notBuffer)
			return
		}
		if c := r.copying[k]; c != nil && name == "copy_async" {
			// Each copy in flight needs a thread block of its own, chained
			// to the thread's other steps by depid/deps; run that way a
			// schedule of overlapping copies (tree_broadcast) takes several
			// times the kernel's time, so it is not written at all.
			r.refuse(k, name, at, fmt.Sprintf("starts a copy while the one from %v is still in flight: MSCCL XML runs a thread block's steps one after another, and copies overlapping each other and the thread's sends and receives have no faithful schedule there; tl.wait each copy before the next (or use tl.copy)", c.at))
			return
		}
		if l := r.last[k]; l != nil {
			a.deps = append(a.deps, l)
		}
		a.deps = append(a.deps, r.pending[k]...)
		r.async[result] = a
		r.asyncOrder = append(r.asyncOrder, a)
		if name == "send_async" {
			// Its step goes where it is issued, in the thread block of its
			// connection: the importer runs an s step in the background
			// until that thread block's next send, as the kernel did, so
			// the calls made meanwhile (a round's last receive) overlap it.
			// The thread's later calls do not wait for it (r.last stays),
			// only those after its tl.wait.
			r.join(a)
			return
		}
		r.copying[k] = a
		// A copy's step goes where it is joined (tl.wait, or the end of
		// the kernel): an MSCCL thread block cannot overlap its steps, and
		// the calls the kernel made meanwhile must not queue behind it.
		return
	case "recv":
		dst := ptr(1, "dst")
		op.kind, op.recv, op.dst, op.n = "r", dir(0, "dir", false), dst.Reg, dst.Reg.N
	case "recv_copy":
		dst := ptr(1, "dst")
		op.kind, op.recv, op.dst, op.n = "r", dir(0, "in_dir", false), dst.Reg, dst.Reg.N
	case "recv_copy_send":
		dst := ptr(1, "dst")
		op.kind, op.recv, op.dst, op.send, op.n = "rcs", dir(0, "in_dir", false), dst.Reg, dir(2, "out_dir", true), dst.Reg.N
	case "recv_reduce_send":
		local := ptr(1, "local")
		op.kind, op.recv, op.src, op.send, op.n = "rrs", dir(0, "in_dir", false), local.Reg, dir(2, "out_dir", true), local.Reg.N
	case "recv_reduce_copy":
		local, dst := ptr(1, "local"), ptr(2, "dst")
		op.kind, op.recv, op.src, op.dst, op.n = "rrc", dir(0, "in_dir", false), local.Reg, dst.Reg, dst.Reg.N
	case "recv_reduce_copy_send":
		local, dst := ptr(1, "local"), ptr(2, "dst")
		op.kind, op.recv, op.src, op.dst, op.send, op.n = "rrcs", dir(0, "in_dir", false), local.Reg, dst.Reg, dir(3, "out_dir", true), dst.Reg.N
	case "copy":
		dst, src := ptr(0, "dst"), ptr(1, "src")
		op.kind, op.src, op.dst, op.n = "cpy", src.Reg, dst.Reg, dst.Reg.N
	case "reduce":
		dst, a, b := ptr(0, "dst"), ptr(1, "a"), ptr(2, "b")
		if missing {
			r.refuse(k, name, at, notBuffer)
			return
		}
		// An MSCCL re combines with the collective's reduction; tl.reduce's
		// op defaults to sum, and avg accumulates as a sum.
		got, want := "sum", k.RedOp.String()
		if v, ok := arg(args, kw, 3, "op").(starlark.String); ok {
			got = string(v)
		}
		if got == "avg" {
			got = "sum"
		}
		if want == "avg" {
			want = "sum"
		}
		if got != want {
			r.refuse(k, name, at, fmt.Sprintf("reduces with op %q, not the run's redop %q: an MSCCL re step uses the collective's reduction", got, k.RedOp.String()))
			return
		}
		switch {
		case dst.Reg == a.Reg:
			op.kind, op.src, op.dst, op.n = "re", b.Reg, dst.Reg, dst.Reg.N
		case dst.Reg == b.Reg:
			op.kind, op.src, op.dst, op.n = "re", a.Reg, dst.Reg, dst.Reg.N
		case !dst.Reg.Overlaps(a.Reg) && !dst.Reg.Overlaps(b.Reg):
			// dst = a op b as a copy, then dst op= b.
			r.add(k, &exportOp{rank: k.Rank, thread: k, name: name, at: at, kind: "cpy", src: a.Reg, dst: dst.Reg, n: dst.Reg.N})
			op.kind, op.src, op.dst, op.n = "re", b.Reg, dst.Reg, dst.Reg.N
		default:
			r.refuse(k, name, at, "writes a buffer that overlaps an operand without being it")
			return
		}
	case "alloc":
		if p, ok := result.(*tl.Ptr); ok {
			r.allocs[k.Rank] = append(r.allocs[k.Rank], p.Reg)
		}
		return
	case "spawn":
		if child, ok := tl.ThreadOf(result); ok {
			if l := r.last[k]; l != nil {
				r.pending[child] = append(r.pending[child], l)
			}
		}
		return
	case "wait":
		h := arg(args, kw, 0, "handle")
		if a, ok := r.async[h]; ok {
			if r.copying[a.thread] == a {
				delete(r.copying, a.thread)
			}
			r.join(a)
			if a.seq > 0 {
				r.pending[k] = append(r.pending[k], a)
			}
		} else if child, ok := tl.ThreadOf(h); ok {
			if l := r.last[child]; l != nil {
				r.pending[k] = append(r.pending[k], l)
			}
		} else if ev, ok := h.(*tl.Event); ok {
			if l := r.events[ev]; l != nil {
				r.pending[k] = append(r.pending[k], l)
			}
		}
		return
	case "signal":
		if ev, ok := arg(args, kw, 0, "ev").(*tl.Event); ok {
			r.events[ev] = r.last[k]
		}
		return
	default:
		return
	}
	if missing {
		r.refuse(k, name, at, notBuffer)
		return
	}
	if op.send != nil {
		op.msg = msgBytes(k, name, args, kw)
	}
	r.add(k, op)
}

// piecePos is where piece_bytes stands among the positional arguments of
// the calls that send.
var piecePos = map[string]int{"send": 3, "send_async": 3, "recv_copy_send": 3, "recv_reduce_send": 3, "recv_reduce_copy_send": 5}

// msgBytes is the size of the messages a sending call cuts its data into:
// its piece_bytes, else a slot.
func msgBytes(k *tl.Kernel, name string, args starlark.Tuple, kw []starlark.Tuple) int64 {
	if v, ok := arg(args, kw, piecePos[name], "piece_bytes").(starlark.Int); ok {
		if n, ok := v.Int64(); ok {
			return n
		}
	}
	return k.G.Cfg.SlotSize
}

// add appends an op of thread k: it waits for what the thread waited for
// since its previous op, and for that previous op.
func (r *Recorder) add(k *tl.Kernel, op *exportOp) {
	if op.n == 0 {
		return // moves nothing: no step
	}
	r.seq++
	op.seq = r.seq
	if l := r.last[k]; l != nil {
		op.deps = append(op.deps, l)
	}
	op.deps = append(op.deps, r.pending[k]...)
	delete(r.pending, k)
	r.last[k] = op
	r.ops = append(r.ops, op)
}

// join places an async op's step, once.
func (r *Recorder) join(a *exportOp) {
	if a.joined {
		return
	}
	a.joined = true
	if a.n == 0 {
		return
	}
	r.seq++
	a.seq = r.seq
	r.ops = append(r.ops, a)
}

// Run is what a schedule says about the run it was recorded from.
type Run struct {
	Algo    string // the algorithm's name
	Coll    string // the collective
	World   int
	InPlace bool
	DType   dtype.DType
}

// Schedule turns the recorded ops of a run at --count count into a
// schedule: send and recv are each rank's bench buffers, g the run's
// queue pairs.
func (r *Recorder) Schedule(run Run, send, recv []machine.Region, g *machine.Group, count int64) (*msccl.Algo, error) {
	if r.err != nil {
		return nil, r.err
	}
	for _, a := range r.asyncOrder {
		r.join(a) // joined when the kernel ended
	}
	if len(r.ops) == 0 {
		return nil, fmt.Errorf("--export-msccl: the run moved no data (count %d): nothing to export", count)
	}
	// Where each operand lives: sendbuf (i), recvbuf (o) or a tl.alloc
	// buffer laid out in scratch (s). In place, the larger buffer is tried
	// first (msccl-tools addresses an in-place allgather through o).
	type place struct {
		buf msccl.Buffer
		off int64 // bytes from the buffer's start
	}
	locate := func(rank int, reg machine.Region) (place, bool) {
		in, out := send[rank], recv[rank]
		type cand struct {
			buf  msccl.Buffer
			reg  machine.Region
			base int64 // where reg starts in its MSCCL buffer
		}
		cands := []cand{{msccl.Input, in, 0}, {msccl.Output, out, 0}}
		if out.N > in.N {
			cands[0], cands[1] = cands[1], cands[0]
		}
		var base int64
		for _, a := range r.allocs[rank] {
			cands = append(cands, cand{msccl.Scratch, a, base})
			base += a.N
		}
		for _, c := range cands {
			if c.reg.Mem == reg.Mem && reg.Off >= c.reg.Off && reg.Off+reg.N <= c.reg.Off+c.reg.N {
				return place{c.buf, c.base + reg.Off - c.reg.Off}, true
			}
		}
		return place{}, false
	}
	// The chunk: the largest size dividing every buffer, offset and length.
	var chunk int64
	gcd := func(x int64) {
		for x != 0 {
			chunk, x = x, chunk%x
		}
	}
	for rank := range send {
		gcd(send[rank].N)
		gcd(recv[rank].N)
		for _, a := range r.allocs[rank] {
			gcd(a.N)
		}
	}
	for _, op := range r.ops {
		for _, reg := range []machine.Region{op.src, op.dst} {
			if reg.N == 0 {
				continue
			}
			pl, ok := locate(op.rank, reg)
			if !ok {
				return nil, fmt.Errorf("--export-msccl: rank %d: tl.%s at %v uses %v, which is not in sendbuf, recvbuf or a tl.alloc buffer", op.rank, op.name, op.at, reg)
			}
			gcd(pl.off)
			gcd(reg.N)
		}
	}
	es := int64(run.DType.Size())
	if chunk == 0 || chunk%es != 0 {
		return nil, fmt.Errorf("--export-msccl: the buffers do not cut into whole elements of %s", run.DType)
	}
	big := max(send[0].N, recv[0].N)
	a := &msccl.Algo{Name: run.Algo, Coll: run.Coll, Proto: "Simple", NGPUs: run.World, InPlace: run.InPlace,
		NChunksPerLoop: int(big / chunk), PieceBytes: int(r.pieceBytes(g))}
	// Channels: the queue pairs between two ranks, in the lower rank's
	// direction order, are channels 0, 1, ...
	chans := map[*machine.QueuePair]int{}
	for _, ep := range g.EPs {
		byPeer := map[int][]*machine.QueuePair{}
		for _, q := range ep.QPs {
			if q.Rank < q.Peer {
				byPeer[q.Peer] = append(byPeer[q.Peer], q)
			}
		}
		for peer, qs := range byPeer {
			sort.Slice(qs, func(i, j int) bool { return qs[i].Dir < qs[j].Dir })
			for c, q := range qs {
				chans[q] = c
				if pq := g.EPs[peer].QP(q.PeerDir); pq != nil {
					chans[pq] = c
				}
				a.NChannels = max(a.NChannels, c+1)
			}
		}
	}
	a.NChannels = max(a.NChannels, 1)
	// Thread blocks: ops sharing a connection side share a thread block;
	// a thread's ops without a connection get one of their own.
	type side struct {
		q    *machine.QueuePair
		send bool
	}
	tbOf := map[any]*exportTB{}
	gpuTBs := make([][]*exportTB, run.World)
	for _, op := range r.ops {
		var keys []any
		if op.send != nil {
			keys = append(keys, side{op.send, true})
		}
		if op.recv != nil {
			keys = append(keys, side{op.recv, false})
		}
		if len(keys) == 0 {
			if op.local != nil {
				keys = append(keys, op.local)
			} else {
				keys = append(keys, op.thread)
			}
		}
		var tb *exportTB
		for _, key := range keys {
			if t := tbOf[key]; t != nil {
				if tb != nil && tb != t {
					return nil, fmt.Errorf("--export-msccl: rank %d: tl.%s at %v sends on %s and receives on %s, which other calls use in separate thread blocks: an MSCCL thread block has one send and one receive connection", op.rank, op.name, op.at, op.send.Dir, op.recv.Dir)
				}
				tb = t
			}
		}
		if tb == nil {
			tb = &exportTB{first: op.seq}
			gpuTBs[op.rank] = append(gpuTBs[op.rank], tb)
		}
		for _, key := range keys {
			tbOf[key] = tb
		}
		if op.send != nil {
			if tb.send != nil && tb.send != op.send {
				return nil, fmt.Errorf("--export-msccl: rank %d: tl.%s at %v sends on %s in the thread block that sends on %s: an MSCCL thread block has one send connection", op.rank, op.name, op.at, op.send.Dir, tb.send.Dir)
			}
			tb.send = op.send
		}
		if op.recv != nil {
			if tb.recv != nil && tb.recv != op.recv {
				return nil, fmt.Errorf("--export-msccl: rank %d: tl.%s at %v receives on %s in the thread block that receives on %s: an MSCCL thread block has one receive connection", op.rank, op.name, op.at, op.recv.Dir, tb.recv.Dir)
			}
			tb.recv = op.recv
		}
		op.tb = tb
		// Dependencies: the latest op of each other thread block (earlier
		// ops of its own thread block come first anyway).
		latest := map[*exportTB]*exportOp{}
		var order []*exportTB
		for _, d := range op.deps {
			if d.tb == tb {
				continue
			}
			if l, ok := latest[d.tb]; !ok || d.seq > l.seq {
				if !ok {
					order = append(order, d.tb)
				}
				latest[d.tb] = d
			}
		}
		deps := make([]*exportOp, 0, len(order))
		for _, t := range order {
			deps = append(deps, latest[t])
		}
		for i := 1; i < len(deps); i++ {
			tb.steps = append(tb.steps, exportStep{dep: deps[i], extra: true})
		}
		st := exportStep{op: op}
		if len(deps) > 0 {
			st.dep = deps[0]
		}
		op.step = len(tb.steps)
		tb.steps = append(tb.steps, st)
	}
	// Write the gpus.
	chunks := func(n int64) int { return int(n / chunk) }
	hasDep := map[*exportOp]bool{}
	for _, op := range r.ops {
		for _, st := range op.tb.steps {
			if st.dep != nil {
				hasDep[st.dep] = true
			}
		}
	}
	for rank := 0; rank < run.World; rank++ {
		var s int64
		for _, al := range r.allocs[rank] {
			s += al.N
		}
		gpu := msccl.GPU{ID: rank, IChunks: chunks(send[rank].N), OChunks: chunks(recv[rank].N), SChunks: chunks(s)}
		for id, tb := range gpuTBs[rank] {
			tb.id = id
		}
		for _, tb := range gpuTBs[rank] {
			t := msccl.TB{ID: tb.id, Send: -1, Recv: -1}
			if tb.send != nil {
				t.Send, t.Chan = tb.send.Peer, chans[tb.send]
			}
			if tb.recv != nil {
				t.Recv, t.Chan = tb.recv.Peer, chans[tb.recv]
			}
			if tb.send != nil && tb.recv != nil && chans[tb.send] != chans[tb.recv] {
				return nil, fmt.Errorf("--export-msccl: rank %d: a thread block would send on %s (channel %d) and receive on %s (channel %d): an MSCCL thread block has one channel", rank, tb.send.Dir, chans[tb.send], tb.recv.Dir, chans[tb.recv])
			}
			for i, st := range tb.steps {
				step := msccl.Step{S: i, Type: "nop", DepID: -1, Deps: -1, Cnt: 1}
				if st.dep != nil {
					step.DepID, step.Deps = st.dep.tb.id, st.dep.step
				}
				if op := st.op; op != nil {
					step.Type, step.Cnt, step.HasDep = op.kind, chunks(op.n), hasDep[op]
					if op.src.N > 0 {
						pl, _ := locate(rank, op.src)
						step.SrcBuf, step.SrcOff = pl.buf, chunks(pl.off)
					}
					if op.dst.N > 0 {
						pl, _ := locate(rank, op.dst)
						step.DstBuf, step.DstOff = pl.buf, chunks(pl.off)
					}
					if op.kind == "rrs" || op.kind == "s" {
						step.DstBuf, step.DstOff = step.SrcBuf, step.SrcOff
					}
				}
				t.Steps = append(t.Steps, step)
			}
			gpu.TBs = append(gpu.TBs, t)
		}
		a.GPUs = append(a.GPUs, gpu)
	}
	return a, nil
}

// pieceBytes is the message size to write as kernbench_piece_bytes: the
// one every send of the run used, when that is less than a slot (0: full
// slots, which is what a runner without the attribute sends). Sends of
// different sizes have no single value; the file then says nothing and
// the importer sends full slots.
func (r *Recorder) pieceBytes(g *machine.Group) int64 {
	var msg int64
	for _, op := range r.ops {
		switch {
		case op.msg == 0:
		case msg == 0:
			msg = op.msg
		case op.msg != msg:
			return 0
		}
	}
	if msg >= g.Cfg.SlotSize {
		return 0
	}
	return msg
}

// Write writes the schedule a after checking that it reads back as a
// valid one (every send paired with its receive, no cycle).
func Write(a *msccl.Algo, w io.Writer) error {
	var buf bytes.Buffer
	if err := a.Write(&buf); err != nil {
		return err
	}
	if _, err := msccl.Parse("exported schedule", buf.Bytes()); err != nil {
		return fmt.Errorf("--export-msccl: the recorded run is not a valid MSCCL schedule:\n%w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
