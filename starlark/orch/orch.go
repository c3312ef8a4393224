// Package orch is the Starlark face of the L3-L2 host↔device layer
// (engine/l3l2; docs/l3l2.md): the `orch` object passed to an L3
// bench's main(orch), the `l2` object passed to functions submitted with
// orch.submit_next_level, the region, counter, queue and endpoint values they
// return, and the predeclared NotifyOp, WaitCmp, Opcode and pack/unpack
// helpers.
//
// Every function is registered once in the Builtins table (receiver, name,
// signature, doc) and every value attribute in Attributes; init turns them
// into one starlark/registry table per receiver kind, from which Attr binds
// the shared builtins and Reference and Stubs render the docs. The
// functions are thin wrappers: the engine does the work and charges
// simulated time to the process of the calling thread (set with SetProc).
//
// Error conventions (§5): on L3, a blocking call that times out raises an
// error containing "timed out" (or REMOTE_ABORTED), protocol failures raise
// with their kind in the message, try_* calls return False/None for
// no-progress. On L2, calls return False/None on failure and the endpoint's
// error() says why; malformed calls (bad arguments, handles that are not
// active where the call only reads) raise on both levels.
package orch

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/l3l2"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/registry"
	"kernbench/starlark/tl"
)

// Runtime is what the run pipeline provides to the orch and l2 objects of
// one simulation.
type Runtime struct {
	Hub *l3l2.Hub
	// NewThread makes the Starlark thread of a submitted L2 process.
	NewThread func(name string) *starlark.Thread
	// KernelKey is the thread-local key under which a kernel launched by
	// l2.launch is stored while it runs (print prefixes).
	KernelKey string
	// Stats accumulates the operation counts of launched kernels.
	Stats *tl.Stats
	// OnError receives the error of an L2 process that raised (the runtime
	// stops the run with it).
	OnError func(proc *sim.Proc, err error)

	// L2Procs are the submitted L2 processes, in submission order.
	L2Procs []*sim.Proc
	// L2End is the latest time an L2 process returned.
	L2End sim.Time
}

// M is the simulated machine.
func (rt *Runtime) M() *machine.Machine { return rt.Hub.Machine() }

// ProcKey is the thread-local key of the simulated process a thread runs in.
const ProcKey = "kernbench.orch.proc"

// SetProc records that th runs in simulated process p: builtins called on
// th charge their time to p.
func SetProc(th *starlark.Thread, p *sim.Proc) { th.SetLocal(ProcKey, p) }

func procOf(th *starlark.Thread) *sim.Proc {
	p, _ := th.Local(ProcKey).(*sim.Proc)
	return p
}

// Call is one builtin invocation.
type Call struct {
	Obj  *Obj // the receiver (nil for global functions)
	Th   *starlark.Thread
	B    *starlark.Builtin
	Args starlark.Tuple
	Kw   []starlark.Tuple
	P    *sim.Proc // the calling thread's process (nil: untimed)
}

// Unpack is starlark.UnpackArgs on the call's arguments.
func (c *Call) Unpack(pairs ...any) error {
	return starlark.UnpackArgs(c.B.Name(), c.Args, c.Kw, pairs...)
}

// Builtin documents and implements one function.
type Builtin struct {
	Recv string // receiver kind ("orch", "region", …); "" for a predeclared function
	Name string
	Sig  string // Python-style signature, without the receiver
	Doc  string
	Fn   func(c *Call) (starlark.Value, error)
}

// Attribute documents a value attribute of a receiver kind.
type Attribute struct {
	Recv, Name, Type, Doc string
	Get                   func(o *Obj) starlark.Value
}

