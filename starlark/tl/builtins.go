package tl

import (
	"fmt"
	"math"

	"go.starlark.net/starlark"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/engine/prims"
	"kernbench/engine/spelling"
	"kernbench/starlark/errkind"
)

// handle is the result of an async tl call, completed by tl.wait.
type handle struct {
	// Load is the operation of a fetch, store or copy (first: its
	// fields are the ones a load touches, as a fused primitive's private
	// loads, prims.LoadPool's, are).
	prims.Load
	// Only the handles given to Starlark use the rest.
	dir   starlark.Value
	dst   *Ptr
	at    any // where a recv_async was issued
	done  bool
	value starlark.Value
}

// HandlePool holds the loads the fused primitives recycled, shared by the
// kernels of a run (prims.LoadPool).
type HandlePool = prims.LoadPool

func (h *handle) String() string        { return fmt.Sprintf("<%s handle>", h.Kind) }
func (h *handle) Type() string          { return "handle" }
func (h *handle) Freeze()               {}
func (h *handle) Truth() starlark.Bool  { return true }
func (h *handle) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: handle") }

func optDir(v starlark.Value, fn string) (string, bool, error) {
	switch v := v.(type) {
	case starlark.NoneType:
		return "", false, nil
	case starlark.String:
		return string(v), true, nil
	}
	return "", false, fmt.Errorf("%s: dir must be a direction name or None, got %s", fn, v.Type())
}

func (k *Kernel) group(fn string) (*machine.Group, error) {
	if k.G == nil {
		return nil, errorf(errkind.IpcqInvalidDirection, "%s: no IPCQ process group is installed for rank %d", fn, k.Rank)
	}
	return k.G, nil
}

func parseDType(fn string, v string) (dtype.DType, error) {
	dt, err := dtype.Parse(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", fn, err)
	}
	return dt, nil
}

