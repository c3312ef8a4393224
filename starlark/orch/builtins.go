package orch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"go.starlark.net/starlark"

	"kernbench/engine/l3l2"
	"kernbench/engine/sim"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

func attributes() []Attribute {
	region := func(o *Obj) *l3l2.Region { return o.Recv.(*l3l2.Region) }
	msg := func(o *Obj) *l3l2.Message { return o.Recv.(*l3l2.Message) }
	hdl := func(o *Obj) *l3l2.InputHandle { return o.Recv.(*l3l2.InputHandle) }
	res := func(o *Obj) *l3l2.Reservation { return o.Recv.(*l3l2.Reservation) }
	return []Attribute{
		{"region", "state", "str", `"LIVE", "RELEASED" or "POISONED".`, func(o *Obj) starlark.Value { return starlark.String(region(o).State().String()) }},
		{"region", "id", "int", "The region id (descriptor scalar 1).", func(o *Obj) starlark.Value { return u64(region(o).ID()) }},
		{"counter", "offset", "int", "Byte offset in the counter range.", func(o *Obj) starlark.Value { return u64(o.Recv.(*l3l2.Counter).Offset()) }},
		{"counter", "addr", "int", "Physical address of the counter.", func(o *Obj) starlark.Value { return u64(o.Recv.(*l3l2.Counter).Addr()) }},
		{"queue", "state", "str", `"LIVE", "RELEASED", "POISONED_LOCAL" or "POISONED_REMOTE".`, func(o *Obj) starlark.Value {
			return starlark.String(o.Recv.(*l3l2.Queue).State().String())
		}},
		{"queue", "layout", "struct", "input_desc_offset, output_desc_offset, input_arena_offset, output_arena_offset, payload_bytes, counter_bytes (and depth, arena sizes, counter offsets).", func(o *Obj) starlark.Value {
			return layoutStruct(o.Recv.(*l3l2.Queue).Layout())
		}},
		{"queue", "region", "region", "The compatibility region projector over the queue's payload and counters.", nil},
		{"queue", "input", "queue.input", "Enqueue side.", nil},
		{"queue", "output", "queue.output", "Dequeue side.", nil},
		{"message", "seq", "int", "Transport sequence number (message i has seq i+1).", func(o *Obj) starlark.Value { return u64(msg(o).Seq) }},
		{"message", "opcode", "int", "Opcode.DATA or Opcode.ERROR.", func(o *Obj) starlark.Value { return u64(uint64(msg(o).Opcode)) }},
		{"message", "nbytes", "int", "Payload size.", func(o *Obj) starlark.Value { return u64(msg(o).NBytes) }},
		{"message", "payload_offset", "int", "Payload offset in the queue's payload range.", func(o *Obj) starlark.Value { return u64(msg(o).PayloadOffset) }},
		{"l2", "scalars", "list of int", "The scalars passed to orch.submit_next_level.", nil},
		{"l2", "worker", "int", "The chip (worker id) this L2 runs on.", func(o *Obj) starlark.Value { return starlark.MakeInt(o.Recv.(*L2).Worker) }},
		{"handle", "seq", "int", "Transport sequence number.", func(o *Obj) starlark.Value { return u64(hdl(o).Seq) }},
		{"handle", "opcode", "int", "Opcode.DATA, STOP or ERROR.", func(o *Obj) starlark.Value { return u64(uint64(hdl(o).Opcode)) }},
		{"handle", "nbytes", "int", "Payload size.", func(o *Obj) starlark.Value { return u64(hdl(o).NBytes) }},
		{"handle", "payload_offset", "int", "Payload offset in the queue's payload range.", func(o *Obj) starlark.Value { return u64(hdl(o).PayloadOffset) }},
		{"reservation", "seq", "int", "The seq the message will be published with.", func(o *Obj) starlark.Value { return u64(res(o).Seq) }},
		{"reservation", "nbytes", "int", "Reserved payload size.", func(o *Obj) starlark.Value { return u64(res(o).NBytes) }},
		{"reservation", "payload_offset", "int", "Payload offset in the queue's payload range.", func(o *Obj) starlark.Value { return u64(res(o).PayloadOffset) }},
	}
}

func none(err error) (starlark.Value, error) { return starlark.None, err }

func builtins() []Builtin {
	return append(append(append(l3Builtins(), queueBuiltins()...), l2Builtins()...), helperBuiltins()...)
}

// ---------------------------------------------------------------------------
// L3: orch, region, counter.

