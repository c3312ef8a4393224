package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Golden tables: small sweeps whose whole output (times, bandwidths, eff)
// must not change unless the model or the algorithm does. Regenerate with
// go test ./cmd/kernbench -run TestGoldenTables -update and review the diff.
func TestGoldenTables(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"ring_allreduce_sweep", []string{"run", "ring_allreduce", "--sweep", "1K:64K", "--world-size", "4", "-q"}},
		{"ring_allreduce_bf16_max_ws5", []string{"run", "ring_allreduce", "--sweep", "4K:16K", "--world-size", "5", "--dtype", "bf16", "--redop", "max", "-q"}},
		{"ccl_allreduce_bench", []string{"run", "--bench", "ccl_allreduce", "--sweep", "1K:4K", "--world-size", "3", "-q"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Main(tc.args, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			path := filepath.Join("..", "..", "testdata", "golden", tc.name+".txt")
			if *update {
				if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), out.String()); diff != "" {
				t.Errorf("%s changed (-want +got):\n%s", path, diff)
			}
		})
	}
}
