package tl_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"kernbench/engine/machine"
	"kernbench/engine/prims"
	"kernbench/starlark/errkind"
	"kernbench/starlark/tl"
)

// errorKind is the kind of a tl failure as reports see it: a *tl.Error, a
// *machine.IPCQError or a *prims.Error anywhere in the chain.
func errorKind(err error) (kind, goType string) {
	var te *tl.Error
	var qe *machine.IPCQError
	var pe *prims.Error
	switch {
	case errors.As(err, &te):
		return te.ErrorKind().Name, "*tl.Error"
	case errors.As(err, &qe):
		return qe.Kind, "*machine.IPCQError"
	case errors.As(err, &pe):
		return pe.Kind, "*prims.Error"
	}
	return "", ""
}

// fixtureFrame is the position of the innermost fixture frame of err.
func fixtureFrame(err error) string {
	var ee *starlark.EvalError
	if !errors.As(err, &ee) {
		return ""
	}
	for i := len(ee.CallStack) - 1; i >= 0; i-- {
		fr := ee.CallStack[i]
		if strings.HasSuffix(fr.Pos.Filename(), ".star") {
			return fmt.Sprintf("%s: in %s", fr.Pos, fr.Name)
		}
	}
	return ""
}

// An uncaught tl error keeps its kind through Starlark's EvalError
// wrapping (errors.As), names it in the message, and points at the line of
// the failing call.
func TestErrorKinds(t *testing.T) {
	globals := loadFixture(t, "errors/raise.star")
	const file = "testdata/errors/raise.star"
	for _, tc := range []struct {
		fn     string
		rank   int
		kind   string
		goType string
		msg    string
		pos    string
	}{
		{"raise_invalid_direction_send", 0, "IpcqInvalidDirection", "*machine.IPCQError", `rank 0 has no direction "N" (installed: E, W)`, "6:16"},
		{"raise_invalid_direction_peer", 1, "IpcqInvalidDirection", "*machine.IPCQError", `rank 1 has no direction "up" (installed: E, W)`, "10:16"},
		{"raise_out_of_bounds", 0, "OutOfBounds", "*tl.Error", "Ptr.slice: elements [2, 5) are outside a view of 4 elements", "18:33"},
		{"raise_dtype_mismatch_store", 1, "DtypeMismatch", "*prims.Error", "tl.store: rank 1: tile is i32, ptr is f32", "22:17"},
		{"raise_dtype_mismatch_recv", 1, "DtypeMismatch", "*prims.Error", "rank 1 recv W: the message carries f32, dst is i32", "28:16"},
		{"raise_stale_slot", 1, "StaleSlot", "*prims.Error", "rank 1 fetch src: the rx slot 0 of direction W was overwritten by rank 0's send E #4 issued at testdata/errors/raise.star:33:20 (received as generation 1, now 2)", "38:17"},
		// PE 0's TCM is memory 2 (after the two cubes' SRAMs); the rx rings
		// take its first 2048 bytes.
		{"raise_send_buffer_hazard", 0, "SendBufferHazard", "*prims.Error", "tl.store: rank 0 writes tcm[pe 0]@0x20000000800+16 while rank 0's send E #0 issued at testdata/errors/raise.star:47:16 still reads it", "48:17"},
		{"raise_invalid_direction_recv_async", 1, "IpcqInvalidDirection", "*machine.IPCQError", `rank 1 has no direction "x0" (installed: E, W)`, "55:26"},
		// Rule PendingStoreHazard: a send, fetch or copy of a range an
		// unwaited tl.store_async / tl.copy_async still writes.
		{"raise_pending_store_hazard_send", 0, "PendingStoreHazard", "*prims.Error", "tl.send: rank 0 reads hbm", "62:16"},
		{"raise_pending_store_hazard_fetch", 0, "PendingStoreHazard", "*prims.Error", "tl.fetch: rank 0 reads tcm[pe 0]", "71:17"},
		{"raise_pending_store_hazard_copy", 0, "PendingStoreHazard", "*prims.Error", "tl.copy: rank 0 reads tcm[pe 0]", "77:16"},
		{"raise_out_of_memory", 0, "OutOfMemory", "*prims.Error", "tl.alloc: rank 0: tcm[pe 0]: cannot allocate 1048576 bytes (capacity 1048576, 2048 in use)", "42:17"},
	} {
		t.Run(tc.fn, func(t *testing.T) {
			w := newWorld(t, 2)
			err := w.run(t, fixtureFunc(t, globals, tc.fn))
			if err == nil {
				t.Fatal("run succeeded, want an error")
			}
			for r, e := range w.errs {
				if (e != nil) != (r == tc.rank) {
					t.Errorf("rank %d error = %v, want an error only on rank %d", r, e, tc.rank)
				}
			}
			kind, goType := errorKind(err)
			if kind != tc.kind || goType != tc.goType {
				t.Errorf("error kind = %q (%s), want %q (%s); error: %v", kind, goType, tc.kind, tc.goType, err)
			}
			// The classifier sees the same kind through the wrapping, exit 4.
			if k := errkind.Of(err); k.Name != tc.kind || k.Group != errkind.TL || k.Status != errkind.ExitRuntime {
				t.Errorf("errkind.Of = %s (group %v, exit %d), want the tl kind %s (exit 4)", k.Name, k.Group, k.Status, tc.kind)
			}
			if want := tc.kind + ": " + tc.msg; !strings.Contains(err.Error(), want) {
				t.Errorf("error = %q, want it to contain %q", err, want)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("rank %d: ", tc.rank)) {
				t.Errorf("error = %q, want it to start with the rank", err)
			}
			if got, want := fixtureFrame(err), fmt.Sprintf("%s:%s: in %s", file, tc.pos, tc.fn); got != want {
				t.Errorf("innermost fixture frame = %q, want %q", got, want)
			}
		})
	}
}

