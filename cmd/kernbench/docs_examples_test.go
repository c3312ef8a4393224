package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"kernbench/engine/config"
)

// TestDocExamples runs README.md and every docs/*.md as a reader would, each
// document as one testscript in a fresh directory, commands in the order
// the document shows them. The conventions a document follows:
//
//   - A ```python block whose first line is "# file: NAME", an ```xml block
//     whose first line is "<!-- file: NAME -->" and a ```yaml block whose
//     first line is "# file: NAME" are written to NAME before anything runs.
//   - In a ```sh or ```console block, every line `kernbench ARGS` or
//     `go run ./cmd/kernbench ARGS` (optionally after a "$ " prompt, lines
//     joined at a trailing backslash) is run and must exit 0, or N when the
//     line ends with "# exit N"; any other "# comment" is ignored, and
//     "> FILE" at the end saves the command's stdout to FILE. Arguments
//     with * or ? are expanded as the shell would. Other lines (other
//     programs, comments) are not run.
//   - After a command with a "$ " prompt, the block's lines up to the next
//     command are lines it prints; so are the lines of a plain ``` block
//     right after a ```sh block, for that block's first command. Each must
//     be a whole line of stdout, where "..." matches any text (wall time,
//     event counts).
//   - Every ```yaml block is a ccl.yaml as a user would write it: it must
//     load and validate laid over the embedded default (config.LoadOverlay).
//   - A block right after a line "<!-- not run in tests: REASON -->" is
//     skipped (Slurm scripts, Kubernetes manifests): the reader sees why.
//
// go test ./cmd/kernbench -run TestDocExamples/NAME runs one document.
func TestDocExamples(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{"../../README.md"}, docs...)
	// Documents that show commands, with how many at least, so that a
	// parser that stops finding them fails here instead of passing empty.
	minCommands := map[string]int{
		"README": 2, "ccl-author-guide": 10, "msccl": 5, "cluster": 3,
		"topologies": 6, "report": 3, "testing": 2, "l3l2": 5, "faults": 7, "tune": 8,
		"astra-sim": 2,
	}
	dir := t.TempDir()
	for _, path := range docs {
		name := strings.TrimSuffix(filepath.Base(path), ".md")
		d, err := parseDoc(path)
		if err != nil {
			t.Fatal(err)
		}
		if d.commands < minCommands[name] {
			t.Errorf("%s: found %d kernbench commands, want at least %d; the test reads the document wrongly", path, d.commands, minCommands[name])
		}
		for _, y := range d.yaml {
			// Blank lines before the block make the loader's line numbers
			// those of the document.
			data := strings.Repeat("\n", y.line-1) + y.text
			if _, err := config.LoadOverlay(strings.TrimPrefix(path, "../../"), []byte(data), nil); err != nil {
				t.Errorf("the ccl.yaml example at %s:%d does not load: %v", strings.TrimPrefix(path, "../../"), y.line, err)
			}
		}
		if d.commands == 0 {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name+".txtar"), []byte(d.script(path)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name := range minCommands {
		if !slices.ContainsFunc(docs, func(p string) bool { return strings.HasSuffix(p, "/"+name+".md") }) {
			t.Errorf("%s.md not found; update minCommands", name)
		}
	}
	testscript.Run(t, testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"kbexit": kbexit,
			"kbdoc":  kbdoc,
		},
	})
}

// kbdoc STATUS ARGS... is kbexit with the shell's file-name expansion of
// ARGS (kernbench merge shard-*.json): a pattern matching nothing stays as
// it is, as in sh.
func kbdoc(ts *testscript.TestScript, neg bool, args []string) {
	var expanded []string
	for i, a := range args {
		if i > 0 && strings.ContainsAny(a, "*?[") {
			if m, err := filepath.Glob(ts.MkAbs(a)); err == nil && len(m) > 0 {
				for _, f := range m {
					rel, err := filepath.Rel(ts.Getenv("WORK"), f)
					if err != nil {
						ts.Fatalf("kbdoc: %v", err)
					}
					expanded = append(expanded, rel)
				}
				continue
			}
		}
		expanded = append(expanded, a)
	}
	kbexit(ts, neg, expanded)
}

// doc is what parseDoc found in one document.
type doc struct {
	files    []string // txtar file sections
	lines    []string // script lines
	yaml     []yamlBlock
	commands int
}

