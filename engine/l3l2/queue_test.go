package l3l2

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/engine/sim"
)

// Rule (docs/l3l2.md, The binding): chip_task_arg_scalars is the ten-field
// binding in ABI order, decodable by L2, describing the queue's region; the
// region is sized by the layout with 384 counter bytes.
func TestQueue_Binding_FromCreateQueue(t *testing.T) {
	w := newWorld(t, Options{SessionID: 0xABCD})
	q := w.queue(8, 192, 64)
	s, err := q.ChipTaskArgScalars()
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeBinding(s)
	if err != nil {
		t.Fatal(err)
	}
	d := q.Region().Descriptor()
	want := Binding{QueueMagicVersion, 0xABCD, q.Region().ID(), d.PayloadBase, 768, d.CounterBase, 384, 8, 192, 64}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("binding (-want +got):\n%s", diff)
	}
	if l := q.Layout(); l.PayloadBytes != 768 || l.InputArenaOffset != 512 {
		t.Errorf("layout %+v", l)
	}
	if _, err := w.h.CreateQueue(0, 3, 64, 64); !isArgErr(err) {
		t.Errorf("depth 3: %v, want an ArgError", err)
	}
}

// Rule (docs/l3l2.md, Poison rules): L2 init failures — BAD_DESCRIPTOR for a
// binding that fails decoding or names no region, BAD_ARGUMENT for sizes that
// disagree with the layout or the view spans and for a window outside
// 1..depth — never set the abort flag.
func TestQueue_Endpoint_InitErrors(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 128, 192)
	good := q.Binding()
	other := w.region(0, 4096, 384)
	od := other.Descriptor()
	for _, tc := range []struct {
		name   string
		b      Binding
		window uint64
		want   QueueErrorKind
	}{
		{"bad magic", func() Binding { b := good; b.MagicVersion++; return b }(), 1, QueueBadDescriptor},
		{"transaction 0", func() Binding { b := good; b.TransactionID = 0; return b }(), 1, QueueBadDescriptor},
		{"no such region", func() Binding { b := good; b.PayloadBase, b.CounterBase = 1<<39, 1<<39+4096; return b }(), 1, QueueBadDescriptor},
		{"payload size differs from layout", func() Binding {
			b := good
			b.PayloadBase, b.PayloadBytes, b.CounterBase = od.PayloadBase, 4096, od.CounterBase
			return b
		}(), 1, QueueBadArgument},
		{"counter size differs", func() Binding { b := good; b.CounterBytes = 128; return b }(), 1, QueueBadArgument},
		{"spans differ from the region", func() Binding {
			b := good
			b.Depth, b.InputArenaBytes, b.OutputArenaBytes, b.PayloadBytes = 2, 64, 64, 256
			return b
		}(), 1, QueueBadArgument},
		{"window 0", good, 0, QueueBadArgument},
		{"window > depth", good, 5, QueueBadArgument},
		{"window = depth", good, 4, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := w.h.QueueEndpoint(tc.b, tc.window)
			if tc.want == "" {
				if !e.Live() || e.Err() != nil {
					t.Fatalf("not live: %v", e.Err())
				}
				return
			}
			if e.Live() || e.Err() == nil || e.Err().Kind != tc.want || e.Err().Op != OpInit {
				t.Fatalf("Err() = %v, want %s/init", e.Err(), tc.want)
			}
			if _, err := e.Input().TryPeek(nil); err != error(e.Err()) {
				t.Errorf("TryPeek on a dead endpoint: %v", err)
			}
		})
	}
	if counterValue(q.Region(), PeerAbortOffset) != 0 {
		t.Error("an init failure set the peer abort flag")
	}
}

// Rule (docs/l3l2.md, Messages): message i has seq i+1 in slot
// (seq-1)&(depth-1); a descriptor is {seq, opcode, payload_offset,
// payload_nbytes}; zero-byte messages have offset 0.
func TestQueue_Descriptor_SeqAndSlot(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 64)
	e := w.endpoint(q, 4)
	l := q.Layout()
	var got []desc
	for i := 0; i < 6; i++ {
		n := []int{10, 0, 64}[i%3]
		var data []byte
		if n > 0 {
			data = pattern(byte(i), n)
		}
		if ok, err := q.Input.TryEnqueue(nil, data, OpData); !ok || err != nil {
			t.Fatalf("enqueue %d: %v %v", i, ok, err)
		}
		got = append(got, getDesc(q.Region(), l.InputDescOffset+uint64(i%4)*32))
		h, err := e.Input().TryPeek(nil)
		if err != nil || h.Seq != uint64(i+1) {
			t.Fatalf("peek %d: %+v %v", i, h, err)
		}
		_ = e.Input().Release(nil, h)
	}
	a := l.InputArenaOffset
	want := []desc{{1, 1, a, 10}, {2, 1, 0, 0}, {3, 1, a + 10, 64}, {4, 1, a + 74, 10}, {5, 1, 0, 0}, {6, 1, a + 84, 64}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(desc{})); diff != "" {
		t.Errorf("descriptors (-want +got):\n%s", diff)
	}
}

// Rule (docs/l3l2.md, Messages): capacity is exactly depth (full is tail -
// head >= depth on the monotonic values) and ring backpressure is False, not
// poison.
func TestQueue_CapacityExactlyDepth(t *testing.T) {
	for _, depth := range []uint64{1, 2, 8} {
		w := newWorld(t, Options{})
		q := w.queue(depth, 64*depth, 64)
		n := 0
		for {
			ok, err := q.Input.TryEnqueue(nil, pattern(1, 8), OpData)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			n++
		}
		if uint64(n) != depth || q.State() != QueueLive {
			t.Errorf("depth %d: %d messages fit (state %v)", depth, n, q.State())
		}
		// The output side too: L2 can publish exactly depth messages.
		e := w.endpoint(q, 1)
		m := 0
		for {
			r, err := e.Output().TryReserve(nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if r == nil {
				break
			}
			_ = e.Output().Publish(nil, r, OpData)
			m++
		}
		if uint64(m) != depth || !e.Live() {
			t.Errorf("depth %d: %d outputs fit", depth, m)
		}
	}
}

// Rule (docs/l3l2.md, Messages): the producer places a payload at tail %
// arena; if it does not fit before the end it skips to the arena start
// (skipped bytes count as used); payloads never wrap.
func TestQueue_Arena_WrapSkipsToStart(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 64)
	e := w.endpoint(q, 4)
	a := q.Layout().InputArenaOffset
	var offs []uint64
	step := func(n int, release bool) {
		ok, err := q.Input.TryEnqueue(nil, pattern(byte(n), n), OpData)
		if !ok || err != nil {
			t.Fatalf("enqueue %d: %v %v", n, ok, err)
		}
		h, err := e.Input().TryPeek(nil)
		if err != nil || h == nil {
			t.Fatalf("peek: %v", err)
		}
		offs = append(offs, h.PayloadOffset-a)
		v, _ := e.Input().View(h)
		if !bytes.Equal(v.Bytes(), pattern(byte(n), n)) {
			t.Errorf("payload of %d bytes corrupted", n)
		}
		if release {
			_ = e.Input().Release(nil, h)
		}
	}
	step(100, true)  // [0,100)
	step(100, true)  // [100,200)
	step(100, true)  // 200+100 > 256: skips to 0
	step(56, true)   // [100,156)
	step(100, false) // [156,256) exactly fits
	if diff := cmp.Diff([]uint64{0, 100, 0, 100, 156}, offs); diff != "" {
		t.Errorf("offsets (-want +got):\n%s", diff)
	}
	// 156 + 100 used by the held message: a 101-byte payload cannot fit.
	if ok, err := q.Input.TryEnqueue(nil, make([]byte, 157), OpData); ok || err != nil {
		t.Errorf("enqueue into a full arena: %v %v", ok, err)
	}
}

