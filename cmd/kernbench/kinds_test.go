package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"

	"kernbench/cmd/kernbench/internal/compare"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

// kindCase is one input that makes kernbench fail with kind.
type kindCase struct {
	kind *errkind.Kind
	// bad names a case of the bad-input corpus (testdata/bad): its file,
	// its arguments and its first stderr fragment.
	bad string
	// script names an archive of testdata/script whose files (files)
	// the command uses.
	script string
	files  []string
	// inline are files written for the case (name: content).
	inline map[string]string
	args   string // kernbench arguments, split on blanks (unless bad)
	stderr string // a fragment of the diagnostic (kernbench test reports on stdout)
}

// kindCases has one input per kind of errkind.Table that a command can
// end with; kindsBelowTheCLI says why the others cannot, and where they
// are tested instead.
var kindCases = []kindCase{
	// The run kinds.
	{kind: errkind.Usage, args: "run ring_allreduce --dtype nope --count 8", stderr: `--dtype: unknown dtype "nope"`},
	{kind: errkind.Config, bad: "yaml_unknown_key_top.yaml"},
	{kind: errkind.Load, bad: "star_syntax_error.star"},
	{kind: errkind.Init, bad: "star_custom_without_neighbors.star"},
	{kind: errkind.MSCCL, bad: "xml_avg_partial_step.xml"},
	// /dev/full takes the file but no byte of it: the trace cannot be
	// written once the run is done.
	{kind: errkind.IO, args: "run ring_allreduce --world-size 2 --count 64 --trace /dev/full", stderr: "--trace: write /dev/full: no space left on device"},
	{kind: errkind.Export, args: "run ring_allreduce --world-size 2 --count 64 --redop avg --export-msccl out.xml", stderr: "which MSCCL XML cannot express"},
	{kind: errkind.MemoryLimit, bad: "star_bytes_too_big_in_hbm.star"},
	{kind: errkind.CheckFailed, bad: "star_check_inconsistent.star"},
	{kind: errkind.Deadlock, bad: "star_deadlock.star"},
	{kind: errkind.WaitTimeout, bad: "star_slow_link_not_deadlock.star"},
	{kind: errkind.Watchdog, bad: "star_watchdog_sim_time.star"},
	{kind: errkind.FaultStopped, inline: map[string]string{"faults.yaml": "system:\n  faults:\n    - {link: \"ucie c0->c1\", stop_at_ns: 1000}\n"},
		args: "run ring_allreduce --world-size 16 --count 1024 --timing-only --config faults.yaml", stderr: "a fault stopped the run: ucie c0->c1"},
	{kind: errkind.StepLimit, bad: "star_runaway_loop.star"},
	{kind: errkind.NoTimeProgress, script: "no_time_progress.txtar", files: []string{"poll.star"},
		args: "run poll.star --world-size 2 --bytes 4K --timing-only", stderr: "NoTimeProgress: the kernel made 1000512 calls"},
	{kind: errkind.HostMemory, script: "max_memory.txtar", files: []string{"hoard.star"},
		args: "run hoard.star --world-size 2 --count 65536 --max-memory 64M", stderr: "over --max-memory 64.0 MiB"},
	{kind: errkind.WrongResult, script: "wrong_result.txtar", files: []string{"copyonly.star"},
		args: "run copyonly.star --world-size 4 --count 64", stderr: "256 wrong element(s) at 256 bytes"},
	{kind: errkind.TestFailed, script: "test_cmd.txtar", files: []string{"bad_test.star", "hang.star", "order.star"},
		args: "test -run wrong_count bad_test.star", stderr: "--- FAIL: test_wrong_count"},
	{kind: errkind.Runtime, bad: "star_runtime_fail.star"},
	{kind: errkind.Unreceived, bad: "star_never_received_position.star"},
	{kind: errkind.Unfinished, script: "l3_misuse.txtar", files: []string{"queued.star"},
		args: "run queued.star --strict", stderr: "L3 main returned with unfinished work"},

	// The tl kinds.
	{kind: errkind.IpcqInvalidDirection, bad: "star_unknown_direction.star"},
	{kind: errkind.IpcqMessageTooLarge, inline: map[string]string{"big.star": `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 0:
        tl.send("E", sendbuf, piece_bytes = 2)
    else:
        tl.recv("W")
`}, args: "run big.star --world-size 2 --count 64", stderr: "one f32 element (4 bytes) exceeds a message of 2 bytes"},
	{kind: errkind.OutOfBounds, bad: "star_oob_slice.star"},
	{kind: errkind.DtypeMismatch, bad: "star_dtype_store.star"},
	{kind: errkind.StaleSlot, bad: "star_stale_slot.star"},
	{kind: errkind.SlotWrite, bad: "star_slot_write.star"},
	{kind: errkind.SendBufferHazard, bad: "star_send_buffer_hazard.star"},
	{kind: errkind.DirectionInUse, inline: map[string]string{"inuse.star": `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 0:
        tl.send_async("E", sendbuf)
        tl.send("E", sendbuf)
    else:
        tl.recv("W")
`}, args: "run inuse.star --world-size 2 --count 64", stderr: "the send side of E is still used by the tl.send_async issued at inuse.star:4:22"},
	{kind: errkind.LocalOperandHazard, inline: map[string]string{"operand.star": `
def reduce_copy(tl, y):
    tl.recv_reduce_copy("W", y, y)

def kernel(sendbuf, recvbuf, rank, world_size, tl):
    y = tl.alloc(3 * (tl.slot_size // 4), "f32", "hbm")
    if rank == 0:
        tl.spawn(reduce_copy, y)
        tl.fetch(tl.alloc(1, "f32", "hbm"))  # the thread is inside the primitive
        tl.store(y.slice(0, 1), tl.full(1, 9.0, "f32"))
    else:
        tl.send("E", y)
`}, args: "run operand.star --world-size 2 --count 64", stderr: "still reads it as its local operand"},
	{kind: errkind.TLOutOfMemory, bad: "star_alloc_huge.star"},
	{kind: errkind.TimingOnly, script: "timing_only.txtar", files: []string{"peek.star"},
		args: "run peek.star --world-size 2 --count 16 --timing-only", stderr: "Ptr.tolist reads simulated data"},
	{kind: errkind.PendingStoreHazard, bad: "star_pending_store_hazard.star"},
	{kind: errkind.WriteWriteHazard, bad: "star_write_write_hazard.star"},
	{kind: errkind.ZeroDivision, bad: "star_tile_int_division_by_zero.star"},

	// The L3/L2 kinds an L3 main raises.
	{kind: errkind.L3Timeout, inline: map[string]string{"wait.star": `
def main(orch):
    r = orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 64)
    r.counter(0).wait(1, WaitCmp.EQ, 0.000001)
`}, args: "run wait.star", stderr: "counter(0).wait timed out after 1000ns"},
	{kind: errkind.L3ValueError, inline: map[string]string{"nowait.star": `
def main(orch):
    r = orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 64)
    r.counter(0).wait(1, WaitCmp.EQ, 0)
`}, args: "run nowait.star", stderr: "counter.wait: timeout must be finite and > 0 seconds, got 0"},
	{kind: errkind.BadArgument, inline: map[string]string{"chip.star": `
def main(orch):
    orch.create_l3_l2_region(worker_id = 99, payload_bytes = 64, counter_bytes = 64)
`}, args: "run chip.star", stderr: "worker_id 99 is not a chip of this machine"},
	// L2 overwrites the queue's first output descriptor through the
	// queue's region and advances its tail: L3 reads a broken descriptor.
	{kind: errkind.InvalidDescriptor, inline: map[string]string{"desc.star": `
def l2(l2):
    ep = l2.region_endpoint(l2.scalars[:6])
    ep.payload_write(l2.scalars[6], b"\xff" * 32)
    ep.signal_notify(ep.counter_addr(l2.scalars[7]), 1)

def main(orch):
    q = orch.create_worker_chip_queue(depth = 2, input_arena_bytes = 64, output_arena_bytes = 64)
    orch.submit_next_level(l2, q.region.descriptor_scalars() + [q.layout.output_desc_offset, q.layout.output_desc_tail_offset])
    q.output.peek(0.001)
`}, args: "run desc.star", stderr: "output descriptor seq mismatch"},
	{kind: errkind.Ownership, script: "l3_misuse.txtar", files: []string{"stale_input.star"},
		args: "run stale_input.star", stderr: "stale view: input handle seq 1 was released"},
	{kind: errkind.RemoteAborted, inline: map[string]string{"abort.star": `
def l2(l2):
    ep = l2.spsc_queue_endpoint(l2.decode_endpoint_binding(l2.scalars))
    h = ep.input().peek(1000000)
    ep.input().release(h)
    ep.input().release(h)

def main(orch):
    q = orch.create_worker_chip_queue(depth = 2, input_arena_bytes = 64, output_arena_bytes = 64)
    orch.submit_next_level(l2, q.chip_task_arg_scalars())
    q.input.enqueue(b"x", timeout = 0.001)
    q.output.peek(0.001)
`}, args: "run abort.star", stderr: "kind=REMOTE_ABORTED"},
	// L2 writes a counter in the line of the queue's input tail, which L3
	// writes when it enqueues: the queue's counter operation fails.
	{kind: errkind.EndpointError, inline: map[string]string{"line.star": `
def l2(l2):
    ep = l2.region_endpoint(l2.scalars[:6])
    ep.signal_notify(ep.counter_addr(l2.scalars[6]), 0)
    ep.signal_notify(ep.counter_addr(l2.scalars[7]), 1)

def main(orch):
    q = orch.create_worker_chip_queue(depth = 2, input_arena_bytes = 64, output_arena_bytes = 64)
    orch.submit_next_level(l2, q.region.descriptor_scalars() + [q.layout.input_desc_tail_offset, q.layout.output_desc_tail_offset])
    q.region.counter(q.layout.output_desc_tail_offset).wait(1, WaitCmp.EQ, 0.001)
    q.input.enqueue(b"x", timeout = 0.001)
`}, args: "run line.star", stderr: "kind=ENDPOINT_ERROR"},
	{kind: errkind.L3OutOfBounds, inline: map[string]string{"oob.star": `
def main(orch):
    r = orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 64)
    r.payload_read(60, 8)
`}, args: "run oob.star", stderr: "payload_read: OUT_OF_BOUNDS"},
	{kind: errkind.BadPayloadRange, inline: map[string]string{"nopayload.star": `
def main(orch):
    orch.create_l3_l2_region(payload_bytes = 0, counter_bytes = 64)
`}, args: "run nopayload.star", stderr: "payload_bytes must be > 0"},
	{kind: errkind.BadCounterRange, inline: map[string]string{"nocounter.star": `
def main(orch):
    orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 0)
`}, args: "run nocounter.star", stderr: "counter_bytes must be a positive multiple of 4"},
	{kind: errkind.Released, inline: map[string]string{"freed.star": `
def main(orch):
    r = orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 64)
    r.free()
    r.payload_read(0, 4)
`}, args: "run freed.star", stderr: "region has been released"},
	{kind: errkind.SingleWriter, inline: map[string]string{"writers.star": `
def l2(l2):
    ep = l2.region_endpoint(l2.scalars)
    ep.signal_notify(ep.counter_addr(4), 1)

def main(orch):
    r = orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 64)
    orch.submit_next_level(l2, r.descriptor_scalars())
    r.counter(4).wait(1, WaitCmp.EQ, 0.001)
    r.counter(0).notify(1)
`}, args: "run writers.star", stderr: "but the line belongs to L2"},
}

