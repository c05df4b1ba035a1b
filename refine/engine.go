// Package refine measures whether a workload profile helps and keeps only
// what does. Hill climbing from the input profile races each round's
// candidates (the one-step moves, and in round 1 the synthesized
// portfolio) against the incumbent by successive halving: a race ranks and
// tests nothing. One confirmatory test ends the run: the reference (stock
// CFS, or with the node's tier, tier only) against the refined profile on
// fresh trials, group-sequential with α-spending across its looks, the
// background levels strata of one stratified rank test of a common effect
// whose interval must clear the minimum effect, and at every level the
// loss of the primary metric and of every guard bounded within its
// tolerance (non-inferiority). Every trial and decision goes to the ledger
// first (refine/ledger), so a run cut off at any point resumes where it
// stopped: the plan is a deterministic function of the configuration, the
// seed and the trial results, and a resumed run replays recorded trials
// instead of running them again.
package refine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/bench"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/stats"
	"temper.codes/temper-train/scheduler"
)

// Stages of a run, as the ledger names them.
const (
	StageCalibration = "calibration"
	StageRace        = "race"
	StageFinal       = "final"
)

// ErrNoisy is wrapped when the noise the race measured, even at its lower
// 95% bound, is too large for the final at its largest n (MaxN) to have
// 90% power at twice the minimum effect: refine refuses rather than run a
// final that could not show what it is for.
var ErrNoisy = errors.New("benchmark too noisy")

// ErrBudget is wrapped when the budget (Config.MaxTrials, Config.MaxTime)
// cannot hold one raced round and the final comparison: the run would
// measure nothing worth keeping. Config.Check refuses a trial budget that
// is too small before the first trial; a time budget is known to be too
// small once the first block of the race has timed the trials.
var ErrBudget = errors.New("budget")

// errBudget stops the hill climbing when the next stage would not fit.
var errBudget = errors.New("budget spent")

// Result is what a run found.
type Result struct {
	Calibration []Calibration
	Rounds      []Round
	Final       []ledger.Decision // per background level: reference (A) vs refined (B)
	// Described are the final comparison's other contrasts with the tier
	// (Config.Tier): tier only vs stock, then tier + refined vs stock, per
	// level; they describe and decide nothing.
	Described []ledger.Decision
	// Reference names what the run measured against: "stock CFS", or the
	// profile in force (Env.Reference) with its hash.
	Reference string
	// Refined is the profile the hill climbing ended with; Kept says
	// whether it beat the reference (stock, or Env.Reference) in the final
	// comparison (only then is it worth writing).
	Refined  *profiles.Profile
	Kept     bool
	Accepted []Step
	Stopped  string // why the hill climbing stopped
	Trials   int
	// Noise is the σ of one trial's log value the race measured
	// (raceNoise; about the coefficient of variation), pooled with the
	// final's first look when the final was re-sized there; NaN before it
	// measured any. FinalN is the final's n per arm and level (its last
	// look's, as re-sized after its first look), and Detectable the
	// smallest effect it had 90% power for.
	Noise      float64
	FinalN     int
	Detectable float64
	// Equivalence is what an equivalence check (Config.Equivalence) found:
	// "equivalent", "different", "not shown", or "identical" when the
	// profile's kernel state is the reference's; "" for a search.
	Equivalence string
	Notes       []string
}

// Calibration is the A/A noise at one background level.
type Calibration struct {
	Bg       int
	N        int                // trials
	CV       map[string]float64 // per metric
	Noise    map[string]float64 // per metric: stats.Noise, what sizes n
	Decision ledger.Decision    // stock vs stock
}

// Round is one round of hill climbing: a race.
type Round struct {
	Index      int
	Incumbent  string // hash
	Candidates int
	Rejected   []Rejected // lint refused
	// Unchanged counts the candidates not run: their kernel state on the
	// backend is the incumbent's, an earlier incumbent's or an earlier
	// candidate's (Env.Realise).
	Unchanged int
	Decisions []ledger.Decision // one per candidate: its standing
	Accepted  *Step
	// Carried counts the candidates not raced again: what an earlier
	// round measured says they would not step (engine.carry).
	Carried int
	// Partial is set when the budget cut the race short: a winner that
	// the step rule holds back then is not convergence.
	Partial bool
}

type sample struct {
	metrics map[string]float64
	groups  map[string]ledger.GroupRates
}

// pair holds one comparison's samples at one level: [0] arm A, [1] arm B.
type pair [2][]sample

type engine struct {
	cfg     Config
	env     Env
	cur     string // Key of the arm in force, "" none yet
	sess    Session
	tierOn  bool
	trials  int
	spent   time.Duration // trial wall time, recorded and real
	real    int
	realDur time.Duration
	planned int
	stage   string
	step    string
	round   int
	begin   time.Time
	res     *Result
	noted   map[string]bool
	// visited are the realised keys of the incumbents so far: a candidate
	// that goes back to one is not raced again.
	visited map[string]bool
	// ends are the incumbent's trials before and after every race block
	// so far and racers every candidate raced: the noise is read from
	// their repeats (raceNoise).
	ends   [][2]sample
	racers []*racer
	// noise is each sized metric's noise (the primary and the relative
	// guards) pooled over the races so far: measured once a round
	// (measureNoise), read by every sizing of the final.
	noise map[string]noise
	// known is what the races measured of each move and state, relative
	// to the current incumbent (engine.remember), for engine.carry.
	known knowledge
}

// Run refines base: calibration, hill climbing, final comparison. It
// reverts whatever it applied before it returns, on every path. The
// returned Result is filled as far as the run got, also with an error.
func Run(ctx context.Context, cfg Config, base *profiles.Profile, env Env) (*Result, error) {
	e, err := newEngine(cfg, env)
	if err != nil {
		return nil, err
	}
	defer e.revert()
	err = e.run(ctx, base)
	if rerr := e.revert(); rerr != nil && err == nil {
		err = fmt.Errorf("revert: %w", rerr)
	}
	e.res.Trials = e.trials
	return e.res, err
}

