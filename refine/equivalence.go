package refine

import (
	"context"
	"errors"
	"fmt"
	"math"

	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/stats"
	"temper.codes/temper-train/scheduler"
)

// equivalencePilot is the equivalence check's first look, per arm and
// level, when the noise is not known: enough for a 90% interval, and the
// within-arm noise that sizes the last look.
const equivalencePilot = 10

// equivalencePower is the chance the check shows equivalence when the
// profile changes nothing, that its last look is sized for.
const equivalencePower = 0.8

// Equivalence findings as the ledger and the Result hold them (besides
// stats.Finding's): the profile's kernel state is the reference's.
const verdictIdentical = "identical"

// equivalence is the run when Config.Equivalence is set: the input
// profile against the reference on fresh trials, until the common effect
// is shown within ±margin (stats.Equivalence), shown beyond it, or the
// last look says neither. A profile whose realised kernel state is the
// reference's (nothing changed) runs no trial: the arms would be one.
func (e *engine) equivalence(ctx context.Context, stock, prof Arm) error {
	c := &e.cfg
	e.stage, e.step = StageFinal, stock.Step.Param+" vs input profile"
	if e.env.Reference == nil {
		key, err := e.realise(prof)
		if err != nil {
			return fmt.Errorf("input profile: %w", err)
		}
		if key == scheduler.UnchangedKey {
			e.res.Equivalence = verdictIdentical
			d := ledger.Decision{Stage: StageFinal, Step: e.step, Candidate: prof.Key(), Test: "realised state", Metric: c.Metric, Bg: ledger.AllLevels,
				Verdict: verdictIdentical, Reason: fmt.Sprintf("identical: every group of the input profile is left as it is on this backend (realised: nothing set), so its kernel state is %s's and no trial could tell them apart", stock.Step.Param)}
			d.Line = fmt.Sprintf("%-11s %s  realised state: nothing set, identical; no trial run", StageFinal, d.Step)
			e.res.Final = append(e.res.Final, d)
			e.res.Stopped = "equivalence check, no search: " + d.Reason
			return e.record(&d)
		}
	}
	last := e.held(c.MaxN, 0, equivalencePilot+2)
	plan := stats.Equivalence{Plan: stats.Sequential{Rule: e.rule(), Looks: []int{equivalencePilot, last}}, Margin: c.Equivalence}
	if c.FinalN > 0 {
		plan.Plan.Looks = looks(c.FinalN)
	}
	if err := plan.Check(); err != nil {
		return err
	}
	if !e.fits(c.trials(plan.Plan.Looks[0]), 0) {
		return fmt.Errorf("%w: the equivalence check's first look needs %d trials (n=%d per arm and level); the budget is %s", ErrBudget, c.trials(plan.Plan.Looks[0]), plan.Plan.Looks[0], e.budgetString())
	}
	sized := fmt.Sprintf("the last re-sized there from the noise within each arm for %.0f%% power at no difference, at most n=%d (--max-trials, --max-time and the cap of %d per arm bound it)", 100*equivalencePower, last, c.MaxN)
	if c.FinalN > 0 {
		sized = "as set"
	}
	e.env.Log("plan: an equivalence check, no search: %s against the input profile on %s, within ±%s (two one-sided tests at α %g each, spent over the looks); looks at n=%v per arm and level, %s; background levels %v",
		stock.Step.Param, c.Metric, pctAbs(c.Equivalence), c.Alpha, plan.Plan.Looks, sized, c.Ladder)
	e.planned = c.trials(plan.Plan.Looks[len(plan.Plan.Looks)-1])
	arms := []Arm{stock, prof}
	xs := map[int][][]sample{}
	for _, bg := range c.Ladder {
		xs[bg] = make([][]sample, 2)
	}
	prev := 0
	var lk stats.EquivalenceLook
	for k := 0; k < len(plan.Plan.Looks); k++ {
		nk := plan.Plan.Looks[k]
		if err := e.extend(ctx, fmt.Sprintf("equiv%d-%s", k+1, prof.Hash), arms, nk-prev, xs); err != nil {
			var bf *benchFailed
			if !errors.As(err, &bf) || bf.candidate != prof.Key() || prof.Key() == stock.Key() {
				return err
			}
			return e.equivalenceFailed(k, len(plan.Plan.Looks), prof, xs, bf)
		}
		prev = nk
		lk = plan.Look(k, e.strata(xs, 0, 1))
		d := e.equivalenceDecision(lk, plan, prof)
		if err := e.record(&d); err != nil {
			return err
		}
		e.res.Final = append(e.res.Final, d)
		if lk.Outcome != stats.Pending {
			break
		}
		if c.FinalN == 0 && k == 0 {
			var err error
			if plan, err = e.resizeEquivalence(plan, xs); err != nil {
				return err
			}
		}
	}
	e.res.Equivalence = lk.Outcome.String()
	e.res.Stopped = "equivalence check, no search: " + lk.Reason
	// Per level, described: the ladder's Δ.
	for _, bg := range c.Ladder {
		cmp := stats.Compare(values(xs[bg][0], c.Metric), values(xs[bg][1], c.Metric), 1-2*c.Alpha)
		d := e.levelDecision(StageFinal, prof, e.step, bg, cmp, verdictDescribed, false)
		if err := e.record(&d); err != nil {
			return err
		}
		e.res.Described = append(e.res.Described, d)
	}
	return nil
}

