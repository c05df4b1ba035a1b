package pictures

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/chart"
)

// workloadTrace is the committed recording of testdata/workload/workload.c
// (pid 19560; see testdata/traces/workload-tracefs.json).
const (
	workloadTrace = "../../testdata/traces/workload-tracefs.txt.gz"
	workloadPid   = 19560
)

// analyzeWorkload analyses the committed workload trace.
func analyzeWorkload(t testing.TB) *analyze.Analysis {
	t.Helper()
	a, err := analyze.File(workloadTrace, analyze.Options{Path: "workload-tracefs.txt.gz", Pids: []int{workloadPid}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// svgDoc is what the tests read back from a written SVG: its text elements
// and the style of every path.
type svgDoc struct {
	texts  []string
	styles []string
}

// parseSVG checks that data is well-formed XML with an <svg> root and
// collects its texts and path styles.
func parseSVG(t *testing.T, name string, data []byte) svgDoc {
	t.Helper()
	var doc svgDoc
	dec := xml.NewDecoder(bytes.NewReader(data))
	var inText, root bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", name, err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if !root {
				if e.Name.Local != "svg" {
					t.Fatalf("%s: root element <%s>, want <svg>", name, e.Name.Local)
				}
				root = true
			}
			inText = e.Name.Local == "text"
			if inText {
				doc.texts = append(doc.texts, "")
			}
			if e.Name.Local == "path" {
				for _, a := range e.Attr {
					if a.Name.Local == "style" {
						doc.styles = append(doc.styles, a.Value)
					}
				}
			}
		case xml.CharData:
			if inText {
				doc.texts[len(doc.texts)-1] += string(e)
			}
		case xml.EndElement:
			inText = false
		}
	}
	if !root {
		t.Fatalf("%s: no <svg> element", name)
	}
	return doc
}

// withPrefix counts the texts starting with prefix.
func (d svgDoc) withPrefix(prefix string) int {
	n := 0
	for _, s := range d.texts {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// count counts the occurrences of s in texts.
func count(texts []string, s string) int {
	n := 0
	for _, t := range texts {
		if t == s {
			n++
		}
	}
	return n
}

// pathsColoured counts the paths filled or stroked with c.
func (d svgDoc) pathsColoured(c color.RGBA) int {
	hex := fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B)
	n := 0
	for _, s := range d.styles {
		if strings.Contains(s, "fill:"+hex) || strings.Contains(s, "stroke:"+hex) {
			n++
		}
	}
	return n
}

// expectedCluster is what a test expects of a cluster's legend entry,
// computed from the analysis independently of plot.go.
type expectedCluster struct {
	label   string // "cluster N (class, k threads"
	threads int
	runs    int64 // samples behind the run-length curve
	wakes   int64 // samples behind the wake-latency curve
}

func expectedClusters(a *analyze.Analysis) []expectedCluster {
	var out []expectedCluster
	for _, c := range a.Clusters {
		e := expectedCluster{}
		for _, th := range a.Threads {
			if th.Cluster == c.ID {
				e.threads++
				e.runs += th.Features.Run.N
				e.wakes += th.Features.WakeLatency.N
			}
		}
		noun := "threads"
		if e.threads == 1 {
			noun = "thread"
		}
		e.label = fmt.Sprintf("cluster %d (%s, %d %s)", c.ID, c.Class, e.threads, noun)
		out = append(out, e)
	}
	return out
}

// readPlots reads every file WritePlots reported, by base name.
func readPlots(t *testing.T, paths []string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = data
	}
	return out
}

