package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// equivSim runs simulated equivalence tests as the engine runs them: looks
// at plan.Looks (re-sized after the first when resize is set, from the
// within-arm noise only), one stratum, lognormal noise of σ sigma (of log
// values), the candidate's true ratio 1+effect. It returns how many
// claimed equivalence, and the mean trials per arm.
func equivSim(t *testing.T, e Equivalence, sigma, effect float64, sims int, seed uint64, resize bool) (claims int, meanN float64) {
	t.Helper()
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0xe9))
	draw := func(x []float64, n int, scale float64) []float64 {
		for range n {
			x = append(x, scale*math.Exp(sigma*rng.NormFloat64()))
		}
		return x
	}
	total := 0
	for range sims {
		plan := e
		var p Pair
		have := 0
		for k := 0; k < len(plan.Plan.Looks); k++ {
			add := plan.Plan.Looks[k] - have
			p.Base, p.Cand = draw(p.Base, add, 1), draw(p.Cand, add, 1+effect)
			have = plan.Plan.Looks[k]
			lk := plan.Look(k, []Pair{p})
			if lk.Outcome != Pending {
				if lk.Outcome == Equivalent {
					claims++
				}
				break
			}
			if resize && k == 0 {
				// Within each arm, blind to the effect, at its 80% upper
				// bound as the engine sizes (noiseBound).
				df := float64(len(p.Base) + len(p.Cand) - 2)
				s := math.Sqrt((logVar(p.Base)+logVar(p.Cand))/2) * math.Sqrt(df/distuv.ChiSquared{K: df}.Quantile(0.2))
				n := max(EquivalenceN(s, e.Margin, e.Plan.Rule.Alpha, 0.8, 1), have+2)
				r, err := plan.Resize(0, min(n, 400))
				if err != nil {
					t.Fatal(err)
				}
				plan = r
			}
		}
		total += have
	}
	return claims, float64(total) / float64(sims)
}

func logVar(x []float64) float64 {
	var s, ss float64
	for _, v := range x {
		s += math.Log(v)
		ss += math.Log(v) * math.Log(v)
	}
	n := float64(len(x))
	return (ss - s*s/n) / (n - 1)
}

// enginePlan is the plan the engine starts a check with when it sizes it:
// a pilot of 10 per arm, the last look at the cap of 400, re-sized after
// the pilot (to a look halfway and the last).
func enginePlan() Equivalence {
	e := equivPlan(400)
	e.Plan.Looks = []int{10, 400}
	return e
}

func equivPlan(n int) Equivalence {
	return Equivalence{Plan: Sequential{Rule: Rule{Metric: "p99_ms", Alpha: 0.05, Dir: LowerIsBetter}, Looks: []int{n / 2, n}}, Margin: 0.03}
}

// TestEquivalenceFalseClaimRate: a profile whose true effect lies on the
// margin is claimed equivalent at most α of the time over both looks (the
// one-sided 95% lower bound of the rate ≤ α), planned and re-sized. Each
// look's interval at full α instead of its spent nominal level claims
// about 7–8% and fails it.
func TestEquivalenceFalseClaimRate(t *testing.T) {
	const sigma = 0.05
	n := EquivalenceN(sigma, 0.03, 0.05, 0.8, 1)
	sims := rateSims(3000)
	for _, tc := range []struct {
		name   string
		effect float64
		resize bool
	}{
		{"planned, +3%", 0.03, false},
		{"planned, −3%", -0.03, false},
		{"re-sized, +3%", 0.03, true},
	} {
		plan := equivPlan(n)
		if tc.resize {
			plan = enginePlan()
		}
		sims := sims
		if tc.resize {
			sims /= 2 // its n is larger; the planned cases are what catch a level spent twice
		}
		c, mean := equivSim(t, plan, sigma, tc.effect, sims, 7, tc.resize)
		lo := Proportion(c, sims, 0.90).Lo
		t.Logf("%s: n=%d, claimed equivalent %d of %d (%.4f, lower bound %.4f), %.1f trials per arm", tc.name, n, c, sims, float64(c)/float64(sims), lo, mean)
		if lo > 0.05 {
			t.Errorf("%s: equivalence claimed %.4f of the time at a true effect on the margin (lower bound %.4f > α 0.05)", tc.name, float64(c)/float64(sims), lo)
		}
	}
}

// TestEquivalencePower: with no effect, EquivalenceN's n shows
// equivalence at least 80% of the time (one-sided 95% lower bound), and
// so does a plan re-sized from a first look of 10 per arm.
func TestEquivalencePower(t *testing.T) {
	const sigma = 0.05
	n := EquivalenceN(sigma, 0.03, 0.05, 0.8, 1)
	sims := rateSims(1000)
	for _, tc := range []struct {
		name   string
		plan   Equivalence
		resize bool
	}{{"planned", equivPlan(n), false}, {"re-sized", enginePlan(), true}} {
		c, mean := equivSim(t, tc.plan, sigma, 0, sims, 11, tc.resize)
		lo := Proportion(c, sims, 0.90).Lo
		t.Logf("%s: n=%d, equivalent %d of %d (lower bound %.4f), %.1f trials per arm", tc.name, n, c, sims, lo, mean)
		if lo < 0.80 {
			t.Errorf("%s: power %.4f (lower bound %.4f < 0.80)", tc.name, float64(c)/float64(sims), lo)
		}
	}
}

func TestEquivalenceLook(t *testing.T) {
	base := []float64{1, 1.01, 0.99, 1.02, 0.98, 1, 1.01, 0.99, 1, 1}
	scaled := func(f float64) []float64 {
		x := make([]float64, len(base))
		for i, v := range base {
			x[i] = v * f
		}
		return x
	}
	for _, tc := range []struct {
		name  string
		cand  []float64
		looks []int
		want  Finding
	}{
		{"same values, one look", scaled(1), []int{10}, Equivalent},
		{"10% slower", scaled(1.10), []int{10}, Different},
		{"2.5% slower: the interval reaches past 3%, first of two looks", scaled(1.025), []int{10, 20}, Pending},
		{"2.5% slower at the last look", scaled(1.025), []int{10}, NotShown},
	} {
		e := Equivalence{Plan: Sequential{Rule: Rule{Metric: "p99_ms", Alpha: 0.05, Dir: LowerIsBetter}, Looks: tc.looks}, Margin: 0.03}
		lk := e.Look(0, []Pair{{Base: base, Cand: tc.cand}})
		if lk.Outcome != tc.want {
			t.Errorf("%s: %v (%s), want %v", tc.name, lk.Outcome, lk.Reason, tc.want)
		}
	}
	if err := (Equivalence{Plan: equivPlan(20).Plan, Margin: 0}).Check(); err == nil {
		t.Error("margin 0 passed Check")
	}
}
