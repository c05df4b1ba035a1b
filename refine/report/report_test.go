package report

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
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
// At bg=1 the two do not differ; bg=4 was cut short at 3 trials per arm.
var (
	noise   = []float64{1.00, 1.03, 0.97, 1.05, 0.99, 1.02, 0.96, 1.01}
	noise2  = []float64{0.98, 1.01, 1.04, 0.97, 1.00, 1.06, 0.99, 1.02}
	p99CFS  = map[int]float64{0: 0.32, 1: 0.35, 2: 0.39, 4: 0.42}
	p99Prof = map[int]float64{0: 0.43, 1: 0.35, 2: 0.30, 4: 0.29}
	thrCFS  = map[int]float64{0: 98100, 1: 92000, 2: 85500, 4: 81400}
	thrProf = map[int]float64{0: 97200, 1: 96800, 2: 96500, 4: 95900}
)

// harm is the level's non-inferiority check as the lead's engine makes it:
// the loss's upper bound is the interval's bound on the worse side.
func harm(d *Delta, dir stats.Direction, tol float64) {
	d.Tolerance = tol
	d.Worst = d.Effect.Hi
	if dir == stats.HigherIsBetter {
		d.Worst = -d.Effect.Lo
	}
	switch {
	case !finite(d.Worst):
		d.Harm = "too few samples"
	case d.Worst <= tol:
		d.Harm = "harm excluded"
	default:
		d.Harm = "harm not excluded"
	}
}

