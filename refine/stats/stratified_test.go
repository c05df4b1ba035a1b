package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// One stratum is the two-sample comparison: Effect and P must be
// Compare's Rel and P, and MinP its MinP, in the exact range (no ties,
// n ≤ 50) and with non-positive values (the shift over the base median).
func TestStratifiedOneStratumIsCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, tc := range []struct {
		n1, n2 int
		conf   float64
		offset float64 // subtracted from every value: > 1 makes some ≤ 0
	}{{5, 5, 0.95, 0}, {8, 8, 0.9, 0}, {6, 9, 0.95, 0}, {12, 10, 0.8, 0}, {30, 30, 0.95, 0}, {8, 8, 0.9, 1.05}} {
		for range 20 {
			b := seq(tc.n1, func(int) float64 { return math.Exp(0.1*rng.NormFloat64()) - tc.offset })
			c := seq(tc.n2, func(int) float64 { return 0.95*math.Exp(0.1*rng.NormFloat64()) - tc.offset })
			want := Compare(b, c, tc.conf)
			got := Stratified([]Pair{{b, c}}, tc.conf)
			if got.Effect != want.Rel || !near(got.P, want.P, 1e-9) || !near(got.MinP, want.MinP, 1e-12) {
				t.Fatalf("n=%d+%d conf %g offset %g: Stratified effect %v p %.6g minP %.6g; Compare Rel %v p %.6g minP %.6g",
					tc.n1, tc.n2, tc.conf, tc.offset, got.Effect, got.P, got.MinP, want.Rel, want.P, want.MinP)
			}
			if got.N != [2]int{tc.n1, tc.n2} || got.Strata != 1 {
				t.Fatalf("N %v strata %d", got.N, got.Strata)
			}
		}
	}
}

