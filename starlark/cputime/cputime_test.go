package cputime

import (
	"testing"
	"time"
)

// A value that is there is taken whatever the limit; a goroutine that
// spins and never sends passes the limit, however loaded the machine (it
// spins until Await gives up, so only the CPU time it gets counts).
func TestAwait(t *testing.T) {
	ready := make(chan int, 1)
	ready <- 7
	if v, ok := Await(ready, 0); v != 7 || !ok {
		t.Errorf("Await(a ready channel) = %d, %v; want 7, true", v, ok)
	}
	if _, ok := Process(); !ok {
		t.Skip("no CPU clock here")
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	before, _ := Process()
	if _, ok := Await(make(chan int), 50*time.Millisecond); ok {
		t.Error("Await returned a value from a channel nobody sends on")
	}
	if after, _ := Process(); after-before <= 50*time.Millisecond {
		t.Errorf("Await gave up after %v of CPU, want more than 50ms", after-before)
	}
}
