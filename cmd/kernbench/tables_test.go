package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/collective"
	"kernbench/engine/config"
	"kernbench/engine/dtype"
	"kernbench/engine/topology"
	"kernbench/starlark/ccl"
	"kernbench/starlark/script"
)

// The collectives and topologies are declared once, in engine/collective's
// Table and engine/topology's Table; every other place that lists them
// (config validation, MSCCL import, the bench, the CLI's help, the
// documentation) must agree, so adding a row there and running this test
// names every place still to update.
func TestTablesAgree(t *testing.T) {
	colls := collective.Names()
	topos := slices.Clone(topology.Names())
	guide := readDoc(t, "../../docs/ccl-author-guide.md")

	t.Run("config", func(t *testing.T) {
		if diff := cmp.Diff(colls, config.Collectives()); diff != "" {
			t.Errorf("config.Collectives (-table +config):\n%s", diff)
		}
		if diff := cmp.Diff(topos, config.Topologies()); diff != "" {
			t.Errorf("config.Topologies (-table +config):\n%s", diff)
		}
		if !slices.Contains(topos, config.DefaultTopology) {
			t.Errorf("config.DefaultTopology %q is not in the topology table", config.DefaultTopology)
		}
	})

	t.Run("bench", func(t *testing.T) {
		var names []string
		for _, c := range ccl.Collectives() {
			names = append(names, c.Name)
		}
		if diff := cmp.Diff(colls, names); diff != "" {
			t.Errorf("ccl.Collectives (-table +ccl):\n%s", diff)
		}
		// Every collective has a reference: Expected fills every rank's
		// recv buffer with the size the layout says.
		const p, count = 3, 2
		sz := int64(dtype.F32.Size())
		for _, row := range collective.Table() {
			c, err := ccl.LookupCollective(row.Name)
			if err != nil {
				t.Errorf("LookupCollective(%q): %v", row.Name, err)
				continue
			}
			sends, before := make([][]byte, p), make([][]byte, p)
			n, m := int64(count), int64(count)
			if row.SendMul {
				n *= p
			}
			if row.RecvMul {
				m *= p
			}
			for r := range p {
				sends[r] = make([]byte, n*sz)
				before[r] = make([]byte, m*sz)
			}
			for r, got := range c.Expected(dtype.F32, dtype.Sum, 0, count, sends, before, nil) {
				if int64(len(got)) != m*sz {
					t.Errorf("%s: reference of rank %d has %d bytes, want %d (no reference in ccl.Collective.Expected?)", row.Name, r, len(got), m*sz)
				}
			}
		}
		_, err := ccl.LookupCollective("all_reduce")
		if want := strings.Join(colls, ", "); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LookupCollective(unknown) = %v, want a message listing %s", err, want)
		}
	})

	t.Run("cli help", func(t *testing.T) {
		run := newRunCmd(script.Env{}, io.Discard, io.Discard)
		for flag, names := range map[string][]string{"collective": colls, "topology": topos} {
			if got, want := run.Flags().Lookup(flag).Usage, strings.Join(names, " | "); got != want {
				t.Errorf("run --%s help: got %q, want %q", flag, got, want)
			}
		}
	})

	t.Run("author guide collectives", func(t *testing.T) {
		rows := mdTable(t, guide, "| collective | sendbuf | recvbuf | result |")
		var want [][]string
		for _, c := range collective.Table() {
			want = append(want, []string{c.Name, layout(c.SendMul), layout(c.RecvMul), c.Result})
		}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("docs/ccl-author-guide.md collective table (-table +doc):\n%s", diff)
		}
	})

	t.Run("author guide topologies", func(t *testing.T) {
		// A row may name several topologies with the same directions
		// ("`none` / `custom`").
		var got, want [][]string
		for _, row := range mdTable(t, guide, "| topology | directions of rank r |") {
			for name := range strings.SplitSeq(row[0], " / ") {
				got = append(got, []string{strings.Trim(name, "`"), row[1]})
			}
		}
		for _, s := range topology.Table() {
			want = append(want, []string{s.Name, s.Directions})
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("docs/ccl-author-guide.md topology table (-table +doc):\n%s", diff)
		}
		if line := "# " + strings.Join(topos, " | "); !strings.Contains(guide, line) {
			t.Errorf("docs/ccl-author-guide.md: the ccl.yaml example's topology comment is not %q", line)
		}
	})

	t.Run("topologies doc", func(t *testing.T) {
		// Every topology has its section (a heading may name several:
		// "## none and custom").
		var headings []string
		for _, line := range strings.Split(readDoc(t, "../../docs/topologies.md"), "\n") {
			if h, ok := strings.CutPrefix(line, "## "); ok {
				headings = append(headings, h)
			}
		}
		for _, name := range topos {
			if !slices.ContainsFunc(headings, func(h string) bool { return slices.Contains(strings.Fields(h), name) }) {
				t.Errorf("docs/topologies.md has no section on %s (headings: %q)", name, headings)
			}
		}
	})

	t.Run("report doc busbw factors", func(t *testing.T) {
		factor := map[collective.Bus]string{collective.BusOne: "1", collective.BusShare: "(p − 1)/p", collective.BusTwice: "2(p − 1)/p"}
		var got, want [][]string
		for _, row := range mdTable(t, readDoc(t, "../../docs/report.md"), "| collective | factor | why |") {
			for name := range strings.SplitSeq(row[0], ", ") {
				got = append(got, []string{name, row[1]})
			}
		}
		for _, c := range collective.Table() {
			want = append(want, []string{c.Name, factor[c.Bus]})
		}
		less := func(a, b []string) int { return strings.Compare(a[0], b[0]) }
		slices.SortFunc(got, less)
		slices.SortFunc(want, less)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("docs/report.md busbw factor table (-table +doc):\n%s", diff)
		}
	})

	t.Run("msccl doc", func(t *testing.T) {
		doc := readDoc(t, "../../docs/msccl.md")
		if line := "`coll` is one of " + strings.Join(collective.Names(), ", ") + " |"; !strings.Contains(doc, line) {
			t.Errorf("docs/msccl.md: the <algo> row does not say %q", line)
		}
	})
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// layout is how the author guide writes a buffer's size.
func layout(mul bool) string {
	if mul {
		return "count × world_size"
	}
	return "count"
}

// mdTable returns the cells of the Markdown table under header (the rows
// after the separator, up to the first line that is not a row).
func mdTable(t *testing.T, doc, header string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, header+"\n")
	if !ok {
		t.Fatalf("no table %q", header)
	}
	var rows [][]string
	for i, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i == 0 { // | --- | --- |
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), " | ") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}
