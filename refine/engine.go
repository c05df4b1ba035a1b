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

// errBudget stops the hill climbing when the next stage would not fit.
var errBudget = errors.New("budget spent")

// Result is what a run found.
type Result struct {
	Calibration []Calibration
	Rounds      []Round
	Final       []ledger.Decision // per background level: stock (A) vs refined (B)
	// Refined is the profile the hill climbing ended with; Kept says
	// whether it beat stock in the final comparison (only then is it worth
	// writing).
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
	Decision ledger.Decision    // stock vs stock
}

// Round is one round of hill climbing.
type Round struct {
	Index      int
	Incumbent  string // hash
	Candidates int
	Rejected   []Rejected // lint refused
	Decisions  []ledger.Decision
	Accepted   *Step
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
	cur     string // hash of the arm in force, "" none yet
	sess    Session
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
	cfg.Defaults()
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if env.Sleep == nil {
		env.Sleep = sleep
	}
	if env.Log == nil {
		env.Log = func(string, ...any) {}
	}
	e := &engine{cfg: cfg, env: env, begin: time.Now(), res: &Result{}, noted: map[string]bool{}}
	defer e.revert()
	err := e.run(ctx, base)
	if rerr := e.revert(); rerr != nil && err == nil {
		err = fmt.Errorf("revert: %w", rerr)
	}
	e.res.Trials = e.trials
	return e.res, err
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
	if e.sess == nil {
		return nil
	}
	err := e.sess.Stop()
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
func (e *engine) trialsOf(n int) int { return 2 * n * e.levels() }

func (e *engine) run(ctx context.Context, base *profiles.Profile) error {
	c := &e.cfg
	stock, _ := NewArm(nil, Step{Param: "stock CFS"})
	incumbent, err := NewArm(base, Step{Param: "input profile"})
	if err != nil {
		return err
	}
	if fs := e.env.Lint(base); profiles.HasErrors(fs) {
		for _, f := range fs {
			if f.Severity == profiles.Error {
				return fmt.Errorf("input profile: %s; nothing was changed", f)
			}
		}
	}
	cands, rej, err := Candidates(base, e.env.Lint)
	if err != nil {
		return err
	}
	perRound := len(cands)*e.trialsOf(c.ScreenN) + 2*e.trialsOf(c.ConfirmN)
	cal, fin := e.trialsOf(c.CalibrationN), e.trialsOf(c.FinalN)
	e.planned = cal + perRound + fin
	e.env.Log("plan: calibration %d trials (stock vs stock, %d per arm × %d background levels %v); each round screens ≤ %d candidates (%d lint-rejected) with %d per arm, confirms the promising on %d fresh per arm (≈ %d trials a round); final stock vs refined %d per arm (%d trials)",
		cal, c.CalibrationN, e.levels(), c.Ladder, len(cands), len(rej), c.ScreenN, c.ConfirmN, perRound, c.FinalN, fin)
	e.env.Log("budget: %s; at least %d trials (calibration + one round + final)", e.budgetString(), e.planned)

	if err := e.calibrate(ctx, stock); err != nil {
		return err
	}
	e.env.Log("estimate: %s per trial → one round ≈ %s, final ≈ %s", e.perTrial().Round(time.Millisecond),
		(time.Duration(perRound) * e.perTrial()).Round(time.Second), (time.Duration(fin) * e.perTrial()).Round(time.Second))

	reserve := e.trialsOf(c.FinalN)
	for e.round = 1; e.round <= c.MaxRounds; e.round++ {
		r, err := e.climb(ctx, incumbent, reserve)
		if r != nil {
			e.res.Rounds = append(e.res.Rounds, r.Round)
		}
		if errors.Is(err, errBudget) {
			e.res.Stopped = fmt.Sprintf("budget: round %d would not fit %s with the final comparison", e.round, e.budgetString())
			break
		}
		if err != nil {
			return err
		}
		if r.Accepted == nil {
			e.res.Stopped = fmt.Sprintf("converged: round %d accepted nothing", e.round)
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
		e.res.Stopped = fmt.Sprintf("--max-rounds %d reached", c.MaxRounds)
	}
	e.env.Log("hill climbing stopped: %s; %d step(s) accepted", e.res.Stopped, len(e.res.Accepted))
	e.res.Refined = incumbent.Profile
	return e.final(ctx, stock, incumbent)
}

func (e *engine) budgetString() string {
	var parts []string
	if e.cfg.MaxTrials > 0 {
		parts = append(parts, fmt.Sprintf("--max-trials %d", e.cfg.MaxTrials))
	}
	if e.cfg.MaxTime > 0 {
		parts = append(parts, fmt.Sprintf("--max-time %s", e.cfg.MaxTime))
	}
	if len(parts) == 0 {
		return "no limit but convergence and --max-rounds"
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

// perTrial is the mean wall time of a trial (with switch-overs), from the
// trials run and replayed so far.
func (e *engine) perTrial() time.Duration {
	if e.trials == 0 {
		return 0
	}
	return e.spent / time.Duration(e.trials)
}

func (e *engine) calibrate(ctx context.Context, stock Arm) error {
	c := &e.cfg
	e.stage, e.step = StageCalibration, "stock vs stock"
	ps, err := e.compare(ctx, "cal", stock, stock, c.CalibrationN)
	if err != nil {
		return err
	}
	need := c.ConfirmN
	worst, worstBg := 0.0, 0
	for _, bg := range c.Ladder {
		p := ps[bg]
		all := append(slices.Clone(p[0]), p[1]...)
		cal := Calibration{Bg: bg, N: len(all), CV: map[string]float64{}}
		for _, m := range metricNames(all) {
			cal.CV[m] = stats.CV(values(all, m))
		}
		d := e.decision(StageCalibration, "A/A", stock, bg, p)
		d.Reason = "A/A calibration: " + d.Reason
		if err := e.record(&d); err != nil {
			return err
		}
		cal.Decision = d
		e.res.Calibration = append(e.res.Calibration, cal)
		cv := cal.CV[c.Metric]
		e.env.Log("calibration bg=%d: %s CV %.1f%% over %d stock trials (%s)", bg, c.Metric, 100*cv, len(all), cvList(cal.CV))
		if cv > worst {
			worst, worstBg = cv, bg
		}
	}
	if c.MinEffect > 0 && worst > c.MinEffect/2 {
		// n per arm for 80% power at alpha 0.05 against a shift of
		// MinEffect with this CV (normal approximation, Mann–Whitney at
		// 3/π efficiency): 2·(1.96+0.84)²·(π/3)·(CV/d)².
		n := int(math.Ceil(2 * 7.84 * math.Pi / 3 * (worst / c.MinEffect) * (worst / c.MinEffect)))
		n += n % 2
		if n > need {
			if n > c.MaxN {
				return fmt.Errorf("%w: %s varies %.1f%% between stock runs (CV of %d trials at bg=%d) against --min-effect %.1f%%: confirming would need about %d trials per arm, more than %d; lengthen the benchmark, quiet the machine or raise --min-effect",
					ErrNoisy, c.Metric, 100*worst, 2*c.CalibrationN, worstBg, 100*c.MinEffect, n, c.MaxN)
			}
			if err := e.note("noise: %s CV %.1f%% at bg=%d is large against --min-effect %.1f%%: confirm and final n raised from %d to %d per arm",
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

// climb runs one round from incumbent: screen every candidate, confirm the
// promising on fresh trials, Holm across the confirmed, accept the best.
type roundState struct {
	Round
	arms []Arm
}

func (e *engine) climb(ctx context.Context, inc Arm, reserve int) (*roundState, error) {
	c := &e.cfg
	cands, rej, err := Candidates(inc.Profile, e.env.Lint)
	if err != nil {
		return nil, err
	}
	r := &roundState{Round: Round{Index: e.round, Incumbent: inc.Hash, Candidates: len(cands), Rejected: rej}, arms: cands}
	for _, x := range rej {
		if err := e.note("round %d: candidate %s (%s) refused by lint, not applied: %s", e.round, x.Arm.Step, x.Arm.Hash, x.Finding); err != nil {
			return r, err
		}
	}
	e.planned = e.trials + len(cands)*e.trialsOf(c.ScreenN) + 2*e.trialsOf(c.ConfirmN) + reserve
	if !e.fits(len(cands)*e.trialsOf(c.ScreenN)+e.trialsOf(c.ConfirmN), reserve) {
		return r, errBudget
	}
	var promising []Arm
	for i, a := range cands {
		e.stage, e.step = StageScreen, a.Step.String()
		ps, err := e.compare(ctx, fmt.Sprintf("r%d/s%02d-%s", e.round, i, a.Hash), inc, a, c.ScreenN)
		if err != nil {
			return r, err
		}
		pass, worse := false, false
		var ds []ledger.Decision
		for _, bg := range c.Ladder {
			d := e.decision(StageScreen, a.Step.String(), a, bg, ps[bg])
			if d.P < c.ScreenP && d.Effect.Center*float64(c.Dir) > 0 {
				pass = true
			}
			worse = worse || d.Verdict == verdictWorse
			ds = append(ds, d)
		}
		pass = pass && !worse
		for _, d := range ds {
			if pass {
				d.Reason = fmt.Sprintf("screen: promising (p < %.2f in the better direction): confirm on fresh trials; %s", c.ScreenP, d.Reason)
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
	type conf struct {
		arm Arm
		ds  []ledger.Decision
	}
	var confs []conf
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
		cf := conf{arm: a}
		for _, bg := range c.Ladder {
			d := e.decision(StageConfirm, a.Step.String(), a, bg, ps[bg])
			d.Mechanism = e.mechanism(a.Step, ps[bg])
			cf.ds = append(cf.ds, d)
		}
		confs = append(confs, cf)
	}
	// Holm across every confirmed hypothesis (candidate × level) of the round.
	var pv []float64
	for _, cf := range confs {
		for _, d := range cf.ds {
			pv = append(pv, d.P)
		}
	}
	rejectH := stats.Holm(pv, c.Alpha)
	best, bestEff := -1, 0.0
	k := 0
	for i := range confs {
		cf := &confs[i]
		ok, any := true, false
		eff := 0.0
		for j := range cf.ds {
			d := &cf.ds[j]
			sig := rejectH[k]
			k++
			switch {
			case d.Verdict == verdictWorse:
				ok = false
				d.Reason = "rejected: worse at this level; " + d.Reason
			case guardFails(d.Guards) != "":
				ok = false
				d.Reason = "rejected: guard " + guardFails(d.Guards) + "; " + d.Reason
			case d.Verdict == verdictBetter && !sig:
				d.Reason = fmt.Sprintf("not significant after Holm across %d comparisons of round %d; %s", len(pv), e.round, d.Reason)
			case d.Verdict == verdictBetter:
				any = true
				eff = max(eff, math.Abs(d.Effect.Center))
			}
		}
		if ok && any && eff > bestEff {
			best, bestEff = i, eff
		}
		_ = ok
	}
	for i := range confs {
		for j := range confs[i].ds {
			d := &confs[i].ds[j]
			if i == best && d.Verdict == verdictBetter && !strings.HasPrefix(d.Reason, "not significant") {
				d.Accepted = true
				if d.Mechanism != nil && !d.Mechanism.Moved {
					d.Mechanism.Suspect = true
					d.Reason = "accepted (SUSPECT: group " + d.Mechanism.Group + "'s scheduler stats did not move as predicted); " + d.Reason
				} else {
					d.Reason = "accepted; " + d.Reason
				}
			} else if i == best && !strings.HasPrefix(d.Reason, "rejected") {
				d.Reason = "step accepted on another level; here: " + d.Reason
			} else if i != best && d.Verdict == verdictBetter && !strings.HasPrefix(d.Reason, "not significant") && !strings.HasPrefix(d.Reason, "rejected") {
				d.Reason = "not taken: another candidate of this round gained more; " + d.Reason
			}
			if err := e.record(d); err != nil {
				return r, err
			}
			r.Decisions = append(r.Decisions, *d)
		}
	}
	if best >= 0 {
		s := confs[best].arm.Step
		r.Accepted = &s
		e.env.Log("round %d: accepted %s", e.round, s)
	}
	return r, nil
}

func guardFails(gs []ledger.Guard) string {
	for _, g := range gs {
		if g.Regresses {
			return fmt.Sprintf("%s regresses %+.1f%% (bound %.1f%%, p=%.3g)", g.Metric, 100*g.Effect, -100*g.Bound, g.P)
		}
	}
	return ""
}

func (e *engine) final(ctx context.Context, stock, refined Arm) error {
	c := &e.cfg
	e.stage, e.step = StageFinal, "stock vs refined"
	e.planned = e.trials + e.trialsOf(c.FinalN)
	ps, err := e.compare(ctx, "final-"+refined.Hash, stock, refined, c.FinalN)
	if err != nil {
		return err
	}
	var pv []float64
	var ds []ledger.Decision
	for _, bg := range c.Ladder {
		d := e.decision(StageFinal, "stock vs refined", refined, bg, ps[bg])
		ds = append(ds, d)
		pv = append(pv, d.P)
	}
	sig := stats.Holm(pv, c.Alpha)
	kept, worse := false, false
	for i := range ds {
		d := &ds[i]
		switch {
		case d.Verdict == verdictWorse:
			worse = true
		case guardFails(d.Guards) != "":
			worse = true
		case d.Verdict == verdictBetter && sig[i]:
			kept = true
		}
	}
	kept = kept && !worse
	for i := range ds {
		d := &ds[i]
		d.Accepted = kept
		if kept {
			d.Reason = "refined profile kept: it beats stock CFS; " + d.Reason
		} else {
			d.Reason = "refined profile NOT kept: it does not beat stock CFS at every level without harm; " + d.Reason
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
	out := map[int]*pair{}
	for _, bg := range e.cfg.Ladder {
		out[bg] = &pair{}
	}
	k := 0
	for _, bg := range blocks {
		order := [4]int{0, 1, 1, 0}
		if rng.IntN(2) == 1 {
			order = [4]int{1, 0, 0, 1}
		}
		for _, side := range order {
			arm := a
			if side == 1 {
				arm = b
			}
			s, err := e.trial(ctx, fmt.Sprintf("%s/%03d", id, k), side, arm, bg)
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
	if e.cur == arm.Hash {
		return nil
	}
	if err := e.revert(); err != nil {
		return fmt.Errorf("revert before %s: %w", arm.Step, err)
	}
	if arm.Profile != nil {
		s, err := e.env.Scheduler.Apply(ctx, arm.Profile)
		if err != nil {
			return fmt.Errorf("apply %s (%s): %w", arm.Step, arm.Hash, err)
		}
		e.sess = s
	}
	e.cur = arm.Hash
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
	start := ledger.TrialStart{Trial: id, Stage: e.stage, Step: e.step, Arm: string(rune('A' + side)), Candidate: arm.Hash,
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
		if err := e.note("trial %s had a start but no end in the ledger (cut off): running it again", id); err != nil {
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
	if err == nil {
		if aerr := e.env.Scheduler.Alive(); aerr != nil {
			err = fmt.Errorf("the target exited during the trial: %w", aerr)
		}
	}
	if err == nil {
		if _, ok := m[e.cfg.Metric]; !ok {
			err = fmt.Errorf("the benchmark reported no %s (it reported: %s); choose one with --metric", e.cfg.Metric, strings.Join(sortedKeys(m), ", "))
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
	p := Progress{Stage: e.stage, Step: e.step, Trials: e.trials, Planned: max(e.planned, e.trials), Elapsed: time.Since(e.begin),
		PerTrial: e.perTrial(), Accepted: len(e.res.Accepted), Round: e.round}
	p.ETA = time.Duration(p.Planned-p.Trials) * p.PerTrial
	e.env.Progress(p)
}

// rates turns two cumulative stats readings into per-second rates by group.
func rates(before, after []scheduler.GroupStats, wall time.Duration) map[string]ledger.GroupRates {
	if wall <= 0 {
		return nil
	}
	sec := wall.Seconds()
	prev := map[string]scheduler.GroupStats{}
	for _, s := range before {
		prev[s.Group] = s
	}
	out := map[string]ledger.GroupRates{}
	for _, s := range after {
		p := prev[s.Group]
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

// decision compares arm B against arm A at one level on the primary metric
// and the guards. The caller decides acceptance.
func (e *engine) decision(stage, step string, cand Arm, bg int, p *pair) ledger.Decision {
	c := &e.cfg
	base, cnd := values(p[0], c.Metric), values(p[1], c.Metric)
	dec := stats.Decide(base, cnd, stats.Rule{Alpha: c.Alpha, MinEffect: c.MinEffect, Dir: c.Dir})
	cmp := dec.Comparison
	d := ledger.Decision{Stage: stage, Step: step, Candidate: cand.Hash, Test: "mann-whitney-u", Metric: c.Metric, Bg: bg,
		N: [2]int{cmp.NBase, cmp.NCand}, Base: iv(cmp.Base), Cand: iv(cmp.Cand), Effect: iv(dec.RelShift), P: cmp.P,
		Verdict: verdictName(dec.Verdict), Reason: dec.Reason}
	for _, g := range c.Guards {
		gb, gc := values(p[0], g.Metric), values(p[1], g.Metric)
		if len(gb) < len(p[0]) || len(gc) < len(p[1]) {
			if !e.noted[g.Metric] {
				e.noted[g.Metric] = true
				e.note("guard %s: the benchmark does not report it in every trial; not checked", g.Metric)
			}
			continue
		}
		reg, gcmp := stats.Regresses(gb, gc, g.Dir, g.Bound, c.Alpha)
		rel := 0.0
		if gcmp.Base.Center != 0 {
			rel = gcmp.Shift.Center / gcmp.Base.Center
		}
		d.Guards = append(d.Guards, ledger.Guard{Metric: g.Metric, Bound: g.Bound, Regresses: reg, P: gcmp.P, Effect: rel})
	}
	d.Line = fmt.Sprintf("%-8s %-22.22s %s bg=%d  A %s n=%d  B %s n=%d  Δ %+.1f%% [%+.1f%%, %+.1f%%]  p=%.3g  %s",
		stage, step, c.Metric, bg, fmtIv(d.Base), d.N[0], fmtIv(d.Cand), d.N[1],
		100*d.Effect.Center, 100*d.Effect.Lo, 100*d.Effect.Hi, d.P, d.Verdict)
	return d
}

func fmtIv(i ledger.Interval) string {
	return fmt.Sprintf("%.4g [%.4g, %.4g]", i.Center, i.Lo, i.Hi)
}

func iv(i stats.Interval) ledger.Interval {
	return ledger.Interval{Lo: i.Lo, Center: i.Center, Hi: i.Hi}
}

// record writes a decision to the ledger and the log.
func (e *engine) record(d *ledger.Decision) error {
	verdict := "rejected"
	if d.Accepted {
		verdict = "ACCEPTED"
	}
	e.env.Log("%s  → %s: %s", d.Line, verdict, d.Reason)
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
	m.Base, m.Cand, m.P = cmp.Base.Center, cmp.Cand.Center, cmp.P
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

// Verdict names as the ledger writes them.
const (
	verdictBetter = "Better"
	verdictWorse  = "Worse"
)

func verdictName(v stats.Verdict) string {
	switch v {
	case stats.Better:
		return verdictBetter
	case stats.Worse:
		return verdictWorse
	case stats.NoDifference:
		return "NoDifference"
	case stats.TooFewSamples:
		return "TooFewSamples"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}
