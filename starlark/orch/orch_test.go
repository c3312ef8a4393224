package orch_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"kernbench/starlark/ccl"
	"kernbench/starlark/orch"
	"kernbench/starlark/report"
	"kernbench/starlark/testrun"
)

const benches = "../../benches"

func run(t *testing.T, file string, sets ...string) (*report.Report, string, error) {
	t.Helper()
	var stderr bytes.Buffer
	rep, err := ccl.Run(file, ccl.Options{Stderr: &stderr, Verify: true, MaxSteps: 100_000_000, Sets: sets})
	return rep, stderr.String(), err
}

func failure(t *testing.T, err error) *report.Failure {
	t.Helper()
	var f *report.Failure
	if !errors.As(err, &f) {
		t.Fatalf("want a *report.Failure, got %v", err)
	}
	return f
}

// Rule (docs/l3l2.md, "The shipped benches"): both shipped examples
// run end to end (exit 0), pass two-pass verification, and are
// deterministic: two runs give the same simulated time, events and output.
func TestShippedExamples(t *testing.T) {
	for _, name := range []string{"l3l2_queue", "l3l2_stream"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(benches, name+".star")
			rep1, out1, err := run(t, file)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out1)
			}
			rep2, out2, err := run(t, file)
			if err != nil {
				t.Fatalf("second run: %v", err)
			}
			if len(rep1.Results) != 1 {
				t.Fatalf("want one result row, got %d", len(rep1.Results))
			}
			r1, r2 := rep1.Results[0], rep2.Results[0]
			if r1.SimTimeNs <= 0 || r1.SimTimeNs != r2.SimTimeNs || r1.Events != r2.Events {
				t.Errorf("not deterministic or no time: %v/%d vs %v/%d", r1.SimTimeNs, r1.Events, r2.SimTimeNs, r2.Events)
			}
			if r1.Phase2Match == nil || !*r1.Phase2Match || !r1.Verified {
				t.Errorf("two-pass verification: match=%v verified=%v (%s)", r1.Phase2Match, r1.Verified, r1.Phase2)
			}
			if r1.Ops.Math == 0 || r1.Ops.Store == 0 {
				t.Errorf("no PE kernel work counted: %+v", r1.Ops)
			}
			if out1 != out2 || !strings.Contains(out1, name+": ") {
				t.Errorf("stderr differs or lacks the summary:\n%s\n---\n%s", out1, out2)
			}
		})
	}
	if _, out, err := run(t, filepath.Join(benches, "l3l2_queue.star")); err == nil {
		want := "l3l2_queue: 4 outputs verified byte for byte: [102, 20, 0], [101, 10, 0], [101, 11, 0], [103, 30, 104]"
		if !strings.Contains(out, want) {
			t.Errorf("queue summary: got %q, want it to contain %q", out, want)
		}
	}
}

