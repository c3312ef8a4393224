package msccl

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A two-gpu schedule: gpu 0 sends its chunk 0 and receives the sum of
// chunk 1; gpu 1 the other way round; tb 1 of gpu 1 copies after tb 0.
const twoGPUs = `<algo name="pair" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="1">
  <gpu id="0" i_chunks="2" o_chunks="0" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="1" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0" />
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="0" s_chunks="1">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="rrcs" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1" />
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="0" deps="0" hasdep="0" />
    </tb>
  </gpu>
</algo>
`

func TestParseStructure(t *testing.T) {
	a, err := Parse("pair.xml", []byte(twoGPUs))
	if err != nil {
		t.Fatal(err)
	}
	want := &Algo{File: "pair.xml", Line: 1, Name: "pair", Coll: "allreduce", Proto: "Simple", NChannels: 1, NChunksPerLoop: 2, NGPUs: 2, InPlace: true,
		GPUs: []GPU{
			{ID: 0, Line: 2, IChunks: 2, TBs: []TB{{ID: 0, Line: 3, Send: 1, Recv: 1, Steps: []Step{
				{S: 0, Line: 4, Type: "s", SrcBuf: Input, SrcOff: 0, DstBuf: Input, DstOff: 0, Cnt: 1, DepID: -1, Deps: -1},
				{S: 1, Line: 5, Type: "r", SrcBuf: Input, SrcOff: 1, DstBuf: Input, DstOff: 1, Cnt: 1, DepID: -1, Deps: -1},
			}}}},
			{ID: 1, Line: 8, IChunks: 2, SChunks: 1, TBs: []TB{
				{ID: 0, Line: 9, Send: 0, Recv: 0, Steps: []Step{
					{S: 0, Line: 10, Type: "rrcs", SrcBuf: Input, DstBuf: Input, Cnt: 1, DepID: -1, Deps: -1, HasDep: true}}},
				{ID: 1, Line: 12, Send: -1, Recv: -1, Steps: []Step{
					{S: 0, Line: 13, Type: "cpy", SrcBuf: Input, DstBuf: Scratch, Cnt: 1, DepID: 0, Deps: 0}}},
			}},
		}}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	wantMatches := []Peer{
		{Send: StepRef{0, 0, 0}, Recv: StepRef{1, 0, 0}},
		{Send: StepRef{1, 0, 0}, Recv: StepRef{0, 0, 1}},
	}
	if diff := cmp.Diff(wantMatches, a.Matches()); diff != "" {
		t.Errorf("Matches (-want +got):\n%s", diff)
	}
}

// kernbench_piece_bytes (the message size of a kernbench export) is read
// and written back; a file without it has none.
func TestPieceBytesRoundTrip(t *testing.T) {
	a, err := Parse("pair.xml", []byte(twoGPUs))
	if err != nil {
		t.Fatal(err)
	}
	if a.PieceBytes != 0 {
		t.Errorf("PieceBytes = %d without the attribute, want 0", a.PieceBytes)
	}
	a.PieceBytes = 2048
	var buf bytes.Buffer
	if err := a.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), ` kernbench_piece_bytes="2048">`) {
		t.Errorf("written <algo> lacks kernbench_piece_bytes:\n%s", buf.String())
	}
	b, err := Parse("pair.xml", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if b.PieceBytes != 2048 {
		t.Errorf("PieceBytes read back = %d, want 2048", b.PieceBytes)
	}
}

