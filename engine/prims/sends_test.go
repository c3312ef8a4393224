package prims

import (
	"testing"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// A write hits the first send still issuing whose unsent part it
// overlaps; the sends that are done are forgotten on the way, and a send
// forgets the part of its source that a queued message took (Posted).
func TestIssuingSends_Hit(t *testing.T) {
	mem := &machine.Memory{}
	reg := func(off, n int64) machine.Region { return machine.Region{Mem: mem, Off: off, N: n} }
	tests := []struct {
		name  string
		sends []Send
		dst   machine.Region
		hit   int // index of the send hit, -1: none
		live  int // sends left
	}{
		{"no send", nil, reg(0, 8), -1, 0},
		{"over an unsent part", []Send{{Unissued: reg(0, 64)}}, reg(32, 8), 0, 1},
		{"beside it", []Send{{Unissued: reg(0, 64)}}, reg(64, 8), -1, 1},
		{"over a done send", []Send{{Unissued: reg(0, 64), Done: true}}, reg(0, 8), -1, 0},
		{"all sent", []Send{{Unissued: reg(0, 0)}}, reg(0, 8), -1, 1},
		{"the first of two", []Send{{Unissued: reg(100, 64), Done: true}, {Unissued: reg(0, 64)}, {Unissued: reg(16, 64)}}, reg(20, 8), 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var is IssuingSends
			for i := range tt.sends {
				is = append(is, &tt.sends[i])
			}
			got := is.Hit(tt.dst)
			want := (*Send)(nil)
			if tt.hit >= 0 {
				want = &tt.sends[tt.hit]
			}
			if got != want {
				t.Errorf("Hit = %p, want %p", got, want)
			}
			if len(is) != tt.live {
				t.Errorf("%d sends left, want %d", len(is), tt.live)
			}
		})
	}
	s := Send{Unissued: reg(0, 64), Rest: reg(32, 32)}
	s.Posted()
	if s.Unissued != reg(32, 32) {
		t.Errorf("after Posted the unsent part is %v, want %v", s.Unissued, reg(32, 32))
	}
}

// Join returns at once for a send that is done, else parks the process,
// waiting on the send side, until the send's process wakes it.
func TestSend_Join(t *testing.T) {
	for _, done := range []bool{true, false} {
		s := sim.New()
		send := &Send{Q: &machine.QueuePair{}, Done: done}
		var joined sim.Time = -1
		kernel := s.Spawn("kernel", func(p *sim.Proc) {
			if err := send.Join(p); err != nil {
				t.Error(err)
			}
			if p.Wait != nil {
				t.Error("the process still waits after Join")
			}
			joined = s.Now()
		})
		s.Spawn("sender", func(p *sim.Proc) {
			_ = p.Sleep(5 * sim.Nanosecond)
			if !done {
				if kernel.Wait != &send.Q.SendWait {
					t.Errorf("the joining process waits on %v, want the send side", kernel.Wait)
				}
			}
			send.Done = true
			if w := send.Waiter; w != nil {
				send.Waiter = nil
				w.Wake()
			}
		})
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		want := sim.Time(0)
		if !done {
			want = 5 * sim.Nanosecond
		}
		if joined != want {
			t.Errorf("done=%v: joined at %v, want %v", done, joined, want)
		}
	}
}
