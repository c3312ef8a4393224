package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kernbench/cmd/kernbench/internal/output"
	"kernbench/starlark/script"
)

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Rule (issue 29 item 4, rows stream with outputs; it replaces issue 12
// item 7's "outputs in place before the table"): with --trace and
// --oplog a sweep's rows are printed as each size ends, not held until
// the last one; the outputs are written to a temporary file and renamed
// into place, complete, also when stdout's reader has gone (a write to
// stdout fails, as under `| head`), and no temporary file is left
// behind; an earlier run's file is replaced, never half overwritten.
func TestRowsStreamWithOutputs(t *testing.T) {
	dir := t.TempDir()
	tr, oplog := filepath.Join(dir, "t.json"), filepath.Join(dir, "op.log")
	if err := os.WriteFile(filepath.Join(dir, "sizes.star"), []byte(`def kernel(sendbuf, recvbuf, rank, world_size, tl):
    print("simulating", len(sendbuf))
    tl.copy(recvbuf, sendbuf)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []bool{false, true} {
		if err := os.WriteFile(tr, []byte("an earlier run's trace"), 0o644); err != nil {
			t.Fatal(err)
		}
		// stdout and stderr in the order they were written.
		var log []string
		stdout := writerFunc(func(b []byte) (int, error) {
			log = append(log, "out: "+strings.TrimSpace(string(b)))
			if gone {
				return 0, syscall.EPIPE
			}
			return len(b), nil
		})
		stderr := writerFunc(func(b []byte) (int, error) {
			if s := strings.TrimSpace(string(b)); strings.Contains(s, "simulating") {
				log = append(log, "err: "+s[strings.Index(s, "simulating"):])
			}
			return len(b), nil
		})
		code := mainIn(script.Env{Dir: dir}, []string{"run", "sizes.star", "--world-size", "1", "--sweep", "256:1K", "--trace", tr, "--oplog", oplog, "-q"}, stdout, stderr)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		var got []string
		for _, l := range log {
			if strings.HasPrefix(l, "err:") || strings.Contains(l, " f32 ") {
				got = append(got, strings.Join(strings.Fields(l)[:3], " "))
			}
		}
		want := []string{"err: simulating 64", "out: 256 64", "err: simulating 128", "out: 512 128", "err: simulating 256", "out: 1024 256"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stdout gone %v: rows and the sizes' prints in order (-want +got):\n%s", gone, diff)
		}
		data, err := os.ReadFile(tr)
		if err != nil || !json.Valid(data) {
			t.Errorf("stdout gone %v: %s is not complete JSON (%d bytes, %v)", gone, tr, len(data), err)
		}
		ops, err := os.ReadFile(oplog)
		if err != nil || len(ops) == 0 {
			t.Errorf("stdout gone %v: %s is missing or empty: %v", gone, oplog, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(ops))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				t.Errorf("op_log line is not JSON: %q", sc.Text())
				break
			}
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if want := []string{"op.log", "sizes.star", "t.json"}; !slices.Equal(names, want) {
			t.Errorf("stdout gone %v: files left: %q, want %q (no temporary files)", gone, names, want)
		}
		if st, err := os.Stat(tr); err == nil && st.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644", tr, st.Mode().Perm())
		}
	}
}

// outputRuns are, for each output flag, a run that writes it and its exit
// status: one rank for the small files, four for an exported schedule
// (4 ranks) and a deadlock for --dot.
var outputRuns = []struct {
	flag string
	run  []string
	exit int
	// looks reports whether data is the output the flag writes.
	looks func(data []byte) bool
}{
	{"--oplog", smallRun, 0, func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("{")) && json.Valid(bytes.SplitN(b, []byte("\n"), 2)[0])
	}},
	{"--trace", smallRun, 0, json.Valid},
	{"--cpuprofile", smallRun, 0, func(b []byte) bool { return bytes.HasPrefix(b, []byte{0x1f, 0x8b}) }}, // gzip
	{"--dot", []string{"run", "deadlock.star", "--world-size", "2", "--count", "64"}, 3, func(b []byte) bool { return bytes.HasPrefix(b, []byte("digraph")) }},
	{"--csv", smallRun, 0, func(b []byte) bool { return bytes.HasPrefix(b, []byte("label,algorithm,")) }},
	{"--plot", smallRun, 0, func(b []byte) bool { return bytes.Contains(b, []byte("<svg")) }},
	{"--export-msccl", []string{"run", "ring_allreduce_bidir", "--world-size", "4", "--count", "4096", "-q"}, 0, func(b []byte) bool { return bytes.HasPrefix(b, []byte("<algo")) }},
}

var smallRun = []string{"run", "ring_allreduce", "--world-size", "1", "--count", "1", "-q"}

const deadlockStar = `def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tl.recv("W")
`

// Rule (reliability round 3, item 1): an output flag never replaces what
// stands at its path. A link to a regular file stays a link and its
// target is replaced, atomically, in the target's folder, keeping its
// permissions; a dangling link stays and its target is created; a named
// pipe is written into (read here while the run writes); - is stdout
// alone (the table goes to stderr), and no file named - appears.
func TestOutputTargets(t *testing.T) {
	profiled := flag.Lookup("test.cpuprofile")
	for _, c := range outputRuns {
		for _, target := range []string{"link", "dangling link", "fifo", "link to fifo", "-"} {
			// Not parallel: Go runs one CPU profile at a time.
			t.Run(c.flag+"/"+target, func(t *testing.T) {
				if c.flag == "--cpuprofile" && profiled != nil && profiled.Value.String() != "" {
					t.Skip("go test -cpuprofile already profiles this process")
				}
				dir := t.TempDir()
				env := script.Env{Dir: dir, Getenv: func(string) string { return "" }}
				for _, sub := range []string{"links", "files"} {
					if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(dir, "deadlock.star"), []byte(deadlockStar), 0o644); err != nil {
					t.Fatal(err)
				}
				// The link is in links/, what it names in files/.
				link, file := filepath.Join(dir, "links", "out"), filepath.Join(dir, "files", "out")
				arg := "links/out"
				var read chan []byte
				releaseFIFO := func() error { return nil }
				switch target {
				case "link":
					if err := os.WriteFile(file, []byte("an earlier run's file"), 0o600); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink("../files/out", link); err != nil {
						t.Fatal(err)
					}
				case "dangling link":
					if err := os.Symlink(file, link); err != nil {
						t.Fatal(err)
					}
				case "fifo", "link to fifo":
					fifo := link
					if target == "link to fifo" {
						fifo = file
						if err := os.Symlink("../files/out", link); err != nil {
							t.Fatal(err)
						}
					}
					if err := syscall.Mkfifo(fifo, 0o600); err != nil {
						t.Skipf("no named pipes here: %v", err)
					}
					// The reader opens first (without waiting for a
					// writer), then the test holds the pipe open for
					// writing too: the run's open does not wait, and the
					// reader reads until the test lets go after the run
					// (also when the run never wrote into the pipe).
					r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					hold, err := os.OpenFile(fifo, os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer hold.Close()
					read = make(chan []byte, 1)
					go func() {
						data, _ := io.ReadAll(r)
						read <- data
					}()
					releaseFIFO = hold.Close
				case "-":
					arg = "-"
				}
				var stdout, stderr bytes.Buffer
				code := mainTest(env, append(slices.Clone(c.run), c.flag, arg), &stdout, &stderr)
				_ = releaseFIFO()
				if code != c.exit {
					t.Fatalf("exit %d, want %d\nstderr:\n%s", code, c.exit, stderr.String())
				}
				var got []byte
				switch target {
				case "link", "dangling link", "link to fifo":
					if to, err := os.Readlink(link); err != nil {
						t.Errorf("links/out is no longer a link: %v", err)
					} else if want := map[bool]string{true: file, false: "../files/out"}[target == "dangling link"]; to != want {
						t.Errorf("links/out links to %s, want %s", to, want)
					}
				}
				switch target {
				case "link", "dangling link":
					st, err := os.Lstat(file)
					if err != nil || !st.Mode().IsRegular() {
						t.Fatalf("files/out: %v, %v; want a regular file", st, err)
					}
					if want := map[bool]fs.FileMode{true: 0o600, false: 0o644}[target == "link"]; st.Mode().Perm() != want {
						t.Errorf("files/out has mode %v, want %v", st.Mode().Perm(), want)
					}
					got, _ = os.ReadFile(file)
				case "fifo", "link to fifo":
					var fifo string
					if target == "fifo" {
						fifo = link
					} else {
						fifo = file
					}
					if st, err := os.Lstat(fifo); err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
						t.Fatalf("the named pipe was replaced: %v, %v", st, err)
					}
					got = <-read
				case "-":
					got = stdout.Bytes()
					if _, err := os.Lstat(filepath.Join(dir, "-")); err == nil {
						t.Error("a file named - was created")
					}
				}
				if !c.looks(got) {
					t.Errorf("the output (%d bytes) is not what %s writes: %.80q\nstderr:\n%s", len(got), c.flag, got, stderr.String())
				}
				if target != "-" && stdout.Len() == 0 && c.exit == 0 {
					t.Error("nothing on stdout (the table)")
				}
				// No temporary file is left behind, in either folder.
				for _, sub := range []string{"links", "files"} {
					ents, _ := os.ReadDir(filepath.Join(dir, sub))
					for _, e := range ents {
						if e.Name() != "out" {
							t.Errorf("%s/%s left behind", sub, e.Name())
						}
					}
				}
			})
		}
	}
}

// A link that leads through /proc to a file descriptor open on a regular
// file (what /dev/stdout is when stdout is redirected to a file) is
// refused: renaming over the descriptor's file would take it from under
// the process. (A link in a temporary folder: the tests never touch the
// host's /dev.)
func TestOutputThroughProcFD(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "redirected"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
	if _, err := os.Lstat(fd); err != nil {
		t.Skipf("no %s here: %v", fd, err)
	}
	if err := os.Symlink(fd, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	env := script.Env{Dir: dir, Getenv: func(string) string { return "" }}
	var stderr bytes.Buffer
	code := mainTest(env, append(slices.Clone(smallRun), "--csv", "out"), io.Discard, &stderr)
	want := fmt.Sprintf("kernbench: --csv: out leads to a file descriptor (%s) open on a regular file; give that file's name, or - for stdout\n", fd)
	if code != 2 || !strings.HasPrefix(stderr.String(), want) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr.String(), want)
	}
	if to, err := os.Readlink(filepath.Join(dir, "out")); err != nil || to != fd {
		t.Errorf("out: %q, %v; want the link to %s", to, err, fd)
	}
}

// The decision on what stands at an output's path (links followed): a
// regular file is replaced, a pipe and a character device are written
// into, and nothing else is touched. A device is tested by its mode only:
// the tests never write to the host's device nodes.
func TestOutputKindOf(t *testing.T) {
	type verdict struct {
		Kind    output.Kind
		Refused bool
	}
	for _, c := range []struct {
		mode fs.FileMode
		want verdict
	}{
		{0o644, verdict{output.Replace, false}},
		{fs.ModeNamedPipe | 0o600, verdict{output.Stream, false}},
		{fs.ModeDevice | fs.ModeCharDevice | 0o666, verdict{output.Stream, false}},
		{fs.ModeDevice | 0o660, verdict{0, true}}, // a block device: a disk
		{fs.ModeSocket | 0o755, verdict{0, true}},
		{fs.ModeDir | 0o755, verdict{0, true}},
		{fs.ModeIrregular, verdict{0, true}},
	} {
		kind, err := output.KindOf(fakeInfo{c.mode})
		if diff := cmp.Diff(c.want, verdict{kind, err != nil}); diff != "" {
			t.Errorf("mode %v (-want +got):\n%s", c.mode, diff)
		}
	}
}

// fakeInfo is the fs.FileInfo of a file of a given mode.
type fakeInfo struct{ mode fs.FileMode }

func (f fakeInfo) Name() string       { return "out" }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeInfo) Sys() any           { return nil }

// An output that cannot be written fails the run with IOError (exit 2),
// whenever the failure shows: while the run writes it (a large trace),
// when it is flushed at the end (a small op_log was reported and the run
// exited 0), or when the finished run writes it (--csv, --plot,
// --export-msccl were usage errors). Shown here with - and a stdout that
// refuses every write (the tests write to no device).
func TestOutputWriteFailures(t *testing.T) {
	for _, c := range outputRuns {
		if c.flag == "--cpuprofile" {
			continue // in its own test: one CPU profile at a time
		}
		t.Run(c.flag, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "deadlock.star"), []byte(deadlockStar), 0o644); err != nil {
				t.Fatal(err)
			}
			env := script.Env{Dir: dir, Getenv: func(string) string { return "" }}
			full := writerFunc(func([]byte) (int, error) { return 0, errors.New("no space left on device") })
			var stderr bytes.Buffer
			code := mainTest(env, append(slices.Clone(c.run), c.flag, "-"), full, &stderr)
			type verdict struct {
				Status   int
				LastLine string
				Said     bool // the message names the flag and the failed write
			}
			want := verdict{2, "kernbench: IOError (exit status 2)", true}
			if c.flag == "--dot" {
				// The deadlock is the run's failure; the graph that
				// could not be written is one more diagnostic.
				want = verdict{3, "kernbench: Deadlock (exit status 3)", true}
			}
			got := verdict{code, lastLine(stderr.String()), strings.Contains(stderr.String(), c.flag+" - (stdout): no space left on device")}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s - (-want +got):\n%s\nstderr:\n%s", c.flag, diff, stderr.String())
			}
		})
	}
}
