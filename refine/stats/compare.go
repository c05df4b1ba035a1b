package stats

import (
	"math"
	"slices"

	"github.com/aclements/go-moremath/mathx"
	mstats "github.com/aclements/go-moremath/stats"
	"golang.org/x/perf/benchmath"
)

// Interval is a point estimate with a confidence interval. Lo or Hi is
// infinite when the sample is too small for the requested confidence.
type Interval struct{ Lo, Center, Hi float64 }

// Finite reports whether both bounds are finite.
func (iv Interval) Finite() bool { return !math.IsInf(iv.Lo, 0) && !math.IsInf(iv.Hi, 0) }

// Comparison is a two-sample comparison of a baseline and a candidate.
type Comparison struct {
	NBase, NCand int
	// Confidence is the level of every interval below, e.g. 0.95.
	Confidence float64
	// Base and Cand are the medians with distribution-free intervals
	// (order statistics of the binomial, as benchstat reports them).
	Base, Cand Interval
	// Shift is the Hodges–Lehmann estimate of cand − base (the median of
	// all pairwise differences) with its distribution-free interval,
	// inverted from the Mann–Whitney distribution (Hollander & Wolfe): the
	// k-th smallest and largest differences, k from the null distribution
	// of U without ties (exact while both n ≤ 50, normal beyond). With
	// ties in the data the interval's coverage is approximate.
	Shift Interval
	// Rel is the relative shift cand/base − 1: the Hodges–Lehmann estimate
	// of the ratio (median of all pairwise ratios) with the interval from
	// the same order statistics, i.e. the shift of log values. Timings are
	// multiplicative, so this is the interval a relative threshold such as
	// "5%" is checked against. If any value is ≤ 0 it falls back to
	// Shift divided by the base median.
	Rel Interval
	// P is the two-sided Mann–Whitney U p-value: exact (conditional on
	// ties, Klotz's algorithm) while both arms have ≤ 25 samples, or ≤ 50
	// without ties; beyond that the normal approximation with tie and
	// continuity correction.
	P float64
	// MinP is the smallest p-value the test can reach with these n: a
	// comparison with MinP ≥ alpha can never be significant.
	MinP float64
}

// Compare compares base and cand at the given confidence level (e.g. 0.95).
// The inputs are not modified.
func Compare(base, cand []float64, confidence float64) Comparison {
	b, c := sorted(base), sorted(cand)
	cmp := Comparison{
		NBase:      len(b),
		NCand:      len(c),
		Confidence: confidence,
		Base:       Median(b, confidence),
		Cand:       Median(c, confidence),
		P:          1,
		MinP:       MinP(len(b), len(c)),
	}
	if len(b) > 0 && len(c) > 0 {
		th := benchmath.DefaultThresholds
		// benchmath reports P=1 (with a warning) when every value is equal
		// or an arm is empty; that is the honest p for "no difference seen".
		cmp.P = benchmath.AssumeNothing.Compare(benchmath.NewSample(b, &th), benchmath.NewSample(c, &th)).P
	}
	k := hlOrder(len(b), len(c), confidence)
	cmp.Shift = pairwise(b, c, k, func(x, y float64) float64 { return y - x })
	if len(b) > 0 && b[0] > 0 && len(c) > 0 && c[0] > 0 {
		cmp.Rel = pairwise(b, c, k, func(x, y float64) float64 { return y/x - 1 })
	} else if m := cmp.Base.Center; m != 0 {
		cmp.Rel = Interval{cmp.Shift.Lo / math.Abs(m), cmp.Shift.Center / math.Abs(m), cmp.Shift.Hi / math.Abs(m)}
	} else {
		cmp.Rel = Interval{math.Inf(-1), math.NaN(), math.Inf(1)}
	}
	return cmp
}

func sorted(x []float64) []float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s
}