// newEngine is the one setup of a run and of a guard check: cfg with its
// defaults and checked, env with a real sleep and a silent log where they
// are unset.
func newEngine(cfg Config, env Env) (*engine, error) {
	cfg.Defaults()
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.Tier && env.Tier == nil {
		return nil, errors.New("the tier arm needs a node with a tier (the node rig); none here")
	}
	if env.Sleep == nil {
		env.Sleep = sleep
	}
	if env.Log == nil {
		env.Log = func(string, ...any) {}
	}
	return &engine{cfg: cfg, env: env, begin: time.Now(), res: &Result{}, noted: map[string]bool{}}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (e *engine) revert() error {
	var err error
	if e.sess != nil {
		err = e.sess.Stop()
	}
	if e.tierOn {
		if terr := e.env.Tier(false); terr != nil {
			err = errors.Join(err, fmt.Errorf("tier: %w", terr))
		} else {
			e.tierOn = false
		}
	}
	e.sess, e.cur = nil, ""
	return err
}

func (e *engine) note(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	e.res.Notes = append(e.res.Notes, msg)
	e.env.Log("note: %s", msg)
	if e.env.Ledger == nil {
		return nil
	}
	return e.env.Ledger.Append(ledger.Note{Text: msg})
}

func (e *engine) levels() int { return len(e.cfg.Ladder) }

// trialsOf is the number of trials a comparison of n per arm takes.
func (e *engine) trialsOf(n int) int { return e.cfg.trials(n) }

func (e *engine) run(ctx context.Context, base *profiles.Profile) error {
	c := &e.cfg
	stock, err := e.referenceArm()
	if err != nil {
		return err
	}
	e.res.Reference = stock.Step.Param
	e.res.Noise, e.res.Detectable = math.NaN(), math.NaN()
	incumbent, err := NewArm(base, Step{Param: "input profile"})
	if err != nil {
		return err
	}
	// With the tier, every profile arm runs on top of it: a step is decided
	// by what it adds to the tier.
	incumbent.Tier = c.Tier
	if f, bad := profiles.FirstError(e.env.Lint(base)); bad {
		return fmt.Errorf("input profile: %s; nothing was changed", f)
	}
	if c.Equivalence > 0 {
		e.res.Refined = base
		return e.equivalence(ctx, stock, incumbent)
	}
	cands, rej, err := Candidates(base, e.env.Lint)
	if err != nil {
		return err
	}
	k := len(cands) + len(e.env.Alternatives)
	rs := c.rungs(k)
	finalN := c.finalNOr(8)
	cal := e.trialsOf(c.CalibrationN)
	e.planned = cal + raceTrials(rs) + c.finalTrials(finalN)
	finalArms := stock.Step.Param + " vs refined"
	if c.Tier {
		finalArms = stock.Step.Param + " vs tier only vs tier + refined"
		what := e.env.TierWhat
		if what == "" {
			what = TierDesc("")
		}
		e.env.Log("arms: the tier (%s) is in force with every profile; steps are decided against tier only", what)
	}
	var rungText []string
	for _, r := range rs {
		rungText = append(rungText, fmt.Sprintf("%d×%d", r.alive, r.m))
	}
	sized := "sized from the race's noise"
	if c.FinalN > 0 {
		sized = "set"
	}
	e.env.Log("plan: round 1 races ≤ %d candidates (%d lint-rejected) by successive halving, rungs %s (candidates×trials each, every block between two incumbent trials, shared by the blocks at one level: %d trials); the final %s n per arm and level (%s; %d trials at n=%d), two looks; background levels %v",
		k, len(rej), strings.Join(rungText, ", "), raceTrials(rs), finalArms, sized, c.finalTrials(finalN), finalN, c.Ladder)
	e.env.Log("budget: %s; at least %d trials (one raced round and the final)", e.budgetString(), e.planned)

	if c.CalibrationN > 0 {
		if err := e.calibrate(ctx, stock); err != nil {
			return err
		}
	}
	e.visited = map[string]bool{}
	for e.round = 1; e.round <= c.MaxRounds; e.round++ {
		r, err := e.climb(ctx, incumbent)
		if r != nil {
			e.res.Rounds = append(e.res.Rounds, r.Round)
		}
		if errors.Is(err, errBudget) {
			if e.round == 1 {
				// Not even rung 1's first block fits beside the final. A
				// time is given only once a trial has been timed: before
				// that it would read "0s at 0s a trial".
				need := raceTrials(rs) + c.finalTrials(e.finalN())
				cands := 0
				if r != nil {
					cands = r.Candidates
				}
				at := ""
				if pt := e.perTrial(); pt > 0 {
					at = fmt.Sprintf(", about %s at %s a trial", e.durationOf(need), pt.Round(time.Millisecond))
				}
				return fmt.Errorf("%w: round 1's first block of %d candidates does not fit beside the final; one raced round (%d trials) and the final (%d trials) need %d trials%s; the budget is %s: raise it or the minimum effect",
					ErrBudget, cands, raceTrials(rs), c.finalTrials(e.finalN()), need, at, e.budgetString())
			}
			e.res.Stopped = fmt.Sprintf("budget: round %d would not fit the budget (%s) with the final comparison", e.round, e.budgetString())
			break
		}
		if err != nil {
			return err
		}
		if r.Accepted == nil && r.Partial {
			e.res.Stopped = fmt.Sprintf("budget: round %d's race was cut short and its leader not taken", e.round)
			break
		}
		if r.Accepted == nil {
			e.res.Stopped = fmt.Sprintf("converged: round %d's winner (of %d candidates) did not gain enough to step", e.round, r.Candidates)
			if r.Candidates == 0 {
				e.res.Stopped = fmt.Sprintf("converged: round %d had no candidate that changes the kernel state", e.round)
			}
			break
		}
		e.res.Accepted = append(e.res.Accepted, *r.Accepted)
		for _, a := range r.arms {
			if a.Step == *r.Accepted {
				incumbent = a
			}
		}
	}
	if e.res.Stopped == "" {
		e.res.Stopped = fmt.Sprintf("reached the maximum of %d rounds", c.MaxRounds)
	}
	e.env.Log("hill climbing stopped: %s; %d step(s) taken", e.res.Stopped, len(e.res.Accepted))
	e.res.Refined = incumbent.Profile
	return e.final(ctx, stock, incumbent)
}

// noise is a metric's noise: the σ of one trial's log value (about its
// coefficient of variation) and the degrees of freedom it was estimated
// with; σ is NaN when too few repeats measured it.
type noise struct {
	sigma float64
	df    int
}

// sized are the metrics the final is sized on: the primary and every
// relative guard (a count's guard has no noise to size for).
func (e *engine) sized() []string {
	ms := []string{e.cfg.Metric}
	for _, g := range e.cfg.Guards {
		if !g.Count && g.Bound > 0 {
			ms = append(ms, g.Metric)
		}
	}
	return ms
}

// measureNoise pools each sized metric's noise over the races' repeats so
// far (raceNoise) and keeps it on the engine: once per round, after its
// race.
func (e *engine) measureNoise() {
	e.noise = map[string]noise{}
	for _, m := range e.sized() {
		sigma, df := raceNoise(e.ends, e.racers, m)
		e.noise[m] = noise{sigma, df}
	}
	if p := e.noise[e.cfg.Metric]; !math.IsNaN(p.sigma) {
		e.res.Noise = p.sigma
	}
}

// finalN is the final's n per arm and level: Config.FinalN, or sized from
// the races' noise at its upper bound (sizeFinal).
func (e *engine) finalN() int { return e.sizeFinal(e.noise, true) }

// sizeFinal is the final's n per arm and level for the noise measured:
// Config.FinalN, or what gives 90% power at 1.5× the minimum effect
// (stats.FinalN) and bounds every relative guard's loss within its
// tolerance with 90% power when there is none (stats.NonInferiorN), at
// each metric's noise, at its 80% upper bound (noiseBound) when bound is
// set, else at the estimate; at least minFinalN and at most MaxN; 8
// before the primary's noise is measured.
func (e *engine) sizeFinal(ns map[string]noise, bound bool) int {
	c := &e.cfg
	if c.FinalN > 0 {
		return c.FinalN
	}
	at := func(x noise) float64 {
		if bound {
			return noiseBound(x.sigma, x.df)
		}
		return x.sigma
	}
	p, ok := ns[c.Metric]
	if !ok || math.IsNaN(p.sigma) || c.MinEffect == 0 {
		return 8
	}
	n := stats.FinalN(at(p), c.MinEffect, c.Alpha, finalPower, len(c.Ladder), c.Dir)
	// A kept profile must also bound every guard's loss at every level:
	// n for that too, at each relative guard's own noise.
	for _, g := range c.Guards {
		if g.Count || g.Bound <= 0 {
			continue
		}
		if x := ns[g.Metric]; x.sigma > 0 {
			n = max(n, stats.NonInferiorN(at(x), g.Bound, c.Alpha, finalPower))
		}
	}
	n += n % 2
	return min(max(n, minFinalN), c.MaxN)
}

// pooled is the races' noise of each sized metric pooled with the
// final's trials so far: each arm's log values at each level about their
// own mean. Only the spread within an arm enters, never the difference
// between the arms, so a final re-sized on it keeps its level (blinded
// re-estimation: for normal noise the within-arm variance is independent
// of the effect the final tests).
func (e *engine) pooled(xs map[int][][]sample) map[string]noise {
	out := map[string]noise{}
	for _, m := range e.sized() {
		r, ok := e.noise[m]
		if !ok {
			r = noise{math.NaN(), 0} // no race measured it: the final's trials alone
		}
		var ss float64
		df := 0
		if !math.IsNaN(r.sigma) {
			ss, df = r.sigma*r.sigma*float64(r.df), r.df
		}
		for _, arms := range xs {
			for _, arm := range arms {
				var logs []float64
				for _, x := range arm {
					if v := x.metrics[m]; v > 0 {
						logs = append(logs, math.Log(v))
					}
				}
				if len(logs) < 2 {
					continue
				}
				mu := stat.Mean(logs, nil)
				for _, v := range logs {
					ss += (v - mu) * (v - mu)
				}
				df += len(logs) - 1
			}
		}
		if df < 3 {
			out[m] = r
			continue
		}
		out[m] = noise{math.Sqrt(ss / float64(df)), df}
	}
	return out
}

// noiseBound is the one-sided 80% upper bound of a noise σ estimated with
// df degrees of freedom (chi-square): what the final is sized at. An
// estimate from a few races is as often low as high, and a final sized
// at a low one falls short of its power, which a bigger final at a high
// one does not make up for.
func noiseBound(sigma float64, df int) float64 {
	if df < 1 || !(sigma > 0) {
		return sigma
	}
	return sigma * math.Sqrt(float64(df)/distuv.ChiSquared{K: float64(df)}.Quantile(0.2))
}

// reserve is the trials the final needs as far as the run knows now.
func (e *engine) reserve() int { return e.cfg.finalTrials(e.finalN()) }

// durationOf is n trials at the time a trial has taken so far.
func (e *engine) durationOf(n int) time.Duration {
	return (time.Duration(n) * e.perTrial()).Round(time.Second)
}

// budgetString says the budget in the engine's words (Config's fields);
// the command that set them may name its flags.
func (e *engine) budgetString() string {
	var parts []string
	if e.cfg.MaxTrials > 0 {
		parts = append(parts, fmt.Sprintf("at most %d trials", e.cfg.MaxTrials))
	}
	if e.cfg.MaxTime > 0 {
		parts = append(parts, fmt.Sprintf("at most %s", e.cfg.MaxTime))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("no limit but convergence and the maximum of %d rounds", e.cfg.MaxRounds)
	}
	return strings.Join(parts, ", ")
}

// fits says whether n more trials (plus reserve) fit the budget.
func (e *engine) fits(n, reserve int) bool {
	if e.cfg.MaxTrials > 0 && e.trials+n+reserve > e.cfg.MaxTrials {
		return false
	}
	if e.cfg.MaxTime > 0 && e.spent+time.Duration(n+reserve)*e.perTrial() > e.cfg.MaxTime {
		return false
	}
	return true
}

// budgeted is the trials the run will have made at its end as far as it
// can tell now: the plan, cut to what MaxTrials and MaxTime leave (the
// final comparison is inside that budget: fits keeps it there).
func (e *engine) budgeted() int {
	n := e.planned
	if e.cfg.MaxTrials > 0 {
		n = min(n, e.cfg.MaxTrials)
	}
	if pt := e.perTrial(); e.cfg.MaxTime > 0 && pt > 0 {
		n = min(n, e.trials+int((e.cfg.MaxTime-e.spent)/pt))
	}
	return max(n, e.trials)
}

// perTrial is the mean wall time of a trial (with switch-overs), from the
// trials run and replayed so far.
func (e *engine) perTrial() time.Duration {
	if e.trials == 0 {
		return 0
	}
	return e.spent / time.Duration(e.trials)
}

// referenceArm is what calibration and the final comparison measure
// against: stock CFS, or Env.Reference (the canary's profile in force).
func (e *engine) referenceArm() (Arm, error) {
	if e.env.Reference == nil {
		return NewArm(nil, Step{Param: "stock CFS"})
	}
	a, err := NewArm(e.env.Reference, Step{})
	if err != nil {
		return a, fmt.Errorf("reference profile: %w", err)
	}
	a.Step.Param = "profile in force " + a.Hash
	return a, nil
}

// calibrate is the A/A measurement, when asked for (Config.CalibrationN):
// the reference against itself at every level, a decision that is a false
// accept if it keeps anything. It describes the noise; it sizes nothing.
func (e *engine) calibrate(ctx context.Context, stock Arm) error {
	c := &e.cfg
	e.stage, e.step = StageCalibration, stock.Step.Param+" vs itself"
	ps, err := e.compare(ctx, "cal", stock, stock, c.CalibrationN)
	if err != nil {
		return err
	}
	for _, bg := range c.Ladder {
		p := ps[bg]
		all := append(slices.Clone(p[0]), p[1]...)
		cal := Calibration{Bg: bg, N: len(all), CV: map[string]float64{}, Noise: map[string]float64{}}
		for _, m := range metricNames(all) {
			cal.CV[m] = stats.CV(values(all, m))
			cal.Noise[m] = stats.Noise(values(all, m))
		}
		sd := stats.Decide(values(p[0], c.Metric), values(p[1], c.Metric), e.rule())
		d := e.decision(StageCalibration, stock, bg, p, sd)
		d.Step = "A/A"
		d.Reason = "A/A calibration (never accepted): " + d.Reason
		if err := e.record(&d); err != nil {
			return err
		}
		cal.Decision = d
		e.res.Calibration = append(e.res.Calibration, cal)
		e.env.Log("calibration bg=%d: %s noise %.1f%% (1.4826·MAD/median) over %d %s trials", bg, c.Metric, 100*cal.Noise[c.Metric], len(all), stock.Step.Param)
	}
	return nil
}

// roundState is a round with the arms its candidates were.
type roundState struct {
	Round
	arms []Arm
}

// climb runs one round from incumbent: the candidates that change the
// kernel state race against it, and the winner is the next incumbent if
// the step rule takes it. The ledger gets one decision per candidate.
func (e *engine) climb(ctx context.Context, inc Arm) (*roundState, error) {
	c := &e.cfg
	cands, rej, err := Candidates(inc.Profile, e.env.Lint)
	if err != nil {
		return nil, err
	}
	if e.round == 1 {
		alts, arej, err := e.alternatives()
		if err != nil {
			return nil, err
		}
		cands, rej = append(alts, cands...), append(arej, rej...)
	}
	for i := range cands {
		cands[i].Tier = inc.Tier
	}
	cands, keys, same, err := e.distinct(inc, cands)
	if err != nil {
		return nil, err
	}
	cands, carried := e.carry(cands, keys)
	r := &roundState{Round: Round{Index: e.round, Incumbent: inc.Hash, Candidates: len(cands), Rejected: rej, Unchanged: len(same), Carried: len(carried)}, arms: cands}
	for _, x := range carried {
		d := e.carriedDecision(x)
		if err := e.record(&d); err != nil {
			return r, err
		}
		r.Decisions = append(r.Decisions, d)
	}
	if len(same) > 0 {
		if err := e.note("round %d: %d candidate(s) leave the kernel state as an arm already measured does on this backend and are not run: %s", e.round, len(same), strings.Join(same, "; ")); err != nil {
			return r, err
		}
	}
	for _, x := range rej {
		if err := e.note("round %d: candidate %s (%s) refused by lint, not applied: %s", e.round, x.Arm.Step, x.Arm.Hash, x.Finding); err != nil {
			return r, err
		}
	}
	if len(cands) == 0 {
		return r, nil
	}
	e.stage = StageRace
	rr, err := e.race(ctx, inc, cands, e.reserve)
	if err != nil {
		return r, err
	}
	r.Partial = rr.partial
	// Every round's incumbent ends measure the noise the final will see:
	// their trials switch arms as the final's do. The estimate grows
	// with the rounds.
	e.ends = append(e.ends, rr.ends...)
	e.racers = append(e.racers, rr.racers...)
	e.measureNoise()
	if p := e.noise[c.Metric]; !math.IsNaN(p.sigma) {
		n, df := p.sigma, p.df
		e.env.Log("noise: %s varies %.1f%% (σ of log values pooled over the races' repeats: %d degrees of freedom so far); the final needs n=%d per arm and level",
			c.Metric, 100*n, df, e.finalN())
		// Refused only when even the noise's lower 95% bound is too much:
		// a few repeats measure it roughly.
		low := n * math.Sqrt(float64(df)/distuv.ChiSquared{K: float64(df)}.Quantile(0.95))
		if d := stats.Detectable(low, c.MaxN, c.MinEffect, c.Alpha, finalPower, len(c.Ladder), c.Dir); c.FinalN == 0 && low > 0 && d > 2*c.MinEffect {
			return r, fmt.Errorf("%w: %s varies %.1f%% between trials (σ of log values, %d degrees of freedom from the race) against the minimum effect %s: even the largest final (n=%d per arm and level) would detect only effects of %s or more; lengthen the benchmark, quiet the machine or raise the minimum effect",
				ErrNoisy, c.Metric, 100*n, df, pctAbs(c.MinEffect), c.MaxN, pctAbs(d))
		}
	}
	rungs := rr.winner.rung
	w := rr.winner
	ok, why := e.stepRule(w)
	for _, x := range rr.racers {
		var d ledger.Decision
		switch {
		case x == w && ok:
			d = e.raceDecision(x, rungs, "accepted", "ACCEPTED as the next incumbent: won the race, "+why)
			d.Accepted = true
			d.Mechanism = e.mechanism(x.arm.Step, &pair{x.base, x.trials})
			if m := d.Mechanism; m != nil && !m.Moved {
				m.Suspect = true
				d.Reason = fmt.Sprintf("ACCEPTED, SUSPECT: group %q's %s did not move %s; %s", m.Group, m.Counter, m.Predicted, d.Reason)
			}
		case x.failed != "":
			d = e.raceDecision(x, rungs, "dropped", fmt.Sprintf("dropped at rung %d: %s (%s)", x.rung, failedUnder, x.failed))
		case x == w:
			d = e.raceDecision(x, rungs, "unconfirmed", "won the race, not taken: "+why)
		case x.rung == 0:
			continue // never ran: the budget cut the race before it
		default:
			d = e.raceDecision(x, rungs, "dropped", fmt.Sprintf("dropped at rung %d: rank %d of %d", x.rung, x.rank, x.of))
		}
		if err := e.record(&d); err != nil {
			return r, err
		}
		r.Decisions = append(r.Decisions, d)
	}
	e.remember(rr, ok)
	if ok {
		s := w.arm.Step
		r.Accepted = &s
		e.env.Log("round %d: step %s", e.round, s)
		if key, err := e.realise(inc); err == nil {
			e.visited[key] = true
		}
	}
	return r, nil
}

// alternatives are Env.Alternatives as round 1's candidates: the ones
// lint passes, and the ones it refuses.
func (e *engine) alternatives() ([]Arm, []Rejected, error) {
	var ok []Arm
	var rej []Rejected
	for _, a := range e.env.Alternatives {
		arm, err := NewArm(a.Profile, Step{Param: "portfolio: " + a.Name})
		if err != nil {
			return nil, nil, fmt.Errorf("portfolio %s: %w", a.Name, err)
		}
		if f, bad := profiles.FirstError(e.env.Lint(a.Profile)); bad {
			rej = append(rej, Rejected{Arm: arm, Finding: f.String()})
			continue
		}
		ok = append(ok, arm)
	}
	return ok, rej, nil
}

// distinct drops the candidates whose realised kernel state (Env.Realise)
// equals the incumbent's or an earlier candidate's: running one would
// measure an arm already measured. It returns what it kept, their
// realised keys (keys[i] is kept[i]'s) and a line per candidate dropped.
func (e *engine) distinct(inc Arm, cands []Arm) (kept []Arm, keys, same []string, err error) {
	key, err := e.realise(inc)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("realise the incumbent %s: %w", inc.Hash, err)
	}
	seen := map[string]string{}
	for k := range e.visited {
		seen[k] = "an earlier incumbent"
	}
	seen[key] = "the incumbent"
	for _, a := range cands {
		k, err := e.realise(a)
		if err != nil {
			// Apply would refuse it too: lint did not see why.
			same = append(same, fmt.Sprintf("%s (%s) cannot be applied: %v", a.Step, a.Hash, err))
			continue
		}
		if first, ok := seen[k]; ok {
			same = append(same, fmt.Sprintf("%s (%s) = %s", a.Step, a.Hash, first))
			continue
		}
		seen[k] = a.Step.String()
		kept = append(kept, a)
		keys = append(keys, k)
	}
	return kept, keys, same, nil
}

