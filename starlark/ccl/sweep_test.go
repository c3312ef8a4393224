package ccl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"kernbench/starlark/report"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
)

// A parallel sweep (-j N) gives the report, the print output and the
// op_log of a sequential one, byte for byte, and stops where a sequential
// sweep stops.
func TestParallelSweepMatchesSequential(t *testing.T) {
	dir := t.TempDir()
	algo := filepath.Join(dir, "printing.star")
	src := `load("ring_allreduce.star", "ring")
load("helpers.star", "chunks")

def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 0:
        print("count", len(sendbuf))
    if len(sendbuf) > 20000:
        fail("too big:", len(sendbuf))
    ring(tl, chunks(sendbuf, world_size), chunks(recvbuf, world_size), rank, "E", "W")
`
	if err := os.WriteFile(algo, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Report, Stderr, OpLog, Rows, Err string
	}
	run := func(file string, jobs int, counts []int64) outcome {
		var stderr, oplog, rows bytes.Buffer
		rep, err := Run(file, Options{Embedded: kernbench.Files, WorldSize: 4, Counts: counts, Verify: true, Jobs: jobs,
			Stderr: &stderr, OpLog: &oplog, OnResult: func(r *report.Result) { fmt.Fprintf(&rows, "%d %v\n", r.Bytes, r.SimTimeNs) }})
		var o outcome
		if rep != nil {
			rep.WallS = 0
			b, _ := json.MarshalIndent(rep, "", " ")
			o.Report = string(b)
		}
		if err != nil {
			o.Err = err.Error()
		}
		o.Stderr, o.OpLog, o.Rows = stderr.String(), oplog.String(), rows.String()
		return o
	}
	for _, tc := range []struct {
		name   string
		counts []int64
	}{
		{"all sizes pass", []int64{1, 100, 1000, 5000, 10000, 20000}},
		{"a later size fails", []int64{1, 100, 30000, 1000, 40000, 5000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq := run(algo, 1, tc.counts)
			for _, jobs := range []int{2, 4} {
				par := run(algo, jobs, tc.counts)
				if diff := cmp.Diff(seq, par); diff != "" {
					t.Errorf("-j %d differs from -j 1 (-seq +par):\n%s", jobs, diff)
				}
			}
			if seq.Rows == "" || seq.OpLog == "" {
				t.Errorf("nothing to compare: rows %q, op_log %d bytes", seq.Rows, len(seq.OpLog))
			}
		})
	}
}
