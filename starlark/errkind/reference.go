package errkind

import (
	"fmt"
	"strings"
)

// Reference renders the run and L3/L2 kinds with their exit statuses, for
// the generated builtin reference (the tl kinds are listed with the tl
// builtins, tl.Reference).
func Reference() string {
	var b strings.Builder
	b.WriteString("# Failure kinds and exit statuses\n\n" +
		"Generated from `starlark/errkind`. Every way a command can fail is one of these\n" +
		"kinds. The last line a failed command prints on stderr names it with its exit\n" +
		"status (`kernbench: Deadlock (exit status 3)`), and a run's `--json` output names\n" +
		"it in `error.kind` (a wrong result or a phase-2 mismatch is in the rows instead:\n" +
		"`wrong`, `verified`, `phase2_match`). The exit status is the kind's: 0 ok, 1 wrong\n" +
		"result or failed test, 2 usage, config or load error, 3 deadlock or limit, 4\n" +
		"run-time error. The tl error kinds above exit 4.\n\n")
	table := func(g Group) {
		b.WriteString("| kind | exit | raised when |\n| --- | --- | --- |\n")
		for _, k := range kindTable {
			if k.Group == g {
				fmt.Fprintf(&b, "| `%s` | %d | %s |\n", k.Name, k.Status, strings.ReplaceAll(k.Doc, "|", `\|`))
			}
		}
	}
	table(Run)
	b.WriteString("\n## L3/L2 kinds\n\nRaised by an L3 main or an L2 function (l3l2 runtime result names); the run exits 4.\n\n")
	table(L3)
	return b.String()
}