func kernelBuiltins() []Builtin {
	return []Builtin{
		{Name: "program_id", Sig: "program_id(axis=0)", Doc: "The rank for axis 0 (Triton style); 0 for other axes.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				axis := 0
				if err := starlark.UnpackArgs(b.Name(), args, kw, "axis?", &axis); err != nil {
					return nil, err
				}
				if axis == 0 {
					return starlark.MakeInt(k.Rank), nil
				}
				return starlark.MakeInt(0), nil
			}},
		{Name: "directions", Sig: "directions()", Doc: "Sorted list of the IPCQ directions installed on this rank.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 0); err != nil {
					return nil, err
				}
				var out []starlark.Value
				if k.EP != nil {
					for _, d := range k.EP.Directions() {
						out = append(out, starlark.String(d))
					}
				}
				return starlark.NewList(out), nil
			}},
		{Name: "peer", Sig: "peer(dir)", Doc: "The peer rank of direction dir (IpcqInvalidDirection if not installed).",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var dir string
				if err := starlark.UnpackArgs(b.Name(), args, kw, "dir", &dir); err != nil {
					return nil, err
				}
				g, err := k.group(b.Name())
				if err != nil {
					return nil, err
				}
				q, err := g.Lookup(k.Rank, dir, false)
				if err != nil {
					return nil, err
				}
				return starlark.MakeInt(q.Peer), nil
			}},
		{Name: "spawn", Sig: "spawn(fn, *args, **kwargs)", Doc: "Run fn(tl, *args, **kwargs) as another thread on this PE: a simulated process sharing the PE's DMA channels, math unit, memory ports and directions, with its own tl (pass it on; a thread calls only its own tl, never its parent's; the thread's tl.rank etc. are the rank's). Returns a handle; tl.wait(handle) joins the thread and returns fn's result. The kernel ends when its threads have ended; an error in a thread fails the run with its backtrace and where it was spawned. A direction's send side and receive side are each used by one thread at a time (DirectionInUse). The thread's --max-steps budget is what its spawner had left when it spawned it (a chain of threads each spawning the next is bounded as one thread).",
			Fn: builtinSpawn},
		{Name: "ready", Sig: "ready(dir)", Doc: "True when a message is waiting on dir (a recv would not block). Never blocks: lets a kernel do other work first, as the fused primitives do.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var dir string
				if err := starlark.UnpackArgs(b.Name(), args, kw, "dir", &dir); err != nil {
					return nil, err
				}
				g, err := k.group(b.Name())
				if err != nil {
					return nil, err
				}
				// (Never blocks: on a direction that only sends it is
				// False, not an error.)
				q, err := g.Lookup(k.Rank, dir, false)
				if err != nil {
					return nil, err
				}
				return starlark.Bool(q.Ready()), nil
			}},
		{Name: "send", Sig: "send(dir, src, nbytes=None, piece_bytes=None)", Doc: "Blocking send of src (a Ptr, or its first nbytes, a whole number of elements) to the peer of dir, as messages of slot_size bytes (rounded down to whole elements when slot_size is not a multiple of the element size), then the rest (piece_bytes, at most slot_size, makes the messages smaller; the receiver must cut its buffer the same way). Blocks only while the peer's ring is full; returns once the last message is queued on DMA vc_comm (ipcq_overhead_ns per message). src stays in flight until the DMAs complete (tl.flush).",
			Fn: builtinSend},
		{Name: "send_async", Sig: "send_async(dir, src, nbytes=None, piece_bytes=None)", Doc: "Non-blocking tl.send: its messages are issued in the background as credits allow, and the kernel goes on at once. tl.wait(handle) returns when the last message has been issued; until then no other send may use dir (DirectionInUse). src stays in flight until the DMAs complete (tl.flush).",
			Fn: builtinSendAsync},
		{Name: "recv", Sig: "recv(dir=None, dst=None)", Doc: "Blocking receive. Without dst: one message, as the rx slot itself (return_slot, zero-copy, read-only; valid until the ring wraps). With dst: as many messages as fill dst, each copied out of its slot by DMA (copy_to_dst; its credit returns when its copy is done, so the sender refills the ring meanwhile); a message shorter than a full one (slot_size, rounded down to whole elements) ends the buffer early. Returns the view of dst that was written. dir=None takes the next ready direction round-robin. The result has .dir and the sender's dtype.",
			Fn: func(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var dir, dst starlark.Value = starlark.None, starlark.None
				if err := starlark.UnpackArgs(b.Name(), args, kw, "dir?", &dir, "dst?", &dst); err != nil {
					return nil, err
				}
				return k.recv(b.Name(), dir, dst, th.CallFrame(1).Pos)
			}},
		{Name: "recv_async", Sig: "recv_async(dir=None, dst=None)", Doc: "Non-blocking receive: returns a handle; tl.wait(handle) completes it like tl.recv and returns the Ptr.",
			Fn: func(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var dir starlark.Value = starlark.None
				var dst PtrArg
				if err := starlark.UnpackArgs(b.Name(), args, kw, "dir?", &dir, "dst?", &dst); err != nil {
					return nil, err
				}
				d, has, err := optDir(dir, b.Name())
				if err != nil {
					return nil, err
				}
				if has {
					g, err := k.group(b.Name())
					if err != nil {
						return nil, err
					}
					if _, err := g.LookupRecv(k.Rank, d); err != nil {
						return nil, err
					}
				}
				h := &handle{Load: prims.Load{Kind: "recv"}, dir: dir, at: th.CallFrame(1).Pos}
				if dst.Given() {
					p, err := dst.Dst(b.Name(), "dst")
					if err != nil {
						return nil, err
					}
					h.dst = p
					// (A recv handle has no load: Op stands for its
					// receive among the rank's writes until the wait.)
					h.Op = k.NoteReceiveInto(b.Name(), p.Reg, &h.done)
				}
				return h, nil
			}},
		{Name: "wait", Sig: "wait(handle)", Doc: "Complete an async operation: returns the Tile (fetch_async), the received Ptr (recv_async), the thread function's return value (spawn; an error in the thread fails the run) or None (store_async, copy_async: once written; send_async: once every message is issued, while its source is read until the DMAs complete, which tl.flush(dir) waits for). With an event (tl.event), blocks until it is signalled and returns None.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var v starlark.Value
				if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &v); err != nil {
					return nil, err
				}
				switch h := v.(type) {
				case *handle:
					return k.wait(b.Name(), h)
				case *sendHandle:
					return starlark.None, k.JoinSends(h.Q)
				case *threadHandle:
					return k.joinThread(h)
				case *Event:
					return starlark.None, k.WaitEvent(b.Name(), &h.Event, h)
				}
				return nil, fmt.Errorf("%s: want a handle from a *_async call, got %s", b.Name(), v.Type())
			}},
		{Name: "done", Sig: "done(handle)", Doc: "True when the operation of an async handle has completed, so tl.wait(handle) would not block (a recv_async handle: once waited for; a thread: once it returned). Never blocks: a kernel that issues many stores can drop the finished handles instead of keeping one per piece to the end.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var v starlark.Value
				if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &v); err != nil {
					return nil, err
				}
				switch h := v.(type) {
				case *handle:
					// A recv_async receives when it is waited for.
					return starlark.Bool(h.done || (h.Kind != "recv" && h.Op != nil && h.Op.Done && h.Stale == nil)), nil
				case *sendHandle:
					return starlark.Bool(h.Done), nil
				case *threadHandle:
					return starlark.Bool(h.done), nil
				}
				return nil, fmt.Errorf("%s: want a handle from a *_async call or tl.spawn, got %s", b.Name(), v.Type())
			}},
		{Name: "flush", Sig: "flush(dir=None)", Doc: "Block until every send this rank issued (on dir, or on all directions) has completed its DMA, so its source may be reused.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var dir starlark.Value = starlark.None
				if err := starlark.UnpackArgs(b.Name(), args, kw, "dir?", &dir); err != nil {
					return nil, err
				}
				d, has, err := optDir(dir, b.Name())
				if err != nil {
					return nil, err
				}
				if !has {
					// Everything this kernel issued: stores of the fused
					// primitives too.
					if err := k.DrainWrites(); err != nil {
						return nil, err
					}
				}
				if k.G == nil {
					return starlark.None, nil
				}
				var q *machine.QueuePair
				if has {
					if q, err = k.G.Lookup(k.Rank, d, false); err != nil {
						return nil, err
					}
				}
				if err := k.JoinSends(q); err != nil {
					return nil, err
				}
				return starlark.None, k.G.Flush(k.Proc, k.EP, q)
			}},
		{Name: "fetch", Sig: "fetch(ptr)", Doc: `Load ptr into a Tile (the seed's tl.load; "load" is a Starlark keyword). Own TCM is read directly, anything else through DMA vc_compute.`,
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				p, err := unpackPtr(b, args, kw, "ptr")
				if err != nil {
					return nil, err
				}
				h, err := k.fetchAsync(b.Name(), p)
				if err != nil {
					return nil, err
				}
				return k.wait(b.Name(), h)
			}},
		{Name: "fetch_async", Sig: "fetch_async(ptr)", Doc: "Issue a load without waiting; tl.wait(handle) returns the Tile.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				p, err := unpackPtr(b, args, kw, "ptr")
				if err != nil {
					return nil, err
				}
				return k.fetchAsync(b.Name(), p)
			}},
		{Name: "store", Sig: "store(ptr, tile)", Doc: "Store tile into ptr (same dtype and count). Waits for the tile's math to finish, then writes (own TCM directly, otherwise DMA vc_compute) and returns when the data is in memory.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				h, err := k.storeArgs(b, args, kw)
				if err != nil {
					return nil, err
				}
				return k.wait(b.Name(), h)
			}},
		{Name: "store_async", Sig: "store_async(ptr, tile)", Doc: "Issue a store without waiting; tl.wait(handle) returns None when the data is in memory.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				return k.storeArgs(b, args, kw)
			}},
		{Name: "copy", Sig: "copy(dst, src)", Doc: "Local copy of src into dst (same dtype and count): direct within own TCM, otherwise DMA vc_compute. Returns when done.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				h, err := k.copyArgs(b, args, kw)
				if err != nil {
					return nil, err
				}
				return k.wait(b.Name(), h)
			}},
		{Name: "copy_async", Sig: "copy_async(dst, src)", Doc: "Issue a copy without waiting; tl.wait(handle) returns None when done.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				return k.copyArgs(b, args, kw)
			}},
		{Name: "reduce", Sig: "reduce(dst, a, b, op=\"sum\")", Doc: `dst = a op b elementwise, as load, load, math, store. a and b are Ptrs or Tiles; op is sum, prod, max, min or avg (avg accumulates as sum). Returns when dst is written.`,
			Fn: builtinReduce},
		{Name: "zeros", Sig: "zeros(count, dtype)", Doc: "A new Tile of count zeros.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var count int
				var dt string
				if err := starlark.UnpackArgs(b.Name(), args, kw, "count", &count, "dtype", &dt); err != nil {
					return nil, err
				}
				return k.newTile(b.Name(), count, dt)
			}},
		{Name: "full", Sig: "full(count, value, dtype)", Doc: "A new Tile of count copies of value. For an integer dtype value must be an integer it holds (i32, i64 or u8 range): anything else is an error, not wrapped or saturated.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var count int
				var v starlark.Value
				var dt string
				if err := starlark.UnpackArgs(b.Name(), args, kw, "count", &count, "value", &v, "dtype", &dt); err != nil {
					return nil, err
				}
				t, err := k.newTile(b.Name(), count, dt)
				if err != nil {
					return nil, err
				}
				if err := checkIntValue(b.Name(), t.DT, v); err != nil {
					return nil, err
				}
				// Under --timing-only t.Data is empty and nothing is filled.
				switch v := v.(type) {
				case starlark.Int:
					// Integers keep full precision for integer dtypes.
					i, ok := v.Int64()
					f, _ := starlark.AsFloat(v)
					t.Fill(f, i, ok && !t.DT.IsFloat())
				case starlark.Float:
					t.Fill(float64(v), 0, false)
				default:
					return nil, fmt.Errorf("%s: value must be a number, got %s", b.Name(), v.Type())
				}
				k.LogConst(&t.Tile)
				return t, nil
			}},
		{Name: "maximum", Sig: "maximum(a, b)", Doc: "Elementwise maximum of two Tiles.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				return tileFn(b, args, kw, dtype.Max)
			}},
		{Name: "minimum", Sig: "minimum(a, b)", Doc: "Elementwise minimum of two Tiles.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				return tileFn(b, args, kw, dtype.Min)
			}},
		{Name: "alloc", Sig: "alloc(count, dtype, space=\"tcm\")", Doc: "Per-rank scratch memory (tcm or hbm of this PE, or its cube's sram), zeroed, freed when the kernel returns (once the sends that read it are done). Fails when the space is exhausted.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var count int
				var dt string
				space := "tcm"
				if err := starlark.UnpackArgs(b.Name(), args, kw, "count", &count, "dtype", &dt, "space?", &space); err != nil {
					return nil, err
				}
				d, err := parseDType(b.Name(), dt)
				if err != nil {
					return nil, err
				}
				if count < 0 {
					return nil, fmt.Errorf("%s: count must be >= 0, got %d", b.Name(), count)
				}
				sp, err := machine.ParseSpace(space)
				if err != nil {
					// "dram" is the package's HBM, not a misspelt "sram".
					return nil, fmt.Errorf("%s: %w%s", b.Name(), err, spelling.Hint(space, []string{"tcm", "sram", "hbm"}))
				}
				v, err := k.AllocView(b.Name(), count, d, sp)
				if err != nil {
					return nil, err
				}
				return &Ptr{v}, nil
			}},
		{Name: "time", Sig: "time()", Doc: "Current simulated time in ns (float).",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 0); err != nil {
					return nil, err
				}
				return starlark.Float(k.PE.Sim().Now().Ns()), nil
			}},
		{Name: "trace", Sig: "trace(name, **args)", Doc: "A user marker in the trace and op_log at the current time.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var name string
				if err := starlark.UnpackPositionalArgs(b.Name(), args, nil, 1, &name); err != nil {
					return nil, err
				}
				if l := k.M.LogOf(k.PE); l != nil {
					now := k.PE.Sim().Now()
					r := &oplog.Record{Rank: k.Rank, Kind: oplog.KindMarker, Name: name, TStart: now, TEnd: now, Args: map[string]string{}}
					for _, kv := range kw {
						r.Args[string(kv[0].(starlark.String))] = kv[1].String()
					}
					l.Add(r)
				}
				if k.Obs != nil {
					kwt := make(starlark.Tuple, 0, len(kw))
					for _, kv := range kw {
						kwt = append(kwt, kv)
					}
					k.Obs.Marker(k, name, kwt)
				}
				return starlark.None, nil
			}},
	}
}