func TestWritePlotsWorkload(t *testing.T) {
	a := analyzeWorkload(t)
	clusters := expectedClusters(a)
	if len(clusters) < 4 {
		t.Fatalf("workload has %d clusters; the test wants several", len(clusters))
	}
	dir := filepath.Join(t.TempDir(), "new", "plots") // created, parents too
	paths, err := Write(a, dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, name := range []string{RuntimeWakeRate, RunLengthCDF, WakeLatencyCDF} {
		for _, ext := range []string{"svg", "png"} {
			want = append(want, filepath.Join(dir, name+"."+ext))
		}
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("wrote %v, want %v", paths, want)
	}
	files := readPlots(t, paths)
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(want) {
		t.Errorf("%d entries in the directory, want exactly the %d pictures: %v", len(ents), len(want), ents)
	}

	t.Run("svg", func(t *testing.T) {
		for _, name := range []string{RuntimeWakeRate, RunLengthCDF, WakeLatencyCDF} {
			doc := parseSVG(t, name, files[name+".svg"])
			if n := doc.withPrefix("cluster "); n != len(clusters) {
				t.Errorf("%s: %d legend entries, want one per cluster (%d)", name, n, len(clusters))
			}
			for i, c := range clusters {
				if doc.withPrefix(c.label) != 1 {
					t.Errorf("%s: no legend entry %q", name, c.label)
				}
				// Scatter: one marker per thread plus the legend's; CDFs: one
				// curve per cluster with samples plus the legend's.
				want := c.threads + 1
				switch name {
				case RunLengthCDF:
					want = 1 + min(1, int(c.runs))
				case WakeLatencyCDF:
					want = 1 + min(1, int(c.wakes))
				}
				if got := doc.pathsColoured(chart.Color(i)); got != want {
					t.Errorf("%s: %d shapes in cluster %d's colour, want %d", name, got, i, want)
				}
			}
			title := 0
			window := fmt.Sprintf(" — workload-tracefs.txt.gz, %.3f s window", float64(a.Trace.WindowNs)/1e9)
			for _, s := range doc.texts {
				if strings.HasSuffix(s, window) {
					title++
				}
			}
			if title != 1 {
				t.Errorf("%s: title does not name the trace and its window: %q", name, doc.texts)
			}
		}
		scatter := parseSVG(t, "scatter", files[RuntimeWakeRate+".svg"])
		for _, label := range []string{"CPU share (run time / window; 100% = one CPU), log scale", "wake rate (wakeups/s), log scale", "1%", "100"} {
			if !slices.Contains(scatter.texts, label) {
				t.Errorf("scatter lacks the text %q (axis label or decade tick)", label)
			}
		}
		cdf := parseSVG(t, "cdf", files[RunLengthCDF+".svg"])
		for _, label := range []string{"1 ms", "10 µs", "0.5", "0.9"} {
			if !slices.Contains(cdf.texts, label) {
				t.Errorf("run-length CDF lacks the tick %q", label)
			}
		}
	})

	t.Run("png", func(t *testing.T) {
		for _, name := range []string{RuntimeWakeRate, RunLengthCDF, WakeLatencyCDF} {
			img, err := png.Decode(bytes.NewReader(files[name+".png"]))
			if err != nil {
				t.Fatalf("%s.png: %v", name, err)
			}
			b := img.Bounds()
			if b.Dx() != 960 || b.Dy() != 576 {
				t.Errorf("%s.png is %dx%d, want 960x576", name, b.Dx(), b.Dy())
			}
			// The legend is at the bottom; above it, every cluster with
			// data must have drawn pixels of exactly its colour.
			counts := map[color.RGBA]int{}
			for y := b.Min.Y; y < b.Min.Y+b.Dy()*4/5; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					r, g, bl, al := img.At(x, y).RGBA()
					counts[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), uint8(al >> 8)}]++
				}
			}
			if counts[color.RGBA{0xff, 0xff, 0xff, 0xff}] == b.Dx()*b.Dy()*4/5 {
				t.Fatalf("%s.png is blank", name)
			}
			for i, c := range clusters {
				empty := (name == RunLengthCDF && c.runs == 0) || (name == WakeLatencyCDF && c.wakes == 0)
				if got := counts[chart.Color(i)]; !empty && got < 5 {
					t.Errorf("%s.png: %d pixels of cluster %d's colour %v in the plot area", name, got, i, chart.Color(i))
				}
			}
		}
	})

	t.Run("deterministic", func(t *testing.T) {
		// A second analysis of the trace draws the same bytes.
		again, err := Write(analyzeWorkload(t), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for base, data := range readPlots(t, again) {
			if !bytes.Equal(data, files[base]) {
				t.Errorf("%s differs between runs", base)
			}
		}
	})

	t.Run("decoded from JSON", func(t *testing.T) {
		// The JSON holds quantiles, not distributions: the CDFs cannot be
		// drawn from it, and nothing is written.
		var buf bytes.Buffer
		if err := a.Write(&buf); err != nil {
			t.Fatal(err)
		}
		var decoded analyze.Analysis
		if err := json.Unmarshal(buf.Bytes(), &decoded); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "plots")
		_, err := Write(&decoded, dir)
		if !errors.Is(err, ErrNoDistributions) {
			t.Fatalf("error %v, want ErrNoDistributions", err)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("failed but created %s", dir)
		}
	})
}

