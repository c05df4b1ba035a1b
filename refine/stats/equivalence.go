package stats

import (
	"fmt"
	"math"

	mstats "github.com/aclements/go-moremath/stats"
)

// Equivalence is the plan of an equivalence test: does a profile change the
// primary metric by no more than Margin either way? A superiority final
// cannot answer that: it stops for futility as soon as a gain of the
// minimum effect is out of reach, which says nothing about whether the
// difference is small. Equivalence is shown by two one-sided tests (TOST):
// the common effect's interval at confidence 1−2α lies within
// [−Margin, +Margin]. Looked at group-sequentially, each look's interval
// is a repeated confidence interval at that look's nominal level from the
// α-spending rule (Sequential's plan: Looks, Taken), so the chance of
// claiming equivalence when the true effect lies beyond the margin stays
// at most Rule.Alpha over all looks.
type Equivalence struct {
	// Plan holds Rule.Alpha (each one-sided test's level), Rule.Metric and
	// Rule.Dir, and the looks; MinEffect and Harm are not used.
	Plan Sequential
	// Margin is the relative change tolerated either way, e.g. 0.03.
	Margin float64
}

// EquivalenceLook is what one look of an equivalence test found.
type EquivalenceLook struct {
	Index   int     // 0-based
	Alpha   float64 // the look's nominal one-sided level
	Spent   float64 // the α spent by this look, cumulative
	Common  Common  // at confidence 1−2·Alpha
	Outcome Finding // Equivalent, Different or Pending; NotShown at the last look
	Reason  string  // one line: why
}

// Finding is what an equivalence look decides.
type Finding int8

const (
	// Pending: run the next look's trials.
	Pending Finding = iota
	// Equivalent: the interval lies within ±Margin.
	Equivalent
	// Different: the interval lies wholly beyond +Margin or −Margin; the
	// difference is shown larger than the margin.
	Different
	// NotShown: the last look's interval reaches past the margin without
	// lying beyond it.
	NotShown
)

func (v Finding) String() string {
	switch v {
	case Pending:
		return "continue"
	case Equivalent:
		return "equivalent"
	case Different:
		return "different"
	case NotShown:
		return "not shown"
	}
	return fmt.Sprintf("Finding(%d)", int(v))
}

// Check returns an error wrapping ErrPlan unless e can be run: the plan's
// Check, and 0 < Margin < 1.
func (e Equivalence) Check() error {
	if !(e.Margin > 0 && e.Margin < 1) {
		return fmt.Errorf("equivalence: margin %g not in (0, 1): %w", e.Margin, ErrPlan)
	}
	if err := e.Plan.Check(); err != nil {
		return fmt.Errorf("equivalence: %w", err)
	}
	return nil
}

// Resize is the plan after look k with its last look at n, and a look
// halfway there when it falls at least two trials per arm after look k:
// a check that is clearly equivalent (or different) by then stops at half
// the cost, for a little more n at the last look than one look would
// need. n must be chosen blind to the difference between the arms (from
// the noise within each arm); the looks taken keep the α they spent
// (Sequential.Resize).
func (e Equivalence) Resize(k, n int) (Equivalence, error) {
	// The halfway look is dropped when the plan cannot hold it: too many
	// looks, or less α spent there than the looks taken spent.
	if mid := n / 2 &^ 1; k >= 0 && k < len(e.Plan.Looks) && mid >= e.Plan.Looks[k]+2 && mid < n {
		if p, err := e.Plan.Resize(k, mid, n); err == nil {
			e.Plan = p
			return e, nil
		}
	}
	p, err := e.Plan.Resize(k, n)
	if err != nil {
		return e, err
	}
	e.Plan = p
	return e, nil
}

// Look decides look k (0-based) from the primary metric's trials per
// stratum. Equivalent when the common effect's interval at 1−2·Alpha (the
// look's nominal level) lies within ±Margin; Different when it lies wholly
// beyond one of them (a stop the α spending allows too: the interval
// excludes every effect within the margin); otherwise the next look, or
// NotShown at the last. Panics on a plan that does not pass Check.
func (e Equivalence) Look(k int, strata []Pair) EquivalenceLook {
	if err := e.Check(); err != nil {
		panic("stats: " + err.Error())
	}
	s := e.Plan
	if k < 0 || k >= len(s.Looks) {
		panic(fmt.Sprintf("stats: look %d of %d", k, len(s.Looks)))
	}
	spent := s.spent()
	nominal := SpendAt(s.fractions(), spent)[k]
	lk := EquivalenceLook{Index: k, Alpha: nominal, Spent: spent[k], Common: Stratified(strata, 1-2*nominal)}
	iv := lk.Common.Effect
	where := fmt.Sprintf("look %d of %d (%s interval, nominal α %.2g each side, spent %.2g)", k+1, len(s.Looks), pct(1-2*nominal), nominal, lk.Spent)
	effect := "Δ " + FormatEffect(iv)
	var why string
	switch {
	case math.IsNaN(iv.Center) || !iv.Finite():
		lk.Outcome, why = Pending, "too few trials for an interval at "+where
	case iv.Lo >= -e.Margin && iv.Hi <= e.Margin:
		lk.Outcome, why = Equivalent, fmt.Sprintf("%s lies within ±%s at %s", effect, pct(e.Margin), where)
	case iv.Lo > e.Margin || iv.Hi < -e.Margin:
		lk.Outcome, why = Different, fmt.Sprintf("%s lies beyond ±%s at %s", effect, pct(e.Margin), where)
	default:
		lk.Outcome, why = Pending, fmt.Sprintf("%s reaches past ±%s at %s", effect, pct(e.Margin), where)
	}
	if lk.Outcome == Pending && k == len(s.Looks)-1 {
		lk.Outcome = NotShown
	}
	lk.Reason = lk.Outcome.String() + ": " + why
	return lk
}

// EquivalenceN is the n per arm and stratum that shows equivalence within
// ±margin with the given power when the profile changes nothing, at noise
// cv (σ of log values, as FinalN), each side's one-sided level the last
// look's nominal level of a two-look plan at n/2 and n. The stratified
// Hodges–Lehmann estimate has variance finalVar(cv)/n; showing |Δ| <
// margin at true Δ = 0 needs the interval's half-width plus the estimate's
// spread at (1+power)/2 to fit within ln(1+margin), the tighter of the
// margin's two log distances. One trial is added for the rank statistics'
// discreteness; n is even and at least 8. Returns 0 where FinalN would.
func EquivalenceN(cv, margin, alpha, power float64, strata int) int {
	if !(cv > 0 && margin > 0 && margin < 1 && alpha > 0 && alpha < 0.5 && power > 0 && power < 1) {
		return 0
	}
	nominal := Spend(alpha, []float64{0.5, 1})[1]
	z := mstats.StdNormal.InvCDF(1-nominal) + mstats.StdNormal.InvCDF((1+power)/2)
	m := math.Log1p(margin)
	n := int(math.Ceil(z*z*finalVar(cv, strata)/(m*m))) + 1
	if n%2 == 1 {
		n++
	}
	return max(n, 8)
}
