package sim

import (
	"fmt"
	"testing"
)

type countHandler struct {
	s    *Sim
	left int
}

func (c *countHandler) Fire() {
	if c.left > 0 {
		c.left--
		c.s.After(Nanosecond, c)
	}
}

// BenchmarkEventLoop measures schedule+fire of one event with 64 chains of
// events interleaved in the queue (the shape of a 64-rank simulation).
func BenchmarkEventLoop(b *testing.B) {
	s := New()
	hs := make([]*countHandler, 64)
	per := b.N/64 + 1
	for i := range hs {
		hs[i] = &countHandler{s: s, left: per}
		s.At(Time(i), hs[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := s.Run(); err != nil {
		b.Fatal(err)
	}
	// Events per op (about 1): with go test's ns/op, the time per event,
	// without the benchmark reading the clock itself.
	b.ReportMetric(float64(s.Events())/float64(b.N), "events/op")
}

// BenchmarkProcSwitch measures a process sleeping on the event queue (one
// coroutine switch per sleep) while another process keeps the queue busy.
func BenchmarkProcSwitch(b *testing.B) {
	s := New()
	for i := 0; i < 2; i++ {
		s.Spawn("p", func(p *Proc) {
			for j := 0; j < b.N/2+1; j++ {
				if err := p.Sleep(Nanosecond); err != nil {
					return
				}
			}
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := s.Run(); err != nil {
		b.Fatal(err)
	}
}

type spreadHandler struct {
	s     *Sim
	left  int
	state uint64
}

func (c *spreadHandler) Fire() {
	if c.left > 0 {
		c.left--
		c.state = c.state*6364136223846793005 + 1442695040888963407
		c.s.After(Time(1+c.state>>33%100000), c)
	}
}

// BenchmarkEventSpread measures schedule+fire with n chains of events at
// pseudo-random delays up to 100 ns: nearly every event makes a new
// pending time, and with n in the thousands most of them overflow the
// sorted array into the far heap.
func BenchmarkEventSpread(b *testing.B) {
	for _, n := range []int{64, 1000, 16000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			s := New()
			per := b.N/n + 1
			for i := 0; i < n; i++ {
				s.At(Time(i), &spreadHandler{s: s, left: per, state: uint64(i)})
			}
			b.ResetTimer()
			if err := s.Run(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// hopHandler is a chain of events that moves to the next partition every
// 16th event, as a message the lookahead later.
type hopHandler struct {
	g    *Partitioned
	part int
	left int
}

func (h *hopHandler) Fire() {
	if h.left == 0 {
		return
	}
	h.left--
	p := h.g.Partition(h.part)
	if h.left%16 != 0 {
		p.Sim.After(Nanosecond, h)
		return
	}
	h.part = (h.part + 1) % len(h.g.Partitions())
	p.Send(h.part, p.Sim.Now()+h.g.Lookahead(), h)
}

// BenchmarkPartitioned measures an event of 8 partitions of 64 chains
// each, a sixteenth of them messages, with windows of 500 ns (the
// lookahead of two PCIe links), on K goroutines: the loop's cost per
// event against BenchmarkEventLoop's, and what the barriers cost.
func BenchmarkPartitioned(b *testing.B) {
	for _, k := range []int{1, 2} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			const parts, chains = 8, 64
			g, err := NewPartitioned(parts, 500*Nanosecond)
			if err != nil {
				b.Fatal(err)
			}
			if err := g.SetThreads(k); err != nil {
				b.Fatal(err)
			}
			per := b.N/(parts*chains) + 1
			for _, p := range g.Partitions() {
				for i := range chains {
					p.Sim.At(Time(i), &hopHandler{g: g, part: p.ID, left: per})
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := g.Run(); err != nil {
				b.Fatal(err)
			}
			// Counts only: ns/op, divided by these, is the time per event
			// or per window (the benchmark reads no clock of its own).
			b.ReportMetric(float64(g.Events())/float64(b.N), "events/op")
			b.ReportMetric(float64(g.Events())/float64(max(g.Windows(), 1)), "events/window")
		})
	}
}

// pingHandler crosses to the other partition at every event.
type pingHandler struct {
	g    *Partitioned
	part int
	left int
}

func (h *pingHandler) Fire() {
	if h.left == 0 {
		return
	}
	h.left--
	p := h.g.Partition(h.part)
	h.part = 1 - h.part
	p.Send(h.part, p.Sim.Now()+h.g.Lookahead(), h)
}

// BenchmarkPartitionedBarrier measures a window with nearly nothing in
// it (two partitions, one event each per window): the cost of a barrier
// on K goroutines, the scaling model's fixed cost per window.
func BenchmarkPartitionedBarrier(b *testing.B) {
	for _, k := range []int{1, 2} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			g, err := NewPartitioned(2, 500*Nanosecond)
			if err != nil {
				b.Fatal(err)
			}
			if err := g.SetThreads(k); err != nil {
				b.Fatal(err)
			}
			g.Partition(0).Sim.At(0, &pingHandler{g: g, part: 0, left: b.N})
			g.Partition(1).Sim.At(0, &pingHandler{g: g, part: 1, left: b.N})
			b.ReportAllocs()
			b.ResetTimer()
			if err := g.Run(); err != nil {
				b.Fatal(err)
			}
			// ns/op over windows/op is a window's cost (a count, not a
			// clock read here).
			b.ReportMetric(float64(g.Windows())/float64(b.N), "windows/op")
		})
	}
}
