package report

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/refine/stats"
)

func scale(x []float64, f float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * f
	}
	return y
}

// Trial values shaped like the hand-run in issue 16 (redis-benchmark GET,
// CFS, spinners in a cpu.shares=2 cgroup): stock CFS loses throughput and
// tail under background load, the profile holds it but is worse at idle.
var (
	noise   = []float64{1.00, 1.03, 0.97, 1.05, 0.99, 1.02, 0.96, 1.01}
	noise2  = []float64{0.98, 1.01, 1.04, 0.97, 1.00, 1.06, 0.99, 1.02}
	p99CFS  = map[int]float64{0: 0.32, 1: 0.35, 2: 0.39, 4: 0.42}
	p99Prof = map[int]float64{0: 0.43, 1: 0.31, 2: 0.30, 4: 0.29}
	thrCFS  = map[int]float64{0: 98100, 1: 92000, 2: 85500, 4: 81400}
	thrProf = map[int]float64{0: 97200, 1: 96800, 2: 96500, 4: 95900}
)

func fixture() Report {
	rule := stats.Rule{Metric: "p99_ms", Alpha: 0.05, MinEffect: 0.05, Dir: stats.LowerIsBetter}
	r := Report{
		Title:    "refine redis-server (redis-benchmark GET)",
		Profile:  "profiles/redis-server.toml",
		Refined:  "profiles/redis-server.refined.toml",
		Bench:    "redis-benchmark -p 16379 -c 20 -n 200000 -t get --csv",
		Tool:     "redis-benchmark",
		Backend:  "cfs",
		Machine:  "2 CPUs, 24 GiB, kernel 6.18, cgroup v1",
		Started:  time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC),
		Duration: 14*time.Minute + 3*time.Second,
		Trials:   128,
		Stopped:  "converged: a full round accepted nothing",
		Rule:     rule,
		Guards:   []string{"throughput:-5%", "errors:0%"},
		Arms: []Arm{
			{Name: "stock CFS", Desc: "no profile"},
			{Name: "refined", Desc: "`profiles/redis-server.refined.toml` (sha256 1f2e…)"},
		},
		Columns: []string{"throughput", "p99_ms"},
		Kept:    true,
		Caveats: []string{"The redis-server threads were not pinned in the stock arm; the refined arm's exclusive core is the kubelet static-policy equivalent."},
		Notes:   []string{"trial 17 re-run after the benchmark timed out (ledger line 40)"},
	}
	conf := 1 - rule.Alpha
	for _, bg := range []int{0, 1, 2, 4} {
		bc, bp := scale(noise, p99CFS[bg]), scale(noise2, p99Prof[bg])
		cmp := stats.Compare(bc, bp, conf)
		d := stats.Decide(bc, bp, rule)
		r.Ladder = append(r.Ladder, Level{
			Bg: bg,
			Cells: []Cell{
				NewCell(conf, map[string][]float64{"p99_ms": bc, "throughput": scale(noise2, thrCFS[bg])}),
				NewCell(conf, map[string][]float64{"p99_ms": bp, "throughput": scale(noise, thrProf[bg])}),
			},
			Delta: NewDelta(cmp, d.Verdict.String()),
		})
		r.Final = append(r.Final, "bg="+strconv.Itoa(bg)+"  "+d.Reason)
	}
	for _, bg := range []int{0, 4} {
		a, b := scale(noise, p99CFS[bg]), scale(noise2, p99CFS[bg])
		d := stats.Decide(a, b, rule)
		r.Calibration = append(r.Calibration, Calibration{
			Bg: bg, N: 16,
			CV:   map[string]float64{"p99_ms": stats.CV(append(a, b...)), "throughput": 0.012},
			Line: d.Reason, FalseAccept: d.Accepted(),
		})
	}
	for _, eff := range []float64{0, 0.10, 0.20} {
		r.Rates = append(r.Rates, stats.Simulate(stats.Sim{Rule: rule, K: 4, Screen: 6, Confirm: 8, CV: 0.03, Effect: eff, Rounds: 300, Seed: 16}))
	}
	steps := []struct {
		name, group string
		f           float64
		mech        string
		suspect     bool
	}{
		{"redis-server: treatment latency → exclusive", "redis-server", 0.80, "moved: wait per switch -41% (p=0.0003), sibling-busy 0 in the candidate", false},
		{"redis-server: slice_us 2000 → 1000", "redis-server", 0.98, "", false},
		{"bio_*: weight 100 → 50", "bio_*", 0.90, "not moved: preemptions/s +2% (p=0.6)", true},
		{"io_thd_*: treatment batch → yield", "io_thd_*", 0.5, "", false},
	}
	for i, s := range steps {
		base := scale(noise, 0.40)
		cand := scale(noise2, 0.40*s.f)
		if i == 3 { // a screen cut short by the budget: too few pairs
			base, cand = base[:3], cand[:3]
		}
		d := stats.Decide(base, cand, rule)
		_, g := stats.Regresses(scale(noise, 95000), scale(noise2, 95000*(2-s.f)), stats.HigherIsBetter, stats.Relative, 0.05, rule.Alpha)
		stage := "confirm"
		if i == 3 {
			stage = "screen"
		}
		r.Steps = append(r.Steps, Step{
			Round: i/2 + 1, Stage: stage, Name: s.name, Group: s.group, Bg: 2,
			Base: d.Comparison.Base, Cand: d.Comparison.Cand,
			Accepted: d.Accepted(), Verdict: d.Verdict.String(), Line: d.Reason,
			Guards: []string{"throughput  " + g.Reason}, Mechanism: s.mech, Suspect: s.suspect,
		})
	}
	return r
}