func tileFn(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple, op dtype.Op) (starlark.Value, error) {
	var x, y starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kw, "a", &x, "b", &y); err != nil {
		return nil, err
	}
	a, ok1 := x.(*Tile)
	c, ok2 := y.(*Tile)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%s: want two Tiles, got %s and %s", b.Name(), x.Type(), y.Type())
	}
	return tileBinary(op, a, c, b.Name())
}

func (k *Kernel) newTile(fn string, count int, dt string) (*Tile, error) {
	d, err := parseDType(fn, dt)
	if err != nil {
		return nil, err
	}
	t, err := k.NewTile(fn, count, d)
	if err != nil {
		return nil, err
	}
	if fn == "tl.zeros" {
		k.LogConst(&t)
	}
	return &Tile{Tile: t, k: k}, nil
}

func builtinSend(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	q, src, piece, err := k.sendArgs(b, args, kw)
	if err != nil {
		return nil, err
	}
	return starlark.None, k.SendBufferOn(q, &src.View, piece, th.CallFrame(1).Pos)
}

// sendArgs unpacks (dir, src, nbytes=None, piece_bytes=None) of tl.send
// and tl.send_async: the sending queue pair, the view of src to send and
// the largest message in bytes.
func (k *Kernel) sendArgs(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (*machine.QueuePair, *Ptr, int64, error) {
	var dir string
	var src PtrArg
	var nbV, pieceV starlark.Value = starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kw, "dir", &dir, "src", &src, "nbytes?", &nbV, "piece_bytes?", &pieceV); err != nil {
		return nil, nil, 0, err
	}
	q, p, err := k.sendTarget(b, dir, &src, nbV)
	if err != nil {
		return nil, nil, 0, err
	}
	piece, err := k.pieceBytes(b.Name(), pieceV)
	return q, p, piece, err
}