// Each edit of twoGPUs breaks one rule; the error names the file and line.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, old, new string
		want           []string
	}{
		{"not xml", twoGPUs, "hello", []string{`f.xml:1: unexpected text "hello"`}},
		{"empty", twoGPUs, "", []string{"f.xml: no <algo> element: not an MSCCL XML schedule"}},
		{"unclosed", `hasdep="0" />
    </tb>
  </gpu>
  <gpu id="1"`, `hasdep="0">
    </tb>
  </gpu>
  <gpu id="1"`, []string{"f.xml:6: malformed XML: element <step> closed by </tb>"}},
		{"unknown element", `<tb id="1"`, `<thread id="1"`, []string{"f.xml:12: unexpected element <thread>"}},
		{"step outside tb", `  <gpu id="1" i_chunks="2" o_chunks="0" s_chunks="1">`, `  <step s="0" type="nop"/><gpu id="1" i_chunks="2" o_chunks="0" s_chunks="1">`, []string{"f.xml:8: <step> inside <algo>: want it inside <tb>"}},
		{"missing attribute", ` ngpus="2"`, ``, []string{"f.xml:1: <algo> has no ngpus attribute"}},
		{"bad number", `nchunksperloop="2"`, `nchunksperloop="two"`, []string{`f.xml:1: <algo nchunksperloop="two">: want an integer in [-1, 2^30]`}},
		{"piece bytes zero", ` inplace="1">`, ` inplace="1" kernbench_piece_bytes="0">`, []string{`f.xml:1: <algo kernbench_piece_bytes="0">: want a positive number of bytes`}},
		{"piece bytes not a number", ` inplace="1">`, ` inplace="1" kernbench_piece_bytes="2K">`, []string{`f.xml:1: <algo kernbench_piece_bytes="2K">: want an integer in [-1, 2^30]`}},
		{"huge ngpus", `ngpus="2"`, `ngpus="1000000000"`, []string{"f.xml:1: ngpus 1000000000: want at most 65536"}},
		{"unknown collective", `coll="allreduce"`, `coll="alltonext"`, []string{`f.xml:1: collective "alltonext" is not one kernbench can check (want one of allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall)`}},
		{"gpu twice", `<gpu id="1"`, `<gpu id="0"`, []string{"f.xml:1: gpu 1 is missing (ngpus=2 wants ids 0..1)", "f.xml:8: gpu 0 is defined twice (first at line 2)"}},
		{"bad buffer", `dstbuf="s"`, `dstbuf="x"`, []string{`f.xml:13: <step dstbuf="x">: want i (input), o (output) or s (scratch)`}},
		{"peer out of range", `send="1" recv="1"`, `send="2" recv="1"`, []string{"f.xml:3: gpu 0 tb 0 send peer 2 is outside [0, ngpus=2) (-1 for none)"}},
		{"self peer", `send="1" recv="1"`, `send="1" recv="0"`, []string{"f.xml:3: gpu 0 tb 0 recv peer is the gpu itself"}},
		{"channel", `<tb id="1" send="-1" recv="-1" chan="0">`, `<tb id="1" send="-1" recv="-1" chan="1">`, []string{"f.xml:12: gpu 1 tb 1 chan 1 is outside [0, nchannels=1)"}},
		{"two senders", `<tb id="1" send="-1" recv="-1" chan="0">`, `<tb id="1" send="0" recv="-1" chan="0">`, []string{"f.xml:12: gpu 1 tb 1 sends to gpu 0 on channel 0, as tb 0 (line 9) does: one thread block per connection and direction"}},
		{"step numbering", `<step s="1" type="r"`, `<step s="2" type="r"`, []string{"f.xml:5: gpu 0 tb 0: step s=2 is step number 1 of its thread block (steps are numbered 0, 1, ... in order)"}},
		{"unknown type", `type="cpy"`, `type="copy"`, []string{`f.xml:13: gpu 1 tb 1 step 0: unknown step type "copy" (want one of s, r, rcs, rrs, rrc, rrcs, cpy, re, nop)`}},
		{"send without peer", `type="cpy"`, `type="s"`, []string{"f.xml:13: gpu 1 tb 1 step 0: type s sends, but tb 1 has no send peer (send=-1)"}},
		{"chunk out of range", `dstbuf="s" dstoff="0"`, `dstbuf="s" dstoff="1"`, []string{"f.xml:13: gpu 1 tb 1 step 0: dst chunks [1, 2) of buffer s (scratch) are outside the 1 chunk(s) gpu 1 declares"}},
		{"zero cnt", `type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1"`, `type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="0"`, []string{"f.xml:13: gpu 1 tb 1 step 0: cnt 0: want at least 1 chunk"}},
		{"bad depid", `depid="0" deps="0"`, `depid="7" deps="0"`, []string{"f.xml:13: gpu 1 tb 1 step 0: depid 7 is not a thread block of gpu 1 (tbs 0..1)"}},
		{"bad deps", `depid="0" deps="0"`, `depid="0" deps="3"`, []string{"f.xml:13: gpu 1 tb 1 step 0: deps 3 is not a step of gpu 1 tb 0 (steps 0..0)"}},
		{"unmatched receive", `<step s="0" type="s" srcbuf="i" srcoff="0"`, `<step s="0" type="nop" srcbuf="i" srcoff="0"`, []string{"f.xml:10: gpu 1 tb 0 step 0 receives from gpu 0 on channel 0, but gpu 0 has no send for it (0 send(s), 1 receive(s) on that connection)"}},
		{"count mismatch", `type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1"`, `type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="2"`, []string{"f.xml:5: gpu 0 tb 0 step 1 receives cnt 2, but the send it matches (gpu 1 tb 0 step 0, line 10) has cnt 1"}},
		{"waits for own later step", `depid="0" deps="0" hasdep="0" />
    </tb>
  </gpu>
</algo>`, `depid="0" deps="0" hasdep="0" />
      <step s="1" type="nop" depid="1" deps="1" />
    </tb>
  </gpu>
</algo>`, []string{"f.xml:14: dependency cycle: gpu 1 tb 1 step 1 (line 14) waits for gpu 1 tb 1 step 1 (line 14); no order of the steps can run it"}},
		{"receive before send across gpus", `<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="1" type="r"`, `<step s="0" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="1" type="s"`, []string{"f.xml:4: dependency cycle: gpu 0 tb 0 step 0 (line 4) waits for gpu 1 tb 0 step 0 (line 10) which waits for gpu 0 tb 0 step 1 (line 5) which waits for gpu 0 tb 0 step 0 (line 4); no order of the steps can run it"}},
		// msccl-tools writes cnt, srcoff and dstoff on every step; a file
		// that leaves one out is a mistake, not a request for a default.
		{"send without cnt", `srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="1"`, `srcoff="0" dstbuf="i" dstoff="0" depid="-1" deps="-1" hasdep="0" />
      <step s="1"`, []string{"f.xml:4: <step type=\"s\"> has no cnt attribute (the number of chunks it moves)"}},
		{"srcbuf without srcoff", `<step s="0" type="s" srcbuf="i" srcoff="0"`, `<step s="0" type="s" srcbuf="i"`, []string{"f.xml:4: <step srcbuf=\"i\"> has no srcoff attribute"}},
		{"dstbuf without dstoff", `dstbuf="s" dstoff="0"`, `dstbuf="s"`, []string{"f.xml:13: <step dstbuf=\"s\"> has no dstoff attribute"}},
		// A dependency names a thread block (depid) and its step (deps);
		// with only one of them the runtimes drop it or read garbage.
		{"deps without depid", `depid="0" deps="0"`, `depid="-1" deps="0"`, []string{"f.xml:13: gpu 1 tb 1 step 0: depid -1 with deps 0: a dependency names both the thread block (depid) and its step (deps), or neither (-1, -1)"}},
		{"depid without deps", `depid="0" deps="0"`, `depid="0"`, []string{"f.xml:13: gpu 1 tb 1 step 0: depid 0 with deps -1: a dependency names both the thread block (depid) and its step (deps), or neither (-1, -1)"}},
		// XML allows an attribute once per element; the first of two
		// was used silently.
		{"attribute twice", `<tb id="1" send="-1" recv="-1" chan="0">`, `<tb id="1" send="-1" recv="-1" chan="0" chan="1">`, []string{`f.xml:12: <tb> has the attribute chan twice ("0", then "1"): XML allows each attribute once`}},
		{"new format", `<step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="0" deps="0" hasdep="0" />`, `<op step="0" type="cpy" />`, []string{"f.xml:13: <op> steps (msccl-tools' newer XML format) are not supported: generate the XML with the default old_format (<step s=... srcbuf=... dstbuf=...>)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(twoGPUs, c.old, c.new, 1)
			if src == twoGPUs && c.old != c.new {
				t.Fatalf("the edit %q does not apply", c.old)
			}
			_, err := Parse("f.xml", []byte(src))
			el, ok := err.(ErrorList)
			if !ok {
				t.Fatalf("Parse: %v, want an ErrorList", err)
			}
			var got []string
			for _, e := range el {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// A UTF-8 byte order mark before <algo> (as editors on Windows write)
// is no text: the file parses as without it, lines unchanged. It was
// refused as unexpected text, though ccl.yaml accepts one.
func TestParseByteOrderMark(t *testing.T) {
	want, err := Parse("pair.xml", []byte(twoGPUs))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse("pair.xml", []byte("\ufeff"+twoGPUs))
	if err != nil {
		t.Fatalf("with a BOM: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("with a BOM (-without +with):\n%s", diff)
	}
}

// Every generated schedule under testdata/msccl parses and validates.
func TestParseGenerated(t *testing.T) {
	files, err := filepath.Glob("../../testdata/msccl/*.xml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no schedules: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(filepath.Base(f), data); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// A long list of problems is cut after maxErrors lines.
func TestErrorListBounded(t *testing.T) {
	var l ErrorList
	for i := range 25 {
		l = append(l, &Error{File: "f.xml", Line: i + 1, Msg: "bad"})
	}
	lines := strings.Split(l.Error(), "\n")
	if len(lines) != maxErrors+1 || lines[maxErrors] != "f.xml: ... and 5 more problem(s)" {
		t.Errorf("got %d lines ending %q", len(lines), lines[len(lines)-1])
	}
}

// The newer MSCCL runtimes (msccl-executor-nccl, RCCL) look up inplace,
// outofplace, minBytes and maxBytes on <algo> by name and refuse a file
// without them; an export carries all four (out of place here), and reads
// back as it was written. Their spelling of the collective, reducescatter,
// is read as reduce_scatter.
func TestWriteHasRuntimeAttributes(t *testing.T) {
	a, err := Parse("pair.xml", []byte(twoGPUs))
	if err != nil {
		t.Fatal(err)
	}
	a.InPlace = false
	var buf bytes.Buffer
	if err := a.Write(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{` inplace="0"`, ` outofplace="1"`, ` minBytes="0"`, ` maxBytes="9223372036854775807"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("written <algo> lacks%s:\n%s", want, buf.String())
		}
	}
	b, err := Parse("pair.xml", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if b.InPlace {
		t.Error("read back in place, written out of place")
	}
	rs, err := Parse("rs.xml", []byte(strings.Replace(twoGPUs, `coll="allreduce"`, `coll="reducescatter"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if rs.Coll != "reduce_scatter" {
		t.Errorf(`coll="reducescatter" read as %q, want reduce_scatter`, rs.Coll)
	}
}

// A thread block whose send= names a gpu that receives nothing from it
// is said once, at the thread block's line (a wrong peer, not a missing
// step), as is the receiving end left without a sender; a connection
// that is short of a step on one side is said per step.
func TestUnpairedConnection(t *testing.T) {
	src := `<algo name="three" nchannels="1" nchunksperloop="3" ngpus="3" coll="allgather" inplace="0">
  <gpu id="0" i_chunks="1" o_chunks="3" s_chunks="0">
    <tb id="0" send="2" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="3" s_chunks="0">
    <tb id="0" send="-1" recv="0" chan="0">
      <step s="0" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="2" i_chunks="1" o_chunks="3" s_chunks="0">
  </gpu>
</algo>
`
	_, err := Parse("three.xml", []byte(src))
	var got []string
	if l, ok := err.(ErrorList); ok {
		for _, e := range l {
			got = append(got, e.Error())
		}
	}
	want := []string{
		`three.xml:3: gpu 0 tb 0 sends to gpu 2 on channel 0 (2 step(s), the first at line 4), but no thread block of gpu 2 receives from gpu 0 on channel 0: check send="2" here and the recv= of gpu 2's thread blocks`,
		`three.xml:9: gpu 1 tb 0 receives from gpu 0 on channel 0 (2 step(s), the first at line 10), but no thread block of gpu 0 sends to gpu 1 on channel 0: check recv="0" here and the send= of gpu 0's thread blocks`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse errors (-want +got):\n%s", diff)
	}
}
