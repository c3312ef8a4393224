package sim

import "testing"

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
// events interleaved in the heap (the shape of a 64-rank simulation).
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
	b.ReportMetric(float64(s.Events())/b.Elapsed().Seconds(), "events/s")
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