func TestWritePlotsFormats(t *testing.T) {
	a := analyzeWorkload(t)
	cases := []struct {
		formats []string
		exts    []string
		err     string
	}{
		{[]string{"svg"}, []string{".svg"}, ""},
		{[]string{"png", "png"}, []string{".png"}, ""},
		{[]string{"jpg"}, nil, `plot format "jpg": want svg or png`},
		{[]string{"svg", "SVG"}, nil, `plot format "SVG"`},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "plots")
		paths, err := Write(a, dir, c.formats...)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.formats, err, c.err)
			}
			if _, serr := os.Stat(dir); serr == nil {
				t.Errorf("%v: failed but created %s", c.formats, dir)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.formats, err)
			continue
		}
		if len(paths) != 3 {
			t.Errorf("%v: wrote %v, want 3 pictures", c.formats, paths)
		}
		for _, p := range paths {
			if !slices.Contains(c.exts, filepath.Ext(p)) {
				t.Errorf("%v: wrote %s", c.formats, p)
			}
		}
	}
}

// TestWritePlotsZeros draws threads that never ran or were never woken: they
// sit on a floor marked 0 (a log axis has no 0), the title says so, and a
// cluster without samples keeps its legend entry.
func TestWritePlotsZeros(t *testing.T) {
	thread := func(tid int32, cluster int, runNs, wakeups int64, run, lat analyze.Dist) analyze.Thread {
		return analyze.Thread{Tid: tid, Comm: fmt.Sprintf("t-%d", tid), Cluster: cluster,
			Features: analyze.Features{RunNs: runNs, Wakeups: wakeups, Run: run, WakeLatency: lat}}
	}
	busy := dist(2e6, 2e6, 2e6, 2e6, 2e6, 3e6, 3e6, 3e6, 3e6, 4e6)
	none := dist()
	cases := []struct {
		name    string
		threads []analyze.Thread
		notes   []string
		zeros   int // ticks labelled 0 on the scatter
	}{
		{"no runtime and no wakeups", []analyze.Thread{
			thread(1, 1, 5e8, 100, busy, busy),
			thread(2, 2, 0, 0, none, none),
		}, []string{"threads with no CPU time or no wakeups are drawn on the dashed lines marked 0"}, 2},
		{"never woken", []analyze.Thread{
			thread(1, 1, 5e8, 0, busy, none),
			thread(2, 2, 1e3, 0, dist(1e3), none),
		}, []string{"threads never woken are drawn on the dashed line marked 0"}, 1},
		{"nothing is zero", []analyze.Thread{
			thread(1, 1, 5e8, 10, busy, busy),
		}, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &analyze.Analysis{Trace: analyze.TraceMeta{Path: "/x/synthetic.pftrace", WindowNs: 1e9}, Threads: c.threads}
			for _, th := range c.threads {
				a.Clusters = append(a.Clusters, analyze.Cluster{ID: th.Cluster, Class: analyze.ClassSporadic})
			}
			paths, err := Write(a, t.TempDir(), "svg")
			if err != nil {
				t.Fatal(err)
			}
			files := readPlots(t, paths)
			scatter := parseSVG(t, "scatter", files[RuntimeWakeRate+".svg"])
			for _, n := range c.notes {
				if !slices.Contains(scatter.texts, n) {
					t.Errorf("scatter title lacks the note %q: %q", n, scatter.texts)
				}
			}
			if got := count(scatter.texts, "0"); got != c.zeros {
				t.Errorf("%d ticks labelled 0, want %d", got, c.zeros)
			}
			if scatter.withPrefix("cluster ") != len(c.threads) {
				t.Errorf("scatter legend: %q", scatter.texts)
			}
			lat := parseSVG(t, "latency", files[WakeLatencyCDF+".svg"])
			for _, th := range c.threads {
				label := fmt.Sprintf("cluster %d (sporadic, 1 thread); %d wakeup", th.Cluster, th.Features.WakeLatency.N)
				if lat.withPrefix(label) != 1 {
					t.Errorf("latency legend lacks %q: %q", label, lat.texts)
				}
			}
		})
	}
}

