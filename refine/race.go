package refine

import (
	"context"
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
// candidate still in the race in a random order, the incumbent again. A
// candidate's score in a block is its log ratio to the incumbent
// interpolated (in log space) between the block's two incumbent trials,
// signed so that positive is better: a drift across the block favours no
// position. Rung r gives RaceN·Eta^r trials to each of ⌈k/Eta^r⌉
// candidates, the best by mean score over all their trials so far; the
// race ends at the rung that leaves one.

// lastRungMin is the least number of trials the last rung gives each of
// its candidates: the winner's gain needs a spread to be read against.
const lastRungMin = 3

// rung is one rung's plan.
type rung struct {
	alive int // candidates in it
	m     int // trials per candidate (blocks)
}

// rungs plans the race for k candidates.
func (c *Config) rungs(k int) []rung {
	var rs []rung
	m := c.RaceN
	for alive := k; ; {
		rs = append(rs, rung{alive: alive, m: m})
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

// rungTrials is the trials a rung takes: k+2 per block.
func (r rung) trials() int { return r.m * (r.alive + 2) }

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
	trials []sample // its own trials
	base   []sample // the incumbent trials of its blocks
}

func (r *racer) mean() float64 { return meanOf(r.scores) }

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
	for ri, rg := range rs {
		alive = alive[:min(rg.alive, len(alive))]
		m := rg.m
		// What the budget holds of this rung, keeping the final's trials.
		for m > 0 && !e.fits(m*(len(alive)+2), reserve()) {
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
		e.planned = e.trials + m*(len(alive)+2) + raceTrials(rs[ri+1:]) + reserve()
		for _, r := range alive {
			r.last, r.rung = nil, ri+1
		}
		var check func() error
		if e.round == 1 && ri == 0 {
			// The first block has timed a trial: say now, not after the
			// budget is gone, if the round and the final cannot both fit.
			check = func() error {
				rest := (m-1)*(len(alive)+2) + raceTrials(rs[1:])
				fin := e.cfg.finalTrials(minFinalN)
				e.env.Log("plan: %s a trial (first block): the rest of round 1 ≈ %s (%d trials), the final ≈ %s (%d trials at the least n, %d at n=%d); budget %s",
					e.perTrial().Round(time.Millisecond), e.durationOf(rest), rest, e.durationOf(fin), fin, e.reserve(), e.finalN(), e.budgetString())
				if !e.fits((m-1)*(len(alive)+2), fin) {
					return fmt.Errorf("%w: rung 1 of round 1 (%d more trials) and the least final (%d trials) need about %s at %s a trial; the budget is %s: raise it to at least %s, or the minimum effect",
						ErrBudget, (m-1)*(len(alive)+2), fin, e.durationOf((m-1)*(len(alive)+2)+fin), e.perTrial().Round(time.Millisecond), e.budgetString(), e.durationOf(e.trials+rest+e.reserve()))
				}
				return nil
			}
		}
		if err := e.rung(ctx, ri, inc, alive, m, res, check); err != nil {
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

// gainSE is the standard error of the scores' mean as a relative gain:
// how far one standard error above the mean moves the gain.
func gainSE(scores []float64) float64 {
	m := meanOf(scores)
	return gainOf(m+se(scores)) - gainOf(m)
}

// rung runs m blocks of alive against inc, each at one background level
// (the ladder in turn, from a shuffled start), and adds the scores.
func (e *engine) rung(ctx context.Context, ri int, inc Arm, alive []*racer, m int, res *raceResult, afterFirst func() error) error {
	c := &e.cfg
	h := fnv.New64a()
	fmt.Fprintf(h, "race/%d/%d", e.round, ri)
	rng := rand.New(rand.NewPCG(c.Seed, h.Sum64()))
	levels := slices.Clone(c.Ladder)
	rng.Shuffle(len(levels), func(i, j int) { levels[i], levels[j] = levels[j], levels[i] })
	for b := range m {
		bg := levels[b%len(levels)]
		order := rng.Perm(len(alive))
		id := fmt.Sprintf("r%d/race%d/b%02d", e.round, ri+1, b)
		e.step = "the incumbent"
		first, err := e.trial(ctx, id+"/00", 0, inc, bg)
		if err != nil {
			return err
		}
		xs := make([]sample, len(order))
		for pos, i := range order {
			r := alive[i]
			e.step = r.arm.Step.String()
			if xs[pos], err = e.trial(ctx, fmt.Sprintf("%s/%02d", id, pos+1), 1, r.arm, bg); err != nil {
				return err
			}
		}
		e.step = "the incumbent"
		last, err := e.trial(ctx, fmt.Sprintf("%s/%02d", id, len(order)+1), 0, inc, bg)
		if err != nil {
			return err
		}
		a, z := first.metrics[c.Metric], last.metrics[c.Metric]
		if !(a > 0 && z > 0) {
			return fmt.Errorf("race: %s = %g and %g in the incumbent's trials: a race scores log ratios and needs positive values", c.Metric, a, z)
		}
		la, lz := math.Log(a), math.Log(z)
		res.ends = append(res.ends, [2]sample{first, last})
		for pos, i := range order {
			r := alive[i]
			v := xs[pos].metrics[c.Metric]
			if !(v > 0) {
				return fmt.Errorf("race: %s = %g in a trial of %s: a race scores log ratios and needs positive values", c.Metric, v, r.arm.Step)
			}
			// The incumbent where the candidate ran, interpolated between
			// the block's ends.
			f := float64(pos+1) / float64(len(order)+1)
			ref := la + f*(lz-la)
			s := float64(c.Dir) * (math.Log(v) - ref)
			r.scores = append(r.scores, s)
			r.last = append(r.last, s)
			r.trials = append(r.trials, xs[pos])
			r.base = append(r.base, first, last)
		}
		if b == 0 && afterFirst != nil {
			if err := afterFirst(); err != nil {
				return err
			}
		}
	}
	return nil
}

// raceNoise is the noise of one trial of metric the races measured: the
// spread of the log ratio between each block's two incumbent trials (each
// one after a switch of arm, as every trial of the final is), robust to
// the odd outlier (1.4826·MAD), divided by √2 for the two trials in each
// ratio. It is the σ of log values, which for small noise is the
// coefficient of variation. NaN with fewer than three blocks that report
// the metric positive.
func raceNoise(ends [][2]sample, metric string) (sigma float64, blocks int) {
	var d []float64
	for _, p := range ends {
		a, z := p[0].metrics[metric], p[1].metrics[metric]
		if a > 0 && z > 0 {
			d = append(d, math.Log(z)-math.Log(a))
		}
	}
	if len(d) < 3 {
		return math.NaN(), len(d)
	}
	return stats.MADSigma(d) / math.Sqrt2, len(d)
}

// stepRule says whether the race's winner becomes the next incumbent: its
// gain over the incumbent, over the trials of the rung it won, is at least
// half the minimum effect and more than one standard error above nothing.
// It is a stopping rule of the search, not a test: nothing is kept on its
// word (the final comparison decides, on fresh trials), it only keeps a
// search on noise from wandering far.
func (e *engine) stepRule(w *racer) (bool, string) {
	m, s := meanOf(w.last), se(w.last)
	need := math.Log1p(e.cfg.MinEffect / 2)
	gain := fmt.Sprintf("%s ± %s over %d trials of rung %d", stats.FormatShift(gainOf(m)), pctAbs(gainSE(w.last)), len(w.last), w.rung)
	switch {
	case m < need:
		return false, fmt.Sprintf("the winner's gain %s is below half the minimum effect (%s)", gain, pctAbs(e.cfg.MinEffect/2))
	case m < s:
		return false, fmt.Sprintf("the winner's gain %s is within one standard error of nothing", gain)
	}
	return true, "gain " + gain
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
			Gain: ledger.Num(gainOf(meanOf(r.last))), GainSE: ledger.Num(gainSE(r.last))},
		Reason: reason}
	d.Line = fmt.Sprintf("%-11s %s  %s ≈ %s over %d trials, rank %d of %d in rung %d/%d", StageRace, d.Step, c.Metric, stats.FormatShift(shift), len(r.trials), r.rank, r.of, r.rung, rungs)
	return d
}