// kindsBelowTheCLI are the kinds no input makes a command end with, each
// with the reason and the test that checks it at the lowest level that
// produces it.
var kindsBelowTheCLI = map[*errkind.Kind]string{
	errkind.Phase2Mismatch: "the hazard checks refuse every kernel whose replay could differ: a mismatch is a kernbench bug; TestKindsBelowTheCLI gives checkResults a mismatching row",
	errkind.Internal:       "a panic, a kernbench bug; TestKindsBelowTheCLI panics under mainIn's recovery, and ccl's TestFailuresAreBuiltWithKind keeps every Failure kinded",
	errkind.Invariant:      "a broken engine invariant (I2-I7), a kernbench bug (I1 alone, a message never received, is UnreceivedMessages); machine's TestIPCQ_Paranoid_CatchesBrokenPointerI2 breaks I2 and errkind's TestOf classifies the InvariantError",
	// The wall-clock limits: a test fires their watchdog itself (no clock:
	// where a run is when a timer fires depends on the machine's load).
	errkind.Timeout:     "--timeout is a wall-clock limit; ccl's TestTimeoutStopsTheScriptWhereItIs fires its watchdog at a chosen statement and checks exit 3 and the kind",
	errkind.TestTimeout: "test -timeout is a wall-clock limit; testrun's TestFileTimeout fires its watchdog at a chosen statement and checks the tests it fails",
	// The L2 endpoints record these in endpoint.error() and return
	// None/False (docs/l3l2.md): an L2 function goes on, and L3 never decodes
	// descriptors or signals through an L2 endpoint. errkind's
	// TestEveryL3KindHasItsEngineError classifies the engine errors that
	// carry them, which engine/l3l2's tests raise.
	errkind.BadDescriptor:   "an L2 endpoint's init error, recorded",
	errkind.SignalTimeout:   "an L2 signal_wait's timeout, recorded",
	errkind.SignalProtocol:  "an L2 signal operation's bad NotifyOp or WaitCmp, recorded (L3's is BAD_ARGUMENT)",
	errkind.LocalOperation:  "a region operation failing after it was issued: none fails once validated",
	errkind.BadMagicVersion: "an L2 region descriptor's decoding, recorded as BAD_DESCRIPTOR",
	errkind.BadRegionID:     "an L2 region descriptor's decoding, recorded as BAD_DESCRIPTOR",
	errkind.BadScalarCount:  "an L2 region descriptor's decoding, recorded as BAD_DESCRIPTOR",
	errkind.Poisoned:        "the failure that poisons a region raises first and ends L3 main; L2 records it",
}

