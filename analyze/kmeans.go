package analyze

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
)

// clustering is one partition of the points.
type clustering struct {
	k          int
	assign     []int
	inertia    float64
	silhouette float64
}

// chooseClusters partitions x and returns the assignment with the best
// silhouette. Fewer than three distinct points give one cluster per
// distinct point.
func chooseClusters(x [][]float64) clustering {
	n := len(x)
	distinct := distinctPoints(x)
	if distinct < 3 {
		return exactClusters(x)
	}
	var cands []clustering
	best := math.Inf(-1)
	for k := 2; k <= min(clusterMaxK, distinct-1, n-1); k++ {
		c := kmeans(x, k)
		c.silhouette = silhouette(x, c.assign, k)
		cands = append(cands, c)
		best = math.Max(best, c.silhouette)
	}
	// The smallest k within silhouetteSlack of the best: silhouette tends
	// to creep up as clusters shrink, and every group costs a scheduler
	// layer in the profile, so extra groups must earn their keep.
	for _, c := range cands {
		if c.silhouette >= best-silhouetteSlack*math.Abs(best)-1e-9 {
			return c
		}
	}
	return cands[len(cands)-1]
}

// exactClusters puts identical points together.
func exactClusters(x [][]float64) clustering {
	assign := make([]int, len(x))
	var reps [][]float64
	for i, p := range x {
		found := -1
		for r, q := range reps {
			if floats.Equal(p, q) {
				found = r
				break
			}
		}
		if found < 0 {
			found = len(reps)
			reps = append(reps, p)
		}
		assign[i] = found
	}
	return clustering{k: len(reps), assign: assign}
}

func distinctPoints(x [][]float64) int { return exactClusters(x).k }

// kmeans runs Lloyd's algorithm from clusterRestarts k-means++ seedings,
// each with its own fixed seed, and keeps the lowest inertia.
func kmeans(x [][]float64, k int) clustering {
	best := clustering{k: k, inertia: math.Inf(1)}
	for r := 0; r < clusterRestarts; r++ {
		rng := rand.New(rand.NewPCG(clusterSeed, uint64(k*1000+r)))
		assign, inertia := lloyd(x, seedPlusPlus(x, k, rng))
		if inertia < best.inertia-1e-9 {
			best.assign, best.inertia = assign, inertia
		}
	}
	return best
}

// seedPlusPlus picks k initial centres: the first uniformly, each next with
// probability proportional to its squared distance to the nearest chosen.
func seedPlusPlus(x [][]float64, k int, rng *rand.Rand) [][]float64 {
	n := len(x)
	centres := [][]float64{append([]float64(nil), x[rng.IntN(n)]...)}
	d2 := make([]float64, n)
	for len(centres) < k {
		var total float64
		for i, p := range x {
			d2[i] = math.Inf(1)
			for _, c := range centres {
				d2[i] = math.Min(d2[i], sqDist(p, c))
			}
			total += d2[i]
		}
		if total == 0 {
			break
		}
		target := rng.Float64() * total
		pick := n - 1
		for i := range x {
			target -= d2[i]
			if target <= 0 && d2[i] > 0 {
				pick = i
				break
			}
		}
		centres = append(centres, append([]float64(nil), x[pick]...))
	}
	return centres
}

// lloyd iterates assignment and update to convergence (at most 100 rounds).
// A cluster that empties keeps its centre.
func lloyd(x [][]float64, centres [][]float64) ([]int, float64) {
	n, k, d := len(x), len(centres), len(x[0])
	assign := make([]int, n)
	for i := range assign {
		assign[i] = -1
	}
	var inertia float64
	for round := 0; round < 100; round++ {
		changed := false
		inertia = 0
		for i, p := range x {
			bi, bd := 0, math.Inf(1)
			for c, ctr := range centres {
				if dd := sqDist(p, ctr); dd < bd-1e-12 {
					bi, bd = c, dd
				}
			}
			inertia += bd
			if assign[i] != bi {
				assign[i], changed = bi, true
			}
		}
		if !changed {
			break
		}
		cnt := make([]int, k)
		sums := make([][]float64, k)
		for c := range sums {
			sums[c] = make([]float64, d)
		}
		for i, p := range x {
			floats.Add(sums[assign[i]], p)
			cnt[assign[i]]++
		}
		for c := range centres {
			if cnt[c] > 0 {
				floats.ScaleTo(centres[c], 1/float64(cnt[c]), sums[c])
			}
		}
	}
	return compact(assign), inertia
}

// compact renumbers cluster ids 0..m-1 in order of first appearance.
func compact(assign []int) []int {
	re := map[int]int{}
	out := make([]int, len(assign))
	for i, a := range assign {
		if _, ok := re[a]; !ok {
			re[a] = len(re)
		}
		out[i] = re[a]
	}
	return out
}

// silhouette is the mean silhouette coefficient; a point alone in its
// cluster scores 0. Above silhouetteSample points it is the mean over an
// evenly spaced (deterministic) sample of them, each still compared with
// every point, which keeps the cost linear in the number of threads.
func silhouette(x [][]float64, assign []int, k int) float64 {
	n := len(x)
	size := make([]int, k)
	for _, a := range assign {
		size[a]++
	}
	m := min(n, silhouetteSample)
	var total float64
	sum := make([]float64, k)
	for s := 0; s < m; s++ {
		i := s * n / m
		if size[assign[i]] < 2 {
			continue
		}
		clear(sum)
		for j := range x {
			if i != j {
				sum[assign[j]] += math.Sqrt(sqDist(x[i], x[j]))
			}
		}
		a := sum[assign[i]] / float64(size[assign[i]]-1)
		b := math.Inf(1)
		for c := 0; c < k; c++ {
			if c != assign[i] && size[c] > 0 {
				b = math.Min(b, sum[c]/float64(size[c]))
			}
		}
		if mx := math.Max(a, b); mx > 0 && !math.IsInf(b, 1) {
			total += (b - a) / mx
		}
	}
	return total / float64(m)
}

func sqDist(a, b []float64) float64 {
	var s float64
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return s
}
