package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// finalSim simulates finals run by Sequential.Look as the engine runs
// them: at each look every level gets fresh trials up to Looks[k] per arm
// (interleaved arms, independent lognormal noise of coefficient of
// variation cv, as Sim draws it), and the final stops at the first look
// that keeps or drops.
type finalSim struct {
	plan Sequential
	cv   float64
	// effect is the candidate's true relative improvement at each level
	// (in the rule's better direction); its length is the number of
	// levels. Levels differ in scale (level l's baseline is 1+2l), so a
	// level is a stratum worth keeping apart.
	effect []float64
	guards []GuardRule
	// guard draws n values of guard g at level l for the baseline or the
	// candidate.
	guard func(rng *rand.Rand, g, l, n int, cand bool) []float64
	sims  int
	seed  uint64
	// resize, when set, re-sizes the plan after its first look as the
	// engine does (Sequential.Resize): to the n it returns for the
	// primary metric's trials so far.
	resize func(strata []Pair) int
}

type finalResult struct {
	keeps, sims int
	trials      int // trials per arm and level, summed over sims
	early       int // finals decided before the last look
}

func (r finalResult) rate() float64 { return float64(r.keeps) / float64(r.sims) }

func lognormal(rng *rand.Rand, n int, cv, scale float64) []float64 {
	sigma := math.Sqrt(math.Log1p(cv * cv))
	x := make([]float64, n)
	for i := range x {
		x[i] = scale * math.Exp(sigma*rng.NormFloat64()-sigma*sigma/2)
	}
	return x
}

func poisson(rng *rand.Rand, n int, lambda float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		l, k, p := math.Exp(-lambda), 0, rng.Float64()
		for p > l {
			k++
			p *= rng.Float64()
		}
		x[i] = float64(k)
	}
	return x
}

func (s finalSim) run(t *testing.T) finalResult {
	t.Helper()
	if err := s.plan.Check(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(s.seed, s.seed^0x5eed))
	dir := s.plan.Rule.Dir.sign()
	res := finalResult{sims: s.sims}
	for range s.sims {
		strata := make([]Pair, len(s.effect))
		gd := make([][]Pair, len(s.guards))
		for g := range gd {
			gd[g] = make([]Pair, len(s.effect))
		}
		have := 0
		plan := s.plan
		for k := 0; k < len(plan.Looks); k++ {
			add := plan.Looks[k] - have
			for l, e := range s.effect {
				scale := 1 + 2*float64(l)
				strata[l].Base = append(strata[l].Base, lognormal(rng, add, s.cv, scale)...)
				strata[l].Cand = append(strata[l].Cand, lognormal(rng, add, s.cv, scale*(1+dir*e))...)
				for g := range s.guards {
					gd[g][l].Base = append(gd[g][l].Base, s.guard(rng, g, l, add, false)...)
					gd[g][l].Cand = append(gd[g][l].Cand, s.guard(rng, g, l, add, true)...)
				}
			}
			have = plan.Looks[k]
			lk := plan.Look(k, strata, s.guards, gd)
			if lk.Outcome == Continue {
				if k == 0 && s.resize != nil {
					r, err := plan.Resize(0, max(s.resize(strata), have+2))
					if err != nil {
						t.Fatal(err)
					}
					plan = r
				}
				continue
			}
			if lk.Outcome == Keep {
				res.keeps++
			}
			if k < len(plan.Looks)-1 {
				res.early++
			}
			break
		}
		res.trials += have
	}
	return res
}

// rateSims is the number of simulated finals per rate: enough that the
// bounds below are decidable at the rates the rule runs at; -short halves
// it.
func rateSims(n int) int {
	if testing.Short() {
		return n / 2
	}
	return n
}

// ratePlan is the final the rate tests run: p99 (lower is better), α 5%,
// a 20% minimum effect, harm tolerated up to 10% at each level, two
// background levels, two looks sized by FinalN for 80% power at 1.5× the
// minimum effect with CV 10%.
func ratePlan(t *testing.T) Sequential {
	n := FinalN(0.10, 0.20, 0.05, 0.80, 2, LowerIsBetter)
	if n < 8 || n%2 != 0 {
		t.Fatalf("FinalN = %d", n)
	}
	return Sequential{
		Rule:  Rule{Metric: "p99_ms", Alpha: 0.05, MinEffect: 0.20, Dir: LowerIsBetter},
		Harm:  0.10,
		Looks: []int{n / 2, n},
	}
}