// enumU returns every value of U_total over all relabelings of base and
// cand within each stratum: the permutation distribution, by brute force.
func enumU(strata []Pair) []float64 {
	out := []float64{0}
	for _, s := range strata {
		all := append(append([]float64{}, s.Base...), s.Cand...)
		n, n1 := len(all), len(s.Base)
		var us []float64
		for mask := range 1 << n {
			if popcount(mask) != n1 {
				continue
			}
			var b, c []float64
			for i, v := range all {
				if mask&(1<<i) != 0 {
					b = append(b, v)
				} else {
					c = append(c, v)
				}
			}
			us = append(us, mannWhitneyU(b, c))
		}
		var next []float64
		for _, u := range out {
			for _, v := range us {
				next = append(next, u+v)
			}
		}
		out = next
	}
	return out
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// The exact p of equal strata is the permutation p-value of U_total
// (relabelling within strata), computed here by enumeration, and the
// interval's order k is the largest with P(U_total ≤ k−1) ≤ α/2 under the
// same enumeration.
func TestStratifiedExactByEnumeration(t *testing.T) {
	strata := []Pair{
		{Base: []float64{1.0, 1.3, 0.9, 1.2}, Cand: []float64{0.8, 0.85, 1.1, 0.7}},
		{Base: []float64{5.1, 4.8, 5.5, 5.0}, Cand: []float64{4.2, 4.9, 4.4, 4.6}},
		{Base: []float64{2.2, 2.0, 2.5, 2.1}, Cand: []float64{1.9, 2.05, 1.7, 1.8}},
	}
	all := enumU(strata)
	var u, m float64
	for _, s := range strata {
		u += mannWhitneyU(s.Base, s.Cand)
		m += float64(len(s.Base) * len(s.Cand))
	}
	small := math.Min(u, m-u)
	le := 0
	for _, v := range all {
		if v <= small {
			le++
		}
	}
	want := math.Min(1, 2*float64(le)/float64(len(all)))
	got := Stratified(strata, 0.9)
	if !near(got.P, want, 1e-12) {
		t.Errorf("P = %.12g, enumeration %.12g", got.P, want)
	}
	if mp := 2 / float64(len(all)); !near(got.MinP, mp, 1e-12) {
		t.Errorf("MinP = %.12g, want %.12g", got.MinP, mp)
	}
	for _, conf := range []float64{0.8, 0.9, 0.95} {
		k := 0
		for {
			below := 0
			for _, v := range all {
				if v <= float64(k) { // P(U ≤ (k+1)−1)
					below++
				}
			}
			if float64(below)/float64(len(all)) > (1-conf)/2 {
				break
			}
			k++
		}
		if got := stratNull(strata).order(conf); got != k {
			t.Errorf("conf %g: order %d, enumeration %d", conf, got, k)
		}
	}
}

// A background level that moves both arms must not look like an effect:
// with strata at very different scales and a planted common effect, the
// stratified interval covers the effect at least as often as its
// confidence (within simulation error), whichever test runs: exact with
// equal strata, van Elteren with unequal ones.
func TestStratifiedCoverage(t *testing.T) {
	const sims, conf, effect = 2000, 0.9, -0.15
	for _, sizes := range [][2]int{{6, 6}, {5, 8}} {
		rng := rand.New(rand.NewPCG(uint64(sizes[0]), 9))
		hits := 0
		for range sims {
			var strata []Pair
			for l, scale := range []float64{1, 3, 10} {
				n1, n2 := sizes[0], sizes[0]
				if l == 1 {
					n2 = sizes[1]
				}
				b := seq(n1, func(int) float64 { return scale * math.Exp(0.1*rng.NormFloat64()) })
				c := seq(n2, func(int) float64 { return scale * (1 + effect) * math.Exp(0.1*rng.NormFloat64()) })
				strata = append(strata, Pair{b, c})
			}
			e := Stratified(strata, conf).Effect
			if e.Lo <= effect && effect <= e.Hi {
				hits++
			}
		}
		got := float64(hits) / sims
		floor := conf - 3*math.Sqrt(conf*(1-conf)/sims)
		t.Logf("strata n=%v: coverage %.4f at %g", sizes, got, conf)
		if got < floor {
			t.Errorf("strata n=%v: the %g interval covered the common effect in %.4f of %d, want ≥ %.4f", sizes, conf, got, sims, floor)
		}
	}
}

// Under the null, van Elteren's test (unequal strata, ties) rejects at
// about its level, and a common shift is found.
func TestVanElteren(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const sims = 3000
	rejects := 0
	draw := func(n int, shift float64) []float64 {
		return seq(n, func(int) float64 { return math.Round(4*rng.NormFloat64()+shift) / 4 })
	}
	for range sims {
		strata := []Pair{{draw(6, 0), draw(9, 0)}, {draw(10, 5), draw(7, 5)}, {draw(8, 2), draw(8, 2)}}
		if Stratified(strata, 0.95).P < 0.05 {
			rejects++
		}
	}
	rate := float64(rejects) / sims
	t.Logf("van Elteren under the null with ties: rejected %.4f at 0.05", rate)
	if rate < 0.03 || rate > 0.07 {
		t.Errorf("van Elteren rejected %.4f of null samples at α 0.05", rate)
	}
	strata := []Pair{
		{[]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10, 11}},
		{[]float64{21, 22, 23, 24, 25, 26, 27}, []float64{28, 29, 30}},
	}
	cm := Stratified(strata, 0.95)
	if !(cm.P < 0.01) || cm.MinP > cm.P*(1+1e-9) {
		t.Errorf("separated strata: p %g, minP %g", cm.P, cm.MinP)
	}
}

func TestStratifiedEmpty(t *testing.T) {
	cm := Stratified(nil, 0.95)
	if cm.P != 1 || !math.IsNaN(cm.Effect.Center) {
		t.Errorf("no strata: %+v", cm)
	}
	cm = Stratified([]Pair{{Base: []float64{1, 2}}, {Base: []float64{1}, Cand: []float64{2}}}, 0.95)
	if cm.N != [2]int{3, 1} || cm.Effect.Center != 1 || cm.Effect.Finite() {
		t.Errorf("one comparable pair: %+v", cm)
	}
}
