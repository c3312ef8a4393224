package l3l2

import (
	"encoding/binary"
	"fmt"
)

// Unfinished lists what an orchestration left behind when L3 main
// returned: messages L3 enqueued that L2 never released, messages L2
// published that L3 never released, and regions (queues included) L3 never
// freed. Each line names the region; none means a clean finish. A run
// whose L3 main returns with work still queued has silently dropped it,
// so the caller reports these (a warning, an error under --strict).
// Poisoned queues are not listed: their failure was reported already.
func (h *Hub) Unfinished() []string {
	var out []string
	inQueue := make(map[*regionState]bool, len(h.queues))
	for _, q := range h.queues {
		st := q.region.st
		inQueue[st] = true
		if q.state != QueueLive {
			continue
		}
		if c := counterBytes(st); c != nil {
			// Counters hold the low 32 bits of the monotonic values.
			if n := uint32(q.inTail) - c(InputDescHeadOffset); n > 0 {
				out = append(out, fmt.Sprintf("queue %d (worker %d): %d input message(s) enqueued by L3 were never released by L2", st.id, st.worker, n))
			}
			if n := c(OutputDescTailOffset) - uint32(q.outHead); n > 0 {
				out = append(out, fmt.Sprintf("queue %d (worker %d): %d output message(s) published by L2 were never released by L3", st.id, st.worker, n))
			}
		}
		out = append(out, fmt.Sprintf("queue %d (worker %d) was never freed (q.free())", st.id, st.worker))
	}
	for _, st := range h.regions {
		if !inQueue[st] && st.l3 != nil && st.l3.state == RegionLive {
			out = append(out, fmt.Sprintf("region %d (worker %d) was never freed (region.free())", st.id, st.worker))
		}
	}
	return out
}

// counterBytes reads a region's 32-bit counters without simulated cost, or
// is nil when the memory keeps no bytes (--timing-only).
func counterBytes(st *regionState) func(off uint64) uint32 {
	if st.counters.Mem == nil || st.counters.Mem.NoData() {
		return nil
	}
	b := st.counters.View()
	return func(off uint64) uint32 {
		if off+4 > uint64(len(b)) {
			return 0
		}
		return binary.LittleEndian.Uint32(b[off:])
	}
}

// UnseenPoison is the first failure that poisoned an L2 queue endpoint
// (set the abort flag) while L3 never learned of it: its queue ended LIVE
// or freed, not POISONED_*. The L2 call returned None/False, the function
// returned normally, and L3 never waited long enough to see the abort
// flag, so the run ended with exit 0 and nobody had seen the error. nil
// when there is none. Init and argument errors, which set no abort flag,
// and REMOTE_ABORTED are not counted.
func (h *Hub) UnseenPoison() error {
	for _, q := range h.queues {
		st := q.region.st
		e := st.endpoint
		if q.first != nil || e == nil || !e.aborted {
			// (q.first: L3 saw a poisoning error, even if it freed the
			// queue since.)
			continue
		}
		return &UnseenPoisonError{Queue: st.id, Worker: st.worker, Err: e.err}
	}
	return nil
}

// UnseenPoisonError is UnseenPoison's failure; its kind is the L2 error's.
type UnseenPoisonError struct {
	Queue  uint64
	Worker int
	Err    *QueueError
}

func (e *UnseenPoisonError) Error() string {
	return fmt.Sprintf("queue %d (worker %d): an L2 function poisoned its endpoint and returned, and L3 never saw it (its q.state was never POISONED_REMOTE: no blocking call waited past its timeout to read the abort flag): %v", e.Queue, e.Worker, e.Err)
}

func (e *UnseenPoisonError) Unwrap() error { return e.Err }
