package stats

import (
	"fmt"
	"math"
	"strings"
)

// Rule is the acceptance rule for one primary metric. Dir must be one of
// the two directions: the decision functions panic on the zero value
// rather than guess (check it first with Direction.Check).
type Rule struct {
	Metric    string  // name printed in decision lines, e.g. "p99_ms"
	Alpha     float64 // significance level of the U test, e.g. 0.05
	MinEffect float64 // smallest relative improvement worth keeping, e.g. 0.05
	Dir       Direction
}

// Verdict is the outcome of one decision.
type Verdict int

const (
	// NoDifference: not significant, or significant but the interval does
	// not clear the minimum effect (the Reason says which).
	NoDifference Verdict = iota
	// Better: significant and the relative shift's whole interval lies
	// beyond MinEffect in the better direction.
	Better
	// Worse: significant and the whole interval is on the worse side of 0.
	Worse
	// TooFewSamples: with these n the test cannot reach p < alpha, or the
	// interval is unbounded at the confidence level.
	TooFewSamples
)

func (v Verdict) String() string {
	switch v {
	case Better:
		return "better"
	case Worse:
		return "worse"
	case NoDifference:
		return "no difference"
	case TooFewSamples:
		return "too few samples"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Decision is a verdict with the comparison it rests on.
type Decision struct {
	Verdict    Verdict
	Comparison Comparison
	// Alpha is the level the p-value was held to.
	Alpha float64
	// Reason is one benchstat-style line: metric, n per arm, medians with
	// intervals, the relative shift with its interval, p, and why.
	Reason string
	// Change is what a guard check (Regresses, NonInferior) estimated, in
	// Measure: the relative shift, or for a Count the change per trial.
	Change  float64
	Measure Measure
	// Bound is what a non-inferiority check (NonInferior) bounded: the
	// upper confidence bound of the loss, in Measure's unit (a relative
	// shift, or a Count's change per trial), worse direction positive.
	// LossLow is the same interval's lower bound: a loss shown (not just
	// not excluded) beyond the tolerance has LossLow > Tolerance, the
	// tolerance in the same unit (a Count's is per trial: the bound times
	// the baseline's mean).
	Bound, LossLow, Tolerance float64
}

// Accepted reports whether the candidate is kept.
func (d Decision) Accepted() bool { return d.Verdict == Better }

// Decide compares cand against base under r. The candidate is Better only
// if p < Alpha and the interval of the relative shift lies wholly beyond
// MinEffect in the better direction. Intervals are at confidence 1−Alpha,
// the level dual to the test.
func Decide(base, cand []float64, r Rule) Decision {
	return decide(Compare(base, cand, 1-r.Alpha), r, r.Alpha)
}

// Pair is one candidate of a round with the baseline trials interleaved
// with it.
type Pair struct{ Base, Cand []float64 }

func decide(c Comparison, r Rule, alpha float64) Decision {
	dir := r.Dir.sign()
	d := Decision{Comparison: c, Alpha: alpha}
	rel := c.Rel
	// better/worse bounds of the relative shift, in the rule's direction.
	worstGain, bestGain := dir*rel.Lo, dir*rel.Hi
	if worstGain > bestGain {
		worstGain, bestGain = bestGain, worstGain
	}
	var why string
	switch {
	case c.MinP >= alpha:
		d.Verdict = TooFewSamples
		why = fmt.Sprintf("need ≥ %d samples per arm: the smallest p with n=%d+%d is %.3g ≥ α=%.3g",
			NeedN(alpha), c.NBase, c.NCand, c.MinP, alpha)
	case c.P >= alpha:
		d.Verdict = NoDifference
		why = fmt.Sprintf("not significant: p=%.3g ≥ α=%.3g", c.P, alpha)
	case !rel.Finite():
		d.Verdict = TooFewSamples
		why = fmt.Sprintf("p=%.3g < α but n=%d+%d is too small for a %s interval of the shift",
			c.P, c.NBase, c.NCand, pct(c.Confidence))
	case worstGain > r.MinEffect:
		d.Verdict = Better
		why = fmt.Sprintf("accepted: p=%.3g < α=%.3g and the whole interval is ≥ %s %s",
			c.P, alpha, pct(r.MinEffect), r.Dir.Better())
	case bestGain < 0:
		d.Verdict = Worse
		why = fmt.Sprintf("rejected: worse, p=%.3g < α=%.3g", c.P, alpha)
	default:
		d.Verdict = NoDifference
		why = fmt.Sprintf("rejected: p=%.3g < α=%.3g but the interval does not clear %s %s",
			c.P, alpha, pct(r.MinEffect), r.Dir.Better())
	}
	d.Reason = Line(r.Metric, c) + "  " + why
	return d
}

// Line formats a comparison the way benchstat prints one: metric, medians
// with their intervals, n per arm, the relative shift with its interval, p.
//
//	p99_ms  0.432 [0.410 0.450] → 0.401 [0.390 0.420]  n=8+8  Δ -7.2% [-11.0% -3.1%] (95%)  p=0.003
func Line(metric string, c Comparison) string {
	var b strings.Builder
	if metric != "" {
		b.WriteString(metric + "  ")
	}
	fmt.Fprintf(&b, "%s → %s  n=%d+%d  Δ %s (%s)  p=%.3g",
		ival(c.Base), ival(c.Cand), c.NBase, c.NCand, FormatEffect(c.Rel), pct(c.Confidence), c.P)
	return b.String()
}

func ival(iv Interval) string {
	return fmt.Sprintf("%s [%s %s]", FormatValue(iv.Center), FormatValue(iv.Lo), FormatValue(iv.Hi))
}

// FormatValue prints a measured value the way decision lines and reports
// do: four significant digits, thousands as k and millions as M (so
// throughput reads 98.12k, not 9.812e+04), ±∞ for an unbounded interval
// and — for a missing value.
func FormatValue(x float64) string {
	switch {
	case math.IsNaN(x):
		return "—"
	case math.IsInf(x, 1):
		return "+∞"
	case math.IsInf(x, -1):
		return "-∞"
	case math.Abs(x) >= 1e6:
		return fmt.Sprintf("%.4gM", x/1e6)
	case math.Abs(x) >= 1e4:
		return fmt.Sprintf("%.4gk", x/1e3)
	}
	return fmt.Sprintf("%.4g", x)
}

// FormatEffect prints a relative shift with its interval, the one way a
// decision's effect is written (decision lines, the canary's reasons and
// commit messages): "-7.2% [-11.0% -3.1%]".
func FormatEffect(rel Interval) string {
	return FormatShift(rel.Center) + " [" + FormatShift(rel.Lo) + " " + FormatShift(rel.Hi) + "]"
}

// FormatShift prints a relative shift as a signed percentage: "-7.2%".
func FormatShift(x float64) string {
	switch {
	case math.IsNaN(x):
		return "—"
	case math.IsInf(x, 1):
		return "+∞"
	case math.IsInf(x, -1):
		return "-∞"
	}
	return fmt.Sprintf("%+.1f%%", 100*x)
}

func pct(x float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", 100*x), "0"), ".") + "%"
}

// Measure is how a guard metric's change is measured.
type Measure int8

const (
	// Relative is the relative shift cand/base − 1 (Comparison.Rel's
	// estimate), for timings and throughput, whose changes are
	// multiplicative. Where no ratio exists (a baseline median of 0) the
	// check falls back to Count's reading.
	Relative Measure = iota
	// Count is the absolute change of the mean per trial, for counts
	// such as errors, which are often 0 in the baseline, where a ratio
	// does not exist. The bound is read as a fraction of the baseline's
	// mean, so a bound of 0, or a baseline of 0, tolerates no significant
	// increase at all.
	Count
)

// FormatChange prints a guard's change the one way reports and ledgers
// write it: a Relative shift as FormatShift does ("-7.2%"), a Count's
// change of the mean per trial as a signed number ("+3.75", "+0").
func FormatChange(m Measure, x float64) string {
	if m != Count || math.IsNaN(x) || math.IsInf(x, 0) {
		return FormatShift(x)
	}
	if x == 0 {
		return "+0"
	}
	return fmt.Sprintf("%+.3g", x)
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
