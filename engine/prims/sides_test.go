package prims

import (
	"testing"

	"kernbench/engine/machine"
)

// A side is one thread's at a time; the same thread's uses nest, and a
// side is free again once each use has been released (twice releasing
// one use counts once).
func TestSides_OneThreadAtATime(t *testing.T) {
	q1, q2 := &machine.QueuePair{Dir: "right"}, &machine.QueuePair{Dir: "left"}
	type use struct {
		q       *machine.QueuePair
		send    bool
		by      int
		release []int // the uses (by index) released before this one
		holder  int   // the thread refused by (0: taken)
	}
	tests := []struct {
		name string
		uses []use
	}{
		{"another thread on the same side", []use{{q: q1, send: true, by: 1}, {q: q1, send: true, by: 2, holder: 1}}},
		{"the other side of the same pair", []use{{q: q1, send: true, by: 1}, {q: q1, send: false, by: 2}}},
		{"another pair", []use{{q: q1, send: true, by: 1}, {q: q2, send: true, by: 2}}},
		{"released", []use{{q: q1, send: true, by: 1}, {q: q1, send: true, by: 2, release: []int{0}}}},
		{"nested uses, one released", []use{{q: q1, by: 1}, {q: q1, by: 1}, {q: q1, by: 2, release: []int{0, 0}, holder: 1}}},
		{"nested uses, both released", []use{{q: q1, by: 1}, {q: q1, by: 1}, {q: q1, by: 2, release: []int{0, 1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Sides
			releases := make([]func(), len(tt.uses))
			for i, u := range tt.uses {
				for _, r := range u.release {
					releases[r]()
				}
				release, other := s.Use(u.q, u.send, u.by, "op", nil)
				got := 0
				if other != nil {
					got = other.By.(int)
				}
				if got != u.holder {
					t.Fatalf("use %d: refused by thread %d, want %d", i, got, u.holder)
				}
				if (release == nil) != (other != nil) {
					t.Fatalf("use %d: release %v with holder %v", i, release != nil, other)
				}
				releases[i] = release
			}
		})
	}
}

// A write conflicts with the operands other threads' primitives read, not
// with the writer's own, and no longer once the read is done.
func TestOperandReads_Conflict(t *testing.T) {
	mem := &machine.Memory{}
	var rs OperandReads
	done := rs.Add(1, machine.Region{Mem: mem, Off: 0, N: 64}, "tl.recv_reduce_send", nil)
	tests := []struct {
		by   int
		dst  machine.Region
		want bool
	}{
		{2, machine.Region{Mem: mem, Off: 32, N: 8}, true},
		{1, machine.Region{Mem: mem, Off: 32, N: 8}, false},
		{2, machine.Region{Mem: mem, Off: 64, N: 8}, false},
	}
	for _, tt := range tests {
		if got := rs.Conflict(tt.by, tt.dst) != nil; got != tt.want {
			t.Errorf("thread %d writing %v: conflict %v, want %v", tt.by, tt.dst, got, tt.want)
		}
	}
	done()
	if rs.Any() || rs.Conflict(2, machine.Region{Mem: mem, Off: 0, N: 8}) != nil {
		t.Error("a finished read still conflicts")
	}
}
