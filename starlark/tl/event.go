package tl

import (
	"fmt"
	"unicode/utf8"

	"go.starlark.net/starlark"

	"kernbench/engine/prims"
)

// Event is a one-shot flag between the threads of one rank (tl.event): one
// thread sets it with tl.signal once its work is in memory, others block
// in tl.wait until then. It is how a thread waits for a step of another
// thread (MSCCL's cross-thread-block dependencies) without joining it.
type Event struct {
	rank int
	name string
	flag prims.Flag
}

func (e *Event) String() string {
	if e.name == "" {
		return fmt.Sprintf("<event of rank %d>", e.rank)
	}
	name := e.name
	if len(name) > maxEventName {
		// A report quotes it for every waiter (a 10 MB name made a 20 MB
		// deadlock report and --json).
		n := maxEventName
		for n > 0 && !utf8.RuneStart(name[n]) {
			n--
		}
		return fmt.Sprintf("<event %q... (%d more bytes) of rank %d>", name[:n], len(name)-n, e.rank)
	}
	return fmt.Sprintf("<event %q of rank %d>", name, e.rank)
}

// maxEventName is the most of an event's name its description quotes.
const maxEventName = 100

func (e *Event) Type() string          { return "event" }
func (e *Event) Freeze()               {}
func (e *Event) Truth() starlark.Bool  { return starlark.Bool(e.flag.IsSet) }
func (e *Event) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: event") }

func (k *Kernel) checkEvent(fn string, e *Event) error {
	if e.rank != k.Rank {
		return fmt.Errorf("%s: %v belongs to rank %d, not rank %d (events synchronise the threads of one rank)", fn, e, e.rank, k.Rank)
	}
	return nil
}

// waitEvent blocks until e is set. A blocked waiter shows the event in
// deadlock reports.
func (k *Kernel) waitEvent(fn string, e *Event) error {
	if err := k.checkEvent(fn, e); err != nil {
		return err
	}
	return e.flag.Wait(k.Proc, e)
}

// signalEvent sets e after this thread's stores are in memory (a thread
// that waits for e may read what this one wrote) and wakes its waiters.
// The sources of this thread's sends may still be in flight: tl.flush(dir)
// first when a waiter will overwrite them.
func (k *Kernel) signalEvent(fn string, e *Event, at any) error {
	if err := k.checkEvent(fn, e); err != nil {
		return err
	}
	if e.flag.IsSet {
		return fmt.Errorf("%s: %v was already signalled at %v (an event is set once)", fn, e, e.flag.SetAt)
	}
	if err := k.DrainWrites(); err != nil {
		return err
	}
	e.flag.Set(at)
	return nil
}

func eventBuiltins() []Builtin {
	return []Builtin{
		{Name: "event", Sig: "event(name=\"\")", Doc: "A new one-shot event of this rank, for ordering work between its threads: tl.signal(ev) sets it, tl.wait(ev) blocks until it is set (at once when it already is). name appears in deadlock reports. Pass it to threads as a tl.spawn argument.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				name := ""
				if err := starlark.UnpackArgs(b.Name(), args, kw, "name?", &name); err != nil {
					return nil, err
				}
				return &Event{rank: k.Rank, name: name}, nil
			}},
		{Name: "signal", Sig: "signal(ev)", Doc: "Set the event ev once the calling thread's earlier work is in memory (its deferred send is issued and the stores of its fused primitives are done), and wake the threads waiting for it. An event is set once; signalling it again is an error. The sources of the thread's sends may still be in flight: tl.flush(dir) first if a waiting thread will overwrite them.",
			Fn: func(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var e *Event
				if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &e); err != nil {
					return nil, err
				}
				return starlark.None, k.signalEvent(b.Name(), e, th.CallFrame(1).Pos)
			}},
	}
}
