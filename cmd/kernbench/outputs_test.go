package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Rule (issue 12 item 7, outputs that survive): --trace and --oplog are
// written to a temporary file and renamed into place, complete, before the
// first byte of the table reaches stdout (a `| head` that ends the process
// there leaves valid files), and no temporary file is left behind; an
// earlier run's file is replaced, never half overwritten.
func TestOutputsInPlaceBeforeTable(t *testing.T) {
	dir := t.TempDir()
	tr, oplog := filepath.Join(dir, "t.json"), filepath.Join(dir, "op.log")
	if err := os.WriteFile(tr, []byte("an earlier run's trace"), 0o644); err != nil {
		t.Fatal(err)
	}
	checked := false
	stdout := writerFunc(func(b []byte) (int, error) {
		if checked {
			return len(b), nil
		}
		checked = true
		data, err := os.ReadFile(tr)
		if err != nil || !json.Valid(data) {
			t.Errorf("at the first line of the table, %s is not complete JSON (%d bytes, %v)", tr, len(data), err)
		}
		ops, err := os.ReadFile(oplog)
		if err != nil || len(ops) == 0 {
			t.Errorf("at the first line of the table, %s is missing or empty: %v", oplog, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(ops))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				t.Errorf("op_log line is not JSON: %q", sc.Text())
				break
			}
		}
		return len(b), nil
	})
	code := Main([]string{"run", "ring_allreduce", "--world-size", "3", "--sweep", "256:1K", "--trace", tr, "--oplog", oplog}, stdout, io.Discard)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !checked {
		t.Fatal("nothing printed on stdout")
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"op.log", "t.json"}; !slices.Equal(names, want) {
		t.Errorf("files left: %q, want %q (no temporary files)", names, want)
	}
	if st, err := os.Stat(tr); err == nil && st.Mode().Perm() != 0o644 {
		t.Errorf("%s has mode %v, want 0644", tr, st.Mode().Perm())
	}
}