// equivalenceFailed ends the equivalence check at look k when the
// benchmark failed under the input profile (a trial's command failed with
// the scheduler alive): the profile is different from the reference as
// plainly as a difference can be, and the look that says so has no effect
// to show, since it had no complete data.
func (e *engine) equivalenceFailed(k, of int, prof Arm, xs map[int][][]sample, bf *benchFailed) error {
	c := &e.cfg
	n := sideCounts(xs, 0, 1)
	nan := ledger.Num(math.NaN())
	different := stats.Different.String()
	why := different + ": " + bf.in(failedUnderInput)
	d := ledger.Decision{Stage: StageFinal, Step: e.step, Candidate: prof.Key(), Test: "stratified-tost", Metric: c.Metric,
		Bg: ledger.AllLevels, N: n, Effect: unmeasured(), P: nan, Verdict: different, Base: unmeasured(), Cand: unmeasured(),
		Look:   &ledger.Look{Index: k + 1, Of: of, Alpha: nan, Spent: nan, Outcome: different, N: e.res.FinalN, Noise: ledger.Num(e.res.Noise), Detectable: nan},
		Reason: why}
	d.Line = fmt.Sprintf("%-11s %s  look %d/%d  all levels  n=%d+%d  %s: %s", StageFinal, d.Step, k+1, of, n[0], n[1], different, failedUnderInput)
	if err := e.record(&d); err != nil {
		return err
	}
	e.res.Final = append(e.res.Final, d)
	e.res.Equivalence = different
	e.res.Stopped = "equivalence check, no search: " + why
	return e.note("equivalence: %s", why)
}

// failedUnderInput is what the ledger, the log and REPORT.md say of an
// equivalence check that ended for a failed benchmark under the input
// profile.
const failedUnderInput = "the benchmark failed under the input profile"

// resizeEquivalence sizes the check's last look after its first from the
// noise within each arm (blind to the difference, as resize does) at its
// 80% upper bound: stats.EquivalenceN, within what the budget and MaxN
// hold, and says so when they hold less.
func (e *engine) resizeEquivalence(plan stats.Equivalence, xs map[int][][]sample) (stats.Equivalence, error) {
	c := &e.cfg
	have := plan.Plan.Looks[0]
	p := e.pooled(xs)[c.Metric]
	if math.IsNaN(p.sigma) {
		return plan, nil
	}
	need := stats.EquivalenceN(noiseBound(p.sigma, p.df), c.Equivalence, c.Alpha, equivalencePower, len(c.Ladder))
	n := e.held(max(min(need, c.MaxN), have+2), have, have+2)
	r, err := plan.Resize(0, n)
	if err != nil {
		return plan, err
	}
	e.res.FinalN, e.res.Noise = n, p.sigma
	e.planned = e.trials + c.trials(n-have)
	held := ""
	if n < need {
		held = fmt.Sprintf("; %d would give %.0f%% power at no difference, and the budget or the cap of %d holds %d, so equivalence may not be shown even if it holds", need, 100*equivalencePower, c.MaxN, n)
	}
	return r, e.note("equivalence: re-sized after look 1 from the noise within each arm (%s %.1f%%, %d degrees of freedom): looks at n=%v per arm and level%s",
		c.Metric, 100*p.sigma, p.df, r.Plan.Looks[1:], held)
}

// equivalenceDecision records a look of the equivalence check.
func (e *engine) equivalenceDecision(lk stats.EquivalenceLook, plan stats.Equivalence, prof Arm) ledger.Decision {
	c := &e.cfg
	cm := lk.Common
	of := len(plan.Plan.Looks)
	d := ledger.Decision{Stage: StageFinal, Step: e.step, Candidate: prof.Key(), Test: "stratified-tost", Metric: c.Metric,
		Bg: ledger.AllLevels, N: cm.N, Effect: iv(cm.Effect), P: ledger.Num(cm.P), Verdict: lk.Outcome.String(), Base: unmeasured(), Cand: unmeasured(),
		Look: &ledger.Look{Index: lk.Index + 1, Of: of, Alpha: ledger.Num(lk.Alpha), Spent: ledger.Num(lk.Spent), Outcome: lk.Outcome.String(),
			N: plan.Plan.Looks[of-1], Noise: ledger.Num(e.res.Noise), Detectable: ledger.Num(math.NaN())},
		Reason: lk.Reason}
	d.Line = fmt.Sprintf("%-11s %s  look %d/%d  all levels  n=%d+%d  Δ %s (%s)  within ±%s?  %s",
		StageFinal, d.Step, lk.Index+1, of, cm.N[0], cm.N[1], stats.FormatEffect(cm.Effect), pctConf(cm.Confidence), pctAbs(c.Equivalence), lk.Outcome)
	return d
}
