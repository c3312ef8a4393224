package tl_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
)

// primitiveRun is what one run of testdata/prim/primitives.star recorded.
type primitiveRun struct {
	back, dst string  // rank 0's received result, rank 1's dst
	timeNs    float64 // the slower rank's time for the transfer
	sends     int64
	recvs     int64
	loads     int64
	stores    int64
	mathOps   int64
}

func runPrimitive(t *testing.T, cfg machine.IPCQConfig, red dtype.RedOp, prim, impl, dt string, n int, space string, inPlace bool) primitiveRun {
	t.Helper()
	globals := loadFixtureCfg(t, filepath.Join("prim", "primitives.star"), cfg)
	out := starlark.NewDict(4)
	th := &starlark.Thread{Name: "make"}
	fn, err := starlark.Call(th, globals["make"], starlark.Tuple{starlark.String(prim), starlark.String(impl), starlark.String(dt), starlark.MakeInt(n), starlark.String(space), starlark.Bool(inPlace), out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorldCfg(t, 2, cfg)
	w.redOp = red
	if err := w.run(t, fn.(starlark.Callable)); err != nil {
		t.Fatalf("%s %s: %v", prim, impl, err)
	}
	get := func(k string) starlark.Value {
		v, _, _ := out.Get(starlark.String(k))
		return v
	}
	r := primitiveRun{back: string(get("back").(starlark.Bytes)), dst: string(get("dst").(starlark.Bytes))}
	t0, _ := starlark.AsFloat(get("t0"))
	t1, _ := starlark.AsFloat(get("t1"))
	r.timeNs = math.Max(t0, t1)
	for _, k := range w.kernels {
		r.sends += k.Stats.Send
		r.recvs += k.Stats.Recv
		r.loads += k.Stats.Load
		r.stores += k.Stats.Store
		r.mathOps += k.Stats.Math
	}
	return r
}

// Every fused primitive against the same transfer written message by
// message with tl.send/recv/fetch/store (issue: chunk-level primitives):
// identical data, identical message counts, simulated time within 1 %,
// for every dtype and redop, ragged lengths, in place and out of place,
// rings in tcm/sram/hbm, sleep and poll.
func TestPrimitivesMatchHandWritten(t *testing.T) {
	type variant struct {
		name    string
		cfg     func(*machine.IPCQConfig)
		dtypes  []string
		redops  []dtype.RedOp
		lengths []int
	}
	all := []string{"f32", "f16", "bf16", "f64", "i32", "i64", "u8"}
	reds := []dtype.RedOp{dtype.Sum, dtype.Prod, dtype.RMax, dtype.RMin, dtype.Avg}
	variants := []variant{
		{"tcm", func(*machine.IPCQConfig) {}, all, reds, []int{1, 64*5 + 3}},
		{"hbm_rings", func(c *machine.IPCQConfig) { c.BufferKind = machine.HBM }, []string{"f32", "u8"}, []dtype.RedOp{dtype.Sum, dtype.Avg}, []int{64*5 + 3}},
		{"sram_rings", func(c *machine.IPCQConfig) { c.BufferKind = machine.SRAM }, []string{"bf16"}, []dtype.RedOp{dtype.RMax}, []int{64*5 + 3}},
		{"poll", func(c *machine.IPCQConfig) { c.Backpressure = machine.Poll }, []string{"f32"}, []dtype.RedOp{dtype.Sum}, []int{64*5 + 3}},
		{"poll_hbm_rings", func(c *machine.IPCQConfig) { c.Backpressure, c.BufferKind = machine.Poll, machine.HBM }, []string{"i64"}, []dtype.RedOp{dtype.RMin}, []int{64*5 + 3}},
	}
	prims := []string{"recv_reduce_send", "recv_reduce_copy", "recv_reduce_copy_send", "recv_copy_send", "recv_copy"}
	for _, v := range variants {
		cfg := testIPCQ()
		v.cfg(&cfg)
		for _, prim := range prims {
			for _, dt := range v.dtypes {
				for _, red := range v.redops {
					for _, n := range v.lengths {
						for _, inPlace := range []bool{false, true} {
							if inPlace && prim != "recv_reduce_copy" && prim != "recv_reduce_copy_send" {
								continue
							}
							for _, space := range []string{"hbm", "tcm"} {
								name := fmt.Sprintf("%s/%s/%s/%s/n=%d/%s/in_place=%v", v.name, prim, dt, red, n, space, inPlace)
								t.Run(name, func(t *testing.T) {
									fused := runPrimitive(t, cfg, red, prim, "fused", dt, n, space, inPlace)
									hand := runPrimitive(t, cfg, red, prim, "hand", dt, n, space, inPlace)
									if diff := cmp.Diff(hand.dst, fused.dst); diff != "" {
										t.Errorf("dst differs (-hand +fused):\n%s", diff)
									}
									if diff := cmp.Diff(hand.back, fused.back); diff != "" {
										t.Errorf("forwarded result differs (-hand +fused):\n%s", diff)
									}
									if fused.sends != hand.sends || fused.recvs != hand.recvs {
										t.Errorf("messages: fused %d sends %d recvs, by hand %d sends %d recvs", fused.sends, fused.recvs, hand.sends, hand.recvs)
									}
									if fused.loads != hand.loads || fused.stores != hand.stores || fused.mathOps != hand.mathOps {
										t.Errorf("work: fused %d loads %d stores %d math, by hand %d %d %d", fused.loads, fused.stores, fused.mathOps, hand.loads, hand.stores, hand.mathOps)
									}
									if d := math.Abs(fused.timeNs-hand.timeNs) / hand.timeNs; d > 0.01 {
										t.Errorf("simulated time: fused %.3f ns, by hand %.3f ns (%.2f %% apart, want <= 1 %%)", fused.timeNs, hand.timeNs, 100*d)
									}
								})
							}
						}
					}
				}
			}
		}
	}
}
