package tl

import (
	"errors"
	"fmt"

	"go.starlark.net/starlark"

	"kernbench/engine/sim"
	"kernbench/starlark/script"
)

// Threads (tl.spawn) are further simulated processes on the same PE: they
// share its DMA channels, math unit, memory ports, IPCQ endpoint and the
// kernel's tl.alloc memory, and each has its own tl value (its own
// staging, deferred send and pending stores). A direction's send side and
// its receive side are each used by one thread at a time.

// ThreadError is the failure of a tl.spawn thread: the thread's error (with
// its Starlark backtrace) and where it was spawned.
type ThreadError struct {
	Rank      int
	Thread    string    // "thread 1 (worker)"
	SpawnedAt []string  // the spawning call stack, outermost first, as "file:line:col: in fn"
	Proc      *sim.Proc // the thread's process, for notes a run adds about where it was
	Err       error
}

func (e *ThreadError) Error() string {
	at := "?"
	if n := len(e.SpawnedAt); n > 0 {
		at = e.SpawnedAt[n-1]
	}
	return fmt.Sprintf("%s (spawned at %s): %v", e.Thread, at, e.Err)
}
func (e *ThreadError) Unwrap() error { return e.Err }

// threadHandle is the handle tl.spawn returns; tl.wait joins it.
type threadHandle struct {
	k      *Kernel // the thread's tl
	done   bool
	value  starlark.Value
	err    error
	waiter *sim.Proc
}

func (h *threadHandle) String() string        { return fmt.Sprintf("<thread %s>", h.k.ThreadName) }
func (h *threadHandle) Type() string          { return "handle" }
func (h *threadHandle) Freeze()               {}
func (h *threadHandle) Truth() starlark.Bool  { return true }
func (h *threadHandle) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: handle") }

func (k *Kernel) rootKernel() *Kernel {
	if k.root != nil {
		return k.root
	}
	return k
}

func (k *Kernel) fail(err error) {
	if f := k.rootKernel().Fail; f != nil {
		f(err)
		return
	}
	k.PE.Sim().Stop(err)
}

func builtinSpawn(k *Kernel, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%s: want the function to run, as fn(tl, *args, **kwargs)", b.Name())
	}
	fn, ok := args[0].(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("%s: want a function, got %s", b.Name(), args[0].Type())
	}
	root := k.rootKernel()
	child := New(&Kernel{M: k.M, G: k.G, EP: k.EP, PE: k.PE, Rank: k.Rank, World: k.World, RedOp: k.RedOp, Stats: k.Stats, Handles: k.Handles, Obs: k.Obs, Rec: k.Rec, root: root})
	n := k.Kernel.Spawn(&child.Kernel)
	child.ThreadName = fmt.Sprintf("thread %d (%s)", n, fn.Name())
	name := fmt.Sprintf("rank %d %s", k.Rank, child.ThreadName)
	var sth *starlark.Thread
	if root.NewThread != nil {
		sth = root.NewThread(name, child)
	} else {
		sth = &starlark.Thread{Name: name, Print: th.Print, Load: th.Load}
	}
	if k.MaxSteps > 0 {
		// The thread gets what its spawner has left: each thread of a
		// chain that spawns the next and returns used to get the whole
		// --max-steps, so the chain never stopped.
		child.MaxSteps = 1
		if used := th.ExecutionSteps(); used < k.MaxSteps {
			child.MaxSteps = k.MaxSteps - used
		}
		script.SetStepLimit(sth, child.MaxSteps)
	}
	h := &threadHandle{k: child}
	k.children = append(k.children, h)
	var spawnedAt []string
	stack := th.CallStack()
	for _, fr := range stack[:len(stack)-1] { // the last frame is tl.spawn itself
		spawnedAt = append(spawnedAt, fmt.Sprintf("%s: in %s", fr.Pos, fr.Name))
	}
	callArgs := append(starlark.Tuple{child}, args[1:]...)
	proc := k.M.Spawn(k.PE, name, func(p *sim.Proc) {
		child.Proc, child.Kernel.Proc = p, p
		v, err := starlark.Call(sth, fn, callArgs, kw)
		err = script.Stopped(sth, err)
		child.Stats.Steps += int64(sth.ExecutionSteps())
		if err == nil {
			err = child.finishOps()
		}
		h.value, h.err, h.done = v, err, true
		if err != nil && !errors.Is(err, sim.ErrKilled) {
			h.err = &ThreadError{Rank: k.Rank, Thread: child.ThreadName, SpawnedAt: spawnedAt, Proc: p, Err: err}
			k.fail(h.err)
		}
		if w := h.waiter; w != nil {
			h.waiter = nil
			w.Wake()
		}
	})
	proc.Data = sth
	return h, nil
}

// joinThread blocks until the thread has returned and gives its result.
func (k *Kernel) joinThread(h *threadHandle) (starlark.Value, error) {
	for !h.done {
		h.waiter = k.Proc
		k.Proc.Wait, k.Proc.WaitSince = h, k.PE.Sim().Now()
		err := k.Proc.Park()
		k.Proc.Wait = nil
		if err != nil {
			return nil, err
		}
	}
	if h.err != nil {
		return nil, h.err
	}
	if h.value == nil {
		return starlark.None, nil
	}
	return h.value, nil
}
