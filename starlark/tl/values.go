package tl

import (
	"fmt"
	"math/bits"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/engine/prims"
	"kernbench/starlark/errkind"
	"kernbench/starlark/registry"
)

// Error is a tl failure with an exact kind (IpcqInvalidDirection,
// OutOfBounds, DtypeMismatch, …). It survives Starlark's EvalError wrapping
// (errors.As), so reports can name the kind. The kind is stored once, set
// by errorf: the message's name is read from it.
type Error struct {
	Msg  string
	kind *errkind.Kind
}

func (e *Error) Error() string { return e.ErrorKind().Name + ": " + e.Msg }

// ErrNoStagingRoom is the cause of the OutOfMemory error of a fused
// primitive that finds no room for its staging slots: the run then names
// the settings (buffer_kind, n_slots, slot_size) with which it completes.
var ErrNoStagingRoom = prims.ErrNoStagingRoom

// ErrorKind is the declared kind (errkind.Kinded); an Error built without
// errorf is a kernbench bug: InternalError.
func (e *Error) ErrorKind() *errkind.Kind {
	if e.kind == nil {
		return errkind.Internal
	}
	return e.kind
}

func errorf(kind *errkind.Kind, format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), kind: kind}
}

// Ptr is a typed view of simulated memory.
type Ptr struct {
	prims.View // (its only field: the Ptr's fields and its engine methods)
}

// SlotRef names an rx slot generation (prims.View.Slot).
type SlotRef = prims.SlotRef

// Lease is the validity of a view whose memory is lent (Ptr.Lease).
type Lease = prims.Lease

var (
	_ starlark.HasAttrs   = (*Ptr)(nil)
	_ starlark.HasBinary  = (*Ptr)(nil)
	_ starlark.Indexable  = (*Ptr)(nil)
	_ starlark.Comparable = (*Ptr)(nil)
)

// NewPtr makes a Ptr of count elements of dt at the start of reg.
func NewPtr(reg machine.Region, dt dtype.DType, count int64, rank int) *Ptr {
	reg.N = count * int64(dt.Size())
	return &Ptr{prims.View{Reg: reg, DT: dt, Count: count, Rank: rank}}
}

func (p *Ptr) String() string {
	s := fmt.Sprintf("Ptr(%s, rank=%d, addr=%#x, dtype=%s, count=%d", p.Reg.Mem.Space, p.Rank, p.Reg.Addr(), p.DT, p.Count)
	if p.Dir != "" {
		s += ", dir=" + p.Dir
	}
	return s + ")"
}
func (p *Ptr) Type() string         { return "Ptr" }
func (p *Ptr) Freeze()              {}
func (p *Ptr) Truth() starlark.Bool { return true }
func (p *Ptr) Hash() (uint32, error) {
	return uint32(p.Reg.Addr()) ^ uint32(p.Reg.Addr()>>32) ^ uint32(p.Count)*31 ^ uint32(p.DT), nil
}
func (p *Ptr) Len() int { return int(p.Count) }

// Index reads element i without simulated cost (like tolist()).
func (p *Ptr) Index(i int) starlark.Value {
	return elemValue(p.DT, p.Reg.View(), i)
}

// Get implements p[i] with an error path (starlark.Mapping is consulted
// before Indexable): under --timing-only there are no values to read.
func (p *Ptr) Get(k starlark.Value) (starlark.Value, bool, error) {
	i, err := starlark.AsInt32(k)
	if err != nil {
		return nil, false, fmt.Errorf("Ptr index: %s", err)
	}
	n := int(p.Count)
	orig := i
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return nil, false, fmt.Errorf("Ptr index %d out of range [%d:%d]", orig, -n, n)
	}
	if err := p.CheckLease(); err != nil {
		return nil, false, fmt.Errorf("Ptr[i]: %w", err)
	}
	if p.Reg.Mem.NoData() {
		return nil, false, errTimingOnly("Ptr[i]")
	}
	if err := p.CheckSlot(p.Rank, "Ptr[i]"); err != nil {
		return nil, false, err
	}
	return p.Index(i), true, nil
}