// realise is the arm's kernel state key (Env.Realise), with the tier
// marked: the same profile with and without the tier are two states.
// Where the backend cannot say, the profile's hash stands for its state.
func (e *engine) realise(a Arm) (string, error) {
	if e.env.Realise == nil {
		return "profile " + a.Key(), nil
	}
	k, err := e.env.Realise(a.Profile)
	if err != nil {
		return "", err
	}
	if k == "" {
		return "profile " + a.Key(), nil
	}
	if a.Tier {
		k += TierSuffix
	}
	return k, nil
}

func (e *engine) rule() stats.Rule {
	return stats.Rule{Metric: e.cfg.Metric, Alpha: e.cfg.Alpha, MinEffect: e.cfg.MinEffect, Dir: e.cfg.Dir}
}

func guardFails(gs []ledger.Guard) string {
	for _, g := range gs {
		if g.Regresses {
			return fmt.Sprintf("%s moved %s, harm up to %s not excluded (tolerance %s)", g.Metric, g.Change(), g.WorstChange(), guardBound(g))
		}
	}
	return ""
}

// verdictDescribed is the verdict of the final's contrasts that decide
// nothing: tier only and tier + refined against the reference.
const verdictDescribed = "described, not decided"

// looks are the final's cumulative n per arm and level at each look: two
// looks, at half and at all of n, when half is still enough to bound a
// loss; else one.
func looks(n int) []int {
	if h := n / 2; h >= minFinalN && h%2 == 0 {
		return []int{h, n}
	}
	if h := n/2 + 1; h >= minFinalN && h%2 == 0 && h < n {
		return []int{h, n}
	}
	return []int{n}
}

