package l3l2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
)

func epKind(err error) EndpointErrorKind {
	var ee *EndpointError
	if errors.As(err, &ee) {
		return ee.Kind
	}
	return ""
}

// Rule (docs/l3l2.md, The descriptor): an endpoint whose descriptor fails
// decoding reports BAD_DESCRIPTOR from init, carrying the region_id scalar
// when present; so does a descriptor naming no allocated region of the
// machine.
func TestRegion_Endpoint_BadDescriptorAtInit(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 64)
	good, _ := r.DescriptorScalars()
	for _, tc := range []struct {
		name string
		s    []uint64
		id   uint64
		msg  string
	}{
		{"bad magic", append([]uint64{1}, good[1:]...), r.ID(), "BAD_MAGIC_VERSION"},
		{"short", good[:3], r.ID(), "BAD_SCALAR_COUNT"},
		{"empty", nil, 0, "BAD_SCALAR_COUNT"},
		{"unknown memory", []uint64{RegionMagicVersion, 77, 0, 64, 64, 64}, 77, "not inside an allocated region"},
		{"range past the region", []uint64{good[0], good[1], good[2], good[3] + 1, good[4], good[5]}, r.ID(), "BAD_COUNTER_RANGE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := w.h.RegionEndpoint(tc.s)
			ee := e.Err()
			if ee == nil || ee.Kind != EndpointBadDescriptor || ee.Op != "init" || ee.RegionID != tc.id {
				t.Fatalf("Err() = %+v, want BAD_DESCRIPTOR/init region %d", ee, tc.id)
			}
			if !strings.Contains(ee.Msg, tc.msg) {
				t.Errorf("message %q lacks %q", ee.Msg, tc.msg)
			}
			if _, err := e.CounterAddr(0); err != error(ee) {
				t.Errorf("later op returned %v, want the init error", err)
			}
		})
	}
}

// Rule (docs/l3l2.md, Counters): counter_addr(offset) yields the counter's GM
// address (counter_base + offset) or OUT_OF_BOUNDS.
func TestRegion_Endpoint_CounterAddr(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 128)
	s, _ := r.DescriptorScalars()
	e := w.h.RegionEndpoint(s)
	for _, off := range []uint64{0, 64, 124} {
		if a, err := e.CounterAddr(off); err != nil || a != r.Counters().Addr()+off {
			t.Errorf("CounterAddr(%d) = %#x, %v", off, a, err)
		}
	}
	_, err := e.CounterAddr(128)
	var ee *EndpointError
	if !errors.As(err, &ee) || ee.Kind != EndpointOutOfBounds || ee.Op != "counter_addr" {
		t.Errorf("CounterAddr(128) = %v, want OUT_OF_BOUNDS/counter_addr", err)
	}
}

// Rule (docs/l3l2.md, Error kinds): endpoint errors carry kind, operation,
// region_id, counter address, operand, observed value and message, one kind
// per failure class.
func TestRegion_Endpoint_ErrorFields(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 128)
	s, _ := r.DescriptorScalars()
	base := r.Counters().Addr()
	c, _ := r.Counter(0)
	_ = c.Notify(nil, 5, NotifySet)
	for _, tc := range []struct {
		name string
		op   func(e *RegionEndpoint, p *sim.Proc) error
		want EndpointError
	}{
		{"misaligned address", func(e *RegionEndpoint, p *sim.Proc) error { return e.SignalNotify(p, base+2, 9, NotifySet) },
			EndpointError{Kind: EndpointOutOfBounds, Op: "signal_notify", CounterAddr: base + 2, Operand: 9}},
		{"address out of range", func(e *RegionEndpoint, p *sim.Proc) error {
			_, err := e.SignalTest(p, base+128, 3, WaitEQ)
			return err
		}, EndpointError{Kind: EndpointOutOfBounds, Op: "signal_test", CounterAddr: base + 128, Operand: 3}},
		{"bad notify op", func(e *RegionEndpoint, p *sim.Proc) error { return e.SignalNotify(p, base+64, 9, 2) },
			EndpointError{Kind: EndpointSignalProtocol, Op: "signal_notify", CounterAddr: base + 64, Operand: 9}},
		{"bad cmp", func(e *RegionEndpoint, p *sim.Proc) error {
			_, _, err := e.SignalWait(p, base, 1, 9, sim.Second)
			return err
		}, EndpointError{Kind: EndpointSignalProtocol, Op: "signal_wait", CounterAddr: base, Operand: 1}},
		{"operand too large", func(e *RegionEndpoint, p *sim.Proc) error {
			return e.SignalNotify(p, base+64, math.MaxInt32+1, NotifySet)
		},
			EndpointError{Kind: EndpointLocalOperation, Op: "signal_notify", CounterAddr: base + 64}},
		{"timeout", func(e *RegionEndpoint, p *sim.Proc) error {
			_, _, err := e.SignalWait(p, base, 6, WaitGE, 50*ns)
			return err
		}, EndpointError{Kind: EndpointSignalTimeout, Op: "signal_wait", CounterAddr: base, Operand: 6, Observed: 5}},
		{"payload read", func(e *RegionEndpoint, p *sim.Proc) error { _, err := e.PayloadRead(60, 8); return err },
			EndpointError{Kind: EndpointOutOfBounds, Op: "payload_read"}},
		{"payload write", func(e *RegionEndpoint, p *sim.Proc) error { return e.PayloadWrite(p, 0, nil) },
			EndpointError{Kind: EndpointOutOfBounds, Op: "payload_write"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := w.h.RegionEndpoint(s)
			var err error
			w.do(func(p *sim.Proc) { err = tc.op(e, p) })
			if err != error(e.Err()) || e.Err() == nil {
				t.Fatalf("returned %v, recorded %v", err, e.Err())
			}
			got := *e.Err()
			tc.want.RegionID = r.ID()
			if diff := cmp.Diff(tc.want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Msg" }, cmp.Ignore())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !strings.Contains(got.Error(), fmt.Sprintf("region=%d", r.ID())) {
				t.Errorf("message %q lacks region=<id>", got.Error())
			}
		})
	}
}

