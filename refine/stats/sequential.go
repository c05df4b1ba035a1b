package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	mstats "github.com/aclements/go-moremath/stats"
)

// ErrPlan is wrapped by Sequential.Check for a plan that cannot be run.
var ErrPlan = errors.New("invalid sequential plan")

// MaxLooks is the most looks a Sequential plan may have: Spend is tested up
// to this many, and a final looked at more often buys little power for
// its extra boundaries.
const MaxLooks = 4

// futilityConfidence is the two-sided level of the interval whose
// better-direction bound an early look's futility rule reads: one-sided
// 90%. Futility is non-binding (dropping never spends α), so its level
// trades only power for trials.
const futilityConfidence = 0.80

// Sequential is the plan of the one confirmatory comparison (the final):
// stock against the refined profile on fresh trials, strata = background
// levels, looked at after Looks[k] trials per arm and level.
type Sequential struct {
	Rule  Rule    // Alpha: one-sided level of the whole test; MinEffect: the gate; Dir; Metric
	Harm  float64 // tolerated loss of the primary metric at each level (relative); the engine defaults it to MinEffect
	Looks []int   // cumulative n per arm and level at each look, increasing, e.g. [4, 8]
	// Taken is the cumulative α the looks already taken spent, when the
	// plan was re-sized after them (Resize): those looks keep what they
	// spent, the later ones spend by the spending function at their
	// information fraction (Looks[k]/Looks[last]). Nil: every look spends
	// by the spending function.
	Taken []float64
}

// GuardRule is a guard metric of the final: its loss must be excluded
// beyond Bound (a magnitude in Measure's unit, see NonInferior) at every
// level.
type GuardRule struct {
	Metric  string
	Dir     Direction
	Measure Measure
	Bound   float64
}

// Outcome is what a look of the final decides.
type Outcome int8

const (
	// Continue: run the next look's trials.
	Continue Outcome = iota
	// Keep: the common effect clears the gate and no level or guard may
	// lose more than its tolerance.
	Keep
	// Drop: the last look did not keep, or an earlier look found the
	// candidate futile or harmful.
	Drop
)

