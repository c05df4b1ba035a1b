package analyze

import "math"

// Latency criticality, after scx_lavd. lavd scores a task from EWMA
// frequencies of waiting (blocking) and of waking others, its average run
// time and its weight:
//
//	lat_cri = (log2(wait_f · wake_f) + log2(runtime_f · weight_f))²
//
// where runtime_f grows as runs get shorter, then lets a wakee inherit its
// waker's criticality and a waker take the maximum of its wakees', so a
// whole request path rises together. Here the frequencies are counts over
// the window, runtime_f is latRuntimeRef / mean run (at least 1), weight_f is
// the CFS load weight of the thread's priority over nice 0's, and each log
// gets a +1 so that a zero frequency scores 0 instead of −∞. Propagation runs
// one hop each way along dominant edges: those carrying at least
// latMinShare of the wakee's wakeups.
const (
	latRuntimeRef = 1e6 // 1 ms
	latMinShare   = 0.1
)

// cfsWeights is the kernel's sched_prio_to_weight table, nice −20..19.
var cfsWeights = [40]float64{
	88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
	9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277,
	1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
	110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
}

// weightFactor is the CFS load weight of a priority relative to nice 0.
func weightFactor(prio int32) float64 {
	if prio >= 100 && prio < 140 {
		return cfsWeights[prio-100] / 1024
	}
	return 1 // real-time or unknown priority: neutral
}

// ownLatCrit computes a thread's own score from its features.
func ownLatCrit(f *Features, prio int32, window float64) LatCrit {
	var lc LatCrit
	if window <= 0 {
		return lc
	}
	lc.WaitFreq = round3(float64(f.Sleep+f.Disk) / window)
	lc.WakeFreq = round3(f.WakesOutRate)
	lc.RuntimeF = 0
	if f.Run.N > 0 && f.Run.Mean > 0 {
		lc.RuntimeF = round3(math.Max(1, latRuntimeRef/f.Run.Mean))
	}
	lc.WeightF = round3(weightFactor(prio))
	s := math.Log2(1+lc.WaitFreq*lc.WakeFreq) + math.Log2(1+lc.RuntimeF*lc.WeightF)
	lc.Own = round3(s * s)
	lc.Final = lc.Own
	return lc
}

// propagateLatCrit applies one hop of inheritance along dominant edges
// between target threads, then normalises to the workload's maximum.
func propagateLatCrit(g *wakeGraph, threads []Thread) {
	byNode := map[int]int{}
	for i := range threads {
		byNode[g.nodeOf[threads[i].utid]] = i
	}
	own := make([]float64, len(threads))
	for i := range threads {
		own[i] = threads[i].LatCrit.Own
	}
	for _, e := range g.edges {
		wi, okW := byNode[int(e[0])]
		vi, okV := byNode[int(e[1])]
		if !okW || !okV || wi == vi || g.in[e[1]] == 0 {
			continue
		}
		if float64(e[2])/float64(g.in[e[1]]) < latMinShare {
			continue
		}
		// Edges are visited in a fixed order, so ties resolve the same way.
		if own[wi] > threads[vi].LatCrit.Final {
			threads[vi].LatCrit.Final = own[wi]
			threads[vi].LatCrit.Via = g.nodes[e[0]].ID
		}
		if own[vi] > threads[wi].LatCrit.Final {
			threads[wi].LatCrit.Final = own[vi]
			threads[wi].LatCrit.Via = g.nodes[e[1]].ID
		}
	}
	var top float64
	for i := range threads {
		top = math.Max(top, threads[i].LatCrit.Final)
	}
	for i := range threads {
		if top > 0 {
			threads[i].LatCrit.Normalised = round3(100 * threads[i].LatCrit.Final / top)
		}
	}
}