// Rule (docs/l3l2.md, Region states): once an endpoint has recorded an error,
// every later endpoint operation fails with it (sticky), even valid ones.
func TestRegion_Endpoint_Sticky(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 64)
	s, _ := r.DescriptorScalars()
	e := w.h.RegionEndpoint(s)
	first := e.PayloadWrite(nil, 64, []byte{1})
	if epKind(first) != EndpointOutOfBounds {
		t.Fatalf("first error %v", first)
	}
	_, _, err6 := e.SignalWait(nil, r.Counters().Addr(), 0, WaitEQ, 0)
	errs := []error{
		func() error { _, err := e.CounterAddr(0); return err }(),
		e.SignalNotify(nil, r.Counters().Addr(), 1, NotifySet),
		func() error { _, err := e.SignalTest(nil, r.Counters().Addr(), 0, WaitEQ); return err }(),
		func() error { _, err := e.PayloadRead(0, 1); return err }(),
		e.PayloadWrite(nil, 0, []byte{1}),
		err6,
	}
	for i, err := range errs {
		if err != first {
			t.Errorf("op %d: %v, want the first error", i, err)
		}
	}
	if counterValue(r, 0) != 0 || r.Payload().Bytes()[0] != 0 {
		t.Error("an operation ran after the sticky error")
	}
}

// Rule (docs/l3l2.md, Payload): payload_read on L2 returns a live view of
// the region (later writes show through), not a copy; its address is
// payload_base + offset.
func TestRegion_Endpoint_PayloadReadIsLiveView(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 256, 64)
	s, _ := r.DescriptorScalars()
	e := w.h.RegionEndpoint(s)
	v, err := e.PayloadRead(16, 32)
	if err != nil {
		t.Fatal(err)
	}
	if v.Addr() != r.Descriptor().PayloadBase+16 || v.N != 32 || v.Mem != r.Payload().Mem {
		t.Fatalf("view %v", v)
	}
	data := pattern(5, 32)
	if err := r.PayloadWrite(nil, 16, data); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v.Bytes(), data) {
		t.Error("view does not show the later L3 write")
	}
	copy(v.Bytes(), pattern(8, 32)) // a kernel writing through the view
	got, _ := r.PayloadRead(nil, 16, 32)
	if !bytes.Equal(got, pattern(8, 32)) {
		t.Error("L3 does not see bytes written through the view")
	}
}

// Rule (docs/l3l2.md, The descriptor): a descriptor is just ranges; one
// describing a sub-range of a region works, with offsets relative to its own
// bases.
func TestRegion_Endpoint_SubRangeDescriptor(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 256, 128)
	d := r.Descriptor()
	sub := Descriptor{RegionMagicVersion, d.RegionID, d.PayloadBase + 64, 64, d.CounterBase + 64, 64}
	e := w.h.RegionEndpoint(sub.Scalars())
	if e.Err() != nil {
		t.Fatal(e.Err())
	}
	if err := e.PayloadWrite(nil, 0, []byte{9}); err != nil || r.Payload().Bytes()[64] != 9 {
		t.Errorf("payload write: %v", err)
	}
	a, _ := e.CounterAddr(0)
	if err := e.SignalNotify(nil, a, 5, NotifySet); err != nil || counterValue(r, 64) != 5 {
		t.Errorf("notify: %v", err)
	}
	if _, err := e.PayloadRead(1, 64); epKind(err) != EndpointOutOfBounds {
		t.Errorf("read past the sub-range: %v", err)
	}
}