func l3Builtins() []Builtin {
	rg := func(c *Call) *l3l2.Region { return c.Obj.Recv.(*l3l2.Region) }
	ct := func(c *Call) *l3l2.Counter { return c.Obj.Recv.(*l3l2.Counter) }
	return []Builtin{
		{"orch", "create_l3_l2_region", "create_l3_l2_region(worker_id=0, payload_bytes, counter_bytes)",
			"Allocate a region in the HBM of chip `worker_id`: a payload range and a 64-byte-aligned counter range (both read as zero). Returns a region.",
			func(c *Call) (starlark.Value, error) {
				var worker, payload, counters int64
				if err := c.Unpack("worker_id?", &worker, "payload_bytes", &payload, "counter_bytes", &counters); err != nil {
					return nil, err
				}
				if payload < 0 || counters < 0 {
					return nil, valueError(c.B.Name(), "sizes must be >= 0")
				}
				r, err := c.Obj.RT.Hub.CreateRegion(int(worker), uint64(payload), uint64(counters))
				if err != nil {
					return nil, err
				}
				return newObj(c.Obj.RT, "region", r), nil
			}},
		{"orch", "create_worker_chip_queue", "create_worker_chip_queue(worker_id=0, depth, input_arena_bytes, output_arena_bytes)",
			"Create an SPSC message queue for chip `worker_id` (depth a power of two, arenas positive multiples of 64). Returns a queue.",
			func(c *Call) (starlark.Value, error) {
				var worker, depth, in, out int64
				if err := c.Unpack("worker_id?", &worker, "depth", &depth, "input_arena_bytes", &in, "output_arena_bytes", &out); err != nil {
					return nil, err
				}
				if depth < 0 || in < 0 || out < 0 {
					return nil, valueError(c.B.Name(), "sizes must be >= 0")
				}
				q, err := c.Obj.RT.Hub.CreateQueue(int(worker), uint64(depth), uint64(in), uint64(out))
				if err != nil {
					return nil, err
				}
				o := newObj(c.Obj.RT, "queue", q)
				o.set("input", newObj(c.Obj.RT, "queue.input", q.Input))
				o.set("output", newObj(c.Obj.RT, "queue.output", q.Output))
				o.set("region", newObj(c.Obj.RT, "region", q.Region()))
				return o, nil
			}},
		{"orch", "submit_next_level", "submit_next_level(fn, scalars, worker=0)",
			"Start `fn(l2)` as a persistent L2 process on chip `worker`; `l2.scalars` are `scalars`. Returns at once. When main returns, the runtime waits for submitted L2 work to finish.",
			func(c *Call) (starlark.Value, error) {
				var fn starlark.Callable
				var scal starlark.Value
				worker := 0
				if err := c.Unpack("fn", &fn, "scalars", &scal, "worker?", &worker); err != nil {
					return nil, err
				}
				s, err := scalarList(c.B.Name(), scal)
				if err != nil {
					return nil, err
				}
				rt := c.Obj.RT
				if worker < 0 || worker >= rt.M().Params.Sips {
					return nil, fmt.Errorf("%s: worker %d is not a chip of this machine (%d SIP(s))", c.B.Name(), worker, rt.M().Params.Sips)
				}
				rt.submit(fn, worker, s)
				return starlark.None, nil
			}},
		{"region", "descriptor_scalars", "descriptor_scalars()",
			"The six descriptor scalars `[magic_version, region_id, payload_base, payload_bytes, counter_base, counter_bytes]` to hand to L2.",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				s, err := rg(c).DescriptorScalars()
				if err != nil {
					return nil, err
				}
				return u64List(s), nil
			}},
		{"region", "payload_write", "payload_write(offset, data)",
			"Copy `data` (bytes) into the payload at `offset` over PCIe.",
			func(c *Call) (starlark.Value, error) {
				var off int64
				var data starlark.Bytes
				if err := c.Unpack("offset", &off, "data", &data); err != nil {
					return nil, err
				}
				if off < 0 {
					return nil, fmt.Errorf("%s: offset must be >= 0", c.B.Name())
				}
				return none(rg(c).PayloadWrite(c.P, uint64(off), []byte(data)))
			}},
		{"region", "payload_read", "payload_read(offset, nbytes)",
			"Read `nbytes` of the payload at `offset` over PCIe; returns bytes.",
			func(c *Call) (starlark.Value, error) {
				var off, n int64
				if err := c.Unpack("offset", &off, "nbytes", &n); err != nil {
					return nil, err
				}
				if off < 0 || n < 0 {
					return nil, fmt.Errorf("%s: offset and nbytes must be >= 0", c.B.Name())
				}
				b, err := rg(c).PayloadRead(c.P, uint64(off), uint64(n))
				if err != nil {
					return nil, err
				}
				return starlark.Bytes(b), nil
			}},
		{"region", "counter", "counter(offset)",
			"The int32 counter at byte `offset` of the counter range (4-aligned).",
			func(c *Call) (starlark.Value, error) {
				var off int64
				if err := c.Unpack("offset", &off); err != nil {
					return nil, err
				}
				if off < 0 {
					return nil, fmt.Errorf("%s: offset must be >= 0", c.B.Name())
				}
				k, err := rg(c).Counter(uint64(off))
				if err != nil {
					return nil, err
				}
				return newObj(c.Obj.RT, "counter", k), nil
			}},
		{"region", "free", "free()",
			"Release the handle (logical and idempotent; memory is released after submitted L2 work drained).",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				rg(c).Free()
				return starlark.None, nil
			}},
		{"counter", "notify", "notify(value, op=NotifyOp.Set)",
			"Set the counter to `value` or add `value` to it (wraps at 32 bits).",
			func(c *Call) (starlark.Value, error) {
				var v int64
				op := int64(l3l2.NotifySet)
				if err := c.Unpack("value", &v, "op?", &op); err != nil {
					return nil, err
				}
				o, err := notifyOp(c.B.Name(), op)
				if err != nil {
					return nil, err
				}
				return none(ct(c).Notify(c.P, v, o))
			}},
		{"counter", "test", "test(value, cmp)",
			"One-shot snapshot: struct `(matched, observed)`; a mismatch is not an error.",
			func(c *Call) (starlark.Value, error) {
				var v, cmp int64
				if err := c.Unpack("value", &v, "cmp", &cmp); err != nil {
					return nil, err
				}
				w, err := waitCmp(c.B.Name(), cmp)
				if err != nil {
					return nil, err
				}
				r, err := ct(c).Test(c.P, v, w)
				if err != nil {
					return nil, err
				}
				return testResult(r), nil
			}},
		{"counter", "wait", "wait(value, cmp, timeout)",
			"Wait until `observed cmp value` (signed int32); returns the observed value. `timeout` in seconds (> 0); raises \"timed out\" when it passes (not poison).",
			func(c *Call) (starlark.Value, error) {
				var v, cmp int64
				var to starlark.Value
				if err := c.Unpack("value", &v, "cmp", &cmp, "timeout", &to); err != nil {
					return nil, err
				}
				w, err := waitCmp(c.B.Name(), cmp)
				if err != nil {
					return nil, err
				}
				t, err := seconds(c.B.Name(), to)
				if err != nil {
					return nil, err
				}
				obs, err := ct(c).Wait(c.P, v, w, t)
				if err != nil {
					return nil, err
				}
				return starlark.MakeInt(int(obs)), nil
			}},
	}
}