// TestEveryKindFromTheCLI runs one input per kind through the kernbench
// process (the test binary under that name, as testscript's exec runs
// it) and checks the three places a failure is told together: the
// process's exit status, the last line of stderr naming the kind with
// that status, and with --json (kernbench run) the report's error.kind; a
// wrong result's report has no error but rows that are not verified.
// kernbench check and test have no --json report of a failure.
func TestEveryKindFromTheCLI(t *testing.T) {
	bin, err := exec.LookPath("kernbench")
	if err != nil {
		t.Fatalf("no kernbench in PATH (TestMain puts the test binary there): %v", err)
	}
	covered := map[*errkind.Kind]bool{}
	for _, c := range kindCases {
		if covered[c.kind] {
			t.Errorf("%s (exit %d) has two cases", c.kind.Name, c.kind.Status)
		}
		covered[c.kind] = true
		if _, ok := kindsBelowTheCLI[c.kind]; ok {
			t.Errorf("%s (exit %d) has a case and is listed below the CLI", c.kind.Name, c.kind.Status)
		}
	}
	for _, k := range errkind.Table() {
		if _, ok := kindsBelowTheCLI[k]; !covered[k] && !ok {
			t.Errorf("%s (exit %d) has no input: add one to kindCases, or say in kindsBelowTheCLI why none exists", k.Name, k.Status)
		}
	}
	for _, c := range kindCases {
		t.Run(fmt.Sprintf("%s_%d", c.kind.Name, c.kind.Status), func(t *testing.T) {
			t.Parallel()
			if strings.Contains(c.args, "/dev/full") {
				if _, err := os.Stat("/dev/full"); err != nil {
					t.Skip("no /dev/full on this system")
				}
			}
			dir := t.TempDir()
			args, fragment := c.prepare(t, dir)
			wantLast := fmt.Sprintf("kernbench: %s (exit status %d)", c.kind.Name, c.kind.Status)

			code, stdout, stderr := runIn(t, bin, dir, args)
			if code != c.kind.Status || lastLine(stderr) != wantLast || !strings.Contains(stdout+stderr, fragment) {
				t.Errorf("kernbench %s: exit status %d, stderr:\n%s\nstdout:\n%s\nwant exit %d, the last line %q and %q", strings.Join(args, " "),
					code, clip(stderr, 3000), clip(stdout, 2000), c.kind.Status, wantLast, fragment)
			}
			if strings.Contains(stderr, "internal error") || strings.Contains(stderr, "\ngoroutine ") {
				t.Errorf("a panic reached the user:\n%s", clip(stderr, 3000))
			}
			if args[0] != "run" {
				return
			}
			jargs := append(args, "--json")
			code, stdout, stderr = runIn(t, bin, dir, jargs)
			var rep report.Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("kernbench %s: stdout is not one JSON report (%v):\n%s", strings.Join(jargs, " "), err, clip(stdout, 2000))
			}
			type verdict struct {
				Status    int
				LastLine  string
				ErrorKind string
				Wrong     bool // a row has wrong elements and is not verified
			}
			got := verdict{Status: code, LastLine: lastLine(stderr)}
			if rep.Error != nil {
				got.ErrorKind = rep.Error.Kind
			}
			for _, r := range rep.Results {
				got.Wrong = got.Wrong || (r.Wrong > 0 && !r.Verified)
			}
			want := verdict{Status: c.kind.Status, LastLine: wantLast, ErrorKind: c.kind.Name}
			if c.kind == errkind.WrongResult {
				want.ErrorKind, want.Wrong = "", true
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("kernbench %s (-want +got):\n%s", strings.Join(jargs, " "), diff)
			}
		})
	}
}