// Rule (docs/l3l2.md, Messages): arena full (tail + n - head > arena) and n >
// arena are plain no-progress — False, never poison; a blocking enqueue of n
// > arena can never succeed and is rejected as a bad argument.
func TestQueue_Arena_FullIsNoProgress(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(8, 128, 64)
	for i, tc := range []struct {
		n    int
		want bool
	}{{100, true}, {29, false}, {28, true}, {1, false}, {129, false}} {
		ok, err := q.Input.TryEnqueue(nil, make([]byte, tc.n), OpData)
		if ok != tc.want || err != nil {
			t.Errorf("step %d (%d bytes): %v %v, want %v", i, tc.n, ok, err, tc.want)
		}
	}
	w.do(func(p *sim.Proc) {
		if err := q.Input.Enqueue(p, make([]byte, 129), OpData, sim.Microsecond); !isArgErr(err) {
			t.Errorf("blocking enqueue > arena: %v", err)
		}
	})
	if q.State() != QueueLive {
		t.Errorf("state %v", q.State())
	}
	e := w.endpoint(q, 1)
	if r, err := e.Output().TryReserve(nil, 65); r != nil || err != nil || !e.Live() {
		t.Errorf("reserve > arena: %v %v", r, err)
	}
}

// Rule (docs/l3l2.md, Messages): skipped bytes count as used until
// the consumer passes them, so a payload with pos + n > arena and n > pos
// (pos = cursor % arena) can never be placed, even into an empty arena.
// This pins the spec's (and reference runtime's) behaviour; see doc.go.
func TestQueue_Arena_SkipCanStallLargePayload(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 64)
	e := w.endpoint(q, 1)
	_, _ = q.Input.TryEnqueue(nil, make([]byte, 100), OpData)
	h, _ := e.Input().TryPeek(nil)
	_ = e.Input().Release(nil, h) // the arena is empty again; cursor at 100
	for _, n := range []int{200, 256, 157} {
		if ok, err := q.Input.TryEnqueue(nil, make([]byte, n), OpData); ok || err != nil {
			t.Errorf("%d bytes at cursor 100: %v %v, want no progress", n, ok, err)
		}
	}
	if ok, err := q.Input.TryEnqueue(nil, make([]byte, 156), OpData); !ok || err != nil {
		t.Errorf("156 bytes (fits before the end): %v %v", ok, err)
	}
	if q.State() != QueueLive {
		t.Errorf("state %v", q.State())
	}
}

// Rule (docs/l3l2.md, Messages): the consumer recomputes the expected payload
// offset and poisons on a mismatch ("payload replay offset mismatch").
func TestQueue_Arena_ReplayOffsetMismatchPoisons(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 64)
	e := w.endpoint(q, 4)
	_, _ = q.Input.TryEnqueue(nil, pattern(1, 64), OpData)
	_, _ = q.Input.TryEnqueue(nil, pattern(2, 64), OpData)
	// Move message 2 to an in-arena but wrong offset.
	l := q.Layout()
	d := getDesc(q.Region(), l.InputDescOffset+32)
	d.offset += 64
	putDesc(q.Region(), l.InputDescOffset+32, d)
	if h, err := e.Input().TryPeek(nil); err != nil || h.Seq != 1 {
		t.Fatalf("first peek: %v %v", h, err)
	}
	_, err := e.Input().TryPeek(nil)
	wantQueueErr(t, err, QueueInvalidDescriptor, OpInputTryPeek)
	if !strings.Contains(err.Error(), "payload replay offset mismatch") {
		t.Errorf("message: %v", err)
	}
	if counterValue(q.Region(), PeerAbortOffset) != 1 {
		t.Error("local poison did not set the peer abort flag")
	}
}

// Rule (docs/l3l2.md, Poison rules): L2 poisons with INVALID_DESCRIPTOR on a
// seq mismatch, an invalid opcode, STOP with payload, zero-byte with non-zero
// offset, payload outside its arena, and an impossible counter
// reconstruction.
func TestQueue_Descriptor_ValidationPoisons(t *testing.T) {
	for _, tc := range []struct {
		name  string
		forge func(q *Queue)
		msg   string
	}{
		{"seq mismatch", func(q *Queue) { d := getDesc(q.Region(), 0); d.seq = 5; putDesc(q.Region(), 0, d) }, "seq mismatch"},
		{"invalid opcode", func(q *Queue) { d := getDesc(q.Region(), 0); d.opcode = 9; putDesc(q.Region(), 0, d) }, "invalid input opcode"},
		{"STOP with payload", func(q *Queue) { d := getDesc(q.Region(), 0); d.opcode = 2; putDesc(q.Region(), 0, d) }, "STOP descriptor must be zero-byte"},
		{"zero-byte with offset", func(q *Queue) { d := getDesc(q.Region(), 0); d.nbytes = 0; putDesc(q.Region(), 0, d) }, "nonzero payload offset"},
		{"outside arena", func(q *Queue) { d := getDesc(q.Region(), 0); d.offset = 8; putDesc(q.Region(), 0, d) }, "outside the input arena"},
		{"past arena end", func(q *Queue) { d := getDesc(q.Region(), 0); d.nbytes = 300; putDesc(q.Region(), 0, d) }, "outside the input arena"},
		{"counter reconstruction", func(q *Queue) { setCounter(q.Region(), InputDescTailOffset, 9) }, "counter reconstruction failed"},
		{"counter went backwards", func(q *Queue) { setCounter(q.Region(), InputDescTailOffset, -1) }, "counter reconstruction failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Options{})
			q := w.queue(4, 256, 64)
			e := w.endpoint(q, 2)
			_, _ = q.Input.TryEnqueue(nil, pattern(1, 16), OpData)
			tc.forge(q)
			h, err := e.Input().TryPeek(nil)
			if h != nil {
				t.Fatalf("got a handle %+v", h)
			}
			wantQueueErr(t, err, QueueInvalidDescriptor, OpInputTryPeek)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q lacks %q", err, tc.msg)
			}
		})
	}
}

