package stats

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/stat/distuv"
)

// Sim describes simulated tuning rounds that measure the error rates of the
// decision rule as refine runs it: K candidates per round, each screened on
// Screen trials per arm, and those that pass confirmed on Confirm fresh
// trials per arm with DecideRound (Holm across the survivors). The screen
// decides each candidate alone (Decide) unless ScreenHolm is set: because
// the confirmation runs on fresh trials, the screen's choice cannot inflate
// the confirmation's error rate, so the screen need not pay for the round's
// multiplicity — the simulation shows both. A trial's value is lognormal with coefficient of variation CV
// (timings are positive and right-skewed); both arms share the
// distribution except candidate 0, whose values are scaled by Effect in the
// rule's better direction.
type Sim struct {
	Rule   Rule
	K      int // candidates per round (≥ 1)
	Screen int // trials per arm in the screen; 0 skips the screen
	// ScreenHolm holds the screen to Holm across the round as well.
	ScreenHolm bool
	// ScreenP, when > 0, makes the screen a lenient filter instead: a
	// candidate passes when p < ScreenP and its shift points the better
	// way (refine's "promising"), with no minimum effect.
	ScreenP float64
	Confirm int     // trials per arm in the confirmation on fresh trials
	CV      float64 // noise of one trial, e.g. 0.10
	Effect  float64 // true relative improvement of candidate 0; 0 is A/A
	Rounds  int     // simulated rounds
	Seed    uint64  // same seed, same figures
}

// SimResult holds the measured rates, each with its 95% Clopper–Pearson
// interval (the simulation's own uncertainty).
type SimResult struct {
	Sim Sim
	// Nulls candidates had no true effect (all K under A/A, else K−1 per
	// round); FalseAccepts of them were accepted.
	Nulls, FalseAccepts int
	// FamilyErrors counts rounds in which at least one null candidate was
	// accepted.
	FamilyErrors int
	// Hits counts rounds in which candidate 0 was accepted (Effect ≠ 0).
	Hits int
	// FalseAcceptRate = FalseAccepts/Nulls, FWER = FamilyErrors/Rounds,
	// Power = Hits/Rounds (NaN under A/A).
	FalseAcceptRate, FWER, Power Interval
}

// Simulate runs s. It is deterministic for a given s.
func Simulate(s Sim) SimResult {
	k := max(s.K, 1)
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	sigma := math.Sqrt(math.Log1p(s.CV * s.CV))
	dir := s.Rule.Dir.sign()
	draw := func(n int, scale float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = scale * math.Exp(sigma*rng.NormFloat64()-sigma*sigma/2)
		}
		return x
	}
	scale := func(c int) float64 {
		if c == 0 {
			return 1 + dir*s.Effect
		}
		return 1
	}
	res := SimResult{Sim: s}
	for range s.Rounds {
		alive := make([]int, 0, k)
		for c := range k {
			alive = append(alive, c)
		}
		for stage, n := range []int{s.Screen, s.Confirm} {
			if n == 0 || len(alive) == 0 {
				continue
			}
			round := make([]Pair, len(alive))
			for i, c := range alive {
				round[i] = Pair{Base: draw(n, 1), Cand: draw(n, scale(c))}
			}
			var ds []Decision
			if stage == 0 && s.ScreenP > 0 {
				for _, p := range round {
					c := Compare(p.Base, p.Cand, 1-s.Rule.Alpha)
					d := Decision{Comparison: c}
					if c.P < s.ScreenP && dir*c.Rel.Center > 0 {
						d.Verdict = Better
					}
					ds = append(ds, d)
				}
			} else if stage == 0 && !s.ScreenHolm {
				for _, p := range round {
					ds = append(ds, Decide(p.Base, p.Cand, s.Rule))
				}
			} else {
				ds = DecideRound(round, s.Rule)
			}
			next := alive[:0]
			for i, c := range alive {
				if ds[i].Accepted() {
					next = append(next, c)
				}
			}
			alive = next
		}
		family := false
		for _, c := range alive {
			if c == 0 && s.Effect != 0 {
				res.Hits++
			} else {
				res.FalseAccepts++
				family = true
			}
		}
		if family {
			res.FamilyErrors++
		}
		res.Nulls += k
		if s.Effect != 0 {
			res.Nulls--
		}
	}
	res.FalseAcceptRate = Proportion(res.FalseAccepts, res.Nulls, 0.95)
	res.FWER = Proportion(res.FamilyErrors, s.Rounds, 0.95)
	res.Power = Interval{math.NaN(), math.NaN(), math.NaN()}
	if s.Effect != 0 {
		res.Power = Proportion(res.Hits, s.Rounds, 0.95)
	}
	return res
}

// Power is the probability that one decision (Decide, no screen, no other
// candidates) accepts a candidate whose true relative improvement is effect,
// with n trials per arm and noise cv, estimated from trials simulated
// decisions. effect = 0 gives the false-accept rate.
func Power(r Rule, n int, cv, effect float64, trials int, seed uint64) float64 {
	res := Simulate(Sim{Rule: r, K: 1, Confirm: n, CV: cv, Effect: effect, Rounds: trials, Seed: seed})
	if effect == 0 {
		return res.FalseAcceptRate.Center
	}
	return res.Power.Center
}

// Proportion is x/n with its Clopper–Pearson (exact binomial) interval.
func Proportion(x, n int, confidence float64) Interval {
	if n == 0 {
		return Interval{0, math.NaN(), 1}
	}
	a := (1 - confidence) / 2
	iv := Interval{0, float64(x) / float64(n), 1}
	if x > 0 {
		iv.Lo = distuv.Beta{Alpha: float64(x), Beta: float64(n - x + 1)}.Quantile(a)
	}
	if x < n {
		iv.Hi = distuv.Beta{Alpha: float64(x + 1), Beta: float64(n - x)}.Quantile(1 - a)
	}
	return iv
}

// UpperBound is the one-sided Clopper–Pearson upper bound of a rate seen x
// times in n at the confidence level: the bound a rate test holds to ("at
// most 5%, with 95% confidence"). 0 of 59 gives 4.95% at 95%, 0 of 60
// two-sided (Proportion) still 6%.
func UpperBound(x, n int, confidence float64) float64 {
	return Proportion(x, n, 2*confidence-1).Hi
}

// TrialsFor is the smallest number of trials per arm, up to max, with which
// one decision under r finds a true relative improvement of effect with
// probability at least power, at noise cv (each n estimated from trials
// simulated decisions with seed). ok is false when even max trials do not
// suffice: then refine should say so with these numbers, or refuse.
func TrialsFor(r Rule, cv, effect, power float64, max, trials int, seed uint64) (n int, ok bool) {
	lo := NeedN(r.Alpha) // below this no decision can be significant
	if lo > max || Power(r, max, cv, effect, trials, seed) < power {
		return max, false
	}
	hi := max // invariant: hi reaches the power
	for lo < hi {
		mid := (lo + hi) / 2
		if Power(r, mid, cv, effect, trials, seed) >= power {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi, true
}

// ErrorRates runs s three times — under A/A (Effect 0), at the rule's
// minimum effect and at twice it — the set every refine report shows: the
// false-accept rate, the power at the smallest effect worth keeping (about
// α/2 by construction: the interval must clear it) and at a clear effect.
func ErrorRates(s Sim) []SimResult {
	var out []SimResult
	for _, e := range []float64{0, s.Rule.MinEffect, 2 * s.Rule.MinEffect} {
		s.Effect = e
		out = append(out, Simulate(s))
	}
	return out
}
