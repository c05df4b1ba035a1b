package stats

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func scaled(x []float64, f float64) []float64 {
	y := slices.Clone(x)
	for i := range y {
		y[i] *= f
	}
	return y
}

var base8 = []float64{1.00, 1.02, 0.98, 1.05, 0.97, 1.01, 1.03, 0.99}

func TestDecide(t *testing.T) {
	lower := Rule{Metric: "p99_ms", Alpha: 0.05, MinEffect: 0.05, Dir: LowerIsBetter}
	higher := Rule{Metric: "throughput", Alpha: 0.05, MinEffect: 0.05, Dir: HigherIsBetter}
	for _, tc := range []struct {
		name       string
		base, cand []float64
		rule       Rule
		want       Verdict
		reason     string
	}{
		{"20% lower latency", base8, scaled(base8, 0.8), lower, Better, "accepted"},
		{"20% higher latency", base8, scaled(base8, 1.2), lower, Worse, "worse"},
		{"20% more throughput", base8, scaled(base8, 1.2), higher, Better, "accepted"},
		{"significant but only 3%", base8, scaled(base8, 0.97), lower, NoDifference, "does not clear 5% lower"},
		// C 8v8 of TestCompareAgainstR: p=0.0047 but the shift interval
		// [-7.9%, -1.9%] crosses -5%.
		{"significant, interval crosses the bound", base8, []float64{0.951, 0.966, 0.932, 0.987, 0.944, 1.004, 0.958, 0.921}, lower, NoDifference, "does not clear"},
		{"same values", base8, base8, lower, NoDifference, "not significant"},
		{"n=3", base8[:3], scaled(base8[:3], 0.5), lower, TooFewSamples, "need ≥ 4 samples per arm"},
		// n=4: the median intervals are unbounded at 95%, but the shift's
		// interval is not (P(U=0) = 1/70 ≤ 0.025), and p = 0.029.
		{"n=4 separated", base8[:4], scaled(base8[:4], 0.5), lower, Better, "accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.base, tc.cand, tc.rule)
			if d.Verdict != tc.want || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("verdict %v, want %v; reason %q should contain %q", d.Verdict, tc.want, d.Reason, tc.reason)
			}
			if !strings.HasPrefix(d.Reason, tc.rule.Metric+"  ") || !strings.Contains(d.Reason, "n=") || !strings.Contains(d.Reason, "p=") {
				t.Errorf("reason %q is not a benchstat-style line", d.Reason)
			}
			if d.Accepted() != (tc.want == Better) {
				t.Errorf("Accepted() = %v for %v", d.Accepted(), d.Verdict)
			}
		})
	}
}

func TestDecisionLine(t *testing.T) {
	d := Decide(base8, scaled(base8, 0.8), Rule{Metric: "p99_ms", Alpha: 0.05, MinEffect: 0.05, Dir: LowerIsBetter})
	want := "p99_ms  1.005 [0.97 1.03] → 0.804 [0.776 0.824]  n=8+8  Δ -20.0% [-22.4% -17.6%] (95%)  p=0.000155  accepted: p=0.000155 < α=0.05 and the whole interval is ≥ 5% lower"
	if d.Reason != want {
		t.Errorf("line\n got %s\nwant %s", d.Reason, want)
	}
}

// Holm's example (also Wikipedia's "Holm–Bonferroni method"): p = 0.01,
// 0.04, 0.03, 0.005 at α = 0.05 rejects H1 and H4. R agrees:
// p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02.
func TestHolm(t *testing.T) {
	for _, tc := range []struct {
		p     []float64
		alpha float64
		want  []bool
	}{
		{[]float64{0.01, 0.04, 0.03, 0.005}, 0.05, []bool{true, false, false, true}},
		// R: p.adjust(c(0.01, 0.02, 0.03, 0.04), "holm") = 0.04 0.06 0.06 0.06.
		{[]float64{0.01, 0.02, 0.03, 0.04}, 0.05, []bool{true, false, false, false}},
		{[]float64{0.001, 0.01, 0.02, 0.04}, 0.05, []bool{true, true, true, true}},
		// Step-down stops at the first failure even if a later p is below
		// its own level.
		{[]float64{0.03, 0.04}, 0.05, []bool{false, false}},
		{[]float64{0.02, 0.024}, 0.05, []bool{true, true}},
		{nil, 0.05, []bool{}},
	} {
		if got := Holm(tc.p, tc.alpha); !slices.Equal(got, tc.want) {
			t.Errorf("Holm(%v, %g) = %v, want %v", tc.p, tc.alpha, got, tc.want)
		}
	}
}