// Rule (docs/l3l2.md, Messages): when the producer sees the head advance it
// replays the released descriptors to advance its payload head; a seq
// mismatch there poisons (L3 producing input, L2 producing output).
func TestQueue_Producer_ReplaySeqMismatchPoisons(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 256)
	e := w.endpoint(q, 1)
	l := q.Layout()
	_, _ = q.Input.TryEnqueue(nil, pattern(1, 16), OpData)
	h, _ := e.Input().TryPeek(nil)
	_ = e.Input().Release(nil, h)
	putDesc(q.Region(), l.InputDescOffset, desc{7, 1, l.InputArenaOffset, 16}) // corrupt the released slot
	_, err := q.Input.TryEnqueue(nil, pattern(2, 16), OpData)
	if qkind(err) != QueueInvalidDescriptor || !strings.Contains(err.Error(), "replay seq mismatch") || q.State() != QueuePoisonedLocal {
		t.Errorf("L3: %v, state %v", err, q.State())
	}

	r, _ := e.Output().TryReserve(nil, 16)
	_ = e.Output().Publish(nil, r, OpData)
	// L3 is poisoned; play its release of output 1 by hand, corrupting the slot.
	setCounter(q.Region(), OutputDescHeadOffset, 1)
	putDesc(q.Region(), l.OutputDescOffset, desc{9, 1, l.OutputArenaOffset, 16})
	_, err = e.Output().TryReserve(nil, 16)
	wantQueueErr(t, err, QueueInvalidDescriptor, OpOutputTryReserve)
	if !strings.Contains(err.Error(), "replay seq mismatch") {
		t.Errorf("L2: %v", err)
	}
}

// Rule (docs/l3l2.md, Messages): reserve payload → write bytes →
// write descriptor fields → write seq → publish tail; the consumer
// validates, uses the payload, then publishes the head. Checked on the
// op_log's order of writes.
func TestQueue_PublicationOrder(t *testing.T) {
	w := newWorld(t, Options{})
	w.m.Log = &oplog.Log{}
	q := w.queue(2, 128, 128)
	e := w.endpoint(q, 1)
	w.do(func(p *sim.Proc) {
		_ = q.Input.Enqueue(p, pattern(1, 40), OpData, sim.Microsecond)
		h, _ := e.Input().TryPeek(p)
		_ = e.Input().Release(p, h)
		r, _ := e.Output().TryReserve(p, 20)
		_ = e.Output().Write(p, r, pattern(2, 20), 0)
		_ = e.Output().Publish(p, r, OpData)
		_, _, _ = q.Output.TryDequeue(p)
	})
	var names []string
	var last sim.Time
	for _, r := range w.m.Log.Records() {
		if r.Name == "alloc" {
			continue
		}
		names = append(names, r.Name)
		if r.TEnd < last {
			t.Errorf("%s lands at %v, before the previous write (%v)", r.Name, r.TEnd, last)
		}
		last = r.TEnd
	}
	want := []string{
		"l3_payload_write", "l3_desc_write", "l3_desc_seq", "l3_signal_notify", // L3 enqueue
		"l2_signal_notify",                                                     // L2 release: input head
		"l2_payload_write", "l2_desc_write", "l2_desc_seq", "l2_signal_notify", // L2 publish
		"l3_signal_notify", // L3 release: output head
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("write order (-want +got):\n%s", diff)
	}
}

// Rule (docs/l3l2.md, L2: the endpoint): with max_inflight N > 1 L2 may hold
// N DATA inputs; a full window is ordinary no-progress (nil, no error).
func TestQueue_Window_FullIsNoProgress(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(8, 512, 64)
	e := w.endpoint(q, 3)
	for i := 0; i < 5; i++ {
		_, _ = q.Input.TryEnqueue(nil, pattern(byte(i), 8), []Opcode{OpData, OpError}[i%2])
	}
	var seqs []uint64
	var hs []*InputHandle
	for i := 0; i < 5; i++ {
		h, err := e.Input().TryPeek(nil)
		if err != nil {
			t.Fatal(err)
		}
		if h != nil {
			seqs = append(seqs, h.Seq)
			hs = append(hs, h)
		}
	}
	if diff := cmp.Diff([]uint64{1, 2, 3}, seqs); diff != "" || !e.Live() {
		t.Fatalf("acquired (-want +got):\n%s (err %v)", diff, e.Err())
	}
	_ = e.Input().Release(nil, hs[0])
	if h, err := e.Input().TryPeek(nil); err != nil || h == nil || h.Seq != 4 {
		t.Errorf("after a release: %+v %v", h, err)
	}
}

// Rule (docs/l3l2.md, L2: the endpoint): with the default window of 1, L2
// must not peek another DATA input while one is active (OWNERSHIP), but
// STOP may still be acquired into its extra slot.
func TestQueue_Window_OneSecondPeekIsOwnership(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 64)
	e := w.endpoint(q, 1)
	_, _ = q.Input.TryEnqueue(nil, pattern(1, 8), OpData)
	h1, _ := e.Input().TryPeek(nil)
	if h, err := e.Input().TryPeek(nil); h != nil || err != nil {
		t.Fatalf("nothing more published: %v %v", h, err)
	}
	_, _ = q.TryRequestStop(nil)
	stop, err := e.Input().TryPeek(nil)
	if err != nil || stop == nil || stop.Opcode != OpStop {
		t.Fatalf("STOP behind an active DATA: %+v %v", stop, err)
	}
	_ = e.Input().Release(nil, h1)
	_ = e.Input().Release(nil, stop)
	if !e.Input().Drained() {
		t.Error("not drained")
	}

	w2 := newWorld(t, Options{})
	q2 := w2.queue(4, 256, 64)
	e2 := w2.endpoint(q2, 1)
	_, _ = q2.Input.TryEnqueue(nil, pattern(1, 8), OpData)
	_, _ = q2.Input.TryEnqueue(nil, pattern(2, 8), OpData)
	_, _ = e2.Input().TryPeek(nil)
	_, err = e2.Input().TryPeek(nil)
	wantQueueErr(t, err, QueueOwnership, OpInputTryPeek)
}

