package refine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/stats"
)

// StageCanary is the ledger's stage of the canary loop's guard check.
const StageCanary = "canary"

// State is the outcome of a canary cycle's guard check, as Argo Rollouts
// names an analysis run's.
type State string

// States of a check.
const (
	// Passed: the candidate is better than the last good profile again, on
	// fresh trials, and no guard regresses: it becomes the last good one.
	Passed State = "passed"
	// Failed: the primary metric is worse or a guard regresses beyond its
	// bound: the candidate is rolled back at once.
	Failed State = "failed"
	// Inconclusive: neither; the candidate stays in force and is checked
	// again with more trials.
	Inconclusive State = "inconclusive"
)

// Check is what a guard check found.
type Check struct {
	State     State
	Decisions []ledger.Decision // per background level: last good (A) vs candidate (B)
	Reason    string
	Trials    int
}

// CheckN is the guard check's first n per arm and level when
// Config.FinalN does not set it; an inconclusive check is repeated with
// twice, then four times as many (CheckLooks).
const CheckN = 8

// CheckLooks are the n of a candidate's successive checks: the first (its
// FinalN or CheckN), twice and four times that, within MaxN. An
// inconclusive check with no n left fails.
func (c *Config) CheckLooks() []int {
	n := c.finalNOr(CheckN)
	ns := []int{n}
	for _, m := range []int{2 * n, 4 * n} {
		if m <= c.MaxN {
			ns = append(ns, m)
		}
	}
	return ns
}

// checkAlpha is the level a check with n per arm is held to: the checks of
// one candidate at n, 2n, 4n … share Alpha, spent by the Pocock-type rule
// over their cumulative trials (stats.Spend), so that rechecking an
// inconclusive candidate until it passes cannot pass a harmless one more
// often than Alpha. The checks run on fresh trials each, so each spends
// its increment (a union bound).
func (c *Config) checkAlpha(n int) float64 {
	ns := c.CheckLooks()
	total := 0
	for _, x := range ns {
		total += x
	}
	var t []float64
	cum, k := 0, -1
	for i, x := range ns {
		cum += x
		t = append(t, float64(cum)/float64(total))
		if x == n && k < 0 {
			k = i
		}
	}
	if k < 0 {
		return c.Alpha / float64(len(ns)+1) // an n outside the plan: a share no larger than the plan's smallest
	}
	if k == 0 {
		return stats.Spent(c.Alpha, t[0])
	}
	return stats.Spent(c.Alpha, t[k]) - stats.Spent(c.Alpha, t[k-1])
}