// submit spawns fn(l2) as an L2 process.
func (rt *Runtime) submit(fn starlark.Callable, worker int, scalars []uint64) {
	l2 := &L2{Worker: worker, Scalars: scalars}
	obj := newObj(rt, "l2", l2)
	obj.set("scalars", u64List(scalars))
	name := fmt.Sprintf("l2 worker %d #%d", worker, len(rt.L2Procs))
	th := rt.NewThread(name)
	s := rt.M().Sim
	proc := s.Spawn(name, func(p *sim.Proc) {
		SetProc(th, p)
		_, err := starlark.Call(th, fn, starlark.Tuple{obj}, nil)
		err = script.Stopped(th, err)
		rt.L2End = max(rt.L2End, s.Now())
		if err != nil && !errors.Is(err, sim.ErrKilled) && rt.OnError != nil {
			rt.OnError(p, err)
		}
	})
	proc.Data = th
	rt.L2Procs = append(rt.L2Procs, proc)
}

// ---------------------------------------------------------------------------
// L3: queue.

func queueBuiltins() []Builtin {
	q := func(c *Call) *l3l2.Queue { return c.Obj.Recv.(*l3l2.Queue) }
	in := func(c *Call) *l3l2.QueueInput { return c.Obj.Recv.(*l3l2.QueueInput) }
	out := func(c *Call) *l3l2.QueueOutput { return c.Obj.Recv.(*l3l2.QueueOutput) }
	message := func(c *Call, m *l3l2.Message) starlark.Value {
		if m == nil {
			return starlark.None
		}
		return newObj(c.Obj.RT, "message", m)
	}
	return []Builtin{
		{"queue", "chip_task_arg_scalars", "chip_task_arg_scalars()",
			"The ten binding scalars (magic_version, session_instance_id_bits, transaction_id, payload_base, payload_bytes, counter_base, counter_bytes, depth, input_arena_bytes, output_arena_bytes) to submit to L2.",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				s, err := q(c).ChipTaskArgScalars()
				if err != nil {
					return nil, err
				}
				return u64List(s), nil
			}},
		{"queue", "request_stop", "request_stop(timeout)",
			"Enqueue the zero-byte STOP message, waiting up to `timeout` seconds for ring space. The input is then stopped: a second request_stop, like enqueue, raises a ValueError (no poison).",
			func(c *Call) (starlark.Value, error) {
				var to starlark.Value
				if err := c.Unpack("timeout", &to); err != nil {
					return nil, err
				}
				t, err := seconds(c.B.Name(), to)
				if err != nil {
					return nil, err
				}
				return none(q(c).RequestStop(c.P, t))
			}},
		{"queue", "try_request_stop", "try_request_stop()",
			"Enqueue STOP if there is ring space; returns whether it did (False once the queue is stopped).",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				ok, err := q(c).TryRequestStop(c.P)
				return starlark.Bool(ok), err
			}},
		{"queue", "free", "free()",
			"Release the queue handle (logical, idempotent; also marks `queue.region` released).",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				q(c).Free()
				return starlark.None, nil
			}},
		{"queue.input", "enqueue", "enqueue(data, nbytes=None, timeout, opcode=Opcode.DATA)",
			"Enqueue `data` (bytes, or None with nbytes 0), waiting up to `timeout` seconds for ring and arena space. Opcode.ERROR is allowed; STOP only through request_stop. After request_stop it raises a ValueError saying the queue is stopped (no poison).",
			func(c *Call) (starlark.Value, error) {
				var data, nbytes, to starlark.Value = starlark.None, starlark.None, starlark.None
				op := int64(l3l2.OpData)
				if err := c.Unpack("data", &data, "nbytes?", &nbytes, "timeout?", &to, "opcode?", &op); err != nil {
					return nil, err
				}
				b, err := dataArg(c.B.Name(), data, nbytes)
				if err != nil {
					return nil, err
				}
				t, err := seconds(c.B.Name(), to)
				if err != nil {
					return nil, err
				}
				o, err := opcode(c.B.Name(), op)
				if err != nil {
					return nil, err
				}
				return none(in(c).Enqueue(c.P, b, o, t))
			}},
		{"queue.input", "try_enqueue", "try_enqueue(data, nbytes=None, opcode=Opcode.DATA)",
			"Enqueue if there is ring and arena space; returns False for backpressure and once request_stop has stopped the queue (never poisons).",
			func(c *Call) (starlark.Value, error) {
				var data, nbytes starlark.Value = starlark.None, starlark.None
				op := int64(l3l2.OpData)
				if err := c.Unpack("data", &data, "nbytes?", &nbytes, "opcode?", &op); err != nil {
					return nil, err
				}
				b, err := dataArg(c.B.Name(), data, nbytes)
				if err != nil {
					return nil, err
				}
				o, err := opcode(c.B.Name(), op)
				if err != nil {
					return nil, err
				}
				ok, err := in(c).TryEnqueue(c.P, b, o)
				return starlark.Bool(ok), err
			}},
		{"queue.output", "peek", "peek(timeout)",
			"Wait up to `timeout` seconds for the next output message; returns it (still active until released).",
			func(c *Call) (starlark.Value, error) {
				var to starlark.Value
				if err := c.Unpack("timeout", &to); err != nil {
					return nil, err
				}
				t, err := seconds(c.B.Name(), to)
				if err != nil {
					return nil, err
				}
				m, err := out(c).Peek(c.P, t)
				if err != nil {
					return nil, err
				}
				return message(c, m), nil
			}},
		{"queue.output", "try_peek", "try_peek()",
			"The next output message, or None when there is none.",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				m, err := out(c).TryPeek(c.P)
				if err != nil {
					return nil, err
				}
				return message(c, m), nil
			}},
		{"queue.output", "read", "read(message)",
			"The payload of the active `message` as bytes (a wrong handle raises without poisoning).",
			func(c *Call) (starlark.Value, error) {
				var mv messageArg
				if err := c.Unpack("message", &mv); err != nil {
					return nil, err
				}
				m, err := mv.get(c.B.Name(), "message")
				if err != nil {
					return nil, err
				}
				b, err := out(c).Read(c.P, m)
				if err != nil {
					return nil, err
				}
				return starlark.Bytes(b), nil
			}},
		{"queue.output", "release", "release(message)",
			"Release the active `message` (a wrong handle poisons).",
			func(c *Call) (starlark.Value, error) {
				var mv messageArg
				if err := c.Unpack("message", &mv); err != nil {
					return nil, err
				}
				m, err := mv.get(c.B.Name(), "message")
				if err != nil {
					return nil, err
				}
				return none(out(c).Release(c.P, m))
			}},
		{"queue.output", "dequeue", "dequeue(timeout)",
			"peek, read and release in one call: returns `(message, bytes)`.",
			func(c *Call) (starlark.Value, error) {
				var to starlark.Value
				if err := c.Unpack("timeout", &to); err != nil {
					return nil, err
				}
				t, err := seconds(c.B.Name(), to)
				if err != nil {
					return nil, err
				}
				m, b, err := out(c).Dequeue(c.P, t)
				if err != nil {
					return nil, err
				}
				return starlark.Tuple{message(c, m), starlark.Bytes(b)}, nil
			}},
		{"queue.output", "try_dequeue", "try_dequeue()",
			"`(message, bytes)` of the next output message, released; or None.",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				m, b, err := out(c).TryDequeue(c.P)
				if err != nil || m == nil {
					return none(err)
				}
				return starlark.Tuple{message(c, m), starlark.Bytes(b)}, nil
			}},
	}
}

