package chart

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLines draws a metric per step for two series (one a step function,
// one log-scaled with a zero) and checks the legend, both formats, and that
// the same chart renders to the same bytes twice.
func TestLines(t *testing.T) {
	chartOf := func() *Figure {
		return Lines("p99 latency per refine step\nsynthetic",
			Axis{Label: "step", Min: 0, Max: 4},
			Axis{Label: "p99 (log scale)", Log: true, LogLabel: Duration},
			Series{Label: "baseline", Points: []Point{{0, 2e6}, {1, 1.8e6}, {2, 1.9e6}, {3, 2.1e6}}, Step: true},
			Series{Label: "profile", Points: []Point{{0, 2e6}, {1, 9e5}, {2, 0}, {3, 4e5}}, Marks: true},
			Series{Label: "not measured"},
		)
	}
	f := chartOf()
	if got := f.Legend(); !slices.Equal(got, []string{"baseline", "profile", "not measured"}) {
		t.Errorf("legend %q", got)
	}
	svg, err := f.Render("svg")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"p99 latency per refine step", "baseline", "1 ms", "0", "step"} {
		if !bytes.Contains(svg, []byte(">"+want+"<")) {
			t.Errorf("SVG lacks the text %q", want)
		}
	}
	again, err := chartOf().Render("svg")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(svg, again) {
		t.Error("the same chart rendered to different SVG bytes")
	}
	pngData, err := f.Render("png")
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(pngData))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 960 || b.Dy() != 576 {
		t.Errorf("PNG %dx%d, want 960x576", b.Dx(), b.Dy())
	}
	if _, err := f.Render("gif"); err == nil || !strings.Contains(err.Error(), "gif") {
		t.Errorf("gif: %v", err)
	}
}

func TestWriteFigures(t *testing.T) {
	f := Lines("t", Axis{Label: "x"}, Axis{Label: "y"}, Series{Label: "s", Points: []Point{{0, 1}, {1, 2}}})
	dir := filepath.Join(t.TempDir(), "a", "b")
	paths, err := Write(dir, []Named{{Name: "one", Figure: f}}, "png", "svg", "png")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "one.png"), filepath.Join(dir, "one.svg")}
	if !slices.Equal(paths, want) {
		t.Errorf("wrote %v, want %v", paths, want)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Write(file, []Named{{Name: "one", Figure: f}}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("into a file: %v", err)
	}
	if _, err := Write(dir, nil, "jpg"); err == nil || !strings.Contains(err.Error(), `"jpg"`) {
		t.Errorf("jpg: %v", err)
	}
}

func TestDuration(t *testing.T) {
	for exp, want := range map[int]string{-1: "0.1 ns", 0: "1 ns", 4: "10 µs", 6: "1 ms", 9: "1 s", 11: "100 s"} {
		if got := Duration(exp); got != want {
			t.Errorf("Duration(%d) = %q, want %q", exp, got, want)
		}
	}
	if Percent(-2) != "1%" || Decimal(-3) != "0.001" {
		t.Errorf("Percent(-2) = %q, Decimal(-3) = %q", Percent(-2), Decimal(-3))
	}
}