// pieceBytes is the largest message of a buffer transfer: piece_bytes when
// given (1 <= piece_bytes <= slot_size), else slot_size.
func (k *Kernel) pieceBytes(fn string, v starlark.Value) (int64, error) {
	if _, err := k.group(fn); err != nil {
		return 0, err
	}
	if v == starlark.None {
		return k.G.Cfg.SlotSize, nil
	}
	n, err := starlark.AsInt32(v)
	if err != nil || n < 1 || int64(n) > k.G.Cfg.SlotSize {
		return 0, fmt.Errorf("%s: piece_bytes must be an int from 1 to slot_size (%d), got %s", fn, k.G.Cfg.SlotSize, v)
	}
	return int64(n), nil
}

func (k *Kernel) sendTarget(b *starlark.Builtin, dir string, srcArg *PtrArg, nbV starlark.Value) (*machine.QueuePair, *Ptr, error) {
	src, err := srcArg.Ptr(b.Name(), "src")
	if err != nil {
		return nil, nil, err
	}
	g, err := k.group(b.Name())
	if err != nil {
		return nil, nil, err
	}
	q, err := g.Lookup(k.Rank, dir, true)
	if err != nil {
		return nil, nil, err
	}
	if nbV != starlark.None {
		nb, err := starlark.AsInt32(nbV)
		if err != nil || nb < 0 {
			return nil, nil, fmt.Errorf("%s: nbytes must be a non-negative int, got %s", b.Name(), nbV)
		}
		if int64(nb) > src.Reg.N {
			return nil, nil, errorf(errkind.OutOfBounds, "rank %d send %s: nbytes %d exceeds src (%d bytes)", k.Rank, dir, nb, src.Reg.N)
		}
		if sz := int64(src.DT.Size()); int64(nb)%sz != 0 {
			// It used to send nb/sz whole elements: nbytes=3 of f32 sent 0.
			return nil, nil, errorf(errkind.OutOfBounds, "rank %d send %s: nbytes %d is not a whole number of %s elements (%d bytes each)", k.Rank, dir, nb, src.DT, sz)
		}
		v := *src
		v.Reg.N = int64(nb)
		v.Count = int64(nb) / int64(src.DT.Size())
		src = &v
	}
	return q, src, nil
}