// ---------------------------------------------------------------------------
// L2: l2, endpoint, region_endpoint.

func l2Builtins() []Builtin {
	l2 := func(c *Call) *L2 { return c.Obj.Recv.(*L2) }
	ep := func(c *Call) *l3l2.QueueEndpoint { return c.Obj.Recv.(*l3l2.QueueEndpoint) }
	ein := func(c *Call) *l3l2.EndpointInput { return c.Obj.Recv.(*l3l2.EndpointInput) }
	eout := func(c *Call) *l3l2.EndpointOutput { return c.Obj.Recv.(*l3l2.EndpointOutput) }
	rep := func(c *Call) *l3l2.RegionEndpoint { return c.Obj.Recv.(*l3l2.RegionEndpoint) }
	handle := func(c *Call, h *l3l2.InputHandle, err error) (starlark.Value, error) {
		if err != nil || h == nil {
			return none(l2Err(err))
		}
		return newObj(c.Obj.RT, "handle", h), nil
	}
	reservation := func(c *Call, r *l3l2.Reservation, err error) (starlark.Value, error) {
		if err != nil || r == nil {
			return none(l2Err(err))
		}
		return newObj(c.Obj.RT, "reservation", r), nil
	}
	boolRes := func(err error) (starlark.Value, error) {
		if err != nil {
			return starlark.False, l2Err(err)
		}
		return starlark.True, nil
	}
	return []Builtin{
		{"l2", "now_ns", "now_ns()", "Current simulated time in ns (int).",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				return starlark.MakeInt64(int64(c.Obj.RT.M().Sim.Now() / sim.Nanosecond)), nil
			}},
		{"l2", "launch", "launch(kernel, *args, pe=0, **kwargs)",
			"Run the PE kernel `kernel(*args, **kwargs, tl=tl)` on PE `pe` of this chip and wait for it. Pass Ptr views (l2 payload_read, input/output view) as arguments.",
			func(c *Call) (starlark.Value, error) { return launch(c, l2(c)) }},
		{"l2", "decode_endpoint_binding", "decode_endpoint_binding(scalars)",
			"Decode the ten SPSC binding scalars: a struct with fields magic_version, session_instance_id_bits, transaction_id, payload_base, payload_bytes, counter_base, counter_bytes, depth, input_arena_bytes, output_arena_bytes; or None (fail closed; see last_decode_error()).",
			func(c *Call) (starlark.Value, error) {
				var sv starlark.Value
				if err := c.Unpack("scalars", &sv); err != nil {
					return nil, err
				}
				s, err := scalarList(c.B.Name(), sv)
				if err != nil {
					return nil, err
				}
				b, err := l3l2.DecodeBinding(s)
				if err != nil {
					l2(c).lastDecodeErr = err.Error()
					return starlark.None, nil
				}
				l2(c).lastDecodeErr = ""
				return bindingStruct(b), nil
			}},
		{"l2", "last_decode_error", "last_decode_error()", `Why the last decode_endpoint_binding returned None ("" after a success).`,
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				return starlark.String(l2(c).lastDecodeErr), nil
			}},
		{"l2", "spsc_queue_endpoint", "spsc_queue_endpoint(binding, max_inflight=1)",
			"The L2 endpoint of a decoded binding, with an input window of `max_inflight` (1..depth) DATA/ERROR handles plus one STOP slot. Check `live()`; init failures are in `error()` (a second endpoint while one is live on the binding: OWNERSHIP).",
			func(c *Call) (starlark.Value, error) {
				var bv starlark.Value
				window := 1
				if err := c.Unpack("binding", &bv, "max_inflight?", &window); err != nil {
					return nil, err
				}
				b, err := bindingArg(c.B.Name(), bv)
				if err != nil {
					return nil, err
				}
				if window < 0 {
					window = 0 // BAD_ARGUMENT from the engine
				}
				e := c.Obj.RT.Hub.QueueEndpoint(b, uint64(window))
				o := newObj(c.Obj.RT, "endpoint", e)
				in := newObj(c.Obj.RT, "endpoint.input", e.Input())
				out := newObj(c.Obj.RT, "endpoint.output", e.Output())
				o.set("_input", in)
				o.set("_output", out)
				return o, nil
			}},
		{"l2", "region_endpoint", "region_endpoint(descriptor_scalars)",
			"The L2 endpoint of a region descriptor (the first six scalars). Init failures are in `error()` (BAD_DESCRIPTOR) and every later call fails.",
			func(c *Call) (starlark.Value, error) {
				var sv starlark.Value
				if err := c.Unpack("descriptor_scalars", &sv); err != nil {
					return nil, err
				}
				s, err := scalarList(c.B.Name(), sv)
				if err != nil {
					return nil, err
				}
				return newObj(c.Obj.RT, "region_endpoint", c.Obj.RT.Hub.RegionEndpoint(s)), nil
			}},

		{"endpoint", "live", "live()", "Whether the endpoint was built and has no error.",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				return starlark.Bool(ep(c).Live()), nil
			}},
		{"endpoint", "error", "error()", `The first (terminal) error: struct (kind, op, message), kind "NONE" when healthy.`,
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				if e := ep(c).Err(); e != nil {
					return endpointErrStruct(string(e.Kind), e.Op, e.Error()), nil
				}
				return endpointErrStruct(string(l3l2.QueueNone), "", ""), nil
			}},
		{"endpoint", "layout", "layout()", "The queue layout computed from the binding (same fields as queue.layout).",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				return layoutStruct(ep(c).Layout()), nil
			}},
		{"endpoint", "input", "input()", "The input side (consume L3's messages).",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				return c.Obj.extra["_input"], nil
			}},
		{"endpoint", "output", "output()", "The output side (produce messages for L3).",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				return c.Obj.extra["_output"], nil
			}},
		{"endpoint.input", "peek", "peek(timeout_ns)",
			"Wait up to `timeout_ns` (0 = live no-attempt) for the next input; returns a handle, or None (no input, or an error: see error()).",
			func(c *Call) (starlark.Value, error) {
				var ns int64
				if err := c.Unpack("timeout_ns", &ns); err != nil {
					return nil, err
				}
				t, err := nanos(c.B.Name(), ns)
				if err != nil {
					return nil, err
				}
				h, err := ein(c).Peek(c.P, t)
				return handle(c, h, err)
			}},
		{"endpoint.input", "try_peek", "try_peek()", "The next input handle, or None.",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				h, err := ein(c).TryPeek(c.P)
				return handle(c, h, err)
			}},
		{"endpoint.input", "read", "read(handle)", "The payload of an active input handle as bytes (None on an endpoint error).",
			func(c *Call) (starlark.Value, error) {
				var hv handleArg
				if err := c.Unpack("handle", &hv); err != nil {
					return nil, err
				}
				h, err := hv.get(c.B.Name(), "handle")
				if err != nil {
					return nil, err
				}
				b, err := ein(c).Read(c.P, h)
				if err != nil {
					return none(l2Err(err))
				}
				return starlark.Bytes(b), nil
			}},
		{"endpoint.input", "view", `view(handle, dtype="u8")`, "A Ptr over the payload of an active input handle (live, no copy; a kernel reading it pays). Used after the handle's release (the bytes then belong to later messages) it raises a stale-view error, kind OWNERSHIP, op input.view.",
			func(c *Call) (starlark.Value, error) {
				var hv handleArg
				dt := "u8"
				if err := c.Unpack("handle", &hv, "dtype?", &dt); err != nil {
					return nil, err
				}
				h, err := hv.get(c.B.Name(), "handle")
				if err != nil {
					return nil, err
				}
				in := ein(c)
				reg, err := in.View(h)
				if err != nil {
					return none(l2Err(err))
				}
				v, err := view(c.B.Name(), reg, dt)
				if err == nil {
					v.Lease = leaseFunc(func() error { return in.ViewStale(h) })
				}
				return v, err
			}},
		{"endpoint.input", "release", "release(handle)",
			"Release an input handle (out of order allowed; the physical head advances over the released FIFO prefix). Returns False on error (a wrong handle poisons).",
			func(c *Call) (starlark.Value, error) {
				var hv handleArg
				if err := c.Unpack("handle", &hv); err != nil {
					return nil, err
				}
				h, err := hv.get(c.B.Name(), "handle")
				if err != nil {
					return nil, err
				}
				return boolRes(ein(c).Release(c.P, h))
			}},
		{"endpoint.input", "drained", "drained()", "True once STOP was acquired and physically released.",
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				return starlark.Bool(ein(c).Drained()), nil
			}},
		{"endpoint.output", "reserve", "reserve(nbytes, timeout_ns)",
			"Wait up to `timeout_ns` for ring and arena space; returns a reservation or None. `nbytes` larger than the whole output arena can never fit: None with error kind BAD_ARGUMENT (terminal).",
			func(c *Call) (starlark.Value, error) {
				var n, ns int64
				if err := c.Unpack("nbytes", &n, "timeout_ns", &ns); err != nil {
					return nil, err
				}
				if n < 0 {
					return nil, fmt.Errorf("%s: nbytes must be >= 0", c.B.Name())
				}
				t, err := nanos(c.B.Name(), ns)
				if err != nil {
					return nil, err
				}
				r, err := eout(c).Reserve(c.P, uint64(n), t)
				return reservation(c, r, err)
			}},
		{"endpoint.output", "try_reserve", "try_reserve(nbytes)", "A reservation of `nbytes`, or None for no space (one active reservation at a time).",
			func(c *Call) (starlark.Value, error) {
				var n int64
				if err := c.Unpack("nbytes", &n); err != nil {
					return nil, err
				}
				if n < 0 {
					return nil, fmt.Errorf("%s: nbytes must be >= 0", c.B.Name())
				}
				r, err := eout(c).TryReserve(c.P, uint64(n))
				return reservation(c, r, err)
			}},
		{"endpoint.output", "write", "write(reservation, data, offset=0)", "Copy `data` (bytes) into the reservation at `offset`; returns False on error.",
			func(c *Call) (starlark.Value, error) {
				var rv reservationArg
				var data starlark.Bytes
				var off int64
				if err := c.Unpack("reservation", &rv, "data", &data, "offset?", &off); err != nil {
					return nil, err
				}
				r, err := rv.get(c.B.Name(), "reservation")
				if err != nil {
					return nil, err
				}
				if off < 0 {
					return nil, fmt.Errorf("%s: offset must be >= 0", c.B.Name())
				}
				return boolRes(eout(c).Write(c.P, r, []byte(data), uint64(off)))
			}},
		{"endpoint.output", "view", `view(reservation, dtype="u8")`, "A Ptr over the reservation's payload (a kernel can store straight into it). Used after publish (it would change the sent message) it raises a stale-view error, kind OWNERSHIP, op output.view.",
			func(c *Call) (starlark.Value, error) {
				var rv reservationArg
				dt := "u8"
				if err := c.Unpack("reservation", &rv, "dtype?", &dt); err != nil {
					return nil, err
				}
				r, err := rv.get(c.B.Name(), "reservation")
				if err != nil {
					return nil, err
				}
				out := eout(c)
				reg, err := out.View(r)
				if err != nil {
					return none(l2Err(err))
				}
				v, err := view(c.B.Name(), reg, dt)
				if err == nil {
					v.Lease = leaseFunc(func() error { return out.ViewStale(r) })
				}
				return v, err
			}},
		{"endpoint.output", "publish", "publish(reservation, opcode=Opcode.DATA)", "Publish the reservation as a message; returns False on error (unknown, stale or double publish poisons).",
			func(c *Call) (starlark.Value, error) {
				var rv reservationArg
				op := int64(l3l2.OpData)
				if err := c.Unpack("reservation", &rv, "opcode?", &op); err != nil {
					return nil, err
				}
				r, err := rv.get(c.B.Name(), "reservation")
				if err != nil {
					return nil, err
				}
				o, err := opcode(c.B.Name(), op)
				if err != nil {
					return nil, err
				}
				return boolRes(eout(c).Publish(c.P, r, o))
			}},

		{"region_endpoint", "error", "error()", `The sticky error: struct (kind, op, message), kind "NONE" when healthy.`,
			func(c *Call) (starlark.Value, error) {
				if err := c.Unpack(); err != nil {
					return nil, err
				}
				if e := rep(c).Err(); e != nil {
					return endpointErrStruct(string(e.Kind), e.Op, e.Error()), nil
				}
				return endpointErrStruct(string(l3l2.EndpointNone), "", ""), nil
			}},
		{"region_endpoint", "counter_addr", "counter_addr(offset)", "The address of the counter at `offset`, or None.",
			func(c *Call) (starlark.Value, error) {
				var off int64
				if err := c.Unpack("offset", &off); err != nil {
					return nil, err
				}
				if off < 0 {
					return nil, fmt.Errorf("%s: offset must be >= 0", c.B.Name())
				}
				a, err := rep(c).CounterAddr(uint64(off))
				if err != nil {
					return none(l2Err(err))
				}
				return u64(a), nil
			}},
		{"region_endpoint", "signal_notify", "signal_notify(addr, value, op=NotifyOp.Set)", "Set or add to the counter at `addr`; returns False on error.",
			func(c *Call) (starlark.Value, error) {
				var addr starlark.Value
				var v int64
				op := int64(l3l2.NotifySet)
				if err := c.Unpack("addr", &addr, "value", &v, "op?", &op); err != nil {
					return nil, err
				}
				a, err := toU64(c.B.Name(), "addr", addr)
				if err != nil {
					return nil, err
				}
				o, err := notifyOp(c.B.Name(), op)
				if err != nil {
					return nil, err
				}
				return boolRes(rep(c).SignalNotify(c.P, a, v, o))
			}},
		{"region_endpoint", "signal_test", "signal_test(addr, value, cmp)", "One-shot snapshot: struct (matched, observed), or None on error.",
			func(c *Call) (starlark.Value, error) {
				var addr starlark.Value
				var v, cmp int64
				if err := c.Unpack("addr", &addr, "value", &v, "cmp", &cmp); err != nil {
					return nil, err
				}
				a, err := toU64(c.B.Name(), "addr", addr)
				if err != nil {
					return nil, err
				}
				w, err := waitCmp(c.B.Name(), cmp)
				if err != nil {
					return nil, err
				}
				r, err := rep(c).SignalTest(c.P, a, v, w)
				if err != nil {
					return none(l2Err(err))
				}
				return testResult(r), nil
			}},
		{"region_endpoint", "signal_wait", "signal_wait(addr, value, cmp, timeout_ns)",
			"Wait until `observed cmp value`; returns the observed value, or None (timeout_ns 0: no attempt; a timeout records SIGNAL_TIMEOUT).",
			func(c *Call) (starlark.Value, error) {
				var addr starlark.Value
				var v, cmp, ns int64
				if err := c.Unpack("addr", &addr, "value", &v, "cmp", &cmp, "timeout_ns", &ns); err != nil {
					return nil, err
				}
				a, err := toU64(c.B.Name(), "addr", addr)
				if err != nil {
					return nil, err
				}
				w, err := waitCmp(c.B.Name(), cmp)
				if err != nil {
					return nil, err
				}
				t, err := nanos(c.B.Name(), ns)
				if err != nil {
					return nil, err
				}
				obs, ok, err := rep(c).SignalWait(c.P, a, v, w, t)
				if err != nil || !ok {
					return none(l2Err(err))
				}
				return starlark.MakeInt(int(obs)), nil
			}},
		{"region_endpoint", "payload_read", `payload_read(offset, nbytes, dtype="u8")`,
			"A Ptr over payload [offset, +nbytes): a live view (later writes show through), no copy; or None on error.",
			func(c *Call) (starlark.Value, error) {
				var off, n int64
				dt := "u8"
				if err := c.Unpack("offset", &off, "nbytes", &n, "dtype?", &dt); err != nil {
					return nil, err
				}
				if off < 0 || n < 0 {
					return nil, fmt.Errorf("%s: offset and nbytes must be >= 0", c.B.Name())
				}
				reg, err := rep(c).PayloadRead(uint64(off), uint64(n))
				if err != nil {
					return none(l2Err(err))
				}
				return view(c.B.Name(), reg, dt)
			}},
		{"region_endpoint", "payload_write", "payload_write(offset, data)", "Copy small `data` (bytes) into the payload; returns False on error.",
			func(c *Call) (starlark.Value, error) {
				var off int64
				var data starlark.Bytes
				if err := c.Unpack("offset", &off, "data", &data); err != nil {
					return nil, err
				}
				if off < 0 {
					return nil, fmt.Errorf("%s: offset must be >= 0", c.B.Name())
				}
				return boolRes(rep(c).PayloadWrite(c.P, uint64(off), []byte(data)))
			}},
	}
}

