// Package tl is the Starlark face of a rank's kernel: the `tl` object
// passed to every kernel, and the Ptr, Tile, handle and event values it
// works with. Its one job is the binding: it unpacks a builtin's
// arguments, turns Starlark values into the engine's (Ptr is a
// prims.View, Tile a prims.Tile, a handle a prims.Load) and back, names
// call sites and raises errors in Starlark terms; what an operation does
// on the machine, and the rank's hazard bookkeeping, is engine/prims'
// Kernel, the first field of tl's. Every builtin is registered once, in a
// starlark/registry table (TL, PtrTable, TileTable: name, signature,
// doc, function), from which `kernbench docs` writes the reference and
// the stubs.
package tl

import (
	"fmt"
	"slices"
	"sort"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/prims"
	"kernbench/engine/sim"
	"kernbench/starlark/registry"
)

// Stats counts a rank's operations (for the report's "ops") and the
// interpreter work behind them: Starlark steps of the kernel and its
// threads, and tl builtin calls.
type Stats struct {
	prims.Counts // the operations and allocations (the engine counts them)
	Steps, Calls int64
	// TileBytes are the bytes of the tiles tl calls gave the kernel (a
	// fetch, a wait, a reduction): the garbage that fills the collector's
	// headroom when the run moves bytes.
	TileBytes int64
	// Retained, when set (the estimate's probe), follows the views and
	// handles the kernel is given; shared by the ranks of a simulation.
	Retained *Retention
	// InstantCalls is how many calls of tl, Ptr and Tile the rank's
	// kernel and threads may make within one simulated instant
	// (InstantCallLimit; 0: the limit of a kernel without buffers).
	InstantCalls int64
}

// Observer sees every data operation (the op_log and traces hook in here).
type Observer interface {
	Marker(k *Kernel, name string, args starlark.Tuple)
}

// Kernel is one rank's `tl` value: the Starlark face of the rank's
// engine kernel (prims.Kernel, its first field), which does what the
// builtins ask on the machine and keeps the rank's bookkeeping.
type Kernel struct {
	// (First: what a message's piece touches is in its first lines.)
	prims.Kernel

	// The launch fields, set by the kernel's creator: New copies those
	// the engine uses into the engine kernel (a piece reads them there,
	// in its first lines).
	M     *machine.Machine
	G     *machine.Group // may be nil when no IPCQ group is installed
	PE    *machine.PE
	Proc  *sim.Proc
	Stats *Stats
	Rank  int
	World int
	RedOp dtype.RedOp
	// Handles are the recycled handles (the last recycled first),
	// shared by the kernels of a run when their creator sets one pool
	// for all (New gives a kernel without one a pool of its own;
	// tl.spawn threads share their parent's).
	Handles *HandlePool
	EP      *machine.Endpoint
	Obs     Observer
	// MaxSteps is this kernel's Starlark step budget (0: none): the
	// rank's --max-steps, and for a tl.spawn thread what its spawner had
	// left when it spawned it, so a chain of spawns is bounded as one
	// thread is.
	MaxSteps uint64
	// NewThread makes the Starlark thread of a tl.spawn thread (the
	// runner's loader thread: print, load, step limit); nil: a plain one.
	NewThread func(name string, k *Kernel) *starlark.Thread
	// NoteAlloc, when set, is told the bytes of every tile the kernel or
	// its threads are about to allocate, and may refuse them with an
	// error (the host-memory guard).
	NoteAlloc func(n int64) error
	// Fail ends the run with a thread's error (the runner attributes it to
	// the rank); nil: the simulation is stopped with it.
	Fail func(err error)
	// Rec, when set, sees every tl call of the kernel and its threads.
	Rec Recorder

	// root is the rank's kernel when this is a tl.spawn thread (nil for
	// the kernel itself).
	root *Kernel
	// fused is what the fused primitives keep between calls, made at the
	// first (fusedState); writeSites box the sites of writes, made at the
	// first write. Kept out of line: a kernel of the plain calls never
	// makes the first, a rank that only sends never the second, and at
	// tens of thousands of ranks the 700 bytes they took in every Kernel
	// were a twentieth of what a rank holds.
	fused      *fusedState
	writeSites *boxes[prims.Site]
	// children are the threads this kernel or thread spawned.
	children []*threadHandle
	// instant counts the calls of the rank's kernel and threads since
	// simulated time last moved (noteCall; the kernel's, made at its
	// first call, out of line to keep a Kernel in its size class).
	instant *instantCalls
	// attrs are the kernel's attribute values read so far (its bound
	// builtins and fields), in the order they were first read; attrAt[i]
	// is where attribute i (its index in attrIndex) is in attrs, plus 1
	// (0: not read yet). A kernel reads a dozen of tl's 44: a slot for
	// each took 704 bytes a rank.
	attrAt [maxAttrs]uint8
	attrs  []starlark.Value
}

