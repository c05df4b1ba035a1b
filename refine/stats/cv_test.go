package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestNoise(t *testing.T) {
	for _, c := range []struct {
		x    []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 0},
		// median 10, |deviations| 0 0 1 1 → MAD 0.5
		{[]float64{9, 10, 10, 11}, 1.4826 * 0.5 / 10},
		// one outlier run changes the MAD by one rank, not the spread
		{[]float64{9, 10, 10, 11, 1000}, 1.4826 * 1 / 10},
	} {
		if got := Noise(c.x); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Noise(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	// Normal noise: Noise estimates the CV.
	r := rand.New(rand.NewPCG(16, 16))
	x := make([]float64, 20000)
	for i := range x {
		x[i] = 100 + 10*r.NormFloat64()
	}
	if got := Noise(x); math.Abs(got-0.1) > 0.005 {
		t.Errorf("Noise of N(100, 10²) = %.4f, want ≈ 0.1", got)
	}
}
