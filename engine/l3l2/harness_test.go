package l3l2

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"kernbench/engine/machine"
	"kernbench/engine/machine/machinetest"
	"kernbench/engine/sim"
)

const ns = sim.Nanosecond

// testParams is a small machine with two chips (SIPs) so worker ids 0 and 1
// exist. Link numbers follow the shipped ccl.yaml.
func testParams() machine.Params {
	p := machinetest.Params(2, 1, 2)
	p.Hbm.Capacity = 64 << 20
	return p
}

type world struct {
	t *testing.T
	m *machine.Machine
	h *Hub
}

func newWorld(t *testing.T, opts Options) *world {
	t.Helper()
	s := sim.New()
	s.MaxTime = 100 * sim.Second // a runaway wait fails the test instead of hanging it
	m, err := machine.New(s, testParams())
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHub(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &world{t: t, m: m, h: h}
}

func (w *world) now() sim.Time { return w.m.Sim.Now() }

// spawn starts a process; run runs the simulation to the end.
func (w *world) spawn(name string, body func(p *sim.Proc)) *sim.Proc {
	return w.m.Sim.Spawn(name, body)
}

func (w *world) run() {
	w.t.Helper()
	if err := w.m.Sim.Run(); err != nil {
		w.t.Fatalf("simulation: %v", err)
	}
}

// do runs body as the only process.
func (w *world) do(body func(p *sim.Proc)) {
	w.t.Helper()
	w.spawn("main", body)
	w.run()
}

func (w *world) region(worker int, payload, counters uint64) *Region {
	w.t.Helper()
	r, err := w.h.CreateRegion(worker, payload, counters)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *world) queue(depth, in, out uint64) *Queue {
	w.t.Helper()
	q, err := w.h.CreateQueue(0, depth, in, out)
	if err != nil {
		w.t.Fatal(err)
	}
	return q
}

// endpoint builds the L2 side of q and fails the test unless it is live.
func (w *world) endpoint(q *Queue, window uint64) *QueueEndpoint {
	w.t.Helper()
	e := w.h.QueueEndpoint(q.Binding(), window)
	if !e.Live() {
		w.t.Fatalf("endpoint not live: %v", e.Err())
	}
	return e
}

// counterValue reads a counter of a region directly (no cost).
func counterValue(r *Region, off uint64) int32 {
	return int32(binary.LittleEndian.Uint32(r.Counters().Sub(int64(off), 4).Bytes()))
}

// setCounter writes a counter directly, bypassing the protocol (to forge
// corrupt states).
func setCounter(r *Region, off uint64, v int32) {
	binary.LittleEndian.PutUint32(r.Counters().Sub(int64(off), 4).Bytes(), uint32(v))
}

// putDesc forges a ring slot directly in memory.
func putDesc(r *Region, off uint64, d desc) {
	b := r.Payload().Sub(int64(off), DescriptorBytes).Bytes()
	le := binary.LittleEndian
	le.PutUint64(b[0:], d.seq)
	le.PutUint64(b[8:], d.opcode)
	le.PutUint64(b[16:], d.offset)
	le.PutUint64(b[24:], d.nbytes)
}

func getDesc(r *Region, off uint64) desc {
	return decodeDesc(r.Payload().Sub(int64(off), DescriptorBytes).Bytes())
}

// pattern is n deterministic bytes derived from tag.
func pattern(tag byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = tag + byte(i*7)
	}
	return b
}

func qkind(err error) QueueErrorKind {
	var qe *QueueError
	if errors.As(err, &qe) {
		return qe.Kind
	}
	return ""
}

func regionCode(err error) Code {
	var re *RegionError
	if errors.As(err, &re) {
		return re.Code
	}
	return ""
}

func isArgErr(err error) bool {
	var ae *ArgError
	return errors.As(err, &ae)
}

func isTimeout(err error) bool {
	var te *TimeoutError
	return errors.As(err, &te) && strings.Contains(err.Error(), "timed out")
}

// sameQueueErr reports whether got is exactly the sticky error of e (kind
// and op), failing the test otherwise.
func wantQueueErr(t *testing.T, got error, kind QueueErrorKind, op string) {
	t.Helper()
	var qe *QueueError
	if !errors.As(got, &qe) {
		t.Fatalf("got error %v, want a *QueueError %s/%s", got, kind, op)
	}
	if qe.Kind != kind || qe.Op != op {
		t.Fatalf("got %s/%s (%v), want %s/%s", qe.Kind, qe.Op, qe, kind, op)
	}
}

// hostDown is T(host -> chip 0 HBM, n) from the link parameters, written out
// independently of machine.Path.
func hostDown(n int64) sim.Time {
	p := testParams()
	lat := p.Pcie.Latency + p.PeNoc.Latency + p.Hbm.Latency
	bw := min(p.Pcie.BytesPerUs, p.PeNoc.BytesPerUs, p.Hbm.BytesPerUs)
	return lat + sim.Time((n*1_000_000+bw-1)/bw)
}

// localHBM is T(HBM port, n).
func localHBM(n int64) sim.Time {
	p := testParams()
	bw := p.Hbm.BytesPerUs
	return p.Hbm.Latency + sim.Time((n*1_000_000+bw-1)/bw)
}
