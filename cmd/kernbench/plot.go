package main

import (
	"bytes"
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plotBusBW draws busbw against size, one line per run (a log2 size axis,
// as sweeps double), and returns the SVG.
func plotBusBW(reps []labeled) ([]byte, error) {
	p := plot.New()
	p.Title.Text = plotTitle(reps)
	p.X.Label.Text = "size per rank (bytes)"
	p.Y.Label.Text = "busbw (GB/s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.TickerFunc(sizeTicks)
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	lines := 0
	// Runs of different world sizes say theirs in the legend (the title
	// then names none).
	worlds := false
	for _, l := range reps {
		worlds = worlds || l.rep.WorldSize != reps[0].rep.WorldSize
	}
	for i, l := range reps {
		var pts plotter.XYs
		for _, r := range l.rep.Results {
			if r.Bytes > 0 { // a log axis has no 0
				pts = append(pts, plotter.XY{X: float64(r.Bytes), Y: r.BusBW})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", l.label, err)
		}
		line.Color = plotutil.Color(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		name := l.label
		if worlds {
			name += fmt.Sprintf(" (%d ranks)", l.rep.WorldSize)
		}
		p.Legend.Add(name, line, points)
		lines++
	}
	if lines == 0 {
		return nil, fmt.Errorf("no sizes above 0 bytes to plot")
	}
	c := vgsvg.NewWith(vgsvg.UseWH(7*vg.Inch, 4.5*vg.Inch), vgsvg.EmbedFonts(false))
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

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
			label = sizeLabel(int64(v))
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}

// sizeLabel is n in the units sizes are given in (4096 → 4K).
func sizeLabel(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.suffix)
		}
	}
	return fmt.Sprint(n)
}

// plotTitle names what the lines share, so a saved chart says what it
// measured: "allreduce busbw, 8 ranks" (a part is left out when the runs
// differ in it).
func plotTitle(reps []labeled) string {
	title := "bus bandwidth"
	if len(reps) == 0 {
		return title
	}
	coll, world := reps[0].rep.Collective, reps[0].rep.WorldSize
	for _, l := range reps[1:] {
		if l.rep.Collective != coll {
			coll = ""
		}
		if l.rep.WorldSize != world {
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
