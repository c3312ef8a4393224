package l3l2

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
)

// Issue 13 (5): an input view used after its handle was released shows
// later messages; it is a stale-view error (OWNERSHIP, input.view) instead.
func TestQueue_InputViewStaleAfterRelease(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(2, 64, 64)
	e := w.endpoint(q, 1)
	for _, tag := range []byte{'A', 'C'} {
		if ok, err := q.Input.TryEnqueue(nil, bytes.Repeat([]byte{tag}, 4), OpData); !ok || err != nil {
			t.Fatalf("enqueue %c: %v %v", tag, ok, err)
		}
	}
	h, _ := e.Input().TryPeek(nil)
	if err := e.Input().ViewStale(h); err != nil {
		t.Fatalf("active handle: %v", err)
	}
	if err := e.Input().Release(nil, h); err != nil {
		t.Fatal(err)
	}
	wantQueueErr(t, e.Input().ViewStale(h), QueueOwnership, OpInputView)
	if !e.Live() {
		t.Error("a stale view poisoned the endpoint")
	}
}

// Issue 13 (5): writing through a reservation's view after publish would
// change what L3 receives: the view is stale (OWNERSHIP, output.view).
func TestQueue_OutputViewStaleAfterPublish(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(2, 64, 64)
	e := w.endpoint(q, 1)
	r, err := e.Output().TryReserve(nil, 4)
	if r == nil || err != nil {
		t.Fatalf("reserve: %v %v", r, err)
	}
	if err := e.Output().ViewStale(r); err != nil {
		t.Fatalf("active reservation: %v", err)
	}
	w.do(func(p *sim.Proc) {
		if err := e.Output().Publish(p, r, OpData); err != nil {
			t.Error(err)
		}
	})
	wantQueueErr(t, e.Output().ViewStale(r), QueueOwnership, OpOutputView)
}

// Issue 13 (5): two endpoints on one binding were both live; the second is
// OWNERSHIP at init (no abort flag). Once the first is dead, a new one may
// take over.
func TestQueue_SecondEndpointIsOwnership(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(2, 64, 64)
	first := w.endpoint(q, 1)
	second := w.h.QueueEndpoint(q.Binding(), 1)
	if second.Live() {
		t.Fatal("second endpoint on a live binding is live")
	}
	wantQueueErr(t, second.Err(), QueueOwnership, OpInit)
	if !first.Live() || counterValue(q.Region(), PeerAbortOffset) != 0 {
		t.Error("the refused endpoint hurt the first one or set the abort flag")
	}
}

// Issue 13 (5): a blocking reserve larger than the whole arena returned None
// with error kind NONE, like backpressure; it is BAD_ARGUMENT. try_reserve
// keeps its plain no-progress (docs/l3l2.md, L2: the endpoint).
func TestQueue_ReserveLargerThanArena(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(2, 64, 64)
	e := w.endpoint(q, 1)
	w.do(func(p *sim.Proc) {
		r, err := e.Output().Reserve(p, 1<<40, sim.Microsecond)
		if r != nil {
			t.Errorf("reservation %v", r)
		}
		wantQueueErr(t, err, QueueBadArgument, "output.reserve")
	})
	if counterValue(q.Region(), PeerAbortOffset) != 0 {
		t.Error("BAD_ARGUMENT set the abort flag")
	}
}

// Issue 13 (5): what L3 main leaves behind is listed (messages queued in
// either direction, queues and regions never freed); a clean finish lists
// nothing.
func TestHub_Unfinished(t *testing.T) {
	w := newWorld(t, Options{})
	q := w.queue(4, 64, 64)
	e := w.endpoint(q, 2)
	_, _ = q.Input.TryEnqueue(nil, []byte("AAAA"), OpData)
	_, _ = q.Input.TryEnqueue(nil, []byte("BBBB"), OpData)
	w.region(0, 64, 64)
	w.do(func(p *sim.Proc) {
		h, _ := e.Input().TryPeek(p)
		if err := e.Input().Release(p, h); err != nil {
			t.Error(err)
		}
		r, _ := e.Output().TryReserve(p, 4)
		if err := e.Output().Publish(p, r, OpData); err != nil {
			t.Error(err)
		}
	})
	got := w.h.Unfinished()
	want := []string{
		"queue 1 (worker 0): 1 input message(s) enqueued by L3 were never released by L2",
		"queue 1 (worker 0): 1 output message(s) published by L2 were never released by L3",
		"queue 1 (worker 0) was never freed (q.free())",
		"region 2 (worker 0) was never freed (region.free())",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Unfinished (-want +got):\n%s", diff)
	}
	w.h.ReleaseAll()
	if got := w.h.Unfinished(); len(got) != 0 {
		t.Errorf("after ReleaseAll: %q", got)
	}
}

