package ccl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"kernbench"
	"kernbench/engine/config"
	"kernbench/starlark/cputime"
	"kernbench/starlark/report"
)

// FuzzStarExecution runs small generated .star programs through Run and
// checks that whatever a script does, kernbench never panics, always returns
// within its limits, and reports every failure as a *Failure with a
// documented exit status.
//
// An input is (mode, pos, data):
//
//	mode%3 == 0: data is the whole program (seeded with the shipped
//	             algorithms, valid kernels and the bad-input corpus);
//	mode%3 == 1: data is spliced into a valid template kernel at byte pos;
//	mode%3 == 2: data drives a generator of tl calls, Ptr and Tile
//	             operations with random (often hostile) arguments; pos
//	             picks which rank runs the generated statements.
//
// Run it with
//
//	go test ./starlark/ccl -run '^$' -fuzz FuzzStarExecution -fuzztime 60s -fuzzminimizetime 10s
//
// (the default minimization time of 60s per new input stalls short runs).
// Environment: KERNBENCH_FUZZ_SKIP_KNOWN=1 skips programs that trip bugs
// already reported (fuzzKnownBugs), KERNBENCH_FUZZ_LIMIT=2s tightens the
// per-run CPU-time limit, KERNBENCH_FUZZ_PRINT=1 prints every program
// before it runs (a Go fatal error kills the process without a message).
// Move a crasher out of testdata/fuzz/ once it is reported: a committed
// crasher fails every go test run.
func FuzzStarExecution(f *testing.F) {
	seeds := fuzzSeedPrograms(f)
	if testing.Short() {
		// The -short tier runs a few of the programs as seeds; the full
		// tier all of them.
		seeds = seeds[:min(len(seeds), 4)]
	}
	for _, src := range seeds {
		f.Add(uint8(0), uint16(0), []byte(src))
	}
	for i, ins := range []string{
		"", "\n    tl.flush()", "\n    y = x + x", "\n    tl.send(\"N\", sendbuf)",
		"\n    p = sendbuf.slice(1, 4)", "\n    z = tl.alloc(16, \"f16\", \"sram\")",
		"\n    tl.recv()", " ** 2", "\nfail(1)", "\n    while True:\n        pass",
	} {
		f.Add(uint8(1), uint16(len(fuzzTemplate)*i/10), []byte(ins))
	}
	f.Add(uint8(2), uint16(0), []byte{})
	f.Add(uint8(2), uint16(1), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add(uint8(2), uint16(2), []byte("tl.send and tl.recv with odd arguments"))
	f.Add(uint8(2), uint16(0), []byte{3, 0, 0, 0, 9, 1, 0, 0, 12, 2, 2, 1, 30, 3, 1, 0})

	f.Fuzz(func(t *testing.T, mode uint8, pos uint16, data []byte) {
		var src string
		switch mode % 3 {
		case 0:
			src = string(data)
		case 1:
			at := int(pos) % (len(fuzzTemplate) + 1)
			src = fuzzTemplate[:at] + string(data) + fuzzTemplate[at:]
		case 2:
			src = fuzzGenerate(data, pos)
		}
		if os.Getenv("KERNBENCH_FUZZ_SKIP_KNOWN") != "" {
			for _, k := range fuzzKnownBugs {
				if k.re.MatchString(src) {
					t.Skip(k.bug)
				}
			}
		}
		fuzzRunProgram(t, src)
	})
}

// fuzzKnownBugs recognise programs that trip bugs already reported. With
// KERNBENCH_FUZZ_SKIP_KNOWN=1 the fuzzer skips them, to look for new ones
// past a crasher it would otherwise find again at once (a Go out-of-memory
// crash kills the fuzzing process). Remove an entry when its bug is fixed.
var fuzzKnownBugs = []struct {
	bug string
	re  *regexp.Regexp
}{
	{"tl.zeros/tl.full have no size limit (Go fatal out of memory, or count x size overflow)",
		regexp.MustCompile(`(zeros|full)\([^\n]*(<<\s*(3[0-9]|[4-9][0-9])|[0-9]{10})`)},
	{"tl.alloc: count x size and the alignment round-up overflow int64",
		regexp.MustCompile(`alloc\([^\n]*(<<\s*(6[0-9])|[0-9]{18})`)},
	{"Ptr.slice: start + count overflows int64 and passes the bounds check",
		regexp.MustCompile(`slice\([^\n]*(<<\s*(6[0-9])|[0-9]{18})`)},
}

// fuzzLimit bounds the CPU time the process uses while one execution runs
// (CPU, not wall time: other work on the machine does not stretch it). The
// step limit (10^5 per rank) and the small simulated-time watchdog below
// keep honest runs in the milliseconds; anything near this limit is a
// hang. KERNBENCH_FUZZ_LIMIT (a Go duration) overrides it, e.g. to hunt
// slow inputs with 2s.
var fuzzLimit = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("KERNBENCH_FUZZ_LIMIT")); err == nil && d > 0 {
		return d
	}
	return 20 * time.Second
}()

