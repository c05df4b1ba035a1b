package stats

import (
	"math"
	"slices"

	mstats "github.com/aclements/go-moremath/stats"
)

// Common is a candidate's common relative effect over a baseline across
// strata (the background levels of a ladder): one test of one effect
// instead of one test per level, so the levels neither multiply the cost
// of the decision nor its multiplicity correction.
type Common struct {
	Strata     int
	N          [2]int // per arm (base, cand), summed over strata
	Confidence float64
	// Effect is cand/base − 1, common to all strata: the stratified
	// Hodges–Lehmann estimate (the median of the within-stratum pairwise
	// ratios of every stratum) with the interval inverted from the null
	// distribution of U_total = Σ_s U_s. Lo or Hi is infinite when the
	// strata are too small for the confidence.
	Effect Interval
	// P is the two-sided p-value of the stratified rank-sum test: exact
	// (the convolution of the strata's Mann–Whitney distributions) when
	// every stratum has the same sizes, no ties and at most 50 per arm;
	// van Elteren's weighted statistic with its normal approximation
	// otherwise.
	P float64
	// MinP is the smallest two-sided p-value the test can reach with these
	// n: complete separation in every stratum.
	MinP float64
}

// Stratified estimates and tests the common relative effect of the
// candidate over the baseline across strata at the confidence level (e.g.
// 0.95). Comparisons are made only within a stratum, so a background
// level that moves both arms cannot masquerade as an effect.
//
// The estimate is the stratified Hodges–Lehmann estimator on log values:
// pool the differences log(c_j) − log(b_i) within every stratum; the
// centre is their median and the interval runs from the k-th smallest to
// the k-th largest, k from the null distribution of U_total. Ratios and
// log differences have the same order statistics, so the pooled ratios
// c_j/b_i − 1 are used directly (an even count's centre is the mean of the
// middle two ratios, as Compare's Rel is): with one stratum Effect and P
// are Compare's Rel and P. If any value is ≤ 0 no ratio exists and the
// differences c_j − b_i are used instead, divided by the pooled baseline
// median.
func Stratified(strata []Pair, confidence float64) Common {
	cm := Common{Strata: len(strata), Confidence: confidence, P: 1, MinP: 1}
	positive := true
	var pooledBase []float64
	for _, s := range strata {
		cm.N[0] += len(s.Base)
		cm.N[1] += len(s.Cand)
		pooledBase = append(pooledBase, s.Base...)
		for _, v := range slices.Concat(s.Base, s.Cand) {
			if !(v > 0) {
				positive = false
			}
		}
	}
	nan := Interval{math.NaN(), math.NaN(), math.NaN()}
	cm.Effect = nan
	null := stratNull(strata)
	if null.m == 0 {
		return cm
	}
	cm.P, cm.MinP = null.p, null.minP
	d := make([]float64, 0, null.m)
	scale := 1.0
	f := func(x, y float64) float64 { return y/x - 1 }
	if !positive {
		f = func(x, y float64) float64 { return y - x }
		scale = math.Abs(mid(pooledBase))
	}
	for _, s := range strata {
		for _, x := range s.Base {
			for _, y := range s.Cand {
				d = append(d, f(x, y))
			}
		}
	}
	slices.Sort(d)
	iv := orderInterval(d, null.order(confidence))
	if !positive {
		if scale == 0 {
			return cm
		}
		iv = Interval{iv.Lo / scale, iv.Center / scale, iv.Hi / scale}
	}
	cm.Effect = iv
	return cm
}

// orderInterval is the median of the sorted d and the interval between its
// k-th smallest and k-th largest values (unbounded for k = 0).
func orderInterval(d []float64, k int) Interval {
	m := len(d)
	center := d[m/2]
	if m%2 == 0 {
		center = (d[m/2-1] + d[m/2]) / 2
	}
	iv := Interval{math.Inf(-1), center, math.Inf(1)}
	if k >= 1 {
		iv.Lo, iv.Hi = d[k-1], d[m-k]
	}
	return iv
}

// stratNullDist is the null distribution of a stratified rank-sum test for
// one set of strata: either the exact distribution of U_total (cdf) or the
// normal approximation of U_total (mean, sd), with the test's p-values.
type stratNullDist struct {
	m        int       // number of within-stratum pairs, Σ n1·n2
	cdf      []float64 // exact P(U_total ≤ u) for u ≤ m/2, nil when approximated
	mean, sd float64   // of U_total, for the approximation
	p, minP  float64
}

// order is the 1-based order k of the Hodges–Lehmann interval at the
// confidence level: the largest k with P(U_total ≤ k−1) ≤ (1−confidence)/2;
// 0 when the strata are too small for it.
func (nd stratNullDist) order(confidence float64) int {
	half := (1 - confidence) / 2
	if nd.cdf == nil {
		z := mstats.StdNormal.InvCDF(1 - half)
		return max(int(math.Floor(nd.mean+0.5-z*nd.sd)), 0)
	}
	k := 0
	for k < len(nd.cdf) && nd.cdf[k] <= half*(1+1e-12) {
		k++
	}
	return k
}

