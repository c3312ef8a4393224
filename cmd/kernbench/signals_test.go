//go:build unix

package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Rule (issue 29 item 4): an interrupted sweep keeps the rows it printed
// and leaves no hidden temporary file of --trace or --oplog behind (they
// were large and stayed); it exits 128 + the signal's number. The third
// size spins up to a step limit of 10^10 (half a minute of CPU), so the
// interrupt comes while it runs: the test waits for the two rows before
// it, not for any time (before the rows streamed, they came only after
// the step limit, and the run ended with StepLimit).
//
// The last line names the signal: "terminated" and "hangup", Go's names of
// SIGTERM and SIGHUP, made "stopped by terminated".
func TestInterruptKeepsRowsAndRemovesTemporaryFiles(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
	}{
		{syscall.SIGINT, "interrupt"},
		{syscall.SIGTERM, "SIGTERM"},
		{syscall.SIGHUP, "SIGHUP"},
	} {
		t.Run(tc.name, func(t *testing.T) { testInterrupt(t, tc.sig, tc.name) })
	}
}

func testInterrupt(t *testing.T, sig syscall.Signal, name string) {
	bin, err := exec.LookPath("kernbench")
	if err != nil {
		t.Fatalf("no kernbench in PATH (TestMain puts the test binary there): %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "spin.star"), []byte(`def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if len(sendbuf) > 128:
        x = 0
        for i in range(1000000000000):
            x += 1
    tl.copy(recvbuf, sendbuf)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "spin.star", "--world-size", "1", "--sweep", "256:1K", "--trace", "t.json", "--oplog", "op.log", "--max-steps", "10000000000", "-q")
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }() // (if the test fails first)
	rd := bufio.NewReader(out)
	var rows []string
	for len(rows) < 3 { // the header and the rows of 256 and 512 bytes
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stdout ended after %q: %v; stderr: %s", rows, err, stderr.String())
		}
		rows = append(rows, strings.Join(strings.Fields(line)[:2], " "))
	}
	// The temporary files are there while the third size runs.
	hidden := func() []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				names = append(names, e.Name())
			}
		}
		return names
	}
	if h := hidden(); len(h) != 2 {
		t.Errorf("while the run writes --trace and --oplog: hidden files %q, want their two temporary files", h)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(rd)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
		t.Errorf("exit: %v, want status %d", err, 128+int(sig))
	}
	if diff := cmp.Diff([]string{"size count", "256 64", "512 128"}, rows); diff != "" || len(rest) > 0 {
		t.Errorf("rows printed (-want +got):\n%s\nthen %q", diff, rest)
	}
	if h := hidden(); len(h) != 0 {
		t.Errorf("hidden files left after the interrupt: %q", h)
	}
	for _, f := range []string{"t.json", "op.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want no file (the run did not end)", f, err)
		}
	}
	if want := "kernbench: stopped by " + name + "; 2 output file(s) under way not written (their temporary files are removed)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not say %q", stderr.String(), want)
	}
}