// Rule (docs/l3l2.md, L2: the endpoint): release is logical; the shared input
// head advances only over the released FIFO prefix — also across the ring
// wrap.
func TestQueue_Release_OutOfOrderAdvancesOnlyFIFOPrefix(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 512, 64)
	e := w.endpoint(q, 4)
	in := e.Input()
	head := func() int32 { return counterValue(q.Region(), InputDescHeadOffset) }
	fill := func() []*InputHandle {
		var hs []*InputHandle
		for i := 0; i < 4; i++ {
			if ok, err := q.Input.TryEnqueue(nil, pattern(byte(i), 64), OpData); !ok || err != nil {
				t.Fatalf("enqueue: %v %v", ok, err)
			}
			h, err := in.TryPeek(nil)
			if err != nil || h == nil {
				t.Fatalf("peek: %v", err)
			}
			hs = append(hs, h)
		}
		return hs
	}
	var heads []int32
	for round := 0; round < 3; round++ { // 12 messages through a depth-4 ring
		hs := fill()
		for _, i := range []int{2, 1, 3, 0} {
			if err := in.Release(nil, hs[i]); err != nil {
				t.Fatal(err)
			}
			heads = append(heads, head())
		}
	}
	want := []int32{0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12}
	if diff := cmp.Diff(want, heads); diff != "" {
		t.Errorf("input head after each release (-want +got):\n%s", diff)
	}
	if !e.Live() || q.State() != QueueLive {
		t.Errorf("errors: %v / %v", e.Err(), q.Err())
	}
}

// Rule (docs/l3l2.md, Stopping): STOP may be acquired behind active inputs;
// the input queue then drains (no later DATA is acquired), STOP is physically
// released only after every earlier input, and drained() turns true only
// then.
func TestQueue_Stop_BehindActiveInputs(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(8, 512, 64)
	e := w.endpoint(q, 2)
	in := e.Input()
	_, _ = q.Input.TryEnqueue(nil, pattern(1, 8), OpData)
	_, _ = q.Input.TryEnqueue(nil, pattern(2, 8), OpData)
	_, _ = q.TryRequestStop(nil)
	var hs []*InputHandle
	for i := 0; i < 3; i++ {
		h, err := in.TryPeek(nil)
		if err != nil || h == nil {
			t.Fatalf("peek %d: %v", i, err)
		}
		hs = append(hs, h)
	}
	if hs[2].Opcode != OpStop || hs[2].NBytes != 0 || hs[2].PayloadOffset != 0 {
		t.Fatalf("third handle %+v", hs[2])
	}
	if h, err := in.TryPeek(nil); h != nil || err != nil {
		t.Errorf("draining mode acquired %v %v", h, err)
	}
	var log []string
	for _, i := range []int{2, 1, 0} {
		_ = in.Release(nil, hs[i])
		log = append(log, fmt.Sprintf("head=%d drained=%v", counterValue(q.Region(), InputDescHeadOffset), in.Drained()))
	}
	want := []string{"head=0 drained=false", "head=0 drained=false", "head=3 drained=true"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Rule (docs/l3l2.md, Stopping): a descriptor L2 observes published after
// STOP poisons with INVALID_DESCRIPTOR — whether it is already there when
// STOP is acquired or appears later.
func TestQueue_DescriptorAfterStopPoisons(t *testing.T) {
	for _, before := range []bool{true, false} {
		t.Run(fmt.Sprintf("published before STOP acquired=%v", before), func(t *testing.T) {
			w := newWorld(t, Options{})
			q := w.queue(4, 256, 64)
			e := w.endpoint(q, 1)
			_, _ = q.TryRequestStop(nil)
			forge := func() { // a rogue producer bypassing the L3 check
				putDesc(q.Region(), q.Layout().InputDescOffset+32, desc{2, 1, 0, 0})
				setCounter(q.Region(), InputDescTailOffset, 2)
			}
			if before {
				forge()
			}
			h, err := e.Input().TryPeek(nil)
			if !before {
				if err != nil || h == nil || h.Opcode != OpStop {
					t.Fatalf("STOP: %v %v", h, err)
				}
				forge()
				h, err = e.Input().TryPeek(nil)
			}
			wantQueueErr(t, err, QueueInvalidDescriptor, OpInputTryPeek)
			if !strings.Contains(err.Error(), "published after STOP") {
				t.Errorf("message %v", err)
			}
		})
	}
}

// Rule (docs/l3l2.md, Stopping): after request_stop has published STOP,
// the L3 input is stopped. try_enqueue and try_request_stop return False;
// enqueue and request_stop raise a ValueError (*ArgError) saying the queue
// is stopped. None of them poisons the queue, sets the abort flag or
// publishes anything, and L3 may still dequeue outputs.
func TestQueue_InputAfterStop_TryReturnsFalse_BlockingRaisesStopped(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 64)
	e := w.endpoint(q, 1)
	w.do(func(p *sim.Proc) {
		if err := q.RequestStop(p, sim.Microsecond); err != nil {
			t.Fatal(err)
		}
		tries := []struct {
			name string
			try  func() (bool, error)
		}{
			{"input.try_enqueue DATA", func() (bool, error) { return q.Input.TryEnqueue(p, []byte{1}, OpData) }},
			{"input.try_enqueue ERROR", func() (bool, error) { return q.Input.TryEnqueue(p, nil, OpError) }},
			{"try_request_stop", func() (bool, error) { return q.TryRequestStop(p) }},
		}
		for _, c := range tries {
			if ok, err := c.try(); ok || err != nil {
				t.Errorf("%s after STOP = %v, %v; want false, nil", c.name, ok, err)
			}
		}
		blocking := []struct {
			name string
			call func() error
		}{
			{"input.enqueue", func() error { return q.Input.Enqueue(p, []byte{1}, OpData, sim.Microsecond) }},
			{"request_stop", func() error { return q.RequestStop(p, sim.Microsecond) }},
		}
		for _, c := range blocking {
			before := w.now()
			err := c.call()
			if !isArgErr(err) || !strings.Contains(err.Error(), "the queue is stopped") {
				t.Errorf("%s after STOP = %v; want an *ArgError saying the queue is stopped", c.name, err)
			}
			if w.now() != before {
				t.Errorf("%s after STOP waited %v; want an immediate error", c.name, w.now()-before)
			}
		}
		if q.State() != QueueLive || q.Err() != nil || counterValue(q.Region(), InitiatorAbortOffset) != 0 {
			t.Errorf("state %v (err %v, abort flag %d) after input was refused; want LIVE, no error, flag 0",
				q.State(), q.Err(), counterValue(q.Region(), InitiatorAbortOffset))
		}
		if tail := counterValue(q.Region(), InputDescTailOffset); tail != 1 {
			t.Errorf("input tail %d after refused input; want 1 (STOP only)", tail)
		}
		r, _ := e.Output().TryReserve(p, 4)
		_ = e.Output().Write(p, r, []byte{1, 2, 3, 4}, 0)
		_ = e.Output().Publish(p, r, OpData)
		if _, b, err := q.Output.TryDequeue(p); err != nil || !bytes.Equal(b, []byte{1, 2, 3, 4}) {
			t.Errorf("dequeue after STOP: %v %v", b, err)
		}
	})
}

// Rule (docs/l3l2.md, Messages): STOP is valid only on input: L2 publishing
// STOP poisons with INVALID_DESCRIPTOR, L3 cannot enqueue STOP as data, and
// L3 observing STOP on the output queue poisons.
func TestQueue_StopOnOutputRejected(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 64)
	e := w.endpoint(q, 1)
	r, _ := e.Output().TryReserve(nil, 0)
	wantQueueErr(t, e.Output().Publish(nil, r, OpStop), QueueInvalidDescriptor, OpOutputPublish)
	if counterValue(q.Region(), OutputDescTailOffset) != 0 {
		t.Error("STOP was published")
	}
	if _, err := q.Input.TryEnqueue(nil, nil, OpStop); !isArgErr(err) {
		t.Errorf("L3 enqueue STOP: %v", err)
	}
	// A forged STOP on the output ring.
	putDesc(q.Region(), q.Layout().OutputDescOffset, desc{1, 2, 0, 0})
	setCounter(q.Region(), OutputDescTailOffset, 1)
	_, err := q.Output.TryPeek(nil)
	if qkind(err) != QueueInvalidDescriptor || q.State() != QueuePoisonedLocal {
		t.Errorf("L3 seeing STOP on output: %v, state %v", err, q.State())
	}
}