func (p *Ptr) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	q := y.(*Ptr)
	eq := p.Reg.Mem == q.Reg.Mem && p.Reg.Off == q.Reg.Off && p.DT == q.DT && p.Count == q.Count
	switch op {
	case syntax.EQL:
		return eq, nil
	case syntax.NEQ:
		return !eq, nil
	}
	return false, fmt.Errorf("Ptr values are not ordered (%s)", op)
}

// Binary implements p + k (advance k elements, Triton style); the view keeps
// its end, so p + k has count - k elements.
func (p *Ptr) Binary(op syntax.Token, y starlark.Value, side starlark.Side) (starlark.Value, error) {
	if op != syntax.PLUS && op != syntax.MINUS {
		return nil, nil
	}
	if _, isInt := y.(starlark.Int); !isInt || op == syntax.MINUS && side == starlark.Right {
		return nil, nil
	}
	k, err := starlark.AsInt32(y)
	if err != nil {
		// An int past 32 bits is past every view's end (it was "unknown
		// binary op: Ptr + int").
		return nil, errorf(errkind.OutOfBounds, "Ptr%s: offset %s is outside a view of %d elements", op, y, p.Count)
	}
	if op == syntax.MINUS {
		k = -k
	}
	if err := p.CheckLease(); err != nil {
		return nil, fmt.Errorf("Ptr %s: %w", op, err)
	}
	return p.view(int64(k), p.Count-int64(k), "+")
}

func (p *Ptr) view(start, count int64, what string) (*Ptr, error) {
	if start < 0 || count < 0 || start > p.Count || count > p.Count-start {
		return nil, errorf(errkind.OutOfBounds, "Ptr%s: elements [%d, %d) are outside a view of %d elements", what, start, start+count, p.Count)
	}
	q := p.sub(start, count)
	return &q, nil
}

// sub is the view of count elements from start, as a value (the fused
// primitives cut their buffers into pieces without allocating); the
// caller keeps it inside p.
func (p *Ptr) sub(start, count int64) Ptr {
	q := *p
	q.Reg = p.SubRegion(start, count)
	q.Count = count
	return q
}

// counted is methods, each first counting its call among the rank's
// calls at one instant (noteCallOn): every Ptr and Tile method is one, as
// every tl builtin is (callTL), whatever else it does.
func counted[R starlark.Value](methods []registry.Method[R]) []registry.Method[R] {
	for i := range methods {
		fn := methods[i].Fn
		methods[i].Fn = func(r R, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			if err := noteCallOn(th); err != nil {
				return nil, err
			}
			return fn(r, th, b, args, kw)
		}
	}
	return methods
}

// readsNow wraps a Ptr method that reads memory now: in a kernel, the
// stores the calling kernel left under way into the view (fused
// primitives) finish first.
func readsNow(fn func(p *Ptr, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error)) func(p *Ptr, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	return func(p *Ptr, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if k, ok := th.Local(threadKernelKey).(*Kernel); ok && k.Proc.Sim().Running() == k.Proc {
			if err := k.Settle(p.Reg); err != nil {
				return nil, err
			}
		}
		return fn(p, th, b, args, kw)
	}
}

// notedView is p.view for a method of the kernel th runs: the view is
// followed when the simulation is probed (noteView).
func notedView(th *starlark.Thread, p *Ptr, start, count int64, what string) (starlark.Value, error) {
	q, err := p.view(start, count, what)
	if err != nil {
		return nil, err
	}
	noteView(th, q)
	return q, nil
}

