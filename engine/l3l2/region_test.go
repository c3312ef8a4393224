package l3l2

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/engine/sim"
)

// Rule (docs/l3l2.md, Regions): a region is allocated in the worker
// chip's HBM (PE 0 of SIP worker_id): a payload range and a 64-byte aligned
// counter range that do not overlap; bases are physical addresses and the
// memory reads as zero.
func TestRegion_Layout_PayloadAndCountersInChipHBM(t *testing.T) {
	w := newWorld(t, Options{})
	for _, worker := range []int{0, 1} {
		r := w.region(worker, 100, 12)
		pe := w.m.PE(worker * testParams().PesPerCube)
		d := r.Descriptor()
		if r.Payload().Mem != pe.HBM || r.Counters().Mem != pe.HBM {
			t.Errorf("worker %d: region in %v/%v, want %v", worker, r.Payload().Mem, r.Counters().Mem, pe.HBM)
		}
		if d.PayloadBase != r.Payload().Addr() || d.CounterBase != r.Counters().Addr() {
			t.Errorf("descriptor bases %#x/%#x are not the physical addresses %#x/%#x", d.PayloadBase, d.CounterBase, r.Payload().Addr(), r.Counters().Addr())
		}
		if d.CounterBase%64 != 0 || r.Payload().Overlaps(r.Counters()) {
			t.Errorf("counter base %#x misaligned or overlapping", d.CounterBase)
		}
		if err := d.Validate(); err != nil || d.RegionID == 0 || d.PayloadBytes != 100 || d.CounterBytes != 12 {
			t.Errorf("descriptor %+v: %v", d, err)
		}
		if !bytes.Equal(r.Payload().Bytes(), make([]byte, 100)) || !bytes.Equal(r.Counters().Bytes(), make([]byte, 12)) {
			t.Error("new region is not zeroed")
		}
		s, err := r.DescriptorScalars()
		if err != nil || !cmp.Equal(s, d.Scalars()) {
			t.Errorf("DescriptorScalars = %v, %v", s, err)
		}
	}
}

// Rule (spec API): create_l3_l2_region rejects payload_bytes 0, counter
// bytes that are 0 or not a multiple of 4, and unknown workers.
func TestRegion_Create_RejectsBadSizes(t *testing.T) {
	w := newWorld(t, Options{})
	for _, tc := range []struct {
		worker      int
		payload, cn uint64
		want        Code
	}{
		{0, 0, 64, BadPayloadRange},
		{0, 64, 0, BadCounterRange},
		{0, 64, 6, BadCounterRange},
		{2, 64, 64, CodeBadArgument},
		{-1, 64, 64, CodeBadArgument},
		{0, 1 << 40, 64, CodeBadArgument}, // does not fit the HBM
	} {
		if _, err := w.h.CreateRegion(tc.worker, tc.payload, tc.cn); regionCode(err) != tc.want {
			t.Errorf("CreateRegion(%d, %d, %d) = %v, want %s", tc.worker, tc.payload, tc.cn, err, tc.want)
		}
	}
}

// Rule (docs/l3l2.md, Payload): payload_write / payload_read copy contiguous
// bytes between the host and the payload range.
func TestRegion_PayloadWriteRead_RoundTrip(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 256, 64)
	data := pattern(3, 100)
	if err := r.PayloadWrite(nil, 50, data); err != nil {
		t.Fatal(err)
	}
	got, err := r.PayloadRead(nil, 50, 100)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("PayloadRead = %v, %v", got, err)
	}
	if !bytes.Equal(r.Payload().Sub(50, 100).Bytes(), data) {
		t.Error("bytes not in simulated memory")
	}
}

// Rule (docs/l3l2.md, Time and units): L3 operations cross PCIe and cost
// T(pcie path, nbytes) (counter operations move 4 bytes), spent by the
// calling process.
func TestRegion_L3CostsPCIe(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 4096, 64)
	c, _ := r.Counter(0)
	var got []sim.Time
	w.do(func(p *sim.Proc) {
		step := func(f func() error) {
			t0 := w.now()
			if err := f(); err != nil {
				t.Error(err)
			}
			got = append(got, w.now()-t0)
		}
		step(func() error { return r.PayloadWrite(p, 0, make([]byte, 4096)) })
		step(func() error { _, err := r.PayloadRead(p, 0, 1000); return err })
		step(func() error { return c.Notify(p, 1, NotifySet) })
		step(func() error { return c.Notify(p, 1, NotifyAdd) })
		step(func() error { _, err := c.Test(p, 1, WaitGE); return err })
		step(func() error { _, err := c.Wait(p, 1, WaitGE, sim.Second); return err })
	})
	want := []sim.Time{hostDown(4096), hostDown(1000), hostDown(4), hostDown(4), hostDown(4), hostDown(4)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("durations (-want +got):\n%s", diff)
	}
}