// Rule (docs/l3l2.md, Messages): ERROR is an ordinary message in both
// directions: it is delivered and never poisons or sets an abort flag.
func TestQueue_ErrorIsOrdinaryMessage(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 256)
	e := w.endpoint(q, 1)
	_, _ = q.Input.TryEnqueue(nil, []byte("bad input"), OpError)
	h, err := e.Input().TryPeek(nil)
	if err != nil || h.Opcode != OpError {
		t.Fatalf("%+v %v", h, err)
	}
	_ = e.Input().Release(nil, h)
	r, _ := e.Output().TryReserve(nil, 5)
	_ = e.Output().Write(nil, r, []byte("oops!"), 0)
	_ = e.Output().Publish(nil, r, OpError)
	m, b, err := q.Output.TryDequeue(nil)
	if err != nil || m.Opcode != OpError || string(b) != "oops!" {
		t.Fatalf("%+v %q %v", m, b, err)
	}
	if !e.Live() || q.State() != QueueLive || counterValue(q.Region(), InitiatorAbortOffset) != 0 || counterValue(q.Region(), PeerAbortOffset) != 0 {
		t.Error("ERROR poisoned something")
	}
}

// Rule (docs/l3l2.md, Messages): zero-byte messages use offset 0 and nbytes 0
// and consume no arena space.
func TestQueue_ZeroByteMessages(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(2, 64, 64)
	e := w.endpoint(q, 1)
	for i := 0; i < 5; i++ {
		if ok, err := q.Input.TryEnqueue(nil, nil, OpData); !ok || err != nil {
			t.Fatalf("enqueue %d: %v %v", i, ok, err)
		}
		h, _ := e.Input().TryPeek(nil)
		b, err := e.Input().Read(nil, h)
		v, _ := e.Input().View(h)
		if h.NBytes != 0 || h.PayloadOffset != 0 || len(b) != 0 || v.N != 0 || err != nil {
			t.Fatalf("handle %+v read %v view %v", h, b, v)
		}
		_ = e.Input().Release(nil, h)
		r, _ := e.Output().TryReserve(nil, 0)
		_ = e.Output().Publish(nil, r, OpData)
		m, b, err := q.Output.TryDequeue(nil)
		if err != nil || m.NBytes != 0 || m.PayloadOffset != 0 || len(b) != 0 {
			t.Fatalf("output %+v %v %v", m, b, err)
		}
	}
}

// Rule (docs/l3l2.md, Poison rules): releasing an inactive, mutated or
// already released input handle poisons with OWNERSHIP (op input.release).
func TestQueue_DoubleOrStaleRelease(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(e *QueueEndpoint, h1, h2 *InputHandle, other *InputHandle) *InputHandle
		msg  string
	}{
		{"double release (still held behind the prefix)", func(e *QueueEndpoint, h1, h2, _ *InputHandle) *InputHandle {
			_ = e.Input().Release(nil, h2)
			return h2
		}, "already released"},
		{"stale (physically released)", func(e *QueueEndpoint, h1, h2, _ *InputHandle) *InputHandle {
			_ = e.Input().Release(nil, h1)
			return h1
		}, "not active"},
		{"mutated", func(e *QueueEndpoint, h1, h2, _ *InputHandle) *InputHandle {
			m := *h1
			m.NBytes++
			return &m
		}, "not active"},
		{"another endpoint's handle", func(e *QueueEndpoint, h1, h2, other *InputHandle) *InputHandle { return other }, "not active"},
		{"never acquired", func(e *QueueEndpoint, h1, h2, _ *InputHandle) *InputHandle {
			return &InputHandle{Seq: 3, Opcode: OpData}
		}, "not active"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Options{})
			q, q2 := w.queue(4, 256, 64), w.queue(4, 256, 64)
			e, e2 := w.endpoint(q, 2), w.endpoint(q2, 1)
			for i := 0; i < 3; i++ {
				_, _ = q.Input.TryEnqueue(nil, pattern(byte(i), 8), OpData)
			}
			_, _ = q2.Input.TryEnqueue(nil, pattern(1, 8), OpData)
			h1, _ := e.Input().TryPeek(nil)
			h2, _ := e.Input().TryPeek(nil)
			other, _ := e2.Input().TryPeek(nil)
			bad := tc.bad(e, h1, h2, other)
			err := e.Input().Release(nil, bad)
			wantQueueErr(t, err, QueueOwnership, OpInputRelease)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %v", err)
			}
			if counterValue(q.Region(), PeerAbortOffset) != 1 || !e2.Live() {
				t.Error("abort flag not set, or the other endpoint was hurt")
			}
		})
	}
}

// Rule (docs/l3l2.md, Poison rules): publishing an unknown, stale, already
// published or cross-queue reservation poisons (OWNERSHIP, op
// output.publish).
func TestQueue_DoublePublish(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(e, e2 *QueueEndpoint) *Reservation
	}{
		{"double publish", func(e, _ *QueueEndpoint) *Reservation {
			r, _ := e.Output().TryReserve(nil, 8)
			_ = e.Output().Publish(nil, r, OpData)
			return r
		}},
		{"stale copy", func(e, _ *QueueEndpoint) *Reservation {
			r, _ := e.Output().TryReserve(nil, 8)
			stale := *r
			_ = e.Output().Publish(nil, r, OpData)
			_, _ = e.Output().TryReserve(nil, 8)
			return &stale
		}},
		{"unknown", func(e, _ *QueueEndpoint) *Reservation { return &Reservation{Seq: 1, NBytes: 8} }},
		{"mutated", func(e, _ *QueueEndpoint) *Reservation {
			r, _ := e.Output().TryReserve(nil, 8)
			m := *r
			m.NBytes = 4
			return &m
		}},
		{"cross-queue", func(e, e2 *QueueEndpoint) *Reservation {
			_, _ = e.Output().TryReserve(nil, 8)
			r, _ := e2.Output().TryReserve(nil, 8)
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Options{})
			q, q2 := w.queue(4, 256, 64), w.queue(4, 256, 64)
			e, e2 := w.endpoint(q, 1), w.endpoint(q2, 1)
			bad := tc.bad(e, e2)
			wantQueueErr(t, e.Output().Publish(nil, bad, OpData), QueueOwnership, OpOutputPublish)
			if counterValue(q.Region(), PeerAbortOffset) != 1 {
				t.Error("abort flag not set")
			}
		})
	}
}

