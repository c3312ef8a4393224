package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"kernbench/cmd/kernbench/internal/compare"
	"kernbench/starlark/report"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// The busbw chart is a well-formed SVG with one legend entry per run and
// byte-size labels on its log2 size axis; sizes of 0 bytes are left out.
func TestPlotBusBW(t *testing.T) {
	run := func(name string, bw ...float64) compare.Labeled {
		rep := &report.Report{Algorithm: name, Collective: "allreduce", WorldSize: 8}
		for i, b := range bw {
			rep.Results = append(rep.Results, report.Result{Bytes: 1024 << (2 * i), BusBW: b})
		}
		rep.Results = append(rep.Results, report.Result{Bytes: 0, BusBW: 1})
		return compare.Labeled{Label: name, Rep: rep}
	}
	svg, err := compare.Plot([]compare.Labeled{run("ring_allreduce", 5, 40, 110, 125), run("tree_allreduce", 3, 9, 20, 27)})
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
	if _, err := compare.Plot([]compare.Labeled{{Label: "empty", Rep: &report.Report{Results: []report.Result{{Bytes: 0}}}}}); err == nil {
		t.Error("a chart of only 0-byte sizes: no error")
	}
}

// svgText is a text of the chart and the box it covers, in the chart's
// points with y upwards (as gonum lays it out).
type svgText struct {
	s   string
	box vg.Rectangle
}

// chartTexts reads the texts of a chart drawn by compare.Plot, measured in
// the font it names, and the chart's size. Rotated texts (the y axis
// title, placed by gonum alone) are left out.
func chartTexts(t *testing.T, svg []byte) (texts []svgText, size vg.Point) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var open *xml.StartElement
	var groups []bool // the open <g> elements: whether each rotates
	rotated := func() bool { return slices.Contains(groups, true) }
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
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch el.Name.Local {
			case "svg":
				if _, err := fmt.Sscanf(attr["viewBox"], "0 0 %g %g", &size.X, &size.Y); err != nil {
					t.Fatalf("viewBox %q: %v", attr["viewBox"], err)
				}
			case "g":
				groups = append(groups, strings.Contains(attr["transform"], "rotate"))
			case "text":
				if !rotated() {
					e := el.Copy()
					open = &e
				}
			}
		case xml.CharData:
			if open == nil {
				continue
			}
			attr := map[string]string{}
			for _, a := range open.Attr {
				attr[a.Name.Local] = a.Value
			}
			_, fontSize, _ := strings.Cut(attr["style"], "font-size:")
			x, err1 := strconv.ParseFloat(attr["x"], 64)
			y, err2 := strconv.ParseFloat(attr["y"], 64)
			px, err3 := strconv.ParseFloat(strings.TrimSuffix(fontSize, "px"), 64)
			if err1 != nil || err2 != nil || err3 != nil {
				t.Fatalf("text %q: x %q y %q style %q", el, attr["x"], attr["y"], attr["style"])
			}
			s := string(el)
			sty := text.Style{Font: font.From(plot.DefaultFont, vg.Length(px)), Handler: plot.DefaultTextHandler}
			r := sty.Rectangle(s)
			// The text is drawn flipped (scale(1, -1)): y is minus the baseline.
			at := vg.Point{X: vg.Length(x), Y: vg.Length(-y)}
			texts = append(texts, svgText{s, vg.Rectangle{Min: at.Add(r.Min), Max: at.Add(r.Max)}})
			open = nil
		case xml.EndElement:
			open = nil
			if el.Name.Local == "g" {
				groups = groups[:len(groups)-1]
			}
		}
	}
	return texts, size
}

// The chart's legend lies below it, where it covers no line (it used to
// sit in the top left corner of the data, over whatever was there), a
// long label widens the chart instead of running off it, and no text is
// cut at an edge (the last size label, centred on the axis's end, was cut
// in half).
func TestPlotLayout(t *testing.T) {
	long := "ring_allreduce defaults.buffer_kind=sram defaults.backpressure=sleep defaults.n_slots=16 defaults.slot_size=8192"
	for _, tc := range []struct {
		name   string
		labels []string
	}{
		{"short labels", []string{"ring_allreduce", "tree_allreduce"}},
		{"a long label", []string{"ring_allreduce", long}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reps []compare.Labeled
			for i, label := range tc.labels {
				rep := &report.Report{Algorithm: label, Collective: "allreduce", WorldSize: 8}
				for j, bw := range []float64{120, 125, 126, 127, 127.5} { // high from the first size on
					rep.Results = append(rep.Results, report.Result{Bytes: 1024 << (2 * j), BusBW: bw / float64(i+1)})
				}
				reps = append(reps, compare.Labeled{Label: label, Rep: rep})
			}
			svg, err := compare.Plot(reps)
			if err != nil {
				t.Fatal(err)
			}
			texts, size := chartTexts(t, svg)
			var axisTitle *svgText
			for i, tx := range texts {
				if tx.s == "size per rank (bytes)" {
					axisTitle = &texts[i]
				}
			}
			if axisTitle == nil {
				t.Fatalf("no x axis title among %d texts", len(texts))
			}
			legend := 0
			for _, tx := range texts {
				if b := tx.box; b.Min.X < 0 || b.Min.Y < 0 || b.Max.X > size.X || b.Max.Y > size.Y {
					t.Errorf("%q covers %v, not within the chart's 0-%v × 0-%v", tx.s, b, size.X, size.Y)
				}
				if slices.Contains(tc.labels, tx.s) {
					legend++
					if tx.box.Max.Y > axisTitle.box.Min.Y {
						t.Errorf("legend entry %q at %v is not below the x axis title at %v", tx.s, tx.box, axisTitle.box)
					}
				}
			}
			if legend != len(tc.labels) {
				t.Errorf("%d legend entries, want %d", legend, len(tc.labels))
			}
		})
	}
}