// fuzzSets shrink the machine so that one execution cannot take gigabytes
// of host memory or minutes of simulated events (a 1 GiB HBM copy is four
// million chunk events): small memories, a 1 ms simulated-time watchdog and
// a 0.1 ms deadlock timeout.
var fuzzSets = []string{
	"system.memory.hbm.capacity=4MiB",
	"system.memory.sram.capacity=4MiB",
	"defaults.max_sim_time_ns=1000000",
	"defaults.deadlock_timeout_ns=100000",
}

// fuzzRunProgram writes src to a fresh directory as prog.star and runs it
// at world size 2, count 8 with verification, checking the invariants.
func fuzzRunProgram(t *testing.T, src string) {
	t.Helper()
	if os.Getenv("KERNBENCH_FUZZ_PRINT") != "" {
		// Printed before running: a Go fatal error (out of memory, stack
		// overflow) kills the process without a test failure message.
		fmt.Fprintf(os.Stderr, "--- program:\n%s--- end\n", src)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "prog.star")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		rep   *report.Report
		err   error
		panic any
		stack []byte
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() {
			if r := recover(); r != nil {
				o.panic, o.stack = r, debug.Stack()
			}
			done <- o
		}()
		o.rep, o.err = Run(file, Options{
			Embedded:  kernbench.Files,
			WorldSize: 2,
			Counts:    []int64{8},
			MaxSteps:  100_000,
			Verify:    true,
			Sets:      fuzzSets,
			MaxMemory: fuzzMaxMemory(t, src),
		})
	}()
	o, ok := cputime.Await(done, fuzzLimit)
	if !ok {
		t.Fatalf("Run did not return within %v of CPU time (hang) on:\n%s", fuzzLimit, src)
	}
	if o.panic != nil {
		t.Fatalf("Run panicked: %v\n%s\nprogram:\n%s", o.panic, o.stack, src)
	}
	if o.err == nil {
		if o.rep == nil || len(o.rep.Results) != 1 {
			t.Fatalf("Run returned no error and %d result rows, want 1; program:\n%s", fuzzRows(o.rep), src)
		}
		return
	}
	var fl *report.Failure
	if !errors.As(o.err, &fl) || fl != o.err {
		t.Fatalf("Run returned %T %q, want a *Failure; program:\n%s", o.err, o.err, src)
	}
	if fl.ErrorKind().Status < report.ExitWrong || fl.ErrorKind().Status > report.ExitRuntime {
		t.Fatalf("Failure code %d (kind %s, %q) is not one of 1-4; program:\n%s", fl.ErrorKind().Status, fl.ErrorKind().Name, fl.Msg, src)
	}
	if strings.TrimSpace(fl.Msg) == "" || fl.ErrorKind().Name == "" {
		t.Fatalf("Failure without a message or kind: %+v; program:\n%s", fl, src)
	}
	if strings.Contains(fl.Msg, "internal error") || strings.Contains(fl.Detail, "internal error") {
		t.Fatalf("Failure reports an internal error: %s\n%s\nprogram:\n%s", fl.Msg, fl.Detail, src)
	}
}

// fuzzMaxMemoryRE finds the --max-memory of a bad-input seed's
// "# args:" line (testdata/bad/star_memory_*.star).
var fuzzMaxMemoryRE = regexp.MustCompile(`(?m)^# args:.*--max-memory (\S+)`)

