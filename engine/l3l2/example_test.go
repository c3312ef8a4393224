package l3l2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
)

const (
	exTile    = 128 * 128
	exHdr     = 64
	exTimeout = 5 * sim.Millisecond
)

func exTileOf(b float32) []float32 {
	t := make([]float32, exTile)
	for i := range t {
		t[i] = b + float32(i%128)
	}
	return t
}

func exMsg(hdr []uint64, tile []float32) []byte {
	out := make([]byte, exHdr+4*len(tile))
	for i, v := range hdr {
		binary.LittleEndian.PutUint64(out[8*i:], v)
	}
	for i, v := range tile {
		binary.LittleEndian.PutUint32(out[exHdr+4*i:], math.Float32bits(v))
	}
	return out
}

func exTileAt(b []byte) []float32 {
	t := make([]float32, (len(b)-exHdr)/4)
	for i := range t {
		t[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[exHdr+4*i:]))
	}
	return t
}

func exMap(t []float32, f func(i int, v float32) float32) []float32 {
	out := make([]float32, len(t))
	for i, v := range t {
		out[i] = f(i, v)
	}
	return out
}

// Rule (docs/l3l2.md, The shipped benches): depth 8, 512 KiB
// arenas, L2 window 4; L2 holds mode-1 input, answers mode 2 first,
// releases out of order (the physical head stays), emits two outputs for
// one input, holds mode-3 inputs, combines them when STOP arrives, and
// returns only after drained(). L3 checks every output byte for byte. The
// PE kernels are played by Go arithmetic on the live views.
func TestQueue_ShippedExample(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(8, 512<<10, 512<<10)
	var got []string
	var l2log []string
	w.spawn("l3", func(p *sim.Proc) {
		expect := func(hdr []uint64, tile []float32) {
			m, b, err := q.Output.Dequeue(p, exTimeout)
			if err != nil {
				t.Fatalf("dequeue: %v", err)
			}
			if want := exMsg(hdr, tile); !bytes.Equal(b, want) {
				t.Errorf("output %v: bytes differ (seq %d)", hdr, m.Seq)
			}
			got = append(got, fmt.Sprint(hdr))
		}
		send := func(id, mode uint64, base float32) {
			if err := q.Input.Enqueue(p, exMsg([]uint64{id, mode}, exTileOf(base)), OpData, exTimeout); err != nil {
				t.Fatalf("enqueue %d: %v", id, err)
			}
		}
		send(101, 1, 1)
		send(102, 2, 100)
		expect([]uint64{102, 20, 0}, exMap(exTileOf(100), func(_ int, v float32) float32 { return v + 20 }))
		expect([]uint64{101, 10, 0}, exMap(exTileOf(1), func(_ int, v float32) float32 { return v + 10 }))
		expect([]uint64{101, 11, 0}, exMap(exTileOf(1), func(_ int, v float32) float32 { return v + 11 }))
		send(103, 3, 1000)
		send(104, 3, 2000)
		if err := q.RequestStop(p, exTimeout); err != nil {
			t.Fatalf("request_stop: %v", err)
		}
		t2 := exTileOf(2000)
		expect([]uint64{103, 30, 104}, exMap(exTileOf(1000), func(i int, v float32) float32 { return v + t2[i] }))
		q.Free()
	})
	w.spawn("l2", func(p *sim.Proc) {
		s, _ := q.ChipTaskArgScalars()
		b, err := DecodeBinding(s)
		if err != nil {
			t.Fatal(err)
		}
		e := w.h.QueueEndpoint(b, 4)
		if !e.Live() {
			t.Fatal(e.Err())
		}
		in, out := e.Input(), e.Output()
		publish := func(hdr []uint64, tile []float32) {
			r, err := out.Reserve(p, uint64(exHdr+4*len(tile)), exTimeout)
			if err != nil || r == nil {
				t.Fatalf("reserve: %v", err)
			}
			v, _ := out.View(r) // the kernel writes the tile straight into the arena
			_ = p.Sleep(sim.Microsecond)
			copy(v.Bytes()[exHdr:], exMsg(nil, tile)[exHdr:])
			hb := make([]byte, exHdr) // zero padded
			for i, x := range hdr {
				binary.LittleEndian.PutUint64(hb[8*i:], x)
			}
			if err := out.Write(p, r, hb, 0); err != nil {
				t.Fatal(err)
			}
			if err := out.Publish(p, r, OpData); err != nil {
				t.Fatal(err)
			}
		}
		head := func() int32 { return counterValue(q.Region(), InputDescHeadOffset) }
		var held, mode3 []*InputHandle
		for {
			h, err := in.Peek(p, exTimeout)
			if err != nil || h == nil {
				t.Fatalf("peek: %v %v", h, err)
			}
			if h.Opcode == OpStop {
				a, _ := in.View(mode3[0])
				c, _ := in.View(mode3[1])
				ta, tc := exTileAt(a.Bytes()), exTileAt(c.Bytes())
				id := func(v []byte) uint64 { return binary.LittleEndian.Uint64(v) }
				publish([]uint64{id(a.Bytes()), 30, id(c.Bytes())}, exMap(ta, func(i int, v float32) float32 { return v + tc[i] }))
				for _, x := range append(mode3, h) {
					_ = in.Release(p, x)
					l2log = append(l2log, fmt.Sprintf("release %d head=%d drained=%v", x.Seq, head(), in.Drained()))
				}
				if !in.Drained() || !e.Live() {
					t.Errorf("not drained at return: %v", e.Err())
				}
				return
			}
			v, _ := in.View(h)
			hdr := v.Bytes()
			id, mode := binary.LittleEndian.Uint64(hdr), binary.LittleEndian.Uint64(hdr[8:])
			tile := exTileAt(v.Bytes())
			switch mode {
			case 1:
				held = append(held, h)
			case 2:
				publish([]uint64{id, 20, 0}, exMap(tile, func(_ int, x float32) float32 { return x + 20 }))
				_ = in.Release(p, h) // 102 before 101: the head must not move
				l2log = append(l2log, fmt.Sprintf("release %d head=%d", h.Seq, head()))
				first := held[0]
				fv, _ := in.View(first)
				ft := exTileAt(fv.Bytes())
				fid := binary.LittleEndian.Uint64(fv.Bytes())
				publish([]uint64{fid, 10, 0}, exMap(ft, func(_ int, x float32) float32 { return x + 10 }))
				publish([]uint64{fid, 11, 0}, exMap(ft, func(_ int, x float32) float32 { return x + 11 }))
				_ = in.Release(p, first)
				l2log = append(l2log, fmt.Sprintf("release %d head=%d", first.Seq, head()))
				held = nil
			case 3:
				mode3 = append(mode3, h)
			}
		}
	})
	w.run()
	wantOut := []string{"[102 20 0]", "[101 10 0]", "[101 11 0]", "[103 30 104]"}
	if diff := cmp.Diff(wantOut, got); diff != "" {
		t.Errorf("L3 outputs (-want +got):\n%s", diff)
	}
	wantL2 := []string{"release 2 head=0", "release 1 head=2",
		"release 3 head=3 drained=false", "release 4 head=4 drained=false", "release 5 head=5 drained=true"}
	if diff := cmp.Diff(wantL2, l2log); diff != "" {
		t.Errorf("L2 releases (-want +got):\n%s", diff)
	}
	if w.h.ReleaseFreed() != 1 {
		t.Error("the freed queue's region was not released")
	}
}