// Median is the sample median of x with its distribution-free interval at
// the confidence level, from benchmath (±∞ bounds when n is too small for
// the confidence). x is not modified.
func Median(x []float64, confidence float64) Interval {
	s := sorted(x)
	if len(s) == 0 {
		return Interval{math.NaN(), math.NaN(), math.NaN()}
	}
	th := benchmath.DefaultThresholds
	sum := benchmath.AssumeNothing.Summary(benchmath.NewSample(s, &th), confidence)
	return Interval{sum.Lo, sum.Center, sum.Hi}
}

// MinP is the smallest two-sided Mann–Whitney p-value reachable with n1 and
// n2 samples: both arms completely separated, probability 2/C(n1+n2, n1).
// benchstat's "need >= N samples" is MinP > alpha.
func MinP(n1, n2 int) float64 {
	if n1 == 0 || n2 == 0 {
		return 1
	}
	return math.Min(1, 2*math.Exp(-mathx.Lchoose(n1+n2, n1)))
}

// NeedN is the smallest number of samples per arm (equal arms) with which
// the Mann–Whitney test can reach p < alpha; 0 if alpha ≤ 0.
func NeedN(alpha float64) int {
	if alpha <= 0 {
		return 0
	}
	n := 1
	for MinP(n, n) >= alpha {
		n++
	}
	return n
}

// hlOrder returns the 1-based order k such that the k-th smallest and the
// k-th largest of the n1·n2 pairwise differences bound the Hodges–Lehmann
// interval at the confidence level: the largest k with P(U ≤ k−1) ≤ α/2
// under the null Mann–Whitney distribution (no ties). 0 means the sample is
// too small for that confidence and the interval is unbounded.
func hlOrder(n1, n2 int, confidence float64) int {
	m := n1 * n2
	if m == 0 {
		return 0
	}
	half := (1 - confidence) / 2
	if n1 > mstats.MannWhitneyExactLimit || n2 > mstats.MannWhitneyExactLimit {
		sd := math.Sqrt(float64(m) * float64(n1+n2+1) / 12)
		z := mstats.StdNormal.InvCDF(1 - half)
		k := int(math.Floor(float64(m)/2 + 0.5 - z*sd))
		return max(k, 0)
	}
	cdf := uCDF(n1, n2)
	k := 0
	for k < len(cdf) && cdf[k] <= half*(1+1e-12) {
		k++
	}
	// P(U ≤ k−1) ≤ half for this k; k never exceeds m/2 at confidence > 0.
	return k
}

// uCDF returns P(U ≤ u) for u = 0..n1·n2 under the null hypothesis,
// without ties. moremath has the distribution but not its quantiles: every
// CDF call there recomputes the table, so this builds it once, with the
// recurrence of Mann and Whitney (1947) on where the largest value falls —
// c(a, b, u) = c(a−1, b, u−b) + c(a, b−1, u) — adding only positive counts.
func uCDF(n1, n2 int) []float64 {
	m := n1 * n2
	cur := make([][]float64, n1+1) // cur[a][u] = c(a, b, u) for the current b
	for a := range cur {
		cur[a] = make([]float64, m+1)
		cur[a][0] = 1 // b = 0
	}
	for b := 1; b <= n2; b++ {
		// c(a, b, ·) needs c(a−1, b, ·) (already updated) and c(a, b−1, ·)
		// (not yet): sweeping a upward updates in place.
		for a := 1; a <= n1; a++ {
			prev, row := cur[a-1], cur[a]
			for u := a * b; u >= b; u-- {
				row[u] += prev[u-b]
			}
		}
	}
	cdf := cur[n1]
	total := 0.0
	for u := range cdf {
		total += cdf[u]
		cdf[u] = total
	}
	for u := range cdf {
		cdf[u] /= total
	}
	return cdf
}

// pairwise returns the median of f(b_i, c_j) over all pairs and the interval
// between its k-th smallest and k-th largest values.
func pairwise(b, c []float64, k int, f func(x, y float64) float64) Interval {
	if len(b) == 0 || len(c) == 0 {
		return Interval{math.NaN(), math.NaN(), math.NaN()}
	}
	d := make([]float64, 0, len(b)*len(c))
	for _, x := range b {
		for _, y := range c {
			d = append(d, f(x, y))
		}
	}
	slices.Sort(d)
	return orderInterval(d, k)
}