// ptrTable is Ptr's attributes and methods, each sorted by name.
var ptrTable = registry.New("Ptr", "", []registry.Field[*Ptr]{
	{Name: "addr", Type: "int", Doc: "Physical byte address of the first element.", Get: func(p *Ptr) starlark.Value { return starlark.MakeUint64(p.Reg.Addr()) }},
	{Name: "count", Type: "int", Doc: "Number of elements (also len(p)).", Get: func(p *Ptr) starlark.Value { return starlark.MakeInt64(p.Count) }},
	{Name: "dir", Type: "str", Doc: "For a received message, the direction it arrived from; None otherwise.", Get: func(p *Ptr) starlark.Value {
		if d := p.Dir; d != "" {
			return starlark.String(d)
		}
		return starlark.None
	}},
	{Name: "dtype", Type: "str", Doc: "Element type name (f32, f16, bf16, f64, i32, i64, u8).", Get: func(p *Ptr) starlark.Value { return starlark.String(p.DT.String()) }},
	{Name: "nbytes", Type: "int", Doc: "Size in bytes (count × element size).", Get: func(p *Ptr) starlark.Value { return starlark.MakeInt64(p.Reg.N) }},
	{Name: "pe", Type: "int", Doc: "Global index of the PE owning the memory (-1 for cube SRAM).", Get: func(p *Ptr) starlark.Value { return starlark.MakeInt(p.Reg.Mem.PE) }},
	{Name: "rank", Type: "int", Doc: "Rank the memory belongs to.", Get: func(p *Ptr) starlark.Value { return starlark.MakeInt(p.Rank) }},
	{Name: "space", Type: "str", Doc: `Memory kind: "tcm", "sram" or "hbm".`, Get: func(p *Ptr) starlark.Value { return starlark.String(p.Reg.Mem.Space.String()) }},
}, counted([]registry.Method[*Ptr]{
	{Name: "chunk", Sig: "chunk(i, n)", Doc: "The i-th of n equal parts (OutOfBounds if count is not divisible by n).", Fn: func(p *Ptr, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var i, n int
		if err := starlark.UnpackPositionalArgs("Ptr.chunk", args, kw, 2, &i, &n); err != nil {
			return nil, err
		}
		if n <= 0 || p.Count%int64(n) != 0 {
			return nil, errorf(errkind.OutOfBounds, "Ptr.chunk: %d elements do not split into %d equal parts", p.Count, n)
		}
		if i < 0 || i >= n {
			return nil, errorf(errkind.OutOfBounds, "Ptr.chunk: part %d of %d does not exist", i, n)
		}
		c := p.Count / int64(n)
		return notedView(th, p, int64(i)*c, c, ".chunk")
	}},
	{Name: "parts", Sig: "parts(n)", Doc: "The n nearly equal parts of the view, as a list of views: part i is elements [i*count//n, (i+1)*count//n), so sizes differ by at most one element (n >= 1; parts are empty when n > count).", Fn: func(p *Ptr, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var n int
		if err := starlark.UnpackPositionalArgs("Ptr.parts", args, kw, 1, &n); err != nil {
			return nil, err
		}
		if n < 1 {
			return nil, errorf(errkind.OutOfBounds, "Ptr.parts: %d parts (want at least 1)", n)
		}
		if int64(n) > maxParts {
			return nil, errorf(errkind.OutOfBounds, "Ptr.parts: %d parts is more than %d", n, maxParts)
		}
		// One list of views made in Go: a ring cuts each buffer into
		// world_size chunks, which in Starlark was most of its setup.
		views := make([]starlark.Value, n)
		for i := range views {
			lo, hi := partBound(int64(i), p.Count, int64(n)), partBound(int64(i+1), p.Count, int64(n))
			q := p.sub(lo, hi-lo)
			views[i] = &q
			noteView(th, &q)
		}
		return starlark.NewList(views), nil
	}},
	{Name: "slice", Sig: "slice(start, count)", Doc: "A view of count elements from start (OutOfBounds outside the view).", Fn: func(p *Ptr, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var start, count int
		if err := starlark.UnpackPositionalArgs("Ptr.slice", args, kw, 2, &start, &count); err != nil {
			return nil, err
		}
		return notedView(th, p, int64(start), int64(count), ".slice")
	}},
	{Name: "tobytes", Sig: "tobytes()", Doc: "Current contents as bytes, read without simulated cost (host code, checks, tests). In a kernel, stores a fused primitive left under way into the view finish first.", Fn: readsNow(func(p *Ptr, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs("Ptr.tobytes", args, kw, 0); err != nil {
			return nil, err
		}
		if p.Reg.Mem.NoData() {
			return nil, errTimingOnly("Ptr.tobytes")
		}
		if err := p.CheckSlot(p.Rank, "Ptr.tobytes()"); err != nil {
			return nil, err
		}
		return starlark.Bytes(p.Reg.View()), nil
	})},
	{Name: "tolist", Sig: "tolist()", Doc: "Current contents as a list of numbers, read without simulated cost. In a kernel, stores a fused primitive left under way into the view finish first.", Fn: readsNow(func(p *Ptr, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs("Ptr.tolist", args, kw, 0); err != nil {
			return nil, err
		}
		if p.Reg.Mem.NoData() {
			return nil, errTimingOnly("Ptr.tolist")
		}
		if err := p.CheckSlot(p.Rank, "Ptr.tolist()"); err != nil {
			return nil, err
		}
		return toList(p.DT, p.Reg.View(), int(p.Count)), nil
	})},
}))

