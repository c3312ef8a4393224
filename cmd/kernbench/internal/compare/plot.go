package compare

import (
	"bytes"
	"fmt"
	"kernbench/engine/config"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot draws busbw against size, one line per run (a log2 size axis,
// as sweeps double), and returns the SVG. The legend goes below the
// chart, where it can cover no line whatever the runs measured, and the
// SVG grows with its entries; the chart keeps room on its right for half
// of the last size label, which is centred on the axis's end.
func Plot(reps []Labeled) ([]byte, error) {
	p := plot.New()
	p.Title.Text = plotTitle(reps)
	p.X.Label.Text = "size per rank (bytes)"
	p.Y.Label.Text = "busbw (GB/s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.TickerFunc(sizeTicks)
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Left, legend.Top = true, true
	lines := 0
	// Runs of different world sizes say theirs in the legend (the title
	// then names none).
	worlds := false
	for _, l := range reps {
		worlds = worlds || l.Rep.WorldSize != reps[0].Rep.WorldSize
	}
	for i, l := range reps {
		var pts plotter.XYs
		for _, r := range l.Rep.Results {
			if r.Bytes > 0 && r.Refused == nil { // a log axis has no 0; a refused size has no busbw
				pts = append(pts, plotter.XY{X: float64(r.Bytes), Y: r.BusBW})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.Label, err)
		}
		line.Color = plotutil.Color(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		name := l.Label
		if worlds {
			name += fmt.Sprintf(" (%d ranks)", l.Rep.WorldSize)
		}
		legend.Add(name, line, points)
		lines++
	}
	if lines == 0 {
		return nil, fmt.Errorf("no sizes above 0 bytes to plot")
	}
	const (
		height = 4.5 * vg.Inch // of the chart, above the legend
		margin = 6             // points around the chart and the legend
	)
	// The legend starts under the data area's left edge; long labels
	// (the settings of a --vary) widen the SVG rather than run off it.
	// Text is measured in Liberation Serif, which the SVG names without
	// embedding it: a viewer without it (or the metric-compatible Times
	// New Roman) draws wider text, hence textSlack.
	legend.Padding = 2
	legendSize := legend.Rectangle(draw.Canvas{}).Size()
	left := p.DataCanvas(draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: 7 * vg.Inch, Y: height}}}).Min.X
	width := max(7*vg.Inch, left+legendSize.X*textSlack+margin)
	c := vgsvg.NewWith(vgsvg.UseWH(width, height+legendSize.Y+3*margin), vgsvg.EmbedFonts(false))
	dc := draw.New(c)
	right := vg.Length(0)
	for _, t := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		right = max(right, p.X.Tick.Label.Rectangle(t.Label).Size().X/2*textSlack)
	}
	chart := draw.Crop(dc, 0, -right-margin, legendSize.Y+3*margin, -margin)
	p.Draw(chart)
	legend.Draw(draw.Crop(dc, p.DataCanvas(chart).Min.X, 0, margin, -(height + 2*margin)))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(b.Bytes(), []byte("font-family:Liberation Serif;"), []byte("font-family:Liberation Serif,Times New Roman,Times,serif;")), nil
}

// textSlack is how much wider than measured the chart's text may be
// drawn where the font it names is missing (DejaVu Serif, a common
// substitute, is about a quarter wider than Liberation Serif).
const textSlack = 1.3

// sizeTicks labels powers of two between min and max with byte sizes
// (1K, 64K, 4M), thinning them to at most about eight labels.
func sizeTicks(min, max float64) []plot.Tick {
	lo, hi := int(math.Floor(math.Log2(min))), int(math.Ceil(math.Log2(max)))
	step := 1
	for (hi-lo)/step > 8 {
		step *= 2
	}
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		v := math.Exp2(float64(e))
		if v < min || v > max {
			continue
		}
		label := ""
		if (e-lo)%step == 0 {
			label = config.FormatSize(int64(v))
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}

// plotTitle names what the lines share, so a saved chart says what it
// measured: "allreduce busbw, 8 ranks" (a part is left out when the runs
// differ in it).
func plotTitle(reps []Labeled) string {
	title := "bus bandwidth"
	if len(reps) == 0 {
		return title
	}
	coll, world := reps[0].Rep.Collective, reps[0].Rep.WorldSize
	for _, l := range reps[1:] {
		if l.Rep.Collective != coll {
			coll = ""
		}
		if l.Rep.WorldSize != world {
			world = 0
		}
	}
	if coll != "" {
		title = coll + " " + title
	}
	if world > 0 {
		title += fmt.Sprintf(", %d ranks", world)
	}
	return title
}
