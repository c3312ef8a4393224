package prims

import (
	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// Send is a buffer send in progress whose source other operations of the
// rank must not write yet: an asynchronous send, issued by a process of
// its own message by message as credits allow, or a blocking send of a
// kernel with threads (another thread could write the part not sent yet).
type Send struct {
	Q *machine.QueuePair
	// Unissued is the part of the source not sent yet; Rest is what it
	// becomes once the message being sent is queued (Posted).
	Unissued, Rest machine.Region
	// Origin is where the send was issued (a script position).
	Origin any
	// Blocking: a send its kernel waits for (no handle to wait).
	Blocking bool
	Done     bool
	Err      error
	// Waiter is the process joining the send, woken when it is done.
	Waiter *sim.Proc
}

// Posted notes that the message being sent is queued (machine.Poster):
// the part of the source still unissued is noted then, not when the
// send's overhead has passed, for by then a peer may have taken the
// message and sent back what it was waiting for (a write into the
// message's range that is no hazard).
func (s *Send) Posted() { s.Unissued = s.Rest }

// Join parks p, which then waits on the send side of s.Q, until s is done
// (its last message issued), and returns the send's error.
func (s *Send) Join(p *sim.Proc) error {
	for !s.Done {
		s.Waiter = p
		p.Wait, p.WaitSince = &s.Q.SendWait, p.Sim().Now()
		err := p.Park()
		p.Wait = nil
		if err != nil {
			return err
		}
	}
	return s.Err
}

// IssuingSends are a rank's sends, from any of its threads, that may not
// have issued every message yet: their unsent sources must not be written
// (SendBufferHazard). (A slice type: a write checks its length, inlined,
// before any call.)
type IssuingSends []*Send

// Hit forgets the sends that are done and returns the first other one
// whose unsent part overlaps dst, or nil.
func (is *IssuingSends) Hit(dst machine.Region) *Send {
	live := (*is)[:0]
	var hit *Send
	for _, s := range *is {
		if s.Done {
			continue
		}
		live = append(live, s)
		if hit == nil && s.Unissued.N > 0 && s.Unissued.Overlaps(dst) {
			hit = s
		}
	}
	clear((*is)[len(live):])
	*is = live
	return hit
}
