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

// The sizes of a sweep reuse the memories' slices and the op_log's slabs
// of the sizes before them (plan.bufs), with room kept for the larger
// sizes: every row, output and op_log is the one the size gives alone,
// whether the slices it gets were written by a smaller size, a larger
// one, an equal one, or none, in sequence or with -j.
func TestSweepReusedMemoryMatchesSingleRuns(t *testing.T) {
	type outcome struct {
		Row    string
		Output []byte // every rank's recv buffer, one after another
	}
	run := func(counts []int64, jobs int) ([]outcome, string) {
		var oplog bytes.Buffer
		// (A --max-memory lets a size keep room for the larger ones:
		// plan.roomAhead.)
		rep, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 4, Counts: counts, Verify: true, Jobs: jobs,
			KeepOutputs: true, OpLog: &oplog, MaxMemory: 8 << 30})
		if err != nil {
			t.Fatal(err)
		}
		var out []outcome
		for _, r := range rep.Results {
			if r.Wrong != 0 || r.Phase2Match == nil || !*r.Phase2Match {
				t.Errorf("count %d: wrong %d, phase 2 %v", r.Count, r.Wrong, r.Phase2Match)
			}
			outputs := bytes.Join(r.Outputs, nil)
			r.Outputs = nil
			b, _ := json.Marshal(r)
			out = append(out, outcome{Row: string(b), Output: outputs})
		}
		return out, oplog.String()
	}
	// 1 MiB buffers and more: the memories' slices are pooled (a
	// smaller one is left to the collector). Larger sizes after smaller
	// ones (room ahead), equal ones, smaller ones.
	counts := []int64{1 << 17, 3 << 16, 1 << 18, 1 << 17, 1 << 17, 3 << 16, 1 << 18}
	alone, aloneLog := map[int64]outcome{}, map[int64]string{}
	var wantLog string
	for _, c := range counts {
		if _, ok := alone[c]; !ok {
			o, l := run([]int64{c}, 1)
			alone[c], aloneLog[c] = o[0], l
		}
		wantLog += aloneLog[c]
	}
	for _, jobs := range []int{1, 2} {
		got, log := run(counts, jobs)
		if len(got) != len(counts) {
			t.Fatalf("-j %d: %d rows for %d sizes", jobs, len(got), len(counts))
		}
		for i, c := range counts {
			if diff := cmp.Diff(alone[c].Row, got[i].Row); diff != "" {
				t.Errorf("-j %d, size %d (count %d): the row differs from its run alone (-alone +sweep):\n%s", jobs, i, c, diff)
			}
			if !bytes.Equal(alone[c].Output, got[i].Output) {
				t.Errorf("-j %d, size %d (count %d): the recv buffers differ from its run alone", jobs, i, c)
			}
		}
		if log != wantLog {
			t.Errorf("-j %d: the op_log (%d bytes) is not the sizes' op_logs alone (%d bytes)", jobs, len(log), len(wantLog))
		}
	}
}
