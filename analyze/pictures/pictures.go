// Package pictures draws an analysis: every thread's CPU share against its
// wake rate, and per cluster the distributions of run lengths and wake
// latencies, as SVG and PNG in package chart's house style; and the wake
// graph as SVG through Graphviz. It is apart from package analyze so that
// analyze's importers do not link the plotting library.
package pictures

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/chart"
)

// The pictures Write draws, by file name without the format extension.
const (
	// RuntimeWakeRate is the scatter of each thread's CPU share against its
	// wake rate, log–log, one colour and marker per cluster: the two
	// features that separate compute from request-serving from idle threads.
	RuntimeWakeRate = "runtime-wakerate"
	// RunLengthCDF is the on-CPU run-length distribution per cluster.
	RunLengthCDF = "runlength-cdf"
	// WakeLatencyCDF is the waking → running latency distribution per
	// cluster.
	WakeLatencyCDF = "wakelatency-cdf"
)

// ErrNoDistributions says an analysis carries its threads' quantiles but
// not their distributions: it was decoded from JSON rather than computed
// from a trace, and the CDF pictures cannot be drawn from it.
var ErrNoDistributions = errors.New("the analysis holds quantiles but no distributions (decoded from JSON?); draw the pictures from the trace")

// Write draws the analysis into dir — RuntimeWakeRate, RunLengthCDF and
// WakeLatencyCDF — in each of formats ("svg", "png"; both when none is
// given) and returns the paths written, in that order; the same analysis
// gives byte-identical files. dir and the atomicity of the files are as
// chart.Write has them.
func Write(a *analyze.Analysis, dir string, formats ...string) ([]string, error) {
	if _, err := chart.Formats(formats); err != nil {
		return nil, err
	}
	if a == nil || len(a.Threads) == 0 {
		return nil, errors.New("the analysis has no threads to plot")
	}
	if err := chart.CheckDir(dir); err != nil {
		return nil, err
	}
	groups := clusterGroups(a)
	run, err := cdfFigure(a, groups, runLengthCDF())
	if err != nil {
		return nil, err
	}
	lat, err := cdfFigure(a, groups, wakeLatencyCDF())
	if err != nil {
		return nil, err
	}
	return chart.Write(dir, []chart.Named{
		{Name: RuntimeWakeRate, Figure: runtimeWakeRateFigure(a, groups)},
		{Name: RunLengthCDF, Figure: run},
		{Name: WakeLatencyCDF, Figure: lat},
	}, formats...)
}

// clusterGroup is one cluster's threads as the pictures show them; style is
// its position among the groups, which picks its colour, marker and dashes.
type clusterGroup struct {
	id      int
	class   analyze.Class
	threads []*analyze.Thread
	style   int
}

// label is the cluster's legend entry: "cluster N (class, k threads)".
func (g *clusterGroup) label() string {
	class := g.class
	if class == "" {
		class = "unclassified"
	}
	return fmt.Sprintf("cluster %d (%s, %s)", g.id, class, plural(len(g.threads), "thread"))
}

// plural writes "1 thread", "2 threads".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// clusterGroups groups the threads by cluster id: every cluster the analysis
// lists (even an empty one, so each has its legend entry), then any cluster
// id that only threads name; by id.
func clusterGroups(a *analyze.Analysis) []clusterGroup {
	var groups []clusterGroup
	for _, c := range a.Clusters {
		if !slices.ContainsFunc(groups, func(g clusterGroup) bool { return g.id == c.ID }) {
			groups = append(groups, clusterGroup{id: c.ID, class: c.Class})
		}
	}
	for i := range a.Threads {
		t := &a.Threads[i]
		j := slices.IndexFunc(groups, func(g clusterGroup) bool { return g.id == t.Cluster })
		if j < 0 {
			groups = append(groups, clusterGroup{id: t.Cluster, class: t.Class})
			j = len(groups) - 1
		}
		groups[j].threads = append(groups[j].threads, t)
	}
	slices.SortStableFunc(groups, func(x, y clusterGroup) int { return cmp.Compare(x.id, y.id) })
	for i := range groups {
		groups[i].style = i
	}
	return groups
}