type yamlBlock struct {
	line int // of the block's first line
	text string
}

// script is the testscript archive of the document.
func (d *doc) script(path string) string {
	return "# Generated from " + path + " by TestDocExamples.\n" + strings.Join(d.lines, "\n") + "\n" + strings.Join(d.files, "")
}

var (
	skipMarker  = regexp.MustCompile(`^<!-- not run in tests: (\S.*) -->$`)
	commandLine = regexp.MustCompile(`^(\$ )?(?:go run \./cmd/kernbench|kernbench) (.*)$`)
	exitStatus  = regexp.MustCompile(`\s+# exit (\d+)$`)
	comment     = regexp.MustCompile(`\s+#( .*)?$`)
	redirect    = regexp.MustCompile(`\s+>\s*(\S+)$`)
	// singleQuoted is a '…' argument (or part of one).
	singleQuoted = regexp.MustCompile(`'[^']*'`)
)

// parseDoc reads the document's code blocks.
func parseDoc(path string) (*doc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &doc{}
	var (
		block     []string
		lang      string
		start     int  // line of the block's opening fence
		inBlock   bool // inside a fenced block
		skip      bool // the current block is marked not run
		marked    int  // line of a skip marker waiting for its block, 0 if none
		prevLang  = "" // language of the block before (for output blocks)
		text      bool // text between that block and this one
		prevFirst = -1 // index in d.lines of that block's first command's checks
	)
	for i, line := range strings.Split(string(data), "\n") {
		if !inBlock && !strings.HasPrefix(line, "```") {
			text = text || strings.TrimSpace(line) != ""
			if marked > 0 && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("%s:%d: a not-run marker must come right before a ``` block", path, marked)
			}
			if skipMarker.MatchString(strings.TrimSpace(line)) {
				marked = i + 1
			} else if strings.Contains(line, "not run in tests") && strings.HasPrefix(strings.TrimSpace(line), "<!--") {
				return nil, fmt.Errorf("%s:%d: write the marker as <!-- not run in tests: REASON -->", path, i+1)
			}
			continue
		}
		if !strings.HasPrefix(line, "```") {
			block = append(block, line)
			continue
		}
		if !inBlock {
			inBlock, lang, block, start = true, strings.TrimSpace(strings.TrimPrefix(line, "```")), nil, i+1
			skip, marked = marked > 0, 0
			continue
		}
		inBlock = false
		if skip {
			prevLang, prevFirst, text = "skipped", -1, false
			continue
		}
		first := ""
		if len(block) > 0 {
			first = block[0]
		}
		switch {
		case (lang == "python" || lang == "yaml") && strings.HasPrefix(first, "# file: "):
			d.files = append(d.files, fmt.Sprintf("-- %s --\n%s\n", strings.TrimPrefix(first, "# file: "), strings.Join(block, "\n")))
		case lang == "xml" && strings.HasPrefix(first, "<!-- file: ") && strings.HasSuffix(first, " -->"):
			d.files = append(d.files, fmt.Sprintf("-- %s --\n%s\n", strings.TrimSuffix(strings.TrimPrefix(first, "<!-- file: "), " -->"), strings.Join(block, "\n")))
		}
		switch {
		case lang == "yaml":
			d.yaml = append(d.yaml, yamlBlock{line: start + 1, text: strings.Join(block, "\n")})
		case lang == "sh" || lang == "console":
			first, err := d.commandBlock(block)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, start, err)
			}
			prevFirst = first
		case lang == "" && !text && (prevLang == "sh" || prevLang == "console") && prevFirst >= 0:
			// Lines the previous block's first command prints.
			d.lines = slices.Insert(d.lines, prevFirst, outputChecks(block)...)
		}
		prevLang, text = lang, false
	}
	if inBlock {
		return nil, fmt.Errorf("%s: unterminated ``` block", path)
	}
	if marked > 0 {
		return nil, fmt.Errorf("%s:%d: a not-run marker before no block", path, marked)
	}
	return d, nil
}

