package refine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// raceNoise recovers the σ of log values from the incumbent's block ends
// and the candidates' repeats, and still has one when every block of a
// race is at a level of its own (three levels, one block each: the
// candidates' scores pool across levels).
func TestRaceNoise(t *testing.T) {
	const sigma = 0.10
	rng := rand.New(rand.NewPCG(5, 6))
	trial := func(scale float64) sample {
		return sample{metrics: map[string]float64{"p99_ms": scale * math.Exp(sigma*rng.NormFloat64())}}
	}
	for _, tc := range []struct {
		name           string
		blocks, levels int
		racers         int
		wantDF         int
		tol            float64
	}{
		{"many blocks", 400, 1, 3, 400 + 3*399, 0.05},
		{"three levels, one block each", 3, 3, 3, 3 + 3*2, 0},
	} {
		var ends [][2]sample
		rs := make([]*racer, tc.racers)
		for i := range rs {
			rs[i] = &racer{}
		}
		for b := range tc.blocks {
			level := 1 + 0.5*float64(b%tc.levels) // levels shift the metric; ratios do not see it
			first, last := trial(level), trial(level)
			ends = append(ends, [2]sample{first, last})
			for i, r := range rs {
				f := float64(i+1) / float64(len(rs)+1)
				r.trials = append(r.trials, trial(level*0.8))
				r.base = append(r.base, first, last)
				r.at = append(r.at, f)
				r.rungOf = append(r.rungOf, 0)
			}
		}
		got, df := raceNoise(ends, rs, "p99_ms")
		t.Logf("%s: σ %.4f (true %.2f), %d degrees of freedom", tc.name, got, sigma, df)
		if df != tc.wantDF || math.IsNaN(got) {
			t.Errorf("%s: σ %g with %d degrees of freedom, want %d", tc.name, got, df, tc.wantDF)
		}
		if tc.tol > 0 && math.Abs(got-sigma) > tc.tol*sigma {
			t.Errorf("%s: σ %.4f, want %.2f within %.0f%%", tc.name, got, sigma, 100*tc.tol)
		}
	}
	if s, df := raceNoise(nil, nil, "p99_ms"); !math.IsNaN(s) || df != 0 {
		t.Errorf("no data: σ %g, df %d", s, df)
	}
}