// TestFinalFalseKeepRate: the final keeps a candidate whose true effect
// equals the minimum effect at most α of the time (the interval's bound
// must clear it, and the looks share α by the spending function), and one
// with no effect hardly ever. At the minimum effect the rate must not be
// significantly above α (its one-sided 95% lower bound ≤ α: repeated
// looks at full α keep ~8%, a gate on the point estimate ~50%); with no
// effect its one-sided 95% upper bound must be ≤ 5%.
func TestFinalFalseKeepRate(t *testing.T) {
	plan := ratePlan(t)
	// At a true effect equal to the minimum effect, whether a bound clears
	// it depends only on the signs of the log ratios' distances from it:
	// the rate does not depend on the noise, so one CV measures it.
	at := finalSim{plan: plan, cv: 0.10, effect: []float64{plan.Rule.MinEffect, plan.Rule.MinEffect}, sims: rateSims(4000), seed: 41}.run(t)
	lo := Proportion(at.keeps, at.sims, 0.90).Lo
	t.Logf("true effect = min effect %s, looks %v: kept %d of %d (%.4f, lower bound %.4f), %.1f trials per arm and level",
		pct(plan.Rule.MinEffect), plan.Looks, at.keeps, at.sims, at.rate(), lo, float64(at.trials)/float64(at.sims))
	if lo > plan.Rule.Alpha {
		t.Errorf("kept %.4f at a true effect equal to the minimum effect (lower bound %.4f > α %g)", at.rate(), lo, plan.Rule.Alpha)
	}
	// Re-sized after look 1 as the engine re-sizes (blind to the effect:
	// from the spread of log values within each arm), the looks taken
	// keeping the α they spent: the rate at the minimum effect holds.
	within := func(strata []Pair) int {
		var ss float64
		df := 0
		for _, p := range strata {
			for _, x := range [][]float64{p.Base, p.Cand} {
				var m float64
				for _, v := range x {
					m += math.Log(v) / float64(len(x))
				}
				for _, v := range x {
					ss += (math.Log(v) - m) * (math.Log(v) - m)
				}
				df += len(x) - 1
			}
		}
		return FinalN(math.Sqrt(ss/float64(df)), plan.Rule.MinEffect, plan.Rule.Alpha, 0.9, len(strata), plan.Rule.Dir)
	}
	rs := finalSim{plan: plan, cv: 0.10, effect: []float64{plan.Rule.MinEffect, plan.Rule.MinEffect}, sims: rateSims(4000), seed: 47, resize: within}.run(t)
	lo = Proportion(rs.keeps, rs.sims, 0.90).Lo
	t.Logf("true effect = min effect, re-sized after look 1 (within-arm noise, 90%% power): kept %d of %d (%.4f, lower bound %.4f), %.1f trials per arm and level",
		rs.keeps, rs.sims, rs.rate(), lo, float64(rs.trials)/float64(rs.sims))
	if lo > plan.Rule.Alpha {
		t.Errorf("re-sized: kept %.4f at a true effect equal to the minimum effect (lower bound %.4f > α %g)", rs.rate(), lo, plan.Rule.Alpha)
	}
	for _, cv := range []float64{0.05, 0.10, 0.20} {
		null := finalSim{plan: plan, cv: cv, effect: []float64{0, 0}, sims: rateSims(600), seed: 43}.run(t)
		up := UpperBound(null.keeps, null.sims, 0.95)
		t.Logf("CV %g, no effect: kept %d of %d (upper bound %.4f), stopped early %d", cv, null.keeps, null.sims, up, null.early)
		if up > 0.05 {
			t.Errorf("CV %g: kept %.4f with no effect (upper bound %.4f > 0.05)", cv, null.rate(), up)
		}
	}
}

// TestFinalPowerRate: with the looks FinalN sizes for 80% power at 1.5×
// the minimum effect, CV 10%, the final keeps such a candidate at least
// 80% of the time (one-sided 95% lower bound), in both directions (FinalN
// sizes each for its own margin); and so at a 10% minimum
// effect with CV 5%.
func TestFinalPowerRate(t *testing.T) {
	for _, tc := range []struct{ minEffect, cv float64 }{{0.20, 0.10}, {0.10, 0.05}} {
		for _, dir := range []Direction{LowerIsBetter, HigherIsBetter} {
			plan := ratePlan(t)
			n := FinalN(tc.cv, tc.minEffect, 0.05, 0.80, 2, dir)
			plan.Rule.Dir, plan.Rule.MinEffect, plan.Harm, plan.Looks = dir, tc.minEffect, tc.minEffect, []int{n / 2, n}
			e := 1.5 * plan.Rule.MinEffect
			r := finalSim{plan: plan, cv: tc.cv, effect: []float64{e, e}, sims: rateSims(1000), seed: 47}.run(t)
			lo := Proportion(r.keeps, r.sims, 0.90).Lo
			t.Logf("%s, effect %s, CV %s, looks %v: kept %d of %d (%.4f, lower bound %.4f), decided early %d, %.1f trials per arm and level",
				dir, pct(e), pct(tc.cv), plan.Looks, r.keeps, r.sims, r.rate(), lo, r.early, float64(r.trials)/float64(r.sims))
			if lo < 0.80 {
				t.Errorf("%s, min effect %s, CV %s: power %.4f at 1.5× the minimum effect (lower bound %.4f < 0.80)", dir, pct(tc.minEffect), pct(tc.cv), r.rate(), lo)
			}
		}
	}
}

