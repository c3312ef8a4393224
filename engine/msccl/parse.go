package msccl

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Parse reads an MSCCL XML schedule (the format msccl-tools writes by
// default: <algo>, <gpu>, <tb>, <step>) and validates it. file names the
// source in messages ("file:line: ..."). The error, if any, is an
// ErrorList with every problem found.
func Parse(file string, data []byte) (*Algo, error) {
	p := &parser{file: file}
	a := p.decode(data)
	if len(p.errs) > 0 {
		return nil, p.errs.sorted()
	}
	if errs := validate(a); len(errs) > 0 {
		return nil, errs.sorted()
	}
	return a, nil
}

type parser struct {
	file string
	errs ErrorList
}

func (p *parser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// element is a start tag with the line it begins on.
type element struct {
	xml.StartElement
	line int
}

// decode builds the Algo from the token stream, checking the nesting
// algo > gpu > tb > step; it stops at the first structural error (what
// follows a broken structure would only add noise).
func (p *parser) decode(data []byte) *Algo {
	// A UTF-8 byte order mark (editors on Windows write one) is no text
	// before the root: encoding/xml refused it as "unexpected text".
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var a *Algo
	var stack []string // open elements
	for {
		line, _ := d.InputPos()
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				p.errorf(se.Line, "malformed XML: %s", se.Msg)
			} else {
				p.errorf(line, "malformed XML: %v", err)
			}
			return a
		}
		switch t := tok.(type) {
		case xml.StartElement:
			e := &element{StartElement: t, line: line}
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			if !p.start(&a, parent, e) {
				return a
			}
			stack = append(stack, t.Name.Local)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				p.errorf(line, "unexpected text %q", shorten(string(bytes.TrimSpace(t))))
				return a
			}
		}
	}
	if a == nil {
		p.errorf(0, "no <algo> element: not an MSCCL XML schedule")
	}
	return a
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// start handles one start tag under parent; false stops decoding.
func (p *parser) start(a **Algo, parent string, e *element) bool {
	want := map[string]string{"algo": "", "gpu": "algo", "tb": "gpu", "step": "tb"}
	name := e.Name.Local
	w, known := want[name]
	switch {
	case name == "op" && parent == "tb":
		p.errorf(e.line, "<op> steps (msccl-tools' newer XML format) are not supported: generate the XML with the default old_format (<step s=... srcbuf=... dstbuf=...>)")
		return false
	case !known:
		p.errorf(e.line, "unexpected element <%s>", name)
		return false
	case w != parent:
		where := "at the top level"
		if parent != "" {
			where = "inside <" + parent + ">"
		}
		p.errorf(e.line, "<%s> %s: want it inside <%s>", name, where, w)
		if w == "" {
			p.errorf(e.line, "<algo> must be the root element")
		}
		return false
	}
	p.duplicateAttrs(e)
	switch name {
	case "algo":
		if *a != nil {
			p.errorf(e.line, "a second <algo> element")
			return false
		}
		*a = &Algo{File: p.file, Line: e.line,
			Name:           p.str(e, "name", false),
			Coll:           p.str(e, "coll", true),
			Proto:          p.str(e, "proto", false),
			NChannels:      p.num(e, "nchannels", false, 1),
			NChunksPerLoop: p.num(e, "nchunksperloop", true, 0),
			NGPUs:          p.num(e, "ngpus", true, 0),
			InPlace:        p.num(e, "inplace", false, 0) != 0,
			PieceBytes:     p.num(e, PieceBytesAttr, false, 0),
		}
		if v, ok := p.attr(e, PieceBytesAttr); ok && (*a).PieceBytes < 1 && isInt(v) {
			p.errorf(e.line, "<algo %s=%q>: want a positive number of bytes", PieceBytesAttr, v)
		}
		if p.str(e, "outofplace", false) == "1" {
			(*a).InPlace = false
		}
		if (*a).Coll == "reducescatter" {
			// The MSCCL runtimes' spelling; msccl-tools writes reduce_scatter.
			(*a).Coll = "reduce_scatter"
		}
	case "gpu":
		(*a).GPUs = append((*a).GPUs, GPU{Line: e.line,
			ID:      p.num(e, "id", true, -1),
			IChunks: p.num(e, "i_chunks", true, 0),
			OChunks: p.num(e, "o_chunks", true, 0),
			SChunks: p.num(e, "s_chunks", false, 0),
		})
	case "tb":
		g := &(*a).GPUs[len((*a).GPUs)-1]
		g.TBs = append(g.TBs, TB{Line: e.line,
			ID:   p.num(e, "id", true, -1),
			Send: p.num(e, "send", true, -1),
			Recv: p.num(e, "recv", true, -1),
			Chan: p.num(e, "chan", false, 0),
		})
	case "step":
		g := &(*a).GPUs[len((*a).GPUs)-1]
		tb := &g.TBs[len(g.TBs)-1]
		tb.Steps = append(tb.Steps, Step{Line: e.line,
			S:      p.num(e, "s", true, -1),
			Type:   p.str(e, "type", true),
			SrcBuf: p.buf(e, "srcbuf"),
			SrcOff: p.num(e, "srcoff", false, -1),
			DstBuf: p.buf(e, "dstbuf"),
			DstOff: p.num(e, "dstoff", false, -1),
			Cnt:    p.num(e, "cnt", false, 1),
			DepID:  p.num(e, "depid", false, -1),
			Deps:   p.num(e, "deps", false, -1),
			HasDep: p.num(e, "hasdep", false, 0) != 0,
		})
		p.stepAttrs(e)
	}
	return true
}