// callBuiltin calls tl's builtin name outside any process (for builtins
// that never block).
func callBuiltin(t *testing.T, k *tl.Kernel, name string, args ...starlark.Value) (starlark.Value, error) {
	t.Helper()
	fn, err := k.Attr(name)
	if err != nil || fn == nil {
		t.Fatalf("tl.%s: %v", name, err)
	}
	return starlark.Call(&starlark.Thread{Name: "test"}, fn, args, nil)
}

// tl.alloc scratch memory is freed by Release: the same allocation after a
// Release gets the same address, and every memory is back to what it held
// before (the TCM keeps only the IPCQ rx rings).
func TestAllocFreedOnRelease(t *testing.T) {
	w := newWorld(t, 2)
	pe := w.m.Ranks[0]
	before := []int64{pe.TCM.Used(), pe.SRAM.Used(), pe.HBM.Used()}
	k := w.kernel(0, nil)
	alloc := func(count int, space string) *tl.Ptr {
		t.Helper()
		v, err := callBuiltin(t, k, "alloc", starlark.MakeInt(count), starlark.String("f32"), starlark.String(space))
		if err != nil {
			t.Fatalf("tl.alloc(%d, f32, %s): %v", count, space, err)
		}
		return v.(*tl.Ptr)
	}
	var first []uint64
	for _, space := range []string{"tcm", "sram", "hbm"} {
		p, q := alloc(1000, space), alloc(1000, space)
		if p.Reg.Addr() == q.Reg.Addr() {
			t.Errorf("%s: two live allocations share address %#x", space, p.Reg.Addr())
		}
		first = append(first, p.Reg.Addr())
	}
	k.Release()
	after := []int64{pe.TCM.Used(), pe.SRAM.Used(), pe.HBM.Used()}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("bytes in use (tcm, sram, hbm) after Release (-before +after):\n%s", diff)
	}
	var again []uint64
	for _, space := range []string{"tcm", "sram", "hbm"} {
		again = append(again, alloc(1000, space).Reg.Addr())
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("addresses after Release (-first +again):\n%s", diff)
	}
	k.Release()
	k.Release() // idempotent
	if got := pe.TCM.Used(); got != before[0] {
		t.Errorf("tcm in use after a second Release = %d, want %d", got, before[0])
	}
}

