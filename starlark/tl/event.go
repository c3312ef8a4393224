package tl

import (
	"fmt"

	"go.starlark.net/starlark"

	"kernbench/engine/prims"
)

// Event is tl.event's value: a rank's one-shot flag between its threads
// (prims.Event: its String is the event's description).
type Event struct{ prims.Event }

func (e *Event) Type() string          { return "event" }
func (e *Event) Freeze()               {}
func (e *Event) Truth() starlark.Bool  { return starlark.Bool(e.Flag.IsSet) }
func (e *Event) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: event") }

func eventBuiltins() []Builtin {
	return []Builtin{
		{Name: "event", Sig: "event(name=\"\")", Doc: "A new one-shot event of this rank, for ordering work between its threads: tl.signal(ev) sets it, tl.wait(ev) blocks until it is set (at once when it already is). name appears in deadlock reports. Pass it to threads as a tl.spawn argument.",
			Fn: func(k *Kernel, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				name := ""
				if err := starlark.UnpackArgs(b.Name(), args, kw, "name?", &name); err != nil {
					return nil, err
				}
				return &Event{prims.Event{Rank: k.Rank, Name: name}}, nil
			}},
		{Name: "signal", Sig: "signal(ev)", Doc: "Set the event ev once the calling thread's earlier work is in memory (its deferred send is issued and the stores of its fused primitives are done), and wake the threads waiting for it. An event is set once; signalling it again is an error. The sources of the thread's sends may still be in flight: tl.flush(dir) first if a waiting thread will overwrite them.",
			Fn: func(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				var e *Event
				if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &e); err != nil {
					return nil, err
				}
				return starlark.None, k.SignalEvent(b.Name(), &e.Event, th.CallFrame(1).Pos)
			}},
	}
}
