package refine

import (
	"context"
	"fmt"
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

// CheckCandidate is the canary's guard check: n fresh trials per arm and
// background level of last (the last good profile, A; nil for stock CFS)
// against cand (B), interleaved in ABBA blocks like every comparison of
// refine, judged with refine's rule: the levels decided together
// (stats.DecideRound, Holm) and every guard with stats.Regresses. id names
// the comparison's trials in the ledger; it must be new there. Whatever it
// applied is reverted before it returns.
func CheckCandidate(ctx context.Context, cfg Config, last, cand *profiles.Profile, n int, id string, env Env) (*Check, error) {
	env.Reference = last
	e, err := newEngine(cfg, env)
	if err != nil {
		return nil, err
	}
	if n < 2 || n%2 != 0 {
		return nil, fmt.Errorf("guard check n = %d: want an even number ≥ 2", n)
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
	ps, err := e.compare(ctx, id, ref, arm, n)
	if err != nil {
		return nil, err
	}
	var round []stats.Pair
	for _, bg := range c.Ladder {
		round = append(round, stats.Pair{Base: values(ps[bg][0], c.Metric), Cand: values(ps[bg][1], c.Metric)})
	}
	sds := stats.DecideRound(round, e.rule())
	chk := &Check{}
	better, worse, guard := false, "", ""
	for i, bg := range c.Ladder {
		d := e.decision(StageCanary, arm, bg, ps[bg], sds[i])
		d.Step = e.step
		if g := guardFails(d.Guards); g != "" && guard == "" {
			guard = fmt.Sprintf("guard %s at bg=%d", g, bg)
		}
		switch sds[i].Verdict {
		case stats.Worse:
			if worse == "" {
				worse = fmt.Sprintf("%s worse at bg=%d (%s, p=%.3g)", c.Metric, bg, d.Shift(), float64(d.P))
			}
		case stats.Better:
			better = true
		}
		chk.Decisions = append(chk.Decisions, d)
	}
	switch {
	case guard != "" || worse != "":
		chk.State = Failed
		chk.Reason = "rolled back: " + strings.Join(nonEmpty(guard, worse), "; ")
	case better:
		chk.State = Passed
		chk.Reason = fmt.Sprintf("passed: better than %s again on fresh trials, no guard regresses", ref.Step.Param)
	default:
		chk.State = Inconclusive
		chk.Reason = fmt.Sprintf("inconclusive: neither better nor worse than %s at n=%d per arm, no guard regresses", ref.Step.Param, n)
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

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
