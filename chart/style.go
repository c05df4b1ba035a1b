package chart

import (
	"image/color"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Color is the colour of the series drawn i-th: the Okabe–Ito palette (told
// apart with the common colour-vision deficiencies), without its yellow
// (unreadable on white) and black (the axes'), plus a dark red.
func Color(i int) color.RGBA {
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

// Glyph is the marker of the series drawn i-th. All are filled, so each
// shows its colour clearly even where points crowd; with five shapes and
// seven colours, colour and shape together repeat only after 35 series.
func Glyph(i int) draw.GlyphDrawer {
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

// Dashes is the line pattern of the series drawn i-th, so curves of similar
// colour or on top of each other can still be told apart.
func Dashes(i int) []vg.Length {
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

// LineStyle is the house line of the series drawn i-th: its colour and
// dashes, 2 points wide.
func LineStyle(i int) draw.LineStyle {
	return draw.LineStyle{Color: Color(i), Width: vg.Points(2), Dashes: Dashes(i)}
}

// GlyphStyle is the house marker of the series drawn i-th.
func GlyphStyle(i int) draw.GlyphStyle {
	return draw.GlyphStyle{Color: Color(i), Radius: vg.Points(4), Shape: Glyph(i)}
}
