package orch

import (
	"fmt"
	"strings"
)

// Reference renders the L3/L2 orchestration section of the builtin
// reference from the registration tables (Kinds, Attributes, Builtins,
// Constants).
func Reference() string {
	var b strings.Builder
	b.WriteString(`## L3 / L2 orchestration

An L3 bench defines ` + "`main(orch)`" + `; L2 code is a function submitted with
` + "`orch.submit_next_level(fn, scalars, worker=0)`" + ` and called as ` + "`fn(l2)`" + `.
L3 timeouts are seconds (a number > 0), L2 timeouts nanoseconds (an int, 0 =
live no-attempt), both in simulated time. On L3, a blocking call that times
out raises an error containing "timed out" (or REMOTE_ABORTED), protocol
failures raise with their kind in the message, and ` + "`try_*`" + ` calls return
False/None for no progress. On L2, calls return False/None on failure and the
endpoint's ` + "`error()`" + ` says why. Malformed calls raise on both levels.

### Predeclared constants

| name | values | meaning |
| --- | --- | --- |
`)
	for _, c := range Constants {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c.Name, c.Values, escape(c.Doc))
	}
	for _, k := range Kinds {
		fmt.Fprintf(&b, "\n### %s\n\n%s\n\n", k.Name, k.Doc)
		attrs := attrRecv[k.Name]
		if len(attrs) > 0 {
			b.WriteString("| attribute | type | meaning |\n| --- | --- | --- |\n")
			for _, a := range attrs {
				fmt.Fprintf(&b, "| `%s.%s` | %s | %s |\n", k.Name, a.Name, a.Type, escape(a.Doc))
			}
			b.WriteString("\n")
		}
		fns := byRecv[k.Name]
		if len(fns) > 0 {
			b.WriteString("| function | meaning |\n| --- | --- |\n")
			for _, f := range fns {
				fmt.Fprintf(&b, "| `%s.%s` | %s |\n", k.Name, f.Sig, escape(f.Doc))
			}
		}
	}
	b.WriteString("\n### Binary helpers (predeclared)\n\n| function | meaning |\n| --- | --- |\n")
	for _, f := range byRecv[""] {
		fmt.Fprintf(&b, "| `%s` | %s |\n", f.Sig, escape(f.Doc))
	}
	return b.String()
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
