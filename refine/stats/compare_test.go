package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	mstats "github.com/aclements/go-moremath/stats"
)

func near(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return false
	}
	return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b))
}

func seq(n int, f func(i int) float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = f(i + 1)
	}
	return x
}

// The reference values come from R 4.2.2 (Debian r-base-core), computed
// with wilcox.test(cand, base, conf.int=TRUE, conf.level=L): the p-value,
// the Hodges–Lehmann estimate of cand − base and its interval. Cases A–C
// have no ties and n < 50, where R uses the exact distribution as we do;
// D has n ≥ 50 and E has ties with n > 25, where both R (exact=FALSE,
// correct=TRUE) and we use the normal approximation with continuity and
// tie correction. For D and E R computes the interval by root finding on
// the asymptotic statistic, which lands between order statistics; there
// the estimate and bounds are compared to within one step of the data.
func TestCompareAgainstR(t *testing.T) {
	for _, tc := range []struct {
		name                string
		base, cand          []float64
		level               float64
		p, est, lo, hi      float64
		tolEst, tolInterval float64
	}{
		{"A 6v6 exact", []float64{0.41, 0.43, 0.44, 0.47, 0.50, 0.52}, []float64{0.38, 0.39, 0.40, 0.42, 0.45, 0.46},
			0.95, 0.0930735930735931, -0.045, -0.10, 0.01, 1e-12, 1e-12},
		{"B 5v7 exact", []float64{10.2, 11.5, 9.8, 12.1, 10.9}, []float64{12.4, 13.0, 11.8, 12.9, 14.2, 13.3, 12.7},
			0.95, 0.00505050505050505, 2, 0.9, 3.1, 1e-12, 1e-12},
		{"C 8v8 exact", []float64{1.00, 1.02, 0.98, 1.05, 0.97, 1.01, 1.03, 0.99}, []float64{0.951, 0.966, 0.932, 0.987, 0.944, 1.004, 0.958, 0.921},
			0.95, 0.00466200466200466, -0.0485, -0.079, -0.019, 1e-12, 1e-12},
		{"C 8v8 exact 90%", []float64{1.00, 1.02, 0.98, 1.05, 0.97, 1.01, 1.03, 0.99}, []float64{0.951, 0.966, 0.932, 0.987, 0.944, 1.004, 0.958, 0.921},
			0.90, 0.00466200466200466, -0.0485, -0.076, -0.023, 1e-12, 1e-12},
		{"D 60v55 normal", seq(60, func(i int) float64 { return float64(i * 37 % 101) }), seq(55, func(i int) float64 { return float64(i*53%97 + 5) }),
			0.95, 0.917497379422649, 0.999912105357609, -10.9999699918672, 11.9999127370563, 1e-3, 1e-3},
		{"E ties 30v30 normal", seq(30, func(i int) float64 { return float64(i * 7 % 13) }), seq(30, func(i int) float64 { return float64(i*5%11 + 2) }),
			0.95, 0.126590740480583, 1.99999721544028, -1.98671083504917e-05, 3.00001304455379, 1e-3, 1e-3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, cand := slices.Clone(tc.base), slices.Clone(tc.cand)
			c := Compare(tc.base, tc.cand, tc.level)
			if !slices.Equal(base, tc.base) || !slices.Equal(cand, tc.cand) {
				t.Fatal("Compare modified its input")
			}
			if !near(c.P, tc.p, 1e-9) {
				t.Errorf("P = %.15g, R says %.15g", c.P, tc.p)
			}
			if !near(c.Shift.Center, tc.est, tc.tolEst) {
				t.Errorf("HL shift = %.15g, R says %.15g", c.Shift.Center, tc.est)
			}
			if !near(c.Shift.Lo, tc.lo, tc.tolInterval) || !near(c.Shift.Hi, tc.hi, tc.tolInterval) {
				t.Errorf("shift interval [%.15g, %.15g], R says [%.15g, %.15g]", c.Shift.Lo, c.Shift.Hi, tc.lo, tc.hi)
			}
		})
	}
}

