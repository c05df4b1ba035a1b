package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestSequentialCheck(t *testing.T) {
	good := Sequential{Rule: Rule{Alpha: 0.05, MinEffect: 0.1, Dir: LowerIsBetter}, Harm: 0.1, Looks: []int{4, 8}}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Sequential){
		"no looks":       func(s *Sequential) { s.Looks = nil },
		"five looks":     func(s *Sequential) { s.Looks = []int{1, 2, 3, 4, 5} },
		"not increasing": func(s *Sequential) { s.Looks = []int{8, 8} },
		"alpha 0":        func(s *Sequential) { s.Rule.Alpha = 0 },
		"negative harm":  func(s *Sequential) { s.Harm = -0.1 },
		"NaN effect":     func(s *Sequential) { s.Rule.MinEffect = math.NaN() },
	} {
		s := good
		mut(&s)
		if err := s.Check(); !errors.Is(err, ErrPlan) {
			t.Errorf("%s: %v, want ErrPlan", name, err)
		}
	}
	s := good
	s.Rule.Dir = 0
	if err := s.Check(); !errors.Is(err, ErrNoDirection) {
		t.Errorf("no direction: %v", err)
	}
}

// TestSequentialResize: a plan re-sized after its first look keeps the α
// that look spent and spends the rest at its last look, whatever the new
// n; an n not beyond the look taken, or a re-size at the last look, is
// refused.
func TestSequentialResize(t *testing.T) {
	s := Sequential{Rule: Rule{Metric: "p99", Alpha: 0.05, MinEffect: 0.1, Dir: LowerIsBetter}, Harm: 0.1, Looks: []int{6, 12}}
	for _, n := range []int{8, 12, 30} {
		r, err := s.Resize(0, n)
		if err != nil {
			t.Fatalf("Resize(0, %d): %v", n, err)
		}
		if !slices.Equal(r.Looks, []int{6, n}) || len(r.Taken) != 1 || r.Taken[0] != Spent(0.05, 0.5) {
			t.Errorf("Resize(0, %d) = looks %v taken %v, want [6 %d] taken [%g]", n, r.Looks, r.Taken, n, Spent(0.05, 0.5))
		}
		if sp := r.spent(); sp[1] != 0.05 {
			t.Errorf("Resize(0, %d) spends %v, want the whole α by the last look", n, sp)
		}
		want := SpendAt([]float64{6 / float64(n), 1}, []float64{Spent(0.05, 0.5), 0.05})
		rng := rand.New(rand.NewPCG(1, 2))
		strata := []Pair{{Base: lognormal(rng, n, 0.1, 10), Cand: lognormal(rng, n, 0.1, 8)}}
		for k := range 2 {
			lk := r.Look(k, strata, nil, nil)
			if math.Abs(lk.Alpha-want[k]) > 1e-12 || lk.Spent != r.spent()[k] {
				t.Errorf("Resize(0, %d) look %d: nominal %g spent %g, want %g and %g", n, k+1, lk.Alpha, lk.Spent, want[k], r.spent()[k])
			}
		}
	}
	if s.Looks[1] != 12 {
		t.Errorf("Resize changed the plan it was called on: %v", s.Looks)
	}
	for _, tc := range []struct{ k, n int }{{0, 6}, {0, 4}, {1, 20}, {-1, 20}} {
		if _, err := s.Resize(tc.k, tc.n); !errors.Is(err, ErrPlan) {
			t.Errorf("Resize(%d, %d): %v, want ErrPlan", tc.k, tc.n, err)
		}
	}
	bad := s
	bad.Taken = []float64{0.06}
	if err := bad.Check(); !errors.Is(err, ErrPlan) {
		t.Errorf("α taken beyond the whole α: Check %v, want ErrPlan", err)
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{Continue: "continue", Keep: "keep", Drop: "drop", 9: "Outcome(9)"} {
		if o.String() != want {
			t.Errorf("%d: %q", o, o.String())
		}
	}
}

// One look, each outcome, with its reason.
func TestSequentialLook(t *testing.T) {
	plan := Sequential{Rule: Rule{Metric: "p99_ms", Alpha: 0.05, MinEffect: 0.20, Dir: LowerIsBetter}, Harm: 0.20, Looks: []int{8, 16}}
	base := []float64{1.00, 1.02, 0.98, 1.05, 0.97, 1.01, 1.03, 0.99, 1.04, 0.96, 1.00, 1.02, 0.98, 1.01, 0.99, 1.03}
	strata := func(f ...float64) []Pair {
		var s []Pair
		for l, x := range f {
			b := scaled(base, float64(l+1))
			c := slices.Clone(b)
			slices.Reverse(c) // not b's order: the ratios spread
			s = append(s, Pair{b, scaled(c, x)})
		}
		return s
	}
	first := func(p []Pair, n int) []Pair {
		out := make([]Pair, len(p))
		for i, x := range p {
			out[i] = Pair{x.Base[:n], x.Cand[:n]}
		}
		return out
	}
	spend := Spend(0.05, []float64{0.5, 1})
	for _, tc := range []struct {
		name    string
		k       int
		strata  []Pair
		outcome Outcome
		reason  string
	}{
		{"clear gain at look 1", 0, first(strata(0.6, 0.62), 8), Keep, "kept: Δ -39.2% [-40.5% -38.0%] clears 20% at look 1 of 2 (nominal α 0.031, spent 0.031); no level loses more than 20%; no guards"},
		{"no effect at look 1: futile", 0, first(strata(1, 1), 8), Drop, "dropped for futility"},
		{"gain near the gate at look 1", 0, first(strata(0.79, 0.79), 8), Continue, "continue: "},
		{"a level 30% worse at look 1", 0, first(strata(0.5, 1.3), 8), Drop, "dropped for harm at look 1 of 2"},
		{"no effect at the last look", 1, strata(0.95, 0.95), Drop, "dropped: Δ"},
		{"gain with a level lost at the last look", 1, strata(0.5, 0.5, 0.5, 1.3), Drop, "level 4 may lose more than 20%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lk := plan.Look(tc.k, tc.strata, nil, nil)
			if lk.Outcome != tc.outcome || !strings.Contains(lk.Reason, tc.reason) {
				t.Errorf("%v: %s; want %v, %q", lk.Outcome, lk.Reason, tc.outcome, tc.reason)
			}
			if want := Spent(0.05, float64(plan.Looks[tc.k])/16); lk.Spent != want {
				t.Errorf("spent %g, want %g", lk.Spent, want)
			}
			if lk.Alpha != spend[tc.k] || lk.Common.Confidence != 1-2*spend[tc.k] || len(lk.Harm) != len(tc.strata) || lk.Index != tc.k {
				t.Errorf("look %d: α %g, confidence %g, %d harm decisions", lk.Index, lk.Alpha, lk.Common.Confidence, len(lk.Harm))
			}
			if strings.Contains(lk.Reason, "NaN") {
				t.Errorf("reason %q", lk.Reason)
			}
			t.Log(lk.Reason)
		})
	}
	// A guard is decided per level and named when it fails. (The
	// Hodges–Lehmann shift is a median: errors in a minority of trials,
	// e.g. 4 of 16, do not move it, and such a guard passes.)
	s := strata(0.6, 0.6)
	g := []GuardRule{{Metric: "errors", Dir: LowerIsBetter, Measure: Count}}
	gd := [][]Pair{{{make([]float64, 16), make([]float64, 16)}, {make([]float64, 16), append(make([]float64, 4), 3, 4, 5, 4, 2, 1, 3, 4, 5, 2, 1, 3)}}}
	lk := plan.Look(1, s, g, gd)
	if lk.Outcome != Drop || len(lk.Guards) != 1 || len(lk.Guards[0]) != 2 || lk.Guards[0][0].Verdict != NoDifference ||
		lk.Guards[0][1].Verdict != Worse || !strings.Contains(lk.Reason, "guard errors at level 2 not excluded from harm") {
		t.Errorf("%v: %s", lk.Outcome, lk.Reason)
	}
	t.Log(lk.Reason)
}