// launch runs a PE kernel on a PE of the L2's chip in the calling process.
func launch(c *Call, l2 *L2) (starlark.Value, error) {
	if len(c.Args) < 1 {
		return nil, fmt.Errorf("%s: want launch(kernel, *args, pe=0)", c.B.Name())
	}
	kernel, ok := c.Args[0].(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("%s: kernel must be a function, got %s", c.B.Name(), c.Args[0].Type())
	}
	pe := 0
	var kw []starlark.Tuple
	for _, kv := range c.Kw {
		switch string(kv[0].(starlark.String)) {
		case "pe":
			if err := starlark.AsInt(kv[1], &pe); err != nil {
				return nil, fmt.Errorf("%s: pe: %w", c.B.Name(), err)
			}
		case "tl":
			return nil, fmt.Errorf("%s: tl is passed by the runtime", c.B.Name())
		default:
			kw = append(kw, kv)
		}
	}
	rt := c.Obj.RT
	m := rt.M()
	per := m.Params.CubesPerSip * m.Params.PesPerCube
	if pe < 0 || pe >= per {
		return nil, fmt.Errorf("%s: pe %d is not a PE of chip %d (%d PEs)", c.B.Name(), pe, l2.Worker, per)
	}
	target := m.PE(l2.Worker*per + pe)
	k := tl.New(&tl.Kernel{M: m, PE: target, Rank: target.ID, World: m.NumPEs(), Proc: c.P, Stats: rt.Stats})
	kw = append(kw, starlark.Tuple{starlark.String("tl"), k})
	if rt.KernelKey != "" {
		prev := c.Th.Local(rt.KernelKey)
		c.Th.SetLocal(rt.KernelKey, k)
		defer c.Th.SetLocal(rt.KernelKey, prev)
	}
	_, err := starlark.Call(c.Th, kernel, c.Args[1:], kw)
	if err == nil {
		err = k.Finish()
	} else {
		k.Release()
	}
	if err != nil {
		return nil, err
	}
	return starlark.None, nil
}

