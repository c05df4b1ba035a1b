package analyze

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"temper.codes/temper-train/internal/atomicfile"
)

// The pictures WritePlots draws, by file name without the format extension.
const (
	// PlotRuntimeWakeRate is the scatter of each thread's CPU share against
	// its wake rate, log–log, one colour and marker per cluster: the two
	// features that separate compute from request-serving from idle threads.
	PlotRuntimeWakeRate = "runtime-wakerate"
	// PlotRunLengthCDF is the on-CPU run-length distribution per cluster.
	PlotRunLengthCDF = "runlength-cdf"
	// PlotWakeLatencyCDF is the waking → running latency distribution per
	// cluster.
	PlotWakeLatencyCDF = "wakelatency-cdf"
)

// Picture geometry. PNGs are plotWidth × plotHeight at plotDPI (960 × 576
// pixels); SVGs have the same size in points.
const (
	plotWidth  = 10 * vg.Inch
	plotHeight = 6 * vg.Inch
	plotDPI    = 96
	plotMargin = 10 // points of blank border around the picture
	legendGap  = 12 // points between the plot and its legend
)

// WritePlots draws the analysis into dir as pictures — PlotRuntimeWakeRate,
// PlotRunLengthCDF and PlotWakeLatencyCDF — in each of formats ("svg",
// "png"; both when none is given) and returns the paths written, in that
// order. It draws from the Analysis value alone, so an analysis decoded from
// JSON plots the same as a fresh one, and the same analysis gives
// byte-identical SVG files.
//
// dir is created if missing; an existing non-directory is an error. Every
// picture is rendered before the first is written, and each is written
// atomically (a temporary file renamed into place), so a failure leaves no
// partial file: at worst the pictures written before it, whole. On error the
// paths already written are returned with it.
func WritePlots(a *Analysis, dir string, formats ...string) ([]string, error) {
	fmts, err := plotFormats(formats)
	if err != nil {
		return nil, err
	}
	if a == nil || len(a.Threads) == 0 {
		return nil, errors.New("the analysis has no threads to plot")
	}
	if err := CheckPlotDir(dir); err != nil {
		return nil, err
	}
	groups := clusterGroups(a)
	figs := []struct {
		name string
		fig  *figure
	}{
		{PlotRuntimeWakeRate, runtimeWakeRateFigure(a, groups)},
		{PlotRunLengthCDF, cdfFigure(a, groups, runLengthCDF())},
		{PlotWakeLatencyCDF, cdfFigure(a, groups, wakeLatencyCDF())},
	}
	type picture struct {
		path string
		data []byte
	}
	var pics []picture
	for _, f := range figs {
		for _, format := range fmts {
			data, err := f.fig.render(format)
			if err != nil {
				return nil, fmt.Errorf("plot %s.%s: %w", f.name, format, err)
			}
			pics = append(pics, picture{filepath.Join(dir, f.name+"."+format), data})
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot directory %s: %w", dir, err)
	}
	var written []string
	for _, p := range pics {
		err := atomicfile.Write(p.path, 0o644, func(w io.Writer) error {
			if _, err := w.Write(p.data); err != nil {
				return fmt.Errorf("write %s: %w", p.path, err)
			}
			return nil
		})
		if err != nil {
			return written, err // names the file
		}
		written = append(written, p.path)
	}
	return written, nil
}

// CheckPlotDir returns an error naming dir unless it can be WritePlots'
// output directory as far as can be told without writing: it must be a
// directory or not exist yet. The CLI calls it before the (slow) analysis so a wrong path fails
// fast.
func CheckPlotDir(dir string) error {
	if dir == "" {
		return errors.New("plot directory: empty path; give a directory to write the pictures to")
	}
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("plot directory %s exists and is not a directory; give a new or existing directory", dir)
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("plot directory %s: %w", dir, err)
	}
}