// exactP enumerates every way of splitting the pooled values into arms of
// the observed sizes and returns the two-sided permutation p-value of the
// Mann–Whitney statistic with midranks for ties: twice the smaller tail
// (the convention of R's exact wilcox.test; with ties the conditional
// distribution need not be symmetric, and doubling is the conservative
// choice).
func exactP(base, cand []float64) float64 {
	pool := append(slices.Clone(base), cand...)
	n1, n := len(base), len(pool)
	rank := midranks(pool)
	u := func(in []bool) float64 {
		r := 0.0
		for i, ok := range in {
			if ok {
				r += rank[i]
			}
		}
		return r - float64(n1*(n1+1))/2
	}
	obs := make([]bool, n)
	for i := range n1 {
		obs[i] = true
	}
	u0 := u(obs)
	var lo, hi, all int
	in := make([]bool, n)
	var rec func(i, left int)
	rec = func(i, left int) {
		if left == 0 {
			all++
			v := u(in)
			if v <= u0+1e-9 {
				lo++
			}
			if v >= u0-1e-9 {
				hi++
			}
			return
		}
		if n-i < left {
			return
		}
		in[i] = true
		rec(i+1, left-1)
		in[i] = false
		rec(i+1, left)
	}
	rec(0, n1)
	return math.Min(1, 2*float64(min(lo, hi))/float64(all))
}

func midranks(x []float64) []float64 {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case x[a] < x[b]:
			return -1
		case x[a] > x[b]:
			return 1
		}
		return 0
	})
	r := make([]float64, len(x))
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && x[idx[j]] == x[idx[i]] {
			j++
		}
		for k := i; k < j; k++ {
			r[idx[k]] = float64(i+j+1) / 2
		}
		i = j
	}
	return r
}

func TestPExactByEnumeration(t *testing.T) {
	for _, tc := range []struct {
		name       string
		base, cand []float64
	}{
		{"no ties 3v4", []float64{1.1, 2.5, 3.0}, []float64{2.7, 3.3, 4.1, 5.0}},
		{"no ties 5v5 separated", []float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}},
		{"ties 4v5", []float64{1, 2, 2, 3}, []float64{2, 3, 3, 4, 5}},
		{"ties 6v6", []float64{10, 11, 11, 12, 13, 13}, []float64{11, 12, 13, 13, 14, 15}},
		{"heavy ties 5v6", []float64{1, 1, 1, 2, 2}, []float64{1, 2, 2, 2, 3, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := exactP(tc.base, tc.cand)
			if got := Compare(tc.base, tc.cand, 0.95).P; !near(got, want, 1e-9) {
				t.Errorf("P = %.12g, enumeration gives %.12g", got, want)
			}
		})
	}
}

func TestMinPAndNeedN(t *testing.T) {
	// benchstat's table (uTestMinP) and refine-anchors.md: 0.029 at n=4,
	// 0.0079 at n=5, 0.0022 at n=6.
	for n, want := range map[int]float64{1: 1, 2: 1.0 / 3, 3: 0.1, 4: 0.02857142857142857, 5: 0.007936507936507936, 6: 0.0021645021645021645, 8: 0.0001554001554001554} {
		if got := MinP(n, n); !near(got, want, 1e-12) {
			t.Errorf("MinP(%d,%d) = %g, want %g", n, n, got, want)
		}
	}
	// The smallest p is reached by complete separation: check by enumeration.
	if got, want := MinP(3, 5), exactP([]float64{1, 2, 3}, []float64{4, 5, 6, 7, 8}); !near(got, want, 1e-12) {
		t.Errorf("MinP(3,5) = %g, enumeration %g", got, want)
	}
	for alpha, want := range map[float64]int{0.05: 4, 0.01: 5, 0.005: 6, 0.0025: 6, 0.001: 7} {
		if got := NeedN(alpha); got != want {
			t.Errorf("NeedN(%g) = %d, want %d", alpha, got, want)
		}
	}
}

func TestShiftIsMedianOfPairwiseDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		n1, n2 := 2+rng.IntN(12), 2+rng.IntN(12)
		b := seq(n1, func(int) float64 { return rng.NormFloat64() })
		c := seq(n2, func(int) float64 { return 1 + rng.NormFloat64() })
		var d []float64
		for _, x := range b {
			for _, y := range c {
				d = append(d, y-x)
			}
		}
		slices.Sort(d)
		m := len(d)
		want := (d[(m-1)/2] + d[m/2]) / 2
		if got := Compare(b, c, 0.9).Shift.Center; !near(got, want, 1e-12) {
			t.Fatalf("trial %d (n=%d+%d): HL = %g, median of pairwise differences = %g", trial, n1, n2, got, want)
		}
	}
}