// final is the run's one confirmatory test: the reference (or tier only)
// against the refined profile on fresh trials, group-sequential over
// looks (stats.Sequential), the levels strata of one test of a common
// effect, every level's and guard's loss bounded. With the tier the three
// arms run side by side and the tier's and the product's effects against
// stock are described.
func (e *engine) final(ctx context.Context, stock, refined Arm) error {
	c := &e.cfg
	if refined.Key() == stock.Key() {
		// The climb ended where it started, on the reference itself: there
		// is nothing to compare and nothing new to keep.
		e.res.Kept = false
		return e.note("final: the refined profile is the reference (%s, %s): nothing new to compare or keep", stock.Step.Param, stock.Hash)
	}
	n := e.finalN()
	// What the budget holds, if it holds less than the noise asks for.
	n = e.held(n, 0, minFinalN)
	if !e.fits(c.finalTrials(n), 0) && e.trials > 0 {
		return fmt.Errorf("%w: the final needs %d more trials (n=%d per arm and level) and the budget (%s) has room for fewer after %d trials", ErrBudget, c.finalTrials(n), n, e.budgetString(), e.trials)
	}
	e.res.FinalN = n
	if !math.IsNaN(e.res.Noise) {
		e.res.Detectable = stats.Detectable(e.res.Noise, n, c.MinEffect, c.Alpha, finalPower, len(c.Ladder), c.Dir)
	}
	if sized := e.finalN(); n < sized {
		if err := e.note("final: n=%d per arm and level fits the budget, not the n=%d the noise asks for: the smallest effect it can detect (90%% power) is %s, not 1.5× the minimum effect", n, sized, pctAbs(e.res.Detectable)); err != nil {
			return err
		}
	}
	seq := stats.Sequential{Rule: e.rule(), Harm: c.Harm, Looks: looks(n)}
	if c.FinalN == 0 {
		// Sized from the noise: the first look falls at half the n the
		// races' noise asks for at its estimate, and the last is re-sized
		// there (resize) from the noise pooled with the first look's
		// trials, at its upper bound. The bound on few degrees of freedom
		// is what makes a final large; the first look needs none of it,
		// since the power is the last look's.
		seq.Looks = looks(min(max(e.sizeFinal(e.noise, false), 2*minFinalN), n))
	}
	if err := seq.Check(); err != nil {
		return fmt.Errorf("final: %w", err)
	}
	e.planned = e.trials + c.finalTrials(seq.Looks[len(seq.Looks)-1])
	arms := []Arm{stock, refined}
	base := stock
	e.stage, e.step = StageFinal, stock.Step.Param+" vs refined"
	if c.Tier {
		tier := Arm{Hash: StockHash, Step: Step{Param: "tier only"}, Tier: true}
		arms, base = []Arm{stock, tier, refined}, tier
		e.step = stock.Step.Param + " vs tier only vs tier + refined"
	}
	xs := map[int][][]sample{}
	for _, bg := range c.Ladder {
		xs[bg] = make([][]sample, len(arms))
	}
	b, r := len(arms)-2, len(arms)-1 // the decided sides: base and refined
	prev := 0
	var lk stats.Look
	var rules []stats.GuardRule
	var guards [][]stats.Pair
	for k := 0; k < len(seq.Looks); k++ {
		nk := seq.Looks[k]
		if err := e.extend(ctx, fmt.Sprintf("final%d-%s", k+1, refined.Hash), arms, nk-prev, xs); err != nil {
			var bf *benchFailed
			if !errors.As(err, &bf) || bf.candidate != refined.Key() {
				return err
			}
			return e.finalFailed(k, len(seq.Looks), refined, base, xs, b, r, bf)
		}
		prev = nk
		rules, guards = e.guardData(xs, c.Ladder, b, r)
		lk = seq.Look(k, e.strata(xs, b, r), rules, guards)
		d := e.lookDecision(lk, len(seq.Looks), refined, base)
		if err := e.record(&d); err != nil {
			return err
		}
		e.res.Final = append(e.res.Final, d)
		if lk.Outcome != stats.Continue {
			break
		}
		if c.FinalN == 0 && k < len(seq.Looks)-1 {
			var err error
			if seq, err = e.resize(seq, k, xs); err != nil {
				return err
			}
		}
	}
	e.res.Kept = lk.Outcome == stats.Keep
	// Per level, what the decision's non-inferiority checks found: they
	// describe the ladder; the look above decided.
	for i, bg := range c.Ladder {
		h := lk.Harm[i]
		d := e.levelDecision(StageFinal, refined, e.stepOfFinal(base), bg, h.Comparison, harmVerdict(h), e.res.Kept)
		d.Reason = h.Reason
		for g, gr := range rules {
			d.Guards = append(d.Guards, ledgerGuard(gr, lk.Guards[g][i]))
		}
		if err := e.record(&d); err != nil {
			return err
		}
		e.res.Final = append(e.res.Final, d)
	}
	if c.Tier {
		// The seeds' three arms: the tier's effect and the product's (tier
		// + profile) against stock, described, deciding nothing.
		for _, arm := range []struct {
			side int
			a    Arm
			step string
		}{{1, arms[1], "tier only vs " + stock.Step.Param}, {2, refined, "tier + refined vs " + stock.Step.Param}} {
			for _, bg := range c.Ladder {
				cmp := stats.Compare(values(xs[bg][0], c.Metric), values(xs[bg][arm.side], c.Metric), 1-2*c.Alpha)
				d := e.levelDecision(StageFinal, arm.a, arm.step, bg, cmp, verdictDescribed, false)
				if err := e.record(&d); err != nil {
					return err
				}
				e.res.Described = append(e.res.Described, d)
			}
		}
	}
	return nil
}