// Rule (docs/l3l2.md, L2: the endpoint): L2 output has one active
// reservation; a second reserve before publishing is OWNERSHIP (op
// output.try_reserve).
func TestQueue_OneActiveReservation(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 256)
	e := w.endpoint(q, 1)
	if r, err := e.Output().TryReserve(nil, 8); r == nil || err != nil {
		t.Fatal(err)
	}
	r, err := e.Output().TryReserve(nil, 8)
	if r != nil {
		t.Fatal("second reservation granted")
	}
	wantQueueErr(t, err, QueueOwnership, OpOutputTryReserve)
}

// Rule (docs/l3l2.md, L3: the initiator): on L3 output, peek returns a handle
// active until release, and repeated try_peek returns the same handle; read
// with a wrong handle raises without poisoning; release with a wrong handle
// poisons.
func TestQueue_L3_OutputHandleOwnership(t *testing.T) {
	w := newWorld(t, Options{})
	q, q2 := w.queue(4, 256, 256), w.queue(4, 256, 256)
	e, e2 := w.endpoint(q, 1), w.endpoint(q2, 1)
	for _, ep := range []*QueueEndpoint{e, e2} {
		for i := 0; i < 2; i++ {
			r, _ := ep.Output().TryReserve(nil, 4)
			_ = ep.Output().Write(nil, r, []byte{byte(i), 1, 2, 3}, 0)
			_ = ep.Output().Publish(nil, r, OpData)
		}
	}
	m1, _ := q.Output.TryPeek(nil)
	if again, _ := q.Output.TryPeek(nil); again != m1 {
		t.Fatalf("repeated try_peek returned %v, want the active %v", again, m1)
	}
	foreign, _ := q2.Output.TryPeek(nil)
	copyOf := *m1
	for _, bad := range []*Message{foreign, &copyOf, nil} {
		if _, err := q.Output.Read(nil, bad); !isArgErr(err) || !strings.Contains(err.Error(), "OWNERSHIP") {
			t.Errorf("read with %v: %v", bad, err)
		}
	}
	if q.State() != QueueLive {
		t.Fatalf("read with a wrong handle poisoned: %v", q.State())
	}
	if b, err := q.Output.Read(nil, m1); err != nil || !bytes.Equal(b, []byte{0, 1, 2, 3}) {
		t.Errorf("read %v %v", b, err)
	}
	err := q.Output.Release(nil, foreign)
	if qkind(err) != QueueOwnership || q.State() != QueuePoisonedLocal || counterValue(q.Region(), InitiatorAbortOffset) != 1 {
		t.Errorf("release with a wrong handle: %v, state %v", err, q.State())
	}
	if q2.State() != QueueLive {
		t.Error("the other queue was hurt")
	}
}

// Rule (docs/l3l2.md, Poison rules): a local poison sets the local abort flag
// for the peer (L2: peer_abort_flag, L3: initiator_abort_flag), never the
// other one.
func TestQueue_LocalPoisonSetsOwnFlag(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 256)
	e := w.endpoint(q, 1)
	r, _ := e.Output().TryReserve(nil, 0)
	_ = e.Output().Publish(nil, r, Opcode(7)) // L2 poisons itself
	if got := []int32{counterValue(q.Region(), InitiatorAbortOffset), counterValue(q.Region(), PeerAbortOffset)}; !cmp.Equal(got, []int32{0, 1}) {
		t.Errorf("after L2 poison: flags %v, want [0 1]", got)
	}
	w2 := newWorld(t, Options{})
	q2 := w2.queue(4, 256, 256)
	_ = w2.endpoint(q2, 1)
	_ = q2.Output.Release(nil, &Message{}) // L3 poisons itself
	if got := []int32{counterValue(q2.Region(), InitiatorAbortOffset), counterValue(q2.Region(), PeerAbortOffset)}; !cmp.Equal(got, []int32{1, 0}) {
		t.Errorf("after L3 poison: flags %v, want [1 0]", got)
	}
}

// Rule (docs/l3l2.md, Poison rules): after a positive-timeout wait expires
// the peer abort flag is sampled; if set the endpoint reports REMOTE_ABORTED
// (op timeout) and does not set its own flag. Both directions.
func TestQueue_RemoteAbort_DoesNotSetLocalFlag(t *testing.T) {
	t.Run("L3 observes L2 abort", func(t *testing.T) {
		w := newWorld(t, Options{})
		q := w.queue(4, 256, 256)
		e := w.endpoint(q, 1)
		w.do(func(p *sim.Proc) {
			r, _ := e.Output().TryReserve(p, 0)
			_ = e.Output().Publish(p, r, Opcode(7))
			t0 := w.now()
			_, err := q.Output.Peek(p, 5*sim.Microsecond)
			if w.now()-t0 < 5*sim.Microsecond {
				t.Errorf("returned after %v, before the timeout", w.now()-t0)
			}
			wantQueueErr(t, err, QueueRemoteAborted, OpTimeout)
			if _, err2 := q.Output.TryPeek(p); err2 != err {
				t.Errorf("later call: %v, want the first error", err2)
			}
		})
		if q.State() != QueuePoisonedRemote || counterValue(q.Region(), InitiatorAbortOffset) != 0 {
			t.Errorf("state %v, initiator flag %d", q.State(), counterValue(q.Region(), InitiatorAbortOffset))
		}
	})
	t.Run("L2 observes L3 abort", func(t *testing.T) {
		w := newWorld(t, Options{})
		q := w.queue(4, 256, 256)
		e := w.endpoint(q, 1)
		w.do(func(p *sim.Proc) {
			_ = q.Output.Release(p, &Message{}) // L3 poisons itself
			h, err := e.Input().Peek(p, 5*sim.Microsecond)
			if h != nil {
				t.Fatal("got a handle")
			}
			wantQueueErr(t, err, QueueRemoteAborted, OpTimeout)
		})
		if counterValue(q.Region(), PeerAbortOffset) != 0 {
			t.Error("L2 set its own flag on a remote abort")
		}
	})
}