// mutate copies a shipped example with one replacement into a temp dir.
func mutate(t *testing.T, name, old, new string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(benches, name+".star"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(old)) {
		t.Fatalf("%s has no %q", name, old)
	}
	file := filepath.Join(t.TempDir(), name+".star")
	if err := os.WriteFile(file, bytes.Replace(src, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// Rule: L3 checks every output byte; a wrong expectation fails the run
// with exit status 4 and the fail() message.
func TestMutatedExampleFails(t *testing.T) {
	file := mutate(t, "l3l2_queue", "expect([101, 11, 0], [v + 11 for v in t1])", "expect([101, 11, 0], [v + 12 for v in t1])")
	_, _, err := run(t, file)
	f := failure(t, err)
	if f.ErrorKind().Status != report.ExitRuntime || !strings.Contains(f.Msg, "L3: output [101, 11, 0] differs from byte 6") {
		t.Errorf("got exit %d kind %s msg %q", f.ErrorKind().Status, f.ErrorKind().Name, f.Msg)
	}
	if !strings.Contains(f.Msg, "l3 main") {
		t.Errorf("the failing process is not named: %q", f.Msg)
	}

	file = mutate(t, "l3l2_stream", "l2.launch(add_scalar_kernel, dst, src, 7.0)", "l2.launch(add_scalar_kernel, dst, src, 7.5)")
	_, _, err = run(t, file)
	f = failure(t, err)
	if f.ErrorKind().Status != report.ExitRuntime || !strings.Contains(f.Msg, "L3: round 1: output[0]") {
		t.Errorf("got exit %d kind %s msg %q", f.ErrorKind().Status, f.ErrorKind().Name, f.Msg)
	}
}

func writeBench(t *testing.T, src string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "b.star")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// Rule (§5): L3 errors end the run with exit 4 and the engine's kind.
func TestL3ErrorKinds(t *testing.T) {
	cases := []struct{ name, src, kind, msg string }{
		{"timeout", `
def main(orch):
    r = orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 64)
    r.counter(0).wait(1, WaitCmp.EQ, 0.000001)
`, "Timeout", "timed out"},
		{"remote abort", `
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
`, "REMOTE_ABORTED", "REMOTE_ABORTED"},
		{"out of bounds", `
def main(orch):
    r = orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 64)
    r.payload_read(60, 8)
`, "OUT_OF_BOUNDS", "OUT_OF_BOUNDS"},
		{"non-positive timeout", `
def main(orch):
    r = orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 64)
    r.counter(0).wait(1, WaitCmp.EQ, 0)
`, "ValueError", "counter.wait: timeout must be finite and > 0 seconds, got 0"},
		{"negative size", `
def main(orch):
    orch.create_worker_chip_queue(depth = -1, input_arena_bytes = 64, output_arena_bytes = 64)
`, "ValueError", "create_worker_chip_queue: sizes must be >= 0"},
		{"l2 fail", `
def l2(l2):
    fail("nope")

def main(orch):
    orch.submit_next_level(l2, [1, 2])
`, "RuntimeError", "l2 worker 0 #0: fail: nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := run(t, writeBench(t, c.src))
			f := failure(t, err)
			if f.ErrorKind().Status != report.ExitRuntime || f.ErrorKind().Name != c.kind || !strings.Contains(f.Msg, c.msg) {
				t.Errorf("got exit %d kind %q msg %q; want 4 %q ~%q", f.ErrorKind().Status, f.ErrorKind().Name, f.Msg, c.kind, c.msg)
			}
		})
	}
}

// Rule (§5): a never-returning L2 ends in the watchdog (exit 3).
func TestNeverReturningL2(t *testing.T) {
	src := `
def l2(l2):
    ep = l2.region_endpoint(l2.scalars)
    while True:
        ep.signal_test(ep.counter_addr(0), 1, WaitCmp.EQ)

def main(orch):
    r = orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 64)
    orch.submit_next_level(l2, r.descriptor_scalars())
`
	_, _, err := run(t, writeBench(t, src), "defaults.max_sim_time_ns=100000")
	f := failure(t, err)
	if f.ErrorKind().Status != report.ExitDeadlock {
		t.Errorf("got exit %d kind %s msg %q", f.ErrorKind().Status, f.ErrorKind().Name, f.Msg)
	}
}

// Rule (§6): run_l3 tests in benches/ pass.
func TestStarTests(t *testing.T) {
	res, err := testrun.RunFile(filepath.Join(benches, "l3l2_test.star"), testrun.Options{MaxSteps: 100_000_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) < 5 {
		t.Errorf("only %d tests found", len(res))
	}
	for _, r := range res {
		if !r.Pass {
			t.Errorf("%s: %s", r.Name, strings.Join(r.Messages, "\n"))
		}
	}
}

// Rule: every builtin is registered with a signature and a doc, and the
// reference lists them all.
func TestReference(t *testing.T) {
	ref := orch.Reference()
	for _, b := range orch.Builtins() {
		if b.Sig == "" || b.Doc == "" || b.Fn == nil {
			t.Errorf("%s.%s: incomplete registration", b.Recv, b.Name)
		}
		if !strings.Contains(ref, b.Sig) {
			t.Errorf("reference lacks %s", b.Sig)
		}
	}
	for _, name := range []string{"NotifyOp", "WaitCmp", "Opcode", "pack_u64", "unpack_f32"} {
		if _, ok := orch.Predeclared()[name]; !ok {
			t.Errorf("%s is not predeclared", name)
		}
	}
	want := map[string][]string{
		"orch":            {"create_l3_l2_region", "create_worker_chip_queue", "submit_next_level"},
		"region":          {"descriptor_scalars", "payload_write", "payload_read", "counter", "free"},
		"counter":         {"notify", "test", "wait"},
		"queue":           {"chip_task_arg_scalars", "request_stop", "try_request_stop", "free"},
		"queue.input":     {"enqueue", "try_enqueue"},
		"queue.output":    {"peek", "try_peek", "read", "release", "dequeue", "try_dequeue"},
		"l2":              {"now_ns", "launch", "decode_endpoint_binding", "last_decode_error", "spsc_queue_endpoint", "region_endpoint"},
		"endpoint":        {"live", "error", "layout", "input", "output"},
		"endpoint.input":  {"peek", "try_peek", "read", "view", "release", "drained"},
		"endpoint.output": {"reserve", "try_reserve", "write", "view", "publish"},
		"region_endpoint": {"error", "counter_addr", "signal_notify", "signal_test", "signal_wait", "payload_read", "payload_write"},
	}
	have := map[string]bool{}
	for _, b := range orch.Builtins() {
		have[b.Recv+"."+b.Name] = true
	}
	for recv, names := range want {
		for _, n := range names {
			if !have[recv+"."+n] {
				t.Errorf("missing builtin %s.%s", recv, n)
			}
		}
	}
}

// Rule (§6): run_l3 errors are ordinary Go errors for Go callers too.
func TestRunL3FromGo(t *testing.T) {
	src := `
def main(orch):
    orch.create_l3_l2_region(payload_bytes = 64, counter_bytes = 64).counter(0).wait(1, WaitCmp.EQ, 0.000001)
`
	th := &starlark.Thread{Name: "test"}
	g, err := starlark.ExecFile(th, "x.star", src, orch.Predeclared())
	if err != nil {
		t.Fatal(err)
	}
	err = ccl.RunL3(g["main"].(starlark.Callable), th, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("got %v, want a timeout", err)
	}
}