// finalFailed ends the final at look k, the refined profile not kept,
// when the benchmark failed under that profile (a trial's command failed
// with the scheduler alive: it starved the workload until the benchmark
// saw nothing). That is the profile's result, however the race went, not
// a reason to end the run without a report. The look is recorded with no
// effect, since it had no complete data; the per-level checks and the
// tier's descriptions are not, for the same reason.
func (e *engine) finalFailed(k, of int, refined, base Arm, xs map[int][][]sample, b, r int, bf *benchFailed) error {
	c := &e.cfg
	n := sideCounts(xs, b, r)
	nan := ledger.Num(math.NaN())
	why := bf.in(failedUnderRefined)
	d := ledger.Decision{Stage: StageFinal, Step: e.stepOfFinal(base), Candidate: refined.Key(), Test: "stratified-rank-sum", Metric: c.Metric,
		Bg: ledger.AllLevels, N: n, Base: unmeasured(), Cand: unmeasured(), Effect: unmeasured(), P: nan, Verdict: stats.Drop.String(),
		Look: &ledger.Look{Index: k + 1, Of: of, Alpha: nan, Spent: nan, Outcome: stats.Drop.String(),
			N: e.res.FinalN, Noise: ledger.Num(e.res.Noise), Detectable: ledger.Num(e.res.Detectable)},
		Reason: "NOT KEPT: " + why}
	d.Line = fmt.Sprintf("%-11s %s  look %d/%d  all levels  n=%d+%d  NOT KEPT: %s", StageFinal, d.Step, k+1, of, n[0], n[1], failedUnderRefined)
	if err := e.record(&d); err != nil {
		return err
	}
	e.res.Final = append(e.res.Final, d)
	e.res.Kept = false
	return e.note("final: %s: not kept", why)
}