// maxAttrs bounds tl's attributes (Kernel.attrAt); attrRoom is the
// room a kernel's first read makes for them (Kernel.attrs).
const (
	maxAttrs = 48
	attrRoom = 16
)

// fusedState is what a kernel's fused primitives keep between calls.
type fusedState struct {
	// args and pairs are a fused primitive call's argument slots, reused
	// call after call.
	args  fusedArgs
	pairs []any
	// origins box the positions of the fused primitives' calls, as their
	// messages' origins; site is the running fused primitive's call site.
	origins boxes[any]
	site    syntax.Position
}

// fusedState is k.fused, made on the first fused primitive call.
func (k *Kernel) fusedState() *fusedState {
	if f := k.fused; f != nil {
		return f
	}
	k.fused = new(fusedState)
	return k.fused
}

// fusedSite is the running (or last) fused primitive's call site.
func (k *Kernel) fusedSite() syntax.Position {
	if k.fused == nil {
		return syntax.Position{}
	}
	return k.fused.site
}

// tracedOps are the tl operations drawn on the kernel track.
var tracedOps = map[string]bool{"send": true, "send_async": true, "recv": true, "wait": true, "flush": true, "fetch": true, "store": true, "copy": true, "reduce": true,
	"recv_reduce_send": true, "recv_reduce_copy": true, "recv_reduce_copy_send": true, "recv_copy_send": true, "recv_copy": true, "signal": true}

// keepsDeferredSend are the builtins that leave a fused primitive's
// deferred send for later: the primitives themselves (which send it after
// their first piece, or before they block) and operations that neither
// block nor touch memory. tl.spawn is not one: the primitive returned
// "when its last piece has been sent", so a thread spawned next must not
// send on the direction ahead of that piece.
var keepsDeferredSend = map[string]bool{
	"recv_reduce_send": true, "recv_reduce_copy": true, "recv_reduce_copy_send": true, "recv_copy_send": true, "recv_copy": true, "prefetch": true,
	"done": true, "program_id": true, "directions": true, "peer": true, "ready": true, "zeros": true, "full": true, "maximum": true, "minimum": true, "time": true, "alloc": true, "event": true,
}

// threadKernelKey is the Starlark thread-local naming the kernel whose tl
// builtins the thread last called (Ptr.tolist waits for its stores).
const threadKernelKey = "kernbench.tl.kernel"

var _ starlark.HasAttrs = (*Kernel)(nil)

// Builtin documents and implements one tl function: an entry of tl's
// method table (its Fn gets the kernel the builtin is bound to).
type Builtin = registry.Method[*Kernel]

// Attribute documents a plain tl attribute (its value is computed once,
// when the kernel's tl is made).
type Attribute = registry.Field[*Kernel]

// Attributes are tl's attributes, for the reference (a copy).
func Attributes() []Attribute { return slices.Clone(tlAttributes) }

