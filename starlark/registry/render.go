package registry

import (
	"fmt"
	"sort"
	"strings"
)

// Members are r's fields and methods together, sorted by name (the order
// of the reference's member tables).
func Members(r Receiver) []Entry {
	out := append(r.Fields(), r.Methods()...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Usage is how the reference writes a member: its signature for a method,
// its name for a field.
func (e Entry) Usage() string {
	if e.IsMethod() {
		return e.Sig
	}
	return e.Name
}

// EscapeCell makes s safe in a Markdown table cell.
func EscapeCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// ClassName is the stub class of a receiver name: "queue.input" becomes
// QueueInput, "region_endpoint" RegionEndpoint.
func ClassName(name string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// WriteStubClass writes r as a Python class named class: a field as an
// annotated attribute, a method as a def taking self; each with its doc.
// extra lines (already indented) follow the members.
func WriteStubClass(b *strings.Builder, class string, r Receiver, extra ...string) {
	fmt.Fprintf(b, "class %s:\n", class)
	ms := Members(r)
	for _, m := range ms {
		if m.IsMethod() {
			fmt.Fprintf(b, "    def %s -> Any:\n        \"\"\"%s\"\"\"\n", PySig(m.Sig), pyDoc(m.Doc))
		} else {
			fmt.Fprintf(b, "    %s: %s\n    \"\"\"%s\"\"\"\n", m.Name, PyType(m.Type), pyDoc(m.Doc))
		}
	}
	for _, l := range extra {
		b.WriteString(l + "\n")
	}
	if len(ms) == 0 && len(extra) == 0 {
		b.WriteString("    ...\n")
	}
	b.WriteString("\n")
}

// PySig turns a signature into a Python method's: "send(dir, src)" becomes
// "send(self, dir, src)". A parameter the signature lists without a
// default after one with a default (a keyword argument in practice, as in
// enqueue(data, nbytes=None, timeout)) gets "=..." so that the stub
// parses.
func PySig(sig string) string {
	name, rest, _ := strings.Cut(sig, "(")
	rest = strings.TrimSuffix(rest, ")")
	params := []string{"self"}
	defaulted, star := false, false
	for _, p := range strings.Split(rest, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
			continue
		case strings.HasPrefix(p, "*"):
			star = true
		case strings.Contains(p, "="):
			defaulted = true
		case defaulted && !star:
			p += "=..."
		}
		params = append(params, p)
	}
	return name + "(" + strings.Join(params, ", ") + ")"
}

// PyType is the stub type of a documented field type.
func PyType(t string) string {
	switch t {
	case "int", "str", "list":
		return t
	}
	return "Any"
}

// pyDoc keeps a doc inside its triple-quoted string.
func pyDoc(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return s
}