// plotFormats checks the requested formats and removes repeats; none means
// svg and png.
func plotFormats(formats []string) ([]string, error) {
	if len(formats) == 0 {
		return []string{"svg", "png"}, nil
	}
	var out []string
	for _, f := range formats {
		if f != "svg" && f != "png" {
			return nil, fmt.Errorf("plot format %q: want svg or png", f)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// clusterGroup is one cluster's threads as the pictures show them; style is
// its position among the groups, which picks its colour, marker and dashes.
type clusterGroup struct {
	id      int
	class   string
	threads []*Thread
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

// clusterGroups groups the threads by cluster id: every cluster the analysis
// lists (even an empty one, so each has its legend entry), then any cluster
// id that only threads name; by id.
func clusterGroups(a *Analysis) []clusterGroup {
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

// clusterColor is the colour of the cluster drawn i-th: the Okabe–Ito
// palette (told apart with the common colour-vision deficiencies), without
// its yellow (unreadable on white) and black (the axes'), plus a dark red.
func clusterColor(i int) color.RGBA {
	palette := [...]color.RGBA{
		{0x00, 0x72, 0xb2, 0xff}, // blue
		{0xd5, 0x5e, 0x00, 0xff}, // vermillion
		{0x00, 0x9e, 0x73, 0xff}, // bluish green
		{0xcc, 0x79, 0xa7, 0xff}, // reddish purple
		{0xe6, 0x9f, 0x00, 0xff}, // orange
		{0x56, 0xb4, 0xe9, 0xff}, // sky blue
		{0x8b, 0x1a, 0x1a, 0xff}, // dark red
	}
	return palette[i%len(palette)]
}

// clusterGlyph is the marker of the cluster drawn i-th. All are filled, so
// each shows its colour clearly even where points crowd; with five shapes
// and seven colours, colour and shape together repeat only after 35
// clusters.
func clusterGlyph(i int) draw.GlyphDrawer {
	shapes := [...]draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{},
		polygonGlyph{{0, 1}, {1, 0}, {0, -1}, {-1, 0}}, // diamond
		polygonGlyph{{-1, 0.6}, {1, 0.6}, {0, -1.1}},   // triangle pointing down
	}
	return shapes[i%len(shapes)]
}

// polygonGlyph is a filled polygon marker; its corners are in units of the
// glyph's radius around the point.
type polygonGlyph [][2]float64

// DrawGlyph implements draw.GlyphDrawer.
func (g polygonGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetColor(sty.Color)
	var p vg.Path
	for i, corner := range g {
		q := vg.Point{X: pt.X + sty.Radius*vg.Length(corner[0]), Y: pt.Y + sty.Radius*vg.Length(corner[1])}
		if i == 0 {
			p.Move(q)
		} else {
			p.Line(q)
		}
	}
	p.Close()
	c.Fill(p)
}

// clusterDashes is the line pattern of the cluster drawn i-th, so curves of
// similar colour or on top of each other can still be told apart.
func clusterDashes(i int) []vg.Length {
	switch i % 4 {
	case 1:
		return []vg.Length{vg.Points(7), vg.Points(3)}
	case 2:
		return []vg.Length{vg.Points(2), vg.Points(2)}
	case 3:
		return []vg.Length{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}
	}
	return nil
}

// figure is a plot with its legend entries. The legend is drawn below the
// plot rather than on it, so it never hides a point.
type figure struct {
	plot    *plot.Plot
	style   plot.Legend // the legend's font and spacing, without entries
	entries []legendEntry
}

// legendEntry is one line of the legend: a thumbnail and its text.
type legendEntry struct {
	text  string
	thumb plot.Thumbnailer
}

// addLegend appends a legend entry.
func (f *figure) addLegend(text string, thumb plot.Thumbnailer) {
	f.entries = append(f.entries, legendEntry{text, thumb})
}

// newFigure returns a figure with the house fonts (Liberation Sans) and the
// title: what it shows, the trace and its window, what was analysed, and an
// optional note on how to read it.
func newFigure(a *Analysis, what, note string) *figure {
	p := plot.New()
	sans := font.Font{Typeface: "Liberation", Variant: "Sans"}
	p.Title.TextStyle.Font = font.From(sans, 12)
	p.Title.Padding = vg.Points(8)
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(sans, 11)
		ax.Tick.Label.Font = font.From(sans, 10)
	}
	lg := plot.NewLegend()
	lg.TextStyle.Font = font.From(sans, 11)
	lg.Top, lg.Left = true, true
	lg.Padding = vg.Points(4)
	lg.ThumbnailWidth = vg.Points(28)

	trace := filepath.Base(a.Trace.Path)
	if a.Trace.Path == "" {
		trace = "unnamed trace"
	}
	title := fmt.Sprintf("%s — %s, %s window", what, trace, fmtSeconds(a.Trace.WindowNs))
	if d := a.Target.Description; d != "" {
		title += "\n" + d
	}
	if note != "" {
		title += "\n" + note
	}
	p.Title.Text = title
	return &figure{plot: p, style: lg}
}

// fmtSeconds formats a window length in seconds, to the millisecond.
func fmtSeconds(ns int64) string {
	return fmt.Sprintf("%.3f s", float64(ns)/1e9)
}

// draw lays the figure out on c: a margin, then the legend at the bottom in
// as many columns as fit the width (filled column by column, centred), and
// the plot above it.
func (f *figure) draw(c draw.Canvas) {
	c = draw.Crop(c, plotMargin, -plotMargin, plotMargin, -plotMargin)
	if len(f.entries) == 0 {
		f.plot.Draw(c)
		return
	}
	all := f.legendOf(f.entries)
	colW := all.Rectangle(c).Size().X + legendGap
	cols := max(1, min(len(f.entries), int(c.Size().X/colW)))
	rows := (len(f.entries) + cols - 1) / cols
	var columns []plot.Legend
	var height vg.Length
	for i := 0; i < len(f.entries); i += rows {
		l := f.legendOf(f.entries[i:min(i+rows, len(f.entries))])
		height = max(height, l.Rectangle(c).Size().Y)
		columns = append(columns, l)
	}
	f.plot.Draw(draw.Crop(c, 0, 0, height+legendGap, 0))
	left := (c.Size().X - vg.Length(len(columns))*colW + legendGap) / 2
	for j, l := range columns {
		x := left + vg.Length(j)*colW
		l.Draw(draw.Crop(c, x, x+colW-c.Size().X, 0, height-c.Size().Y))
	}
}

// legendOf is a legend in the figure's style holding entries.
func (f *figure) legendOf(entries []legendEntry) plot.Legend {
	l := f.style
	for _, e := range entries {
		l.Add(e.text, e.thumb)
	}
	return l
}

// render draws the figure in format ("svg" or "png"). gonum/plot reports
// impossible drawings by panicking; render turns that into an error rather
// than crash the command.
func (f *figure) render(format string) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			data, err = nil, fmt.Errorf("draw: %v", r)
		}
	}()
	var cw vg.CanvasWriterTo
	switch format {
	case "svg":
		cw = vgsvg.New(plotWidth, plotHeight)
	case "png":
		cw = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(plotDPI))}
	default:
		return nil, fmt.Errorf("unknown format %q", format)
	}
	f.draw(draw.New(cw))
	var buf bytes.Buffer
	if _, err := cw.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encode %s: %w", format, err)
	}
	return buf.Bytes(), nil
}

