package stats

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/stat/distuv"
)

// Proportion is x/n with its Clopper–Pearson (exact binomial) interval.
func Proportion(x, n int, confidence float64) Interval {
	if n == 0 {
		return Interval{0, math.NaN(), 1}
	}
	a := (1 - confidence) / 2
	iv := Interval{0, float64(x) / float64(n), 1}
	if x > 0 {
		iv.Lo = distuv.Beta{Alpha: float64(x), Beta: float64(n - x + 1)}.Quantile(a)
	}
	if x < n {
		iv.Hi = distuv.Beta{Alpha: float64(x + 1), Beta: float64(n - x)}.Quantile(1 - a)
	}
	return iv
}

// UpperBound is the one-sided Clopper–Pearson upper bound of a rate seen x
// times in n at the confidence level: the bound a rate test holds to ("at
// most 5%, with 95% confidence"). 0 of 59 gives 4.95% at 95%, 0 of 60
// two-sided (Proportion) still 6%.
func UpperBound(x, n int, confidence float64) float64 {
	return Proportion(x, n, 2*confidence-1).Hi
}

// SimulateFinal measures how often plan keeps a candidate whose true
// relative improvement is effect at every one of strata levels, when one
// trial's value is lognormal with coefficient of variation cv: runs
// simulated finals, each stopping at the first look that keeps or drops,
// no guards. It returns the share kept with its 95% Clopper–Pearson
// interval. With effect 0 a keep is a false keep; at effect ≥ MinEffect it
// is the power. Deterministic for a given seed.
func SimulateFinal(plan Sequential, strata int, cv, effect float64, runs int, seed uint64) Interval {
	if plan.Check() != nil || strata < 1 || runs < 1 {
		return Interval{math.NaN(), math.NaN(), math.NaN()}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0xf1a1))
	sigma := math.Sqrt(math.Log1p(cv * cv))
	draw := func(x []float64, n int, scale float64) []float64 {
		for range n {
			x = append(x, scale*math.Exp(sigma*rng.NormFloat64()-sigma*sigma/2))
		}
		return x
	}
	scale := 1 + plan.Rule.Dir.sign()*effect
	keeps := 0
	for range runs {
		ps := make([]Pair, strata)
		have := 0
		for k, n := range plan.Looks {
			for l := range ps {
				ps[l].Base = draw(ps[l].Base, n-have, 1)
				ps[l].Cand = draw(ps[l].Cand, n-have, scale)
			}
			have = n
			lk := plan.Look(k, ps, nil, nil)
			if lk.Outcome == Keep {
				keeps++
			}
			if lk.Outcome != Continue {
				break
			}
		}
	}
	return Proportion(keeps, runs, 0.95)
}