// Rule (spec API §5): an L2 signal_wait with timeout_ns == 0 is a live
// no-attempt — no wait, no error — while a positive timeout that passes is
// SIGNAL_TIMEOUT.
func TestRegion_Endpoint_SignalWaitZeroTimeoutIsNoAttempt(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 64)
	s, _ := r.DescriptorScalars()
	e := w.h.RegionEndpoint(s)
	c, _ := r.Counter(0)
	_ = c.Notify(nil, 1, NotifySet) // even a matching counter is not looked at
	w.do(func(p *sim.Proc) {
		obs, ok, err := e.SignalWait(p, r.Counters().Addr(), 1, WaitEQ, 0)
		if obs != 0 || ok || err != nil || e.Err() != nil || w.now() != 0 {
			t.Errorf("SignalWait(0) = %d, %v, %v (err %v, t=%v)", obs, ok, err, e.Err(), w.now())
		}
		obs, ok, err = e.SignalWait(p, r.Counters().Addr(), 1, WaitEQ, 10*ns)
		if obs != 1 || !ok || err != nil {
			t.Errorf("SignalWait(10ns) = %d, %v, %v", obs, ok, err)
		}
	})
}

// Rule (docs/l3l2.md, The shipped benches): the streaming wrapper example —
// header {seq, opcode} at 0, float32 input at 64, output at 65600, counters
// data_ready at 0 and completion at 64; three DATA rounds (output = input +
// 7) and a STOP. The PE kernel is played by Go code writing through the
// output view.
func TestRegion_StreamExample(t *testing.T) {
	w := newWorld(t, Options{})
	const n = 16384
	const inOff, outOff = 64, 65600
	r := w.region(0, outOff+4*n, 128)
	s, _ := r.DescriptorScalars()
	f32 := func(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }
	var rounds []int
	w.spawn("l3", func(p *sim.Proc) {
		ready, _ := r.Counter(0)
		done, _ := r.Counter(64)
		for seq := 1; seq <= 4; seq++ {
			op := uint64(1)
			if seq == 4 {
				op = 2
			} else {
				in := make([]byte, 4*n)
				for i := range n {
					binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(seq*1000+i%251)/16))
				}
				if err := r.PayloadWrite(p, inOff, in); err != nil {
					t.Error(err)
					return
				}
			}
			hdr := make([]byte, 16)
			binary.LittleEndian.PutUint64(hdr, uint64(seq))
			binary.LittleEndian.PutUint64(hdr[8:], op)
			_ = r.PayloadWrite(p, 0, hdr)
			_ = ready.Notify(p, int64(seq), NotifySet)
			if seq == 4 {
				return
			}
			if _, err := done.Test(p, int64(seq), WaitGE); err != nil {
				t.Error(err)
			}
			if _, err := done.Wait(p, int64(seq), WaitGE, sim.Second); err != nil {
				t.Error(err)
				return
			}
			out, _ := r.PayloadRead(p, outOff, 4*n)
			in, _ := r.PayloadRead(p, inOff, 4*n)
			for i := range n {
				if d := f32(out, i) - (f32(in, i) + 7); d > 1e-5 || d < -1e-5 {
					t.Errorf("round %d element %d: %v, want %v", seq, i, f32(out, i), f32(in, i)+7)
					return
				}
			}
		}
	})
	w.spawn("l2", func(p *sim.Proc) {
		e := w.h.RegionEndpoint(append(s, 0, 64))
		ready, _ := e.CounterAddr(0)
		done, _ := e.CounterAddr(64)
		for seq := int64(1); ; seq++ {
			if _, ok, err := e.SignalWait(p, ready, seq, WaitGE, sim.Second); !ok {
				t.Errorf("L2 wait: %v", err)
				return
			}
			hdr, _ := e.PayloadRead(0, 16)
			if binary.LittleEndian.Uint64(hdr.Bytes()[8:]) == 2 {
				return
			}
			in, _ := e.PayloadRead(inOff, 4*n)
			out, _ := e.PayloadRead(outOff, 4*n)
			_ = p.Sleep(2 * sim.Microsecond) // the kernel's time
			ib, ob := in.Bytes(), out.Bytes()
			for i := range n {
				binary.LittleEndian.PutUint32(ob[4*i:], math.Float32bits(f32(ib, i)+7))
			}
			rounds = append(rounds, int(binary.LittleEndian.Uint64(hdr.Bytes())))
			_ = e.SignalNotify(p, done, seq, NotifySet)
		}
	})
	w.run()
	if diff := cmp.Diff([]int{1, 2, 3}, rounds); diff != "" {
		t.Errorf("rounds (-want +got):\n%s", diff)
	}
}