// Attributes lists tl's value attributes.
var tlAttributes = []Attribute{
	{Name: "rank", Type: "int", Doc: "This rank's index in the process group.", Get: func(k *Kernel) starlark.Value { return starlark.MakeInt(k.Rank) }},
	{Name: "world_size", Type: "int", Doc: "Number of ranks in the process group.", Get: func(k *Kernel) starlark.Value { return starlark.MakeInt(k.World) }},
	{Name: "slot_size", Type: "int", Doc: "Bytes per IPCQ message at most (the rx slot size in force).", Get: func(k *Kernel) starlark.Value { return starlark.MakeInt64(k.slotSize()) }},
	{Name: "n_slots", Type: "int", Doc: "IPCQ ring depth per direction (messages in flight at most).", Get: func(k *Kernel) starlark.Value { return starlark.MakeInt(k.nSlots()) }},
	{Name: "buffer_kind", Type: "str", Doc: `Where this rank's IPCQ rx rings live ("tcm", "hbm", "sram"); a kernel that reads received slots in place may copy them out first when they are not in its own TCM.`, Get: func(k *Kernel) starlark.Value {
		if k.G == nil {
			return starlark.None
		}
		return starlark.String(k.G.Cfg.BufferKind.String())
	}},
	{Name: "machine", Type: "struct", Doc: "The machine: struct(sips, cubes_per_sip, pes_per_cube, world_size); with tl.location, what a hierarchical algorithm needs instead of hard-coded cube sizes.", Get: func(k *Kernel) starlark.Value {
		p := k.M.Params
		return MachineValue(p.Sips, p.CubesPerSip, p.PesPerCube, k.World)
	}},
	{Name: "channels", Type: "int", Doc: `Channels per neighbour the topology installed (ccl.yaml channels:, default 1); channel c of direction d is tl.channel(d, c).`, Get: func(k *Kernel) starlark.Value { return starlark.MakeInt(k.channels()) }},
	{Name: "redop", Type: "str", Doc: `The collective's reduction ("sum", "prod", "max", "min", "avg"); pass it to tl.reduce, which accumulates "avg" as a sum (divide by world_size at the end).`, Get: func(k *Kernel) starlark.Value { return starlark.String(k.RedOp.String()) }},
}

// Builtins are tl's functions, for the reference (a copy).
func Builtins() []Builtin { return slices.Clone(tlBuiltins) }

// Builtins is the registration table of tl's functions, sorted by name.
var tlBuiltins []Builtin

// tlTable is tl's method and field table: one shared builtin per function,
// bound to each kernel's tl (the functions run through callTL).
var tlTable *registry.Table[*Kernel]

func init() {
	tlBuiltins = append(append(append(kernelBuiltins(), primitiveBuiltins()...), locationBuiltins()...), eventBuiltins()...)
	sort.Slice(tlBuiltins, func(i, j int) bool { return tlBuiltins[i].Name < tlBuiltins[j].Name })
	methods := make([]Builtin, len(tlBuiltins))
	for i, b := range tlBuiltins {
		methods[i] = b
		methods[i].Fn = callTL(b)
	}
	tlTable = registry.New("tl", "tl.", tlAttributes, methods)
	if n := len(tlBuiltins) + len(tlAttributes); n > maxAttrs {
		panic(fmt.Sprintf("internal error: tl has %d attributes, Kernel.attrAt holds %d", n, maxAttrs))
	}
	attrIndex = make(map[string]int, len(tlBuiltins)+len(tlAttributes)+1)
	for i, b := range tlBuiltins {
		attrIndex[b.Name] = i
	}
	for i, a := range tlAttributes {
		attrIndex[a.Name] = len(tlBuiltins) + i
	}
	// "load" is a Starlark keyword, so tl.load cannot be written; getattr(tl,
	// "load") still finds the fetch builtin.
	attrIndex["load"] = attrIndex["fetch"]
}

// attrIndex numbers the names of a kernel's attributes (Kernel.attrs).
// One map serves every kernel: each tl call looks its name up, and a map
// per kernel was about six cache misses per call at a hundred ranks and
// more; this one stays cached, and a kernel's value is one line away.
var attrIndex map[string]int