// Rule (docs/l3l2.md, Poison rules): a timeout under ordinary backpressure is
// not poison: L3 raises a "timed out" error and stays LIVE; L2 returns no
// progress with error() NONE. The wait lasts the timeout in simulated time.
func TestQueue_Timeout_IsNotPoison(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(1, 64, 64)
	e := w.endpoint(q, 1)
	w.do(func(p *sim.Proc) {
		checks := []struct {
			name string
			call func() error
		}{
			{"L3 output.peek (empty)", func() error { _, err := q.Output.Peek(p, 3*sim.Microsecond); return err }},
			{"L3 output.dequeue (empty)", func() error { _, _, err := q.Output.Dequeue(p, 3*sim.Microsecond); return err }},
			{"L3 enqueue (ring full)", func() error { return q.Input.Enqueue(p, nil, OpData, 3*sim.Microsecond) }},
			{"L3 request_stop (ring full)", func() error { return q.RequestStop(p, 3*sim.Microsecond) }},
		}
		for i, c := range checks {
			if i == 2 {
				_, _ = q.Input.TryEnqueue(p, nil, OpData) // fill the depth-1 ring
			}
			t0 := w.now()
			if err := c.call(); !isTimeout(err) {
				t.Errorf("%s: %v, want a timeout", c.name, err)
			}
			if d := w.now() - t0; d < 3*sim.Microsecond || d > 3*sim.Microsecond+2*hostDown(32) {
				t.Errorf("%s took %v", c.name, d)
			}
		}
		if q.State() != QueueLive {
			t.Errorf("L3 state %v", q.State())
		}
		h, _ := e.Input().TryPeek(p) // hold the only input so the window is full
		t0 := w.now()
		if h2, err := e.Input().Peek(p, 2*sim.Microsecond); h2 != nil || err != nil {
			t.Errorf("L2 peek: %v %v", h2, err)
		}
		r, _ := e.Output().TryReserve(p, 0)
		_ = e.Output().Publish(p, r, OpData) // output ring (depth 1) now full
		if r2, err := e.Output().Reserve(p, 0, 2*sim.Microsecond); r2 != nil || err != nil {
			t.Errorf("L2 reserve: %v %v", r2, err)
		}
		if d := w.now() - t0; d < 4*sim.Microsecond {
			t.Errorf("L2 timeouts took %v", d)
		}
		if !e.Live() || e.Err() != nil {
			t.Errorf("L2 error %v", e.Err())
		}
		_ = h
	})
}

// Rule (docs/l3l2.md, Time and units): L3 blocking calls need timeout > 0
// (ValueError), L2 blocking calls treat timeout_ns == 0 as a live no-attempt.
func TestQueue_BlockingTimeoutArguments(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 256)
	e := w.endpoint(q, 1)
	w.do(func(p *sim.Proc) {
		for name, err := range map[string]error{
			"enqueue":      q.Input.Enqueue(p, nil, OpData, 0),
			"request_stop": q.RequestStop(p, -1),
			"peek":         func() error { _, err := q.Output.Peek(p, 0); return err }(),
			"dequeue":      func() error { _, _, err := q.Output.Dequeue(p, 0); return err }(),
		} {
			if !isArgErr(err) {
				t.Errorf("L3 %s with timeout <= 0: %v", name, err)
			}
		}
		_, _ = q.Input.TryEnqueue(p, []byte{1}, OpData)
		t0 := w.now()
		if h, err := e.Input().Peek(p, 0); h != nil || err != nil || w.now() != t0 {
			t.Errorf("L2 peek(0) = %v, %v after %v", h, err, w.now()-t0)
		}
		if r, err := e.Output().Reserve(p, 8, 0); r != nil || err != nil {
			t.Errorf("L2 reserve(0) = %v, %v", r, err)
		}
		if h, err := e.Input().TryPeek(p); err != nil || h == nil || h.Seq != 1 {
			t.Errorf("the no-attempt consumed the message: %v %v", h, err)
		}
	})
}

// Rule (docs/l3l2.md, Poison rules): errors are first-error-wins and
// terminal: after poison every normal operation returns the first error,
// while L3 cleanup (free) stays valid.
func TestQueue_AfterPoison_FirstErrorWinsCleanupValid(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 256)
	e := w.endpoint(q, 1)
	first := e.Input().Release(nil, &InputHandle{Seq: 1})
	r, err := e.Output().TryReserve(nil, 8)
	errs := []error{err,
		func() error { _, err := e.Input().TryPeek(nil); return err }(),
		e.Output().Publish(nil, r, OpStop),
		e.Input().Release(nil, nil),
	}
	for i, err := range errs {
		if err != first {
			t.Errorf("op %d: %v, want the first error %v", i, err, first)
		}
	}
	if e.Err().Kind != QueueOwnership {
		t.Errorf("Err() = %v", e.Err())
	}
	qfirst := q.Output.Release(nil, &Message{})
	_ = q.Output.Release(nil, &Message{Seq: 9})
	for _, err := range []error{
		func() error { _, err := q.Input.TryEnqueue(nil, nil, OpData); return err }(),
		func() error { _, err := q.Output.TryPeek(nil); return err }(),
		func() error { _, err := q.ChipTaskArgScalars(); return err }(),
	} {
		if err != qfirst {
			t.Errorf("L3 after poison: %v, want %v", err, qfirst)
		}
	}
	q.Free()
	q.Free()
	if q.State() != QueueReleased || q.Region().State() != RegionReleased {
		t.Errorf("free: %v / %v", q.State(), q.Region().State())
	}
	if _, err := q.Input.TryEnqueue(nil, nil, OpData); err == nil || !strings.Contains(err.Error(), "released") {
		t.Errorf("use after free: %v", err)
	}
}

// Rule (docs/l3l2.md, Poison rules): a counter or payload operation failing
// underneath (here: the region's memory was released under a running L2
// task) poisons with ENDPOINT_ERROR.
func TestQueue_EndpointErrorUnderneath(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 256)
	e := w.endpoint(q, 1)
	q.Free()
	w.h.ReleaseFreed()
	_, err := e.Input().TryPeek(nil)
	wantQueueErr(t, err, QueueEndpointError, OpInputTryPeek)
}