// duplicateAttrs reports an attribute given twice in one element, which
// XML does not allow (encoding/xml accepts it and the first one was used
// silently).
func (p *parser) duplicateAttrs(e *element) {
	for i, at := range e.Attr {
		for _, prev := range e.Attr[:i] {
			if prev.Name == at.Name {
				p.errorf(e.line, "<%s> has the attribute %s twice (%q, then %q): XML allows each attribute once", e.Name.Local, at.Name.Local, prev.Value, at.Value)
				break
			}
		}
	}
}

// stepAttrs reports the attributes a step that moves data cannot do
// without. msccl-tools writes all of them on every step, and the runtimes
// refuse a file that lacks one; a default (one chunk, offset -1) would turn
// a typing mistake into a different schedule or a puzzling range error. A
// nop moves nothing and may leave them out.
func (p *parser) stepAttrs(e *element) {
	typ, _ := p.attr(e, "type")
	if typ == "nop" {
		return
	}
	if _, ok := p.attr(e, "cnt"); !ok && typ != "" {
		p.errorf(e.line, "<step type=%q> has no cnt attribute (the number of chunks it moves)", typ)
	}
	for _, side := range []string{"src", "dst"} {
		buf, hasBuf := p.attr(e, side+"buf")
		if _, hasOff := p.attr(e, side+"off"); hasBuf && !hasOff {
			p.errorf(e.line, "<step %sbuf=%q> has no %soff attribute", side, buf, side)
		}
	}
}

func (p *parser) attr(e *element, name string) (string, bool) {
	for _, at := range e.Attr {
		if at.Name.Local == name {
			return at.Value, true
		}
	}
	return "", false
}

func (p *parser) str(e *element, name string, required bool) string {
	v, ok := p.attr(e, name)
	if !ok && required {
		p.errorf(e.line, "<%s> has no %s attribute", e.Name.Local, name)
	}
	return v
}

func (p *parser) num(e *element, name string, required bool, def int) int {
	v, ok := p.attr(e, name)
	if !ok {
		if required {
			p.errorf(e.line, "<%s> has no %s attribute", e.Name.Local, name)
		}
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < -1 || n > 1<<30 {
		p.errorf(e.line, "<%s %s=%q>: want an integer in [-1, 2^30]", e.Name.Local, name, v)
		return def
	}
	return n
}

// isInt reports whether an attribute value is an integer (num reports
// those that are not).
func isInt(v string) bool {
	_, err := strconv.Atoi(strings.TrimSpace(v))
	return err == nil
}

func (p *parser) buf(e *element, name string) Buffer {
	v, ok := p.attr(e, name)
	if !ok {
		return 0
	}
	switch v {
	case "i", "o", "s":
		return Buffer(v[0])
	}
	p.errorf(e.line, "<step %s=%q>: want i (input), o (output) or s (scratch)", name, v)
	return 0
}
