package mscclio_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernbench"
	"kernbench/starlark/ccl"
	"kernbench/starlark/report"
)

// An exported run, run again from its XML, leaves every rank's recv buffer
// byte for byte as the original did, and takes the same simulated time
// within 2 %: every shipped algorithm whose data movement MSCCL XML can
// express, at two world sizes and at sizes from chunks of a few hundred
// bytes (which the ring kernels send in messages smaller than a slot,
// piece_bytes: the export writes it as kernbench_piece_bytes and the
// importer sends messages of that size) to chunks of several rings of
// slots. ring_allreduce's send_async overlaps a round's last receive and
// its reductions prefetch their next operand: the importer keeps both (an
// s step runs in the background until the thread block's next send; a
// step prefetches the next step's local operand).
func TestMSCCLExportRoundTrip(t *testing.T) {
	longTest(t)
	type roundTrip struct {
		algo  string
		world int
		count int64
	}
	var cases []roundTrip
	for _, algo := range []string{"ring_allreduce", "ring_allreduce_bidir", "ring_allreduce_unidir", "ring_allgather", "ring_reduce_scatter", "hier_allreduce"} {
		for _, world := range []int{4, 8} {
			for _, count := range []int64{1024, 16384, 65536, 262144} {
				cases = append(cases, roundTrip{algo, world, count})
			}
		}
	}
	cases = append(cases, roundTrip{"ring_allreduce_bidir", 8, 1000}) // ragged chunks: one element per chunk
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d/%d", c.algo, c.world, c.count), func(t *testing.T) {
			t.Parallel()
			var xml bytes.Buffer
			orig := runVerified(t, c.algo, ccl.Options{WorldSize: c.world, Counts: []int64{c.count}, ExportMSCCL: &xml, KeepOutputs: true})
			checkCorrect(t, orig)
			file := filepath.Join(t.TempDir(), c.algo+".xml")
			if err := os.WriteFile(file, xml.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			again := runVerified(t, file, ccl.Options{Counts: []int64{c.count}, KeepOutputs: true})
			checkCorrect(t, again)
			for r := range orig.Results[0].Outputs {
				if !bytes.Equal(orig.Results[0].Outputs[r], again.Results[0].Outputs[r]) {
					t.Errorf("rank %d: the exported schedule's result differs from the original run's", r)
				}
			}
			x, o := again.Results[0].SimTimeNs, orig.Results[0].SimTimeNs
			t.Logf("original %.3f us, exported %.3f us", o/1000, x/1000)
			if d := math.Abs(x-o) / o; d > 0.02 {
				t.Errorf("exported %.3f us, original %.3f us: %.2f %% apart, want at most 2 %%", x/1000, o/1000, 100*d)
			}
		})
	}
}

// What MSCCL XML cannot express is refused with the operation and its
// position; so is a sweep (a schedule is for one size).
func TestMSCCLExportRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	loads := write("loads.star", `def kernel(sendbuf, recvbuf, rank, world_size, tl):
    t = tl.fetch(sendbuf)
    tl.store(recvbuf, t)
`)
	slot := write("slot.star", `def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tl.send("E", sendbuf)
    m = tl.recv("W")
    tl.copy(recvbuf, m)
`)
	maxop := write("maxop.star", `def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tl.copy(recvbuf, sendbuf)
    tl.reduce(recvbuf, recvbuf, sendbuf, op = "max")
`)
	tile := write("tile.star", `def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tl.reduce(recvbuf, sendbuf, tl.zeros(len(sendbuf), sendbuf.dtype))
`)
	cases := []struct {
		name, algo string
		o          ccl.Options
		want       string
	}{
		{"tile operand", tile, ccl.Options{WorldSize: 1, Counts: []int64{64}},
			"--export-msccl: rank 0: tl.reduce at " + tile + ":2:14 has an operand that is not a buffer (a Tile): MSCCL XML moves buffers only"},
		{"reduce op", maxop, ccl.Options{WorldSize: 1, Counts: []int64{64}},
			"--export-msccl: rank 0: tl.reduce at " + maxop + ":3:14 reduces with op \"max\", not the run's redop \"sum\""},
		{"loads", loads, ccl.Options{WorldSize: 2, Counts: []int64{64}},
			"--export-msccl: rank 0: tl.fetch at " + loads + ":2:17 cannot be expressed in MSCCL XML"},
		{"rx slot", slot, ccl.Options{WorldSize: 2, Counts: []int64{64}},
			"--export-msccl: rank 0: tl.recv at " + slot + ":3:16 receives a message into its rx slot: MSCCL XML can express tl.recv(dir, dst=buffer) only"},
		{"sweep", "ring_allreduce_bidir", ccl.Options{WorldSize: 4, Counts: []int64{4096, 8192}},
			"--export-msccl writes the schedule of one size; got 2 sizes"},
		// Each piece's copy into recvbuf runs beside the next pieces'
		// receives and sends (see TestMSCCLExportRoundTrip for what does
		// round-trip).
		{"copies in flight", "tree_broadcast", ccl.Options{WorldSize: 4, Counts: []int64{65536}},
			"--export-msccl: rank 0: tl.copy_async at algorithms/tree_broadcast.star:101:45 starts a copy while the one from algorithms/tree_broadcast.star:101:45 is still in flight"},
		{"avg", "ring_allreduce_bidir", ccl.Options{WorldSize: 4, Counts: []int64{4096}, RedOp: "avg"},
			"divides by world_size (redop avg), which MSCCL XML cannot express"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var xml bytes.Buffer
			c.o.ExportMSCCL, c.o.Embedded, c.o.Verify = &xml, kernbench.Files, true
			_, err := ccl.Run(c.algo, c.o)
			var f *report.Failure
			if !errors.As(err, &f) || f.ErrorKind().Status != report.ExitUsage || !strings.Contains(f.Msg, c.want) {
				t.Fatalf("Run: %v, want exit 2 with %q", err, c.want)
			}
		})
	}
}
