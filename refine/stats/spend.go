package stats

import (
	"fmt"
	"math"

	mstats "github.com/aclements/go-moremath/stats"
)

// Spent is the α a group-sequential test has spent by information
// fraction t under the Lan–DeMets Pocock-type spending function
// alpha·ln(1+(e−1)·t): it spends early looks almost as generously as
// Pocock's equal boundaries, which suits a final that should stop as soon
// as a clear effect shows, and it needs no fixed number of looks.
func Spent(alpha, t float64) float64 {
	return alpha * math.Log1p((math.E-1)*t)
}

// Spend returns the nominal one-sided level of each look of a
// group-sequential test whose looks are at information fractions t
// (increasing, in (0,1], last 1), spending alpha by the Lan–DeMets
// Pocock-type function alpha·ln(1+(e−1)·t).
//
// The statistic at look k is Z_k = B(t_k)/√t_k for a standard Brownian
// motion B (independent increments: each look adds fresh trials), and look
// k's boundary c_k is such that P(Z_k ≥ c_k, Z_j < c_j for j < k) =
// Spent(t_k) − Spent(t_{k−1}) under the null; its nominal level is
// 1 − Φ(c_k). The probabilities come from the sub-density of B on the
// continuation region, carried from look to look by numerical integration
// (Armitage, McPherson and Rowe's recursion, Simpson's rule on a grid fine
// against the smallest increment). Tested up to 4 looks. Spend panics on t
// that is not increasing in (0, 1]: a plan is checked before it is run
// (Sequential.Check).
func Spend(alpha float64, t []float64) []float64 {
	if err := checkFractions(t); err != nil {
		panic("stats: " + err.Error())
	}
	spent := make([]float64, len(t))
	for k, tk := range t {
		spent[k] = Spent(alpha, tk)
	}
	return SpendAt(t, spent)
}

// SpendAt returns the nominal one-sided level of each look of a
// group-sequential test whose looks are at information fractions t and
// have spent spent[k] by look k (cumulative, increasing; the last is the
// whole test's α), by Spend's recursion. Spend is SpendAt with spent from
// the spending function at t. It is what a re-sized plan needs: a look
// already taken keeps the α it spent, while the information fractions are
// those actually reached (the look's n over the new last n), so the
// later boundaries are computed on the correlation the looks really
// have. Panics on t that is not increasing in (0, 1] or spent that is
// not increasing in (0, 1).
func SpendAt(t, spent []float64) []float64 {
	if err := checkFractions(t); err != nil {
		panic("stats: " + err.Error())
	}
	if err := checkSpent(spent, len(t)); err != nil {
		panic("stats: " + err.Error())
	}
	out := make([]float64, len(t))
	minStep := t[0]
	for k := 1; k < len(t); k++ {
		minStep = math.Min(minStep, t[k]-t[k-1])
	}
	h := math.Sqrt(minStep) / 24 // grid step on the B scale
	const tail = 9.0             // grid starts tail standard deviations below 0
	var grid, dens []float64     // sub-density of B(t_{k−1}) on paths still running
	prevT, prevSpent := 0.0, 0.0
	for k, tk := range t {
		inc := spent[k] - prevSpent
		if k == 0 {
			out[0] = inc
			b := math.Sqrt(tk) * mstats.StdNormal.InvCDF(1-inc)
			grid = span(-tail*math.Sqrt(tk), b, h)
			dens = make([]float64, len(grid))
			for i, x := range grid {
				dens[i] = normPDF(x, tk)
			}
		} else {
			dt := tk - prevT
			sd := math.Sqrt(dt)
			w := simpson(grid)
			// cross(b) − inc falls from the mass still running to −inc as b
			// rises: Newton's method, kept inside a bracket by bisection.
			cross := func(b float64) (p, slope float64) {
				for i, x := range grid {
					z := (x - b) / sd
					p += w[i] * dens[i] * mstats.StdNormal.CDF(z)
					slope -= w[i] * dens[i] * normPDF(z, 1) / sd
				}
				return p, slope
			}
			lo, hi := grid[0]-tail*sd, grid[len(grid)-1]+tail*sd
			b := math.Sqrt(tk) * mstats.StdNormal.InvCDF(1-inc)
			for range 100 {
				p, slope := cross(b)
				if math.Abs(p-inc) <= 1e-12*inc {
					break
				}
				if p > inc {
					lo = b
				} else {
					hi = b
				}
				next := b - (p-inc)/slope
				if !(next > lo && next < hi) {
					next = (lo + hi) / 2
				}
				if hi-lo < 1e-12 {
					break
				}
				b = next
			}
			out[k] = mstats.StdNormal.CDF(-b / math.Sqrt(tk))
			if k == len(t)-1 {
				break
			}
			next := span(-tail*math.Sqrt(tk), b, h)
			nd := make([]float64, len(next))
			for j, y := range next {
				s := 0.0
				for i, x := range grid {
					s += w[i] * dens[i] * normPDF(y-x, dt)
				}
				nd[j] = s
			}
			grid, dens = next, nd
		}
		prevT, prevSpent = tk, spent[k]
	}
	return out
}

func checkSpent(spent []float64, looks int) error {
	if len(spent) != looks {
		return fmt.Errorf("%d cumulative α for %d looks", len(spent), looks)
	}
	prev := 0.0
	for _, x := range spent {
		if !(x > prev && x < 1) {
			return fmt.Errorf("cumulative α %v: want increasing in (0, 1)", spent)
		}
		prev = x
	}
	return nil
}

func checkFractions(t []float64) error {
	if len(t) == 0 {
		return fmt.Errorf("no looks")
	}
	prev := 0.0
	for _, x := range t {
		if !(x > prev && x <= 1) {
			return fmt.Errorf("information fractions %v: want increasing in (0, 1]", t)
		}
		prev = x
	}
	return nil
}

// span is an evenly spaced grid from a to b with an even number of steps
// of at most h (Simpson's rule needs an even number).
func span(a, b, h float64) []float64 {
	n := max(2, int(math.Ceil((b-a)/h)))
	if n%2 == 1 {
		n++
	}
	g := make([]float64, n+1)
	for i := range g {
		g[i] = a + (b-a)*float64(i)/float64(n)
	}
	return g
}

// simpson returns Simpson's weights for the evenly spaced grid g.
func simpson(g []float64) []float64 {
	n := len(g) - 1
	h := (g[n] - g[0]) / float64(n)
	w := make([]float64, len(g))
	for i := range w {
		switch {
		case i == 0 || i == n:
			w[i] = h / 3
		case i%2 == 1:
			w[i] = 4 * h / 3
		default:
			w[i] = 2 * h / 3
		}
	}
	return w
}

// normPDF is the density of N(0, v) at x.
func normPDF(x, v float64) float64 {
	return math.Exp(-x*x/(2*v)) / math.Sqrt(2*math.Pi*v)
}
