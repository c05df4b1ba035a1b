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