// sideCounts is how many samples sides b and r of xs hold over the levels.
func sideCounts(xs map[int][][]sample, b, r int) [2]int {
	var n [2]int
	for _, x := range xs {
		n[0] += len(x[b])
		n[1] += len(x[r])
	}
	return n
}

// unmeasured is the interval of a decision no data measured (REPORT.md
// prints "—").
func unmeasured() ledger.Interval {
	nan := ledger.Num(math.NaN())
	return ledger.Interval{Lo: nan, Center: nan, Hi: nan}
}

// failedUnderRefined is what the ledger, the log and REPORT.md say of a
// final that ended for a failed benchmark under the refined profile.
const failedUnderRefined = "the benchmark failed under the refined profile"

// held is n per arm and level cut, two at a time and not below floor, to
// what the budget holds for a final's (or an equivalence check's) trials
// from have to n per arm and level.
func (e *engine) held(n, have, floor int) int {
	for n > floor && !e.fits(e.cfg.finalTrials(n)-e.cfg.finalTrials(have), 0) {
		n -= 2
	}
	return n
}

// extend runs a look's n more trials per arm and level of arms
// (compareArms, id naming them) and adds them to xs, the look's trials so
// far by level and arm; on an error, the trials run before it.
func (e *engine) extend(ctx context.Context, id string, arms []Arm, n int, xs map[int][][]sample) error {
	more, err := e.compareArms(ctx, id, arms, n)
	for bg, x := range more {
		for side := range x {
			xs[bg][side] = append(xs[bg][side], x[side]...)
		}
	}
	return err
}

// resize re-sizes the final after look k from the races' noise pooled
// with the final's trials so far (pooled: within each arm, blind to the
// effect; the final's trials alone when no race measured it), at its
// upper bound, as sizeFinal does: one more look, the last, at that n, at
// least two trials per arm and level more than look k and as many as the
// budget holds (stats.Sequential.Resize keeps the α look k spent). The
// budget held the plan's last look, which is at least two more.
func (e *engine) resize(seq stats.Sequential, k int, xs map[int][][]sample) (stats.Sequential, error) {
	c := &e.cfg
	have := seq.Looks[k]
	ns := e.pooled(xs)
	p := ns[c.Metric]
	if math.IsNaN(p.sigma) {
		return seq, nil // nothing measured the noise yet: the plan stands
	}
	n := max(e.sizeFinal(ns, true), have+2)
	n = e.held(n, have, have+2)
	r, err := seq.Resize(k, n)
	if err != nil {
		return seq, err
	}
	was := seq.Looks[len(seq.Looks)-1]
	e.res.FinalN, e.res.Noise = n, p.sigma
	e.res.Detectable = stats.Detectable(p.sigma, n, c.MinEffect, c.Alpha, finalPower, len(c.Ladder), c.Dir)
	e.planned = e.trials + c.finalTrials(n-have)
	return r, e.note("final: re-sized after look %d from the noise pooled over the races and the final's %d trials per arm and level (%s %.1f%%, %d degrees of freedom, within each arm): the last look at n=%d per arm and level (planned n=%d)",
		k+1, have, c.Metric, 100*p.sigma, p.df, n, was)
}

func (e *engine) stepOfFinal(base Arm) string {
	if e.cfg.Tier {
		return "tier + refined vs tier only"
	}
	return base.Step.Param + " vs refined"
}

// lookDecision records a look of the final: the common effect across the
// levels and the outcome.
func (e *engine) lookDecision(lk stats.Look, of int, refined, base Arm) ledger.Decision {
	c := &e.cfg
	cm := lk.Common
	d := ledger.Decision{Stage: StageFinal, Step: e.stepOfFinal(base), Candidate: refined.Key(), Test: "stratified-rank-sum", Metric: c.Metric,
		Bg: ledger.AllLevels, N: cm.N, Effect: iv(cm.Effect), P: ledger.Num(cm.P), Verdict: lk.Outcome.String(),
		Base: unmeasured(),
		Look: &ledger.Look{Index: lk.Index + 1, Of: of, Alpha: ledger.Num(lk.Alpha), Spent: ledger.Num(lk.Spent), Outcome: lk.Outcome.String(),
			N: e.res.FinalN, Noise: ledger.Num(e.res.Noise), Detectable: ledger.Num(e.res.Detectable)},
		Accepted: lk.Outcome == stats.Keep}
	d.Cand = d.Base
	switch lk.Outcome {
	case stats.Keep:
		d.Reason = "KEPT: " + strings.TrimPrefix(lk.Reason, "kept: ")
	case stats.Drop:
		d.Reason = "NOT KEPT: " + lk.Reason
	default:
		d.Reason = lk.Reason
	}
	d.Line = fmt.Sprintf("%-11s %s  look %d/%d  all levels  n=%d+%d  Δ %s (%s, one-sided %s)  p=%.3g",
		StageFinal, d.Step, lk.Index+1, of, cm.N[0], cm.N[1], stats.FormatEffect(cm.Effect), pctConf(cm.Confidence), pctConf(1-lk.Alpha), cm.P)
	return d
}

func pctConf(x float64) string { return strings.TrimSuffix(fmt.Sprintf("%.3g%%", 100*x), ".0%") }

// harmVerdict is a level's non-inferiority check as the ledger's verdict.
func harmVerdict(d stats.Decision) string {
	switch d.Verdict {
	case stats.TooFewSamples:
		return "too few samples"
	case stats.Worse:
		return "harm not excluded"
	}
	return "harm excluded"
}

// ledgerGuard is a guard's non-inferiority check as the ledger holds it.
func ledgerGuard(g stats.GuardRule, d stats.Decision) ledger.Guard {
	return ledger.Guard{Metric: g.Metric, Bound: g.Bound, Regresses: d.Verdict != stats.NoDifference, P: ledger.Num(d.Comparison.P),
		Effect: ledger.Num(d.Change), Worst: ledger.Num(d.Bound), Count: d.Measure == stats.Count}
}

// compare runs n samples per arm of a against b at every background level,
// in ABBA/BAAB blocks whose order is drawn from the seed and id, and
// returns the samples by level.
func (e *engine) compare(ctx context.Context, id string, a, b Arm, n int) (map[int]*pair, error) {
	xs, err := e.compareArms(ctx, id, []Arm{a, b}, n)
	if err != nil {
		return nil, err
	}
	out := map[int]*pair{}
	for bg, x := range xs {
		out[bg] = &pair{x[0], x[1]}
	}
	return out, nil
}

// compareArms runs n samples of every arm at every background level, in
// blocks that run each arm twice in an order and its mirror (ABBA for two
// arms, ABCCBA for three: every arm's mean trial time is the block's
// middle, so a drift within a block favours none). The blocks' levels are
// shuffled; at each level the blocks' orders go round the rotations of one
// order drawn from the seed and id (ABBA then BAAB for two arms), so that
// every arm leads equally often, not by chance. It returns the samples by
// level and arm: on an error, the ones run before it.
func (e *engine) compareArms(ctx context.Context, id string, arms []Arm, n int) (map[int][][]sample, error) {
	h := fnv.New64a()
	h.Write([]byte(id))
	rng := rand.New(rand.NewPCG(e.cfg.Seed, h.Sum64()))
	var blocks []int
	for _, bg := range e.cfg.Ladder {
		for range n / 2 {
			blocks = append(blocks, bg)
		}
	}
	rng.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	out := map[int][][]sample{}
	for _, bg := range e.cfg.Ladder {
		out[bg] = make([][]sample, len(arms))
	}
	k := 0
	base := rng.Perm(len(arms))
	nth := map[int]int{} // blocks so far at each level
	for _, bg := range blocks {
		rot := nth[bg] % len(arms)
		nth[bg]++
		first := append(slices.Clone(base[rot:]), base[:rot]...)
		order := append(slices.Clone(first), first...)
		slices.Reverse(order[len(first):])
		for _, side := range order {
			s, err := e.trial(ctx, fmt.Sprintf("%s/%03d", id, k), side, arms[side], bg)
			if err != nil {
				return out, err
			}
			out[bg][side] = append(out[bg][side], s)
			k++
		}
	}
	return out, nil
}