// Rule (docs/l3l2.md, Error kinds): each error kind is reported with the
// operation it happened in.
func TestQueue_Error_KindAndOperation(t *testing.T) {
	type ko struct {
		Kind QueueErrorKind
		Op   string
	}
	var got []ko
	add := func(e *QueueEndpoint) { got = append(got, ko{e.Err().Kind, e.Err().Op}) }
	w := newWorld(t, Options{})
	mk := func(window uint64) (*Queue, *QueueEndpoint) {
		q := w.queue(2, 64, 64)
		return q, w.h.QueueEndpoint(q.Binding(), window)
	}
	_, e := mk(3) // init: window out of range
	add(e)
	b := Binding{}
	add(w.h.QueueEndpoint(b, 1)) // init: undecodable
	q, e := mk(1)
	_ = q.Output.Release(nil, &Message{}) // L3 aborts
	w.do(func(p *sim.Proc) { _, _ = e.Input().Peek(p, sim.Microsecond) })
	add(e) // timeout
	q, e = mk(1)
	setCounter(q.Region(), InputDescTailOffset, 5)
	_, _ = e.Input().TryPeek(nil)
	add(e) // input.try_peek
	_, e = mk(1)
	_ = e.Input().Release(nil, &InputHandle{})
	add(e) // input.release
	_, e = mk(1)
	_, _ = e.Output().TryReserve(nil, 0)
	_, _ = e.Output().TryReserve(nil, 0)
	add(e) // output.try_reserve
	_, e = mk(1)
	_ = e.Output().Publish(nil, &Reservation{}, OpData)
	add(e) // output.publish
	want := []ko{
		{QueueBadArgument, "init"}, {QueueBadDescriptor, "init"}, {QueueRemoteAborted, "timeout"},
		{QueueInvalidDescriptor, "input.try_peek"}, {QueueOwnership, "input.release"},
		{QueueOwnership, "output.try_reserve"}, {QueueOwnership, "output.publish"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if s := e.Err().Error(); !strings.Contains(s, "op=output.publish kind=OWNERSHIP") || !strings.Contains(s, fmt.Sprintf("transaction=%d ", e.Binding().TransactionID)) {
		t.Errorf("message %q", s)
	}
}

// Rule (docs/l3l2.md, L2: the endpoint): L2 views are the simulated memory
// itself: an input view shows the L3 bytes; a PE kernel writing the output
// reservation's view (no copy) is what L3 reads after publish.
func TestQueue_ViewsAreLiveRegions(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 256, 256)
	e := w.endpoint(q, 1)
	_, _ = q.Input.TryEnqueue(nil, pattern(4, 32), OpData)
	h, _ := e.Input().TryPeek(nil)
	v, err := e.Input().View(h)
	if err != nil || v.Mem != q.Region().Payload().Mem || v.Addr() != q.Region().Payload().Addr()+h.PayloadOffset || !bytes.Equal(v.Bytes(), pattern(4, 32)) {
		t.Fatalf("input view %v %v", v, err)
	}
	r, _ := e.Output().TryReserve(nil, 32)
	ov, _ := e.Output().View(r)
	pe := w.m.PE(0)
	w.do(func(p *sim.Proc) { // a PE kernel: load the input, store into the output view
		ld := w.m.Fetch(pe, v)
		_ = ld.Wait(p)
		st := w.m.Store(pe, ov, ld.Data)
		_ = st.Wait(p)
	})
	_ = e.Output().Publish(nil, r, OpData)
	_ = e.Input().Release(nil, h)
	if _, err := e.Input().View(h); !isArgErr(err) {
		t.Errorf("view of a released handle: %v", err)
	}
	_, b, err := q.Output.TryDequeue(nil)
	if err != nil || !bytes.Equal(b, pattern(4, 32)) {
		t.Errorf("L3 read %v %v", b, err)
	}
}

// Rule (docs/l3l2.md, Time and units): the queue's L3 operations cross PCIe:
// an enqueue of n bytes costs a head refresh (4 B), the payload (n), the
// descriptor fields (24 B), the seq (8 B) and the tail publish (4 B).
func TestQueue_L3CostsPCIe(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 4096, 256)
	var d sim.Time
	w.do(func(p *sim.Proc) {
		t0 := w.now()
		_, _ = q.Input.TryEnqueue(p, make([]byte, 1000), OpData)
		d = w.now() - t0
	})
	if want := hostDown(4) + hostDown(1000) + hostDown(24) + hostDown(8) + hostDown(4); d != want {
		t.Errorf("enqueue took %v, want %v", d, want)
	}
}

// Rule (docs/architecture.md, Determinism): same inputs → identical results
// and timings; both backpressure modes deliver the same data.
func TestQueue_Determinism(t *testing.T) {
	run := func(opts Options) (string, sim.Time) {
		var out strings.Builder
		w := newWorld(t, opts)
		q := w.queue(4, 256, 256)
		w.spawn("l3", func(p *sim.Proc) {
			got := 0
			for i := 0; i < 10; i++ {
				if err := q.Input.Enqueue(p, pattern(byte(i), 10+i*7), OpData, sim.Millisecond); err != nil {
					t.Error(err)
				}
				for {
					m, b, err := q.Output.TryDequeue(p)
					if err != nil || m == nil {
						break
					}
					fmt.Fprintf(&out, "%d:%x ", m.Seq, b)
					got++
				}
			}
			_ = q.RequestStop(p, sim.Millisecond)
			for ; got < 10; got++ {
				m, b, err := q.Output.Dequeue(p, sim.Millisecond)
				if err != nil {
					t.Error(err)
					return
				}
				fmt.Fprintf(&out, "%d:%x ", m.Seq, b)
			}
		})
		w.spawn("l2", func(p *sim.Proc) {
			e := w.endpoint(q, 2)
			for {
				h, err := e.Input().Peek(p, sim.Millisecond)
				if err != nil || h == nil {
					t.Errorf("peek: %v", err)
					return
				}
				if h.Opcode == OpStop {
					_ = e.Input().Release(p, h)
					return
				}
				b, _ := e.Input().Read(p, h)
				r, err := e.Output().Reserve(p, uint64(len(b)), sim.Millisecond)
				if err != nil || r == nil {
					t.Errorf("reserve: %v", err)
					return
				}
				_ = e.Output().Write(p, r, b, 0)
				_ = e.Output().Publish(p, r, OpData)
				_ = e.Input().Release(p, h)
			}
		})
		w.run()
		return out.String(), w.now()
	}
	a, ta := run(Options{})
	b, tb := run(Options{})
	c, _ := run(Options{Backpressure: machine.Poll, PollInterval: 50 * ns})
	if a != b || ta != tb {
		t.Errorf("two identical runs differ: %v vs %v", ta, tb)
	}
	if a != c {
		t.Errorf("poll mode delivered different data:\n%s\n%s", a, c)
	}
	if strings.Count(a, ":") != 10 {
		t.Errorf("output %q", a)
	}
}

// Rule (docs/architecture.md, Invariants and failures): a wait that ends
// early leaves no far-future event behind — the run ends when the work ends,
// not at a timeout.
func TestQueue_EarlyWakeDoesNotStretchTheRun(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(2, 64, 64)
	var done sim.Time
	w.spawn("l3", func(p *sim.Proc) {
		if _, err := q.Output.Peek(p, 10*sim.Second); err != nil {
			t.Error(err)
		}
		done = w.now()
	})
	w.spawn("l2", func(p *sim.Proc) {
		e := w.endpoint(q, 1)
		_ = p.Sleep(sim.Microsecond)
		r, _ := e.Output().TryReserve(p, 0)
		_ = e.Output().Publish(p, r, OpData)
	})
	w.run()
	if done > 10*sim.Microsecond || w.now() > done {
		t.Errorf("peek returned at %v, run ended at %v", done, w.now())
	}
}