// A kernel's scratch memory is freed when it returns, on every rank.
func TestAllocFreedAfterKernel(t *testing.T) {
	globals := loadFixture(t, "ptr.star")
	w := newWorld(t, 2)
	if err := w.run(t, fixtureFunc(t, globals, "test_alloc_every_space")); err != nil {
		t.Fatal(err)
	}
	rings := int64(2 * testIPCQ().NSlots * int(testIPCQ().SlotSize)) // E and W
	for r, pe := range w.m.Ranks {
		if got := pe.TCM.Used(); got != rings {
			t.Errorf("rank %d: tcm in use = %d, want the rx rings' %d", r, got, rings)
		}
		if got := pe.HBM.Used() + pe.SRAM.Used(); got != 0 {
			t.Errorf("rank %d: hbm+sram in use = %d, want 0", r, got)
		}
	}
}

// Exhausting a space fails with OutOfMemory and names the rank; the failed
// allocation takes nothing.
func TestAllocExhaustion(t *testing.T) {
	w := newWorld(t, 3)
	k := w.kernel(2, nil)
	used := w.m.Ranks[2].TCM.Used()
	_, err := callBuiltin(t, k, "alloc", starlark.MakeInt(1<<18), starlark.String("f32"))
	if kind, _ := errorKind(err); kind != "OutOfMemory" {
		t.Fatalf("tl.alloc of the whole TCM: error %v (kind %q), want OutOfMemory", err, kind)
	}
	if !strings.Contains(err.Error(), "rank 2") {
		t.Errorf("error %q does not name rank 2", err)
	}
	if got := w.m.Ranks[2].TCM.Used(); got != used {
		t.Errorf("tcm in use after a failed alloc = %d, want %d", got, used)
	}
	// What is left still fits.
	free := testParams().Tcm.Capacity - used
	if _, err := callBuiltin(t, k, "alloc", starlark.MakeInt64(free), starlark.String("u8")); err != nil {
		t.Errorf("tl.alloc of the remaining %d bytes: %v", free, err)
	}
	k.Release()
}

