package prims

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
)

// Waiters of a flag park, waiting on what the caller names, until it is
// set, and resume at the time it is set in the order they began to wait;
// a wait on a set flag returns at once.
func TestFlag_WaitAndSet(t *testing.T) {
	tests := []struct {
		name    string
		waiters []sim.Time // when each waiter begins to wait
		setAt   sim.Time
		want    []string
	}{
		{"no waiter", nil, 5, []string{"set 5"}},
		{"two waiters before", []sim.Time{1, 2}, 5, []string{"set 5", "w0 5", "w1 5"}},
		{"a waiter after", []sim.Time{1, 7}, 5, []string{"set 5", "w0 5", "w1 7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sim.New()
			var f Flag
			var got []string
			note := func(what string) { got = append(got, fmt.Sprint(what, " ", int64(s.Now()))) }
			on := "the event"
			for i, at := range tt.waiters {
				name := "w" + string(rune('0'+i))
				s.Spawn(name, func(p *sim.Proc) {
					_ = p.Sleep(at)
					if err := f.Wait(p, on); err != nil {
						t.Error(err)
					}
					if p.Wait != nil {
						t.Errorf("%s still waits after Wait", name)
					}
					note(name)
				})
			}
			s.Spawn("setter", func(p *sim.Proc) {
				_ = p.Sleep(tt.setAt)
				waiting := 0
				for _, q := range s.Blocked() {
					if q.Wait == on {
						waiting++
					}
				}
				if want := len(tt.want) - 1 - late(tt.waiters, tt.setAt); waiting != want {
					t.Errorf("%d processes wait on the flag as it is set, want %d", waiting, want)
				}
				f.Set("here")
				note("set")
			})
			if err := s.Run(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if !f.IsSet || f.SetAt != "here" {
				t.Errorf("flag %v set at %v after Set", f.IsSet, f.SetAt)
			}
		})
	}
}

// late counts the waiters that begin to wait after the flag is set.
func late(waiters []sim.Time, setAt sim.Time) int {
	n := 0
	for _, at := range waiters {
		if at > setAt {
			n++
		}
	}
	return n
}
