package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	mstats "github.com/aclements/go-moremath/stats"
)

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