// Rule (docs/l3l2.md, Time and units): L2 operations cost a local HBM access
// (the HBM port); a payload_read view moves no bytes and costs nothing.
func TestRegion_L2CostsLocalHBM(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 4096, 64)
	s, _ := r.DescriptorScalars()
	ep := w.h.RegionEndpoint(s)
	addr, _ := ep.CounterAddr(0)
	var got []sim.Time
	w.do(func(p *sim.Proc) {
		step := func(f func() error) {
			t0 := w.now()
			if err := f(); err != nil {
				t.Error(err)
			}
			got = append(got, w.now()-t0)
		}
		step(func() error { return ep.PayloadWrite(p, 0, make([]byte, 512)) })
		step(func() error { _, err := ep.PayloadRead(0, 4096); return err })
		step(func() error { return ep.SignalNotify(p, addr, 3, NotifySet) })
		step(func() error { _, err := ep.SignalTest(p, addr, 3, WaitEQ); return err })
		step(func() error { _, _, err := ep.SignalWait(p, addr, 3, WaitEQ, sim.Second); return err })
	})
	want := []sim.Time{localHBM(512), 0, localHBM(4), localHBM(4), localHBM(4)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("durations (-want +got):\n%s", diff)
	}
}

// Rule (docs/l3l2.md, Counters): test is a one-shot snapshot returning
// (matched, observed); a mismatch is a normal result, not an error, and no
// poison.
func TestRegion_Counter_TestIsOneShotSnapshot(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 64)
	c, _ := r.Counter(8)
	if err := c.Notify(nil, 41, NotifySet); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		v    int64
		cmp  WaitCmp
		want TestResult
	}{
		{41, WaitEQ, TestResult{true, 41}},
		{42, WaitGE, TestResult{false, 41}},
		{0, WaitGT, TestResult{true, 41}},
	} {
		got, err := c.Test(nil, tc.v, tc.cmp)
		if err != nil || got != tc.want {
			t.Errorf("Test(%d, %v) = %+v, %v, want %+v", tc.v, tc.cmp, got, err, tc.want)
		}
	}
	if r.State() != RegionLive {
		t.Errorf("state %v after a mismatch", r.State())
	}
}

// Rule (docs/l3l2.md, Counters): Add wraps at 32 bits (INT32_MAX + 1 =
// INT32_MIN), on L3 and on L2; Set stores the operand.
func TestRegion_Counter_AddWraps32(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 128)
	c, _ := r.Counter(0)
	steps := []struct {
		v  int64
		op NotifyOp
	}{{2147483647, NotifySet}, {1, NotifyAdd}, {-1, NotifyAdd}, {-2147483648, NotifySet}, {-1, NotifyAdd}}
	var got []int32
	for _, s := range steps {
		if err := c.Notify(nil, s.v, s.op); err != nil {
			t.Fatal(err)
		}
		got = append(got, counterValue(r, 0))
	}
	want := []int32{2147483647, -2147483648, 2147483647, -2147483648, 2147483647}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("L3 (-want +got):\n%s", diff)
	}
	s, _ := r.DescriptorScalars()
	ep := w.h.RegionEndpoint(s)
	addr, _ := ep.CounterAddr(64)
	_ = ep.SignalNotify(nil, addr, 2147483647, NotifySet)
	if err := ep.SignalNotify(nil, addr, 1, NotifyAdd); err != nil || counterValue(r, 64) != -2147483648 {
		t.Errorf("L2 add: %d, %v", counterValue(r, 64), err)
	}
}

// Rule (docs/l3l2.md, Counters): Add is a read-modify-write, not atomic: two
// Adds by the same agent that overlap in time lose one increment.
func TestRegion_Counter_AddIsReadModifyWrite(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 64)
	c, _ := r.Counter(0)
	for i := 0; i < 2; i++ {
		w.spawn(fmt.Sprintf("host%d", i), func(p *sim.Proc) {
			if err := c.Notify(p, 1, NotifyAdd); err != nil {
				t.Error(err)
			}
		})
	}
	w.run()
	if got := counterValue(r, 0); got != 1 {
		t.Errorf("counter = %d after two overlapping adds, want 1 (lost update)", got)
	}
}

