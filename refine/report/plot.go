package report

import (
	"cmp"
	"fmt"
	"slices"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"temper.codes/temper-train/chart"
	"temper.codes/temper-train/refine/stats"
)

// Figures returns the pictures Write writes, by file name: each round's
// race entries ranked by their estimated gain (±1 standard error), and the
// primary metric's medians per background level (every arm, with their
// intervals). Points at the same x are drawn slightly apart so their bars
// do not hide each other.
func (r Report) Figures() []chart.Named {
	const apart = 0.06
	var rounds []chart.Series
	var roundBars []bars
	most := 0
	for i, race := range r.Races {
		s := chart.Series{Label: fmt.Sprintf("round %d", race.Round), Marks: true}
		var b bars
		dx := apart * (float64(i) - float64(len(r.Races)-1)/2)
		for k, e := range ranked(race.Entries) {
			x := float64(k+1) + dx
			s.Points = append(s.Points, chart.Point{X: x, Y: 100 * e.Gain})
			if finite(e.GainSE) {
				b.add(x, stats.Interval{Lo: 100 * (e.Gain - e.GainSE), Center: 100 * e.Gain, Hi: 100 * (e.Gain + e.GainSE)})
			}
			most = max(most, k+1)
		}
		rounds = append(rounds, s)
		roundBars = append(roundBars, b)
	}
	minimum := chart.Series{Label: "minimum effect"}
	if most > 0 {
		minimum.Points = []chart.Point{{X: 1, Y: 100 * r.Rule.MinEffect}, {X: float64(most), Y: 100 * r.Rule.MinEffect}}
	}
	race := chart.Lines("race: estimated gain per candidate, ranked (bars: ±1 standard error; no test)",
		chart.Axis{Label: "rank in its round"}, chart.Axis{Label: "estimated gain, % (positive is better)"}, append(rounds, minimum)...)
	for i := range roundBars {
		addBars(race, i, &roundBars[i])
	}

	m := r.Rule.Metric
	y := chart.Axis{Label: m + " (median of trials, " + r.Rule.Dir.Better() + " is better)"}
	var series []chart.Series
	var arms []bars
	for a, arm := range r.Arms {
		s := chart.Series{Label: arm.Name, Marks: true}
		var b bars
		dx := apart * (float64(a) - float64(len(r.Arms)-1)/2)
		for _, l := range r.Ladder {
			if v, ok := l.Cells[a].Values[m]; ok && l.Cells[a].N > 0 && finite(v.Center) {
				s.Points = append(s.Points, chart.Point{X: float64(l.Bg) + dx, Y: v.Center})
				b.add(float64(l.Bg)+dx, v)
			}
		}
		series = append(series, s)
		arms = append(arms, b)
	}
	ladder := chart.Lines(m+" per background level (bars: "+pct(r.confidence())+" intervals)", chart.Axis{Label: "background CPU spinners"}, y, series...)
	for a := range arms {
		addBars(ladder, a, &arms[a])
	}
	return []chart.Named{{Name: RacePlot, Figure: race}, {Name: LadderPlot, Figure: ladder}}
}

// ranked are the entries with a finite gain, best first.
func ranked(es []RaceEntry) []RaceEntry {
	var out []RaceEntry
	for _, e := range es {
		if finite(e.Gain) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b RaceEntry) int { return cmp.Compare(b.Gain, a.Gain) })
	return out
}

// bars are the confidence intervals of one series' points, drawn as
// vertical error bars so a picture never shows an estimate without its
// uncertainty. Unbounded intervals (too few trials) get no bar.
type bars struct {
	xy     plotter.XYs
	lo, hi []float64 // distances below and above the point
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
