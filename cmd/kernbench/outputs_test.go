package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/starlark/script"
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

// An output file that cannot be written fails the run with IOError (exit
// 2), whenever the failure shows: while the run writes it (a large trace),
// when it is flushed at the end (a small op_log was reported and the run
// exited 0), or when the finished run writes it (--csv, --plot,
// --export-msccl were usage errors). A path that is not a regular file is
// written into and never replaced: a link to /dev/null stays a link.
func TestOutputWriteFailures(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	// A run of one rank: its op_log and trace (a few hundred bytes) fit
	// the output's buffer, so the failed write shows when the file is
	// flushed. (The exported schedule needs 4 ranks.)
	small := []string{"run", "ring_allreduce", "--world-size", "1", "--count", "1", "-q"}
	for _, c := range []struct {
		flag string
		run  []string
	}{
		{"--oplog", small},
		{"--trace", small},
		{"--csv", small},
		{"--plot", small},
		{"--export-msccl", []string{"run", "ring_allreduce_bidir", "--world-size", "4", "--count", "4096", "-q"}},
	} {
		flag, run := c.flag, c.run
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			env := script.Env{Dir: dir, Getenv: func(string) string { return "" }}
			var stderr bytes.Buffer
			code := mainIn(env, append(slices.Clone(run), flag, "/dev/full"), io.Discard, &stderr)
			type verdict struct {
				Status   int
				LastLine string
				Said     bool // the message names the flag and the failed write
			}
			got := verdict{code, lastLine(stderr.String()), strings.Contains(stderr.String(), flag) && strings.Contains(stderr.String(), "write /dev/full: no space left on device")}
			if diff := cmp.Diff(verdict{2, "kernbench: IOError (exit status 2)", true}, got); diff != "" {
				t.Errorf("%s /dev/full (-want +got):\n%s\nstderr:\n%s", flag, diff, stderr.String())
			}

			if err := os.Symlink("/dev/null", filepath.Join(dir, "out")); err != nil {
				t.Fatal(err)
			}
			stderr.Reset()
			if code := mainIn(env, append(slices.Clone(run), flag, "out"), io.Discard, &stderr); code != 0 {
				t.Fatalf("%s out (a link to /dev/null): exit %d\n%s", flag, code, stderr.String())
			}
			if st, err := os.Lstat(filepath.Join(dir, "out")); err != nil || st.Mode()&fs.ModeSymlink == 0 {
				t.Errorf("%s out: the link to /dev/null was replaced (%v, %v)", flag, st.Mode(), err)
			}
		})
	}
}
