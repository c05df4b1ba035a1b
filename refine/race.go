package refine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"

	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/stats"
)

// A round is a race, not a set of tests: its candidates run against the
// incumbent by successive halving, and no p-value is spent on ranking
// them. The one confirmatory test of a run is the final comparison; the
// race only has to find the candidate worth confirming, quickly.
//
// A rung runs blocks at one background level each: the incumbent, every
// candidate still in the race in a random order, the incumbent again;
// consecutive blocks at the same level share the incumbent trial between
// them (a rung runs its blocks level by level), so a block after the
// first costs one trial more than its candidates. A
// candidate's score in a block is its log ratio to the incumbent
// interpolated (in log space) between the block's two incumbent trials,
// signed so that positive is better: a drift across the block favours no
// position. Rung r gives RaceN·Eta^r trials to each of ⌈k/Eta^r⌉
// candidates, the best by mean score over all their trials so far; the
// race ends at the rung that leaves one.

// lastRungMin is the least number of trials the last rung gives each of
// its candidates: the winner's gain is read over its last rung (the
// earlier rungs' scores are biased up by having been selected on), and
// three trials give a mean to read against the races' pooled noise.
const lastRungMin = 3

// rung is one rung's plan.
type rung struct {
	alive  int // candidates in it
	m      int // trials per candidate (blocks)
	levels int // background levels it visits
}

// rungs plans the race for k candidates.
func (c *Config) rungs(k int) []rung {
	var rs []rung
	m := c.RaceN
	for alive := k; ; {
		rs = append(rs, rung{alive: alive, m: m, levels: len(c.Ladder)})
		next := (alive + c.Eta - 1) / c.Eta
		if alive <= 1 || next == alive || next <= 1 {
			break
		}
		alive, m = next, m*c.Eta
	}
	last := &rs[len(rs)-1]
	last.m = max(last.m, lastRungMin, len(c.Ladder))
	return rs
}

// trials is what the rung takes: k+1 per block, and one more incumbent
// trial to open each level's run of blocks.
func (r rung) trials() int { return blockTrials(r.alive, r.m, r.levels) }

// blockTrials is the trials of m blocks of k candidates over the given
// number of background levels, blocks at one level sharing their ends.
func blockTrials(k, m, levels int) int {
	if m <= 0 {
		return 0
	}
	return m*(k+1) + min(m, max(levels, 1))
}

func raceTrials(rs []rung) int {
	n := 0
	for _, r := range rs {
		n += r.trials()
	}
	return n
}

// racer is one candidate's standing.
type racer struct {
	arm    Arm
	scores []float64 // every trial's score
	last   []float64 // the scores of the rung it ran last in
	rung   int
	rank   int
	of     int
	trials []sample  // its own trials
	base   []sample  // the incumbent trials of its blocks: two per trial
	at     []float64 // where each trial sat between them (0..1)
	rungOf []int     // each trial's rung
	// failed is why the benchmark failed under the candidate, which then
	// runs no more and ranks last: a candidate that starves the workload
	// until the benchmark sees nothing has its result.
	failed string
}

// failedUnder is what the ledger, the log and REPORT.md say of a candidate
// dropped for a failed benchmark.
const failedUnder = "the benchmark failed under it"

func (r *racer) mean() float64 {
	if r.failed != "" {
		return math.Inf(-1)
	}
	return meanOf(r.scores)
}

// meanOf is the mean score; a racer without one ranks last.
func meanOf(x []float64) float64 {
	if len(x) == 0 {
		return math.Inf(-1)
	}
	return stat.Mean(x, nil)
}

// se is the standard error of the mean of x (+Inf below two values).
func se(x []float64) float64 {
	if len(x) < 2 {
		return math.Inf(1)
	}
	return stat.StdErr(stat.StdDev(x, nil), float64(len(x)))
}

// raceResult is what a race found: the racers ranked (winner first) and
// the incumbent's block-end pairs, from which the noise is read.
type raceResult struct {
	racers  []*racer
	winner  *racer
	partial bool // the budget cut a rung short
	// ends are the incumbent's trials before and after each block.
	ends [][2]sample
}