// commandBlock adds the commands of a sh/console block (and the output
// checks of prompted ones) to d. It returns where checks of the block's
// first command go in d.lines, -1 without commands.
func (d *doc) commandBlock(block []string) (int, error) {
	// Join continued lines.
	var lines []string
	for i := 0; i < len(block); i++ {
		l := block[i]
		for strings.HasSuffix(l, `\`) && i+1 < len(block) {
			i++
			l = strings.TrimRight(strings.TrimSuffix(l, `\`), " ") + " " + strings.TrimSpace(block[i])
		}
		lines = append(lines, l)
	}
	first := -1
	prompted := false // the lines that follow are the last command's output
	for _, l := range lines {
		m := commandLine.FindStringSubmatch(l)
		if m == nil {
			if prompted && strings.TrimSpace(l) != "" {
				d.lines = append(d.lines, outputChecks([]string{l})...)
			}
			continue
		}
		args, status := m[2], "0"
		if e := exitStatus.FindStringSubmatch(args); e != nil {
			args, status = strings.TrimSuffix(args, e[0]), e[1]
		}
		args = comment.ReplaceAllString(args, "")
		out := ""
		if r := redirect.FindStringSubmatch(args); r != nil {
			args, out = strings.TrimSuffix(args, r[0]), r[1]
		}
		// Inside '…' the shell takes every character as it is (a link
		// named "ucie c0->c1"); outside, these would be the shell's.
		if strings.ContainsAny(singleQuoted.ReplaceAllString(args, "''"), "\"|;&<>`") {
			return -1, fmt.Errorf("%q: quote with '…' and run one command per line (the test runs each line as one kernbench command)", l)
		}
		d.lines = append(d.lines, "kbdoc "+status+" "+args)
		d.commands++
		if first < 0 {
			first = len(d.lines)
		}
		if out != "" {
			d.lines = append(d.lines, "cp stdout "+out)
		}
		prompted = m[1] != ""
	}
	return first, nil
}

// outputChecks are testscript stdout checks for lines a command prints:
// each a whole line, "..." matching any text.
func outputChecks(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		pattern := "^" + strings.ReplaceAll(regexp.QuoteMeta(l), `\.\.\.`, ".*") + "$"
		out = append(out, "stdout '"+strings.ReplaceAll(pattern, "'", "''")+"'")
	}
	return out
}

