package mock

import (
	"fmt"
	"kernbench/starlark/ccl"
	"kernbench/starlark/report"
	"kernbench/starlark/report/reporttest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kernbench"
)

// Kernels that are right by the model's rules (race-free in every order)
// run without a hazard or a deadlock, timed with each buffer kind and in
// the mock over several schedules, in place and out of place. Each one
// was refused (or hung) once; the self-test (starlark/selftest) found them.
func TestValidKernelsRun(t *testing.T) {
	cases := []struct {
		name, src string
		nSlots    int      // the ring depth (messages of 1 KiB)
		sets      []string // more settings
	}{
		// Rank 0 receives in place the sum that rank 1 sends back once it
		// has taken rank 0's send: a fused primitive checked its whole dst
		// up front against rank 0's send, whose last messages were still
		// in flight (SendBufferHazard), while each piece is written only
		// after the send it overlaps was taken.
		{"receive in place behind one's own send", `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 0:
        tl.send("E", sendbuf)
        tl.recv_copy("W", recvbuf)
    else:
        tl.recv_reduce_copy_send("W", sendbuf, recvbuf, "E")
`, 16, nil},
		// The same behind a tl.send_async: a message's range counted as
		// unissued until the send's overhead had passed, by when the peer
		// may have taken it and sent back the sum (at once in the mock,
		// and with an overhead longer than the way there and back).
		{"receive in place behind one's own send_async", `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 0:
        h = tl.send_async("E", sendbuf)
        tl.recv_copy("W", recvbuf)
        tl.wait(h)
    else:
        tl.recv_reduce_copy_send("W", sendbuf, recvbuf, "E")
`, 2, []string{"defaults.ipcq_overhead_ns=200"}},
		// Rank 1 allocates 3 bytes where rank 0's scratch was before it
		// returned: the allocation cleared its whole 64-byte block in phase
		// 1 but only the 3 bytes the op_log records in phase 2, and the two
		// images differed in rank 0's old bytes (Phase2Mismatch).
		{"scratch reused after another rank returned", `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    t = tl.alloc(len(sendbuf), sendbuf.dtype, "sram")
    h = tl.send_async("E", sendbuf)
    tl.recv("W", dst = t)
    tl.wait(h)
    tl.flush()
    tl.reduce(recvbuf, sendbuf, t, op = tl.redop)
    if rank == 1:
        for _ in range(20):  # long enough for rank 0 to return
            tl.copy(t, recvbuf)
        tl.alloc(3, "u8", "sram")
`, 2, nil},
		// Rank 1 copies its messages out of their slots (tl.recv(dst=))
		// while another of its threads keeps its DMA engine busy, so the
		// copy of a message waits behind the thread's copies: the credit
		// of the copy before it covered it, and rank 0 refilled its slot
		// before it was copied (a wrong result, no hazard).
		{"copies out of slots behind a busy DMA engine", `
def hog(tl, a, b):
    for _ in range(40):
        tl.copy(a, b)

def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 0:
        tl.send("E", sendbuf)
        tl.recv("E", dst = recvbuf)
    else:
        t = tl.alloc(len(sendbuf), sendbuf.dtype, "hbm")
        a = tl.alloc(16384, "f32", "hbm")
        b = tl.alloc(16384, "f32", "hbm")
        h = tl.spawn(hog, a, b)
        tl.recv("W", dst = t)
        tl.reduce(recvbuf, t, sendbuf, op = tl.redop)
        tl.send("W", recvbuf)
        tl.wait(h)
`, 4, []string{"defaults.slot_size=64"}},
		// A fused primitive's local operand was prefetched before another
		// thread of the rank wrote it: the primitive used the loads of the
		// old bytes (a wrong result without a hazard; a write by the
		// prefetching thread itself discarded them).
		{"operand written by another thread after its prefetch", `
def writer(tl, dst, src):
    tl.copy(dst, src)

def kernel(sendbuf, recvbuf, rank, world_size, tl):
    buf = tl.alloc(len(sendbuf), sendbuf.dtype, "hbm")
    tl.prefetch(buf)
    h = tl.spawn(writer, buf, sendbuf)
    tl.wait(h)
    if rank == 0:
        tl.send("E", buf)
        tl.recv_copy("W", recvbuf)
    else:
        tl.recv_reduce_copy_send("W", buf, recvbuf, "E")
`, 16, nil},
		// Two threads flush a direction the kernel's sends use: the queue
		// pair kept one flush waiter, and the other thread was never
		// woken (deadlock, "flush E: 0 send(s) in flight").
		{"two threads flush one direction", `
def flusher(tl):
    tl.flush("E")

def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 0:
        h = tl.send_async("E", sendbuf)
        a = tl.spawn(flusher)
        b = tl.spawn(flusher)
        tl.recv_copy("W", recvbuf)
        tl.wait(h)
        tl.wait(a)
        tl.wait(b)
    else:
        tl.recv_reduce_copy_send("W", sendbuf, recvbuf, "E")
`, 2, nil},
		// Two threads receive from any direction at once: the endpoint
		// kept one waiter, and the other waited forever beside its
		// message.
		{"two threads receive from any direction", `
def getter(tl, dst):
    tl.recv(dst = dst)

def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 0:
        n = len(sendbuf)
        tmp = tl.alloc(3 * n, sendbuf.dtype, "hbm")
        a = tl.spawn(getter, tmp.slice(0, n))
        b = tl.spawn(getter, tmp.slice(n, n))
        tl.wait(a)
        tl.wait(b)
        # One thread got an empty message (its part stays zero), the
        # other rank 1's buffer: which one depends on the order.
        acc = tmp.slice(2 * n, n)
        tl.reduce(acc, tmp.slice(0, n), tmp.slice(n, n), op = "sum")
        tl.reduce(acc, acc, sendbuf, op = "sum")
        tl.send("E", acc)
        tl.copy(recvbuf, acc)
    else:
        tl.send("W", sendbuf.slice(0, 0))
        tl.send("E", sendbuf)
        tl.recv("W", dst = recvbuf)
`, 2, nil},
	}
	for _, c := range cases {
		file := filepath.Join(t.TempDir(), "k.star")
		if err := os.WriteFile(file, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, inPlace := range []bool{false, true} {
			for _, kind := range []string{"tcm", "sram", "hbm"} {
				t.Run(fmt.Sprintf("%s/in_place=%v/%s", c.name, inPlace, kind), func(t *testing.T) {
					sets := []string{"defaults.buffer_kind=" + kind, fmt.Sprint("defaults.n_slots=", c.nSlots)}
					if !slices.ContainsFunc(c.sets, func(s string) bool { return strings.HasPrefix(s, "defaults.slot_size=") }) {
						sets = append(sets, "defaults.slot_size=1024") // (a case's own slot_size replaces it: one key is set once)
					}
					sets = append(sets, c.sets...)
					checkCorrect(t, runVerified(t, file, ccl.Options{WorldSize: 2, Counts: []int64{3000}, InPlace: inPlace, Sets: sets}))
					r, err := RunKernel(Options{Path: file, WorldSize: 2, Count: 3000, InPlace: inPlace, Sets: sets, Schedules: 4, Seed: 1, Embedded: kernbench.Files})
					if err != nil {
						t.Fatalf("mock: %v", err)
					}
					if r.Wrong != 0 {
						t.Errorf("mock: %d wrong", r.Wrong)
					}
				})
			}
		}
	}
}

// Kernels that race by the model's rules are reported, timed and in the
// mock, with the hazard's kind, instead of computing a wrong result.
func TestRacyKernelsReported(t *testing.T) {
	cases := []struct{ name, src, kind string }{
		// A thread rewrites the end of a buffer that another thread's
		// tl.send has not sent yet (the ring is full): only tl.send_async
		// sources were watched, and the rewritten bytes arrived.
		{"write into another thread's tl.send", `
def writer(tl, buf, src):
    tl.copy(buf, src)

def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 0:
        other = tl.alloc(len(sendbuf), sendbuf.dtype, "hbm")
        h = tl.spawn(writer, sendbuf.slice(len(sendbuf) - 16, 16), other.slice(0, 16))
        tl.send("E", sendbuf)
        tl.wait(h)
        tl.recv("E", dst = recvbuf)
    else:
        tl.recv("W", dst = recvbuf)
        tl.reduce(recvbuf, recvbuf, sendbuf, op = tl.redop)
        tl.send("W", recvbuf)
`, "SendBufferHazard"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "k.star")
			if err := os.WriteFile(file, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			sets := []string{"defaults.n_slots=2"}
			_, err := ccl.Run(file, ccl.Options{WorldSize: 2, Counts: []int64{65536}, Sets: sets, Verify: true, Embedded: kernbench.Files})
			if f, ok := err.(*report.Failure); !ok || f.ErrorKind().Name != c.kind {
				t.Errorf("timed run: %v, want a %s", err, c.kind)
			}
			_, err = RunKernel(Options{Path: file, WorldSize: 2, Count: 65536, Sets: sets, Schedules: 3, Seed: 1, Embedded: kernbench.Files})
			if f, ok := err.(*report.Failure); !ok || f.ErrorKind().Name != c.kind {
				t.Errorf("mock: %v, want a %s", err, c.kind)
			}
		})
	}
}

