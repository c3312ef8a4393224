package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/starlark/registry"
)

// receiverDocName is how the reference writes a member of each receiver:
// "`tl.send(…)`", "`p.chunk(i, n)`", "`region.free()`", "`pack_u64(*ints)`".
func receiverDocName(name string) string {
	switch name {
	case "Ptr":
		return "p."
	case "Tile":
		return "t."
	case "":
		return ""
	}
	return name + "."
}

// stubClass is the stub class of a receiver ("" are module functions).
func stubClass(name string) string {
	if name == "tl" {
		return "TL"
	}
	return registry.ClassName(name)
}

// Every member of every registered table (tl, Ptr, Tile, torch,
// torch.distributed, tensor, each orch/l2 kind, the predeclared helpers)
// appears in the reference and in the stubs: both are rendered from the
// tables, so a builtin cannot be callable and undocumented.
func TestReferenceCoversEveryReceiver(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	if code := Main([]string{"docs"}, &out, &out); code != 0 {
		t.Fatalf("kernbench docs exited %d: %s", code, out.String())
	}
	ref := out.String()
	if code := Main([]string{"docs", "--stubs", dir}, &out, &out); code != 0 {
		t.Fatalf("kernbench docs --stubs exited %d: %s", code, out.String())
	}
	var stubs strings.Builder
	for _, f := range stubFiles {
		data, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		stubs.Write(data)
	}
	stub := stubs.String()

	var names []string
	for _, r := range registry.Receivers() {
		names = append(names, r.Name())
		prefix := receiverDocName(r.Name())
		if r.Name() != "" && !strings.Contains(stub, "class "+stubClass(r.Name())+":") {
			t.Errorf("stubs lack class %s (receiver %s)", stubClass(r.Name()), r.Name())
		}
		members := registry.Members(r)
		if len(members) == 0 {
			t.Errorf("receiver %q registers no member", r.Name())
		}
		for _, m := range members {
			what := r.Name() + "." + m.Name
			if strings.TrimSpace(m.Doc) == "" {
				t.Errorf("%s has no doc", what)
			}
			if m.IsMethod() {
				if !strings.HasPrefix(m.Sig, m.Name+"(") || !strings.HasSuffix(m.Sig, ")") {
					t.Errorf("%s: signature %q is not %s(…)", what, m.Sig, m.Name)
				}
				if !strings.Contains(ref, "`"+prefix+m.Sig+"`") {
					t.Errorf("reference lacks `%s%s`", prefix, m.Sig)
				}
				def := "def " + registry.PySig(m.Sig)
				if r.Name() == "" {
					def = "def " + m.Sig
				}
				if !strings.Contains(stub, def) {
					t.Errorf("stubs lack %q", def)
				}
				continue
			}
			if m.Type == "" {
				t.Errorf("field %s has no type", what)
			}
			if !strings.Contains(ref, "`"+prefix+m.Name+"`") {
				t.Errorf("reference lacks `%s%s`", prefix, m.Name)
			}
			if !strings.Contains(stub, "\n    "+m.Name+": ") {
				t.Errorf("stubs lack field %s", what)
			}
		}
	}
	sort.Strings(names)
	want := []string{"", "Ptr", "Tile", "counter", "endpoint", "endpoint.input", "endpoint.output", "handle", "l2", "message",
		"orch", "queue", "queue.input", "queue.output", "region", "region_endpoint", "reservation", "tensor", "tl", "torch", "torch.distributed"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("registered receivers (-want +got):\n%s", diff)
	}
}

// Every Go type of the Starlark layer that has attributes (an Attr method)
// is the receiver of a registered table: a value type with members of its
// own, outside the tables, would escape the reference.
func TestEveryAttrTypeIsRegistered(t *testing.T) {
	registered := map[string]bool{}
	for _, r := range registry.Receivers() {
		registered[r.GoType()] = true
	}
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir("../../starlark", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "Attr" || len(fn.Recv.List) != 1 || fn.Type.Params.NumFields() != 1 {
				// (starlark.HasAttrs's Attr(name string); not the tables'
				// own Attr(recv, name).)
				continue
			}
			typ := ""
			switch rt := fn.Recv.List[0].Type.(type) {
			case *ast.StarExpr:
				if id, ok := rt.X.(*ast.Ident); ok {
					typ = "*" + f.Name.Name + "." + id.Name
				}
			case *ast.Ident:
				typ = f.Name.Name + "." + rt.Name
			}
			found = append(found, typ)
			if !registered[typ] {
				t.Errorf("%s: %s has attributes (Attr) but no registry table (see docs/architecture.md, how to add a builtin)", fset.Position(fn.Pos()), typ)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 6 {
		t.Errorf("found only %d Attr methods (%v); the scan is broken", len(found), found)
	}
}
