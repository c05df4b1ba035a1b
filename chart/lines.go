package chart

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// Point is one (x, y) value of a series.
type Point struct{ X, Y float64 }

// Series is one named curve of a line chart.
type Series struct {
	Label  string
	Points []Point // in X order
	// Step draws a step function: each value holds until the next point's
	// X (a measurement per step or per level), instead of a straight line
	// between points.
	Step bool
	// Marks draws the house marker at every point.
	Marks bool
}

// Axis describes one axis of a line chart.
type Axis struct {
	Label string
	// Log makes the axis logarithmic in whole decades; zero values sit on a
	// floor half a decade below, marked 0. LogLabel labels the decade ticks
	// (Decimal when nil; Duration for nanoseconds, Percent for shares).
	Log      bool
	LogLabel func(exp int) string
	// Min and Max fix a linear axis's range when Min < Max; otherwise it
	// fits the data.
	Min, Max float64
}

// Lines draws series as lines (or steps) on one pair of axes, each in the
// house style of its position, with a legend entry per series (a series
// without points keeps its entry). The same arguments give byte-identical
// pictures.
func Lines(title string, x, y Axis, series ...Series) *Figure {
	f := New(title)
	p := f.Plot()
	p.X.Label.Text, p.Y.Label.Text = x.Label, y.Label
	p.Add(plotter.NewGrid())
	var xs, ys []float64
	for _, s := range series {
		for _, pt := range s.Points {
			xs, ys = append(xs, pt.X), append(ys, pt.Y)
		}
	}
	var xa, ya LogAxis
	if x.Log {
		xa = NewLogAxis(xs, 0, x.LogLabel)
	}
	if y.Log {
		ya = NewLogAxis(ys, 0, y.LogLabel)
	}
	for i, s := range series {
		pts := make(plotter.XYs, len(s.Points))
		for j, pt := range s.Points {
			pts[j] = plotter.XY{X: pt.X, Y: pt.Y}
			if x.Log {
				pts[j].X = xa.Place(pt.X)
			}
			if y.Log {
				pts[j].Y = ya.Place(pt.Y)
			}
		}
		l := &plotter.Line{XYs: pts, LineStyle: LineStyle(i)}
		if s.Step {
			l.StepStyle = plotter.PostStep
		}
		if len(pts) > 0 {
			p.Add(l)
		}
		if s.Marks && len(pts) > 0 {
			p.Add(&plotter.Scatter{XYs: pts, GlyphStyle: GlyphStyle(i)})
		}
		if s.Marks {
			f.AddLegend(s.Label, l, &plotter.Scatter{GlyphStyle: GlyphStyle(i)})
		} else {
			f.AddLegend(s.Label, l)
		}
	}
	for _, a := range []struct {
		spec Axis
		log  LogAxis
		ax   *plot.Axis
	}{{x, xa, &p.X}, {y, ya, &p.Y}} {
		switch {
		case a.spec.Log:
			a.log.Apply(a.ax)
		case a.spec.Min < a.spec.Max:
			a.ax.Min, a.ax.Max = a.spec.Min, a.spec.Max
		}
	}
	return f
}