// A kernel may return while a send from its scratch (tl.alloc) is still on
// its way: the scratch is freed only once no send reads it. It was freed at
// once, another rank of the cube allocated the same SRAM, and the
// allocation's zeros were what the send delivered (a wrong result without a
// hazard; in the mock, the other rank's first write was reported as its
// SendBufferHazard).
func TestScratchFreedAfterItsSends(t *testing.T) {
	src := `
COLLECTIVE = "broadcast"
TOPOLOGY = "custom"

def neighbors(rank, world_size, neighbor_map):
    return {0: {"x": 2, "y": 1}, 1: {"b": 0}, 2: {"a": 0}}[rank]

def kernel(sendbuf, recvbuf, rank, world_size, tl, root = 0):
    if rank == 0:
        s = tl.alloc(len(sendbuf), sendbuf.dtype, "sram")
        tl.copy(s, sendbuf)
        tl.send("y", sendbuf)
        tl.send("x", s)  # to rank 2, in the other SIP: slow
        tl.copy(recvbuf, sendbuf)
    elif rank == 1:
        tl.recv("b", dst = recvbuf)
        for _ in range(3):  # until rank 0 has returned
            tl.copy(recvbuf, recvbuf)
        t = tl.alloc(len(sendbuf), sendbuf.dtype, "sram")
        tl.copy(t, recvbuf)
    else:
        tl.recv("a", dst = recvbuf)
`
	file := filepath.Join(t.TempDir(), "k.star")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	sets := []string{"system.sips=2", "system.placement=[0, 1, 32]", "system.links.pcie.latency_ns=2000"}
	checkCorrect(t, runVerified(t, file, ccl.Options{WorldSize: 3, Counts: []int64{256}, Sets: sets}))
	r, err := RunKernel(Options{Path: file, WorldSize: 3, Count: 256, Sets: sets, Schedules: 4, Seed: 1, Embedded: kernbench.Files})
	if err != nil {
		t.Fatalf("mock: %v", err)
	}
	if r.Wrong != 0 {
		t.Errorf("mock: %d wrong", r.Wrong)
	}
}

// runVerified runs target verified with the shipped files and fails the
// runVerified runs target with the embedded algorithms and the reference
// check, failing the test on an error or a missing row.
func runVerified(t *testing.T, target string, o ccl.Options) *report.Report {
	t.Helper()
	o.Embedded = kernbench.Files
	o.Verify = true
	rep, err := ccl.Run(target, o)
	if err != nil {
		t.Fatalf("Run(%s, world %d, counts %v, in_place %v, sets %v) failed: %v", target, o.WorldSize, o.Counts, o.InPlace, o.Sets, err)
	}
	reporttest.Rows(t, target, rep, len(o.Counts))
	return rep
}

var checkCorrect = reporttest.CheckCorrect
