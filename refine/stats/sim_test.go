package stats

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// refineRule is the rule refine runs with by default (--alpha 0.05
// --min-effect 5%, p99 latency: lower is better).
var refineRule = Rule{Metric: "p99_ms", Alpha: 0.05, MinEffect: 0.05, Dir: -1}

// TestFalseAcceptRate measures, by simulation with fixed seeds, how often
// the decision rule accepts a candidate that is identical to the baseline
// (A/A), at the noise levels measured on real benchmarks (CV 5–15%) and the
// n refine uses: a round of k candidates screened on 6 trials per arm with
// Holm, the survivors confirmed on 8 fresh trials per arm with Holm. The
// rate must be ≤ 5% per candidate and per round; so must the rate of a
// single Decide at each n alone.
func TestFalseAcceptRate(t *testing.T) {
	const rounds = 2000
	for _, cv := range []float64{0.05, 0.10, 0.15} {
		for _, tc := range []struct {
			k, screen, confirm int
			holm               bool
		}{{1, 0, 6, false}, {1, 0, 8, false}, {5, 6, 8, false}, {10, 6, 8, false}, {5, 6, 8, true}} {
			s := Sim{Rule: refineRule, K: tc.k, Screen: tc.screen, ScreenHolm: tc.holm, Confirm: tc.confirm, CV: cv, Rounds: rounds, Seed: 16}
			r := Simulate(s)
			if r.Nulls != rounds*tc.k {
				t.Fatalf("%d null candidates, want %d", r.Nulls, rounds*tc.k)
			}
			if r.FalseAcceptRate.Center > 0.05 || r.FWER.Center > 0.05 {
				t.Errorf("cv=%g k=%d screen=%d confirm=%d: false-accept rate %.4f, FWER %.4f; want ≤ 0.05",
					cv, tc.k, tc.screen, tc.confirm, r.FalseAcceptRate.Center, r.FWER.Center)
			}
		}
	}
}

// TestPower checks that the rule finds planted effects, more often the
// larger the effect and the smaller the noise, and that the simulation is
// deterministic for a seed.
func TestPower(t *testing.T) {
	p := func(n int, cv, effect float64) float64 { return Power(refineRule, n, cv, effect, 1000, 7) }
	if a, b := p(8, 0.05, 0.20), p(8, 0.05, 0.20); a != b {
		t.Fatalf("same seed, different power: %g vs %g", a, b)
	}
	if got := p(8, 0.05, 0.20); got < 0.95 {
		t.Errorf("power at a 20%% effect, CV 5%%, n=8: %.3f, want ≥ 0.95", got)
	}
	if lo, hi := p(8, 0.10, 0.10), p(8, 0.10, 0.20); !(lo < hi) {
		t.Errorf("power does not grow with the effect: %.3f at 10%%, %.3f at 20%%", lo, hi)
	}
	if lo, hi := p(8, 0.10, 0.10), p(8, 0.05, 0.10); !(lo < hi) {
		t.Errorf("power does not fall with noise: %.3f at CV 10%%, %.3f at CV 5%%", lo, hi)
	}
	// An effect below MinEffect is not "better" however well measured:
	// with CV 1% a 2% gain is significant, but must not be accepted.
	if got := p(20, 0.01, 0.02); got > 0.05 {
		t.Errorf("a 2%% gain was accepted %.3f of the time with MinEffect 5%%", got)
	}
}

func TestProportion(t *testing.T) {
	// Clopper–Pearson for 0/20, 5/20 and 20/20 at 95% (R: binom.test(x, 20)$conf.int).
	for _, tc := range []struct {
		x, n   int
		lo, hi float64
	}{
		{0, 20, 0, 0.168433470983085},
		{5, 20, 0.0865714691014346, 0.4910458717079575},
		{20, 20, 0.831566529016915, 1},
	} {
		iv := Proportion(tc.x, tc.n, 0.95)
		if !near(iv.Lo, tc.lo, 1e-9) || !near(iv.Hi, tc.hi, 1e-9) {
			t.Errorf("Proportion(%d, %d) = [%.15g, %.15g], R says [%.15g, %.15g]", tc.x, tc.n, iv.Lo, iv.Hi, tc.lo, tc.hi)
		}
	}
}

// TestErrorRates prints the false-accept rate and power table of the
// default rule (run with -v; `make stats-rates`). It asserts only what
// TestFalseAcceptRate and TestPower do not: that the table is complete.
func TestErrorRates(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "rule: %s, α=%g, min effect %s, lognormal noise, %d rounds per cell, seed 16\n",
		refineRule.Metric, refineRule.Alpha, pct(refineRule.MinEffect), 2000)
	fmt.Fprintf(&b, "%-28s %-5s %-8s %-26s %-26s\n", "procedure", "CV", "effect", "false accepts / candidate", "power")
	rows := 0
	for _, proc := range []struct {
		name               string
		k, screen, confirm int
		holm               bool
	}{
		{"single decision n=6", 1, 0, 6, false},
		{"single decision n=8", 1, 0, 8, false},
		{"k=5: screen 6, confirm 8", 5, 6, 8, false},
		{"k=5: screen 6 Holm, conf 8", 5, 6, 8, true},
	} {
		for _, cv := range []float64{0.05, 0.10, 0.15} {
			for _, eff := range []float64{0, 0.05, 0.10, 0.20} {
				r := Simulate(Sim{Rule: refineRule, K: proc.k, Screen: proc.screen, ScreenHolm: proc.holm, Confirm: proc.confirm, CV: cv, Effect: eff, Rounds: 2000, Seed: 16})
				power := "—"
				if eff != 0 {
					power = fmtRate(r.Power)
				}
				fmt.Fprintf(&b, "%-28s %-5s %-8s %-26s %-26s\n", proc.name, pct(cv), pct(eff), fmtRate(r.FalseAcceptRate), power)
				rows++
			}
		}
	}
	if rows != 48 {
		t.Fatalf("%d rows", rows)
	}
	t.Log("\n" + b.String())
}

func fmtRate(iv Interval) string {
	if math.IsNaN(iv.Center) {
		return "—"
	}
	return fmt.Sprintf("%.4f [%.4f, %.4f]", iv.Center, iv.Lo, iv.Hi)
}

func BenchmarkPower(b *testing.B) {
	for b.Loop() {
		Power(refineRule, 8, 0.10, 0.10, 1000, 1)
	}
}