// sendHandle is a tl.send_async in progress: its own simulated process
// issues the messages while the kernel goes on (or a tl.send of a kernel
// with threads, noted for the hazard checks of the other threads'
// writes).
type sendHandle struct{ prims.Send }

func (h *sendHandle) String() string        { return fmt.Sprintf("<send %s handle>", h.Q.Dir) }
func (h *sendHandle) Type() string          { return "handle" }
func (h *sendHandle) Freeze()               {}
func (h *sendHandle) Truth() starlark.Bool  { return true }
func (h *sendHandle) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: handle") }

func builtinSendAsync(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	q, src, piece, err := k.sendArgs(b, args, kw)
	if err != nil {
		return nil, err
	}
	if err := k.PrepareSend(q, &src.View); err != nil {
		return nil, err
	}
	h := &sendHandle{}
	if err := k.SendAsync(&h.Send, q, &src.View, piece, th.CallFrame(1).Pos); err != nil {
		return nil, err
	}
	return h, nil
}

func (k *Kernel) recv(fn string, dirV, dstV starlark.Value, at any) (starlark.Value, error) {
	g, err := k.group(fn)
	if err != nil {
		return nil, err
	}
	dir, has, err := optDir(dirV, fn)
	if err != nil {
		return nil, err
	}
	var dst *prims.View
	if dstV != starlark.None {
		p, err := asDst(dstV, fn, "dst")
		if err != nil {
			return nil, err
		}
		dst = &p.View
	}
	var q *machine.QueuePair
	if has {
		if q, err = g.LookupRecv(k.Rank, dir); err != nil {
			return nil, err
		}
	}
	got, err := k.Recv(fn, q, k.EP, dst, at)
	if err != nil {
		return nil, err
	}
	return &Ptr{got}, nil
}

