package report

import (
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"temper.codes/temper-train/chart"
	"temper.codes/temper-train/refine/stats"
)

// bars are the confidence intervals of one series' medians, drawn as
// vertical error bars so a picture never shows a median without its
// uncertainty. Unbounded intervals (too few trials) get no bar.
type bars struct {
	xy     plotter.XYs
	lo, hi []float64 // distances below and above the median
}

func (b *bars) add(x float64, iv stats.Interval) {
	if !iv.Finite() || !finite(iv.Center) {
		return
	}
	b.xy = append(b.xy, plotter.XY{X: x, Y: iv.Center})
	b.lo = append(b.lo, iv.Center-iv.Lo)
	b.hi = append(b.hi, iv.Hi-iv.Center)
}

func (b *bars) Len() int                        { return len(b.xy) }
func (b *bars) XY(i int) (float64, float64)     { return b.xy.XY(i) }
func (b *bars) YError(i int) (float64, float64) { return b.lo[i], b.hi[i] }

// addBars draws b on f in the style of the series drawn i-th.
func addBars(f *chart.Figure, i int, b *bars) {
	if b.Len() == 0 {
		return
	}
	eb, err := plotter.NewYErrorBars(b)
	if err != nil {
		return // only for NaN/Inf values, which add() keeps out
	}
	eb.LineStyle = chart.LineStyle(i)
	eb.LineStyle.Dashes = nil
	eb.LineStyle.Width = vg.Points(1)
	eb.CapWidth = vg.Points(6)
	f.Plot().Add(eb)
}
