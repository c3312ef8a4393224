package msccl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// raceXML is two gpus: gpu 0 receives its chunk 1 from gpu 1 and sends
// its chunk 0 (tb 0), while tb 1 copies its input into chunk 0; gpu 1
// sends its input and receives chunk 0. sendDep and cpyDep are the
// depid/deps attributes of gpu 0's send and copy.
func raceXML(sendDep, cpyDep string) string {
	return `<algo name="race" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="0">
  <gpu id="0" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="s" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" ` + sendDep + ` hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" ` + cpyDep + ` hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
`
}

// Rule (docs/msccl.md, Checking a schedule): two steps of a gpu in
// different thread blocks that touch a chunk, one writing, race unless
// program order, a dependency or a chain of messages orders them; each
// race is reported once at the later step's line with both fixes.
func TestRaces(t *testing.T) {
	none := `depid="-1" deps="-1"`
	tests := []struct {
		name, sendDep, cpyDep string
		want                  string
	}{
		{"send and copy unordered", none, none,
			`race.xml:8: gpu 0: tb 1 step 0 (cpy) writes o chunk 0 while tb 0 step 1 (s, line 5) reads it, and nothing orders the two (program order, depid/deps, or a chain of messages between them), so the result depends on which runs first; make one wait for the other: depid="1" deps="0" on line 5 (the s waits for the cpy), or depid="0" deps="1" on line 8 (the cpy waits for the s)`},
		{"the send waits for the copy", `depid="1" deps="0"`, none, ""},
		{"the copy waits for the send", none, `depid="0" deps="1"`, ""},
		// The copy waits for tb 0's receive, which comes before the
		// send in program order: both still run after the receive,
		// unordered between them.
		{"both after one step", none, `depid="0" deps="0"`,
			`race.xml:8: gpu 0: tb 1 step 0 (cpy) writes o chunk 0 while tb 0 step 1 (s, line 5) reads it, and nothing orders the two (program order, depid/deps, or a chain of messages between them), so the result depends on which runs first; make one wait for the other: depid="1" deps="0" on line 5 (the s waits for the cpy), or a nop step before line 8 with depid="0" deps="1" (the cpy waits for the s; that step already waits for tb 0 step 0)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, races(t, "race.xml", raceXML(tc.sendDep, tc.cpyDep), nil)); diff != "" {
				t.Errorf("Races (-want +got):\n%s", diff)
			}
		})
	}
}

// races parses the schedule src and returns what Races says of it ("":
// nothing).
func races(t *testing.T, file, src string, alias Alias) string {
	t.Helper()
	a, err := Parse(file, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Races(alias); err != nil {
		return err.Error()
	}
	return ""
}

// A chain of messages orders its ends: gpu 0 copies into chunk 0 only
// after receiving what gpu 1 sends after receiving gpu 0's send of that
// chunk, so the copy comes after the send without any dependency.
func TestRacesOrderedByMessages(t *testing.T) {
	src := `<algo name="chain" nchannels="2" nchunksperloop="2" ngpus="2" coll="allgather" inplace="0">
  <gpu id="0" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="1" chan="1">
      <step s="0" type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="-1" recv="0" chan="0">
      <step s="0" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="0" recv="-1" chan="1">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="0" deps="0" hasdep="0"/>
    </tb>
  </gpu>
</algo>
`
	if got := races(t, "chain.xml", src, nil); got != "" {
		t.Errorf("Races: %s, want none (the messages order the send before the copy)", got)
	}
}

// A step whose source and destination share a chunk at different places
// of the step (cpy o[0..2) into o[1..3)) leaves a result that depends on
// the order it moves its chunks in: a GPU moves them at once, a run's
// loop one by one when a chunk takes several iterations. It is reported
// at its line; a step that reads and writes the same chunks (rrc, re in
// place) is not, nor one that shares no chunk. In place, i and o alias.
func TestRacesShiftedStep(t *testing.T) {
	xml := func(typ, src, dst string) string {
		return `<algo name="shift" nchannels="1" nchunksperloop="4" ngpus="1" coll="allreduce" inplace="0">
  <gpu id="0" i_chunks="4" o_chunks="4" s_chunks="0">
    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="` + typ + `" srcbuf="` + src[:1] + `" srcoff="` + src[1:] + `" dstbuf="` + dst[:1] + `" dstoff="` + dst[1:] + `" cnt="2" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
`
	}
	inPlace := func(_ int, b Buffer, idx int) (Buffer, int) {
		if b == Output {
			return Input, idx
		}
		return b, idx
	}
	tests := []struct {
		name, typ, src, dst string
		alias               Alias
		want                string
	}{
		{"copy shifted by a chunk", "cpy", "o0", "o1", nil,
			`shift.xml:4: gpu 0 tb 0 step 0 (cpy) reads o chunks 0-1 and writes o chunks 1-2, which share a chunk at different places of the step: what it ends holding depends on the order the step moves its chunks in; read and write the same chunks, or no chunk in common`},
		{"reduce shifted back", "re", "i1", "i0", nil,
			`shift.xml:4: gpu 0 tb 0 step 0 (re) reads i chunks 1-2 and writes i chunks 0-1, which share a chunk at different places of the step: what it ends holding depends on the order the step moves its chunks in; read and write the same chunks, or no chunk in common`},
		{"in place, i and o alias", "cpy", "i0", "o1", inPlace,
			`shift.xml:4: gpu 0 tb 0 step 0 (cpy) reads i chunks 0-1 and writes o chunks 1-2, which share a chunk at different places of the step: what it ends holding depends on the order the step moves its chunks in; read and write the same chunks, or no chunk in common`},
		{"out of place, i and o apart", "cpy", "i0", "o1", nil, ""},
		{"the same chunks", "re", "o0", "o0", nil, ""},
		{"no chunk in common", "cpy", "o0", "o2", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, races(t, "shift.xml", xml(tc.typ, tc.src, tc.dst), tc.alias)); diff != "" {
				t.Errorf("Races (-want +got):\n%s", diff)
			}
		})
	}
}
