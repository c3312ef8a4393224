package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kernbench/starlark/cputime"
	"kernbench/starlark/script"
)

// badDir holds the bad-input corpus: one file per documented failure.
const badDir = "../../testdata/bad"

// badCaseCPU bounds the CPU time one case may use: a bad input must fail
// within seconds. The bound is on CPU time, never wall time: on a machine
// shared with other work a case that takes 0.04 s alone took up to 27 s,
// using no more CPU.
const badCaseCPU = 5 * time.Second

// badHangCPU is the CPU time the process may use while one case runs
// before the case counts as a hang (the whole corpus uses about half a
// second). A hang that blocks without using CPU is left to go test's
// -timeout, which names the running case.
const badHangCPU = 2 * time.Minute

// knownBugs lists corpus entries whose expected (correct) behaviour the
// current code does not show yet. Each is skipped with its reason instead of
// being run; remove the entry when the bug is fixed. KERNBENCH_BAD_RUN_KNOWN=1
// runs them anyway (except those in fatalBugs), to see which are fixed.
var knownBugs = map[string]string{}

// fatalBugs are known bugs that kill the process (not recoverable panics):
// never run in-process.
var fatalBugs = map[string]bool{}

// badCase is one parsed corpus file.
type badCase struct {
	name      string   // file name inside badDir
	args      []string // kernbench arguments, $FILE substituted
	exit      int
	stderr    []string // fragments that must appear on stderr
	notStderr []string // fragments that must not appear on stderr
	stdout    []string // fragments that must appear on stdout
	copies    []string // support files (relative to badDir) copied next to the case
	// serial, when set, says why the case does much more work than the
	// others before it fails (deep recursion grows a huge stack): it runs
	// alone, before the parallel cases, so that the process's CPU time
	// while it runs is its own.
	serial string
}

var headerRE = regexp.MustCompile(`^#\s*(args|exit|stderr|!stderr|stdout|copy|serial):\s?(.*)$`)

// parseBadCase reads the leading comment lines of a corpus file:
//
//	# args: run --world-size 4 --count 64    (kernbench arguments)
//	# exit: 4                                (exact exit status)
//	# stderr: IpcqInvalidDirection           (repeatable; each must appear)
//	# !stderr: fragment                      (repeatable; must not appear)
//	# stdout: fragment                       (repeatable; each must appear)
//	# copy: support/other.star               (repeatable; copied next to the file)
//	# serial: reason                         (runs alone, before the others)
//
// $FILE in args and fragments is the case file's name. A .star case whose
// args do not mention $FILE gets its name inserted after the subcommand.
// Other comment lines are free text; the header ends at the first line that
// is not a comment.
func parseBadCase(name string, data []byte) (*badCase, error) {
	c := &badCase{name: name, exit: -1}
	sawArgs := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	first := true
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		// An MSCCL .xml case keeps its header in a leading processing
		// instruction (a comment may not contain "--"): "<?kernbench-case",
		// the "# ..." lines, "?>".
		if first && line == "<?kernbench-case" && filepath.Ext(name) == ".xml" {
			first = false
			continue
		}
		first = false
		if !strings.HasPrefix(line, "#") {
			break
		}
		m := headerRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		val := strings.ReplaceAll(strings.TrimSpace(m[2]), "$FILE", name)
		switch m[1] {
		case "args":
			args, err := splitArgs(m[2])
			if err != nil {
				return nil, err
			}
			hasFile := false
			for i := range args {
				if strings.Contains(args[i], "$FILE") {
					hasFile = true
					args[i] = strings.ReplaceAll(args[i], "$FILE", name)
				}
			}
			if !hasFile {
				if ext := filepath.Ext(name); ext != ".star" && ext != ".xml" || len(args) == 0 {
					return nil, fmt.Errorf("args must mention $FILE")
				}
				args = append([]string{args[0], name}, args[1:]...)
			}
			c.args, sawArgs = args, true
		case "exit":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > 4 {
				return nil, fmt.Errorf("exit: want 0..4, got %q", val)
			}
			c.exit = n
		case "stderr":
			c.stderr = append(c.stderr, val)
		case "!stderr":
			c.notStderr = append(c.notStderr, val)
		case "stdout":
			c.stdout = append(c.stdout, val)
		case "copy":
			c.copies = append(c.copies, val)
		case "serial":
			if val == "" {
				return nil, fmt.Errorf("serial: give the reason")
			}
			c.serial = val
		}
	}
	switch {
	case !sawArgs:
		return nil, fmt.Errorf("no '# args:' header")
	case c.exit < 0:
		return nil, fmt.Errorf("no '# exit:' header")
	case c.exit != 0 && len(c.stderr) == 0:
		return nil, fmt.Errorf("a failing case needs at least one '# stderr:' fragment")
	}
	return c, nil
}