func fixture() Report {
	rule := stats.Rule{Metric: "p99_ms", Alpha: 0.05, MinEffect: 0.05, Dir: stats.LowerIsBetter}
	r := Report{
		Title:      "refine redis-server (redis-benchmark GET)",
		Profile:    "profiles/redis-server.toml",
		Refined:    "profiles/redis-server.refined.toml",
		Bench:      "redis-benchmark -p 16379 -c 20 -n 200000 -t get --csv",
		Tool:       "redis-benchmark",
		Backend:    "cfs",
		Machine:    "2 CPUs, 24 GiB, kernel 6.18, cgroup v1",
		Started:    time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC),
		Duration:   14*time.Minute + 3*time.Second,
		Trials:     128,
		Stopped:    "converged: round 2 accepted nothing",
		Rule:       rule,
		Guards:     []string{"throughput:-5%", "errors:+0"},
		Noise:      0.083,
		FinalN:     27,
		Detectable: 0.071,
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
		tc, tp := scale(noise2, thrCFS[bg]), scale(noise, thrProf[bg])
		if bg == 4 {
			bc, bp, tc, tp = bc[:3], bp[:3], tc[:3], tp[:3]
		}
		c := stats.Compare(bc, bp, conf)
		d := &Delta{NBase: c.NBase, NCand: c.NCand, Effect: c.Rel, P: c.P}
		harm(d, rule.Dir, rule.MinEffect)
		thr := stats.Compare(tc, tp, conf)
		r.Ladder = append(r.Ladder, Level{
			Bg: bg,
			Cells: []Cell{
				NewCell(conf, map[string][]float64{"p99_ms": bc, "throughput": tc}),
				NewCell(conf, map[string][]float64{"p99_ms": bp, "throughput": tp}),
			},
			Delta: d,
			Guards: []GuardCheck{
				{Metric: "throughput", Change: spct(thr.Rel.Center), Worst: spct(thr.Rel.Lo), Tolerance: "-5%", Vetoed: thr.Rel.Lo < -0.05},
				{Metric: "errors", Change: "+0", Worst: "+0", Tolerance: "+0"},
			},
		})
	}
	for _, bg := range []int{0, 4} {
		a, b := scale(noise, p99CFS[bg]), scale(noise2, p99CFS[bg])
		c := stats.Compare(a, b, conf)
		r.Calibration = append(r.Calibration, Calibration{
			Bg: bg, N: 16,
			CV:   map[string]float64{"p99_ms": stats.CV(append(a, b...)), "throughput": 0.012},
			Line: stats.Line("p99_ms", c) + "  no difference",
		})
	}
	r.Races = []Race{
		{Round: 1, Candidates: 4, Unchanged: 1, Rejected: 1, Rungs: 3,
			Entries: []RaceEntry{
				{Name: `group "redis-server": slice_us 2000 → 1000`, Group: "redis-server", Trials: 6, Shift: -0.012, Gain: 0.012, GainSE: 0.031, Rung: 1, Rank: 3, Of: 4, Verdict: Dropped},
				{Name: `group "redis-server": treatment latency → exclusive`, Group: "redis-server", Trials: 24, Shift: -0.196, Gain: 0.218, GainSE: 0.034, Rung: 3, Rank: 1, Of: 2, Verdict: Accepted,
					Mechanism: "moved: wait per switch -41% (p=0.0003), sibling-busy 0 in the candidate"},
				{Name: `group "bio_*": weight 100 → 50`, Group: "bio_*", Trials: 24, Shift: -0.061, Gain: 0.063, GainSE: 0.029, Rung: 3, Rank: 2, Of: 2, Verdict: Dropped,
					Mechanism: "not moved: preemptions/s +2% (p=0.6)", Suspect: true},
				{Name: `group "io_thd_*": treatment batch → yield`, Group: "io_thd_*", Trials: 6, Shift: 0.08, Gain: -0.077, GainSE: 0.05, Rung: 1, Rank: 4, Of: 4, Verdict: Dropped},
			},
			Stopped: `step: group "redis-server": treatment latency → exclusive, gain +21.8% ± 3.4%`},
		{Round: 2, Candidates: 2, Rungs: 2, Carried: 1,
			Entries: []RaceEntry{
				{Name: `group "redis-server": slice_us 2000 → 3000`, Group: "redis-server", Trials: 12, Shift: -0.03, Gain: 0.031, GainSE: 0.02, Rung: 2, Rank: 1, Of: 1, Verdict: Unconfirmed},
				{Name: `group "bio_*": treatment batch → normal`, Group: "bio_*", Trials: 6, Shift: math.NaN(), Gain: math.NaN(), GainSE: math.NaN(), Rung: 1, Rank: 2, Of: 2, Verdict: Dropped},
				{Name: `group "io_thd_*": treatment batch → normal`, Group: "io_thd_*", Shift: 0.08, Gain: -0.077, GainSE: math.NaN(), Verdict: Carried,
					Reason: "from round 1, its move on an untouched group (groups assumed to add)"},
			},
			Stopped: "no step: the winner's gain +3.1% ± 2% is under the minimum effect"},
	}
	r.Looks = []Look{
		{Index: 1, Of: 2, Alpha: 0.0031, Spent: 0.0031, N: [2]int{14, 14}, Effect: stats.Interval{Lo: -0.262, Center: -0.181, Hi: -0.092}, Confidence: 0.9938, P: 0.0071, Outcome: "continue",
			Reason: "continue: p=0.0071 ≥ nominal α 0.0031"},
		{Index: 2, Of: 2, Alpha: 0.0490, Spent: 0.05, N: [2]int{27, 27}, Effect: stats.Interval{Lo: -0.231, Center: -0.192, Hi: -0.150}, Confidence: 0.902, P: 0.00004, Outcome: "keep",
			Reason: "keep: p=4e-05 < nominal α 0.049, harm excluded at every level measured, every guard holds"},
	}
	for _, s := range []struct {
		what   string
		effect float64
		kept   int
	}{{"no effect", 0, 9}, {"effect = minimum effect", 0.05, 244}, {"effect = 2× minimum", 0.10, 398}} {
		r.Rates = append(r.Rates, Rate{What: s.what, Effect: s.effect, Runs: 400, Keeps: stats.Proportion(s.kept, 400, 0.95)})
	}
	return r
}

