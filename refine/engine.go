// Package refine measures whether a workload profile helps and keeps only
// what does: calibration (stock against stock) first, then one-parameter
// hill climbing from the input profile, each candidate against the current
// profile in randomised ABBA blocks, screened on a few pairs and confirmed
// on fresh trials, accepted only when the Mann–Whitney test (refine/stats)
// is significant after Holm's correction across the round, the shift's
// interval clears the minimum effect and no guard metric regresses; then a
// final stock-against-refined comparison on fresh trials decides whether
// anything is written. Every trial and decision goes to the ledger first
// (refine/ledger), so a run cut off at any point resumes where it stopped:
// the plan is a deterministic function of the configuration, the seed and
// the trial results, and a resumed run replays recorded trials instead of
// running them again.
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

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/stats"
	"temper.codes/temper-train/scheduler"
)

// Stages of a run, as the ledger names them.
const (
	StageCalibration = "calibration"
	StageScreen      = "screen"
	StageConfirm     = "confirm"
	StageFinal       = "final"
)

// ErrNoisy is wrapped when calibration finds the benchmark too noisy for
// the minimum effect within the n refine may use.
var ErrNoisy = errors.New("benchmark too noisy")

// ErrBudget is wrapped when the budget (Config.MaxTrials, Config.MaxTime)
// cannot hold calibration and the final comparison: the run would measure
// nothing worth keeping. Config.Check refuses a trial budget that is too
// small before the first trial; a time budget is known to be too small
// only once calibration has timed the trials.
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
	// ConfirmN and FinalN are the sample sizes used after calibration.
	ConfirmN, FinalN int
	Notes            []string
}

// Calibration is the A/A noise at one background level.
type Calibration struct {
	Bg       int
	N        int                // trials
	CV       map[string]float64 // per metric
	Noise    map[string]float64 // per metric: stats.Noise, what sizes n
	Decision ledger.Decision    // stock vs stock
}