// FinalN grows with noise and with a smaller minimum effect, and with
// strata it counts per level; a lower-is-better metric needs fewer trials
// than a higher-is-better one at the same relative effect.
func TestFinalN(t *testing.T) {
	for _, dir := range []Direction{LowerIsBetter, HigherIsBetter} {
		a, b, c := FinalN(0.10, 0.20, 0.05, 0.8, 1, dir), FinalN(0.20, 0.20, 0.05, 0.8, 1, dir), FinalN(0.10, 0.10, 0.05, 0.8, 1, dir)
		if !(a < b && a < c) || a%2 != 0 {
			t.Errorf("%s: FinalN: %d at CV 10%%, %d at CV 20%%, %d at a 10%% effect", dir, a, b, c)
		}
		if two := FinalN(0.10, 0.20, 0.05, 0.8, 2, dir); !(two < a) {
			t.Errorf("%s: two strata need %d per level, one %d", dir, two, a)
		}
		t.Logf("%s: FinalN at 80%% power, α 5%%: CV 10%% MinEffect 20%%: %d; CV 20%%: %d; MinEffect 10%%: %d", dir, a, b, c)
	}
	if lo, hi := FinalN(0.10, 0.20, 0.05, 0.8, 1, LowerIsBetter), FinalN(0.10, 0.20, 0.05, 0.8, 1, HigherIsBetter); !(lo < hi) {
		t.Errorf("lower is better needs %d, higher %d: the log margin to 30%% lower is the wider", lo, hi)
	}
	if FinalN(0, 0.2, 0.05, 0.8, 1, LowerIsBetter) != 0 || FinalN(0.1, 0.2, 0.05, 1, 1, LowerIsBetter) != 0 || FinalN(0.1, 0.2, 0.05, 0.8, 1, 0) != 0 {
		t.Error("FinalN of a bad argument is not 0")
	}
	// 1.5× a 70% reduction is impossible: the higher-is-better margin
	// stands in.
	if FinalN(0.1, 0.7, 0.05, 0.8, 1, LowerIsBetter) != FinalN(0.1, 0.7, 0.05, 0.8, 1, HigherIsBetter) {
		t.Error("FinalN at a 70% reduction does not fall back to the higher-is-better margin")
	}
}

// Detectable inverts FinalN: at FinalN's n the detectable effect is at
// most 1.5× the gate, at fewer trials it is larger, in both directions.
func TestDetectable(t *testing.T) {
	for _, dir := range []Direction{LowerIsBetter, HigherIsBetter} {
		for _, m := range []float64{0.05, 0.10, 0.20} {
			n := FinalN(0.10, m, 0.05, 0.8, 2, dir)
			d := Detectable(0.10, n, m, 0.05, 0.8, 2, dir)
			half := Detectable(0.10, n/2, m, 0.05, 0.8, 2, dir)
			if !(d > m && d <= 1.5*m+1e-9 && half > d) {
				t.Errorf("%s, m %g: FinalN %d detects %g, n/2 %g", dir, m, n, d, half)
			}
		}
	}
	if !math.IsNaN(Detectable(0, 8, 0.1, 0.05, 0.8, 1, LowerIsBetter)) || !math.IsNaN(Detectable(0.1, 8, 0.1, 0.05, 0.8, 1, 0)) {
		t.Error("Detectable at no noise or no direction is not NaN")
	}
}