func TestGolden(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, fixture()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, filepath.Join("testdata", File), got)
	for _, must := range []string{
		"| bg spinners | stock CFS throughput (p99_ms) | refined throughput (p99_ms) | Δ p99_ms | p | n |",
		"| 4 | 81.81k (0.4221) | 96.38k (0.2914) | -30.6% [-33.0%, -28.2%] | 0.000155 | 8+8 |",
		"Closed-loop load",
		"**suspect**: not moved",
		"need ≥ 4 samples per arm",
	} {
		if !strings.Contains(string(got), must) {
			t.Errorf("REPORT.md lacks %q", must)
		}
	}
	for _, name := range []string{StepPlot, LadderPlot} {
		svg, err := os.ReadFile(filepath.Join(dir, name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(bytes.NewReader(svg))
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s.svg is not well-formed XML: %v", name, err)
			}
		}
		f, err := os.Open(filepath.Join(dir, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() < 100 {
			t.Fatalf("%s.png: %v", name, err)
		}
	}
}

func TestDeterministicBytes(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := Write(d, fixture()); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{File, StepPlot + ".svg", StepPlot + ".png", LadderPlot + ".svg", LadderPlot + ".png"} {
		x, err1 := os.ReadFile(filepath.Join(a, name))
		y, err2 := os.ReadFile(filepath.Join(b, name))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s: two writes of the same report differ", name)
		}
	}
}

func TestBadReportWritesNothing(t *testing.T) {
	for name, r := range map[string]Report{
		"no metric":     {},
		"no direction":  {Rule: stats.Rule{Metric: "p99_ms"}},
		"ragged ladder": {Rule: stats.Rule{Metric: "p99_ms", Dir: stats.LowerIsBetter}, Arms: []Arm{{Name: "a"}, {Name: "b"}}, Ladder: []Level{{Bg: 0, Cells: []Cell{{}}}}},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		err := Write(dir, r)
		if err == nil || !strings.Contains(err.Error(), File) {
			t.Errorf("%s: error %v, want one naming %s", name, err, File)
		}
		if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
			t.Errorf("%s: %s was created", name, dir)
		}
	}
	// A file where the directory should be: a one-line error, no REPORT.md.
	dir := t.TempDir()
	blocker := filepath.Join(dir, "report")
	os.WriteFile(blocker, []byte("x"), 0o644)
	if err := Write(blocker, fixture()); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("writing into a file: error %v", err)
	}
}

// A run stopped early (no ladder, no steps) still gets a whole report.
func TestMinimalReport(t *testing.T) {
	dir := t.TempDir()
	r := Report{Rule: stats.Rule{Metric: "throughput", Alpha: 0.05, MinEffect: 0.05, Dir: stats.HigherIsBetter}, Notes: []string{"stopped: calibration found the benchmark too noisy"}}
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**Nothing kept**", "throughput (higher is better)", "too noisy", "## Caveats"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("minimal report lacks %q:\n%s", want, md)
		}
	}
	for _, name := range []string{StepPlot + ".svg", LadderPlot + ".png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}