// fetchAsync issues the load of p for a Starlark handle.
func (k *Kernel) fetchAsync(fn string, p *Ptr) (*handle, error) {
	h := &handle{}
	h.Src = p.View
	if _, err := k.FetchSrc(fn, &h.Load); err != nil {
		return nil, err
	}
	return h, nil
}

func (k *Kernel) storeArgs(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (*handle, error) {
	var pa PtrArg
	var ta TileArg
	if err := starlark.UnpackArgs(b.Name(), args, kw, "ptr", &pa, "tile", &ta); err != nil {
		return nil, err
	}
	p, err := pa.Dst(b.Name(), "ptr")
	if err != nil {
		return nil, err
	}
	t, err := ta.Tile(b.Name(), "tile")
	if err != nil {
		return nil, err
	}
	return k.storeTile(b.Name(), p, t)
}

func (k *Kernel) storeTile(fn string, p *Ptr, t *Tile) (*handle, error) {
	op, err := k.Store(fn, &p.View, &t.Tile)
	if err != nil {
		return nil, err
	}
	h := &handle{Load: prims.Load{Kind: "store", Op: op}}
	k.AttachDone(op, &h.done)
	return h, nil
}

func (k *Kernel) copyArgs(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (*handle, error) {
	var da, sa PtrArg
	if err := starlark.UnpackArgs(b.Name(), args, kw, "dst", &da, "src", &sa); err != nil {
		return nil, err
	}
	dst, err := da.Dst(b.Name(), "dst")
	if err != nil {
		return nil, err
	}
	src, err := sa.Ptr(b.Name(), "src")
	if err != nil {
		return nil, err
	}
	h := &handle{Load: prims.Load{Src: src.View}}
	if err := k.Copy(b.Name(), &dst.View, &h.Load); err != nil {
		return nil, err
	}
	k.AttachDone(h.Op, &h.done)
	h.WatchSlot(k.Rank)
	return h, nil
}

func (k *Kernel) wait(fn string, h *handle) (starlark.Value, error) {
	if h.done {
		return h.value, nil
	}
	switch h.Kind {
	case "recv":
		if h.Op != nil {
			h.Op.Done = true // the receive begins: its write is no race
		}
		v, err := k.recv(fn, h.dir, func() starlark.Value {
			if h.dst == nil {
				return starlark.None
			}
			return h.dst
		}(), h.at)
		if err != nil {
			return nil, err
		}
		h.value = v
	default:
		if err := h.Op.Wait(k.Proc); err != nil {
			return nil, err
		}
		h.value = starlark.None
		// A slot read must still have held the message it was received as
		// when the read completed (the source is read at completion).
		if h.Stale != nil {
			return nil, h.Stale
		}
		if h.Kind == "fetch" {
			h.value = &Tile{Tile: prims.Tile{DT: h.Src.DT, Count: h.Src.Count, Data: h.Op.Data, Ready: h.Op.Xfer.Finished, ID: h.Op.TileID}, k: k}
		}
	}
	h.done = true
	return h.value, nil
}

func builtinReduce(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var da PtrArg
	var av, bv starlark.Value
	opName := "sum"
	if err := starlark.UnpackArgs(b.Name(), args, kw, "dst", &da, "a", &av, "b", &bv, "op?", &opName); err != nil {
		return nil, err
	}
	dst, err := da.Dst(b.Name(), "dst")
	if err != nil {
		return nil, err
	}
	red, err := dtype.ParseRedOp(opName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	// Both loads are issued before either is waited for, so they overlap.
	operand := func(v starlark.Value, name string) (prims.Operand, error) {
		switch x := v.(type) {
		case *Tile:
			return prims.Operand{Tile: &x.Tile, By: &x.k.Kernel}, nil
		case *Ptr:
			return k.LoadOperand(b.Name(), &x.View)
		}
		return prims.Operand{}, fmt.Errorf("%s: %s must be a Ptr or a Tile, got %s", b.Name(), name, v.Type())
	}
	oa, err := operand(av, "a")
	if err != nil {
		return nil, err
	}
	ob, err := operand(bv, "b")
	if err != nil {
		return nil, err
	}
	return starlark.None, k.Reduce(b.Name(), &dst.View, red.Pairwise(), oa, ob)
}

// checkIntValue refuses a value an integer dtype cannot hold exactly: out
// of range (it used to wrap or saturate silently) or with a fraction.
func checkIntValue(fn string, d dtype.DType, v starlark.Value) error {
	lo, hi, isInt := d.IntRange()
	if !isInt {
		return nil
	}
	var i int64
	switch v := v.(type) {
	case starlark.Int:
		var ok bool
		if i, ok = v.Int64(); !ok {
			return fmt.Errorf("%s: value %v is outside the range of %s [%d, %d]", fn, v, d, lo, hi)
		}
	case starlark.Float:
		f := float64(v)
		if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("%s: value %v is not an integer, and %s holds integers", fn, v, d)
		}
		if f < -0x1p63 || f >= 0x1p63 {
			return fmt.Errorf("%s: value %v is outside the range of %s [%d, %d]", fn, v, d, lo, hi)
		}
		i = int64(f)
	default:
		return nil // the caller reports a value that is not a number
	}
	if i < lo || i > hi {
		return fmt.Errorf("%s: value %v is outside the range of %s [%d, %d]", fn, v, d, lo, hi)
	}
	return nil
}