// Rule (docs/l3l2.md, Counters): NotifyOp and WaitCmp values other than the
// listed ones, and operands that do not fit an int32, are rejected (before
// issue, so without poison).
func TestRegion_Counter_RejectsInvalidOpAndCmp(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 64)
	c, _ := r.Counter(0)
	errs := []error{
		c.Notify(nil, 1, NotifyOp(2)),
		c.Notify(nil, 1<<31, NotifySet),
		func() error { _, err := c.Test(nil, 1, WaitCmp(6)); return err }(),
		func() error { _, err := c.Test(nil, -1<<31-1, WaitEQ); return err }(),
	}
	for i, err := range errs {
		if regionCode(err) != CodeBadArgument {
			t.Errorf("case %d: %v, want BAD_ARGUMENT", i, err)
		}
	}
	if r.State() != RegionLive {
		t.Errorf("state %v, want LIVE", r.State())
	}
}

// Rule (docs/l3l2.md, Counters): wait requires a finite positive timeout.
func TestRegion_Wait_RequiresPositiveTimeout(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 64)
	c, _ := r.Counter(0)
	w.do(func(p *sim.Proc) {
		for _, to := range []sim.Time{0, -1} {
			if _, err := c.Wait(p, 1, WaitEQ, to); regionCode(err) != CodeBadArgument {
				t.Errorf("timeout %v: %v, want BAD_ARGUMENT", to, err)
			}
		}
	})
}

// Rule (docs/l3l2.md, Counters): a wait honours its timeout in simulated time
// — a wait that never matches returns at exactly start + timeout with the
// last observed value — and a timeout is not poison. Both backpressure modes.
func TestRegion_Wait_TimeoutIsExactAndNotPoison(t *testing.T) {
	for _, opts := range []Options{{Backpressure: machine.Sleep}, {Backpressure: machine.Poll, PollInterval: 30 * ns}} {
		t.Run(fmt.Sprint(opts.Backpressure), func(t *testing.T) {
			w := newWorld(t, opts)
			r := w.region(0, 64, 64)
			c, _ := r.Counter(0)
			_ = c.Notify(nil, 5, NotifySet)
			w.do(func(p *sim.Proc) {
				t0 := w.now()
				obs, err := c.Wait(p, 6, WaitGE, 1234*ns+7)
				if !isTimeout(err) || obs != 5 {
					t.Errorf("Wait = %d, %v; want observed 5 and a timeout", obs, err)
				}
				var te *TimeoutError
				if errors.As(err, &te) && te.Observed != 5 {
					t.Errorf("TimeoutError.Observed = %d", te.Observed)
				}
				if d := w.now() - t0; d != 1234*ns+7 {
					t.Errorf("returned after %v, want exactly 1234.007ns", d)
				}
				if r.State() != RegionLive {
					t.Errorf("state %v after timeout", r.State())
				}
				if err := c.Notify(p, 6, NotifySet); err != nil {
					t.Errorf("region unusable after timeout: %v", err)
				}
			})
		})
	}
}

// Rule (docs/architecture.md, IPCQ, sleep and poll; a counter wait polls
// with the configured backpressure mode): in sleep mode a wait wakes exactly
// when the counter is written and returns one counter read later; in poll
// mode it observes the write at the first poll instant at or after it.
// Results agree.
func TestRegion_Wait_BackpressureModes(t *testing.T) {
	const iv = 300 * ns
	type result struct {
		Obs  int32
		Back sim.Time
	}
	run := func(opts Options) (result, sim.Time) {
		w := newWorld(t, opts)
		r := w.region(0, 64, 128)
		s, _ := r.DescriptorScalars()
		ep := w.h.RegionEndpoint(s)
		var landed sim.Time
		var res result
		w.spawn("l3", func(p *sim.Proc) {
			c, _ := r.Counter(64)
			t0 := w.now()
			obs, err := c.Wait(p, 3, WaitGE, sim.Millisecond)
			if err != nil {
				t.Error(err)
			}
			res = result{obs, w.now() - t0}
		})
		w.spawn("l2", func(p *sim.Proc) {
			addr, _ := ep.CounterAddr(64)
			_ = p.Sleep(1000 * ns)
			if err := ep.SignalNotify(p, addr, 3, NotifySet); err != nil {
				t.Error(err)
			}
			landed = w.now()
		})
		w.run()
		return res, landed
	}
	sleep, landed := run(Options{Backpressure: machine.Sleep})
	if want := (result{3, landed + hostDown(4)}); sleep != want {
		t.Errorf("sleep mode: %+v, want %+v (wake at the write %v + one read)", sleep, want, landed)
	}
	poll, landed := run(Options{Backpressure: machine.Poll, PollInterval: iv})
	firstPoll := (landed + iv - 1) / iv * iv
	if want := (result{3, firstPoll + hostDown(4)}); poll != want {
		t.Errorf("poll mode: %+v, want %+v", poll, want)
	}
	if sleep.Obs != poll.Obs {
		t.Errorf("modes disagree on the observed value: %d vs %d", sleep.Obs, poll.Obs)
	}
}