// dist is the distribution of samples, as analyze summarises it.
func dist(samples ...int64) analyze.Dist {
	var s analyze.Sketch
	for _, v := range samples {
		s.Add(v)
	}
	return s.Dist()
}

// TestPooledCDF checks the pooled curve against the samples behind it: the
// empirical CDF exactly while every thread's sketch is exact, and within the
// sketch's ±2.2 % in duration once folded; it ends at 1 at the largest
// sample and never falls.
func TestPooledCDF(t *testing.T) {
	// spread returns n deterministic samples from lo spread over a few decades.
	spread := func(n int, lo int64) []int64 {
		out := make([]int64, n)
		x := uint64(12345)
		for i := range out {
			x = x*6364136223846793005 + 1442695040888963407
			out[i] = lo + int64(math.Exp(float64(x>>40)/float64(1<<24)*9))
		}
		return out
	}
	cases := []struct {
		name    string
		threads [][]int64
	}{
		{"one sample", [][]int64{{5000}}},
		{"two samples", [][]int64{{1000, 3000}}},
		{"exact, ties", [][]int64{{7, 7, 7, 9, 100, 100, 2000}}},
		{"exact, pooled", [][]int64{{10, 20, 30}, {15, 25, 35, 45, 55}, {1e6}}},
		{"folded", [][]int64{spread(1000, 1000)}},
		{"folded and exact pooled", [][]int64{spread(5000, 100), {50, 60}, spread(40, 1e6)}},
		{"a thread without samples", [][]int64{{}, {300, 400}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var threads []*analyze.Thread
			var all []int64
			folded := false
			for _, samples := range c.threads {
				d := dist(samples...)
				folded = folded || (d.N > 0 && !d.Exact)
				all = append(all, samples...)
				threads = append(threads, &analyze.Thread{Features: analyze.Features{Run: d}})
			}
			pts, total, err := pooledCDF(threads, func(t *analyze.Thread) analyze.Dist { return t.Features.Run })
			if err != nil {
				t.Fatal(err)
			}
			if total != int64(len(all)) {
				t.Fatalf("total %d, want %d samples", total, len(all))
			}
			slices.Sort(all)
			empirical := func(x float64) float64 {
				n, _ := slices.BinarySearch(all, int64(math.Floor(x))+1)
				return float64(n) / float64(len(all))
			}
			tol := 1.0
			if folded {
				tol = 1.023
			}
			for i, p := range pts {
				if i > 0 && (p.X < pts[i-1].X || p.Y < pts[i-1].Y) {
					t.Errorf("curve falls back at %d: %v after %v", i, p, pts[i-1])
				}
				if i%2 == 0 {
					continue // the foot of a step: the share below its value
				}
				if hi, lo := empirical(p.X*tol), empirical(p.X/tol-1); p.Y > hi+1e-12 || p.Y < lo-1e-12 {
					t.Errorf("at %.0f ns the curve says %.4f ≤, the samples %.4f to %.4f", p.X, p.Y, lo, hi)
				}
				if !folded && p.Y != empirical(p.X) {
					t.Errorf("exact: at %.0f ns the curve says %.4f ≤, the samples %.4f", p.X, p.Y, empirical(p.X))
				}
			}
			last := pts[len(pts)-1]
			if last.Y != 1 || int64(last.X) != all[len(all)-1] {
				t.Errorf("curve ends at %v, want (%d, 1)", last, all[len(all)-1])
			}
		})
	}
	if pts, total, err := pooledCDF([]*analyze.Thread{{}}, func(t *analyze.Thread) analyze.Dist { return t.Features.Run }); pts != nil || total != 0 || err != nil {
		t.Errorf("no samples: %v, %d, %v; want no curve", pts, total, err)
	}
	noSketch := &analyze.Thread{Comm: "x", Tid: 7, Features: analyze.Features{Run: analyze.Dist{N: 3, P50: 1, P90: 2, P99: 3, Max: 3}}}
	if _, _, err := pooledCDF([]*analyze.Thread{noSketch}, func(t *analyze.Thread) analyze.Dist { return t.Features.Run }); !errors.Is(err, ErrNoDistributions) || !strings.Contains(err.Error(), "thread x/7") {
		t.Errorf("a Dist without its sketch: %v, want ErrNoDistributions naming x/7", err)
	}
}

