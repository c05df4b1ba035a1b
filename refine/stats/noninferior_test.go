package stats

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestNonInferior(t *testing.T) {
	zeros := make([]float64, 8)
	oneError := []float64{0, 0, 0, 0, 0, 0, 0, 1}
	fourish := []float64{4, 3, 5, 4, 6, 2, 4, 5}
	tput := []float64{98100, 98500, 97700, 98300, 97900, 98200, 98000, 98400}
	for _, tc := range []struct {
		name       string
		base, cand []float64
		dir        Direction
		m          Measure
		tol        float64
		ok         bool
		verdict    Verdict
		measure    Measure
		reason     []string // substrings the Reason must hold
	}{
		{"errors 0 → ~4", zeros, fourish, LowerIsBetter, Count, 0, false, Worse, Count, []string{"mean 0 → 4.125 per trial", "beyond +0 per trial"}},
		{"errors 0 → 1 in 1 of 8", zeros, oneError, LowerIsBetter, Count, 0, true, NoDifference, Count, []string{"Δ +0", "loss ≤ +0 per trial (95% bound) within +0 per trial"}},
		{"errors 0 → ~4 as Relative (no ratio)", zeros, fourish, LowerIsBetter, Relative, 0.05, false, Worse, Count, []string{"per trial"}},
		{"throughput −1%, 5% tolerated", tput, scaled(tput, 0.99), HigherIsBetter, Relative, 0.05, true, NoDifference, Relative, []string{"98.15k → 97.17k  n=8+8  Δ -1.0%  loss ≤ 1.3% (95% bound) within 5%", "(95% bound) within 5%"}},
		{"throughput −10%, 5% tolerated", tput, scaled(tput, 0.90), HigherIsBetter, Relative, -0.05, false, Worse, Relative, []string{"loss up to", "beyond 5%"}},
		{"latency −10% (a gain)", tput, scaled(tput, 0.90), LowerIsBetter, Relative, 0.05, true, NoDifference, Relative, []string{"gain ≥"}},
		{"n=2: unbounded", tput[:2], tput[2:4], HigherIsBetter, Relative, 0.05, false, TooFewSamples, Relative, []string{"needs ≥ 3 samples per arm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, d := NonInferior(tc.base, tc.cand, tc.dir, tc.m, tc.tol, 0.05)
			if ok != tc.ok || d.Verdict != tc.verdict || d.Measure != tc.measure {
				t.Errorf("ok %v verdict %v measure %v, want %v %v %v: %s", ok, d.Verdict, d.Measure, tc.ok, tc.verdict, tc.measure, d.Reason)
			}
			for _, s := range tc.reason {
				if !strings.Contains(d.Reason, s) {
					t.Errorf("reason %q lacks %q", d.Reason, s)
				}
			}
			for _, bad := range []string{"NaN", "guard guard", "+Inf%", "∞"} {
				if strings.Contains(d.Reason, bad) {
					t.Errorf("reason %q holds %q", d.Reason, bad)
				}
			}
			if d.Comparison.Confidence != 0.9 {
				t.Errorf("interval at %g, want 0.9 (one-sided 95%%)", d.Comparison.Confidence)
			}
			t.Log(d.Reason)
		})
	}
	// A Count's tolerance is per trial: the bound times the baseline mean.
	cnt := []float64{10, 12, 9, 11, 10, 13, 8, 11}
	_, d := NonInferior(cnt, add(cnt, 5), LowerIsBetter, Count, 0.10, 0.05)
	if d.Tolerance != 0.1*10.5 || d.Verdict != Worse || !(d.LossLow > d.Tolerance) || d.LossLow > d.Bound {
		t.Errorf("count +5 on a mean of 10.5, 10%% tolerated: tolerance %g, loss [%g, %g], %v", d.Tolerance, d.LossLow, d.Bound, d.Verdict)
	}
	// Bound is the loss's upper bound: for throughput, minus the lower
	// bound of the relative shift.
	_, d = NonInferior(tput, scaled(tput, 0.97), HigherIsBetter, Relative, 0.05, 0.05)
	if want := -d.Comparison.Rel.Lo; d.Bound != want || d.Change != d.Comparison.Rel.Center {
		t.Errorf("Bound %g Change %g, want %g and %g", d.Bound, d.Change, want, d.Comparison.Rel.Center)
	}
}

// TestNonInferiorN: at the n it gives, NonInferior shows a metric with no
// true loss within tolerance about as often as the power asked for
// (simulated, lognormal noise), and n grows as the tolerance shrinks.
func TestNonInferiorN(t *testing.T) {
	n := NonInferiorN(0.05, 0.05, 0.05, 0.8)
	if n < 4 || NonInferiorN(0.05, 0.025, 0.05, 0.8) <= n || NonInferiorN(0, 0.05, 0.05, 0.8) != 0 {
		t.Fatalf("NonInferiorN = %d; want ≥ 4, growing as the tolerance shrinks, 0 for no noise", n)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	ok := 0
	const sims = 1000
	for range sims {
		base, cand := lognormal(rng, n, 0.05, 1), lognormal(rng, n, 0.05, 1)
		if in, _ := NonInferior(base, cand, HigherIsBetter, Relative, 0.05, 0.05); in {
			ok++
		}
	}
	if p := Proportion(ok, sims, 0.95); p.Hi < 0.8 || p.Lo > 0.95 {
		t.Errorf("n=%d: non-inferior in %d of %d (%.3f [%.3f, %.3f]); want about 80%%", n, ok, sims, p.Center, p.Lo, p.Hi)
	}
	t.Logf("n=%d per arm: non-inferior in %d of %d", n, ok, sims)
}