// callKinds lists the receiver kinds in documentation order, with a sentence
// each.
var callKinds = []struct{ Name, Doc string }{
	{"orch", "The L3 host orchestrator, passed to `main(orch)`."},
	{"region", "An L3 region handle (`orch.create_l3_l2_region`); its operations cross PCIe."},
	{"counter", "An L3 int32 signal counter of a region (`region.counter(offset)`)."},
	{"queue", "The L3 (initiator) side of an SPSC message queue (`orch.create_worker_chip_queue`)."},
	{"queue.input", "`queue.input`: L3 enqueues messages for L2."},
	{"queue.output", "`queue.output`: L3 receives L2's messages."},
	{"message", "An L3 output message handle (active until released)."},
	{"l2", "The L2 (AICPU) orchestrator, passed to a function submitted with `orch.submit_next_level`."},
	{"endpoint", "The L2 side of an SPSC queue (`l2.spsc_queue_endpoint`)."},
	{"endpoint.input", "`endpoint.input()`: L2 consumes L3's messages."},
	{"endpoint.output", "`endpoint.output()`: L2 produces messages for L3."},
	{"handle", "An L2 input handle (`seq`, `opcode`, `nbytes`, `payload_offset`)."},
	{"reservation", "An L2 output reservation (`seq`, `nbytes`, `payload_offset`)."},
	{"region_endpoint", "The L2 side of a region (`l2.region_endpoint`); operations are local HBM accesses."},
}

// Builtins are orch's functions and methods, for the reference (a copy).
func Builtins() []Builtin { return slices.Clone(orchBuiltins) }

// Builtins is the registration table of every function, sorted by receiver
// (in Kinds order, predeclared functions last) and name.
var orchBuiltins []Builtin

// orchAttributes is the registration table of value attributes.
var orchAttributes []Attribute

// tables are the method tables of the receiver kinds, and of the
// predeclared helpers under "": each Builtin is one shared builtin, bound
// to an object when a script reads the attribute.
var tables = map[string]*registry.Table[*Obj]{}

func init() {
	orchBuiltins = builtins()
	orchAttributes = attributes()
	order := map[string]int{}
	for i, k := range callKinds {
		order[k.Name] = i
	}
	order[""] = len(callKinds)
	sort.SliceStable(orchBuiltins, func(i, j int) bool {
		a, b := orchBuiltins[i], orchBuiltins[j]
		if a.Recv != b.Recv {
			return order[a.Recv] < order[b.Recv]
		}
		return a.Name < b.Name
	})
	fields := map[string][]registry.Field[*Obj]{}
	for _, a := range orchAttributes {
		fields[a.Recv] = append(fields[a.Recv], registry.Field[*Obj]{Name: a.Name, Type: a.Type, Doc: a.Doc, Get: a.Get})
	}
	methods := map[string][]registry.Method[*Obj]{}
	for _, b := range orchBuiltins {
		methods[b.Recv] = append(methods[b.Recv], registry.Method[*Obj]{Name: b.Name, Sig: b.Sig, Doc: b.Doc, Fn: callOrch(b.Fn)})
	}
	for _, k := range callKinds {
		tables[k.Name] = registry.New(k.Name, k.Name+".", fields[k.Name], methods[k.Name])
	}
	tables[""] = registry.New("", "", nil, methods[""])
}

// callOrch adapts an orch function to its table: the call's receiver,
// thread, arguments and the calling thread's process, in one Call.
func callOrch(fn func(c *Call) (starlark.Value, error)) func(o *Obj, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	return func(o *Obj, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		return fn(&Call{Obj: o, Th: th, B: b, Args: args, Kw: kw, P: procOf(th)})
	}
}

// Obj is every orch/l2 value: a receiver kind, the engine object behind it
// and the kind's table.
type Obj struct {
	Kind  string
	Recv  any
	RT    *Runtime
	table *registry.Table[*Obj]
	// extra holds per-object values (queue.input, queue.region, l2 state).
	extra map[string]starlark.Value
}

var _ starlark.HasAttrs = (*Obj)(nil)

func newObj(rt *Runtime, kind string, recv any) *Obj {
	return &Obj{Kind: kind, Recv: recv, RT: rt, table: tables[kind]}
}

func (o *Obj) set(name string, v starlark.Value) {
	if o.extra == nil {
		o.extra = map[string]starlark.Value{}
	}
	o.extra[name] = v
}