// logAxis is a logarithmic axis from 10^lo to 10^hi (whole decades), with a
// floor for zero values half a decade below when zero says so. Values are
// drawn at their base-10 logarithm on a linear gonum axis with ticks at the
// decades: plot.LogScale panics on a zero and misplaces the axis label's
// room (it centres it on the arithmetic mean), and the picture is the same.
type logAxis struct {
	lo, hi int
	zero   bool
	label  func(exp int) string // the label of the tick at 10^exp
}

// newLogAxis fits a log axis around the values: whole decades with some room
// around the smallest and largest positive value, and a zero floor if any
// value is zero (or negative, which the features never are). Without a
// positive value it spans 10^emptyLo to 10^(emptyLo+1).
func newLogAxis(vals []float64, emptyLo int, label func(int) string) logAxis {
	ax := logAxis{label: label}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if v > 0 {
			lo, hi = min(lo, v), max(hi, v)
		} else {
			ax.zero = true
		}
	}
	if math.IsInf(lo, 1) {
		ax.lo, ax.hi = emptyLo, emptyLo+1
		return ax
	}
	ax.lo = int(math.Floor(math.Log10(lo / 1.15)))
	ax.hi = int(math.Ceil(math.Log10(hi * 1.15)))
	return ax
}

// floor is where zero values are drawn: half a decade below 10^lo.
func (ax logAxis) floor() float64 { return float64(ax.lo) - 0.5 }

// place maps a value to where it is drawn: its logarithm, zero values on
// the floor.
func (ax logAxis) place(v float64) float64 {
	if v > 0 {
		return math.Log10(v)
	}
	return ax.floor()
}

// apply sets a gonum axis to the range and ticks.
func (ax logAxis) apply(a *plot.Axis) {
	a.Min, a.Max = float64(ax.lo), float64(ax.hi)
	if ax.zero {
		a.Min = ax.floor()
	}
	a.Tick.Marker = ax
}