// splitArgs splits a header's arguments on blanks; single or double quotes
// group words ('--set=system.placement=[0, 0]').
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inArg := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ' || r == '\t':
			if inArg {
				out = append(out, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("args: unterminated quote in %q", s)
	}
	if inArg {
		out = append(out, cur.String())
	}
	return out, nil
}

// TestBadInputCorpus runs every file of testdata/bad/ through Main in a
// fresh directory holding a copy of it and checks the exit status and the
// diagnostics its header promises. Main never lets a panic out, but a
// recovered panic is still a bug: "internal error" on stderr fails the case.
// The cases run in parallel, in-process, each with its directory as the
// working directory and no environment variables (script.Env). Each must
// end within badCaseCPU of CPU time; one whose process time passes it is
// run again alone, for its own.
func TestBadInputCorpus(t *testing.T) {
	entries, err := os.ReadDir(badDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var hung atomic.Pointer[string]
	// alone lets a case be measured with no other case running: each run
	// holds it for reading, a run that must be alone for writing.
	var alone sync.RWMutex
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if e.IsDir() || (ext != ".star" && ext != ".yaml" && ext != ".xml") {
			continue
		}
		n++
		t.Run(strings.TrimSuffix(name, ext)+strings.ReplaceAll(ext, ".", "_"), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(badDir, name))
			if err != nil {
				t.Fatal(err)
			}
			c, err := parseBadCase(name, data)
			if err != nil {
				t.Fatalf("%s: bad header: %v", name, err)
			}
			if c.serial == "" {
				t.Parallel()
			}
			if h := hung.Load(); h != nil {
				t.Skipf("not run: %s did not finish and may still be running", *h)
			}
			if reason, ok := knownBugs[name]; ok && (os.Getenv("KERNBENCH_BAD_RUN_KNOWN") == "" || fatalBugs[name]) {
				t.Skip(reason)
			}
			r, ok := runBadCase(t, c, data, &alone, false)
			if !ok {
				hung.Store(&name)
				t.Fatalf("kernbench %s: the process used %v of CPU while it ran (a hang, in it or in a case beside it)", strings.Join(c.args, " "), badHangCPU)
			}
			if r.cpuKnown && r.cpu > badCaseCPU && c.serial == "" {
				// The process's CPU time counts the cases that ran beside
				// this one: measure it again with none.
				again, ok := runBadCase(t, c, data, &alone, true)
				if !ok {
					hung.Store(&name)
					t.Fatalf("kernbench %s: the process used %v of CPU while it ran alone (a hang)", strings.Join(c.args, " "), badHangCPU)
				}
				r.cpu = again.cpu
			}
			if r.cpuKnown && r.cpu > badCaseCPU {
				t.Errorf("kernbench %s used %v of CPU; a bad input must fail within seconds", strings.Join(c.args, " "), r.cpu.Round(time.Millisecond))
			}

			code, errText, outText := r.code, r.stderr, r.stdout
			var problems []string
			for _, bad := range []string{"internal error", "panic escaped Main", "\ngoroutine "} {
				if strings.Contains(errText, bad) {
					problems = append(problems, fmt.Sprintf("stderr contains %q: a Go panic reached the user", bad))
				}
			}
			if code != c.exit {
				problems = append(problems, fmt.Sprintf("exit status %d, want %d", code, c.exit))
			}
			for _, f := range c.stderr {
				if !strings.Contains(errText, f) {
					problems = append(problems, fmt.Sprintf("stderr lacks %q", f))
				}
			}
			for _, f := range c.notStderr {
				if strings.Contains(errText, f) {
					problems = append(problems, fmt.Sprintf("stderr contains %q", f))
				}
			}
			for _, f := range c.stdout {
				if !strings.Contains(outText, f) {
					problems = append(problems, fmt.Sprintf("stdout lacks %q", f))
				}
			}
			// Data goes to stdout, diagnostics to stderr: a failed run
			// prints nothing on stdout (except the --json document).
			if c.exit >= 2 && outText != "" && !hasArg(c.args, "--json") {
				problems = append(problems, fmt.Sprintf("exit %d with output on stdout", c.exit))
			}
			if len(problems) > 0 {
				t.Errorf("kernbench %s:\n  %s\n--- stderr (%d bytes):\n%s\n--- stdout:\n%s", strings.Join(c.args, " "),
					strings.Join(problems, "\n  "), len(errText), clip(errText, 3000), clip(outText, 1000))
			}
		})
	}
	if n == 0 {
		t.Fatalf("no cases in %s", badDir)
	}
}

