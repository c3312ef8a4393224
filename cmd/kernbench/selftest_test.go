package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/selftest"
)

// A self-test reproducer is what it claims: `kernbench run kernel.star`
// with the case's arguments (as repro.sh runs it) simulates exactly the
// run the self-test checked, flags and --set items included.
func TestSelfTestReproducerRunsTheCase(t *testing.T) {
	for _, seed := range []uint64{2, 23, 40, 99, 110} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := selftest.Generate(seed, selftest.GenOptions{})
			dir := t.TempDir()
			file := filepath.Join(dir, selftest.FileName)
			if err := os.WriteFile(file, []byte(c.Source), 0o644); err != nil {
				t.Fatal(err)
			}
			want, err := c.Run(file, false)
			if err != nil {
				t.Fatalf("in process: %v", err)
			}
			var stdout, stderr bytes.Buffer
			args := append(append([]string{"run", selftest.FileName}, c.Args()...), "--json")
			if code := mainIn(script.Env{Dir: dir}, args, &stdout, &stderr); code != 0 {
				t.Fatalf("kernbench %q: exit %d\n%s", args, code, stderr.String())
			}
			var got report.Report
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			type row struct {
				SimTimeNs float64
				Events    uint64
				Ops       report.OpCounts
				Wrong     int64
				DType     string
				RedOp     string
				InPlace   bool
			}
			rows := func(r *report.Report) (out []row) {
				for _, x := range r.Results {
					out = append(out, row{x.SimTimeNs, x.Events, x.Ops, x.Wrong, x.DType, x.RedOp, x.InPlace})
				}
				return out
			}
			if d := cmp.Diff(rows(want), rows(&got)); d != "" {
				t.Errorf("the reproducer's run differs from the case's (-case +kernbench run):\n%s", d)
			}
			if got.Collective != c.Collective || got.Topology != c.Topology || got.WorldSize != c.WorldSize {
				t.Errorf("kernbench ran %s on %s with %d ranks, the case is %s on %s with %d", got.Collective, got.Topology, got.WorldSize, c.Collective, c.Topology, c.WorldSize)
			}
			// The reproducer's --timing-only line runs the case's
			// timing-only run (it takes no --seed).
			wantT, errT := c.Run(file, true)
			stdout.Reset()
			stderr.Reset()
			args = append(append([]string{"run", selftest.FileName}, c.TimingOnlyArgs()...), "--json")
			code := mainIn(script.Env{Dir: dir}, args, &stdout, &stderr)
			if errT != nil {
				// (A kernel that divides integer tiles has no timing-only
				// run: both refuse it the same way.)
				if want := errkind.Of(errT).Status; code != want {
					t.Errorf("kernbench %q: exit %d, the case's timing-only run %d (%v)", args, code, want, errT)
				}
				return
			}
			if code != 0 {
				t.Fatalf("kernbench %q: exit %d\n%s", args, code, stderr.String())
			}
			var gotT report.Report
			if err := json.Unmarshal(stdout.Bytes(), &gotT); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(rows(wantT), rows(&gotT)); d != "" {
				t.Errorf("the reproducer's --timing-only run differs from the case's (-case +kernbench run):\n%s", d)
			}
		})
	}
}