// fuzzMaxMemory is the --max-memory a seed from the bad-input corpus runs
// with on the command line, 0 (no bound) for any other program. Without
// it the memory-guard seeds hold gigabytes before they end (64 lists of
// 2·10^6 ints), and on a machine busy with other work that took over the
// CPU-time limit: the guard stopping them in-process is what they test.
func fuzzMaxMemory(t *testing.T, src string) int64 {
	m := fuzzMaxMemoryRE.FindStringSubmatch(src)
	if m == nil {
		return 0
	}
	n, err := config.ParseSize(m[1])
	if err != nil {
		t.Fatalf("seed's --max-memory %q: %v", m[1], err)
	}
	return n
}

func fuzzRows(r *report.Report) int {
	if r == nil {
		return 0
	}
	return len(r.Results)
}

// fuzzTemplate is a valid kernel (an allreduce for two ranks) that mode 1
// splices bytes into.
const fuzzTemplate = `TOPOLOGY = "ring_1d"

def helper(tl, p):
    return tl.fetch(p)

def kernel(sendbuf, recvbuf, rank, world_size, tl):
    x = helper(tl, sendbuf)
    if world_size > 1:
        tl.send("E", sendbuf)
        m = tl.recv("W")
        x = x + tl.fetch(m)
    tl.store(recvbuf, x)
`

