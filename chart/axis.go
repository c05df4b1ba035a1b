package chart

import (
	"math"
	"strings"

	"gonum.org/v1/plot"
)

// LogAxis is a logarithmic axis from 10^Lo to 10^Hi (whole decades), with a
// floor for zero values half a decade below when Zero says so. Values are
// drawn at their base-10 logarithm (Place) on a linear gonum axis with
// ticks at the decades: plot.LogScale panics on a zero and misplaces the
// axis label's room (it centres it on the arithmetic mean), and the picture
// is the same.
type LogAxis struct {
	Lo, Hi int
	Zero   bool
	Label  func(exp int) string // the label of the tick at 10^exp
}

// NewLogAxis fits a log axis around vals: whole decades with some room
// around the smallest and largest positive value, and a zero floor if any
// value is zero or negative. Without a positive value it spans 10^emptyLo
// to 10^(emptyLo+1).
func NewLogAxis(vals []float64, emptyLo int, label func(exp int) string) LogAxis {
	ax := LogAxis{Label: label}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if v > 0 {
			lo, hi = min(lo, v), max(hi, v)
		} else {
			ax.Zero = true
		}
	}
	if math.IsInf(lo, 1) {
		ax.Lo, ax.Hi = emptyLo, emptyLo+1
		return ax
	}
	ax.Lo = int(math.Floor(math.Log10(lo / 1.15)))
	ax.Hi = int(math.Ceil(math.Log10(hi * 1.15)))
	return ax
}

// Floor is where zero values are drawn: half a decade below 10^Lo.
func (ax LogAxis) Floor() float64 { return float64(ax.Lo) - 0.5 }

// Place maps a value to where it is drawn: its logarithm, zero and negative
// values on the floor.
func (ax LogAxis) Place(v float64) float64 {
	if v > 0 {
		return math.Log10(v)
	}
	return ax.Floor()
}

// Apply sets a gonum axis to the range and ticks. Call it after adding the
// plotters: adding widens the axes to the data.
func (ax LogAxis) Apply(a *plot.Axis) {
	a.Min, a.Max = float64(ax.Lo), float64(ax.Hi)
	if ax.Zero {
		a.Min = ax.Floor()
	}
	a.Tick.Marker = ax
}

// Ticks implements plot.Ticker: a labelled tick at every decade, unlabelled
// (minor) ones at 2–9 times it, and "0" at the floor.
func (ax LogAxis) Ticks(_, _ float64) []plot.Tick {
	var ticks []plot.Tick
	if ax.Zero {
		ticks = append(ticks, plot.Tick{Value: ax.Floor(), Label: "0"})
	}
	label := ax.Label
	if label == nil {
		label = Decimal
	}
	for e := ax.Lo; e <= ax.Hi; e++ {
		ticks = append(ticks, plot.Tick{Value: float64(e), Label: label(e)})
		if e < ax.Hi {
			for m := 2; m <= 9; m++ {
				ticks = append(ticks, plot.Tick{Value: float64(e) + math.Log10(float64(m))})
			}
		}
	}
	return ticks
}

// Decimal writes 10^exp exactly: "0.001", "1", "1000".
func Decimal(exp int) string {
	if exp >= 0 {
		return "1" + strings.Repeat("0", exp)
	}
	return "0." + strings.Repeat("0", -exp-1) + "1"
}

// Percent labels a share decade as a percentage: 10^-2 is "1%".
func Percent(exp int) string { return Decimal(exp+2) + "%" }

// Duration labels a nanosecond decade with its unit: 10^4 is "10 µs".
func Duration(exp int) string {
	units := []string{"ns", "µs", "ms", "s"}
	if exp < 0 {
		return Decimal(exp) + " ns"
	}
	u := min(exp/3, len(units)-1)
	return Decimal(exp-3*u) + " " + units[u]
}