// The Builtins table is the single source of the reference docs: names are
// unique and sorted, signatures start with the name, every entry has a doc,
// and the tl value exposes exactly the builtins, the attributes and the
// "load" alias.
func TestBuiltinsTable(t *testing.T) {
	seen := map[string]bool{}
	var names []string
	for _, b := range tl.Builtins() {
		if seen[b.Name] {
			t.Errorf("builtin %q is registered twice", b.Name)
		}
		seen[b.Name] = true
		names = append(names, b.Name)
		if !strings.HasPrefix(b.Sig, b.Name+"(") {
			t.Errorf("builtin %q: signature %q does not start with %q", b.Name, b.Sig, b.Name+"(")
		}
		if strings.TrimSpace(b.Doc) == "" {
			t.Errorf("builtin %q has no doc", b.Name)
		}
		if b.Fn == nil {
			t.Errorf("builtin %q has no implementation", b.Name)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("Builtins are not sorted by name: %v", names)
	}
	for _, a := range tl.Attributes() {
		if seen[a.Name] {
			t.Errorf("attribute %q clashes with another builtin or attribute", a.Name)
		}
		seen[a.Name] = true
		if a.Type == "" || strings.TrimSpace(a.Doc) == "" || a.Get == nil {
			t.Errorf("attribute %q: type %q, doc %q, getter set %v; want all set", a.Name, a.Type, a.Doc, a.Get != nil)
		}
	}

	// The tl builtins users are promised; each must be registered.
	for _, name := range []string{"rank", "world_size", "program_id", "directions", "slot_size", "n_slots", "peer",
		"send", "recv", "recv_async", "wait", "flush", "fetch", "store", "fetch_async", "store_async", "copy_async",
		"copy", "reduce", "zeros", "full", "alloc", "time", "trace", "maximum", "minimum"} {
		if !seen[name] {
			t.Errorf("tl.%s (a promised tl builtin) is neither in Builtins nor in Attributes", name)
		}
	}

	w := newWorld(t, 2)
	k := w.kernel(0, nil)
	want := []string{"load"}
	for name := range seen {
		want = append(want, name)
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, k.AttrNames()); diff != "" {
		t.Errorf("tl AttrNames (-want +got):\n%s", diff)
	}
	for _, b := range tl.Builtins() {
		v, err := k.Attr(b.Name)
		if err != nil {
			t.Fatal(err)
		}
		sb, ok := v.(*starlark.Builtin)
		if !ok {
			t.Errorf("tl.%s is a %T, want a *starlark.Builtin", b.Name, v)
			continue
		}
		if sb.Name() != "tl."+b.Name {
			t.Errorf("tl.%s is named %q, want %q (messages read \"tl.%s: …\")", b.Name, sb.Name(), "tl."+b.Name, b.Name)
		}
	}
	load, _ := k.Attr("load")
	fetch, _ := k.Attr("fetch")
	if load != fetch {
		t.Errorf("tl.load = %v, want the fetch builtin %v", load, fetch)
	}
	// A missing member is an error with kernbench check's wording and
	// hint; hasattr and getattr with a default still see no member.
	for name, want := range map[string]string{
		"no_such_member": "tl has no .no_such_member field or method",
		"sned":           "tl has no .sned field or method (did you mean tl.send?)",
	} {
		if v, err := k.Attr(name); v != nil || err == nil || err.Error() != want {
			t.Errorf("tl.%s = %v, %v; want nil, %q", name, v, err, want)
		}
	}
	th := &starlark.Thread{Name: "attr"}
	got, err := starlark.ExecFileOptions(&syntax.FileOptions{}, th, "attr.star",
		`r = (hasattr(tl, "sned"), getattr(tl, "sned", None), hasattr(tl, "send"))`,
		starlark.StringDict{"tl": k})
	if err != nil {
		t.Fatal(err)
	}
	if r := got["r"].String(); r != "(False, None, True)" {
		t.Errorf("hasattr/getattr on tl = %s, want (False, None, True)", r)
	}
}

// recorder is a tl.Observer that keeps markers.
type recorder struct{ got []string }

func (r *recorder) Marker(k *tl.Kernel, name string, args starlark.Tuple) {
	r.got = append(r.got, fmt.Sprintf("rank %d %s %s", k.Rank, name, args))
}

// runInline runs kernel(rank, tl) from src on a fresh world of n ranks,
// with each rank's tl value adjusted by setup.
func runInline(t *testing.T, n int, src string, setup func(k *tl.Kernel)) *world {
	t.Helper()
	globals := execSource(t, "inline.star", []byte(src))
	w := newWorld(t, n)
	fn := fixtureFunc(t, globals, "kernel")
	if setup != nil {
		// Wrap: make the kernel, adjust it, then call fn.
		inner := fn
		fn = starlark.NewBuiltin("setup", func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			setup(kw[0][1].(*tl.Kernel))
			return starlark.Call(th, inner, args, kw)
		})
	}
	if err := w.run(t, fn); err != nil {
		t.Fatal(err)
	}
	return w
}

// tl.trace hands the marker and its keyword arguments to the observer.
func TestTraceObserver(t *testing.T) {
	rec := &recorder{}
	runInline(t, 2, `
def kernel(rank, tl):
    assert.eq(tl.trace("start"), None)
    tl.trace("step", i = rank, what = "x")
    assert.fails(lambda: tl.trace(), "tl.trace: got 0 arguments, want 1")
    assert.fails(lambda: tl.trace(1), "tl.trace: for parameter 1: got int, want string")
`, func(k *tl.Kernel) { k.Obs = rec })
	want := []string{
		"rank 0 start ()", `rank 0 step (("i", 0), ("what", "x"))`,
		"rank 1 start ()", `rank 1 step (("i", 1), ("what", "x"))`,
	}
	if diff := cmp.Diff(want, rec.got); diff != "" {
		t.Errorf("markers (-want +got):\n%s", diff)
	}
	// Without an observer tl.trace is a no-op.
	runInline(t, 1, `
def kernel(rank, tl):
    assert.eq(tl.trace("start", a = 1), None)
`, nil)
}