// Rule (docs/architecture.md, Invariants and failures): waits with an
// explicit timeout are Timed (governed by their own timeout, not the deadlock
// watchdog) and describe themselves in Proc.Wait for reports.
func TestRegion_Wait_IsTimedForWatchdog(t *testing.T) {
	w := newWorld(t, Options{})
	w.m.Sim.WaitWatchdog(100 * ns) // far shorter than the wait
	r := w.region(0, 64, 64)
	c, _ := r.Counter(0)
	var seen string
	w.spawn("observer", func(p *sim.Proc) {
		_ = p.Sleep(500 * ns)
		for _, q := range w.m.Sim.Blocked() {
			if q.Name == "waiter" && q.Timed {
				seen = fmt.Sprint(q.Wait)
			}
		}
	})
	w.spawn("waiter", func(p *sim.Proc) {
		if _, err := c.Wait(p, 1, WaitEQ, 10*sim.Microsecond); !isTimeout(err) {
			t.Errorf("wait: %v", err)
		}
	})
	w.run()
	if !strings.Contains(seen, "counter.wait") || !strings.Contains(seen, "EQ 1") {
		t.Errorf("blocked waiter reported as %q", seen)
	}
}

// Rule (docs/l3l2.md, Region states): free() is logical and idempotent; a
// released handle rejects payload, counter and descriptor use; free stays
// valid.
func TestRegion_ReleasedRejectsUse(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 64)
	c, _ := r.Counter(0)
	r.Free()
	r.Free()
	if r.State() != RegionReleased {
		t.Fatalf("state %v", r.State())
	}
	for name, err := range rejectAll(r, c) {
		if regionCode(err) != CodeReleased {
			t.Errorf("%s after free: %v, want RELEASED", name, err)
		}
	}
}

func rejectAll(r *Region, c *Counter) map[string]error {
	return map[string]error{
		"payload_write":      r.PayloadWrite(nil, 0, []byte{1}),
		"payload_read":       func() error { _, err := r.PayloadRead(nil, 0, 1); return err }(),
		"counter":            func() error { _, err := r.Counter(0); return err }(),
		"descriptor_scalars": func() error { _, err := r.DescriptorScalars(); return err }(),
		"notify":             c.Notify(nil, 1, NotifySet),
		"test":               func() error { _, err := c.Test(nil, 1, WaitEQ); return err }(),
	}
}

// Rule (docs/l3l2.md, Region states): a poisoned region rejects payload,
// counter and descriptor use; free and cleanup stay valid. An L2 endpoint
// fatal error naming the region poisons it.
func TestRegion_PoisonedRejectsUse(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 64)
	c, _ := r.Counter(0)
	fatal := errors.New("L3-L2 endpoint error op=signal_wait kind=SIGNAL_TIMEOUT region=1")
	if !w.h.PoisonRegion(r.ID(), fatal) || w.h.PoisonRegion(r.ID()+100, fatal) {
		t.Fatal("PoisonRegion did not report the live region only")
	}
	if r.State() != RegionPoisoned || r.Cause() != fatal {
		t.Fatalf("state %v cause %v", r.State(), r.Cause())
	}
	for name, err := range rejectAll(r, c) {
		if regionCode(err) != CodePoisoned || !errors.Is(err, fatal) {
			t.Errorf("%s after poison: %v, want POISONED wrapping the cause", name, err)
		}
	}
	r.Free()
	if r.State() != RegionReleased {
		t.Errorf("free after poison: state %v", r.State())
	}
}