func TestDecideRound(t *testing.T) {
	r := Rule{Metric: "p99_ms", Alpha: 0.05, MinEffect: 0.05, Dir: LowerIsBetter}
	// One real 20% gain among noise-only candidates; the noise candidates
	// are permutations of the baseline.
	round := []Pair{
		{base8, scaled(base8, 0.8)},
		{base8, []float64{0.99, 1.01, 1.03, 0.97, 1.05, 0.98, 1.02, 1.00}},
		{base8, scaled(base8, 0.97)},
	}
	ds := DecideRound(round, r)
	if len(ds) != 3 || !ds[0].Accepted() || ds[1].Accepted() || ds[2].Accepted() {
		t.Fatalf("round verdicts %v %v %v", ds[0].Verdict, ds[1].Verdict, ds[2].Verdict)
	}
	if !strings.Contains(ds[0].Reason, "Holm over 3") || ds[0].Comparison.Confidence != 1-0.05/3 {
		t.Errorf("reason %q, confidence %g", ds[0].Reason, ds[0].Comparison.Confidence)
	}
	// Too many candidates for n=6: α/25 = 0.002 < MinP(6,6) = 0.0022.
	var many []Pair
	for range 25 {
		many = append(many, Pair{base8[:6], scaled(base8[:6], 0.5)})
	}
	if d := DecideRound(many, r)[0]; d.Verdict != TooFewSamples || !strings.Contains(d.Reason, "need ≥ 7 samples") {
		t.Errorf("25 candidates at n=6: %v %q", d.Verdict, d.Reason)
	}
}

func TestRegresses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cand  []float64
		bound float64
		want  bool
		v     Verdict
	}{
		{"10% less throughput", scaled(base8, 0.9), -0.05, true, Worse},
		{"3% less throughput", scaled(base8, 0.97), -0.05, false, NoDifference},
		{"more throughput", scaled(base8, 1.1), 0.05, false, Better},
		{"unchanged", base8, 0.05, false, NoDifference},
	} {
		got, d := Regresses(base8, tc.cand, HigherIsBetter, Relative, tc.bound, 0.05)
		if got != tc.want || d.Verdict != tc.v || !strings.Contains(d.Reason, "guard") {
			t.Errorf("%s: regresses %v (%v, %q), want %v (%v)", tc.name, got, d.Verdict, d.Reason, tc.want, tc.v)
		}
	}
	if got, d := Regresses(base8[:3], scaled(base8[:3], 0.5), HigherIsBetter, Relative, 0.05, 0.05); got || d.Verdict != TooFewSamples {
		t.Errorf("n=3: %v %v", got, d.Verdict)
	}
}

// TestRegressesCount checks the guard on a count such as errors: absolute
// rates, so a baseline without errors does not make the change undefined
// (and the guard silently hold), and a 0 bound tolerates no significant
// increase.
func TestRegressesCount(t *testing.T) {
	none := make([]float64, 8)
	some := []float64{3, 4, 5, 4, 3, 4, 5, 4} // mean 4
	for _, tc := range []struct {
		name       string
		base, cand []float64
		m          Measure
		bound      float64
		want       bool
		v          Verdict
		change     float64
		reason     string
	}{
		{"0 → 4 errors", none, some, Count, 0, true, Worse, 4, "mean 0 → 4 per trial  n=8+8  Δ +4  p=0.000"},
		{"0 → 4 errors, 50% bound of nothing", none, some, Count, -0.5, true, Worse, 4, "guard violated: +4 per trial worse than the +0 per trial bound"},
		{"0 → 4 errors read as Relative", none, some, Relative, 0, true, Worse, 4, "guard violated"},
		{"no errors either way", none, none, Count, 0, false, NoDifference, 0, "Δ +0  p=1  guard holds: no significant change"},
		{"4 → 0 errors", some, none, Count, 0, false, Better, -4, "guard holds: improved"},
		{"4 → 5 errors within a 50% bound", some, add(some, 1), Count, -0.5, false, NoDifference, 1, "guard holds: +1 per trial worse, within the +2 per trial bound"},
		{"4 → 8 errors beyond a 50% bound", some, scaled(some, 2), Count, -0.5, true, Worse, 4, "guard violated"},
	} {
		got, d := Regresses(tc.base, tc.cand, LowerIsBetter, tc.m, tc.bound, 0.05)
		if got != tc.want || d.Verdict != tc.v || d.Measure != Count || d.Change != tc.change ||
			!strings.Contains(d.Reason, tc.reason) || strings.Contains(d.Reason, "NaN") {
			t.Errorf("%s: regresses %v (%v, change %v %v, %q), want %v (%v, change %v, %q)",
				tc.name, got, d.Verdict, d.Change, d.Measure, d.Reason, tc.want, tc.v, tc.change, tc.reason)
		}
	}
	for _, tc := range []struct {
		m    Measure
		x    float64
		want string
	}{{Count, 0, "+0"}, {Count, 3.75, "+3.75"}, {Count, -1, "-1"}, {Relative, 0.05, "+5.0%"}, {Count, math.NaN(), "—"}} {
		if got := FormatChange(tc.m, tc.x); got != tc.want {
			t.Errorf("FormatChange(%v, %v) = %q, want %q", tc.m, tc.x, got, tc.want)
		}
	}
}

func add(x []float64, d float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v + d
	}
	return out
}

func TestFormatEffect(t *testing.T) {
	for _, tc := range []struct {
		rel  Interval
		want string
	}{
		{Interval{Lo: -0.11, Center: -0.072, Hi: -0.031}, "-7.2% [-11.0% -3.1%]"},
		{Interval{Lo: math.Inf(-1), Center: 0.05, Hi: math.Inf(1)}, "+5.0% [-∞ +∞]"},
		{Interval{Lo: math.NaN(), Center: math.NaN(), Hi: math.NaN()}, "— [— —]"},
	} {
		if got := FormatEffect(tc.rel); got != tc.want {
			t.Errorf("FormatEffect(%+v) = %q; want %q", tc.rel, got, tc.want)
		}
	}
}