// Stats count what each rank did: sends, receives, loads (including
// tl.reduce's operand fetches), stores, tile math and tl calls, and what
// the host memory estimate counts: tl.alloc bytes and buffers, and the
// bytes of the tiles tl calls returned (two fetches and tl.maximum).
func TestStats(t *testing.T) {
	w := runInline(t, 2, `
def kernel(rank, tl):
    p = tl.alloc(4, "f32")
    if rank == 0:
        tl.send("E", p)
        tl.send("E", p)
        tl.flush()
    else:
        tl.recv("W")
        tl.recv("W", dst = p)
        t = tl.fetch(p) + 1
        t = tl.maximum(t * 2, t).astype("f64")
        tl.store(tl.alloc(4, "f64"), t)
        tl.reduce(p, p, tl.fetch(p))
`, nil)
	got := []tl.Stats{*w.kernels[0].Stats, *w.kernels[1].Stats}
	want := []tl.Stats{
		{Counts: prims.Counts{Send: 2, AllocBytes: 16, Allocs: 1}, Calls: 4},
		{Counts: prims.Counts{Recv: 2, Load: 3, Store: 2, Math: 5, AllocBytes: 48, Allocs: 2}, Calls: 9, TileBytes: 48},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats per rank (-want +got):\n%s", diff)
	}
}

// Without an installed process group the identity and geometry still
// answer, and IPCQ calls fail with IpcqInvalidDirection.
func TestNoGroup(t *testing.T) {
	w := newWorld(t, 1)
	k := tl.New(&tl.Kernel{M: w.m, PE: w.m.Ranks[0], Rank: 0, World: 1})
	am := execSource(t, "nogroup.star", []byte(`
def check(tl):
    assert.eq(tl.directions(), [])
    assert.eq(tl.slot_size, 0)
    assert.eq(tl.n_slots, 0)
    assert.eq(tl.world_size, 1)
    assert.eq(tl.flush(), None)
    p = tl.alloc(1, "f32")
    for f in [lambda: tl.peer("E"), lambda: tl.send("E", p), lambda: tl.recv(), lambda: tl.recv("E")]:
        assert.fails(f, "IpcqInvalidDirection: tl.[a-z]+: no IPCQ process group is installed for rank 0")
`))
	th := &starlark.Thread{Name: "nogroup"}
	setReporter(th, t)
	if _, err := starlark.Call(th, am["check"], starlark.Tuple{k}, nil); err != nil {
		t.Fatal(err)
	}
	k.Release()
}

// The same kernels on a fresh world end at the same simulated time after
// the same number of events.
func TestDeterministic(t *testing.T) {
	globals := loadFixture(t, "ipcq.star")
	for _, fn := range []string{"test_recv_any_round_robin", "test_backpressure_blocks_until_credit", "test_stale_slot"} {
		var runs []string
		for range 2 {
			w := newWorld(t, 2)
			if err := w.run(t, fixtureFunc(t, globals, fn)); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, fmt.Sprintf("t=%v events=%d", w.s.Now(), w.s.Events()))
		}
		if runs[0] != runs[1] {
			t.Errorf("%s: first run %s, second run %s", fn, runs[0], runs[1])
		}
	}
}

// Forwarding a return_slot Ptr (the zero-copy "use the slot directly"
// pattern): the forward's DMA reads the slot when it completes, so if the
// ring wraps onto that slot first, the forward must fail (StaleSlot or
// SendBufferHazard) rather than deliver the later message's bytes.
// Rank 2 feeds rank 3 (same cube); rank 3 forwards the first message to
// rank 4 across the UCIe link (~78 ns), while rank 2's fifth message,
// released by rank 3's immediate credit, lands in the same slot after
// ~46 ns.
func TestForwardedSlotOverwrittenInFlight(t *testing.T) {
	globals := execSource(t, "forward.star", []byte(`
def kernel(rank, tl):
    n = tl.slot_size // 4
    if rank == 2:
        srcs = [tl.alloc(n, "f32") for _ in range(tl.n_slots + 1)]
        for i, p in enumerate(srcs):
            tl.store(p, tl.full(n, i, "f32"))
        for p in srcs:
            tl.send("E", p)
        tl.flush()
    elif rank == 3:
        first = tl.recv("W")
        tl.send("E", first)  # zero-copy forward of the rx slot
        for _ in range(tl.n_slots):
            tl.recv("W")
        tl.flush()
    elif rank == 4:
        got = tl.fetch(tl.recv("W")).tolist()
        if got != [0.0] * n:
            fail("rank 4 received %s..., want the first message (zeros)" % got[:4])
`))
	w := newWorld(t, 8)
	err := w.run(t, fixtureFunc(t, globals, "kernel"))
	if err == nil {
		return // the forward read the first message's bytes
	}
	if kind, _ := errorKind(err); kind == "StaleSlot" || kind == "SendBufferHazard" {
		return // detected
	}
	t.Errorf("forwarding an rx slot that is overwritten in flight: %v; want the first message delivered or a StaleSlot/SendBufferHazard error", err)
}