// ---------------------------------------------------------------------------
// Predeclared helpers.

func helperBuiltins() []Builtin {
	return []Builtin{
		{"", "pack_u64", "pack_u64(*ints)", "Little-endian u64 bytes of the arguments (ints, or one list of ints).",
			func(c *Call) (starlark.Value, error) {
				if len(c.Kw) > 0 {
					return nil, fmt.Errorf("%s: unexpected keyword arguments", c.B.Name())
				}
				vals := []starlark.Value(c.Args)
				if len(c.Args) == 1 {
					if l, ok := c.Args[0].(starlark.Indexable); ok {
						vals = nil
						for i := 0; i < l.Len(); i++ {
							vals = append(vals, l.Index(i))
						}
					}
				}
				out := make([]byte, 8*len(vals))
				for i, v := range vals {
					x, ok := v.(starlark.Int)
					if !ok {
						return nil, fmt.Errorf("%s: want ints, got %s", c.B.Name(), v.Type())
					}
					u, ok := x.Uint64()
					if !ok {
						s, ok2 := x.Int64()
						if !ok2 {
							return nil, fmt.Errorf("%s: %s does not fit 64 bits", c.B.Name(), x)
						}
						u = uint64(s)
					}
					binary.LittleEndian.PutUint64(out[8*i:], u)
				}
				return starlark.Bytes(out), nil
			}},
		{"", "unpack_u64", "unpack_u64(data)", "The little-endian u64 values of `data` (length a multiple of 8) as a list of ints.",
			func(c *Call) (starlark.Value, error) {
				var b starlark.Bytes
				if err := c.Unpack("data", &b); err != nil {
					return nil, err
				}
				if len(b)%8 != 0 {
					return nil, fmt.Errorf("%s: %d bytes are not a multiple of 8", c.B.Name(), len(b))
				}
				out := make([]uint64, len(b)/8)
				for i := range out {
					out[i] = binary.LittleEndian.Uint64([]byte(b[8*i:]))
				}
				return u64List(out), nil
			}},
		{"", "pack_f32", "pack_f32(values)", "Little-endian float32 bytes of a list of numbers.",
			func(c *Call) (starlark.Value, error) {
				var l starlark.Indexable
				if err := c.Unpack("values", &l); err != nil {
					return nil, err
				}
				out := make([]byte, 4*l.Len())
				for i := 0; i < l.Len(); i++ {
					f, ok := starlark.AsFloat(l.Index(i))
					if !ok {
						return nil, fmt.Errorf("%s: want numbers, got %s", c.B.Name(), l.Index(i).Type())
					}
					binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(f)))
				}
				return starlark.Bytes(out), nil
			}},
		{"", "unpack_f32", "unpack_f32(data)", "The little-endian float32 values of `data` (length a multiple of 4) as a list of floats.",
			func(c *Call) (starlark.Value, error) {
				var b starlark.Bytes
				if err := c.Unpack("data", &b); err != nil {
					return nil, err
				}
				if len(b)%4 != 0 {
					return nil, fmt.Errorf("%s: %d bytes are not a multiple of 4", c.B.Name(), len(b))
				}
				out := make([]starlark.Value, len(b)/4)
				for i := range out {
					out[i] = starlark.Float(math.Float32frombits(binary.LittleEndian.Uint32([]byte(b[4*i:]))))
				}
				return starlark.NewList(out), nil
			}},
	}
}