// newFigure returns a figure titled with what it shows, the trace and its
// window, what was analysed, and an optional note on how to read it.
func newFigure(a *analyze.Analysis, what, note string) *chart.Figure {
	trace := filepath.Base(a.Trace.Path)
	if a.Trace.Path == "" {
		trace = "unnamed trace"
	}
	title := fmt.Sprintf("%s — %s, %.3f s window", what, trace, float64(a.Trace.WindowNs)/1e9)
	if d := a.Target.Description; d != "" {
		title += "\n" + d
	}
	if note != "" {
		title += "\n" + note
	}
	return chart.New(title)
}

// runtimeWakeRateFigure is the scatter of CPU share against wake rate, one
// point per thread. Both come from counts over the window (run time and
// wakeups) rather than the rounded JSON shares, so a thread that ran for
// microseconds is not drawn as zero; an analysis without a window falls back
// to the recorded shares and rates.
func runtimeWakeRateFigure(a *analyze.Analysis, groups []clusterGroup) *chart.Figure {
	window := float64(a.Trace.WindowNs) / 1e9
	share := func(t *analyze.Thread) float64 {
		if window > 0 {
			return float64(t.Features.RunNs) / 1e9 / window
		}
		return t.Features.CPUShare
	}
	rate := func(t *analyze.Thread) float64 {
		if window > 0 {
			return float64(t.Features.Wakeups) / window
		}
		return t.Features.WakeRate
	}
	var xs, ys []float64
	for i := range a.Threads {
		xs = append(xs, share(&a.Threads[i]))
		ys = append(ys, rate(&a.Threads[i]))
	}
	xa := chart.NewLogAxis(xs, -3, chart.Percent)
	ya := chart.NewLogAxis(ys, 0, chart.Decimal)

	var note string
	switch {
	case xa.Zero && ya.Zero:
		note = "threads with no CPU time or no wakeups are drawn on the dashed lines marked 0"
	case xa.Zero:
		note = "threads with no CPU time are drawn on the dashed line marked 0"
	case ya.Zero:
		note = "threads never woken are drawn on the dashed line marked 0"
	}
	f := newFigure(a, "CPU share vs wake rate per thread", note)
	p := f.Plot()
	p.X.Label.Text = "CPU share (run time / window; 100% = one CPU), log scale"
	p.Y.Label.Text = "wake rate (wakeups/s), log scale"
	p.Add(plotter.NewGrid())
	xa.Apply(&p.X)
	ya.Apply(&p.Y)
	zeroLine := draw.LineStyle{Color: color.Gray{Y: 0x80}, Width: vg.Points(0.75), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	if xa.Zero {
		p.Add(&plotter.Line{XYs: plotter.XYs{{X: xa.Floor(), Y: p.Y.Min}, {X: xa.Floor(), Y: p.Y.Max}}, LineStyle: zeroLine})
	}
	if ya.Zero {
		p.Add(&plotter.Line{XYs: plotter.XYs{{X: p.X.Min, Y: ya.Floor()}, {X: p.X.Max, Y: ya.Floor()}}, LineStyle: zeroLine})
	}
	for _, g := range groups {
		pts := make(plotter.XYs, 0, len(g.threads))
		for _, t := range g.threads {
			pts = append(pts, plotter.XY{X: xa.Place(share(t)), Y: ya.Place(rate(t))})
		}
		s := &plotter.Scatter{XYs: pts, GlyphStyle: chart.GlyphStyle(g.style)}
		if len(pts) > 0 {
			p.Add(s)
		}
		f.AddLegend(g.label(), s)
	}
	// Add widened the axes to the data; put the fitted ranges back.
	xa.Apply(&p.X)
	ya.Apply(&p.Y)
	return f
}

// cdfKind says which per-thread distribution a CDF picture pools.
type cdfKind struct {
	what    string // title
	samples string // noun for the legend's count
	xLabel  string
	yLabel  string
	dist    func(*analyze.Thread) analyze.Dist
}

// runLengthCDF pools the threads' on-CPU run lengths.
func runLengthCDF() cdfKind {
	return cdfKind{
		what:    "Run length per cluster",
		samples: "run",
		xLabel:  "run length, switch-in → switch-out (log scale)",
		yLabel:  "share of the cluster's runs ≤ x",
		dist:    func(t *analyze.Thread) analyze.Dist { return t.Features.Run },
	}
}

// wakeLatencyCDF pools the threads' waking → running latencies.
func wakeLatencyCDF() cdfKind {
	return cdfKind{
		what:    "Wake latency per cluster",
		samples: "wakeup",
		xLabel:  "wake latency, waking → running (log scale)",
		yLabel:  "share of the cluster's wakeups ≤ x",
		dist:    func(t *analyze.Thread) analyze.Dist { return t.Features.WakeLatency },
	}
}

// cdfNote says how the pooled CDFs are made.
const cdfNote = "each thread's quantile sketch (exact up to 32 samples, then ±2.2 % buckets), pooled per cluster weighted by sample count"

// pooledCDF is a cluster's empirical distribution: the threads' sketch bins
// pooled (so each thread weighs by its sample count) and drawn as the
// staircase of the cumulative share. It returns the staircase's corners and
// the number of samples; no samples, no points. A thread with samples but
// no distribution is ErrNoDistributions.
func pooledCDF(threads []*analyze.Thread, dist func(*analyze.Thread) analyze.Dist) (plotter.XYs, int64, error) {
	var bins []analyze.Bin
	var total int64
	for _, t := range threads {
		d := dist(t)
		if d.N <= 0 {
			continue
		}
		b := d.Bins()
		if b == nil {
			return nil, 0, fmt.Errorf("thread %s/%d: %w", t.Comm, t.Tid, ErrNoDistributions)
		}
		bins = append(bins, b...)
		total += d.N
	}
	if total == 0 {
		return nil, 0, nil
	}
	slices.SortStableFunc(bins, func(x, y analyze.Bin) int { return cmp.Compare(x.Value, y.Value) })
	var pts plotter.XYs
	var cum int64
	for i, b := range bins {
		cum += b.Count
		if i+1 < len(bins) && bins[i+1].Value == b.Value {
			continue // one step per value
		}
		y0 := 0.0
		if n := len(pts); n > 0 {
			y0 = pts[n-1].Y
		}
		x := float64(max(b.Value, 1))
		pts = append(pts, plotter.XY{X: x, Y: y0}, plotter.XY{X: x, Y: float64(cum) / float64(total)})
	}
	return pts, total, nil
}

// cdfFigure draws one pooled CDF per cluster on a log duration axis.
func cdfFigure(a *analyze.Analysis, groups []clusterGroup, kind cdfKind) (*chart.Figure, error) {
	f := newFigure(a, kind.what, cdfNote)
	p := f.Plot()
	p.X.Label.Text = kind.xLabel
	p.Y.Label.Text = kind.yLabel
	p.Add(plotter.NewGrid())

	curves := make([]plotter.XYs, len(groups))
	totals := make([]int64, len(groups))
	var xs []float64
	for i, g := range groups {
		var err error
		if curves[i], totals[i], err = pooledCDF(g.threads, kind.dist); err != nil {
			return nil, err
		}
		for _, pt := range curves[i] {
			xs = append(xs, pt.X)
		}
	}
	xa := chart.NewLogAxis(xs, 3, chart.Duration)
	for i, g := range groups {
		for j := range curves[i] {
			curves[i][j].X = xa.Place(curves[i][j].X)
		}
		l := &plotter.Line{XYs: curves[i], LineStyle: chart.LineStyle(g.style)}
		if len(curves[i]) > 0 {
			p.Add(l)
		}
		f.AddLegend(fmt.Sprintf("%s; %s", g.label(), plural(int(totals[i]), kind.samples)), l)
	}
	xa.Apply(&p.X)
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = plot.ConstantTicks{
		{Value: 0, Label: "0"}, {Value: 0.1}, {Value: 0.2}, {Value: 0.3}, {Value: 0.4},
		{Value: 0.5, Label: "0.5"}, {Value: 0.6}, {Value: 0.7}, {Value: 0.8},
		{Value: 0.9, Label: "0.9"}, {Value: 0.99}, {Value: 1, Label: "1"},
	}
	return f, nil
}