// Each kernel's attributes are its own values under the names shared by
// every kernel (attrIndex): a field is the kernel's, a builtin is bound to
// it.
func TestAttrsAreEachKernelsOwn(t *testing.T) {
	w := newWorld(t, 2)
	for rank := range 2 {
		k := w.kernel(rank, nil)
		for _, a := range tl.Attributes() {
			got, err := k.Attr(a.Name)
			if err != nil {
				t.Fatal(err)
			}
			if want := a.Get(k); got.String() != want.String() || got.Type() != want.Type() {
				t.Errorf("rank %d: tl.%s = %v, want %v", rank, a.Name, got, want)
			}
		}
		r, _ := k.Attr("rank")
		if r != starlark.MakeInt(rank) {
			t.Errorf("rank %d: tl.rank = %v", rank, r)
		}
		send, _ := k.Attr("send")
		if sb, ok := send.(*starlark.Builtin); !ok || sb.Receiver() != k {
			t.Errorf("rank %d: tl.send is %v, not bound to the rank's tl", rank, send)
		}
	}
}

// A tl.spawn thread's tl has the kernel's attribute names (dir, hasattr,
// getattr(tl, "load")) with its own values: its builtins are bound to it,
// not to the kernel that spawned it. A Kernel that New did not make has
// no attributes (an error naming none, not a panic).
func TestThreadAttrsAreTheThreadsOwn(t *testing.T) {
	runInline(t, 2, `
# (A thread's Starlark thread has no test reporter: it returns what the
# kernel checks.)
def worker(t, parent_fetch, parent_dir):
    return [dir(t) == parent_dir, getattr(t, "load") == t.fetch, t.fetch != parent_fetch,
            hasattr(t, "load"), hasattr(t, "spawn"), hasattr(t, "nope"),
            t.rank, t.world_size, t.slot_size, t.redop]

def kernel(rank, tl):
    assert.eq(getattr(tl, "load"), tl.fetch)
    assert.eq(tl.wait(tl.spawn(worker, tl.fetch, dir(tl))),
              [True, True, True, True, True, False, rank, tl.world_size, tl.slot_size, tl.redop])
`, nil)

	var k tl.Kernel
	if v, err := k.Attr("rank"); v != nil || err == nil || err.Error() != "tl has no .rank field or method" {
		t.Errorf("Attr on a Kernel New did not make = %v, %v; want nil and the no-such-member error", v, err)
	}
	if names := k.AttrNames(); len(names) != 0 {
		t.Errorf("AttrNames of a Kernel New did not make = %v, want none", names)
	}
}