// Rule (docs/l3l2.md, Region states): pre-command validation failures (bad
// offsets, bad counter offset, bad arguments) raise without poisoning.
func TestRegion_PreValidationDoesNotPoison(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 64)
	c, _ := r.Counter(0)
	w.do(func(p *sim.Proc) {
		for _, tc := range []struct {
			name string
			err  error
			want Code
		}{
			{"write past end", r.PayloadWrite(p, 60, make([]byte, 8)), OutOfBounds},
			{"write 0 bytes", r.PayloadWrite(p, 0, nil), BadPayloadRange},
			{"read past end", func() error { _, err := r.PayloadRead(p, 64, 1); return err }(), OutOfBounds},
			{"read 0 bytes", func() error { _, err := r.PayloadRead(p, 0, 0); return err }(), BadPayloadRange},
			{"counter misaligned", func() error { _, err := r.Counter(2); return err }(), BadCounterRange},
			{"counter out of range", func() error { _, err := r.Counter(64); return err }(), OutOfBounds},
			{"bad notify op", c.Notify(p, 1, 7), CodeBadArgument},
			{"bad timeout", func() error { _, err := c.Wait(p, 1, WaitEQ, 0); return err }(), CodeBadArgument},
		} {
			if regionCode(tc.err) != tc.want {
				t.Errorf("%s: %v, want %s", tc.name, tc.err, tc.want)
			}
		}
		if w.now() != 0 {
			t.Errorf("rejected calls took %v of simulated time", w.now())
		}
	})
	if r.State() != RegionLive {
		t.Errorf("state %v, want LIVE", r.State())
	}
}

// Rule (docs/l3l2.md, Counters): single writer per 64-byte line — two
// different agents writing counters in one line is a reported violation;
// separate lines are fine, and the same agent may pack several counters in
// one line.
func TestRegion_SingleWriterPerLine(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 64, 256)
	s, _ := r.DescriptorScalars()
	ep := w.h.RegionEndpoint(s)
	l3a, _ := r.Counter(0)
	l3b, _ := r.Counter(4) // same line, same writer: allowed
	w.do(func(p *sim.Proc) {
		if err := l3a.Notify(p, 1, NotifySet); err != nil {
			t.Fatal(err)
		}
		if err := l3b.Notify(p, 1, NotifySet); err != nil {
			t.Fatalf("same writer, same line: %v", err)
		}
		other, _ := ep.CounterAddr(64)
		if err := ep.SignalNotify(p, other, 1, NotifySet); err != nil {
			t.Fatalf("L2 on its own line: %v", err)
		}
		shared, _ := ep.CounterAddr(8)
		err := ep.SignalNotify(p, shared, 1, NotifySet)
		var ee *EndpointError
		if !errors.As(err, &ee) || ee.Kind != EndpointSignalProtocol || !strings.Contains(ee.Msg, "single-writer") {
			t.Fatalf("L2 writing an L3 line: %v, want SIGNAL_PROTOCOL single-writer violation", err)
		}
		// The host writing a line the L2 task owns is refused too.
		l2line, _ := r.Counter(68)
		if err := l2line.Notify(p, 1, NotifySet); regionCode(err) != CodeSingleWriter || r.State() != RegionPoisoned {
			t.Fatalf("L3 writing an L2 line: %v (state %v), want SINGLE_WRITER and poison", err, r.State())
		}
	})
	base := r.Counters().Addr()
	want := []Violation{
		{RegionID: r.ID(), Line: base, Addr: base + 8, First: "L3 host", Second: "L2 main"},
		{RegionID: r.ID(), Line: base + 64, Addr: base + 68, First: "L2 main", Second: "L3 host"},
	}
	if diff := cmp.Diff(want, w.h.Violations(), cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".At" }, cmp.Ignore())); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	if counterValue(r, 8) != 0 || counterValue(r, 68) != 0 {
		t.Error("a refused write reached memory")
	}
}