// Round is one round of hill climbing.
type Round struct {
	Index      int
	Incumbent  string // hash
	Candidates int
	Rejected   []Rejected // lint refused
	// Unchanged counts the candidates not run: their kernel state on the
	// backend is the incumbent's or an earlier candidate's (Env.Realise).
	Unchanged int
	Decisions []ledger.Decision
	Accepted  *Step
	// Partial is set when the budget let the round screen only some of
	// its candidates: accepting nothing then is not convergence.
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
	cands, rej, err := Candidates(base, e.env.Lint)
	if err != nil {
		return err
	}
	perRound := (len(cands)+len(e.env.Alternatives))*e.trialsOf(c.ScreenN) + 2*e.trialsOf(c.ConfirmN)
	cal, fin := e.trialsOf(c.CalibrationN), c.finalTrials()
	e.planned = cal + perRound + fin
	finalArms := stock.Step.Param + " vs refined"
	if c.Tier {
		finalArms = stock.Step.Param + " vs tier only vs tier + refined"
		e.env.Log("arms: the tier (%s) is in force with every profile; steps are decided against tier only", "the node's BestEffort pods made an idle entity")
	}
	e.env.Log("plan: calibration %d trials (%s vs itself, %d per arm × %d background levels %v); each round screens ≤ %d candidates (%d lint-rejected) with %d per arm, confirms the promising on %d fresh per arm (≈ %d trials a round); final %s %d per arm (%d trials)",
		cal, stock.Step.Param, c.CalibrationN, e.levels(), c.Ladder, len(cands), len(rej), c.ScreenN, c.ConfirmN, perRound, finalArms, c.FinalN, fin)
	e.env.Log("budget: %s; at least %d trials (calibration + one round + final)", e.budgetString(), e.planned)

	if err := e.calibrate(ctx, stock); err != nil {
		return err
	}
	e.env.Log("estimate: %s per trial → one round ≈ %s, final ≈ %s", e.perTrial().Round(time.Millisecond),
		(time.Duration(perRound) * e.perTrial()).Round(time.Second), (time.Duration(fin) * e.perTrial()).Round(time.Second))

	reserve := c.finalTrials()
	if !e.fits(0, reserve) {
		return fmt.Errorf("%w: the final comparison alone needs %d more trials (%d per arm and level) and the budget (%s) leaves room for fewer after %d trials of calibration; raise the budget or the minimum effect",
			ErrBudget, reserve, c.FinalN, e.budgetString(), e.trials)
	}
	for e.round = 1; e.round <= c.MaxRounds; e.round++ {
		r, err := e.climb(ctx, incumbent, reserve)
		if r != nil {
			e.res.Rounds = append(e.res.Rounds, r.Round)
		}
		if errors.Is(err, errBudget) {
			e.res.Stopped = fmt.Sprintf("budget: round %d would not fit the budget (%s) with the final comparison", e.round, e.budgetString())
			break
		}
		if err != nil {
			return err
		}
		if r.Accepted == nil && r.Partial {
			e.res.Stopped = fmt.Sprintf("budget: round %d screened %d of %d candidates and accepted none", e.round, screened(r.Decisions, len(e.cfg.Ladder)), r.Candidates)
			break
		}
		if r.Accepted == nil {
			e.res.Stopped = fmt.Sprintf("converged: round %d accepted none of its %d candidates", e.round, r.Candidates)
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
	e.env.Log("hill climbing stopped: %s; %d step(s) accepted", e.res.Stopped, len(e.res.Accepted))
	e.res.Refined = incumbent.Profile
	return e.final(ctx, stock, incumbent)
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

// screened counts the candidates a round screened from its decisions.
func screened(ds []ledger.Decision, levels int) int {
	n := 0
	for _, d := range ds {
		if d.Stage == StageScreen {
			n++
		}
	}
	return n / max(levels, 1)
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

func (e *engine) calibrate(ctx context.Context, stock Arm) error {
	c := &e.cfg
	e.stage, e.step = StageCalibration, stock.Step.Param+" vs itself"
	ps, err := e.compare(ctx, "cal", stock, stock, c.CalibrationN)
	if err != nil {
		return err
	}
	need := c.ConfirmN
	worst, worstBg := 0.0, 0
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
		// The rank tests are robust to the odd outlier run, so their n is
		// sized by the robust noise; the plain CV is shown beside it.
		cv := cal.Noise[c.Metric]
		shown := map[string]float64{c.Metric: cal.CV[c.Metric]}
		for _, g := range c.Guards {
			if v, ok := cal.CV[g.Metric]; ok {
				shown[g.Metric] = v
			}
		}
		e.env.Log("calibration bg=%d: %s noise %.1f%% (1.4826·MAD/median) over %d %s trials; CV %s", bg, c.Metric, 100*cv, len(all), stock.Step.Param, cvList(shown))
		if cv > worst {
			worst, worstBg = cv, bg
		}
	}
	if c.MinEffect > 0 && worst > c.MinEffect {
		// n per arm for which the 95% interval of the relative shift is
		// narrower than ±MinEffect, so that an effect of twice MinEffect
		// clears it: half-width ≈ 1.96·CV·√(2/n)·√(π/3) (Mann–Whitney's
		// efficiency against the t interval is 3/π).
		n := int(math.Ceil(2 * 1.96 * 1.96 * math.Pi / 3 * (worst / c.MinEffect) * (worst / c.MinEffect)))
		n += n % 2
		if n > need {
			if n > c.MaxN {
				return fmt.Errorf("%w: %s varies %.1f%% between runs of %s (1.4826·MAD/median of %d trials at bg=%d) against the minimum effect %.1f%%: confirming would need about %d trials per arm, more than %d; lengthen the benchmark, quiet the machine or raise the minimum effect",
					ErrNoisy, c.Metric, 100*worst, stock.Step.Param, 2*c.CalibrationN, worstBg, 100*c.MinEffect, n, c.MaxN)
			}
			if err := e.note("noise: %s %.1f%% (1.4826·MAD/median) at bg=%d is large against the minimum effect %.1f%%: confirm and final n raised from %d to %d per arm",
				c.Metric, 100*worst, worstBg, 100*c.MinEffect, need, n); err != nil {
				return err
			}
			c.ConfirmN = n
			c.FinalN = max(c.FinalN, n)
		}
	}
	e.res.ConfirmN, e.res.FinalN = c.ConfirmN, c.FinalN
	return nil
}

func cvList(cv map[string]float64) string {
	var parts []string
	for _, m := range sortedKeys(cv) {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", m, 100*cv[m]))
	}
	return strings.Join(parts, ", ")
}

// roundState is a round with the arms its candidates were.
type roundState struct {
	Round
	arms []Arm
}

// climb runs one round from incumbent: screen the candidates the budget
// holds, confirm the promising on fresh trials, decide the confirmed
// together (Holm), accept the one that gained most without harm anywhere.
func (e *engine) climb(ctx context.Context, inc Arm, reserve int) (*roundState, error) {
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
	cands, same, err := e.distinct(inc, cands)
	if err != nil {
		return nil, err
	}
	r := &roundState{Round: Round{Index: e.round, Incumbent: inc.Hash, Candidates: len(cands), Rejected: rej, Unchanged: len(same)}, arms: cands}
	if len(same) > 0 {
		if err := e.note("round %d: %d candidate(s) leave the kernel state as %s does on this backend and are not run: %s", e.round, len(same), inc.Hash, strings.Join(same, "; ")); err != nil {
			return r, err
		}
	}
	for _, x := range rej {
		if err := e.note("round %d: candidate %s (%s) refused by lint, not applied: %s", e.round, x.Arm.Step, x.Arm.Hash, x.Finding); err != nil {
			return r, err
		}
	}
	e.planned = e.trials + len(cands)*e.trialsOf(c.ScreenN) + 2*e.trialsOf(c.ConfirmN) + reserve
	// Screen as many candidates as the budget holds, keeping room for one
	// confirmation and the final comparison.
	fit := 0
	for fit < len(cands) && e.fits((fit+1)*e.trialsOf(c.ScreenN)+e.trialsOf(c.ConfirmN), reserve) {
		fit++
	}
	if fit == 0 {
		return r, errBudget
	}
	if fit < len(cands) {
		r.Partial = true
		e.planned = e.trials + fit*e.trialsOf(c.ScreenN) + e.trialsOf(c.ConfirmN) + reserve
		if err := e.note("round %d: the budget (%s) holds %d of %d candidates; screening the first %d (treatment moves first)", e.round, e.budgetString(), fit, len(cands), fit); err != nil {
			return r, err
		}
	}
	rule := e.rule()
	var promising []Arm
	for i, a := range cands[:fit] {
		e.stage, e.step = StageScreen, a.Step.String()
		ps, err := e.compare(ctx, fmt.Sprintf("r%d/s%02d-%s", e.round, i, a.Hash), inc, a, c.ScreenN)
		if err != nil {
			return r, err
		}
		pass, worse := false, false
		var ds []ledger.Decision
		for _, bg := range c.Ladder {
			sd := stats.Decide(values(ps[bg][0], c.Metric), values(ps[bg][1], c.Metric), rule)
			d := e.decision(StageScreen, a, bg, ps[bg], sd)
			if float64(d.P) < c.ScreenP && float64(d.Effect.Center)*float64(c.Dir) > 0 {
				pass = true
			}
			worse = worse || sd.Verdict == stats.Worse
			ds = append(ds, d)
		}
		pass = pass && !worse
		for _, d := range ds {
			if pass {
				d.Reason = fmt.Sprintf("screen: promising (p < %.2f in the better direction), confirm on fresh trials; %s", c.ScreenP, d.Reason)
			} else {
				d.Reason = "screen: dropped; " + d.Reason
			}
			if err := e.record(&d); err != nil {
				return r, err
			}
			r.Decisions = append(r.Decisions, d)
		}
		if pass {
			promising = append(promising, a)
		}
	}
	if len(promising) == 0 {
		return r, nil
	}
	// Confirm on fresh trials, then decide every (candidate, level) of the
	// round together: Holm across them (stats.DecideRound).
	type hyp struct {
		arm  int
		bg   int
		pair *pair
	}
	var hs []hyp
	var confirmed []Arm
	for i, a := range promising {
		if !e.fits(e.trialsOf(c.ConfirmN), reserve) {
			if err := e.note("round %d: %d promising candidate(s) left unconfirmed: the budget keeps %d trials for the final comparison", e.round, len(promising)-i, reserve); err != nil {
				return r, err
			}
			break
		}
		e.stage, e.step = StageConfirm, a.Step.String()
		ps, err := e.compare(ctx, fmt.Sprintf("r%d/c-%s", e.round, a.Hash), inc, a, c.ConfirmN)
		if err != nil {
			return r, err
		}
		for _, bg := range c.Ladder {
			hs = append(hs, hyp{arm: len(confirmed), bg: bg, pair: ps[bg]})
		}
		confirmed = append(confirmed, a)
	}
	if len(hs) == 0 {
		return r, nil
	}
	var round []stats.Pair
	for _, h := range hs {
		round = append(round, stats.Pair{Base: values(h.pair[0], c.Metric), Cand: values(h.pair[1], c.Metric)})
	}
	sds := stats.DecideRound(round, rule)
	ds := make([]ledger.Decision, len(hs))
	better := make([]bool, len(confirmed))
	vetoed := make([]bool, len(confirmed))
	gain := make([]float64, len(confirmed))
	for k, h := range hs {
		a := confirmed[h.arm]
		ds[k] = e.decision(StageConfirm, a, h.bg, h.pair, sds[k])
		ds[k].Mechanism = e.mechanism(a.Step, h.pair)
		switch g := guardFails(ds[k].Guards); {
		case sds[k].Verdict == stats.Worse:
			vetoed[h.arm] = true
			ds[k].Reason = "rejected: worse at this level; " + ds[k].Reason
		case g != "":
			vetoed[h.arm] = true
			ds[k].Reason = "rejected: guard " + g + "; " + ds[k].Reason
		case sds[k].Verdict == stats.Better:
			better[h.arm] = true
			gain[h.arm] = max(gain[h.arm], math.Abs(float64(ds[k].Effect.Center)))
		}
	}
	best := -1
	for i := range confirmed {
		if better[i] && !vetoed[i] && (best < 0 || gain[i] > gain[best]) {
			best = i
		}
	}
	for k, h := range hs {
		d := &ds[k]
		switch {
		case h.arm == best && sds[k].Verdict == stats.Better:
			d.Accepted = true
			if m := d.Mechanism; m != nil && !m.Moved {
				m.Suspect = true
				d.Reason = fmt.Sprintf("ACCEPTED, SUSPECT: group %q's %s did not move %s; %s", m.Group, m.Counter, m.Predicted, d.Reason)
			} else {
				d.Reason = "ACCEPTED; " + d.Reason
			}
		case h.arm == best:
			d.Reason = "the step is accepted on another level; here: " + d.Reason
		case better[h.arm] && !vetoed[h.arm] && sds[k].Verdict == stats.Better:
			d.Reason = "not taken: another candidate of this round gained more; " + d.Reason
		case vetoed[h.arm] && sds[k].Verdict == stats.Better:
			d.Reason = "vetoed by another level; " + d.Reason
		}
		if err := e.record(d); err != nil {
			return r, err
		}
		r.Decisions = append(r.Decisions, *d)
	}
	if best >= 0 {
		s := confirmed[best].Step
		r.Accepted = &s
		e.env.Log("round %d: accepted %s", e.round, s)
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
// measure an arm already measured. It returns what it kept and a line per
// candidate dropped.
func (e *engine) distinct(inc Arm, cands []Arm) ([]Arm, []string, error) {
	if e.env.Realise == nil {
		return cands, nil, nil
	}
	key, err := e.env.Realise(inc.Profile)
	if err != nil {
		return nil, nil, fmt.Errorf("realise the incumbent %s: %w", inc.Hash, err)
	}
	if key == "" {
		return cands, nil, nil
	}
	seen := map[string]string{key: "the incumbent"}
	var kept []Arm
	var same []string
	for _, a := range cands {
		k, err := e.env.Realise(a.Profile)
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
	}
	return kept, same, nil
}

func (e *engine) rule() stats.Rule {
	return stats.Rule{Metric: e.cfg.Metric, Alpha: e.cfg.Alpha, MinEffect: e.cfg.MinEffect, Dir: e.cfg.Dir}
}

func guardFails(gs []ledger.Guard) string {
	for _, g := range gs {
		if g.Regresses {
			return fmt.Sprintf("%s moved %s (bound %s, p=%.3g)", g.Metric, g.Change(), guardBound(g), float64(g.P))
		}
	}
	return ""
}

func (e *engine) final(ctx context.Context, stock, refined Arm) error {
	c := &e.cfg
	if refined.Key() == stock.Key() {
		// The climb ended where it started, on the reference itself: there
		// is nothing to compare and nothing new to keep.
		e.res.Kept = false
		return e.note("final: the refined profile is the reference (%s, %s): nothing new to compare or keep", stock.Step.Param, stock.Hash)
	}
	e.planned = e.trials + c.finalTrials()
	base := stock
	var ps map[int]*pair
	if c.Tier {
		// The seeds' three arms side by side: the tier's effect and the
		// product's (tier + profile against stock) are described; what
		// decides is what the profile adds to the tier.
		tier := Arm{Hash: StockHash, Step: Step{Param: "tier only"}, Tier: true}
		base = tier
		e.stage, e.step = StageFinal, stock.Step.Param+" vs tier only vs tier + refined"
		xs, err := e.compareArms(ctx, "final3-"+refined.Hash, []Arm{stock, tier, refined}, c.FinalN)
		if err != nil {
			return err
		}
		for _, arm := range []struct {
			side int
			a    Arm
			what string
		}{{1, tier, "what the tier does"}, {2, refined, "the product's result"}} {
			e.step = arm.a.Step.Param + " vs " + stock.Step.Param
			if arm.side == 2 {
				e.step = "tier + refined vs " + stock.Step.Param
			}
			var round []stats.Pair
			for _, bg := range c.Ladder {
				round = append(round, stats.Pair{Base: values(xs[bg][0], c.Metric), Cand: values(xs[bg][arm.side], c.Metric)})
			}
			sds := stats.DecideRound(round, e.rule())
			for i, bg := range c.Ladder {
				d := e.decision(StageFinal, arm.a, bg, &pair{xs[bg][0], xs[bg][arm.side]}, sds[i])
				d.Step = e.step
				d.Reason = fmt.Sprintf("described, not decided (%s); %s", arm.what, d.Reason)
				if err := e.record(&d); err != nil {
					return err
				}
				e.res.Described = append(e.res.Described, d)
			}
		}
		ps = map[int]*pair{}
		for bg, x := range xs {
			ps[bg] = &pair{x[1], x[2]}
		}
		e.step = "tier + refined vs tier only"
	} else {
		e.stage, e.step = StageFinal, stock.Step.Param+" vs refined"
		var err error
		if ps, err = e.compare(ctx, "final-"+refined.Hash, stock, refined, c.FinalN); err != nil {
			return err
		}
	}
	var round []stats.Pair
	for _, bg := range c.Ladder {
		round = append(round, stats.Pair{Base: values(ps[bg][0], c.Metric), Cand: values(ps[bg][1], c.Metric)})
	}
	sds := stats.DecideRound(round, e.rule())
	var ds []ledger.Decision
	kept, harm := false, false
	for i, bg := range c.Ladder {
		d := e.decision(StageFinal, refined, bg, ps[bg], sds[i])
		d.Step = e.step
		if sds[i].Verdict == stats.Worse || guardFails(d.Guards) != "" {
			harm = true
		}
		if sds[i].Verdict == stats.Better {
			kept = true
		}
		ds = append(ds, d)
	}
	kept = kept && !harm
	for i := range ds {
		d := &ds[i]
		d.Accepted = kept
		if kept {
			d.Reason = "KEPT: the refined profile beats " + base.Step.Param + "; " + d.Reason
		} else {
			d.Reason = "NOT KEPT: the refined profile does not beat " + base.Step.Param + " without harm at some level; " + d.Reason
		}
		if g := guardFails(d.Guards); g != "" {
			d.Reason = "guard " + g + "; " + d.Reason
		}
		if err := e.record(d); err != nil {
			return err
		}
	}
	e.res.Final = ds
	e.res.Kept = kept
	return nil
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
// middle, so a drift within a block favours none), the blocks and their
// orders drawn from the seed and id. It returns the samples by level and
// arm.
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
	for _, bg := range blocks {
		var first []int
		if len(arms) == 2 {
			first = []int{0, 1}
			if rng.IntN(2) == 1 {
				first = []int{1, 0}
			}
		} else {
			first = rng.Perm(len(arms))
		}
		order := append(slices.Clone(first), first...)
		slices.Reverse(order[len(first):])
		for _, side := range order {
			s, err := e.trial(ctx, fmt.Sprintf("%s/%03d", id, k), side, arms[side], bg)
			if err != nil {
				return nil, err
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
	dir := filepath.Join(e.env.TrialDir, strings.ReplaceAll(id, "/", "_"))
	t0 := time.Now()
	m, err := e.runBench(ctx, dir)
	wall := time.Since(t0)
	end := ledger.TrialEnd{Trial: id}
	if e.sess != nil && err == nil {
		if after, serr := e.sess.Stats(); serr == nil {
			end.Groups = rates(before, after, wall)
		}
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
// with the guards checked on the same trials. The caller decides
// acceptance.
func (e *engine) decision(stage string, cand Arm, bg int, p *pair, sd stats.Decision) ledger.Decision {
	c := &e.cfg
	cmp := sd.Comparison
	d := ledger.Decision{Stage: stage, Round: e.round, Step: cand.Step.String(), Group: cand.Step.Group, Candidate: cand.Key(), Test: "mann-whitney-u", Metric: c.Metric, Bg: bg,
		N: [2]int{cmp.NBase, cmp.NCand}, Base: iv(cmp.Base), Cand: iv(cmp.Cand), Effect: iv(cmp.Rel), P: ledger.Num(cmp.P),
		Verdict: sd.Verdict.String()}
	line := stats.Line(c.Metric, cmp)
	d.Reason = strings.TrimPrefix(sd.Reason, line+"  ")
	for _, g := range c.Guards {
		gb, gc := values(p[0], g.Metric), values(p[1], g.Metric)
		if len(gb) < len(p[0]) || len(gc) < len(p[1]) {
			if !e.noted[g.Metric] {
				e.noted[g.Metric] = true
				e.note("guard %s: the benchmark does not report it in every trial; not checked", g.Metric)
			}
			continue
		}
		reg, gd := stats.Regresses(gb, gc, g.Dir, g.Measure(), g.Bound, c.Alpha)
		d.Guards = append(d.Guards, ledger.Guard{Metric: g.Metric, Bound: g.Bound, Regresses: reg, P: ledger.Num(gd.Comparison.P),
			Effect: ledger.Num(gd.Change), Count: gd.Measure == stats.Count})
	}
	d.Line = fmt.Sprintf("%-11s %s  bg=%d  %s", stage, d.Step, bg, line)
	return d
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
// more. Involuntary preemptions per second of the group, per trial, are
// compared across the arms with the same test as the metric.
func (e *engine) mechanism(s Step, p *pair) *ledger.Mechanism {
	if s.Group == "" {
		return nil
	}
	m := &ledger.Mechanism{Group: s.Group, Counter: "preempts_per_s"}
	var a, b []float64
	for side, xs := range p {
		for _, x := range xs {
			r, ok := x.groups[s.Group]
			if !ok {
				continue
			}
			if side == 0 {
				a = append(a, r.PreemptsPerS)
			} else {
				b = append(b, r.PreemptsPerS)
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
		m.Note = "no scheduler stats for the group in both arms"
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
