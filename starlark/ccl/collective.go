package ccl

import (
	"fmt"
	"math"
	"strings"

	"kernbench/engine/collective"
	"kernbench/engine/dtype"
)

// Collective is a builtin collective of the collective table with the
// bench's behaviour attached: buffer sizes and the reference result.
type Collective struct {
	collective.Collective
}

// Collectives are the builtin collectives, in the table's order
// (engine/collective declares them).
var Collectives = func() []Collective {
	out := make([]Collective, len(collective.Table))
	for i, c := range collective.Table {
		out[i] = Collective{c}
	}
	return out
}()

// LookupCollective finds a collective by name.
func LookupCollective(name string) (Collective, error) {
	c, ok := collective.Lookup(name)
	if !ok {
		return Collective{}, fmt.Errorf("unknown collective %q (want one of %s)", name, strings.Join(collective.Names(), ", "))
	}
	return Collective{c}, nil
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

// KeepsRecv reports whether some ranks' recv buffers must end as they
// began (non-root ranks of reduce): Expected needs them only then.
func (c Collective) KeepsRecv() bool { return c.Name == "reduce" }

// Expected computes every rank's expected recv buffer from the original
// send buffers (independently of any algorithm: float64 accumulation in
// dtype.Reduce). before[r] is rank r's recv buffer before the run, which
// non-root ranks of reduce must still hold (nil unless KeepsRecv). sums,
// when not nil, holds the sums of the send buffers as they were filled:
// the reductions it answers (dtype.FillSum.Reduce) are taken from it
// instead of reading the buffers again.
func (c Collective) Expected(dt dtype.DType, red dtype.RedOp, root int, count int64, sends, before [][]byte, sums *dtype.FillSum) [][]byte {
	p := len(sends)
	sz := int64(dt.Size())
	chunk := func(b []byte, i int64) []byte { return b[i*count*sz : (i+1)*count*sz] }
	// reduce writes into dst the reduction over ranks of the send
	// buffers' elements from lo on (parts: those elements of each).
	reduce := func(dst []byte, lo int64, parts [][]byte) {
		if sums == nil || !sums.Reduce(red, dst, int(lo)) {
			dtype.Reduce(red, dt, dst, parts)
		}
	}
	out := make([][]byte, p)
	switch c.Name {
	case "allreduce":
		want := make([]byte, count*sz)
		reduce(want, 0, sends)
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
			reduce(out[r], int64(r)*count, parts)
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
		reduce(want, 0, sends)
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
