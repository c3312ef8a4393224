package host_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

// runBench runs a host bench with the embedded ccl.yaml and algorithms.
func runBench(t *testing.T, file string, o ccl.Options) (*report.Report, error) {
	t.Helper()
	o.Embedded = kernbench.Files
	return ccl.Run(file, o)
}

// writeBench writes a bench file into a fresh directory and returns its path.
func writeBench(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bench.star")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The shipped allreduce bench verifies the default algorithm for odd and
// even world sizes (and a single rank), integer and float data, and every
// reduction it checks itself.
func TestAllreduceBench(t *testing.T) {
	for _, world := range []int{1, 3, 8} {
		for _, dt := range []string{"f32", "i32"} {
			for _, op := range []string{"sum", "prod", "avg"} {
				t.Run(fmt.Sprintf("world=%d/%s/%s", world, dt, op), func(t *testing.T) {
					rep, err := runBench(t, "benches/ccl_allreduce.star", ccl.Options{
						WorldSize: world, DType: dt, RedOp: op, Counts: []int64{1000, 37}, Seed: 3,
					})
					if err != nil {
						t.Fatal(err)
					}
					if rep.WorldSize != world || len(rep.Results) != 2 {
						t.Fatalf("report: world_size %d, %d rows; want %d, 2", rep.WorldSize, len(rep.Results), world)
					}
					for _, r := range rep.Results {
						if r.Wrong != 0 || !r.Verified {
							t.Errorf("count %d: wrong = %d, verified = %v, first wrong %+v; want 0, true", r.Count, r.Wrong, r.Verified, r.FirstWrong)
						}
						if r.DType != dt || r.RedOp != op {
							t.Errorf("row is %s %s, want %s %s", r.DType, r.RedOp, dt, op)
						}
						if world > 1 && r.SimTimeNs <= 0 {
							t.Errorf("count %d: sim_time_ns = %v, want > 0", r.Count, r.SimTimeNs)
						}
					}
				})
			}
		}
	}
}

// The bench also runs in place (y is x).
func TestAllreduceBenchInPlace(t *testing.T) {
	rep, err := runBench(t, "benches/ccl_allreduce.star", ccl.Options{WorldSize: 4, Counts: []int64{512}, InPlace: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Wrong != 0 || !r.Verified || !r.InPlace {
		t.Errorf("in place: wrong = %d, verified = %v, in_place = %v", r.Wrong, r.Verified, r.InPlace)
	}
}

// torch.check against a wrong expectation counts the wrong elements in the
// report (and does not raise); the first one names index, got and want.
func TestBenchWrongExpected(t *testing.T) {
	bench := writeBench(t, `
def run_rank(rank, world_size, torch):
    dist = torch.distributed
    dist.init_process_group(backend = "ahbm", world_size = world_size, rank = rank)
    algo = dist.algorithm()
    x = torch.full((4,), 1.0)
    y = torch.empty_like(x)
    torch.launch(algo.name, algo.kernel, x, y, rank, world_size)
    ws = float(world_size)
    n = torch.check(y, [ws, ws, 0.0, ws])  # element 2 is deliberately wrong
    if n != 1:
        fail("torch.check returned %d, want 1" % n)
`)
	rep, err := runBench(t, bench, ccl.Options{WorldSize: 3, Counts: []int64{4}})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Wrong != 3 || r.Verified {
		t.Errorf("wrong = %d, verified = %v; want 3 (one per rank), false", r.Wrong, r.Verified)
	}
	if fw := r.FirstWrong; fw == nil || fw.Index != 2 || fw.Got != "3" || fw.Want != "0" {
		t.Errorf("first wrong = %+v, want index 2, got 3, want 0", fw)
	}
	if rep.File != bench || rep.Algorithm != "ring_allreduce" {
		t.Errorf("report file %q algorithm %q, want %q ring_allreduce", rep.File, rep.Algorithm, bench)
	}
}

// Tensor constructors seen end to end in a bench: their contents checked
// with torch.check against lists (0 wrong), and a bench without checks is
// not verified.
func TestBenchTensorContents(t *testing.T) {
	bench := writeBench(t, `
def run_rank(rank, world_size, torch):
    torch.distributed.init_process_group()
    checks = [
        (torch.zeros((3,)), [0, 0, 0]),
        (torch.zeros((2, 2), dtype = "i32"), [0, 0, 0, 0]),
        (torch.ones((2,)), [1, 1]),
        (torch.full((3,), rank + 0.5), [rank + 0.5] * 3),
        (torch.arange(4, dtype = "i64"), [0, 1, 2, 3]),
        (torch.tensor([rank, -1, 2.5]), [rank, -1, 2.5]),
        (torch.empty_like(torch.ones((5,), dtype = "u8")), [0] * 5),
    ]
    for t, want in checks:
        torch.check(t, want)
    r = torch.rand((8,), dtype = "f32", seed = rank)
    torch.check(r, torch.rand((8,), dtype = "f32", seed = rank))
    torch.check(r, r.data)
    if len(r.data) != 8 or r.dtype != "f32":
        fail("rand: %r" % r.data)
`)
	rep, err := runBench(t, bench, ccl.Options{WorldSize: 2, Counts: []int64{8}})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Wrong != 0 || !r.Verified {
		t.Errorf("wrong = %d (first %+v), verified = %v; want 0, true", r.Wrong, r.FirstWrong, r.Verified)
	}

	noCheck := writeBench(t, "def run_rank(rank, world_size, torch):\n    torch.zeros(1)\n")
	rep, err = runBench(t, noCheck, ccl.Options{WorldSize: 2, Counts: []int64{8}})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Verified {
		t.Error("a bench without torch.check reported verified")
	}
}

// init_process_group with another rank raises, ending the run with the
// rank and the Starlark position.
func TestBenchInitProcessGroupMismatch(t *testing.T) {
	bench := writeBench(t, `
def run_rank(rank, world_size, torch):
    torch.distributed.init_process_group(backend = "ahbm", world_size = world_size, rank = (rank + 1) % world_size)
`)
	_, err := runBench(t, bench, ccl.Options{WorldSize: 2, Counts: []int64{8}})
	var f *report.Failure
	if !errors.As(err, &f) {
		t.Fatalf("error = %v, want a *report.Failure", err)
	}
	if f.ErrorKind().Status != report.ExitRuntime || f.Rank != 0 {
		t.Errorf("failure code %d rank %d, want %d, rank 0", f.ErrorKind().Status, f.Rank, report.ExitRuntime)
	}
	want := "world_size=2 rank=1 do not match this process (world_size 2, rank 0)"
	if !strings.Contains(f.Msg, want) {
		t.Errorf("message = %q, want it to contain %q", f.Msg, want)
	}
	wantBT := []string{bench + ":3:41: in run_rank", "<builtin>: in torch.distributed.init_process_group"}
	if diff := cmp.Diff(wantBT, f.Backtrace); diff != "" {
		t.Errorf("backtrace (-want +got):\n%s", diff)
	}
}

// torch.launch passes tensors to the kernel as Ptrs and tl by keyword, and
// returns after the kernel (simulated time advances); the kernel's errors
// propagate with their tl kind.
func TestBenchLaunchCustomKernel(t *testing.T) {
	bench := writeBench(t, `
def double(x, y, tl):
    tl.store(y, tl.fetch(x) * 2)

def peek(p, tl):
    if type(p) != "Ptr":
        fail("kernel got a %s, want a Ptr" % type(p))
    tl.fetch(p + 5)

def run_rank(rank, world_size, torch):
    torch.distributed.init_process_group()
    x = torch.arange(4, dtype = "i32")
    y = torch.zeros(4, dtype = "i32")
    torch.launch("double", double, x, y)
    torch.check(y, [0, 2, 4, 6])
    if rank == 1:
        torch.launch("peek", peek, x)
`)
	_, err := runBench(t, bench, ccl.Options{WorldSize: 2, Counts: []int64{4}})
	var f *report.Failure
	if !errors.As(err, &f) {
		t.Fatalf("error = %v, want a *report.Failure", err)
	}
	if f.ErrorKind().Name != "OutOfBounds" || f.Rank != 1 {
		t.Errorf("failure kind %q rank %d, want OutOfBounds on rank 1: %v", f.ErrorKind().Name, f.Rank, f)
	}
	// p + 5 is the failing expression (a 4-element view advanced by 5).
	wantBT := []string{bench + ":17:21: in run_rank", "<builtin>: in torch.launch", bench + ":8:16: in peek"}
	if diff := cmp.Diff(wantBT, f.Backtrace); diff != "" {
		t.Errorf("backtrace (-want +got):\n%s", diff)
	}

	ok := writeBench(t, strings.Replace(`
def double(x, y, tl):
    tl.store(y, tl.fetch(x) * 2)

def run_rank(rank, world_size, torch):
    torch.distributed.init_process_group()
    x = torch.arange(4, dtype = "i32")
    y = torch.zeros(4, dtype = "i32")
    torch.launch("double", double, x, y)
    torch.check(y, [0, 2, 4, 6])
`, "\t", "    ", -1))
	rep, err := runBench(t, ok, ccl.Options{WorldSize: 2, Counts: []int64{4}})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Wrong != 0 || !r.Verified || r.SimTimeNs <= 0 || r.Ops.Load != 2 || r.Ops.Store != 2 {
		t.Errorf("row %+v: want verified, time > 0, 2 loads and 2 stores", r)
	}
}

// A kernel launched before init_process_group has no IPCQ directions; its
// IPCQ calls fail with IpcqInvalidDirection.
func TestBenchLaunchWithoutProcessGroup(t *testing.T) {
	bench := writeBench(t, `
def k(x, tl):
    if tl.directions() != [] or tl.n_slots != 0:
        fail("directions %s, n_slots %d before init_process_group" % (tl.directions(), tl.n_slots))
    tl.send("E", x)

def run_rank(rank, world_size, torch):
    torch.launch("k", k, torch.zeros(4))
`)
	_, err := runBench(t, bench, ccl.Options{WorldSize: 2, Counts: []int64{4}})
	var f *report.Failure
	if !errors.As(err, &f) {
		t.Fatalf("error = %v, want a *report.Failure", err)
	}
	if f.ErrorKind().Name != "IpcqInvalidDirection" || !strings.Contains(f.Msg, "no IPCQ process group is installed for rank 0") {
		t.Errorf("failure kind %q message %q, want IpcqInvalidDirection: no IPCQ process group", f.ErrorKind().Name, f.Msg)
	}
}

// print in a bench goes to Stderr with its position; inside a launched
// kernel it also carries the simulated time and the rank.
func TestBenchPrint(t *testing.T) {
	bench := writeBench(t, `
def k(x, tl):
    print("in kernel", len(x))

def run_rank(rank, world_size, torch):
    if rank == 1:
        print("host side")
        torch.launch("k", k, torch.zeros(3))
`)
	var stderr strings.Builder
	if _, err := runBench(t, bench, ccl.Options{WorldSize: 2, Counts: []int64{4}, Stderr: &stderr}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("stderr has %d lines, want 2:\n%s", len(lines), stderr.String())
	}
	if want := bench + ":7:14: "; !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(lines[0], "host side") {
		t.Errorf("host print = %q, want %q…host side", lines[0], want)
	}
	if want := bench + ":3:10: [t=0ns rank=1] in kernel 3"; lines[1] != want {
		t.Errorf("kernel print = %q, want %q", lines[1], want)
	}
}

// A tensor larger than the simulated memory is the run-time OutOfMemory
// (exit 4) that tl.alloc raises, not a RuntimeError: the allocator's
// error reaches the classifier through the message's wrapping.
func TestBenchTensorOutOfMemory(t *testing.T) {
	bench := writeBench(t, `
def run_rank(rank, world_size, torch):
    torch.distributed.init_process_group()
    torch.zeros((1 << 30,), dtype = "f32")
`)
	_, err := runBench(t, bench, ccl.Options{WorldSize: 2, Counts: []int64{4}})
	var f *report.Failure
	if !errors.As(err, &f) {
		t.Fatalf("error = %v, want a *report.Failure", err)
	}
	got := []any{errkind.Of(err), f.Out().Kind, f.Rank}
	if diff := cmp.Diff([]any{errkind.TLOutOfMemory, "OutOfMemory", 0}, got); diff != "" {
		t.Errorf("kind, JSON kind, rank (-want +got):\n%s\n%v", diff, f)
	}
	if !strings.Contains(f.Msg, "torch.zeros: rank 0: hbm[pe 0]: cannot allocate 4294967296 bytes") {
		t.Errorf("message %q does not say which allocation failed", f.Msg)
	}
}

// A shape past 32 bits, or whose size passes 2^63, is OutOfMemory like any
// tensor larger than the memory: (1 << 40,) was refused as "shape must
// hold non-negative ints", and a byte count past 2^63 must not wrap.
func TestBenchTensorHugeShape(t *testing.T) {
	for _, c := range []struct{ shape, want string }{
		{"(1 << 40,)", "torch.zeros: rank 0: hbm[pe 0]: cannot allocate 4398046511104 bytes"},
		{"1 << 40", "torch.zeros: rank 0: hbm[pe 0]: cannot allocate 4398046511104 bytes"},
		{"(1 << 62,)", "torch.zeros: rank 0: a tensor of 4611686018427387904 × f32 (more than 2^63 bytes) does not fit hbm[pe 0]"},
		{"(1 << 30, 1 << 30, 1 << 30)", "torch.zeros: rank 0: a tensor of more than 2^63 elements does not fit hbm[pe 0]"},
		{"(1 << 70,)", "torch.zeros: rank 0: a tensor of more than 2^63 elements does not fit hbm[pe 0]"},
	} {
		bench := writeBench(t, `
def run_rank(rank, world_size, torch):
    torch.distributed.init_process_group()
    torch.zeros(`+c.shape+`, dtype = "f32")
`)
		_, err := runBench(t, bench, ccl.Options{WorldSize: 2, Counts: []int64{4}})
		var f *report.Failure
		if !errors.As(err, &f) {
			t.Fatalf("%s: error = %v, want a *report.Failure", c.shape, err)
		}
		if errkind.Of(err) != errkind.TLOutOfMemory || !strings.Contains(f.Msg, c.want) {
			t.Errorf("%s: %v: %q, want OutOfMemory with %q", c.shape, errkind.Of(err), f.Msg, c.want)
		}
	}
}