// achieved is the exact coverage of the HL interval for n1, n2 at conf:
// 1 − 2·P(U ≤ k−1).
func achieved(n1, n2 int, conf float64) float64 {
	k := hlOrder(n1, n2, conf)
	if k == 0 {
		return 1
	}
	return 1 - 2*mstats.UDist{N1: n1, N2: n2}.CDF(float64(k-1))
}

// Coverage by simulation: with a fixed seed, the HL interval of a planted
// shift and the median intervals must cover the truth about as often as
// their exact confidence says (within 3 standard errors of it), and never
// clearly less often than nominal.
func TestIntervalCoverage(t *testing.T) {
	const trials = 4000
	for _, tc := range []struct{ n1, n2 int }{{6, 6}, {8, 8}, {5, 9}, {12, 12}} {
		rng := rand.New(rand.NewPCG(uint64(tc.n1), uint64(tc.n2)))
		const shift, conf = 0.7, 0.95
		var shiftHit, medHit int
		for range trials {
			b := seq(tc.n1, func(int) float64 { return rng.ExpFloat64() })
			c := seq(tc.n2, func(int) float64 { return shift + rng.ExpFloat64() })
			cmp := Compare(b, c, conf)
			if cmp.Shift.Lo <= shift && shift <= cmp.Shift.Hi {
				shiftHit++
			}
			if med := math.Ln2; cmp.Base.Lo <= med && med <= cmp.Base.Hi {
				medHit++
			}
		}
		want := achieved(tc.n1, tc.n2, conf)
		if want < conf {
			t.Errorf("n=%d+%d: exact coverage %g below nominal %g", tc.n1, tc.n2, want, conf)
		}
		got := float64(shiftHit) / trials
		se := math.Sqrt(want * (1 - want) / trials)
		if math.Abs(got-want) > 3*se {
			t.Errorf("n=%d+%d: HL interval covered the shift in %.4f of %d trials, exact coverage %.4f (±%.4f)", tc.n1, tc.n2, got, trials, want, 3*se)
		}
		if m := float64(medHit) / trials; m < conf-3*math.Sqrt(conf*(1-conf)/trials) {
			t.Errorf("n=%d: median interval covered in %.4f of trials, want ≥ %.2f", tc.n1, m, conf)
		}
		t.Logf("n=%d+%d: HL coverage %.4f (exact %.4f), median coverage %.4f", tc.n1, tc.n2, got, want, float64(medHit)/trials)
	}
}

func TestRelativeShiftIsRatio(t *testing.T) {
	base := []float64{100, 102, 98, 101, 99, 103, 97, 100}
	cand := make([]float64, len(base))
	for i, v := range base {
		cand[i] = 0.9 * v
	}
	c := Compare(base, cand, 0.95)
	if !near(c.Rel.Center, -0.1, 1e-12) {
		t.Errorf("Rel = %g, want -0.1 for a pure 10%% scale change", c.Rel.Center)
	}
	if !(c.Rel.Lo < -0.1 && -0.1 < c.Rel.Hi) {
		t.Errorf("Rel interval [%g, %g] does not hold -0.1", c.Rel.Lo, c.Rel.Hi)
	}
	// Non-positive values fall back to shift / base median.
	z := Compare([]float64{-1, 0, 1, 2}, []float64{1, 2, 3, 4}, 0.9)
	if !near(z.Rel.Center, z.Shift.Center/z.Base.Center, 1e-12) {
		t.Errorf("fallback Rel = %g, want %g", z.Rel.Center, z.Shift.Center/z.Base.Center)
	}
}

func TestTooSmallForInterval(t *testing.T) {
	c := Compare([]float64{1, 2}, []float64{3, 4}, 0.95)
	if c.Shift.Finite() || c.Base.Finite() {
		t.Errorf("n=2+2 at 95%%: intervals %v %v should be unbounded", c.Shift, c.Base)
	}
	if c.MinP != 1.0/3 {
		t.Errorf("MinP = %g", c.MinP)
	}
}

func TestCV(t *testing.T) {
	// mean 5, sample sd sqrt(32/7) for 2,4,4,4,5,5,7,9.
	if got, want := CV([]float64{2, 4, 4, 4, 5, 5, 7, 9}), math.Sqrt(32.0/7)/5; !near(got, want, 1e-12) {
		t.Errorf("CV = %g, want %g", got, want)
	}
	if CV([]float64{3}) != 0 || CV([]float64{4, 4, 4}) != 0 {
		t.Error("CV of one value or of equal values should be 0")
	}
}