// prepare writes the case's files into dir and returns its arguments and
// the fragment its diagnostic must hold.
func (c kindCase) prepare(t *testing.T, dir string) (args []string, fragment string) {
	t.Helper()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args, fragment = strings.Fields(c.args), c.stderr
	switch {
	case c.bad != "":
		data, err := os.ReadFile(filepath.Join(badDir, c.bad))
		if err != nil {
			t.Fatal(err)
		}
		bc, err := parseBadCase(c.bad, data)
		if err != nil {
			t.Fatalf("%s: %v", c.bad, err)
		}
		write(c.bad, data)
		for _, cp := range bc.copies {
			b, err := os.ReadFile(filepath.Join(badDir, cp))
			if err != nil {
				t.Fatal(err)
			}
			write(filepath.Base(cp), b)
		}
		if bc.exit != c.kind.Status {
			t.Fatalf("%s expects exit %d, not %s's %d", c.bad, bc.exit, c.kind.Name, c.kind.Status)
		}
		args, fragment = nil, bc.stderr[0]
		for _, a := range bc.args {
			if a != "--json" { // the JSON run adds it
				args = append(args, a)
			}
		}
	case c.script != "":
		ar, err := txtar.ParseFile(filepath.Join("../../testdata/script", c.script))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range c.files {
			i := len(ar.Files) - 1
			for i >= 0 && ar.Files[i].Name != name {
				i--
			}
			if i < 0 {
				t.Fatalf("%s has no file %s", c.script, name)
			}
			write(name, ar.Files[i].Data)
		}
	}
	for name, src := range c.inline {
		write(name, []byte(src))
	}
	return args, fragment
}

