package ccl

import (
	"fmt"
	"math"
	"strings"

	"kernbench/engine/collective"
	"kernbench/engine/dtype"
	"kernbench/engine/spelling"
)

// Collective is a builtin collective of the collective table with the
// bench's behaviour attached: buffer sizes and the reference result.
type Collective struct {
	collective.Collective
}

// Collectives are the builtin collectives, in the table's order
// (engine/collective declares them).
func Collectives() []Collective {
	table := collective.Table()
	out := make([]Collective, len(table))
	for i, c := range table {
		out[i] = Collective{c}
	}
	return out
}

// LookupCollective finds a collective by name.
func LookupCollective(name string) (Collective, error) {
	c, ok := collective.Lookup(name)
	if !ok {
		return Collective{}, fmt.Errorf("unknown collective %q (want one of %s)%s", name, strings.Join(collective.Names(), ", "), spelling.Hint(name, collective.Names()))
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
func (c Collective) KeepsRecv() bool { return c.RecvUnchanged }

// Expected computes every rank's expected recv buffer from the original
// send buffers (the collective table's reference, engine/collective).
// before[r] is rank r's recv buffer before the run (nil unless
// KeepsRecv); sums, when not nil, the sums of the send buffers as they
// were filled.
func (c Collective) Expected(dt dtype.DType, red dtype.RedOp, root int, count int64, sends, before [][]byte, sums *dtype.FillSum) [][]byte {
	return c.Collective.Expected(&collective.Inputs{DT: dt, Red: red, Root: root, Count: count, Sends: sends, Before: before, Sums: sums})
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
