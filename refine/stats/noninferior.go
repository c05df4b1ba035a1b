package stats

import (
	"fmt"
	"math"

	mstats "github.com/aclements/go-moremath/stats"
)

// NonInferior reports whether cand's loss against base, in dir, is within
// tolerance with one-sided confidence 1−alpha: the upper bound of the loss
// (the worse-direction bound of the interval at confidence 1−2·alpha) is ≤
// tolerance.
//
// This is "harm excluded", not "no evidence of harm": a small or noisy
// sample cannot pass by failing to show a loss, and the burden lies on the
// candidate. tolerance is a magnitude in the worse direction (0.05 and
// −0.05 both mean "5% worse").
//
// For a Relative measure the loss is read from Comparison.Rel. A Count
// (errors), and a Relative measure whose baseline median is 0 (no ratio
// exists), is read as an absolute change per trial, from the
// Hodges–Lehmann Shift interval, with the tolerance taken as a fraction
// of the baseline's mean: a baseline without errors tolerates no increase
// at all. The Decision's Verdict is NoDifference when the loss is within
// tolerance, Worse when harm is not excluded, TooFewSamples when the
// interval is unbounded at these n (not non-inferior either); Change is
// the estimate, Bound and LossLow the loss's bounds, Tolerance the
// tolerance, Measure their unit.
func NonInferior(base, cand []float64, dir Direction, m Measure, tolerance, alpha float64) (bool, Decision) {
	d, _, _ := nonInferior("", base, cand, dir, m, tolerance, alpha)
	return d.Verdict == NoDifference, d
}

// nonInferior is NonInferior with the metric's name for the Reason,
// returning for the futility rule also the loss's whole interval (lower
// bound, estimate, upper bound; worse direction positive) and the
// tolerance in the decision's unit (a Count's is per trial).
func nonInferior(metric string, base, cand []float64, dir Direction, m Measure, tolerance, alpha float64) (Decision, Interval, float64) {
	sign := dir.sign()
	conf := 1 - 2*alpha
	c := Compare(base, cand, conf)
	tol := math.Abs(tolerance)
	d := Decision{Comparison: c, Alpha: alpha, Measure: m}
	est := c.Rel
	head := fmt.Sprintf("%s → %s  n=%d+%d", FormatValue(c.Base.Center), FormatValue(c.Cand.Center), c.NBase, c.NCand)
	if m == Count || math.IsNaN(c.Rel.Center) {
		// Counts compare absolute rates, whose change exists when the
		// baseline saw none.
		mb, mc := mean(base), mean(cand)
		d.Measure, est = Count, c.Shift
		tol *= math.Abs(mb)
		head = fmt.Sprintf("mean %s → %s per trial  n=%d+%d", FormatValue(mb), FormatValue(mc), c.NBase, c.NCand)
	}
	if metric != "" {
		head = metric + "  " + head
	}
	loss := Interval{-sign * est.Hi, -sign * est.Center, -sign * est.Lo}
	if loss.Lo > loss.Hi {
		loss.Lo, loss.Hi = loss.Hi, loss.Lo
	}
	d.Change, d.Bound, d.LossLow, d.Tolerance = est.Center, loss.Hi, loss.Lo, tol
	amount := func(x float64) string {
		if d.Measure == Count {
			return FormatChange(Count, x) + " per trial"
		}
		return pct(x)
	}
	head += "  Δ " + FormatChange(d.Measure, d.Change)
	bound := fmt.Sprintf("(%s bound)", pct(1-alpha))
	switch {
	case len(base) == 0 || len(cand) == 0 || math.IsNaN(loss.Hi) || math.IsInf(loss.Hi, 0):
		d.Verdict = TooFewSamples
		d.Reason = fmt.Sprintf("%s  harm not excluded: needs ≥ %d samples per arm for a %s bound",
			head, needForBound(conf), pct(1-alpha))
	case loss.Hi > tol:
		d.Verdict = Worse
		d.Reason = fmt.Sprintf("%s  loss up to %s %s, beyond %s", head, amount(loss.Hi), bound, amount(tol))
	default:
		d.Verdict = NoDifference
		if loss.Hi < 0 {
			d.Reason = fmt.Sprintf("%s  gain ≥ %s %s", head, amount(-loss.Hi), bound)
		} else {
			d.Reason = fmt.Sprintf("%s  loss ≤ %s %s within %s", head, amount(loss.Hi), bound, amount(tol))
		}
	}
	return d, loss, tol
}

// needForBound is the smallest n per arm (equal arms) for which the
// Hodges–Lehmann interval at the confidence level is bounded.
func needForBound(confidence float64) int {
	n := 1
	for hlOrder(n, n, confidence) < 1 && n < 1000 {
		n++
	}
	return n
}

// NonInferiorN is the n per arm with which NonInferior, at one-sided level
// alpha, shows a metric whose true loss is none to be within tolerance
// with the given power, at noise cv (σ of log values): the one-sided
// bound must come below ln(1+tolerance), the Hodges–Lehmann estimate of a
// log shift having variance ≈ (π/3)·2σ²/n. One trial is added for the
// rank statistics' discreteness. 0 when an argument is out of range.
func NonInferiorN(cv, tolerance, alpha, power float64) int {
	if !(cv > 0 && tolerance > 0 && alpha > 0 && alpha < 1 && power > 0 && power < 1) {
		return 0
	}
	z := mstats.StdNormal.InvCDF(1-alpha) + mstats.StdNormal.InvCDF(power)
	margin := math.Log1p(tolerance)
	return int(math.Ceil(z*z*(math.Pi/3)*2*math.Log1p(cv*cv)/(margin*margin))) + 1
}
