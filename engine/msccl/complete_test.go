package msccl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The steps where a chunk's sum completes: in the worked example of
// docs/msccl.md, rank 0 completes chunk 1 and rank 1 chunk 0 (their rrc
// steps); the later receives and sends only move complete sums.
func TestCompleting(t *testing.T) {
	src := `<algo name="pair_allreduce" proto="Simple" nchannels="2" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="1">
  <gpu id="0" i_chunks="2" o_chunks="0" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="1" type="rrc" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1" />
      <step s="2" type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
    </tb>
    <tb id="1" send="1" recv="-1" chan="1">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="0" deps="1" hasdep="0" />
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="0" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1" />
      <step s="1" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="2" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
    </tb>
    <tb id="1" send="-1" recv="0" chan="1">
      <step s="0" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="0" deps="0" hasdep="0" />
    </tb>
  </gpu>
</algo>
`
	a, err := Parse("pair.xml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Completing(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[StepRef]bool{{GPU: 0, TB: 0, S: 1}: true, {GPU: 1, TB: 0, S: 1}: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("completing steps (-want +got):\n%s", diff)
	}
	// Collectives without a reduction have nothing to divide.
	a.Coll = "allgather"
	if got, err := a.Completing(nil); got != nil || err != nil {
		t.Errorf("allgather: Completing = %v, %v; want nil, nil", got, err)
	}
}

// A step that completes some of its chunks but not all cannot divide.
func TestCompletingPartial(t *testing.T) {
	src := `<algo name="partial" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="1">
  <gpu id="0" i_chunks="2" o_chunks="0" s_chunks="1">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0" />
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="0" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
      <step s="1" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0" />
    </tb>
  </gpu>
</algo>
`
	a, err := Parse("partial.xml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	// Chunk 0 completes on gpu 1; chunk 1 is never summed, so a made-up
	// re step over both chunks completes one of two.
	a.GPUs[0].TBs[0].Steps = append(a.GPUs[0].TBs[0].Steps, Step{S: 2, Line: 99, Type: "re", SrcBuf: Input, SrcOff: 0, DstBuf: Scratch, DstOff: 0, Cnt: 2, DepID: -1, Deps: -1})
	_, err = a.Completing(nil)
	want := "partial.xml:99: gpu 0 tb 0 step 2 completes the sum of 1 of its 2 chunks: --redop avg divides where a sum completes, and cannot divide only some of a step's chunks"
	if err == nil || err.Error() != want {
		t.Errorf("Completing: %v, want %q", err, want)
	}
}
