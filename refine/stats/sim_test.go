package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	mstats "github.com/aclements/go-moremath/stats"
)

// refineRule is the rule refine runs with by default (--alpha 0.05
// --min-effect 5%, p99 latency: lower is better).
var refineRule = Rule{Metric: "p99_ms", Alpha: 0.05, MinEffect: 0.05, Dir: LowerIsBetter}

// TestFalseAcceptRate measures, by simulation with fixed seeds, how often
// the decision rule accepts a candidate that is identical to the baseline
// (A/A), at the noise levels measured on real benchmarks (CV 5–15%), for a
// large round: 10 candidates screened on 6 trials per arm (alone or with
// Holm), the survivors confirmed on 8 fresh trials per arm with Holm. The
// rate's one-sided 95% upper bound must be ≤ 5% per candidate and per
// round. TestErrorRates checks the
// same for single decisions and rounds of 5.
func TestFalseAcceptRate(t *testing.T) {
	const rounds = 2000
	for _, cv := range []float64{0.05, 0.10, 0.15} {
		for _, tc := range []struct {
			k, screen, confirm int
			holm               bool
			screenP            float64
		}{{10, 6, 8, false, 0}, {10, 6, 8, true, 0}, {10, 6, 8, false, 0.25}} {
			s := Sim{Rule: refineRule, K: tc.k, Screen: tc.screen, ScreenHolm: tc.holm, ScreenP: tc.screenP, Confirm: tc.confirm, CV: cv, Rounds: rounds, Seed: 16}
			r := Simulate(s)
			if r.Nulls != rounds*tc.k {
				t.Fatalf("%d null candidates, want %d", r.Nulls, rounds*tc.k)
			}
			if fa, fw := UpperBound(r.FalseAccepts, r.Nulls, 0.95), UpperBound(r.FamilyErrors, rounds, 0.95); fa > 0.05 || fw > 0.05 {
				t.Errorf("cv=%g k=%d screen=%d confirm=%d: false-accept rate %.4f, FWER %.4f, upper bounds %.4f and %.4f; want ≤ 0.05",
					cv, tc.k, tc.screen, tc.confirm, r.FalseAcceptRate.Center, r.FWER.Center, fa, fw)
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
	// One-sided: 0 of n has the upper bound 1 − 0.05^(1/n).
	for _, n := range []int{59, 60, 120} {
		if got, want := UpperBound(0, n, 0.95), 1-math.Pow(0.05, 1/float64(n)); !near(got, want, 1e-9) {
			t.Errorf("UpperBound(0, %d) = %.6f, want %.6f", n, got, want)
		}
	}
	if UpperBound(0, 59, 0.95) > 0.05 || UpperBound(0, 58, 0.95) <= 0.05 {
		t.Error("0 of 59 must be the first to show ≤ 5%")
	}
}

// TestErrorRates prints the false-accept rate and power table of the
// default rule (run with -v; `make stats-rates`) and checks it: every
// false-accept rate and family-wise rate ≤ 5%, and power that does not fall
// as the planted effect grows.
func TestErrorRates(t *testing.T) {
	var b strings.Builder
	const rounds = 1000
	fmt.Fprintf(&b, "rule: %s, α=%g, min effect %s, lognormal noise, %d rounds per cell, seed 16\n",
		refineRule.Metric, refineRule.Alpha, pct(refineRule.MinEffect), rounds)
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
		{"k=5: screen 6 p<.25, conf 8", 5, 6, 8, false},
	} {
		for _, cv := range []float64{0.05, 0.10, 0.15} {
			prev := -1.0
			for _, eff := range []float64{0, 0.05, 0.10, 0.20} {
				r := Simulate(Sim{Rule: refineRule, K: proc.k, Screen: proc.screen, ScreenHolm: proc.holm, ScreenP: screenP(proc.name), Confirm: proc.confirm, CV: cv, Effect: eff, Rounds: rounds, Seed: 16})
				if r.FalseAcceptRate.Center > 0.05 || r.FWER.Center > 0.05 {
					t.Errorf("%s, CV %g, effect %g: false-accept rate %.4f, FWER %.4f; want ≤ 0.05", proc.name, cv, eff, r.FalseAcceptRate.Center, r.FWER.Center)
				}
				power := "—"
				if eff == refineRule.MinEffect && r.Power.Center > refineRule.Alpha {
					// The interval must clear the minimum effect: at a true
					// effect equal to it that happens about α/2 of the time.
					t.Errorf("%s, CV %g: accepted %.4f of the time at a true effect equal to the minimum effect; want ≤ α", proc.name, cv, r.Power.Center)
				}
				if eff != 0 {
					power = fmtRate(r.Power)
					if r.Power.Center < prev {
						t.Errorf("%s, CV %g: power fell from %.4f to %.4f as the effect grew to %g", proc.name, cv, prev, r.Power.Center, eff)
					}
					prev = r.Power.Center
				}
				fmt.Fprintf(&b, "%-28s %-5s %-8s %-26s %-26s\n", proc.name, pct(cv), pct(eff), fmtRate(r.FalseAcceptRate), power)
				rows++
			}
		}
	}
	if rows != 60 {
		t.Fatalf("%d rows", rows)
	}
	t.Log("\n" + b.String())
}

func screenP(name string) float64 {
	if strings.Contains(name, "p<.25") {
		return 0.25
	}
	return 0
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

func TestTrialsFor(t *testing.T) {
	// At CV 5% a 20% gain needs few trials; at CV 10% more; neither number may be below what the U test can resolve, and
	// the n found must actually reach the power.
	n1, ok1 := TrialsFor(refineRule, 0.05, 0.20, 0.8, 30, 400, 3)
	n2, ok2 := TrialsFor(refineRule, 0.10, 0.20, 0.8, 30, 400, 3)
	if !ok1 || !ok2 || n1 < NeedN(refineRule.Alpha) || n2 <= n1 {
		t.Fatalf("TrialsFor: %d (%v) at CV 5%%, %d (%v) at CV 10%%", n1, ok1, n2, ok2)
	}
	if p := Power(refineRule, n2, 0.10, 0.20, 400, 3); p < 0.8 {
		t.Errorf("n=%d reaches power %.3f < 0.8", n2, p)
	}
	if p := Power(refineRule, n2-1, 0.10, 0.20, 400, 3); p >= 0.8 {
		t.Logf("n=%d already reaches %.3f (power is not strictly monotone in n)", n2-1, p)
	}
	if _, ok := TrialsFor(refineRule, 0.30, 0.06, 0.9, 12, 200, 3); ok {
		t.Error("a 6% gain under 30% noise found with ≤ 12 trials")
	}
	t.Logf("trials per arm for 80%% power at a 20%% gain: %d (CV 5%%), %d (CV 10%%)", n1, n2)
}

// TestFamilyWiseError holds a round's family-wise error rate to α where
// only the multiplicity control can: with no minimum effect an interval
// clears 0 whenever the test is significant, so ten uncorrected A/A
// candidates would accept one about 1 − 0.975^10 ≈ 22% of the time. The
// one-sided 95% upper bound of the rate must be ≤ 5%.
func TestFamilyWiseError(t *testing.T) {
	rule := refineRule
	rule.MinEffect = 0
	for _, k := range []int{1, 10} {
		s := Sim{Rule: rule, K: k, Confirm: 8, CV: 0.10, Rounds: 2000, Seed: 23}
		r := Simulate(s)
		up := UpperBound(r.FamilyErrors, s.Rounds, 0.95)
		t.Logf("A/A, min effect 0, k=%d, n=8, CV 10%%: %d of %d rounds accepted a candidate (FWER %.4f, upper bound %.4f)",
			k, r.FamilyErrors, s.Rounds, r.FWER.Center, up)
		if up > 0.05 {
			t.Errorf("k=%d: family-wise error %.4f, upper bound %.4f > 0.05", k, r.FWER.Center, up)
		}
	}
}

// TestGuardRates measures how often a guard vetoes: rarely under A/A, and
// nearly always when a count such as errors goes from none to about 4 per
// trial (the ratio to a baseline of 0 does not exist: the guard must
// compare absolute rates, not hold for want of a number).
func TestGuardRates(t *testing.T) {
	const sims, n = 2000, 8
	rng := rand.New(rand.NewPCG(31, 31))
	poisson := func(lambda float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			l, k, p := math.Exp(-lambda), 0, rng.Float64()
			for p > l {
				k++
				p *= rng.Float64()
			}
			x[i] = float64(k)
		}
		return x
	}
	lognormal := func(cv, scale float64) []float64 {
		sigma := math.Sqrt(math.Log1p(cv * cv))
		return seq(n, func(int) float64 { return scale * math.Exp(sigma*rng.NormFloat64()) })
	}
	for _, tc := range []struct {
		name       string
		base, cand func() []float64
		dir        Direction
		m          Measure
		bound      float64
		most       float64 // the veto rate's upper bound must be ≤ most
		least      float64 // and its point estimate ≥ least
	}{
		{"errors A/A, 1 per trial, errors:0%", func() []float64 { return poisson(1) }, func() []float64 { return poisson(1) }, LowerIsBetter, Count, 0, 0.05, 0},
		{"errors 0 → 4 per trial, errors:0%", func() []float64 { return poisson(0) }, func() []float64 { return poisson(4) }, LowerIsBetter, Count, 0, 1, 0.95},
		{"throughput A/A, CV 5%, -5%", func() []float64 { return lognormal(0.05, 1) }, func() []float64 { return lognormal(0.05, 1) }, HigherIsBetter, Relative, 0.05, 0.05, 0},
	} {
		vetoes := 0
		for range sims {
			if reg, _ := Regresses(tc.base(), tc.cand(), tc.dir, tc.m, tc.bound, 0.05); reg {
				vetoes++
			}
		}
		rate, up := float64(vetoes)/sims, UpperBound(vetoes, sims, 0.95)
		t.Logf("%s, n=%d: vetoed %d of %d (%.4f, upper bound %.4f)", tc.name, n, vetoes, sims, rate, up)
		if up > tc.most || rate < tc.least {
			t.Errorf("%s: veto rate %.4f (upper bound %.4f); want upper bound ≤ %g and rate ≥ %g", tc.name, rate, up, tc.most, tc.least)
		}
	}
}

func TestErrorRatesSet(t *testing.T) {
	rs := ErrorRates(Sim{Rule: refineRule, K: 3, Screen: 6, Confirm: 8, CV: 0.05, Rounds: 300, Seed: 1})
	if len(rs) != 3 || rs[0].Sim.Effect != 0 || rs[1].Sim.Effect != 0.05 || rs[2].Sim.Effect != 0.10 {
		t.Fatalf("effects %v", rs)
	}
	if !math.IsNaN(rs[0].Power.Center) || rs[0].FalseAcceptRate.Center > 0.05 {
		t.Errorf("A/A: power %v, false accepts %v", rs[0].Power, rs[0].FalseAcceptRate)
	}
	// At exactly the minimum effect the interval clears it only when it
	// misses the truth on that side: at most about α/2.
	if rs[1].Power.Center > 0.05 {
		t.Errorf("power at the minimum effect %.3f, want ≤ α", rs[1].Power.Center)
	}
}

// The U test alone must hold its size: under A/A, p < α exactly as often as
// the exact null distribution says (for n=8+8 at α=0.05: 2·P(U ≤ 13) =
// 0.0499), within three standard errors of 4000 simulated tests.
func TestUTestSize(t *testing.T) {
	const n, trials, alpha = 8, 4000, 0.05
	d := mstats.UDist{N1: n, N2: n}
	size := 0.0
	for u := 0; 2*d.CDF(float64(u)) < alpha; u++ {
		size = 2 * d.CDF(float64(u))
	}
	rng := rand.New(rand.NewPCG(8, 8))
	hits := 0
	for range trials {
		b := seq(n, func(int) float64 { return math.Exp(0.1 * rng.NormFloat64()) })
		c := seq(n, func(int) float64 { return math.Exp(0.1 * rng.NormFloat64()) })
		if Compare(b, c, 0.95).P < alpha {
			hits++
		}
	}
	got, se := float64(hits)/trials, math.Sqrt(size*(1-size)/trials)
	if math.Abs(got-size) > 3*se {
		t.Errorf("A/A: p < %g in %.4f of %d tests, exact size %.4f (±%.4f)", alpha, got, trials, size, 3*se)
	}
	t.Logf("U test size at n=%d+%d: %.4f simulated, %.4f exact", n, n, got, size)
}