// TestFinalHarmRate: a profile much better at some levels and 10% worse
// at another is not kept: each level must exclude a loss beyond Harm.
// Harm is 5% here: at Harm = 10% the true loss sits on the tolerance, and
// a non-inferiority check passes there at up to its α per look.
func TestFinalHarmRate(t *testing.T) {
	plan := ratePlan(t)
	plan.Harm = 0.05
	for _, effect := range [][]float64{{0.40, -0.10}, {0.40, 0.40, -0.10}} {
		r := finalSim{plan: plan, cv: 0.10, effect: effect, sims: rateSims(600), seed: 53}.run(t)
		up := UpperBound(r.keeps, r.sims, 0.95)
		t.Logf("effects %v, harm %s, CV 10%%: kept %d of %d (upper bound %.4f)", effect, pct(plan.Harm), r.keeps, r.sims, up)
		if up > 0.05 {
			t.Errorf("effects %v: kept %.4f (upper bound %.4f > 0.05)", effect, r.rate(), up)
		}
	}
}

// TestFinalGuardRate: a candidate that clearly improves the primary
// metric but costs 10% throughput at CV 5%, against a 5% throughput
// guard, is vetoed at least 95% of the time (one-sided 95% lower bound).
func TestFinalGuardRate(t *testing.T) {
	plan := ratePlan(t)
	// Sized as the engine sizes a final with a relative guard: enough for
	// the guard's loss to be bounded within its tolerance too.
	n := max(plan.Looks[1], NonInferiorN(0.05, 0.05, plan.Rule.Alpha, 0.8))
	n += n % 2
	plan.Looks = []int{n / 2, n}
	guards := []GuardRule{{Metric: "throughput", Dir: HigherIsBetter, Measure: Relative, Bound: 0.05}}
	tput := func(rng *rand.Rand, _, l, n int, cand bool) []float64 {
		scale := 1000 * (1 + float64(l))
		if cand {
			scale *= 0.90
		}
		return lognormal(rng, n, 0.05, scale)
	}
	r := finalSim{plan: plan, cv: 0.10, effect: []float64{0.40, 0.40}, guards: guards, guard: tput, sims: rateSims(600), seed: 59}.run(t)
	vetoed := r.sims - r.keeps
	lo := Proportion(vetoed, r.sims, 0.90).Lo
	t.Logf("primary 40%% better, throughput 10%% worse at CV 5%%, guard 5%%: vetoed %d of %d (lower bound %.4f)", vetoed, r.sims, lo)
	if lo < 0.95 {
		t.Errorf("vetoed %.4f (lower bound %.4f < 0.95)", float64(vetoed)/float64(r.sims), lo)
	}
	// The same guard does not veto every candidate that leaves throughput
	// alone. It does veto some: at 80% power for the guard's bound, a 5%
	// loss at CV 5% is not always excluded, at both levels.
	same := func(rng *rand.Rand, _, l, n int, _ bool) []float64 {
		return lognormal(rng, n, 0.05, 1000*(1+float64(l)))
	}
	ok := finalSim{plan: plan, cv: 0.10, effect: []float64{0.40, 0.40}, guards: guards, guard: same, sims: rateSims(200), seed: 61}.run(t)
	t.Logf("throughput unchanged: kept %d of %d", ok.keeps, ok.sims)
	if ok.rate() < 0.5 {
		t.Errorf("throughput unchanged: kept only %.4f", ok.rate())
	}
}

// TestFinalErrorsRate: errors going from none to about 4 per trial veto
// the final every time (a Count compares absolute rates; a ratio to a
// baseline of 0 does not exist and must not pass for want of a number),
// while a baseline and candidate both without errors pass.
func TestFinalErrorsRate(t *testing.T) {
	plan := ratePlan(t)
	guards := []GuardRule{{Metric: "errors", Dir: LowerIsBetter, Measure: Count, Bound: 0}}
	for _, tc := range []struct {
		name        string
		cand        float64
		least, most float64 // the keep rate's bounds
	}{{"errors 0 → 4 per trial", 4, 0, 0.05}, {"errors 0 → 0", 0, 0.8, 1}} {
		errs := func(rng *rand.Rand, _, _, n int, cand bool) []float64 {
			if cand {
				return poisson(rng, n, tc.cand)
			}
			return make([]float64, n)
		}
		r := finalSim{plan: plan, cv: 0.10, effect: []float64{0.40, 0.40}, guards: guards, guard: errs, sims: rateSims(200), seed: 67}.run(t)
		t.Logf("%s, primary 40%% better: kept %d of %d", tc.name, r.keeps, r.sims)
		if up := UpperBound(r.keeps, r.sims, 0.95); up > tc.most || r.rate() < tc.least {
			t.Errorf("%s: kept %.4f (upper bound %.4f), want in [%g, %g]", tc.name, r.rate(), up, tc.least, tc.most)
		}
	}
}
