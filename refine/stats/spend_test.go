package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	mstats "github.com/aclements/go-moremath/stats"
)

func TestSpendOneLook(t *testing.T) {
	for _, a := range []float64{0.01, 0.025, 0.05} {
		if got := Spend(a, []float64{1}); len(got) != 1 || !near(got[0], a, 1e-12) {
			t.Errorf("Spend(%g, [1]) = %v", a, got)
		}
	}
}

// Two looks at half and all the information, checked by hand: the first
// look spends α·ln(1+(e−1)/2) and is its own nominal level; the second's
// boundary c2 solves P(Z1 < c1, Z2 ≥ c2) = α − α(½) for corr(Z1, Z2) =
// √½, here integrated over Z1 independently of Spend's recursion; and at
// one-sided α = 0.025 the boundaries are the published Lan–DeMets
// Pocock-type z = 2.157 and 2.201 (Jennison & Turnbull; gsDesign's
// sfLDPocock).
func TestSpendTwoLooksByHand(t *testing.T) {
	const alpha = 0.025
	got := Spend(alpha, []float64{0.5, 1})
	a1 := alpha * math.Log(1+(math.E-1)/2)
	if !near(got[0], a1, 1e-12) {
		t.Errorf("look 1: %g, want %g", got[0], a1)
	}
	c1, c2 := mstats.StdNormal.InvCDF(1-got[0]), mstats.StdNormal.InvCDF(1-got[1])
	if math.Abs(c1-2.157) > 5e-4 || math.Abs(c2-2.201) > 5e-4 {
		t.Errorf("boundaries z = %.4f, %.4f; want 2.157, 2.201", c1, c2)
	}
	rho := math.Sqrt(0.5)
	// P(Z1 < c1, Z2 ≥ c2) = ∫_{−∞}^{c1} φ(z) (1 − Φ((c2 − ρz)/√(1−ρ²))) dz.
	const steps = 200000
	lo := -12.0
	h := (c1 - lo) / steps
	p := 0.0
	for i := range steps {
		z := lo + (float64(i)+0.5)*h
		p += h * normPDF(z, 1) * mstats.StdNormal.CDF(-(c2-rho*z)/math.Sqrt(1-rho*rho))
	}
	if want := alpha - a1; math.Abs(p-want) > 2e-7 {
		t.Errorf("look 2 crosses with probability %.8f, want %.8f", p, want)
	}
}

// A Monte Carlo of the looks' statistics (correlated normals: partial
// sums of independent increments) crosses some boundary with probability
// α, and each look with its increment of the spending function, within
// four standard errors.
func TestSpendMonteCarlo(t *testing.T) {
	const paths = 200000
	for _, tc := range []struct {
		alpha float64
		t     []float64
		// spent, when set, is what each look spent (SpendAt): a plan
		// re-sized after its first look, planned at 0.5 and now at t[0].
		spent []float64
	}{
		{0.05, []float64{0.5, 1}, nil},
		{0.05, []float64{0.25, 0.5, 1}, nil},
		{0.025, []float64{0.25, 0.5, 0.75, 1}, nil},
		{0.05, []float64{0.2, 0.9, 0.95, 1}, nil},
		{0.05, []float64{0.3, 1}, []float64{Spent(0.05, 0.5), 0.05}},
		{0.05, []float64{0.8, 1}, []float64{Spent(0.05, 0.5), 0.05}},
	} {
		if tc.spent == nil {
			for _, tk := range tc.t {
				tc.spent = append(tc.spent, Spent(tc.alpha, tk))
			}
		}
		nominal := SpendAt(tc.t, tc.spent)
		c := make([]float64, len(nominal))
		for k, a := range nominal {
			c[k] = mstats.StdNormal.InvCDF(1 - a)
		}
		rng := rand.New(rand.NewPCG(uint64(len(tc.t)), 77))
		cross := make([]int, len(tc.t))
		total := 0
		for range paths {
			b, prev := 0.0, 0.0
			for k, tk := range tc.t {
				b += math.Sqrt(tk-prev) * rng.NormFloat64()
				prev = tk
				if b/math.Sqrt(tk) >= c[k] {
					cross[k]++
					total++
					break
				}
			}
		}
		check := func(what string, x int, want float64) {
			got := float64(x) / paths
			se := math.Sqrt(want * (1 - want) / paths)
			if math.Abs(got-want) > 4*se {
				t.Errorf("α %g looks %v: %s crossed %.5f, want %.5f ± %.5f", tc.alpha, tc.t, what, got, want, 4*se)
			}
		}
		check("any look", total, tc.alpha)
		prevSpent := 0.0
		for k, s := range tc.spent {
			check("look "+string(rune('1'+k)), cross[k], s-prevSpent)
			prevSpent = s
		}
		t.Logf("α %g looks %v: nominal %.5f, crossed %.5f", tc.alpha, tc.t, nominal, float64(total)/paths)
	}
}

// TestSpendAtIsSpend: with what the spending function spends at t, SpendAt
// is Spend.
func TestSpendAtIsSpend(t *testing.T) {
	tt := []float64{0.3, 0.6, 1}
	want := Spend(0.05, tt)
	got := SpendAt(tt, []float64{Spent(0.05, 0.3), Spent(0.05, 0.6), 0.05})
	for k := range want {
		if math.Abs(got[k]-want[k]) > 1e-12 {
			t.Errorf("look %d: SpendAt %g, Spend %g", k+1, got[k], want[k])
		}
	}
	for _, bad := range [][]float64{nil, {0.02}, {0.03, 0.02}, {0.02, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SpendAt(%v, %v) did not panic", []float64{0.5, 1}, bad)
				}
			}()
			SpendAt([]float64{0.5, 1}, bad)
		}()
	}
}

func TestSpendRefusesBadFractions(t *testing.T) {
	for _, bad := range [][]float64{nil, {0.5, 0.5}, {0, 1}, {0.5, 1.2}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Spend(%v) did not panic", bad)
				}
			}()
			Spend(0.05, bad)
		}()
	}
}