// parseDoc turns each documented convention into the script lines it
// should, and rejects what it cannot run.
func TestParseDoc(t *testing.T) {
	for _, tc := range []struct {
		name, md string
		lines    []string
		files    []string
		yaml     []yamlBlock
		err      string
	}{{
		name:  "output block after a sh block checks the first command",
		md:    "```sh\nkernbench run a  # comment\nkernbench check a  # exit 2\n```\n\n```\n  size  x\n```\n",
		lines: []string{"kbdoc 0 run a", `stdout '^  size  x$'`, "kbdoc 2 check a"},
	}, {
		name:  "a block after text is not output",
		md:    "```sh\nkernbench run a\n```\ntext\n```\nnot output\n```\n",
		lines: []string{"kbdoc 0 run a"},
	}, {
		name:  "a prompted command is followed by its output; ... matches anything",
		md:    "```console\n$ go run ./cmd/kernbench run a\nrow (1)\n# wall ...s\n\n$ kernbench version\n```\n",
		lines: []string{"kbdoc 0 run a", `stdout '^row \(1\)$'`, `stdout '^# wall .*s$'`, "kbdoc 0 version"},
	}, {
		name:  "continued lines, redirections, other programs",
		md:    "```sh\ngo test ./...\nkernbench run a \\\n  --json > out.json\n```\n",
		lines: []string{"kbdoc 0 run a --json", "cp stdout out.json"},
	}, {
		name:  "a quote in the expected output",
		md:    "```console\n$ kernbench run a\nit's\n```\n",
		lines: []string{"kbdoc 0 run a", `stdout '^it''s$'`},
	}, {
		name:  "files and ccl.yaml examples",
		md:    "```python\n# file: a.star\nX = 1\n```\n```xml\n<!-- file: a.xml -->\n<algo/>\n```\n```yaml\ndefaults: {}\n```\n",
		files: []string{"-- a.star --\n# file: a.star\nX = 1\n", "-- a.xml --\n<!-- file: a.xml -->\n<algo/>\n"},
		yaml:  []yamlBlock{{line: 10, text: "defaults: {}"}},
	}, {
		name:  "a marked block is skipped, its output block too",
		md:    "<!-- not run in tests: Slurm -->\n```sh\nkernbench run \"$X\"\n```\n\n```\nrow\n```\n<!-- not run in tests: not a ccl.yaml -->\n```yaml\nkind: Job\n```\n",
		lines: nil,
	}, {
		name: "a marker without a reason",
		md:   "<!-- not run in tests -->\n```sh\nkernbench run a\n```\n",
		err:  "doc.md:1: write the marker as <!-- not run in tests: REASON -->",
	}, {
		name: "a marker away from its block",
		md:   "<!-- not run in tests: slow -->\ntext\n```sh\nkernbench run a\n```\n",
		err:  "doc.md:1: a not-run marker must come right before a ``` block",
	}, {
		name: "shell syntax the test cannot run",
		md:   "```sh\nkernbench run a | head\n```\n",
		err:  `doc.md:1: "kernbench run a | head": quote with '…' and run one command per line (the test runs each line as one kernbench command)`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "doc.md")
			if err := os.WriteFile(path, []byte(tc.md), 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := parseDoc(path)
			if tc.err != "" {
				if err == nil || strings.ReplaceAll(err.Error(), filepath.Dir(path)+"/", "") != tc.err {
					t.Fatalf("got error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.lines, d.lines); diff != "" {
				t.Errorf("script lines (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.files, d.files); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.yaml, d.yaml, cmp.AllowUnexported(yamlBlock{})); diff != "" {
				t.Errorf("ccl.yaml examples (-want +got):\n%s", diff)
			}
		})
	}
}

// The documents point only at files of the repository, and those exist:
// relative Markdown links, and `docs/NAME.md` mentioned in code spans.
func TestDocLinks(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{"../../README.md"}, docs...)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	span := regexp.MustCompile("`(docs/[A-Za-z0-9_.-]+\\.md)`")
	checked := 0
	for _, path := range docs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(path, "../../")
		if strings.Contains(string(data), "../shared") || strings.Contains(string(data), "shared/spec") {
			t.Errorf("%s points outside the repository (../shared)", name)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", name, m[1])
			}
		}
		for _, m := range span.FindAllStringSubmatch(string(data), -1) {
			checked++
			if _, err := os.Stat(filepath.Join("../..", m[1])); err != nil {
				t.Errorf("%s names %s, which does not exist", name, m[1])
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d links; the test reads the documents wrongly", checked)
	}
}

// The repository's text (documents, code and its comments, algorithms,
// benches, ccl.yaml, test data) cites nothing a user cannot read: every
// NAME.md it names is a file of the repository, and no design-record or
// seed numbering of documents that are not shipped is left in it.
func TestNoPointersOutsideRepository(t *testing.T) {
	root := "../.."
	mdName := regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)
	labels := regexp.MustCompile(`\bADR\b|\bseeds? \d{3}\b|[\[(]D\d{1,2}(\.\d)?[\]),:; ]|shared/spec`)
	// NAME.md mentions that are not pointers into the repository: test
	// data of the docs test, and nccl-tests' own document.
	notPointers := map[string]bool{"doc.md": true, "PERFORMANCE.md": true}
	exts := map[string]bool{".go": true, ".star": true, ".md": true, ".yaml": true, ".txtar": true, ".sh": true, ".xml": true, ".pyi": true}
	files := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "fuzz") {
				return filepath.SkipDir
			}
			return nil
		}
		if !exts[filepath.Ext(path)] || path == filepath.Join(root, "cmd/kernbench/docs_examples_test.go") {
			return nil // (this file holds the patterns and the docs test's own data)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(data), "\n") {
			if m := labels.FindString(line); m != "" {
				t.Errorf("%s:%d: %q cites a document outside the repository: %s", rel, i+1, m, strings.TrimSpace(line))
			}
			for _, name := range mdName.FindAllString(line, -1) {
				if notPointers[name] || pointsIntoRepository(root, filepath.Dir(path), name) {
					continue
				}
				t.Errorf("%s:%d: names %s, which is not a file of the repository: %s", rel, i+1, name, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Errorf("read %d files; the test walks the repository wrongly", files)
	}
}

// pointsIntoRepository reports whether name, as written in a file of dir,
// is a file of the repository: relative to dir, to the root, or to docs/.
func pointsIntoRepository(root, dir, name string) bool {
	for _, p := range []string{filepath.Join(dir, name), filepath.Join(root, name), filepath.Join(root, "docs", name)} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}