// Rule (docs/l3l2.md, Region states): physical release is deferred until
// submitted L2 work drained: after free() the memory stays allocated and L2
// keeps working; ReleaseFreed gives it back, after which L2 access fails.
func TestRegion_DeferredPhysicalRelease(t *testing.T) {
	w := newWorld(t, Options{})
	r := w.region(0, 1000, 64)
	mem := r.Payload().Mem
	used := mem.Used()
	s, _ := r.DescriptorScalars()
	ep := w.h.RegionEndpoint(s)
	r.Free()
	if mem.Used() != used || r.PhysicallyReleased() {
		t.Fatal("free() released memory")
	}
	if err := ep.PayloadWrite(nil, 0, []byte{1, 2}); err != nil {
		t.Fatalf("L2 use after logical free: %v", err)
	}
	if n := w.h.ReleaseFreed(); n != 1 || mem.Used() != used-1088 || !r.PhysicallyReleased() {
		t.Fatalf("ReleaseFreed = %d, used %d -> %d", n, used, mem.Used())
	}
	if n := w.h.ReleaseFreed(); n != 0 {
		t.Errorf("second ReleaseFreed released %d", n)
	}
	var ee *EndpointError
	if err := ep.PayloadWrite(nil, 0, []byte{1}); !errors.As(err, &ee) || ee.Kind != EndpointLocalOperation {
		t.Errorf("L2 use after physical release: %v, want LOCAL_OPERATION", err)
	}
	if e2 := w.h.RegionEndpoint(s); e2.Err() == nil || e2.Err().Kind != EndpointBadDescriptor {
		t.Errorf("new endpoint on a released region: %v, want BAD_DESCRIPTOR", e2.Err())
	}
}

// Rule (docs/l3l2.md, When main returns): when an L3 execution exits with
// live regions, cleanup marks them released, (after draining L2 work)
// releases the memory.
func TestRegion_ReleaseAll_ReleasesLiveRegions(t *testing.T) {
	w := newWorld(t, Options{})
	a, b := w.region(0, 64, 64), w.region(1, 64, 64)
	q := w.queue(2, 64, 64)
	w.h.PoisonRegion(b.ID(), errors.New("x"))
	w.h.ReleaseAll()
	for _, r := range []*Region{a, b, q.Region()} {
		if r.State() != RegionReleased || !r.PhysicallyReleased() {
			t.Errorf("region %d: %v, physically released %v", r.ID(), r.State(), r.PhysicallyReleased())
		}
	}
	if q.State() != QueueReleased {
		t.Errorf("queue %v", q.State())
	}
	for id := range w.m.NumPEs() {
		if pe := w.m.PE(id); pe.HBM.Used() != 0 {
			t.Errorf("%v still uses %d bytes", pe.HBM, pe.HBM.Used())
		}
	}
}

// Rule (docs/architecture.md, Two-pass verification): every byte the layer
// writes is in the op_log, so phase 2 replays to the same memory image.
func TestRegion_OplogReplayMatches(t *testing.T) {
	w := newWorld(t, Options{})
	w.m.Log = &oplog.Log{}
	initial := w.m.Image()
	q := w.queue(4, 256, 256)
	e := w.endpoint(q, 2)
	r := w.region(1, 128, 64)
	s, _ := r.DescriptorScalars()
	ep := w.h.RegionEndpoint(s)
	w.do(func(p *sim.Proc) {
		c, _ := r.Counter(0)
		_ = r.PayloadWrite(p, 0, pattern(1, 128))
		_ = c.Notify(p, 7, NotifySet)
		a, _ := ep.CounterAddr(60)
		_ = ep.SignalNotify(p, a, 9, NotifySet)
		_ = ep.PayloadWrite(p, 64, pattern(2, 10))
		for i := 0; i < 3; i++ {
			if _, err := q.Input.TryEnqueue(p, pattern(byte(i), 50+i), OpData); err != nil {
				t.Fatal(err)
			}
			h, _ := e.Input().TryPeek(p)
			_ = e.Input().Release(p, h)
			res, _ := e.Output().TryReserve(p, 30)
			_ = e.Output().Write(p, res, pattern(9, 30), 0)
			_ = e.Output().Publish(p, res, OpData)
			if _, _, err := q.Output.TryDequeue(p); err != nil {
				t.Fatal(err)
			}
		}
	})
	im := initial.Clone()
	if err := oplog.Replay(&im, w.m.Log.Records()); err != nil {
		t.Fatal(err)
	}
	final := w.m.Image()
	for i := range final {
		if !bytes.Equal(im[i][:min(len(im[i]), len(final[i]))], final[i][:min(len(im[i]), len(final[i]))]) {
			t.Errorf("memory %d differs after replay", i)
		}
	}
}
