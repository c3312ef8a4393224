package machine

import (
	"fmt"
	"testing"

	"kernbench/engine/sim"
)

// BenchmarkIPCQRing64 is the engine's share of a ring collective: 64 ranks
// on 2 SIPs, each sending messages E and receiving from W through the full
// IPCQ path (backpressure, DMA vc_comm, delivery, credits), with Go
// processes instead of Starlark kernels. It reports simulated IPCQ messages
// per second of wall time and allocations per message.
func BenchmarkIPCQRing64(b *testing.B) {
	const ranks = 64
	const msgBytes = 256
	s := sim.New()
	p := testParams()
	p.Sips = 2
	p.CubesPerSip = 4
	p.PesPerCube = 8
	m, err := New(s, p)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Place(ranks); err != nil {
		b.Fatal(err)
	}
	links := make([][]Link, ranks)
	for r := range links {
		links[r] = []Link{{Dir: "E", Peer: (r + 1) % ranks, PeerDir: "W"}, {Dir: "W", Peer: (r + ranks - 1) % ranks, PeerDir: "E"}}
	}
	g, err := m.Install(links, IPCQConfig{BufferKind: TCM, Backpressure: Sleep, NSlots: 8, SlotSize: 4096, CreditBytes: 16, Overhead: 2 * sim.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	per := b.N/ranks + 1
	for r := 0; r < ranks; r++ {
		ep := g.EPs[r]
		off, _ := ep.PE.TCM.Alloc(msgBytes)
		src := Region{ep.PE.TCM, off, msgBytes}
		east, west := ep.QP("E"), ep.QP("W")
		s.Spawn(fmt.Sprintf("rank %d", r), func(proc *sim.Proc) {
			sent := 0
			for i := 0; i < per; i++ {
				// Keep up to n_slots in flight: send ahead, then receive.
				for sent < per && sent < i+8 {
					if err := g.Send(proc, east, src, MsgMeta{}); err != nil {
						return
					}
					sent++
				}
				if err := g.WaitRecv(proc, west); err != nil {
					return
				}
				g.Take(west, true)
			}
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := s.Run(); err != nil {
		b.Fatal(err)
	}
	msgs := float64(ranks * per)
	// Messages per op: with go test's ns/op, the time per message, without
	// the benchmark reading the clock itself.
	b.ReportMetric(msgs/float64(b.N), "msgs/op")
	b.ReportMetric(float64(s.Events())/msgs, "events/msg")
}