func markdown(r Report) string {
	var b bytes.Buffer
	r.Markdown(&b)
	return b.String()
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
		"| bg spinners | stock CFS throughput (p99_ms) | refined throughput (p99_ms) | Δ p99_ms | p | n | harm |",
		"| 2 | 85.93k (0.392) | 96.98k (0.3015) | -22.7% | 0.000155 | 8+8 | harm excluded (worst -20.0% vs 5%) |",
		"| 1 | 92.46k (0.3518) | 97.28k (0.3518) | ~ | 0.817 | 8+8 | harm excluded (worst +4.0% vs 5%) |",
		"**harm not excluded (worst +39.8% vs 5%)**",
		"| 4 | errors | +0 | +0 | +0 | holds |",
		"| 1 of 2 | 14+14 | ~ | [-26.2%, -9.2%] at 99.38% | 0.0071 | 0.0031 | 0.0031 | continue |",
		"| 2 of 2 | 27+27 | -19.2% |",
		"a race ranks by an estimated gain and tests nothing",
		"| noise | σ 0.083 of log p99_ms per trial",
		"| detectable effect | 7.1% (90% power at this noise and final n) |",
		"| no effect (0%) | 400 | 2.25% [1.03%, 4.23%] |",
		"| 4 | throughput | +16.6% | ¹ | -5% | **vetoed** |",
		"¹ too few samples to bound the loss",
		"Closed-loop load",
		"**suspect**: not moved",
	} {
		if !strings.Contains(string(got), must) {
			t.Errorf("REPORT.md lacks %q", must)
		}
	}
	for _, name := range []string{RacePlot, LadderPlot} {
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

// A Δ prints as benchstat prints one: ~ where not significant, never -0%.
func TestShiftCell(t *testing.T) {
	for _, c := range []struct {
		x, p, alpha float64
		want        string
	}{
		{-0.306, 0.000155, 0.05, "-30.6%"},
		{0.35, 0.0001, 0.05, "+35.0%"},
		{-0.02, 0.05, 0.05, "~"},     // p = α is not significant
		{-0.02, 0.0071, 0.0031, "~"}, // held to a look's nominal α
		{-0.19, 0.00004, 0.049, "-19.0%"},
		{-0.00001, 0.001, 0.05, "+0.0%"},
		{math.NaN(), 0.01, 0.05, "—"},
		{0.1, math.NaN(), 0.05, "—"},
	} {
		if got := shift(c.x, c.p, c.alpha); got != c.want {
			t.Errorf("shift(%g, p=%g, α=%g) = %q, want %q", c.x, c.p, c.alpha, got, c.want)
		}
	}
}

// Too small a sample gets one footnote per table, not [-∞ +∞] per line.
func TestFootnote(t *testing.T) {
	for _, c := range []struct {
		name  string
		n     int
		notes []string // footnotes expected, once each
	}{
		{"n=2", 2, []string{"¹ needs ≥ 6 samples for an interval at 95%", "² needs ≥ 3 samples per arm for an interval at 90%"}},
		{"n=5", 5, []string{"¹ needs ≥ 6 samples for an interval at 95%"}},
		{"n=6", 6, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Report{Rule: stats.Rule{Metric: "p99_ms", Alpha: 0.05, MinEffect: 0.05, Dir: stats.LowerIsBetter},
				Arms: []Arm{{Name: "stock CFS"}, {Name: "refined"}}}
			for _, bg := range []int{0, 2, 4} {
				base, cand := scale(noise[:c.n], 0.4), scale(noise2[:c.n], 0.3)
				cmp := stats.Compare(base, cand, 0.90) // a level's Δ: 1 − 2α
				r.Ladder = append(r.Ladder, Level{Bg: bg,
					Cells: []Cell{NewCell(0.95, map[string][]float64{"p99_ms": base}), NewCell(0.95, map[string][]float64{"p99_ms": cand})},
					Delta: &Delta{NBase: c.n, NCand: c.n, Effect: cmp.Rel, P: cmp.P}})
			}
			md := markdown(r)
			if strings.Contains(md, "∞") {
				t.Errorf("an unbounded interval printed:\n%s", md)
			}
			for _, n := range c.notes {
				if k := strings.Count(md, "\n"+n+"\n"); k != 1 {
					t.Errorf("footnote %q printed %d times, want once:\n%s", n, k, md)
				}
			}
			if k := strings.Count(md, "needs ≥"); k != len(c.notes) {
				t.Errorf("%d footnotes, want %d:\n%s", k, len(c.notes), md)
			}
		})
	}
}

// medianNeed agrees with the interval stats.Median gives.
func TestMedianNeed(t *testing.T) {
	for _, conf := range []float64{0.9, 0.95, 0.99} {
		n := medianNeed(conf)
		if stats.Median(noise[:n-1], conf).Finite() || !stats.Median(append(noise, noise2...)[:n], conf).Finite() {
			t.Errorf("medianNeed(%g) = %d disagrees with stats.Median", conf, n)
		}
	}
}

// A count guard prints +0, and nothing prints -0%.
func TestNoNegativeZero(t *testing.T) {
	md := markdown(fixture())
	if !strings.Contains(md, "| 0 | errors | +0 | +0 | +0 | holds |") || !strings.Contains(md, "errors:+0") {
		t.Errorf("errors guard not printed as +0:\n%s", md)
	}
	if m := regexp.MustCompile(`-0(\.0+)?%`).FindString(md); m != "" {
		t.Errorf("report prints %q", m)
	}
}