// CheckCandidate is the canary's guard check: n fresh trials per arm and
// background level of last (the last good profile, A; nil for stock CFS)
// against cand (B), interleaved in ABBA blocks like every comparison of
// refine, judged as refine's final is: one stratified test of the common
// effect across levels (stats.Sequential, one look at this check's share
// of α, checkAlpha), every level's loss and every guard's bounded (non-
// inferiority). It passes when the candidate is better by the minimum
// effect with no harm left possible; it fails when harm is shown (a level
// or guard whose loss exceeds its tolerance at one-sided confidence 1 − α);
// else it is inconclusive. id names the comparison's trials in the
// ledger; it must be new there. Whatever it applied is reverted before it
// returns.
func CheckCandidate(ctx context.Context, cfg Config, last, cand *profiles.Profile, n int, id string, env Env) (*Check, error) {
	env.Reference = last
	e, err := newEngine(cfg, env)
	if err != nil {
		return nil, err
	}
	if n < minFinalN || n%2 != 0 {
		return nil, fmt.Errorf("guard check n = %d: want an even number ≥ %d", n, minFinalN)
	}
	c := &e.cfg
	defer e.revert()
	ref, err := e.referenceArm()
	if err != nil {
		return nil, err
	}
	arm, err := NewArm(cand, Step{Param: "candidate"})
	if err != nil {
		return nil, fmt.Errorf("candidate: %w", err)
	}
	if f, bad := profiles.FirstError(e.env.Lint(cand)); bad {
		return nil, fmt.Errorf("candidate %s fails lint, not applied: %s", arm.Hash, f)
	}
	e.stage, e.step = StageCanary, ref.Step.Param+" vs candidate "+arm.Hash
	e.planned = e.trialsOf(n)
	xs, err := e.compareArms(ctx, id, []Arm{ref, arm}, n)
	var bf *benchFailed
	if errors.As(err, &bf) && bf.candidate == arm.Key() && arm.Key() != ref.Key() {
		return e.checkFailed(arm, bf)
	}
	if err != nil {
		return nil, err
	}
	alpha := c.checkAlpha(n)
	rule := e.rule()
	rule.Alpha = alpha
	seq := stats.Sequential{Rule: rule, Harm: c.Harm, Looks: []int{n}}
	strata := e.strata(xs, 0, 1)
	rules, guards := e.guardData(xs, c.Ladder, 0, 1)
	lk := seq.Look(0, strata, rules, guards)
	chk := &Check{}
	var harm []string
	for i, bg := range c.Ladder {
		h := lk.Harm[i]
		d := e.levelDecision(StageCanary, arm, e.step, bg, h.Comparison, harmVerdict(h), false)
		d.Reason = h.Reason
		// Harm is looked for at the full α: a rollback keeps nothing, so
		// the checks' shares of α are for passing only.
		p := strata[i]
		if _, full := stats.NonInferior(p.Base, p.Cand, c.Dir, stats.Relative, c.Harm, c.Alpha); shownWorse(full) {
			harm = append(harm, fmt.Sprintf("%s at bg=%d: %s", c.Metric, bg, full.Reason))
		}
		for g, gr := range rules {
			gd := lk.Guards[g][i]
			d.Guards = append(d.Guards, ledgerGuard(gr, gd))
			gp := guards[g][i]
			if _, full := stats.NonInferior(gp.Base, gp.Cand, gr.Dir, gr.Measure, gr.Bound, c.Alpha); shownWorse(full) {
				harm = append(harm, fmt.Sprintf("guard %s at bg=%d: %s", gr.Metric, bg, full.Reason))
			}
		}
		chk.Decisions = append(chk.Decisions, d)
	}
	switch {
	case len(harm) > 0:
		chk.State = Failed
		chk.Reason = "rolled back: " + strings.Join(harm, "; ")
	case lk.Outcome == stats.Keep:
		chk.State = Passed
		chk.Reason = fmt.Sprintf("passed: better than %s again on fresh trials (%s at one-sided α %.3g, this check's share), no harm left possible", ref.Step.Param, stats.FormatEffect(lk.Common.Effect), alpha)
	default:
		chk.State = Inconclusive
		chk.Reason = fmt.Sprintf("inconclusive at n=%d per arm: %s", n, lk.Reason)
	}
	for i := range chk.Decisions {
		d := &chk.Decisions[i]
		d.Accepted = chk.State == Passed
		d.Reason = strings.ToUpper(string(chk.State)) + " (" + chk.Reason + "); " + d.Reason
		if err := e.record(d); err != nil {
			return chk, err
		}
	}
	chk.Trials = e.trials
	if err := e.revert(); err != nil {
		return chk, fmt.Errorf("revert: %w", err)
	}
	return chk, nil
}

// checkFailed is the check of a candidate the benchmark failed under (a
// trial's command failed with the scheduler alive: the candidate starved
// the workload until the benchmark saw nothing): failed, the harm shown
// as plainly as harm can be, and rolled back; one decision, with no
// effect, says why. Under the reference the same failure is the check's
// error: the benchmark or the machine is broken.
func (e *engine) checkFailed(cand Arm, bf *benchFailed) (*Check, error) {
	chk := &Check{State: Failed, Reason: "rolled back: " + bf.in(failedUnderCandidate), Trials: e.trials}
	d := ledger.Decision{Stage: StageCanary, Step: e.step, Candidate: cand.Key(), Test: "benchmark", Metric: e.cfg.Metric, Bg: ledger.AllLevels,
		Base: unmeasured(), Cand: unmeasured(), Effect: unmeasured(), P: ledger.Num(math.NaN()), Verdict: string(Failed), Reason: "FAILED (" + chk.Reason + ")"}
	d.Line = fmt.Sprintf("%-11s %s  all levels  FAILED: %s", StageCanary, e.step, failedUnderCandidate)
	if err := e.record(&d); err != nil {
		return chk, err
	}
	chk.Decisions = []ledger.Decision{d}
	if err := e.revert(); err != nil {
		return chk, fmt.Errorf("revert: %w", err)
	}
	return chk, nil
}

// failedUnderCandidate is what the ledger and the canary's record say of a
// check that failed for a failed benchmark under the candidate.
const failedUnderCandidate = "the benchmark failed under the candidate"

// shownWorse says a non-inferiority check shows harm, not just fails to
// exclude it: the loss's whole interval is beyond the tolerance.
func shownWorse(d stats.Decision) bool {
	return d.Verdict == stats.Worse && d.LossLow > d.Tolerance
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