// race runs the candidates against inc by successive halving within
// what the budget leaves beside reserve trials.
func (e *engine) race(ctx context.Context, inc Arm, cands []Arm, reserve func() int) (*raceResult, error) {
	c := &e.cfg
	rs := c.rungs(len(cands))
	racers := make([]*racer, len(cands))
	for i, a := range cands {
		racers[i] = &racer{arm: a}
	}
	res := &raceResult{}
	alive := racers
	var open *end // the incumbent trial the next block may start from
	for ri, rg := range rs {
		alive = alive[:min(rg.alive, len(alive))]
		m := rg.m
		cost := func(m int) int { return blockTrials(len(alive), m, rg.levels) }
		// What the budget holds of this rung, keeping the final's trials.
		for m > 0 && !e.fits(cost(m), reserve()) {
			m--
		}
		if m == 0 {
			if ri == 0 {
				return nil, errBudget
			}
			res.partial = true
			if err := e.note("round %d: the budget (%s) leaves no room for rung %d of the race; its leader so far wins", e.round, e.budgetString(), ri+1); err != nil {
				return nil, err
			}
			break
		}
		if m < rg.m {
			res.partial = true
			if err := e.note("round %d: the budget (%s) holds %d of rung %d's %d blocks", e.round, e.budgetString(), m, ri+1, rg.m); err != nil {
				return nil, err
			}
		}
		e.planned = e.trials + cost(m) + raceTrials(rs[ri+1:]) + reserve()
		for _, r := range alive {
			if r.failed == "" { // a failed one stays at the rung it failed in
				r.last, r.rung = nil, ri+1
			}
		}
		var check func() error
		if e.round == 1 && ri == 0 {
			// The first block has timed a trial: say now, not after the
			// budget is gone, if the round and the final cannot both fit.
			check = func() error {
				more := cost(m) - (len(alive) + 2)
				rest := more + raceTrials(rs[1:])
				fin := e.cfg.finalTrials(minFinalN)
				e.env.Log("plan: %s a trial (first block): the rest of round 1 ≈ %s (%d trials), the final ≈ %s (%d trials at the least n, %d at n=%d); budget %s",
					e.perTrial().Round(time.Millisecond), e.durationOf(rest), rest, e.durationOf(fin), fin, e.reserve(), e.finalN(), e.budgetString())
				if !e.fits(more, fin) {
					return fmt.Errorf("%w: rung 1 of round 1 (%d more trials) and the least final (%d trials) need about %s at %s a trial; the budget is %s: raise it to at least %s, or the minimum effect",
						ErrBudget, more, fin, e.durationOf(more+fin), e.perTrial().Round(time.Millisecond), e.budgetString(), e.durationOf(e.trials+rest+e.reserve()))
				}
				return nil
			}
		}
		var err error
		if open, err = e.rung(ctx, ri, inc, alive, m, open, res, check); err != nil {
			return nil, err
		}
		sort.SliceStable(alive, func(i, j int) bool { return alive[i].mean() > alive[j].mean() })
		for i, r := range alive {
			r.rank, r.of = i+1, len(alive)
		}
		e.env.Log("round %d rung %d/%d: %s", e.round, ri+1, len(rs), standings(alive, c.Dir))
		if m < rg.m {
			break
		}
	}
	res.racers = racers
	res.winner = alive[0]
	return res, nil
}