// badRun is what one run of a corpus case did.
type badRun struct {
	code           int
	stdout, stderr string
	// cpu is the process's CPU time while the case ran: the case's own
	// when it ran alone, else an upper bound (cpuKnown: measured).
	cpu      time.Duration
	cpuKnown bool
}

// runBadCase runs c through mainIn in a fresh directory holding a copy of
// it (data) and its support files. It holds alone for reading, or for
// writing when exclusive. ok is false when the process used badHangCPU
// of CPU time before the case ended; the case may still be running then.
func runBadCase(t *testing.T, c *badCase, data []byte, alone *sync.RWMutex, exclusive bool) (r badRun, ok bool) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, c.name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cp := range c.copies {
		b, err := os.ReadFile(filepath.Join(badDir, cp))
		if err != nil {
			t.Fatalf("copy: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(cp)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := script.Env{Dir: dir, Getenv: func(string) string { return "" }}
	if exclusive {
		alone.Lock()
		defer alone.Unlock()
	} else {
		alone.RLock()
		defer alone.RUnlock()
	}
	if hasMaxMemory(c.args) {
		// The memory guard measures the whole process: beside the other
		// cases, it would see their memory too (kbexit does the same).
		return runBadProcess(t, c, dir), true
	}
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	cpuStart, cpuKnown := cputime.Process()
	go func() {
		code := -1
		defer func() {
			// Main recovers its own panics; this catches one that
			// escapes it anyway, so the other cases still run.
			if r := recover(); r != nil {
				fmt.Fprintf(&stderr, "panic escaped Main: %v\n%s", r, debug.Stack())
				code = -2
			}
			done <- code
		}()
		code = mainTest(env, c.args, &stdout, &stderr)
	}()
	code, ok := cputime.Await(done, badHangCPU)
	if !ok {
		return badRun{}, false
	}
	cpuEnd, _ := cputime.Process()
	return badRun{code: code, stdout: stdout.String(), stderr: stderr.String(), cpu: cpuEnd - cpuStart, cpuKnown: cpuKnown}, true
}

// runBadProcess runs c as a process of its own (the kernbench binary
// TestMain puts on PATH) in dir; its CPU time is the process's.
func runBadProcess(t *testing.T, c *badCase, dir string) badRun {
	t.Helper()
	bin, err := exec.LookPath("kernbench")
	if err != nil {
		t.Fatalf("no kernbench in PATH (TestMain puts the test binary there): %v", err)
	}
	cmd := exec.Command(bin, c.args...)
	cmd.Dir = dir
	// As hermetic as the in-process runs' empty environment: no
	// KERNBENCH_* setting of the developer's reaches the case.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KERNBENCH_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kernbench %s: %v", strings.Join(c.args, " "), err)
	}
	st := cmd.ProcessState
	return badRun{code: code, stdout: stdout.String(), stderr: stderr.String(), cpu: st.UserTime() + st.SystemTime(), cpuKnown: true}
}

func hasArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("\n… (%d more bytes)", len(s)-n)
}

// TestParseBadCase pins the header format of the corpus.
func TestParseBadCase(t *testing.T) {
	c, err := parseBadCase("x.star", []byte("# args: run --count 8 '--set=a.b=[0, 1]'\n# exit: 4\n# free text\n# stderr: $FILE:3:\n# !stderr: nope\ndef kernel(): pass\n# stderr: ignored\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"run", "x.star", "--count", "8", "--set=a.b=[0, 1]"}
	if strings.Join(c.args, "|") != strings.Join(want, "|") {
		t.Errorf("args = %q, want %q", c.args, want)
	}
	if c.exit != 4 || len(c.stderr) != 1 || c.stderr[0] != "x.star:3:" || len(c.notStderr) != 1 {
		t.Errorf("parsed %+v", c)
	}
	if _, err := parseBadCase("y.yaml", []byte("# args: run ring_allreduce\n# exit: 2\n# stderr: x\n")); err == nil {
		t.Error("a .yaml case without $FILE must be rejected")
	}
	if _, err := parseBadCase("y.star", []byte("# args: run\n# exit: 2\n")); err == nil {
		t.Error("a failing case without stderr fragments must be rejected")
	}
}
