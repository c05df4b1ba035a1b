package analyze

import (
	"cmp"
	"math"
	"slices"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat"
)

// Clustering groups threads by behaviour. Each thread becomes a vector of
// log-scaled rates and durations, shares, and wake-graph structure (see
// clusterVector); every dimension is standardised to zero mean and unit
// variance so none dominates by its unit. Threads of one family are pulled
// halfway to their family's mean (familyPull), so a pool stays together
// unless its members really differ — then the family splits and the report
// says so. k-means (k-means++ seeding, fixed seeds, several restarts) runs
// for every k from 2 to clusterMaxK; the smallest k whose mean silhouette
// is within silhouetteSlack (5 %) of the best wins.
const (
	clusterMaxK     = 8
	clusterRestarts = 16
	clusterSeed     = 0x5eed
	familyPull      = 0.5
	// silhouetteSample bounds the points whose silhouette is computed.
	silhouetteSample = 400
	// silhouetteSlack is how much silhouette a smaller k may give up.
	silhouetteSlack = 0.05
)

// clusterVector is the thread's point in feature space.
func clusterVector(f *Features) []float64 {
	lg := func(x, floor float64) float64 { return math.Log10(x + floor) }
	return []float64{
		lg(f.CPUShare, 1e-5),
		lg(float64(f.RunTimeP50)/1e3, 1),
		lg(float64(f.Run.P90)/1e3, 1),
		lg(f.WakeRate, 0.1),
		lg(f.WakesOutRate, 0.1),
		f.PreemptShare,
		f.DiskShare,
		f.IOWake,
		f.External,
		f.Peer,
		f.Source,
		f.Chain,
		f.HardIRQ,
		f.DispatchSource,
	}
}

// standardise scales each column of x to zero mean and unit variance in
// place; constant columns become zero.
func standardise(x [][]float64) {
	if len(x) == 0 {
		return
	}
	col := make([]float64, len(x))
	for j := range x[0] {
		for i := range x {
			col[i] = x[i][j]
		}
		mean, std := stat.PopMeanStdDev(col, nil)
		for i := range x {
			if std < 1e-9 {
				x[i][j] = 0
			} else {
				x[i][j] = (x[i][j] - mean) / std
			}
		}
	}
}

// pullToFamilies moves each point a fraction pull of the way to its family's
// centroid. family[i] is a family index per point.
func pullToFamilies(x [][]float64, family []int, pull float64) {
	nf := 0
	for _, f := range family {
		nf = max(nf, f+1)
	}
	d := len(x[0])
	sum := make([][]float64, nf)
	cnt := make([]float64, nf)
	for i := range sum {
		sum[i] = make([]float64, d)
	}
	for i, p := range x {
		floats.Add(sum[family[i]], p)
		cnt[family[i]]++
	}
	for i, p := range x {
		for j := range p {
			p[j] = (1-pull)*p[j] + pull*sum[family[i]][j]/cnt[family[i]]
		}
	}
}

// clusterThreads clusters the threads and returns the clusters, numbered
// from 1 in order of total CPU share (then lowest tid). Threads that never
// ran have no behaviour to compare: they form a cluster of their own.
func clusterThreads(threads []Thread) []Cluster {
	if len(threads) == 0 {
		return []Cluster{}
	}
	var ran []int
	for i := range threads {
		if !threads[i].NeverRan {
			ran = append(ran, i)
		}
	}
	raw := make([]int, len(threads)) // raw cluster per thread
	k := 0
	if len(ran) > 0 {
		x := make([][]float64, len(ran))
		famIdx := map[string]int{}
		fam := make([]int, len(ran))
		for j, i := range ran {
			x[j] = clusterVector(&threads[i].Features)
			if _, ok := famIdx[threads[i].Family]; !ok {
				famIdx[threads[i].Family] = len(famIdx)
			}
			fam[j] = famIdx[threads[i].Family]
		}
		standardise(x)
		pullToFamilies(x, fam, familyPull)
		cl := chooseClusters(x)
		for j, i := range ran {
			raw[i] = cl.assign[j]
		}
		k = cl.k
	}
	if len(ran) < len(threads) {
		for i := range threads {
			if threads[i].NeverRan {
				raw[i] = k
			}
		}
		k++
	}
	return numberClusters(threads, raw, k)
}

