package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/starlark/ccl"
)

// The busbw chart is a well-formed SVG with one legend entry per run and
// byte-size labels on its log2 size axis; sizes of 0 bytes are left out.
func TestPlotBusBW(t *testing.T) {
	run := func(name string, bw ...float64) labeled {
		rep := &ccl.Report{Algorithm: name, Collective: "allreduce", WorldSize: 8}
		for i, b := range bw {
			rep.Results = append(rep.Results, ccl.Result{Bytes: 1024 << (2 * i), BusBW: b})
		}
		rep.Results = append(rep.Results, ccl.Result{Bytes: 0, BusBW: 1})
		return labeled{name, rep}
	}
	svg, err := plotBusBW([]labeled{run("ring_allreduce", 5, 40, 110, 125), run("tree_allreduce", 3, 9, 20, 27)})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	paths := 0
	dec := xml.NewDecoder(bytes.NewReader(svg))
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG does not parse: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			inText = el.Name.Local == "text"
			if el.Name.Local == "path" {
				paths++
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(el)); inText && s != "" {
				texts = append(texts, s)
			}
		case xml.EndElement:
			inText = false
		}
	}
	want := []string{"allreduce bus bandwidth, 8 ranks", "1K", "4K", "16K", "64K", "ring_allreduce", "tree_allreduce", "busbw (GB/s)", "size per rank (bytes)"}
	var missing []string
	for _, w := range want {
		found := false
		for _, s := range texts {
			found = found || s == w
		}
		if !found {
			missing = append(missing, w)
		}
	}
	if diff := cmp.Diff([]string(nil), missing); diff != "" {
		t.Errorf("texts missing from the chart (-want +got):\n%s\ntexts: %q", diff, texts)
	}
	if paths < 2 {
		t.Errorf("%d paths; want at least one line per run", paths)
	}
	if _, err := plotBusBW([]labeled{{"empty", &ccl.Report{Results: []ccl.Result{{Bytes: 0}}}}}); err == nil {
		t.Error("a chart of only 0-byte sizes: no error")
	}
}