// Retention counts the views and handles the kernels still hold at the
// peak, not those they made and dropped, and counts the same run after
// run (reachability after a full collection is the program's).
func TestRetention(t *testing.T) {
	const src = `
def kernel(rank, tl):
    buf = tl.alloc(64, "f32")
    kept = [buf.slice(i % 64, 1) for i in range(20000)]
    for i in range(40000):
        v = buf.slice(i % 64, 1)
    hs = [tl.fetch_async(buf.slice(0, 16)) for i in range(3000)]
    for h in hs:
        tl.wait(h)
`
	count := func() tl.Retention {
		r := tl.NewRetention(100, 500)
		defer r.Close()
		runInline(t, 2, src, func(k *tl.Kernel) { k.Stats.Retained = r })
		return *r
	}
	got := count()
	t.Logf("peak views %d, handles %d (%d bytes), %d looks at %d values made", got.PeakViews, got.PeakHandles, got.PeakHandleBytes, got.Looks, got.Made())
	// Both ranks keep 20000 views, and at the last look 3000 handles and
	// their views; the looks see a view or two in flight more.
	if got.PeakViews < 2*20000 || got.PeakViews > 2*23000+64 || got.PeakHandles > 2*3000 {
		t.Errorf("peak views %d, handles %d: want about %d views (kept) and at most %d handles", got.PeakViews, got.PeakHandles, 2*20000, 2*3000)
	}
	if got.Looks < 3 {
		t.Errorf("%d looks at %d values made, want one per eighth of growth", got.Looks, got.Made())
	}
	again := count()
	if diff := cmp.Diff([]int64{got.PeakViews, got.PeakHandles, got.PeakHandleBytes}, []int64{again.PeakViews, again.PeakHandles, again.PeakHandleBytes}); diff != "" {
		t.Errorf("a second run counts differently (-first +second):\n%s", diff)
	}
}

// A look that could not raise the peak needs no collection: once a
// kernel drops what it kept, the sample holds fewer values than the peak
// until it makes as many again, and the looks meanwhile (a full
// collection each) are skipped; the peak is the one every look finds.
func TestRetentionSkipsLooksUnderThePeak(t *testing.T) {
	const src = `
def kernel(rank, tl):
    buf = tl.alloc(64, "f32")
    kept = [buf.slice(i % 64, 1) for i in range(40000)]
    kept = None
    for i in range(60000):
        v = buf.slice(i % 64, 1)
`
	r := tl.NewRetention(100, 500)
	defer r.Close()
	runInline(t, 1, src, func(k *tl.Kernel) { k.Stats.Retained = r })
	t.Logf("peak views %d, %d looks, %d skipped, at %d values made", r.PeakViews, r.Looks, r.Skipped, r.Made())
	// The looks at 1, 8193, ..., 32769 values made see the table grow,
	// the one at 40961 finds it dropped; of the six after it, those at
	// 49153 to 73729 and 93313 could not find more than 32768 views.
	if r.PeakViews != 32776 {
		t.Errorf("peak views %d, want the 32776 the look at 32769 values made finds (the buffer and the table's first 32768, a sampled view counting for 8)", r.PeakViews)
	}
	if r.Looks != 7 || r.Skipped != 5 {
		t.Errorf("%d looks, %d skipped: want 7 and 5", r.Looks, r.Skipped)
	}
}

// A fine Retention (a probe of a smaller world) looks about once per
// value a rank makes whatever its world: a look is a full collection,
// whose cost grows with the world, and with a fixed gap a 16,384-rank
// probe looked 47 times (18 s of a 65,536-rank run's 24).
func TestFineRetentionLooksPerValueARank(t *testing.T) {
	const src = `
def kernel(rank, tl):
    buf = tl.alloc(64, "f32")
    kept = [buf.slice(i, 1) for i in range(12)]
    if rank > 0:
        tl.recv("W")
    tl.send("E", buf.slice(0, 1))
    if rank == 0:
        tl.recv("W")
`
	for _, ranks := range []int{256, 1024} {
		r := tl.NewRetention(100, 500)
		r.Fine(ranks)
		params := testParams()
		params.Sips = ranks / (params.CubesPerSip * params.PesPerCube)
		w := newWorldParams(t, ranks, params, testIPCQ())
		inner := fixtureFunc(t, execSource(t, "inline.star", []byte(src)), "kernel")
		fn := starlark.NewBuiltin("setup", func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			kw[0][1].(*tl.Kernel).Stats.Retained = r
			return starlark.Call(th, inner, args, kw)
		})
		if err := w.run(t, fn); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if r.Looks < 8 || r.Looks > 14 {
			t.Errorf("%d ranks making 12 views each: %d looks at %d values made, want about 12", ranks, r.Looks, r.Made())
		}
		if r.PeakViews < int64(ranks*12) {
			t.Errorf("%d ranks keeping 12 views each: peak %d views, want %d", ranks, r.PeakViews, ranks*12)
		}
	}
}