// standings prints the rung's order: "+12.0% g/p (3) > -1.2% ...".
func standings(rs []*racer, dir stats.Direction) string {
	var parts []string
	for _, r := range rs[:min(len(rs), 4)] {
		if r.failed != "" {
			parts = append(parts, fmt.Sprintf("benchmark failed %s", r.arm.Step))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s (n=%d)", stats.FormatShift(metricShift(r.mean(), dir)), r.arm.Step, len(r.scores)))
	}
	if len(rs) > 4 {
		parts = append(parts, fmt.Sprintf("… %d more", len(rs)-4))
	}
	return strings.Join(parts, " > ")
}

// metricShift turns a score (log ratio, positive better) into the
// metric's relative shift: -20% for a p99 20% lower.
func metricShift(score float64, dir stats.Direction) float64 {
	return math.Exp(float64(dir)*score) - 1
}

// gainOf turns a score into a relative gain, positive better.
func gainOf(score float64) float64 { return math.Exp(score) - 1 }

// gainSE is a standard error s of a mean score m as a relative gain: how
// far one standard error above the mean moves the gain.
func gainSE(m, s float64) float64 { return gainOf(m+s) - gainOf(m) }

// end is an incumbent trial that closed a block: the next block at the
// same level opens with it instead of a trial of its own.
type end struct {
	s  sample
	bg int
}

// rung runs m blocks of alive against inc, the ladder's levels in turn
// from a shuffled start (its first the level open is at, when open is
// set), the blocks at one level consecutive and sharing their incumbent
// trials, and adds the scores. It returns the incumbent trial that closed
// its last block.
func (e *engine) rung(ctx context.Context, ri int, inc Arm, alive []*racer, m int, open *end, res *raceResult, afterFirst func() error) (*end, error) {
	c := &e.cfg
	h := fnv.New64a()
	fmt.Fprintf(h, "race/%d/%d", e.round, ri)
	rng := rand.New(rand.NewPCG(c.Seed, h.Sum64()))
	levels := slices.Clone(c.Ladder)
	rng.Shuffle(len(levels), func(i, j int) { levels[i], levels[j] = levels[j], levels[i] })
	if open != nil {
		if i := slices.Index(levels, open.bg); i > 0 {
			levels[0], levels[i] = levels[i], levels[0]
		}
	}
	for b := range m {
		// Blocks b·L/m: each level's blocks in one run.
		bg := levels[b*len(levels)/m]
		if m < len(levels) {
			bg = levels[b]
		}
		order := rng.Perm(len(alive))
		id := fmt.Sprintf("r%d/race%d/b%02d", e.round, ri+1, b)
		var first sample
		if open != nil && open.bg == bg {
			first = open.s
		} else {
			e.step = "the incumbent"
			var err error
			if first, err = e.trial(ctx, id+"/00", 0, inc, bg); err != nil {
				return nil, err
			}
		}
		xs := make([]sample, len(order))
		seq := make([]int, len(order)) // each trial's place between the ends
		ran := 0
		for pos, i := range order {
			r := alive[i]
			if r.failed != "" {
				continue
			}
			ran++
			seq[pos] = ran
			e.step = r.arm.Step.String()
			var err error
			if xs[pos], err = e.trial(ctx, fmt.Sprintf("%s/%02d", id, pos+1), 1, r.arm, bg); err != nil {
				var bf *benchFailed
				if !errors.As(err, &bf) {
					return nil, err
				}
				r.failed = oneLine(bf.Error())
				if err := e.note("round %d: the benchmark failed under %s at bg=%d (%s): it is dropped from the race", e.round, r.arm.Step, bg, r.failed); err != nil {
					return nil, err
				}
			}
		}
		e.step = "the incumbent"
		last, err := e.trial(ctx, fmt.Sprintf("%s/%02d", id, len(order)+1), 0, inc, bg)
		if err != nil {
			return nil, err
		}
		open = &end{s: last, bg: bg}
		a, z := first.metrics[c.Metric], last.metrics[c.Metric]
		if !(a > 0 && z > 0) {
			return nil, fmt.Errorf("race: %s = %g and %g in the incumbent's trials: a race scores log ratios and needs positive values", c.Metric, a, z)
		}
		la, lz := math.Log(a), math.Log(z)
		res.ends = append(res.ends, [2]sample{first, last})
		for pos, i := range order {
			r := alive[i]
			if r.failed != "" {
				continue
			}
			v := xs[pos].metrics[c.Metric]
			if !(v > 0) {
				return nil, fmt.Errorf("race: %s = %g in a trial of %s: a race scores log ratios and needs positive values", c.Metric, v, r.arm.Step)
			}
			// The incumbent where the candidate ran, interpolated between
			// the block's ends.
			f := float64(seq[pos]) / float64(ran+1)
			ref := la + f*(lz-la)
			s := float64(c.Dir) * (math.Log(v) - ref)
			r.scores = append(r.scores, s)
			r.last = append(r.last, s)
			r.trials = append(r.trials, xs[pos])
			r.base = append(r.base, first, last)
			r.at = append(r.at, f)
			r.rungOf = append(r.rungOf, ri)
		}
		if b == 0 && afterFirst != nil {
			if err := afterFirst(); err != nil {
				return nil, err
			}
		}
	}
	return open, nil
}

// raceNoise is the noise of one trial of metric that the races measured,
// as σ of log values (for small noise, the coefficient of variation),
// pooled over everything a race repeats:
//   - the log ratio of each block's two incumbent trials (variance 2σ²;
//     mean 0, one arm, so each is a degree of freedom: a drift within
//     blocks only makes the estimate larger);
//   - each candidate's scores about their mean within a rung, its trials
//     sitting at fraction f between the block's ends (variance
//     σ²·(1 + f² + (1−f)²)). Within a rung, not across: a candidate in a
//     later rung was selected on its earlier scores, which are biased up
//     against its later ones. Across levels: an effect that differs by
//     level makes the estimate larger, never smaller.
//
// Every one of these trials came after a switch of arm, as every trial of
// the final does. Pooling the candidates' repeats with the incumbent's
// gives the sizing of the final several times the degrees of freedom the
// incumbent's alone would (an estimate from a handful of blocks is often
// half the truth, and a final sized from it is underpowered). df is the
// degrees of freedom; sigma is NaN below three.
func raceNoise(ends [][2]sample, racers []*racer, metric string) (sigma float64, df int) {
	var ss float64
	// add pools one group's values, each scaled by its variance factor.
	add := func(x, factor []float64) {
		if len(x) < 2 {
			return
		}
		m := stat.Mean(x, nil)
		f := stat.Mean(factor, nil)
		for _, v := range x {
			ss += (v - m) * (v - m) / f
		}
		df += len(x) - 1
	}
	for _, p := range ends {
		a, z := p[0].metrics[metric], p[1].metrics[metric]
		if a > 0 && z > 0 {
			d := math.Log(z) - math.Log(a)
			ss += d * d / 2
			df++
		}
	}
	for _, r := range racers {
		xs, fs := map[int][]float64{}, map[int][]float64{}
		for j, t := range r.trials {
			a, z, v := r.base[2*j].metrics[metric], r.base[2*j+1].metrics[metric], t.metrics[metric]
			if !(a > 0 && z > 0 && v > 0) {
				continue
			}
			f, k := r.at[j], r.rungOf[j]
			xs[k] = append(xs[k], math.Log(v)-(1-f)*math.Log(a)-f*math.Log(z))
			fs[k] = append(fs[k], 1+f*f+(1-f)*(1-f))
		}
		for k := range xs {
			add(xs[k], fs[k])
		}
	}
	if df < 3 {
		return math.NaN(), df
	}
	return math.Sqrt(ss / float64(df)), df
}

// stepRule says whether the race's winner becomes the next incumbent: its
// gain over the incumbent, over the trials of the rung it won, is at least
// half the minimum effect and more than two standard errors above nothing,
// the standard error from the noise pooled over every race so far
// (engine.res.Noise, many degrees of freedom) rather than from the
// winner's few trials. It is a stopping rule of the search, not a test:
// nothing is kept on its word (the final comparison decides, on fresh
// trials), it only keeps a search on noise from wandering far; a step on
// noise costs a round.
func (e *engine) stepRule(w *racer) (bool, string) {
	if w.failed != "" {
		return false, "the benchmark failed under every candidate; the last: " + w.failed
	}
	m, s := meanOf(w.last), e.scoreSE(w)
	need := e.stepNeed()
	gain := fmt.Sprintf("%s ± %s over %d trials of rung %d", stats.FormatShift(gainOf(m)), pctAbs(gainSE(m, s)), len(w.last), w.rung)
	switch {
	case m < need:
		return false, fmt.Sprintf("the winner's gain %s is below half the minimum effect (%s)", gain, pctAbs(e.cfg.MinEffect/2))
	case m < 2*s:
		return false, fmt.Sprintf("the winner's gain %s is within two standard errors of nothing", gain)
	}
	return true, "gain " + gain
}

// scoreSE is the standard error of the mean of w's last-rung scores: the
// pooled noise of one trial, inflated for the score's interpolated
// reference (variance σ²·(1 + f² + (1−f)²) at fraction f), over √n;
// the scores' own spread where no noise is measured yet.
func (e *engine) scoreSE(w *racer) float64 {
	sigma := e.res.Noise
	if math.IsNaN(sigma) || len(w.last) == 0 {
		return se(w.last)
	}
	var v float64
	for _, f := range w.at[len(w.at)-len(w.last):] {
		v += 1 + f*f + (1-f)*(1-f)
	}
	return sigma * math.Sqrt(v/float64(len(w.last))/float64(len(w.last)))
}

func pctAbs(x float64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", 100*math.Abs(x)), ".0") + "%"
}

// raceDecision records a candidate's standing as the ledger's one verdict
// for it this round: dropped, or the winner (accepted as the step, or
// unconfirmed when the step rule held it back).
func (e *engine) raceDecision(r *racer, rungs int, verdict, reason string) ledger.Decision {
	c := &e.cfg
	shift := metricShift(r.mean(), c.Dir)
	d := ledger.Decision{Stage: StageRace, Round: e.round, Step: r.arm.Step.String(), Group: r.arm.Step.Group, Candidate: r.arm.Key(),
		Test: "race", Metric: c.Metric, Bg: ledger.AllLevels, N: [2]int{len(r.base), len(r.trials)},
		Effect: ledger.Interval{Lo: ledger.Num(math.NaN()), Center: ledger.Num(shift), Hi: ledger.Num(math.NaN())}, P: ledger.Num(math.NaN()),
		Verdict: verdict, Race: &ledger.Race{Rung: r.rung, Rungs: rungs, Rank: r.rank, Of: r.of, Trials: len(r.trials),
			Gain: ledger.Num(gainOf(meanOf(r.last))), GainSE: ledger.Num(gainSE(meanOf(r.last), e.scoreSE(r)))},
		Reason: reason}
	d.Line = fmt.Sprintf("%-11s %s  %s ≈ %s over %d trials, rank %d of %d in rung %d/%d", StageRace, d.Step, c.Metric, stats.FormatShift(shift), len(r.trials), r.rank, r.of, r.rung, rungs)
	if r.failed != "" {
		d.Race.Failed = r.failed
		d.Effect.Center, d.Race.Gain, d.Race.GainSE = ledger.Num(math.NaN()), ledger.Num(math.NaN()), ledger.Num(math.NaN())
		d.Line = fmt.Sprintf("%-11s %s  %s in rung %d/%d", StageRace, d.Step, failedUnder, r.rung, rungs)
	}
	return d
}