// callTL wraps the function of b with what every tl call does: count it,
// note the thread's kernel, send a fused primitive's deferred piece first
// (unless b keeps it), show the call to a Recorder and draw it on the
// kernel's trace track. The choices that depend on b are made here, once;
// a call allocates nothing more than b itself.
func callTL(b Builtin) func(k *Kernel, th *starlark.Thread, sb *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	name, fn := b.Name, b.Fn
	keeps, traced := keepsDeferredSend[name], tracedOps[name]
	traceName := "tl." + name
	run := func(k *Kernel, th *starlark.Thread, sb *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if p := k.Proc; p != nil && p.Sim().Running() != p && p.Sim().Running() != nil {
			// Its operations would block the tl's own process from
			// inside another one's coroutine.
			return nil, fmt.Errorf("this tl is rank %d's %s and was called from another thread; a thread calls the tl tl.spawn gave it (fn's first argument)", k.Rank, k.Track())
		}
		if !keeps && k.HasDeferred() {
			// A fused primitive's last forwarded piece goes out before any
			// other operation (which could block on its receiver).
			if err := k.SendDeferred(); err != nil {
				return nil, err
			}
		}
		k.Stats.Calls++
		if err := k.noteCall(); err != nil {
			return nil, err
		}
		if th.Local(threadKernelKey) != k {
			th.SetLocal(threadKernelKey, k)
		}
		v, err := fn(k, th, sb, args, kw)
		if err != nil {
			return v, err
		}
		if t, ok := v.(*Tile); ok && t != nil {
			k.Stats.TileBytes += t.NBytes()
		}
		if r := k.Stats.Retained; r != nil {
			switch v := v.(type) {
			case *handle:
				if v != nil {
					r.noteHandle(v)
				}
			case *Ptr:
				if v != nil {
					r.noteView(v)
				}
			}
		}
		return v, err
	}
	call := func(k *Kernel, th *starlark.Thread, sb *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if k.Rec == nil {
			return run(k, th, sb, args, kw)
		}
		k.Rec.Call(k, name, args, kw, th.CallFrame(1).Pos)
		v, err := run(k, th, sb, args, kw)
		k.Rec.Return(k, name, args, kw, v, err)
		return v, err
	}
	if !traced {
		return call
	}
	return func(k *Kernel, th *starlark.Thread, sb *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if k.M.Trace == nil {
			return call(k, th, sb, args, kw)
		}
		// The kernel's track: one slice per operation that can take
		// simulated time (operations of one rank never overlap).
		start := k.PE.Sim().Now()
		k.SliceStart = start
		v, err := call(k, th, sb, args, kw)
		k.M.TraceOf(k.PE).Slice(k.PE.ID+1, k.Tid(), k.Track(), traceName, start, k.PE.Sim().Now(), nil)
		return v, err
	}
}

// New makes the tl value for a kernel launch: tl's builtins bound to k.
func New(k *Kernel) *Kernel {
	if k.Stats == nil {
		k.Stats = &Stats{}
	}
	if k.Handles == nil {
		k.Handles = &HandlePool{}
	}
	e := &k.Kernel
	e.M, e.G, e.PE, e.Proc, e.Counts = k.M, k.G, k.PE, k.Proc, &k.Stats.Counts
	e.Rank, e.World, e.RedOp, e.Handles, e.NoteAlloc, e.Face = k.Rank, k.World, k.RedOp, k.Handles, k.NoteAlloc, k
	// The attributes are made as the kernel first reads them (attr): a
	// kernel reads a handful of tl's fifty, and at tens of thousands of
	// ranks binding them all took more memory than the rest of a kernel.
	// Empty, not nil: New made this kernel.
	k.attrs = []starlark.Value{}
	return k
}

// attr is attribute i of the kernel: the value made at its first read
// (bindAttr).
func (k *Kernel) attr(i int) starlark.Value {
	if at := k.attrAt[i]; at != 0 {
		return k.attrs[at-1]
	}
	return k.addAttr(i)
}

// addAttr makes attribute i of the kernel and keeps it (attr).
func (k *Kernel) addAttr(i int) starlark.Value {
	v := k.bindAttr(i)
	if cap(k.attrs) == 0 {
		// Room for the dozen a kernel reads, made once.
		k.attrs = make([]starlark.Value, 0, attrRoom)
	}
	k.attrs = append(k.attrs, v)
	k.attrAt[i] = uint8(len(k.attrs))
	return v
}

