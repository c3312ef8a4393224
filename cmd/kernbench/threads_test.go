package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/starlark/script"
)

// threadsOutputs is everything a run writes: its exit status, stdout,
// stderr and the files it names (wall-clock figures masked).
type threadsOutputs struct {
	Code           int
	Stdout, Stderr string
	Files          map[string]string
}

var wallFigure = regexp.MustCompile(`("wall_s": )[0-9.e+-]+|(wall )[0-9.]+s`)

// Rule (issue 31 item 1, docs/architecture.md "Parallel simulation"): a
// timed run of the builtin bench on a machine of several SIPs simulates
// a partition per SIP, and every output — the table, --json, --oplog,
// --trace, print lines, a deadlock's report, the exit status — is the
// same byte for byte for --threads 1, 2 and 4. Run with -race (the
// partitions of a window run on several goroutines).
func TestThreadsSameOutput(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"printer.star": `def kernel(sendbuf, recvbuf, rank, world_size, tl):
    print("start", rank)
    tl.send("E", sendbuf)
    m = tl.recv("W", dst = recvbuf)
    print("received", rank, tl.time())
`,
		"deadlock.star": `def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 5:
        tl.recv("W", dst = recvbuf)
    tl.send("E", sendbuf)
    tl.recv("W", dst = recvbuf)
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	msccl := filepath.Join(wd, "..", "..", "testdata", "msccl", "allreduce_hierarchical_16.xml")
	// 16 ranks on 4 SIPs of 2 cubes of 2 PEs.
	machine := []string{"--set", "system.sips=4", "--set", "system.cubes_per_sip=2", "--set", "system.pes_per_cube=2", "--world-size", "16"}
	jobs := []struct {
		name  string
		args  []string
		code  int      // its exit status
		files []string // outputs the run writes (--oplog, --trace)
	}{
		{"ring verified, op_log and trace", []string{"run", "ring_allreduce", "--bytes", "16K", "--json", "--oplog", "op.jsonl", "--trace", "trace.json"}, 0, []string{"op.jsonl", "trace.json"}},
		{"ring timing-only", []string{"run", "ring_allreduce", "--bytes", "256K", "--timing-only", "--json"}, 0, nil},
		{"tree table", []string{"run", "tree_allreduce", "--bytes", "16K"}, 0, nil},
		{"tl threads, two channels", []string{"run", "ring_allreduce_bidir", "--bytes", "16K", "--set", "defaults.channels=2", "--json"}, 0, nil},
		{"MSCCL schedule", []string{"run", msccl, "--bytes", "16K", "--json"}, 0, nil},
		{"prints", []string{"run", "printer.star", "--count", "8", "--verify-data=false", "--json"}, 0, nil},
		{"deadlock", []string{"run", "deadlock.star", "--count", "8"}, 3, nil},
	}
	for _, job := range jobs {
		t.Run(job.name, func(t *testing.T) {
			var want threadsOutputs
			for i, k := range []int{1, 2, 4} {
				args := append(append(append([]string(nil), job.args...), machine...), "--threads", fmt.Sprint(k))
				var stdout, stderr bytes.Buffer
				got := threadsOutputs{Code: mainIn(script.Env{Dir: dir}, args, &stdout, &stderr), Files: map[string]string{}}
				got.Stdout = wallFigure.ReplaceAllString(stdout.String(), "${1}${2}X")
				got.Stderr = stderr.String()
				for _, f := range job.files {
					data, err := os.ReadFile(filepath.Join(dir, f))
					if err != nil {
						t.Fatal(err)
					}
					got.Files[f] = string(data)
					os.Remove(filepath.Join(dir, f))
				}
				if i == 0 {
					want = got
					if got.Code != job.code {
						t.Fatalf("%v: exit %d, want %d:\n%s%s", args, got.Code, job.code, got.Stdout, got.Stderr)
					}
					continue
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("--threads %d differs from --threads 1 (-1 +%d):\n%s", k, k, diff)
				}
			}
			// What the job is for is in its output.
			for what, in := range map[string]string{"prints": "received 15", "deadlock": "deadlock", "MSCCL schedule": `"verified": true`, "ring verified, op_log and trace": `"phase2_match": true`} {
				if job.name == what && !bytes.Contains([]byte(want.Stdout+want.Stderr), []byte(in)) {
					t.Errorf("the output has no %q:\n%s%s", in, want.Stdout, want.Stderr)
				}
			}
		})
	}
}