func (o *Obj) String() string {
	switch r := o.Recv.(type) {
	case *l3l2.Region:
		return fmt.Sprintf("<region id=%d %s>", r.ID(), r.State())
	case *l3l2.Queue:
		return fmt.Sprintf("<queue depth=%d %s>", r.Layout().Depth, r.State())
	case *l3l2.Message:
		return fmt.Sprintf("<message seq=%d %s nbytes=%d>", r.Seq, r.Opcode, r.NBytes)
	case *l3l2.InputHandle:
		return fmt.Sprintf("<handle seq=%d %s nbytes=%d>", r.Seq, r.Opcode, r.NBytes)
	case *l3l2.Reservation:
		return fmt.Sprintf("<reservation seq=%d nbytes=%d>", r.Seq, r.NBytes)
	case *L2:
		return fmt.Sprintf("<l2 worker=%d>", r.Worker)
	}
	return "<" + o.Kind + ">"
}
func (o *Obj) Type() string          { return o.Kind }
func (o *Obj) Freeze()               {}
func (o *Obj) Truth() starlark.Bool  { return true }
func (o *Obj) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: %s", o.Kind) }

// Attr returns a bound builtin, a computed attribute or a per-object value.
func (o *Obj) Attr(name string) (starlark.Value, error) {
	if v, err := o.table.Attr(o, name); v != nil || err != nil {
		return v, err
	}
	if v, ok := o.extra[name]; ok && !strings.HasPrefix(name, "_") {
		return v, nil
	}
	return nil, nil
}

// AttrNames lists every attribute, sorted: the kind's table (whose fields
// without a getter are the per-object values) and any other per-object
// value.
func (o *Obj) AttrNames() []string {
	out := o.table.AttrNames()
	for n := range o.extra {
		if !strings.HasPrefix(n, "_") && !o.table.Has(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// New returns the orch object of an L3 bench (main(orch)).
func New(rt *Runtime) *Obj { return newObj(rt, "orch", rt) }

// L2 is the state behind one submitted L2 process's `l2` object.
type L2 struct {
	Worker  int
	Scalars []uint64
	// lastDecodeErr is why the last decode_endpoint_binding failed.
	lastDecodeErr string
}

// Predeclared returns the names every L3/L2 .star file sees: NotifyOp,
// WaitCmp, Opcode and the pack/unpack helpers.
func Predeclared() starlark.StringDict {
	d := starlark.StringDict{
		"NotifyOp": constStruct("NotifyOp", []string{"Set", "Add"}, []int64{int64(l3l2.NotifySet), int64(l3l2.NotifyAdd)}),
		"WaitCmp": constStruct("WaitCmp", []string{"EQ", "NE", "GT", "GE", "LT", "LE"},
			[]int64{int64(l3l2.WaitEQ), int64(l3l2.WaitNE), int64(l3l2.WaitGT), int64(l3l2.WaitGE), int64(l3l2.WaitLT), int64(l3l2.WaitLE)}),
		"Opcode": constStruct("Opcode", []string{"DATA", "STOP", "ERROR"}, []int64{int64(l3l2.OpData), int64(l3l2.OpStop), int64(l3l2.OpError)}),
	}
	for _, m := range tables[""].MethodList() {
		d[m.Name] = tables[""].Builtin(m.Name)
	}
	return d
}

// orchConstants documents the predeclared constant namespaces.
var orchConstants = []struct{ Name, Values, Doc string }{
	{"NotifyOp", "Set=0, Add=1", "How `notify` changes a counter (Add wraps at 32 bits and is not atomic)."},
	{"WaitCmp", "EQ=0, NE=1, GT=2, GE=3, LT=4, LE=5", "Comparison `observed ⋄ value` of a test or wait, as signed int32."},
	{"Opcode", "DATA=1, STOP=2, ERROR=3", "Queue message opcodes (STOP only on input, through `request_stop`)."},
}