// use puts arm in force: reverts the arm before, applies this one and lets
// the warm-up pass.
func (e *engine) use(ctx context.Context, arm Arm) error {
	if e.cur == arm.Key() {
		return nil
	}
	// The profile before goes; the tier changes only where the arms differ.
	if e.sess != nil {
		err := e.sess.Stop()
		e.sess, e.cur = nil, ""
		if err != nil {
			return fmt.Errorf("revert before %s: %w", arm.Step, err)
		}
	}
	if arm.Tier != e.tierOn {
		if err := e.env.Tier(arm.Tier); err != nil {
			return fmt.Errorf("tier for %s: %w", arm.Step, err)
		}
		e.tierOn = arm.Tier
	}
	s, err := e.env.Scheduler.Apply(ctx, arm.Profile)
	if err != nil {
		return fmt.Errorf("apply %s (%s): %w", arm.Step, arm.Hash, err)
	}
	e.sess, e.cur = s, arm.Key()
	return e.env.Sleep(ctx, e.cfg.Warmup)
}

func (e *engine) trial(ctx context.Context, id string, side int, arm Arm, bg int) (sample, error) {
	if err := ctx.Err(); err != nil {
		return sample{}, err
	}
	if done, ok := e.env.Done[id]; ok {
		e.trials++
		e.spent += done.End.Sub(e.startOf(id, done))
		e.progress()
		return sample{metrics: done.Metrics, groups: done.Groups}, nil
	}
	switchStart := time.Now()
	if err := e.use(ctx, arm); err != nil {
		return sample{}, err
	}
	if err := e.env.Scheduler.Alive(); err != nil {
		return sample{}, fmt.Errorf("trial %s: %w", id, err)
	}
	var sp Spinners
	if bg > 0 {
		var err error
		if sp, err = e.env.Background(bg); err != nil {
			return sample{}, fmt.Errorf("trial %s: background %d: %w", id, bg, err)
		}
	}
	start := ledger.TrialStart{Trial: id, Stage: e.stage, Step: e.step, Arm: string(rune('A' + side)), Candidate: arm.Key(),
		Params: arm.Step.String(), Bg: bg, Start: time.Now().UTC(), Rerun: e.env.Started[id]}
	if sp != nil {
		start.Spinners = sp.Pids()
	}
	stopSpinners := func() error {
		if sp == nil {
			return nil
		}
		err := sp.Stop()
		sp = nil
		return err
	}
	defer stopSpinners()
	if start.Rerun {
		if err := e.note("trial %s did not complete in the ledger (cut off or failed): running it again", id); err != nil {
			return sample{}, err
		}
	}
	if err := e.env.Ledger.Append(start); err != nil {
		return sample{}, err
	}
	var before []scheduler.GroupStats
	if e.sess != nil {
		before, _ = e.sess.Stats()
	}
	cpu, cpuOK := e.usageBefore()
	dir := filepath.Join(e.env.TrialDir, strings.ReplaceAll(id, "/", "_"))
	t0 := time.Now()
	m, err := e.runBench(ctx, dir)
	wall := time.Since(t0)
	if err != nil && ctx.Err() == nil && bench.CommandFailed(err) {
		err = &benchFailed{err: err, candidate: arm.Key(), trial: id, bg: bg}
	}
	end := ledger.TrialEnd{Trial: id}
	if e.sess != nil && err == nil {
		if after, serr := e.sess.Stats(); serr == nil {
			end.Groups = rates(before, after, wall)
		}
	}
	if err == nil {
		end.CPU = e.usageOver(cpu, cpuOK, wall)
		e.ceilingOf(end.CPU)
	}
	if serr := stopSpinners(); serr != nil && err == nil {
		err = fmt.Errorf("stop background: %w", serr)
	}
	if aerr := e.env.Scheduler.Alive(); aerr != nil {
		// A target gone explains a failed benchmark better than its output.
		if err != nil {
			err = fmt.Errorf("%w (the benchmark then failed: %v)", aerr, err)
		} else {
			err = aerr
		}
	}
	if err == nil {
		if _, ok := m[e.cfg.Metric]; !ok {
			err = fmt.Errorf("the benchmark reported no %s (it reported: %s); choose one of those as the metric", e.cfg.Metric, strings.Join(sortedKeys(m), ", "))
		}
	}
	end.End = time.Now().UTC()
	if err != nil {
		end.Error = oneLine(err.Error())
		if lerr := e.env.Ledger.Append(end); lerr != nil {
			return sample{}, errors.Join(err, lerr)
		}
		return sample{}, fmt.Errorf("trial %s (%s, %s, bg=%d): %w", id, e.stage, arm.Step, bg, err)
	}
	end.Metrics = m
	if err := e.env.Ledger.Append(end); err != nil {
		return sample{}, err
	}
	os.RemoveAll(dir)
	e.trials++
	e.real++
	d := time.Since(switchStart)
	e.realDur += d
	e.spent += d
	e.progress()
	return sample{metrics: m, groups: end.Groups}, nil
}

func (e *engine) startOf(id string, end ledger.TrialEnd) time.Time {
	if t, ok := e.env.StartTimes[id]; ok {
		return t
	}
	return end.End
}

// benchFailed is a trial whose benchmark command failed
// (bench.CommandFailed) with nothing else wrong: the scheduler alive, the
// run not cancelled. Under a candidate in a race, the refined profile in
// the final or a canary check's candidate, that is the profile's result —
// it starved the workload until the benchmark saw nothing — and drops it
// (fails the check); under the incumbent, stock, the tier alone or the
// last good profile it ends the run.
type benchFailed struct {
	err       error
	candidate string // the arm's Key
	trial     string
	bg        int
}

func (b *benchFailed) Error() string { return b.err.Error() }

// in is what ended a comparison for b: what failed (a phrase naming the
// arm), the trial, its level and the benchmark's error, on one line.
func (b *benchFailed) in(what string) string {
	return fmt.Sprintf("%s in trial %s (bg=%d): %s", what, b.trial, b.bg, oneLine(b.Error()))
}
func (b *benchFailed) Unwrap() error { return b.err }

func (e *engine) runBench(ctx context.Context, dir string) (map[string]float64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("trial dir: %w", err)
	}
	return e.env.Bench(ctx, dir)
}

func (e *engine) progress() {
	if e.env.Progress == nil {
		return
	}
	p := Progress{Stage: e.stage, Step: e.step, Trials: e.trials, Planned: e.budgeted(), Elapsed: time.Since(e.begin),
		PerTrial: e.perTrial(), Accepted: len(e.res.Accepted), Round: e.round}
	p.ETA = time.Duration(p.Planned-p.Trials) * p.PerTrial
	e.env.Progress(p)
}