// numberClusters builds the clusters from a raw assignment (raw[i] in
// [0, k) for every thread), numbered from 1 in order of total CPU share, then
// lowest tid, and sets each thread's Cluster. Raw clusters left empty are
// dropped.
func numberClusters(threads []Thread, raw []int, k int) []Cluster {
	type agg struct {
		raw    int
		n      int
		cpu    float64
		minTid int32
	}
	aggs := make([]agg, k)
	for i := range aggs {
		aggs[i] = agg{raw: i, minTid: 1<<31 - 1}
	}
	for i, t := range threads {
		a := &aggs[raw[i]]
		a.n++
		a.cpu += t.Features.CPUShare
		a.minTid = min(a.minTid, t.Tid)
	}
	aggs = slices.DeleteFunc(aggs, func(a agg) bool { return a.n == 0 })
	slices.SortStableFunc(aggs, func(a, b agg) int {
		if c := cmp.Compare(b.cpu, a.cpu); c != 0 {
			return c
		}
		return cmp.Compare(a.minTid, b.minTid)
	})
	id := make([]int, k)
	for i, a := range aggs {
		id[a.raw] = i + 1
	}
	clusters := make([]Cluster, len(aggs))
	for i := range clusters {
		clusters[i] = Cluster{ID: i + 1, Members: []int32{}, Families: []FamilyCount{}}
	}
	for i := range threads {
		c := &clusters[id[raw[i]]-1]
		threads[i].Cluster = c.ID
		c.Members = append(c.Members, threads[i].Tid)
		c.CPUShare += threads[i].Features.CPUShare
		if n := len(c.Families); n > 0 && c.Families[n-1].Family == threads[i].Family {
			c.Families[n-1].Count++
		} else {
			c.Families = append(c.Families, FamilyCount{Family: threads[i].Family, Count: 1})
		}
	}
	for i := range clusters {
		clusters[i].CPUShare = round4(clusters[i].CPUShare)
	}
	return clusters
}

// reconcileClusters moves threads that plainly do not behave like the class
// their cluster was given. The family pull in clusterThreads is a prior, not
// a verdict: where one name covers different roles (every PostgreSQL process
// is "postgres", every MariaDB thread "mariadbd"), a background process can be
// pulled into the cluster of the many request-serving ones. A thread moves
// when its own score for the cluster's class is at most half its own best
// score; it goes to the cluster of its own class whose mean scores are
// nearest its own, or to a new cluster when there is none. Call it after
// classifyClusters, and classify again when it reports a move; the family
// split it causes is reported like any other.
func reconcileClusters(clusters []Cluster, threads []Thread) ([]Cluster, bool) {
	raw := make([]int, len(threads))
	for i := range threads {
		raw[i] = threads[i].Cluster - 1
	}
	k := len(clusters)
	fresh := map[Class]int{} // new raw cluster per class
	moved := false
	for i := range threads {
		t := &threads[i]
		c := &clusters[t.Cluster-1]
		own := t.Scores.of(t.OwnClass)
		if t.OwnClass == c.Class || t.Scores.of(c.Class) > own/2 {
			continue
		}
		dest, best := -1, math.Inf(1)
		for j := range clusters {
			if clusters[j].Class != t.OwnClass {
				continue
			}
			if d := floats.Distance(t.Scores.values(), clusters[j].Scores.values(), 2); d < best {
				dest, best = j, d
			}
		}
		if dest < 0 {
			n, ok := fresh[t.OwnClass]
			if !ok {
				n = k
				fresh[t.OwnClass] = n
				k++
			}
			dest = n
		}
		raw[i] = dest
		moved = true
	}
	if !moved {
		return clusters, false
	}
	return numberClusters(threads, raw, k), true
}
