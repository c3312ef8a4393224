package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"kernbench/starlark/script"
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

// The stubs are valid Python syntax (checked with python3 when present) and
// name every builtin.
func TestDocsStubs(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if code := Main([]string{"docs", "--stubs", dir}, &out, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	data, err := os.ReadFile(dir + "/kernbench_tl.pyi")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"class TL:", "def send(self, dir, src, nbytes=None, piece_bytes=None)", "def recv_reduce_send(self, in_dir, local, out_dir, piece_bytes=None, prefetch=None)", "def recv(self, dir=None, dst=None)", "class Ptr:", "def slice(self, start, count)", "class Tile:"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("stubs lack %q", want)
		}
	}
	if py, err := exec.LookPath("python3"); err == nil {
		cmd := exec.Command(py, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())", dir+"/kernbench_tl.pyi")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("stubs are not valid Python: %v\n%s", err, msg)
		}
	}
}

// Every --flag the builtin reference mentions is a flag of a kernbench
// command: a user reading torch.args met "--arg name=value", which no
// command has.
func TestDocsNameRealFlags(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"docs"}, &out, &out); code != 0 {
		t.Fatalf("kernbench docs exited %d: %s", code, out.String())
	}
	flags := map[string]bool{}
	for _, c := range newRootCmd(script.Env{}, io.Discard, io.Discard).Commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = true })
	}
	for _, m := range regexp.MustCompile(`(?:^|[^-\w])--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(out.String(), -1) {
		if !flags[m[1]] {
			t.Errorf("kernbench docs mentions --%s, which no kernbench command has", m[1])
		}
	}
}