// fuzzSeedPrograms are valid kernels and known-bad ones: the shipped
// algorithms, small hand-written kernels, and testdata/bad/*.star except the
// entries that still trip known bugs (they would fail every go test run).
func fuzzSeedPrograms(f *testing.F) []string {
	seeds := []string{
		fuzzTemplate,
		"def kernel(sendbuf, recvbuf, rank, world_size, tl):\n    tl.copy(recvbuf, sendbuf)\n",
		`def kernel(sendbuf, recvbuf, rank, world_size, tl):
    h = tl.fetch_async(sendbuf)
    t = tl.wait(h)
    s = tl.alloc(len(sendbuf), "f32", "sram")
    tl.store(s, t * 2.0)
    tl.reduce(recvbuf, s, sendbuf, op = tl.redop)
    tl.send("E", s.slice(0, 4))
    r = tl.recv_async("W")
    m = tl.wait(r)
    tl.flush()
    tl.trace("done", n = len(m))
    tl.copy(recvbuf.chunk(0, 2), m)
`,
		`COLLECTIVE = "broadcast"
def kernel(sendbuf, recvbuf, rank, world_size, tl, root = 0):
    if rank == root:
        tl.send("E", sendbuf)
        tl.copy(recvbuf, sendbuf)
    else:
        tl.recv("W", dst = recvbuf)
`,
		`TOPOLOGY = "custom"
def neighbors(rank, world_size, neighbor_map):
    return {"x0": rank ^ 1}
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tl.send("x0", sendbuf)
    m = tl.recv("x0")
    tl.store(recvbuf, tl.maximum(tl.fetch(sendbuf), tl.fetch(m)) + tl.minimum(tl.fetch(sendbuf), tl.fetch(m)))
`,
	}
	err := fs.WalkDir(kernbench.Files, "algorithms", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".star") || strings.HasSuffix(p, "_test.star") {
			return err
		}
		b, err := fs.ReadFile(kernbench.Files, p)
		seeds = append(seeds, string(b))
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	bad, _ := filepath.Glob("../../testdata/bad/*.star")
	for _, p := range bad {
		if fuzzKnownBugSeeds[filepath.Base(p)] {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	return seeds
}

// fuzzKnownBugSeeds are bad-input corpus files that still panic or crash
// (see cmd/kernbench/bad_test.go knownBugs); remove them when fixed.
var fuzzKnownBugSeeds = map[string]bool{}

// fuzzGenerate turns data into a kernel: a sequence of statements, each a
// tl call or a Ptr/Tile operation whose arguments come from pools of
// plausible and hostile values and from the results of earlier statements
// (v0, v1, ...). Bit 0 of who makes the statements run on rank 0 only,
// bit 1 on rank 1 only (asymmetric ranks find deadlocks and unmatched
// messages).
func fuzzGenerate(data []byte, who uint16) string {
	g := &fuzzGen{data: data}
	var b strings.Builder
	b.WriteString("def kernel(sendbuf, recvbuf, rank, world_size, tl):\n")
	indent := "    "
	switch who % 4 {
	case 1:
		b.WriteString("    if rank == 0:\n")
		indent = "        "
	case 2:
		b.WriteString("    if rank == 1:\n")
		indent = "        "
	}
	b.WriteString(indent + "v0 = sendbuf\n")
	b.WriteString(indent + "v1 = recvbuf\n")
	g.vars = 2
	for n := 0; n < 24 && g.more(); n++ {
		stmt := g.statement()
		fmt.Fprintf(&b, "%sv%d = %s\n", indent, g.vars, stmt)
		g.vars++
	}
	b.WriteString("    tl.flush()\n")
	return b.String()
}

type fuzzGen struct {
	data []byte
	i    int
	vars int
}

func (g *fuzzGen) more() bool { return g.i < len(g.data) }

func (g *fuzzGen) byte() int {
	if g.i >= len(g.data) {
		return 0
	}
	b := g.data[g.i]
	g.i++
	return int(b)
}

func (g *fuzzGen) pick(xs []string) string { return xs[g.byte()%len(xs)] }

var (
	fuzzInts = []string{"0", "1", "2", "3", "4", "7", "8", "16", "-1", "-8", "63", "64", "65", "4096", "4097",
		"1 << 20", "1 << 31", "1 << 40", "1 << 62", "(1 << 63) - 1", "-(1 << 63)", "len(sendbuf)", "rank", "world_size",
		"tl.slot_size", "tl.n_slots", "None", "1.5", "True"}
	fuzzNums = []string{"0", "1", "-1", "0.5", "2.0", "1e300", "-1e300", "float(\"nan\")", "float(\"inf\")",
		"(1 << 63)", "255", "256", "65504.0", "1e-45", "None", "\"3\""}
	fuzzDTypes = []string{`"f32"`, `"f16"`, `"bf16"`, `"f64"`, `"i32"`, `"i64"`, `"u8"`, `"f8"`, `""`, "None", "1"}
	fuzzDirs   = []string{`"E"`, `"W"`, `"E"`, `"W"`, `"N"`, `"S"`, `"parent"`, `""`, "None", "1", `"e"`}
	fuzzSpaces = []string{`"tcm"`, `"sram"`, `"hbm"`, `"dram"`, `""`, "None"}
	fuzzOps    = []string{`"sum"`, `"prod"`, `"max"`, `"min"`, `"avg"`, `"xor"`, "tl.redop", "None"}
)

// val is an earlier result, sendbuf/recvbuf, or (rarely) a constant.
func (g *fuzzGen) val() string {
	n := g.byte()
	switch {
	case n < 200 && g.vars > 0:
		return fmt.Sprintf("v%d", n%g.vars)
	case n < 215:
		return "sendbuf"
	case n < 230:
		return "recvbuf"
	case n < 240:
		return g.pick(fuzzInts)
	default:
		return g.pick([]string{"None", `"x"`, "[]", "{}", "tl", "(1, 2)", "struct(a = 1)"})
	}
}

func (g *fuzzGen) statement() string {
	forms := []func() string{
		func() string { return fmt.Sprintf("tl.send(%s, %s)", g.pick(fuzzDirs), g.val()) },
		func() string {
			return fmt.Sprintf("tl.send(%s, %s, nbytes = %s)", g.pick(fuzzDirs), g.val(), g.pick(fuzzInts))
		},
		func() string { return fmt.Sprintf("tl.recv(%s)", g.pick(fuzzDirs)) },
		func() string { return fmt.Sprintf("tl.recv(%s, dst = %s)", g.pick(fuzzDirs), g.val()) },
		func() string { return "tl.recv()" },
		func() string { return fmt.Sprintf("tl.recv_async(%s)", g.pick(fuzzDirs)) },
		func() string { return fmt.Sprintf("tl.recv_async(%s, dst = %s)", g.pick(fuzzDirs), g.val()) },
		func() string { return fmt.Sprintf("tl.wait(%s)", g.val()) },
		func() string { return "tl.flush()" },
		func() string { return fmt.Sprintf("tl.flush(%s)", g.pick(fuzzDirs)) },
		func() string { return fmt.Sprintf("tl.fetch(%s)", g.val()) },
		func() string { return fmt.Sprintf("tl.fetch_async(%s)", g.val()) },
		func() string { return fmt.Sprintf("tl.store(%s, %s)", g.val(), g.val()) },
		func() string { return fmt.Sprintf("tl.store_async(%s, %s)", g.val(), g.val()) },
		func() string { return fmt.Sprintf("tl.copy(%s, %s)", g.val(), g.val()) },
		func() string { return fmt.Sprintf("tl.copy_async(%s, %s)", g.val(), g.val()) },
		func() string {
			return fmt.Sprintf("tl.reduce(%s, %s, %s, op = %s)", g.val(), g.val(), g.val(), g.pick(fuzzOps))
		},
		func() string { return fmt.Sprintf("tl.zeros(%s, %s)", g.pick(fuzzInts), g.pick(fuzzDTypes)) },
		func() string {
			return fmt.Sprintf("tl.full(%s, %s, %s)", g.pick(fuzzInts), g.pick(fuzzNums), g.pick(fuzzDTypes))
		},
		func() string { return fmt.Sprintf("tl.alloc(%s, %s)", g.pick(fuzzInts), g.pick(fuzzDTypes)) },
		func() string {
			return fmt.Sprintf("tl.alloc(%s, %s, %s)", g.pick(fuzzInts), g.pick(fuzzDTypes), g.pick(fuzzSpaces))
		},
		func() string { return fmt.Sprintf("tl.peer(%s)", g.pick(fuzzDirs)) },
		func() string { return "tl.directions()" },
		func() string { return "tl.time()" },
		func() string { return fmt.Sprintf("tl.program_id(%s)", g.pick(fuzzInts)) },
		func() string { return fmt.Sprintf("tl.trace(%s, n = %s)", g.pick(fuzzDirs), g.val()) },
		func() string { return fmt.Sprintf("tl.maximum(%s, %s)", g.val(), g.val()) },
		func() string { return fmt.Sprintf("tl.minimum(%s, %s)", g.val(), g.val()) },
		func() string { return fmt.Sprintf("getattr(tl, \"load\")(%s)", g.val()) },
		func() string { return fmt.Sprintf("%s.slice(%s, %s)", g.val(), g.pick(fuzzInts), g.pick(fuzzInts)) },
		func() string { return fmt.Sprintf("%s.chunk(%s, %s)", g.val(), g.pick(fuzzInts), g.pick(fuzzInts)) },
		func() string { return fmt.Sprintf("%s + %s", g.val(), g.pick(fuzzInts)) },
		func() string { return fmt.Sprintf("%s[%s]", g.val(), g.pick(fuzzInts)) },
		func() string { return fmt.Sprintf("%s.tolist()", g.val()) },
		func() string { return fmt.Sprintf("%s.tobytes()", g.val()) },
		func() string { return fmt.Sprintf("len(%s)", g.val()) },
		func() string { return fmt.Sprintf("%s.astype(%s)", g.val(), g.pick(fuzzDTypes)) },
		func() string {
			return fmt.Sprintf("%s %s %s", g.val(), g.pick([]string{"+", "-", "*", "/", "//", "%", "==", "<", "in"}), g.val())
		},
		func() string {
			return fmt.Sprintf("%s %s %s", g.val(), g.pick([]string{"+", "-", "*", "/"}), g.pick(fuzzNums))
		},
		func() string {
			return fmt.Sprintf("%s(%s)", g.pick([]string{"-", "str", "bool", "hash", "dir", "type", "repr"}), g.val())
		},
		func() string { return fmt.Sprintf("{%s: 1}", g.val()) },
		func() string {
			return fmt.Sprintf("%s.%s", g.val(), g.pick([]string{"dir", "dtype", "count", "nbytes", "addr", "space", "pe", "rank"}))
		},
		func() string { return fmt.Sprintf("[%s for _ in range(%d)]", g.val(), g.byte()%16) },
	}
	return forms[g.byte()%len(forms)]()
}
