package main

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files (docs/builtins.md)")

// docs/builtins.md is exactly what `kernbench docs` prints.
func TestDocsInSync(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"docs"}, &out, &out); code != 0 {
		t.Fatalf("kernbench docs exited %d: %s", code, out.String())
	}
	const path = "../../docs/builtins.md"
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/kernbench -run TestDocsInSync -update)", err)
	}
	if diff := cmp.Diff(string(want), out.String()); diff != "" {
		t.Errorf("docs/builtins.md is stale; run go test ./cmd/kernbench -run TestDocsInSync -update (-want +got):\n%s", diff)
	}
}