// rates turns two cumulative stats readings into per-second rates by group.
func rates(before, after []scheduler.GroupStats, wall time.Duration) map[string]ledger.GroupRates {
	if wall <= 0 {
		return nil
	}
	prev := map[string]scheduler.GroupStats{}
	for _, s := range before {
		prev[s.Group] = s
	}
	out := map[string]ledger.GroupRates{}
	for _, s := range after {
		p := prev[s.Group]
		sec := wall.Seconds()
		if !s.At.IsZero() && !p.At.IsZero() && s.At.After(p.At) {
			sec = s.At.Sub(p.At).Seconds() // the readings' own clock
		}
		out[s.Group] = ledger.GroupRates{
			CPUs:            float64(sub(s.RuntimeNs, p.RuntimeNs)) / 1e9 / sec,
			SwitchesPerS:    float64(sub(s.Dispatches, p.Dispatches)) / sec,
			PreemptsPerS:    float64(sub(s.Preemptions, p.Preemptions)) / sec,
			SiblingBusyPerS: float64(sub(s.SiblingBusy, p.SiblingBusy)) / sec,
		}
	}
	return out
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// decision records a stats decision of arm B against arm A at one level,
// with every guard's non-inferiority checked on the same trials. The
// caller decides acceptance.
func (e *engine) decision(stage string, cand Arm, bg int, p *pair, sd stats.Decision) ledger.Decision {
	c := &e.cfg
	d := e.levelDecision(stage, cand, cand.Step.String(), bg, sd.Comparison, sd.Verdict.String(), false)
	d.Reason = strings.TrimPrefix(sd.Reason, stats.Line(c.Metric, sd.Comparison)+"  ")
	xs := map[int][][]sample{bg: {p[0], p[1]}}
	rules, data := e.guardData(xs, []int{bg}, 0, 1)
	for g, gr := range rules {
		_, gd := stats.NonInferior(data[g][0].Base, data[g][0].Cand, gr.Dir, gr.Measure, gr.Bound, c.Alpha)
		d.Guards = append(d.Guards, ledgerGuard(gr, gd))
	}
	return d
}

// levelDecision is the ledger's record of one level's comparison of cand,
// named step.
func (e *engine) levelDecision(stage string, cand Arm, step string, bg int, cmp stats.Comparison, verdict string, accepted bool) ledger.Decision {
	c := &e.cfg
	d := ledger.Decision{Stage: stage, Round: e.round, Step: step, Group: cand.Step.Group, Candidate: cand.Key(), Test: "mann-whitney-u", Metric: c.Metric, Bg: bg,
		N: [2]int{cmp.NBase, cmp.NCand}, Base: iv(cmp.Base), Cand: iv(cmp.Cand), Effect: iv(cmp.Rel), P: ledger.Num(cmp.P),
		Verdict: verdict, Accepted: accepted, Reason: verdict}
	d.Line = fmt.Sprintf("%-11s %s  bg=%d  %s", stage, d.Step, bg, stats.Line(c.Metric, cmp))
	return d
}

// strata are the primary metric's samples by level, side b against side
// r: the final's and the canary check's strata.
func (e *engine) strata(xs map[int][][]sample, b, r int) []stats.Pair {
	var ps []stats.Pair
	for _, bg := range e.cfg.Ladder {
		ps = append(ps, stats.Pair{Base: values(xs[bg][b], e.cfg.Metric), Cand: values(xs[bg][r], e.cfg.Metric)})
	}
	return ps
}

// guardData are the guards with their samples by level (side b against
// side r): the guards the benchmark reported in every trial; the others
// are noted once and not checked.
func (e *engine) guardData(xs map[int][][]sample, levels []int, b, r int) ([]stats.GuardRule, [][]stats.Pair) {
	var rules []stats.GuardRule
	var data [][]stats.Pair
	for _, g := range e.cfg.Guards {
		var ps []stats.Pair
		complete := true
		for _, bg := range levels {
			gb, gc := values(xs[bg][b], g.Metric), values(xs[bg][r], g.Metric)
			complete = complete && len(gb) == len(xs[bg][b]) && len(gc) == len(xs[bg][r])
			ps = append(ps, stats.Pair{Base: gb, Cand: gc})
		}
		if !complete {
			if !e.noted[g.Metric] {
				e.noted[g.Metric] = true
				e.note("guard %s: the benchmark does not report it in every trial; not checked", g.Metric)
			}
			continue
		}
		rules = append(rules, stats.GuardRule{Metric: g.Metric, Dir: g.Dir, Measure: g.Measure(), Bound: g.Bound})
		data = append(data, ps)
	}
	return rules, data
}

func iv(i stats.Interval) ledger.Interval {
	return ledger.Interval{Lo: ledger.Num(i.Lo), Center: ledger.Num(i.Center), Hi: ledger.Num(i.Hi)}
}

// record writes a decision to the ledger and the log.
func (e *engine) record(d *ledger.Decision) error {
	e.env.Log("%s  → %s", d.Line, d.Reason)
	return e.env.Ledger.Append(*d)
}

// mechanism checks that the group the step changes moved the way the step
// predicts: a group favoured more is preempted less, a group favoured less
// more. Involuntary preemptions per run of the group (preemptsPerRun), per
// trial, are compared across the arms with the same test as the metric.
func (e *engine) mechanism(s Step, p *pair) *ledger.Mechanism {
	if s.Group == "" {
		return nil
	}
	m := &ledger.Mechanism{Group: s.Group, Counter: "preempts_per_run"}
	var a, b []float64
	for side, xs := range p {
		for _, x := range xs {
			v, ok := preemptsPerRun(x.groups, s.Group)
			if !ok {
				continue
			}
			if side == 0 {
				a = append(a, v)
			} else {
				b = append(b, v)
			}
		}
	}
	switch {
	case s.Favour > 0:
		m.Predicted = "down"
	case s.Favour < 0:
		m.Predicted = "up"
	default:
		m.Predicted = "change"
	}
	if len(a) < 2 || len(b) < 2 {
		m.Note = "no scheduler stats or no dispatches of the group in two trials of each arm"
		return m
	}
	cmp := stats.Compare(a, b, 1-e.cfg.Alpha)
	m.Base, m.Cand, m.P = ledger.Num(cmp.Base.Center), ledger.Num(cmp.Cand.Center), ledger.Num(cmp.P)
	sig := cmp.P < e.cfg.Alpha
	switch m.Predicted {
	case "down":
		m.Moved = sig && cmp.Shift.Center < 0
	case "up":
		m.Moved = sig && cmp.Shift.Center > 0
	default:
		m.Moved = sig
	}
	return m
}

// preemptsPerRun is the share of a group's dispatches in one trial that
// ended in an involuntary preemption, and false for a trial without
// scheduler stats or dispatches of the group. Per run, not per second: the
// count per second grows with the time the group runs, so a step that
// favours a group that seldom ran (yield → normal) raises it even when each
// run is cut short less often.
func preemptsPerRun(groups map[string]ledger.GroupRates, group string) (float64, bool) {
	r, ok := groups[group]
	if !ok || r.SwitchesPerS <= 0 {
		return 0, false
	}
	return r.PreemptsPerS / r.SwitchesPerS, true
}

func values(xs []sample, metric string) []float64 {
	var v []float64
	for _, x := range xs {
		if f, ok := x.metrics[metric]; ok {
			v = append(v, f)
		}
	}
	return v
}

func metricNames(xs []sample) []string {
	set := map[string]float64{}
	for _, x := range xs {
		for k, v := range x.metrics {
			set[k] = v
		}
	}
	return sortedKeys(set)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