// doubled finds a word printed twice in a row ("guard guard"), or a bg=N
// token printed twice on one line.
func doubled(md string) []string {
	var bad []string
	letters := regexp.MustCompile(`\pL`)
	for _, line := range strings.Split(md, "\n") {
		prev := ""
		bgs := map[string]bool{}
		for _, w := range strings.Fields(line) {
			w = strings.ToLower(strings.Trim(w, "|*`:,.;()[]\"'"))
			if strings.HasPrefix(w, "bg=") {
				if bgs[w] {
					bad = append(bad, w+" twice in: "+line)
				}
				bgs[w] = true
			}
			if !letters.MatchString(w) {
				prev = ""
				continue
			}
			if w == prev {
				bad = append(bad, `"`+w+" "+w+`" in: `+line)
			}
			prev = w
		}
	}
	return bad
}

func TestDoubledWords(t *testing.T) {
	if got := doubled("a guard guard holds\nbg=1 p99 bg=1\n| a | b |\n| — | — |"); len(got) != 2 {
		t.Fatalf("doubled finds %q, want the guard and the bg=1", got)
	}
	blind := fixture()
	blind.Detectable, blind.Kept, blind.Refined = 0.12, false, ""
	for name, r := range map[string]Report{
		"fixture": fixture(),
		"blind":   blind,
		"minimal": {Rule: stats.Rule{Metric: "throughput", Alpha: 0.05, MinEffect: 0.05, Dir: stats.HigherIsBetter}},
	} {
		for _, d := range doubled(markdown(r)) {
			t.Errorf("%s: %s", name, d)
		}
	}
}

// The report says plainly when the final could not have shown the
// minimum effect.
func TestDetectable(t *testing.T) {
	const plain = "could not have shown the minimum effect"
	for _, c := range []struct {
		detectable float64
		blind      bool
	}{{0.071, false}, {0.10, false}, {0.12, true}, {math.NaN(), false}, {0, false}} {
		r := fixture()
		r.Detectable = c.detectable
		md := markdown(r)
		if strings.Contains(md, plain) != c.blind {
			t.Errorf("detectable %g: says %q: %v, want %v", c.detectable, plain, !c.blind, c.blind)
		}
		if row := strings.Contains(md, "| detectable effect |"); row != (c.detectable > 0) {
			t.Errorf("detectable %g: row shown %v", c.detectable, row)
		}
	}
}

// Every raced candidate appears once, with one verdict.
func TestOneVerdictPerStep(t *testing.T) {
	r := fixture()
	md := markdown(r)
	for _, race := range r.Races {
		for _, e := range race.Entries {
			if k := strings.Count(md, "| "+e.Name+" |"); k != 1 {
				t.Errorf("%s: %d rows, want 1", e.Name, k)
			}
		}
	}
	for _, word := range []string{"promising", "rejected", "screen", "confirm "} {
		if strings.Contains(md, word) {
			t.Errorf("report says %q", word)
		}
	}
	for _, want := range []string{
		"| group \"redis-server\": treatment latency → exclusive | 24 | ≈ -19.6% | +21.8% ± 3.4% | 3 of 3 | **accepted**: the next incumbent |",
		"| group \"io_thd_*\": treatment batch → yield | 6 | ≈ +8.0% | -7.7% ± 5% | 1 of 3 | dropped, rank 4 of 4 |",
		"| group \"redis-server\": slice_us 2000 → 3000 | 12 | ≈ -3.0% | +3.1% ± 2% | 2 of 2 | unconfirmed: held back by the step rule |",
		"Also 1 not run (same kernel state as an arm already measured); 1 refused by lint.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("races lack %q", want)
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
	for _, name := range []string{File, RacePlot + ".svg", RacePlot + ".png", LadderPlot + ".svg", LadderPlot + ".png"} {
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

// A run stopped early (no ladder, no race, no final) still gets a whole
// report.
func TestMinimalReport(t *testing.T) {
	dir := t.TempDir()
	r := Report{Rule: stats.Rule{Metric: "throughput", Alpha: 0.05, MinEffect: 0.05, Dir: stats.HigherIsBetter}, Noise: math.NaN(), Notes: []string{"stopped: the benchmark failed its first trial"}}
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**Nothing kept**: no final test ran", "throughput (higher is better)", "failed its first trial", "## Caveats"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("minimal report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "| noise |") || strings.Contains(string(md), "NaN") {
		t.Errorf("minimal report shows a noise it did not measure:\n%s", md)
	}
	for _, name := range []string{RacePlot + ".svg", LadderPlot + ".png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}
