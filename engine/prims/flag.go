package prims

import (
	"fmt"
	"kernbench/engine/sim"
	"unicode/utf8"
)

// Flag is a one-shot flag between the processes of one rank (a tl.event):
// one sets it once its work is in memory, the others wait until then.
type Flag struct {
	IsSet bool
	// SetAt is where it was set (a script position, for messages).
	SetAt   any
	waiters []*sim.Proc
}

// Wait parks p until the flag is set (at once when it is); meanwhile p
// waits on on, what a deadlock report names.
func (f *Flag) Wait(p *sim.Proc, on any) error {
	for !f.IsSet {
		f.waiters = append(f.waiters, p)
		p.Wait, p.WaitSince = on, p.Sim().Now()
		err := p.Park()
		p.Wait = nil
		if err != nil {
			return err
		}
	}
	return nil
}

// Set sets the flag (at) and wakes its waiters, in the order they began
// to wait.
func (f *Flag) Set(at any) {
	f.IsSet, f.SetAt = true, at
	for _, w := range f.waiters {
		w.Wake()
	}
	f.waiters = nil
}

// Event is a one-shot flag between the threads of one rank (tl.event):
// one thread sets it once its work is in memory, others wait until then.
// It is how a thread waits for a step of another thread (MSCCL's
// cross-thread-block dependencies) without joining it.
type Event struct {
	Rank int
	Name string
	Flag Flag
}

// maxEventName is the most of an event's name its description quotes.
const maxEventName = 100

func (e *Event) String() string {
	if e.Name == "" {
		return fmt.Sprintf("<event of rank %d>", e.Rank)
	}
	name := e.Name
	if len(name) > maxEventName {
		// A report quotes it for every waiter (a 10 MB name made a 20 MB
		// deadlock report and --json).
		n := maxEventName
		for n > 0 && !utf8.RuneStart(name[n]) {
			n--
		}
		return fmt.Sprintf("<event %q... (%d more bytes) of rank %d>", name[:n], len(name)-n, e.Rank)
	}
	return fmt.Sprintf("<event %q of rank %d>", name, e.Rank)
}

func (k *Kernel) checkEvent(fn string, e *Event) error {
	if e.Rank != k.Rank {
		return fmt.Errorf("%s: %v belongs to rank %d, not rank %d (events synchronise the threads of one rank)", fn, e, e.Rank, k.Rank)
	}
	return nil
}

// WaitEvent blocks until e is set; meanwhile the process waits on on
// (what deadlock reports show).
func (k *Kernel) WaitEvent(fn string, e *Event, on any) error {
	if err := k.checkEvent(fn, e); err != nil {
		return err
	}
	return e.Flag.Wait(k.Proc, on)
}

// SignalEvent sets e (at) after this thread's stores are in memory (a
// thread that waits for e may read what this one wrote) and wakes its
// waiters. The sources of this thread's sends may still be in flight.
func (k *Kernel) SignalEvent(fn string, e *Event, at any) error {
	if err := k.checkEvent(fn, e); err != nil {
		return err
	}
	if e.Flag.IsSet {
		return fmt.Errorf("%s: %v was already signalled at %v (an event is set once)", fn, e, e.Flag.SetAt)
	}
	if err := k.DrainWrites(); err != nil {
		return err
	}
	e.Flag.Set(at)
	return nil
}