func (o Outcome) String() string {
	switch o {
	case Continue:
		return "continue"
	case Keep:
		return "keep"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Look is what one look of the final found.
type Look struct {
	Index   int          // 0-based
	Alpha   float64      // this look's nominal one-sided level (SpendAt over Looks[k]/Looks[last])
	Spent   float64      // the α spent by this look, cumulative (Taken[k], or Spent(Rule.Alpha, Looks[k]/Looks[last]))
	Common  Common       // at confidence 1−2·Alpha
	Harm    []Decision   // per stratum: NonInferior of the primary metric at Harm, alpha = Rule.Alpha, uncorrected
	Guards  [][]Decision // [guard][stratum]: NonInferior at the guard's Bound, alpha = Rule.Alpha, uncorrected
	Outcome Outcome
	Reason  string // one line: why
}

// Check returns an error wrapping ErrPlan (or ErrNoDirection) unless s can
// be run: a direction, 0 < Alpha < 0.5, MinEffect and Harm ≥ 0, and 1 to
// MaxLooks looks of increasing positive n.
func (s Sequential) Check() error {
	if err := s.Rule.Dir.Check(); err != nil {
		return fmt.Errorf("final: %w", err)
	}
	switch {
	case !(s.Rule.Alpha > 0 && s.Rule.Alpha < 0.5):
		return fmt.Errorf("final: alpha %g not in (0, 0.5): %w", s.Rule.Alpha, ErrPlan)
	case !(s.Rule.MinEffect >= 0):
		return fmt.Errorf("final: minimum effect %g < 0: %w", s.Rule.MinEffect, ErrPlan)
	case !(s.Harm >= 0):
		return fmt.Errorf("final: harm tolerance %g < 0: %w", s.Harm, ErrPlan)
	case len(s.Looks) == 0 || len(s.Looks) > MaxLooks:
		return fmt.Errorf("final: %d looks, want 1 to %d: %w", len(s.Looks), MaxLooks, ErrPlan)
	}
	prev := 0
	for _, n := range s.Looks {
		if n <= prev {
			return fmt.Errorf("final: looks %v: want increasing positive n: %w", s.Looks, ErrPlan)
		}
		prev = n
	}
	if len(s.Taken) >= len(s.Looks) {
		return fmt.Errorf("final: %d looks taken of %d: the last look cannot be taken before it is planned: %w", len(s.Taken), len(s.Looks), ErrPlan)
	}
	if err := checkSpent(s.spent(), len(s.Looks)); err != nil {
		return fmt.Errorf("final: α taken %v at looks %v: %v: %w", s.Taken, s.Looks, err, ErrPlan)
	}
	return nil
}

// fractions is each look's information fraction: its n over the last's.
func (s Sequential) fractions() []float64 {
	last := float64(s.Looks[len(s.Looks)-1])
	t := make([]float64, len(s.Looks))
	for i, n := range s.Looks {
		t[i] = float64(n) / last
	}
	return t
}

// spent is the cumulative α each look spends: Taken for the looks already
// taken, the spending function at the information fraction for the rest.
func (s Sequential) spent() []float64 {
	t := s.fractions()
	out := make([]float64, len(t))
	for k, tk := range t {
		if k < len(s.Taken) {
			out[k] = s.Taken[k]
		} else {
			out[k] = Spent(s.Rule.Alpha, tk)
		}
	}
	return out
}

// Resize is the plan after look k (0-based, not the last) was taken, with
// the looks next (cumulative n per arm and level, increasing, the last the
// new last look) instead of the looks planned after k: what a final
// re-sized from the noise of the trials so far runs. The looks up to k
// keep the α they spent (Taken); the later ones spend the rest, their
// boundaries computed on the information fractions the looks really have
// (SpendAt). The overall level stays Rule.Alpha whatever the looks are,
// as long as they are chosen without looking at the effect: from the
// noise within each arm, which for normal noise is independent of the
// difference between the arms (blinded sample-size re-estimation). Resize
// returns an error wrapping ErrPlan when next is empty, not increasing
// beyond look k's n, or makes more than MaxLooks looks.
func (s Sequential) Resize(k int, next ...int) (Sequential, error) {
	if err := s.Check(); err != nil {
		return s, err
	}
	if k < 0 || k >= len(s.Looks)-1 {
		return s, fmt.Errorf("final: re-size after look %d of %d: %w", k+1, len(s.Looks), ErrPlan)
	}
	if len(next) == 0 || next[0] <= s.Looks[k] {
		return s, fmt.Errorf("final: re-size to n=%v after look %d at n=%d: %w", next, k+1, s.Looks[k], ErrPlan)
	}
	r := s
	r.Taken = s.spent()[:k+1]
	r.Looks = append(slices.Clone(s.Looks[:k+1]), next...)
	return r, r.Check()
}

// Look decides look k (0-based) of the final from the primary metric's
// trials per stratum and each guard's (guardData[g][stratum]). The plan
// must pass Check, and the data must have a stratum for every stratum of
// strata; Look panics otherwise.
//
// Keep when the better-direction bound of the common effect at confidence
// 1−2·Alpha (Alpha the look's spent nominal level) clears MinEffect and
// every level's harm and every guard at every level is non-inferior. The
// last look drops otherwise. An earlier look drops for futility when even
// the one-sided 90% better-direction bound of the common effect falls
// short of MinEffect, or when some level or guard loses more than its
// tolerance with one-sided 1−Rule.Alpha confidence (the loss's lower bound
// beyond it); else it continues. The looks' information fractions are the
// planned Looks, not the trials that arrived, so a short look does not
// change the boundaries; after a Resize, the looks taken keep the α they
// spent.
func (s Sequential) Look(k int, strata []Pair, guards []GuardRule, guardData [][]Pair) Look {
	if err := s.Check(); err != nil {
		panic("stats: " + err.Error())
	}
	if k < 0 || k >= len(s.Looks) || len(guardData) != len(guards) {
		panic(fmt.Sprintf("stats: look %d of %d with %d guards' data for %d guards", k, len(s.Looks), len(guardData), len(guards)))
	}
	spent := s.spent()
	nominal := SpendAt(s.fractions(), spent)[k]
	last := k == len(s.Looks)-1
	lk := Look{Index: k, Alpha: nominal, Spent: spent[k], Common: Stratified(strata, 1-2*nominal)}
	sign := s.Rule.Dir.sign()
	gain := func(iv Interval) (worst, best float64) {
		worst, best = sign*iv.Lo, sign*iv.Hi
		if worst > best {
			worst, best = best, worst
		}
		return worst, best
	}
	where := fmt.Sprintf("look %d of %d (nominal α %.2g, spent %.2g)", k+1, len(s.Looks), nominal, lk.Spent)
	effect := "Δ " + FormatEffect(lk.Common.Effect)
	worst, _ := gain(lk.Common.Effect)
	clears := worst > s.Rule.MinEffect

	// Harm and guards: every level non-inferior, else which is not, and
	// whether one is shown to lose more than its tolerance.
	var harmBad, harmShown, guardBad, guardShown []string
	lk.Harm = make([]Decision, len(strata))
	for i, p := range strata {
		d, loss, tol := nonInferior(s.Rule.Metric, p.Base, p.Cand, s.Rule.Dir, Relative, s.Harm, s.Rule.Alpha)
		lk.Harm[i] = d
		if d.Verdict != NoDifference {
			harmBad = append(harmBad, fmt.Sprintf("level %d", i+1))
		}
		if loss.Lo > tol {
			harmShown = append(harmShown, fmt.Sprintf("level %d", i+1))
		}
	}
	lk.Guards = make([][]Decision, len(guards))
	for g, gr := range guards {
		if len(guardData[g]) != len(strata) {
			panic(fmt.Sprintf("stats: guard %s has %d strata, the primary metric %d", gr.Metric, len(guardData[g]), len(strata)))
		}
		lk.Guards[g] = make([]Decision, len(strata))
		for i, p := range guardData[g] {
			d, loss, tol := nonInferior(gr.Metric, p.Base, p.Cand, gr.Dir, gr.Measure, gr.Bound, s.Rule.Alpha)
			lk.Guards[g][i] = d
			name := fmt.Sprintf("%s at level %d", gr.Metric, i+1)
			if d.Verdict != NoDifference {
				guardBad = append(guardBad, name)
			}
			if loss.Lo > tol {
				guardShown = append(guardShown, name)
			}
		}
	}
	safe := len(harmBad) == 0 && len(guardBad) == 0
	harmNote := fmt.Sprintf("no level loses more than %s", pct(s.Harm))
	if len(harmBad) > 0 {
		harmNote = fmt.Sprintf("%s may lose more than %s", list(harmBad), pct(s.Harm))
	}
	guardNote := "guards hold"
	switch {
	case len(guards) == 0:
		guardNote = "no guards"
	case len(guardBad) > 0:
		guardNote = "guard " + list(guardBad) + " not excluded from harm"
	}
	switch {
	case clears && safe:
		lk.Outcome = Keep
		lk.Reason = fmt.Sprintf("kept: %s clears %s at %s; %s; %s", effect, pct(s.Rule.MinEffect), where, harmNote, guardNote)
	case !clears && last:
		lk.Outcome = Drop
		lk.Reason = fmt.Sprintf("dropped: %s does not clear %s at %s", effect, pct(s.Rule.MinEffect), where)
	case last:
		lk.Outcome = Drop
		lk.Reason = fmt.Sprintf("dropped: %s clears %s at %s, but %s", effect, pct(s.Rule.MinEffect), where, joinNotes(harmBad, harmNote, guardBad, guardNote))
	default:
		fut := Stratified(strata, futilityConfidence)
		_, best := gain(fut.Effect)
		switch {
		case best < s.Rule.MinEffect:
			lk.Outcome = Drop
			lk.Reason = fmt.Sprintf("dropped for futility: Δ %s (%s) cannot reach %s at %s",
				FormatEffect(fut.Effect), pct(futilityConfidence), pct(s.Rule.MinEffect), where)
		case len(harmShown) > 0 || len(guardShown) > 0:
			lk.Outcome = Drop
			var shown []string
			if len(harmShown) > 0 {
				shown = append(shown, fmt.Sprintf("%s loses more than %s", list(harmShown), pct(s.Harm)))
			}
			if len(guardShown) > 0 {
				shown = append(shown, "guard "+list(guardShown)+" loses more than its bound")
			}
			lk.Reason = fmt.Sprintf("dropped for harm at %s: %s", where, strings.Join(shown, "; "))
		case clears:
			lk.Outcome = Continue
			lk.Reason = fmt.Sprintf("continue: %s clears %s at %s, but %s", effect, pct(s.Rule.MinEffect), where, joinNotes(harmBad, harmNote, guardBad, guardNote))
		default:
			lk.Outcome = Continue
			lk.Reason = fmt.Sprintf("continue: %s does not clear %s yet at %s", effect, pct(s.Rule.MinEffect), where)
		}
	}
	return lk
}

func list(names []string) string { return strings.Join(names, ", ") }

// joinNotes names what failed among harm and guards.
func joinNotes(harmBad []string, harmNote string, guardBad []string, guardNote string) string {
	var out []string
	if len(harmBad) > 0 {
		out = append(out, harmNote)
	}
	if len(guardBad) > 0 {
		out = append(out, guardNote)
	}
	return strings.Join(out, "; ")
}

// FinalN is the number of trials per arm and level that gives the final
// the power to keep a candidate whose true common effect is 1.5×minEffect
// in direction dir at noise cv (the coefficient of variation of one
// trial), with the default plan of two looks at n/2 and n (Looks = [n/2,
// n]) and the whole test at one-sided level alpha.
//
// Keeping needs the interval's bound to clear minEffect, so what must be
// resolved is the margin between 1.5×minEffect and minEffect, on the log
// scale where lognormal noise is normal (σ² = ln(1+cv²); for a σ of log
// values pass it as cv: the difference is σ⁴/2), at the last look's
// nominal level. The Hodges–Lehmann estimate of the common effect over
// strata·n trials per arm has variance ≈ (π/3)·2σ²/(strata·n) (the rank
// estimator's efficiency 3/π under normal noise). The margin depends on
// the direction: ln(1+1.5m) − ln(1+m) when higher is better, ln(1−m) −
// ln(1−1.5m) when lower is (a value 30% lower is further from one 20%
// lower, in logs, than 30% higher is from 20% higher), so a lower-is-
// better metric needs about a third of the trials. One trial is added for
// the rank statistics' discreteness, n is rounded up to even, and at
// least 8 (4 at the first look, the least with a bounded 90% interval).
// The futility stop and the harm and guard checks are not counted:
// TestFinalPowerRate measures the power with them. Returns 0 when
// minEffect ≤ 0 or cv ≤ 0, alpha or power is outside (0, 1), or dir is
// not a direction.
func FinalN(cv, minEffect, alpha, power float64, strata int, dir Direction) int {
	if !(cv > 0 && minEffect > 0 && alpha > 0 && alpha < 1 && power > 0 && power < 1) || dir.Check() != nil {
		return 0
	}
	margin := sizingMargin(minEffect, dir)
	z := finalZ(alpha, power)
	n := int(math.Ceil(z*z*finalVar(cv, strata)/(margin*margin))) + 1
	if n%2 == 1 {
		n++
	}
	return max(n, 8)
}

// sizingMargin is the log distance between a true effect of 1.5×m and
// the gate m in direction dir. A lower-is-better metric cannot improve by
// 100% or more, so where 1.5×m ≥ 1 the higher-is-better margin (the
// smaller) stands in.
func sizingMargin(m float64, dir Direction) float64 {
	if dir == LowerIsBetter && 1.5*m < 1 {
		return math.Log(1-m) - math.Log(1-1.5*m)
	}
	return math.Log1p(1.5*m) - math.Log1p(m)
}

// Detectable is the smallest true relative improvement in direction dir
// that the final with n trials per arm and level keeps with the given
// power, at noise cv and gate minEffect: FinalN's approximation solved
// for the effect instead of n, so Detectable(cv, FinalN(cv, m, …), m, …)
// ≤ 1.5·m. An improvement is a relative gain when higher is better and a
// relative reduction when lower is (0.3: 30% lower). It is what a report
// states when the budget cut the final below FinalN's n. NaN when cv ≤ 0,
// n < 2, alpha or power is outside (0, 1) or dir is not a direction.
func Detectable(cv float64, n int, minEffect, alpha, power float64, strata int, dir Direction) float64 {
	if !(cv > 0 && n >= 2 && alpha > 0 && alpha < 1 && power > 0 && power < 1) || dir.Check() != nil {
		return math.NaN()
	}
	margin := finalZ(alpha, power) * math.Sqrt(finalVar(cv, strata)/float64(n-1))
	m := math.Max(minEffect, 0)
	if dir == LowerIsBetter {
		return 1 - (1-m)*math.Exp(-margin)
	}
	return (1+m)*math.Exp(margin) - 1
}

// finalZ is the sum of the normal quantiles of the final's last look's
// nominal level (two looks at n/2 and n) and of the power.
func finalZ(alpha, power float64) float64 {
	nominal := Spend(alpha, []float64{0.5, 1})[1]
	return mstats.StdNormal.InvCDF(1-nominal) + mstats.StdNormal.InvCDF(power)
}

// finalVar is n times the variance of the stratified Hodges–Lehmann
// estimate of a log-scale shift with n trials per arm and level.
func finalVar(cv float64, strata int) float64 {
	return (math.Pi / 3) * 2 * math.Log1p(cv*cv) / float64(max(strata, 1))
}
