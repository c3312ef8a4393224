package ccl

import (
	"fmt"
	"math"

	"kernbench/engine/dtype"
)

// Collective describes a builtin collective bench: buffer sizes (in
// multiples of count), the nccl-tests bus bandwidth factor, and the
// reference result.
type Collective struct {
	Name             string
	SendMul, RecvMul bool // buffer holds count × world_size elements
	Reduces          bool
}

// Collectives are the six builtin collectives, in the spec's order.
var Collectives = []Collective{
	{Name: "allreduce", Reduces: true},
	{Name: "reduce_scatter", SendMul: true, Reduces: true},
	{Name: "allgather", RecvMul: true},
	{Name: "broadcast"},
	{Name: "reduce", Reduces: true},
	{Name: "alltoall", SendMul: true, RecvMul: true},
}

// LookupCollective finds a collective by name.
func LookupCollective(name string) (Collective, error) {
	for _, c := range Collectives {
		if c.Name == name {
			return c, nil
		}
	}
	return Collective{}, fmt.Errorf("unknown collective %q (want one of allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall)", name)
}

// BusFactor is nccl-tests' busbw/algbw factor for p ranks.
func (c Collective) BusFactor(p int) float64 {
	fp := float64(p)
	switch c.Name {
	case "allreduce":
		return 2 * (fp - 1) / fp
	case "reduce_scatter", "allgather", "alltoall":
		return (fp - 1) / fp
	}
	return 1
}

func (c Collective) sendCount(count int64, p int) int64 {
	if c.SendMul {
		return count * int64(p)
	}
	return count
}

func (c Collective) recvCount(count int64, p int) int64 {
	if c.RecvMul {
		return count * int64(p)
	}
	return count
}

// Expected computes every rank's expected recv buffer from the original
// send buffers (independently of any algorithm: float64 accumulation in
// dtype.Reduce). before[r] is rank r's recv buffer before the run, which
// non-root ranks of reduce must still hold.
func (c Collective) Expected(dt dtype.DType, red dtype.RedOp, root int, count int64, sends, before [][]byte) [][]byte {
	p := len(sends)
	sz := int64(dt.Size())
	chunk := func(b []byte, i int64) []byte { return b[i*count*sz : (i+1)*count*sz] }
	out := make([][]byte, p)
	switch c.Name {
	case "allreduce":
		want := make([]byte, count*sz)
		dtype.Reduce(red, dt, want, sends)
		for r := range out {
			out[r] = want
		}
	case "reduce_scatter":
		for r := range out {
			parts := make([][]byte, p)
			for s := range parts {
				parts[s] = chunk(sends[s], int64(r))
			}
			out[r] = make([]byte, count*sz)
			dtype.Reduce(red, dt, out[r], parts)
		}
	case "allgather":
		want := make([]byte, 0, int64(p)*count*sz)
		for s := 0; s < p; s++ {
			want = append(want, sends[s]...)
		}
		for r := range out {
			out[r] = want
		}
	case "broadcast":
		for r := range out {
			out[r] = sends[root]
		}
	case "reduce":
		for r := range out {
			out[r] = before[r]
		}
		want := make([]byte, count*sz)
		dtype.Reduce(red, dt, want, sends)
		out[root] = want
	case "alltoall":
		for r := range out {
			out[r] = make([]byte, 0, int64(p)*count*sz)
			for s := 0; s < p; s++ {
				out[r] = append(out[r], chunk(sends[s], int64(r))...)
			}
		}
	}
	return out
}

// isSentinel reports whether element i of b (a recv buffer filled by
// sentinel) still holds the sentinel: the kernel never wrote it. Elements
// past the end of b (a short buffer) are not.
func isSentinel(dt dtype.DType, b []byte, i int) bool {
	sz := dt.Size()
	if (i+1)*sz > len(b) {
		return false
	}
	if dt.IsFloat() {
		return math.IsNaN(dtype.Get(dt, b, i))
	}
	for _, c := range b[i*sz : (i+1)*sz] {
		if c != 0xA5 {
			return false
		}
	}
	return true
}

// sentinel fills an out-of-place recv buffer so untouched elements count as
// wrong: NaN for floats, 0xA5 bytes for integers (outside the Fill range).
func sentinel(dt dtype.DType, b []byte) {
	if dt.IsFloat() {
		dtype.FillValue(dt, b, math.NaN())
		return
	}
	for i := range b {
		b[i] = 0xA5
	}
}