// bindAttr makes attribute i of the kernel (the fields it reads are set
// before New).
func (k *Kernel) bindAttr(i int) starlark.Value {
	if i < len(tlBuiltins) {
		return tlTable.Builtin(tlBuiltins[i].Name).BindReceiver(k)
	}
	return tlAttributes[i-len(tlBuiltins)].Get(k)
}

func (k *Kernel) String() string        { return fmt.Sprintf("<tl rank=%d world_size=%d>", k.Rank, k.World) }
func (k *Kernel) Type() string          { return "tl" }
func (k *Kernel) Freeze()               {}
func (k *Kernel) Truth() starlark.Bool  { return true }
func (k *Kernel) Hash() (uint32, error) { return uint32(k.Rank), nil }
func (k *Kernel) Attr(name string) (starlark.Value, error) {
	if i, ok := attrIndex[name]; ok && k.attrs != nil { // (nil: a kernel New did not make)
		return k.attr(i), nil
	}
	// The hint kernbench check gives for the same line.
	return nil, registry.NoSuchAttr("tl", name, k.AttrNames())
}
func (k *Kernel) AttrNames() []string {
	if k.attrs == nil {
		return []string{}
	}
	names := make([]string, 0, len(attrIndex))
	for n := range attrIndex {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Finish is called in the kernel's process when the kernel function has
// returned without error (otherwise Release): it sends a deferred piece,
// joins tl.send_async calls, waits for the stores still under way (the kernel is done
// when its data is in memory), then releases the kernel's memory.
//
// On a traced run the wait is a slice of its own on the kernel track,
// "return", from the kernel function's return to the kernel's end: the
// run's time counts it (the last stores landing in HBM, say), so a
// timeline without it would end before the time the report prints.
func (k *Kernel) Finish() error {
	var start sim.Time
	traced := k.M != nil && k.M.Trace != nil && k.PE != nil
	if traced {
		start = k.PE.Sim().Now()
	}
	err := k.finishOps()
	if traced {
		if end := k.PE.Sim().Now(); end > start {
			k.M.TraceOf(k.PE).Slice(k.PE.ID+1, k.Tid(), k.Track(), "return", start, end,
				map[string]any{"waits for": "what the kernel left under way: a fused primitive's last piece, tl.send_async calls, spawned threads, stores"})
		}
	}
	k.Release()
	return err
}

// finishOps completes what a kernel or thread leaves under way: its
// deferred send, its tl.send_async calls, the threads it spawned and its
// stores.
func (k *Kernel) finishOps() error {
	err := k.SendDeferred()
	if err == nil {
		err = k.JoinSends(nil)
	}
	for _, h := range k.children {
		if err == nil {
			_, err = k.joinThread(h)
		}
	}
	if err == nil {
		err = k.DrainWrites()
	}
	return err
}

func (k *Kernel) slotSize() int64 {
	if k.G == nil {
		return 0
	}
	return k.G.Cfg.SlotSize
}

func (k *Kernel) nSlots() int {
	if k.G == nil {
		return 0
	}
	return k.G.Cfg.NSlots
}

// LogWrite records bytes written into memory outside any simulated
// operation (allocation zeroing, host writes), so phase 2 can replay them.
func LogWrite(m *machine.Machine, rank int, name string, reg machine.Region, zero bool) {
	prims.LogWrite(m, rank, name, reg, zero)
}

// lookupCallSite is the Starlark position of the tl call running on k's
// thread (the caller of the builtin), or the zero position: a line-table
// decode, which a fused primitive does once per call.
func (k *Kernel) lookupCallSite() syntax.Position {
	if th, ok := k.Proc.Data.(*starlark.Thread); ok && th.CallStackDepth() > 1 {
		return th.CallFrame(1).Pos
	}
	return syntax.Position{}
}

// WriteSite is the call site of a write being issued (prims.Face): the
// running fused primitive's, boxed once per call, or the running call's,
// boxed once per recent site (writeSites).
func (k *Kernel) WriteSite() prims.Site {
	if k.writeSites == nil {
		k.writeSites = &boxes[prims.Site]{}
	}
	if k.InFused {
		k.FusedSite = k.writeSites.box(k.fusedSite())
		return k.FusedSite
	}
	return k.writeSites.box(k.lookupCallSite())
}
