package chart

import (
	"bytes"
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Picture geometry. PNGs are Width × Height at DPI (960 × 576 pixels); SVGs
// have the same size in points.
const (
	Width  = 10 * vg.Inch
	Height = 6 * vg.Inch
	DPI    = 96

	margin    = 10 // points of blank border around the picture
	legendGap = 12 // points between the plot and its legend
)

// Figure is a gonum plot in the house style with its legend entries, drawn
// below the plot rather than on it so the legend never hides a point.
type Figure struct {
	plot    *plot.Plot
	style   plot.Legend // the legend's font and spacing, without entries
	entries []legendEntry
}

// legendEntry is one line of the legend: a thumbnail and its text.
type legendEntry struct {
	text   string
	thumbs []plot.Thumbnailer
}

// New returns an empty figure with the house fonts and title; "\n" in the
// title starts a new line (say what is shown on the first, the data's
// origin and how to read it on the next).
func New(title string) *Figure {
	p := plot.New()
	sans := font.Font{Typeface: "Liberation", Variant: "Sans"}
	p.Title.TextStyle.Font = font.From(sans, 12)
	p.Title.Padding = vg.Points(8)
	p.Title.Text = title
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(sans, 11)
		ax.Tick.Label.Font = font.From(sans, 10)
	}
	lg := plot.NewLegend()
	lg.TextStyle.Font = font.From(sans, 11)
	lg.Top, lg.Left = true, true
	lg.Padding = vg.Points(4)
	lg.ThumbnailWidth = vg.Points(28)
	return &Figure{plot: p, style: lg}
}

// Plot is the gonum plot to add plotters to and to set axes on.
func (f *Figure) Plot() *plot.Plot { return f.plot }

// AddLegend appends a legend entry; entries are laid out in as many columns
// as fit below the plot, filled column by column.
func (f *Figure) AddLegend(text string, thumbs ...plot.Thumbnailer) {
	f.entries = append(f.entries, legendEntry{text, thumbs})
}

// Legend returns the legend texts in order.
func (f *Figure) Legend() []string {
	out := make([]string, len(f.entries))
	for i, e := range f.entries {
		out[i] = e.text
	}
	return out
}

// draw lays the figure out on c: a margin, then the legend at the bottom in
// as many columns as fit the width (filled column by column, centred), and
// the plot above it.
func (f *Figure) draw(c draw.Canvas) {
	c = draw.Crop(c, margin, -margin, margin, -margin)
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
func (f *Figure) legendOf(entries []legendEntry) plot.Legend {
	l := f.style
	for _, e := range entries {
		l.Add(e.text, e.thumbs...)
	}
	return l
}

// Render draws the figure in format ("svg" or "png"); the same figure gives
// the same bytes. gonum/plot reports impossible drawings by panicking;
// Render turns that into an error rather than crash the program.
func (f *Figure) Render(format string) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			data, err = nil, fmt.Errorf("draw: %v", r)
		}
	}()
	var cw vg.CanvasWriterTo
	switch format {
	case "svg":
		cw = vgsvg.New(Width, Height)
	case "png":
		cw = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(Width, Height), vgimg.UseDPI(DPI))}
	default:
		return nil, fmt.Errorf("unknown format %q: want svg or png", format)
	}
	f.draw(draw.New(cw))
	var buf bytes.Buffer
	if _, err := cw.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encode %s: %w", format, err)
	}
	return buf.Bytes(), nil
}