// partBound is i·count/n rounded down, for 0 ≤ i ≤ n, in 128 bits (i·count
// may pass int64 for a huge view).
func partBound(i, count, n int64) int64 {
	hi, lo := bits.Mul64(uint64(i), uint64(count))
	q, _ := bits.Div64(hi, lo, uint64(n))
	return int64(q)
}

// maxParts bounds Ptr.parts: a list of views is memory the step limit
// does not count (a million views is far beyond any world size).
const maxParts = 1 << 20

func (p *Ptr) AttrNames() []string { return ptrTable.AttrNames() }

func (p *Ptr) Attr(name string) (starlark.Value, error) {
	if ptrTable.Has(name) {
		if err := p.CheckLease(); err != nil {
			return nil, fmt.Errorf("Ptr.%s: %w", name, err)
		}
	}
	return ptrTable.Attr(p, name)
}

func elemValue(dt dtype.DType, b []byte, i int) starlark.Value {
	if dt.IsFloat() {
		return starlark.Float(dtype.Get(dt, b, i))
	}
	return starlark.MakeInt64(dtype.GetInt(dt, b, i))
}

func toList(dt dtype.DType, b []byte, n int) *starlark.List {
	vals := make([]starlark.Value, n)
	for i := range vals {
		vals[i] = elemValue(dt, b, i)
	}
	return starlark.NewList(vals)
}

// Tile is data loaded into a PE. It is immutable; arithmetic makes new tiles
// whose Ready time accounts for the PE's math unit, so tile math costs
// simulated time without blocking the script until the result is used.
type Tile struct {
	prims.Tile // (first: its fields are the Tile's)
	k          *Kernel
}

var (
	_ starlark.HasAttrs  = (*Tile)(nil)
	_ starlark.HasBinary = (*Tile)(nil)
)

// errTimingOnly is the error of reading simulated values under
// --timing-only, where no bytes are kept: a kernel whose control flow
// depends on data cannot be timed without them.
func errTimingOnly(what string) error {
	return errorf(errkind.TimingOnly, "%s reads simulated data, which a timing-only run does not keep (tiles carry dtype and length only); run without --timing-only", what)
}

func (t *Tile) String() string {
	return fmt.Sprintf("Tile(dtype=%s, count=%d)", t.DT, t.Count)
}
func (t *Tile) Type() string          { return "Tile" }
func (t *Tile) Freeze()               {}
func (t *Tile) Truth() starlark.Bool  { return true }
func (t *Tile) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Tile") }