// runIn runs the kernbench binary bin with args in dir, with no
// KERNBENCH_ variables, and returns its exit status and output.
func runIn(t *testing.T, bin, dir string, args []string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KERNBENCH_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kernbench %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errOut.String()
}

// lastLine is the last line of s.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// The kinds no command input produces, at the lowest level that does.
func TestKindsBelowTheCLI(t *testing.T) {
	type verdict struct {
		Status   int
		LastLine string
	}
	t.Run("Phase2Mismatch", func(t *testing.T) {
		mismatch := false
		rep := &report.Report{Results: []report.Result{{Bytes: 64, Phase2Match: &mismatch, Phase2: "rank 0 byte 3 differs"}}}
		var stderr bytes.Buffer
		err := checkResults([]compare.Labeled{{Rep: rep}}, &stderr)
		var ee *exitError
		if !errors.As(err, &ee) {
			t.Fatalf("checkResults = %v, want an exitError", err)
		}
		got := verdict{Status: exitWith(&stderr, errkind.Of(ee.err)), LastLine: lastLine(stderr.String())}
		want := verdict{errkind.ExitWrong, "kernbench: Phase2Mismatch (exit status 1)"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if !strings.Contains(stderr.String(), "two-pass verification failed at 64 bytes: rank 0 byte 3 differs") {
			t.Errorf("stderr:\n%s", stderr.String())
		}
	})
	t.Run("InternalError", func(t *testing.T) {
		var stderr bytes.Buffer
		code := func() (code int) {
			defer recoverInternal(&stderr, nil, &code)
			panic("boom")
		}()
		got := verdict{Status: code, LastLine: lastLine(stderr.String())}
		want := verdict{errkind.ExitRuntime, "kernbench: InternalError (exit status 4)"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		// A Failure built without a kind says InternalError in its JSON
		// and its exit status alike.
		f := &report.Failure{Rank: -1, Msg: "unkinded"}
		if got := []any{f.Out().Kind, errkind.Status(f)}; !cmp.Equal(got, []any{"InternalError", errkind.ExitRuntime}) {
			t.Errorf("an unkinded Failure: JSON kind and status %v", got)
		}
	})
}
