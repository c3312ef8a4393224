package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"kernbench/starlark/cputime"
)

// fuzzSetKeys are the ccl.yaml keys FuzzRunSet overrides. The machine's
// size (system.sips, cubes_per_sip, pes_per_cube, placement) is left out:
// its cost in host memory is the memory guard's business, not this target's.
var fuzzSetKeys = []string{
	"defaults.world_size", "defaults.buffer_kind", "defaults.backpressure", "defaults.poll_interval_ns",
	"defaults.n_slots", "defaults.slot_size", "defaults.vc_chunk_size", "defaults.vc_weights",
	"defaults.ipcq_credit_size_bytes", "defaults.ipcq_overhead_ns", "defaults.deadlock_timeout_ns",
	"defaults.max_sim_time_ns", "defaults.mesh_shape", "defaults.channels",
	"system.links.pe_noc.bandwidth_gbps", "system.links.pe_noc.latency_ns", "system.links.ucie.latency_ns",
	"system.memory.tcm.capacity", "system.memory.hbm.latency_ns", "system.memory.hbm.bandwidth_gbps",
	"system.math.bytes_per_ns", "system.math.latency_ns",
}

// fuzzFlags are the run flags FuzzRunFlag sets (each with a fuzzed value).
var fuzzFlags = []string{"--bytes", "--count", "--sweep", "-f", "--dtype", "--redop", "--root", "--data-space",
	"--jitter-seed", "--max-steps", "--trace-ranks", "--trace-kinds", "-j", "--shard", "--world-size", "--max-memory"}

// fuzzRunCPU is the CPU time the process may use while one fuzzed run
// runs before it counts as a hang (CPU, not wall time: other work on the
// machine does not stretch it; a run takes milliseconds).
const fuzzRunCPU = 60 * time.Second

// runFuzzed runs kernbench with args and fails on what must never happen:
// a panic reaching the user, a status outside the documented 0..4, a run
// that does not end, or a failure with data on stdout.
func runFuzzed(t *testing.T, args []string) {
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- Main(args, &stdout, &stderr) }()
	code, ok := cputime.Await(done, fuzzRunCPU)
	if !ok {
		t.Fatalf("kernbench %q did not finish within %v of CPU time (hang)", args, fuzzRunCPU)
	}
	if code < 0 || code > 4 {
		t.Fatalf("kernbench %q: exit status %d, want 0..4", args, code)
	}
	for _, bad := range []string{"internal error", "\ngoroutine ", "panic:"} {
		if strings.Contains(stderr.String(), bad) {
			t.Fatalf("kernbench %q: stderr contains %q:\n%s", args, bad, stderr.String())
		}
	}
	if code == 2 && stdout.Len() > 0 {
		t.Fatalf("kernbench %q: usage error with output on stdout:\n%s", args, stdout.String())
	}
}

// baseArgs is a small, fast run the fuzzed settings change. Its --timeout
// (wall clock) may stop a run on a loaded machine: that is exit 3, as
// good as any documented status here.
func baseArgs(dir string) []string {
	return []string{"run", "ring_allreduce", "--world-size", "2", "--count", "8", "-q", "--timeout", "20s", "--max-steps", "1000000",
		"--trace", dir + "/t.json", "--oplog", dir + "/op.log"}
}

// FuzzRunSet: any --set value of any key ends with a documented status,
// never a panic or a hang (issue 13).
func FuzzRunSet(f *testing.F) {
	for i, v := range []string{"9223372036854776", "1e12", "0", "-1", "4K", "1.0005", "NaN", ".inf", "[0, 1]",
		"{compute: 1, comm: 1000000}", "poll", "", "x", "9223372036854775807", "0.001", "1T"} {
		f.Add(uint8(i), v)
	}
	f.Fuzz(func(t *testing.T, key uint8, value string) {
		args := append(baseArgs(t.TempDir()), "--set", fmt.Sprintf("%s=%s", fuzzSetKeys[int(key)%len(fuzzSetKeys)], value))
		runFuzzed(t, args)
	})
}

// FuzzRunFlag: any value of the run flags ends with a documented status.
func FuzzRunFlag(f *testing.F) {
	for i, v := range []string{"3", "1G", "NaN", "1K:4K", "-1", "0", "i64", "max", "9", "hbm", "0-1", "kernel,nope", "1/2", "2", "4-1"} {
		f.Add(uint8(i), v)
	}
	f.Fuzz(func(t *testing.T, flag uint8, value string) {
		name := fuzzFlags[int(flag)%len(fuzzFlags)]
		if name == "--world-size" || name == "--count" || name == "--bytes" || name == "--sweep" {
			// Keep the run small: a fuzzed size can ask for any amount of
			// host memory (the memory guard's business).
			if len(value) > 3 {
				value = value[:3]
			}
		}
		args := baseArgs(t.TempDir())
		if name == "--bytes" || name == "--sweep" {
			args = append(args[:4], args[6:]...) // no --count: they exclude each other
		}
		runFuzzed(t, append(args, name, value))
	})
}