// tileTable is Tile's attributes and methods, each sorted by name.
var tileTable = registry.New("Tile", "", []registry.Field[*Tile]{
	{Name: "count", Type: "int", Doc: "Number of elements.", Get: func(t *Tile) starlark.Value { return starlark.MakeInt64(t.Count) }},
	{Name: "dtype", Type: "str", Doc: "Element type name.", Get: func(t *Tile) starlark.Value { return starlark.String(t.DT.String()) }},
}, counted([]registry.Method[*Tile]{
	{Name: "astype", Sig: "astype(dtype)", Doc: "A converted copy (costs math time).", Fn: func(t *Tile, th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var name string
		if err := starlark.UnpackPositionalArgs("Tile.astype", args, kw, 1, &name); err != nil {
			return nil, err
		}
		dt, err := dtype.Parse(name)
		if err != nil {
			return nil, fmt.Errorf("Tile.astype: %w", err)
		}
		out, err := t.k.Convert(&t.Tile, dt)
		if err != nil {
			return nil, fmt.Errorf("Tile.astype: %w", err)
		}
		return &Tile{Tile: out, k: t.k}, nil
	}},
	{Name: "tolist", Sig: "tolist()", Doc: "The values as a list (tests and small debug prints).", Fn: func(t *Tile, _ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs("Tile.tolist", args, kw, 0); err != nil {
			return nil, err
		}
		if t.k != nil && t.k.M.TimingOnly {
			return nil, errTimingOnly("Tile.tolist")
		}
		return toList(t.DT, t.Data, int(t.Count)), nil
	}},
}))

func (t *Tile) AttrNames() []string { return tileTable.AttrNames() }

func (t *Tile) Attr(name string) (starlark.Value, error) { return tileTable.Attr(t, name) }

var tileOps = map[syntax.Token]dtype.Op{syntax.PLUS: dtype.Add, syntax.MINUS: dtype.Sub, syntax.STAR: dtype.Mul, syntax.SLASH: dtype.Div}

// Binary implements tile ± * / tile-or-scalar.
func (t *Tile) Binary(tok syntax.Token, y starlark.Value, side starlark.Side) (starlark.Value, error) {
	op, ok := tileOps[tok]
	if !ok {
		return nil, nil
	}
	if t.k != nil {
		// (Tile math has no thread: the kernel that made t counts it.)
		if err := t.k.noteCall(); err != nil {
			return nil, err
		}
	}
	switch y := y.(type) {
	case *Tile:
		a, b := t, y
		if side == starlark.Right {
			a, b = y, t
		}
		return tileBinary(op, a, b, "Tile "+tok.String())
	case starlark.Int, starlark.Float:
		f, _ := starlark.AsFloat(y)
		var i int64
		if yi, ok := y.(starlark.Int); ok {
			var fits bool
			if i, fits = yi.Int64(); !fits && !t.DT.IsFloat() {
				// It used to become 0 silently.
				return nil, fmt.Errorf("Tile %s: %v does not fit in 64 bits", tok, y)
			}
		} else {
			i = int64(f)
		}
		right := side == starlark.Right
		if op == dtype.Div && !t.DT.IsFloat() {
			if !right && i == 0 {
				return nil, intDivZero(tok, "the divisor", -1)
			}
			if right {
				if e := t.ZeroElement(); e >= 0 {
					return nil, intDivZero(tok, "the divisor Tile", e)
				}
			}
		}
		return t.scalar(op, f, i, right)
	}
	return nil, nil
}

// intDivZero is the error of an integer Tile division by zero, which used
// to give 0 silently (floats give ±Inf or NaN, as IEEE 754 says).
func intDivZero(tok syntax.Token, what string, e int) error {
	at := ""
	if e >= 0 {
		at = fmt.Sprintf(" (element %d)", e)
	}
	return errorf(errkind.ZeroDivision, "Tile %s: integer division by zero: %s is 0%s", tok, what, at)
}

func tileBinary(op dtype.Op, a, b *Tile, what string) (*Tile, error) {
	out := &Tile{k: a.k}
	if err := a.k.Combine(&out.Tile, op, &a.Tile, &b.Tile, what, nil); err != nil {
		return nil, err
	}
	return out, nil
}
