package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestAuthorGuide runs docs/ccl-author-guide.md as a user would: every
// ```python block whose first line is "# file: NAME" is written to NAME,
// every line of a ```sh block that starts with "kernbench " is run and must
// exit 0 (or N, when the line ends with "# exit N"), and a plain ``` block
// right after a ```sh block holds result rows that the block's first
// command must print.
func TestAuthorGuide(t *testing.T) {
	runGuide(t, "../../docs/ccl-author-guide.md")
}

// TestMSCCLGuide runs docs/msccl.md the same way (```xml blocks whose
// first line is "<!-- file: NAME -->" are written to NAME).
func TestMSCCLGuide(t *testing.T) {
	runGuide(t, "../../docs/msccl.md")
}

func runGuide(t *testing.T, path string) {
	t.Parallel()
	script, err := guideScript(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	name := strings.TrimSuffix(filepath.Base(path), ".md") + ".txtar"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Cmds:                map[string]func(ts *testscript.TestScript, neg bool, args []string){"kbexit": kbexit},
	})
}

var exitComment = regexp.MustCompile(`\s+# exit (\d+)$`)

// guideScript turns the guide into a testscript archive.
func guideScript(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var cmds, files []string
	var block []string
	lang, prevLang, prevFirstCmd := "", "", -1
	inBlock := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			if !inBlock {
				inBlock, lang, block = true, strings.TrimPrefix(line, "```"), nil
				continue
			}
			inBlock = false
			switch {
			case lang == "python" && len(block) > 0 && strings.HasPrefix(block[0], "# file: "):
				name := strings.TrimPrefix(block[0], "# file: ")
				files = append(files, fmt.Sprintf("-- %s --\n%s\n", name, strings.Join(block, "\n")))
			case lang == "xml" && len(block) > 0 && strings.HasPrefix(block[0], "<!-- file: ") && strings.HasSuffix(block[0], " -->"):
				name := strings.TrimSuffix(strings.TrimPrefix(block[0], "<!-- file: "), " -->")
				files = append(files, fmt.Sprintf("-- %s --\n%s\n", name, strings.Join(block, "\n")))
			case lang == "sh":
				prevFirstCmd = -1
				for _, c := range block {
					if !strings.HasPrefix(c, "kernbench ") {
						continue
					}
					status := "0"
					if m := exitComment.FindStringSubmatch(c); m != nil {
						status, c = m[1], strings.TrimSuffix(c, m[0])
					}
					if prevFirstCmd < 0 {
						prevFirstCmd = len(cmds)
					}
					cmds = append(cmds, "kbexit "+status+" "+strings.TrimPrefix(c, "kernbench "))
				}
			case lang == "" && prevLang == "sh" && prevFirstCmd >= 0:
				var checks []string
				for _, row := range block {
					if f := strings.Fields(row); len(f) > 0 && f[0] != "size" && !strings.HasPrefix(f[0], "#") {
						checks = append(checks, "stdout '"+strings.Join(quoteFields(f), `\s+`)+"'")
					}
				}
				// The checks follow the block's first command.
				at := prevFirstCmd + 1
				cmds = append(cmds[:at], append(checks, cmds[at:]...)...)
			}
			prevLang = lang
			continue
		}
		if inBlock {
			block = append(block, line)
		}
	}
	if len(cmds) == 0 {
		return "", fmt.Errorf("%s: no kernbench commands found", path)
	}
	return "# Generated from " + path + " by TestAuthorGuide.\n" + strings.Join(cmds, "\n") + "\n" + strings.Join(files, ""), nil
}

func quoteFields(f []string) []string {
	out := make([]string, len(f))
	for i, s := range f {
		out[i] = regexp.QuoteMeta(s)
	}
	return out
}
