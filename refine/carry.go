package refine

import (
	"fmt"
	"math"

	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/report"
	"temper.codes/temper-train/refine/stats"
)

// A race measures every candidate against the incumbent, and most of
// what it measured still holds after the step it takes: a hill climb that
// races every move again each round pays for the same answers twice. So
// what a round measured is carried into the next, and a candidate whose
// carried gain is below the step rule's threshold is not raced again:
//
//   - a candidate whose kernel state a race measured last round is
//     estimated exactly, by difference: its score against the old
//     incumbent less the winner's (the new incumbent is the winner);
//   - a move on a group the steps since did not touch keeps the gain it
//     had, on the assumption that the effects of moves on different
//     groups add. The assumption is the price: a move that only helps
//     once another group has moved is found only if its own group moves
//     first, or by a run started from the new profile.
//
// It is a rule of the search, not a test: the final decides, on fresh
// trials. The ledger records each carried candidate with the estimate it
// was carried on.

// knowledge is what the races measured so far, relative to the current
// incumbent.
type knowledge struct {
	// states maps a realised kernel state raced last round to its score
	// against the current incumbent.
	states map[string]estimate
	// moves maps a move to its score when it was last raced; forgotten
	// when a step touches its group.
	moves map[moveID]estimate
}

// estimate is a carried score (a log ratio, positive better) and where it
// came from.
type estimate struct {
	score  float64
	trials int
	round  int
	how    string // basisState or basisMove
}

// How a carried estimate carries over (ledger.Race.Basis).
const (
	basisState = "state"
	basisMove  = "move"
)

// move identifies a one-step move whatever the profile it is made from:
// the group, the parameter and the values.
type moveID struct{ group, param, from, to string }

func moveOf(s Step) moveID { return moveID{s.Group, s.Param, s.From, s.To} }

// stepNeed is the score a winner must reach to step: half the minimum
// effect, as a log ratio.
func (e *engine) stepNeed() float64 { return math.Log1p(e.cfg.MinEffect / 2) }

// remember keeps what round rr measured for the next round: when the
// winner stepped, every other racer's state by difference with it, and
// the moves' scores (those on the winner's group forgotten: that group
// is no longer where they were measured).
func (e *engine) remember(rr *raceResult, stepped bool) {
	k := &e.known
	if k.moves == nil {
		k.moves = map[moveID]estimate{}
	}
	k.states = map[string]estimate{}
	if !stepped {
		return
	}
	w := rr.winner
	for _, x := range rr.racers {
		if x.rung == 0 || x.failed != "" {
			continue // never ran (the budget stopped the race), or its benchmark failed: raced again
		}
		if x != w {
			if key, err := e.realise(x.arm); err == nil {
				k.states[key] = estimate{score: x.mean() - w.mean(), trials: len(x.scores), round: e.round, how: basisState}
			}
		}
		if x.arm.Step.Group != "" {
			k.moves[moveOf(x.arm.Step)] = estimate{score: x.mean(), trials: len(x.scores), round: e.round, how: basisMove}
		}
	}
	for m := range k.moves {
		// A whole-profile winner may have moved every group.
		if m.group == w.arm.Step.Group || w.arm.Step.Group == "" {
			delete(k.moves, m)
		}
	}
}

// carried is a candidate not raced again, and why.
type carried struct {
	arm Arm
	est estimate
}

// carry splits a round's candidates into those to race and those whose
// carried estimate says they would not step; keys[i] is cands[i]'s
// realised kernel state (engine.distinct).
func (e *engine) carry(cands []Arm, keys []string) (race []Arm, skip []carried) {
	need := e.stepNeed()
	for i, a := range cands {
		est, ok := e.estimateOf(a, keys[i])
		if ok && est.score < need {
			skip = append(skip, carried{arm: a, est: est})
			continue
		}
		race = append(race, a)
	}
	return race, skip
}

// estimateOf is what is known of arm a, whose realised kernel state is
// key, against the current incumbent.
func (e *engine) estimateOf(a Arm, key string) (estimate, bool) {
	if est, ok := e.known.states[key]; ok {
		return est, true
	}
	if a.Step.Group == "" {
		return estimate{}, false
	}
	est, ok := e.known.moves[moveOf(a.Step)]
	return est, ok
}

// carriedDecision is the ledger's one verdict for a candidate carried,
// not raced.
func (e *engine) carriedDecision(x carried) ledger.Decision {
	c := &e.cfg
	shift := metricShift(x.est.score, c.Dir)
	basis := fmt.Sprintf("its kernel state's %s then, less the winner's score", report.Count(x.est.trials, "trial"))
	if x.est.how == basisMove {
		basis = fmt.Sprintf("the same move's %s then, on a group no step has touched since: the groups' effects are assumed to add", report.Count(x.est.trials, "trial"))
	}
	d := ledger.Decision{Stage: StageRace, Round: e.round, Step: x.arm.Step.String(), Group: x.arm.Step.Group, Candidate: x.arm.Key(),
		Test: "race", Metric: c.Metric, Bg: ledger.AllLevels,
		Effect: ledger.Interval{Lo: ledger.Num(math.NaN()), Center: ledger.Num(shift), Hi: ledger.Num(math.NaN())}, P: ledger.Num(math.NaN()),
		Verdict: report.Carried, Race: &ledger.Race{Gain: ledger.Num(gainOf(x.est.score)), GainSE: ledger.Num(math.NaN()), CarriedFrom: x.est.round, Basis: x.est.how},
		Reason: fmt.Sprintf("not raced: carried from round %d, gain %s against this incumbent, below the step's %s (%s)", x.est.round, stats.FormatShift(gainOf(x.est.score)), pctAbs(c.MinEffect/2), basis)}
	d.Line = fmt.Sprintf("%-11s %s  %s ≈ %s carried from round %d, not raced", StageRace, d.Step, c.Metric, stats.FormatShift(shift), x.est.round)
	return d
}