// Ticks implements plot.Ticker: a labelled tick at every decade, unlabelled
// (minor) ones at 2–9 times it, and "0" at the floor.
func (ax logAxis) Ticks(_, _ float64) []plot.Tick {
	var ticks []plot.Tick
	if ax.zero {
		ticks = append(ticks, plot.Tick{Value: ax.floor(), Label: "0"})
	}
	for e := ax.lo; e <= ax.hi; e++ {
		ticks = append(ticks, plot.Tick{Value: float64(e), Label: ax.label(e)})
		if e < ax.hi {
			for m := 2; m <= 9; m++ {
				ticks = append(ticks, plot.Tick{Value: float64(e) + math.Log10(float64(m))})
			}
		}
	}
	return ticks
}

// decimal writes 10^exp exactly: "0.001", "1", "1000".
func decimal(exp int) string {
	if exp >= 0 {
		return "1" + strings.Repeat("0", exp)
	}
	return "0." + strings.Repeat("0", -exp-1) + "1"
}

// percentLabel labels a share decade as a percentage: 10^-2 is "1%".
func percentLabel(exp int) string { return decimal(exp+2) + "%" }

// durationLabel labels a nanosecond decade with its unit: 10^4 is "10 µs".
func durationLabel(exp int) string {
	units := []string{"ns", "µs", "ms", "s"}
	if exp < 0 {
		return decimal(exp) + " ns"
	}
	u := min(exp/3, len(units)-1)
	return decimal(exp-3*u) + " " + units[u]
}