// Issue 13 (5), property: in random sequences of peek, view use and release
// (legal and not), an input view either is valid and shows its own
// message's bytes, or is a stale-view error; never another message's data.
func TestQueue_InputViewsNeverShowOtherMessages(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		w := newWorld(t, Options{})
		q := w.queue(4, 256, 64)
		e := w.endpoint(q, 4)
		type held struct {
			h    *InputHandle
			want []byte
		}
		var live, released []held
		next := byte(0)
		sent := map[uint64][]byte{}
		for step := 0; step < 60; step++ {
			switch rng.IntN(4) {
			case 0: // L3 enqueues
				msg := pattern(next, 1+rng.IntN(40))
				if ok, _ := q.Input.TryEnqueue(nil, msg, OpData); ok {
					sent[q.inTail] = msg
					next++
				}
			case 1: // L2 peeks
				if h, err := e.Input().TryPeek(nil); err == nil && h != nil {
					live = append(live, held{h, sent[h.Seq]})
				}
			case 2: // L2 releases a live handle
				if len(live) > 0 {
					i := rng.IntN(len(live))
					if err := e.Input().Release(nil, live[i].h); err != nil {
						t.Fatalf("seed %d: release: %v", seed, err)
					}
					released = append(released, live[i])
					live = append(live[:i], live[i+1:]...)
				}
			case 3: // nothing: the views are checked again as they are
			}
			for _, x := range live {
				reg, err := e.Input().View(x.h)
				if err != nil || e.Input().ViewStale(x.h) != nil {
					t.Fatalf("seed %d: live view: %v", seed, err)
				}
				if !bytes.Equal(reg.Bytes(), x.want) {
					t.Fatalf("seed %d: live view shows %x, want %x", seed, reg.Bytes(), x.want)
				}
			}
			for _, x := range released {
				if qkind(e.Input().ViewStale(x.h)) != QueueOwnership {
					t.Fatalf("seed %d: released handle seq %d: view not stale", seed, x.h.Seq)
				}
			}
		}
	}
}

// Issue 13 (5), property: in random sequences of reserve, write and
// publish (legal and not) and L3 dequeues, a reservation view is usable
// exactly while its reservation is active, and every message L3 receives
// holds what was written before its publish.
func TestQueue_OutputViewsNeverChangeSentMessages(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		w := newWorld(t, Options{})
		q := w.queue(4, 64, 256)
		e := w.endpoint(q, 1)
		var active *Reservation
		var published []*Reservation
		want := map[uint64][]byte{} // seq -> bytes at publish
		next := byte(0)
		w.do(func(p *sim.Proc) {
			for step := 0; step < 60 && e.Live(); step++ {
				switch rng.IntN(4) {
				case 0:
					if active == nil {
						if r, err := e.Output().TryReserve(p, uint64(1+rng.IntN(40))); err == nil && r != nil {
							active = r
						}
					}
				case 1:
					if active != nil {
						data := pattern(next, int(active.NBytes))
						next++
						if err := e.Output().Write(p, active, data, 0); err != nil {
							t.Fatalf("seed %d: write: %v", seed, err)
						}
					}
				case 2:
					if active != nil {
						reg, _ := e.Output().View(active)
						want[active.Seq] = append([]byte(nil), reg.Bytes()...)
						if err := e.Output().Publish(p, active, OpData); err != nil {
							t.Fatalf("seed %d: publish: %v", seed, err)
						}
						published = append(published, active)
						active = nil
					}
				case 3:
					m, got, err := q.Output.TryDequeue(p)
					if err != nil {
						t.Fatalf("seed %d: dequeue: %v", seed, err)
					}
					if m != nil && !bytes.Equal(got, want[m.Seq]) {
						t.Fatalf("seed %d: message %d is %x, published %x", seed, m.Seq, got, want[m.Seq])
					}
				}
				if active != nil && e.Output().ViewStale(active) != nil {
					t.Fatalf("seed %d: active reservation's view is stale", seed)
				}
				for _, r := range published {
					if qkind(e.Output().ViewStale(r)) != QueueOwnership {
						t.Fatalf("seed %d: published reservation %d: view not stale", seed, r.Seq)
					}
				}
			}
		})
	}
}
