package selftest

import (
	"fmt"
	"strings"
)

// emitter writes indented Starlark source.
type emitter struct {
	b   strings.Builder
	ind int
}

// l writes one line at the current indentation.
func (e *emitter) l(format string, a ...any) {
	if format == "" {
		e.b.WriteByte('\n')
		return
	}
	e.b.WriteString(strings.Repeat("    ", e.ind))
	fmt.Fprintf(&e.b, format, a...)
	e.b.WriteByte('\n')
}

// in indents the lines body writes.
func (e *emitter) in(body func()) {
	e.ind++
	body()
	e.ind--
}

// block writes head (ending in ":") and body indented under it.
func (e *emitter) block(head string, body func()) {
	e.l("%s", head)
	e.in(body)
}

func (e *emitter) String() string { return e.b.String() }

// prelude are the helpers every generated kernel defines (it loads
// nothing, so a reproducer is one self-contained file).
const prelude = `ELEM_SIZE = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i32": 4, "i64": 8, "u8": 1}

def cdiv(a, b):
    return (a + b - 1) // b

def part(buf, k, i):
    # Part i of k nearly equal parts of buf.
    n = len(buf)
    lo = i * n // k
    return buf.slice(lo, (i + 1) * n // k - lo)

def views(bufs, k, i):
    # Part i of k of every buffer of a list.
    if k == 1:
        return bufs
    return [part(b, k, i) for b in bufs]

def cut(buf, weights, total):
    # buf cut in proportion to weights (whose sum is total).
    n = len(buf)
    out = []
    acc = 0
    for w in weights:
        lo = n * acc // total
        acc += w
        out.append(buf.slice(lo, n * acc // total - lo))
    return out

def passpart(x, k, i):
    # Part i of k of a buffer, or of each buffer of a list.
    if type(x) == "list":
        return [part(b, k, i) for b in x]
    return part(x, k, i)

def split(x, weights, total):
    # The lanes' parts of a buffer, or of each buffer of a list (then a
    # list of buffers per lane).
    if type(x) != "list":
        return cut(x, weights, total)
    parts = [cut(b, weights, total) for b in x]
    return [[q[l] for q in parts] for l in range(len(weights))]

def msgs(buf, pe):
    # The messages tl.send cuts buf into, pe elements each (the last one
    # shorter; an empty buffer is one empty message).
    n = len(buf)
    if n == 0:
        return [buf]
    return [buf.slice(i, min(pe, n - i)) for i in range(0, n, pe)]

def combine(tl, a, b):
    # a redop b for two Tiles (avg accumulates as a sum).
    op = tl.redop
    if op == "sum" or op == "avg":
        return a + b
    if op == "prod":
        return a * b
    if op == "max":
        return tl.maximum(a, b)
    return tl.minimum(a, b)
`
