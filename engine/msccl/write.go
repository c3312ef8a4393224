package msccl

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// Write prints a schedule in the XML format msccl-tools writes by default
// (one element per line, the attributes in its order), so that the MSCCL
// runtimes and Parse read it back. Operands a step type does not use are
// written as msccl-tools does: buffer i, offset -1.
func (a *Algo) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	inplace := 0
	if a.InPlace {
		inplace = 1
	}
	proto := a.Proto
	if proto == "" {
		proto = "Simple"
	}
	// outofplace, minBytes and maxBytes are required by the newer MSCCL
	// runtimes (msccl-executor-nccl, RCCL), which look every attribute up
	// by name and fail on a missing one; older parsers ignore them. The
	// schedule is valid at any size (counts split into nchunksperloop
	// chunks), so it is offered for all of them unless MinBytes and
	// MaxBytes say otherwise (kernbench tune's ranges).
	maxBytes := a.MaxBytes
	if maxBytes == 0 {
		maxBytes = math.MaxInt64
	}
	fmt.Fprintf(bw, "<algo name=%s proto=%s nchannels=\"%d\" nchunksperloop=\"%d\" ngpus=\"%d\" coll=%s inplace=\"%d\" outofplace=\"%d\" minBytes=\"%d\" maxBytes=\"%d\"",
		attr(a.Name), attr(proto), a.NChannels, a.NChunksPerLoop, a.NGPUs, attr(a.Coll), inplace, 1-inplace, a.MinBytes, maxBytes)
	if a.PieceBytes > 0 {
		// Last, so that a runtime keeping a fixed number of attributes
		// (16 in NCCL-MSCCL and RCCL) drops this one first.
		fmt.Fprintf(bw, " %s=\"%d\"", PieceBytesAttr, a.PieceBytes)
	}
	fmt.Fprintln(bw, ">")
	for _, g := range a.GPUs {
		fmt.Fprintf(bw, "  <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"%d\">\n", g.ID, g.IChunks, g.OChunks, g.SChunks)
		for _, tb := range g.TBs {
			fmt.Fprintf(bw, "    <tb id=\"%d\" send=\"%d\" recv=\"%d\" chan=\"%d\">\n", tb.ID, tb.Send, tb.Recv, tb.Chan)
			for _, st := range tb.Steps {
				// A step without a source (r, rcs) or a destination (s,
				// rrs) names the other operand there, as msccl-tools does.
				src, srcOff := st.SrcBuf, st.SrcOff
				dst, dstOff := st.DstBuf, st.DstOff
				if !st.Reads() {
					src, srcOff = dst, dstOff
				}
				if !st.Writes() {
					dst, dstOff = src, srcOff
				}
				if src == 0 {
					src, srcOff = Input, -1
				}
				if dst == 0 {
					dst, dstOff = Output, -1
				}
				hasdep := 0
				if st.HasDep {
					hasdep = 1
				}
				fmt.Fprintf(bw, "      <step s=\"%d\" type=%q srcbuf=\"%s\" srcoff=\"%d\" dstbuf=\"%s\" dstoff=\"%d\" cnt=\"%d\" depid=\"%d\" deps=\"%d\" hasdep=\"%d\" />\n",
					st.S, st.Type, src, srcOff, dst, dstOff, st.Cnt, st.DepID, st.Deps, hasdep)
			}
			fmt.Fprintln(bw, "    </tb>")
		}
		fmt.Fprintln(bw, "  </gpu>")
	}
	fmt.Fprintln(bw, "</algo>")
	return bw.Flush()
}

// PieceBytesAttr is kernbench's own <algo> attribute: the size of the
// messages a connection carries, which MSCCL's format has no field for.
const PieceBytesAttr = "kernbench_piece_bytes"

// attr quotes an attribute value, escaping what XML requires.
func attr(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	_ = xml.EscapeText(&b, []byte(s))
	b.WriteByte('"')
	return b.String()
}