// runtimeWakeRateFigure is the scatter of CPU share against wake rate, one
// point per thread. Both come from counts over the window (run time and
// wakeups) rather than the rounded JSON shares, so a thread that ran for
// microseconds is not drawn as zero; an analysis without a window falls back
// to the recorded shares and rates.
func runtimeWakeRateFigure(a *Analysis, groups []clusterGroup) *figure {
	window := float64(a.Trace.WindowNs) / 1e9
	share := func(t *Thread) float64 {
		if window > 0 {
			return float64(t.Features.RunNs) / 1e9 / window
		}
		return t.Features.CPUShare
	}
	rate := func(t *Thread) float64 {
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
	xa := newLogAxis(xs, -3, percentLabel)
	ya := newLogAxis(ys, 0, decimal)

	var note string
	switch {
	case xa.zero && ya.zero:
		note = "threads with no CPU time or no wakeups are drawn on the dashed lines marked 0"
	case xa.zero:
		note = "threads with no CPU time are drawn on the dashed line marked 0"
	case ya.zero:
		note = "threads never woken are drawn on the dashed line marked 0"
	}
	f := newFigure(a, "CPU share vs wake rate per thread", note)
	p := f.plot
	p.X.Label.Text = "CPU share (run time / window; 100% = one CPU), log scale"
	p.Y.Label.Text = "wake rate (wakeups/s), log scale"
	p.Add(plotter.NewGrid())
	xa.apply(&p.X)
	ya.apply(&p.Y)
	zeroLine := draw.LineStyle{Color: color.Gray{Y: 0x80}, Width: vg.Points(0.75), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	if xa.zero {
		l := &plotter.Line{XYs: plotter.XYs{{X: xa.floor(), Y: p.Y.Min}, {X: xa.floor(), Y: p.Y.Max}}, LineStyle: zeroLine}
		p.Add(l)
	}
	if ya.zero {
		l := &plotter.Line{XYs: plotter.XYs{{X: p.X.Min, Y: ya.floor()}, {X: p.X.Max, Y: ya.floor()}}, LineStyle: zeroLine}
		p.Add(l)
	}
	for _, g := range groups {
		pts := make(plotter.XYs, 0, len(g.threads))
		for _, t := range g.threads {
			pts = append(pts, plotter.XY{X: xa.place(share(t)), Y: ya.place(rate(t))})
		}
		s := &plotter.Scatter{XYs: pts, GlyphStyle: draw.GlyphStyle{
			Color: clusterColor(g.style), Radius: vg.Points(4), Shape: clusterGlyph(g.style)}}
		if len(pts) > 0 {
			p.Add(s)
		}
		f.addLegend(g.label(), s)
	}
	// Add widened the axes to the data; put the fitted ranges back.
	xa.apply(&p.X)
	ya.apply(&p.Y)
	return f
}

// cdfKind says which per-thread distribution a CDF picture pools.
type cdfKind struct {
	what    string // title
	samples string // plural noun for the legend's count
	xLabel  string
	yLabel  string
	dist    func(*Thread) Dist
}

// runLengthCDF pools the threads' on-CPU run lengths.
func runLengthCDF() cdfKind {
	return cdfKind{
		what:    "Run length per cluster",
		samples: "run",
		xLabel:  "run length, switch-in → switch-out (log scale)",
		yLabel:  "share of the cluster's runs ≤ x (lower bound)",
		dist:    func(t *Thread) Dist { return t.Features.Run },
	}
}

// wakeLatencyCDF pools the threads' waking → running latencies.
func wakeLatencyCDF() cdfKind {
	return cdfKind{
		what:    "Wake latency per cluster",
		samples: "wakeup",
		xLabel:  "wake latency, waking → running (log scale)",
		yLabel:  "share of the cluster's wakeups ≤ x (lower bound)",
		dist:    func(t *Thread) Dist { return t.Features.WakeLatency },
	}
}

// cdfNote says how to read the pooled CDFs.
const cdfNote = "step CDF pooled from each thread's p50/p90/p99/max, weighted by its sample count"

// cdfStep is one step of a pooled CDF: count more samples are ≤ at.
type cdfStep struct {
	at    int64
	count int64
}

// pooledCDF is what the analysis can say about a cluster's distribution
// from its members' Dists: each thread's nearest-rank quantiles guarantee
// that at least ⌈q·n⌉ of its n samples are ≤ its q-quantile, so putting that
// many at p50, p90, p99 and max and pooling the threads by sample count
// gives a step function that is everywhere at or below the cluster's true
// empirical CDF (exactly so where the Dists are exact; within the sketch's
// ±2.2 % in duration where not). It returns the staircase's corners and the
// total number of samples; no samples, no points.
func pooledCDF(threads []*Thread, dist func(*Thread) Dist) (plotter.XYs, int64) {
	var steps []cdfStep
	var total int64
	for _, t := range threads {
		d := dist(t)
		if d.N <= 0 {
			continue
		}
		total += d.N
		prev := int64(0)
		for _, q := range []struct {
			v int64
			p float64
		}{{d.P50, 0.5}, {d.P90, 0.9}, {d.P99, 0.99}, {d.Max, 1}} {
			r := min(max(int64(math.Ceil(q.p*float64(d.N))), 1), d.N) // Sketch.Quantile's rank
			if r > prev {
				steps = append(steps, cdfStep{at: max(q.v, 1), count: r - prev})
				prev = r
			}
		}
	}
	if total == 0 {
		return nil, 0
	}
	slices.SortStableFunc(steps, func(x, y cdfStep) int { return cmp.Compare(x.at, y.at) })
	var pts plotter.XYs
	var cum int64
	for i, s := range steps {
		cum += s.count
		if i+1 < len(steps) && steps[i+1].at == s.at {
			continue // merge steps at the same value
		}
		y0 := 0.0
		if n := len(pts); n > 0 {
			y0 = pts[n-1].Y
		}
		x := float64(s.at)
		pts = append(pts, plotter.XY{X: x, Y: y0}, plotter.XY{X: x, Y: float64(cum) / float64(total)})
	}
	return pts, total
}

// cdfFigure draws one pooled CDF per cluster on a log duration axis.
func cdfFigure(a *Analysis, groups []clusterGroup, kind cdfKind) *figure {
	f := newFigure(a, kind.what, cdfNote)
	p := f.plot
	p.X.Label.Text = kind.xLabel
	p.Y.Label.Text = kind.yLabel
	p.Add(plotter.NewGrid())

	curves := make([]plotter.XYs, len(groups))
	totals := make([]int64, len(groups))
	var xs []float64
	for i, g := range groups {
		curves[i], totals[i] = pooledCDF(g.threads, kind.dist)
		for _, pt := range curves[i] {
			xs = append(xs, pt.X)
		}
	}
	xa := newLogAxis(xs, 3, durationLabel)
	for i, g := range groups {
		for j := range curves[i] {
			curves[i][j].X = xa.place(curves[i][j].X)
		}
		l := &plotter.Line{XYs: curves[i], LineStyle: draw.LineStyle{
			Color: clusterColor(g.style), Width: vg.Points(2), Dashes: clusterDashes(g.style)}}
		if len(curves[i]) > 0 {
			p.Add(l)
		}
		f.addLegend(fmt.Sprintf("%s; %s", g.label(), plural(int(totals[i]), kind.samples)), l)
	}
	xa.apply(&p.X)
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = plot.ConstantTicks{
		{Value: 0, Label: "0"}, {Value: 0.1}, {Value: 0.2}, {Value: 0.3}, {Value: 0.4},
		{Value: 0.5, Label: "0.5"}, {Value: 0.6}, {Value: 0.7}, {Value: 0.8},
		{Value: 0.9, Label: "0.9"}, {Value: 0.99}, {Value: 1, Label: "1"},
	}
	return f
}