func TestWritePlotsErrors(t *testing.T) {
	a := analyzeWorkload(t)
	cases := []struct {
		name  string
		setup func(t *testing.T) (dir string)
		a     *analyze.Analysis
		err   string
	}{
		{"dir is a file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "plots")
			if err := os.WriteFile(p, []byte("keep me"), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, a, "exists and is not a directory"},
		{"parent is a file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(p, []byte("keep me"), 0o644); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(p, "plots")
		}, a, "not a directory"},
		{"unwritable dir", func(t *testing.T) string {
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
			if writable(dir) {
				// Root ignores the mode; sysfs refuses root too.
				dir = "/sys"
				if _, err := os.Stat(dir); err != nil || writable(dir) {
					t.Skip("no unwritable directory available")
				}
			}
			return dir
		}, a, "runtime-wakerate.svg"},
		{"picture name taken by a directory", func(t *testing.T) string {
			dir := t.TempDir()
			taken := filepath.Join(dir, WakeLatencyCDF+".png")
			if err := os.MkdirAll(filepath.Join(taken, "inside"), 0o755); err != nil {
				t.Fatal(err)
			}
			return dir
		}, a, WakeLatencyCDF + ".png"},
		{"no threads", func(t *testing.T) string { return t.TempDir() }, &analyze.Analysis{}, "no threads"},
		{"empty path", func(t *testing.T) string { return "" }, a, "empty path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.setup(t)
			_, err := Write(c.a, dir)
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want one containing %q", err, c.err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if dir == "" || dir == "/sys" {
				return
			}
			if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
				if data, _ := os.ReadFile(dir); string(data) != "keep me" {
					t.Errorf("the file in the way was changed: %q", data)
				}
				return
			}
			// Nothing half-written: no temporary files, and every picture
			// there is complete.
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("temporary file left behind: %s", e.Name())
				}
				if strings.HasSuffix(e.Name(), ".png") && !e.IsDir() {
					f, err := os.Open(filepath.Join(dir, e.Name()))
					if err != nil {
						t.Fatal(err)
					}
					if _, err := png.Decode(f); err != nil {
						t.Errorf("%s is not a whole PNG: %v", e.Name(), err)
					}
					f.Close()
				}
			}
		})
	}
}

// writable reports whether a file can be created in dir.
func writable(dir string) bool {
	f, err := os.CreateTemp(dir, "probe-*")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}