// stratNull builds the null distribution of U_total for the strata and
// the test's p-value. Strata with an empty arm carry no comparison and are
// skipped.
func stratNull(strata []Pair) stratNullDist {
	var nd stratNullDist
	var used []Pair
	for _, s := range strata {
		if len(s.Base) > 0 && len(s.Cand) > 0 {
			used = append(used, s)
			nd.m += len(s.Base) * len(s.Cand)
		}
	}
	if nd.m == 0 {
		nd.p, nd.minP = 1, 1
		return nd
	}
	n1, n2 := len(used[0].Base), len(used[0].Cand)
	exact := n1 <= mstats.MannWhitneyExactLimit && n2 <= mstats.MannWhitneyExactLimit
	for _, s := range used {
		exact = exact && len(s.Base) == n1 && len(s.Cand) == n2 && !hasTies(s)
	}
	uTotal := 0.0
	for _, s := range used {
		uTotal += mannWhitneyU(s.Base, s.Cand)
	}
	for _, s := range used {
		a, b := float64(len(s.Base)), float64(len(s.Cand))
		nd.mean += a * b / 2
		nd.sd += a * b * (a + b + 1) / 12
	}
	nd.sd = math.Sqrt(nd.sd)
	if exact {
		// The strata are independent under the null, so the distribution
		// of U_total is the convolution of theirs.
		// The distribution is symmetric about m/2, and the p-value and the
		// interval's order read only its lower half: the convolution
		// stops there.
		one := pmf(uCDF(n1, n2))
		dist := []float64{1}
		for range used {
			dist = convolve(dist, one, nd.m/2)
		}
		cdf := make([]float64, len(dist))
		acc := 0.0
		for u, p := range dist {
			acc += p
			cdf[u] = acc
		}
		nd.cdf = cdf
		// Two-sided as moremath's exact U test: the distribution is
		// symmetric, so twice the tail of the smaller of U and m − U.
		small := math.Min(uTotal, float64(nd.m)-uTotal)
		if uTotal == float64(nd.m)-uTotal {
			nd.p = 1
		} else {
			nd.p = math.Min(1, 2*cdf[int(small)])
		}
		nd.minP = math.Min(1, 2*cdf[0])
		return nd
	}
	// van Elteren: the rank sums weighted by 1/(n_s+1), which makes every
	// stratum's contribution comparable whatever its size (locally most
	// powerful for a common shift); ties by mid-ranks with their variance
	// correction. U_s and the rank sum differ by a constant, so the
	// weighted U is used.
	var t, mean, v, sep float64
	for _, s := range used {
		a, b := float64(len(s.Base)), float64(len(s.Cand))
		n := a + b
		w := 1 / (n + 1)
		t += w * mannWhitneyU(s.Base, s.Cand)
		mean += w * a * b / 2
		ties := tieSum(slices.Concat(s.Base, s.Cand))
		v += w * w * a * b * ((n + 1) - ties/(n*(n-1))) / 12
		sep += w * a * b / 2
	}
	if v <= 0 {
		nd.p, nd.minP = 1, 1
		return nd
	}
	sd := math.Sqrt(v)
	z := (t - mean) / sd
	nd.p = math.Min(1, 2*mstats.StdNormal.CDF(-math.Abs(z)))
	// Complete separation without ties (its variance is the untied one).
	v0 := 0.0
	for _, s := range used {
		a, b := float64(len(s.Base)), float64(len(s.Cand))
		w := 1 / (a + b + 1)
		v0 += w * w * a * b * (a + b + 1) / 12
	}
	nd.minP = math.Min(1, 2*mstats.StdNormal.CDF(-sep/math.Sqrt(v0)))
	return nd
}

// mannWhitneyU counts the pairs with cand > base, ties counting one half:
// the number of pairwise differences above 0, the statistic the
// Hodges–Lehmann interval inverts.
func mannWhitneyU(base, cand []float64) float64 {
	u := 0.0
	for _, x := range base {
		for _, y := range cand {
			switch {
			case y > x:
				u++
			case y == x:
				u += 0.5
			}
		}
	}
	return u
}

func hasTies(s Pair) bool {
	all := sorted(slices.Concat(s.Base, s.Cand))
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return true
		}
	}
	return false
}

// tieSum is Σ (t³ − t) over the groups of tied values of x.
func tieSum(x []float64) float64 {
	s := sorted(x)
	sum := 0.0
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		t := float64(j - i)
		sum += t*t*t - t
		i = j
	}
	return sum
}

// pmf turns a CDF over 0..m into its probability mass function.
func pmf(cdf []float64) []float64 {
	p := make([]float64, len(cdf))
	prev := 0.0
	for i, c := range cdf {
		p[i] = c - prev
		prev = c
	}
	return p
}

// convolve returns the convolution of a and b up to index limit.
func convolve(a, b []float64, limit int) []float64 {
	out := make([]float64, min(len(a)+len(b)-1, limit+1))
	for i, x := range a {
		if x == 0 || i >= len(out) {
			continue
		}
		for j, y := range b[:min(len(b), len(out)-i)] {
			out[i+j] += x * y
		}
	}
	return out
}
