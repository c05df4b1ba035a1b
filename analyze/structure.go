package analyze

import "math"

// graphFeatures fills each target thread's wake-structure features. A
// thread's wakeups split into: I/O (the waking ended a D wait), external
// (from outside the workload), peer (mutual wakes with another workload
// thread, as at a barrier), entry (from a workload thread that is itself
// woken from outside) and inner (from one woken inside). Only wakings out
// of S say what a thread waits for: a waking from D is an I/O completion
// whoever delivers it, so it never counts as a request.
func (g *wakeGraph) graphFeatures(threads []Thread) {
	n := len(g.nodes)
	ext := make([]float64, n)  // share of all wakeups from outside
	extS := make([]float64, n) // share of wakeups out of S from outside
	inS := make([]float64, n)
	for _, e := range g.edges {
		key := [2]int{int(e[0]), int(e[1])}
		inS[e[1]] += float64(e[2] - g.countD[key])
	}
	for _, e := range g.edges {
		if g.nodes[e[0]].Kind == NodeThread {
			continue
		}
		key := [2]int{int(e[0]), int(e[1])}
		if g.in[e[1]] > 0 {
			ext[e[1]] += float64(e[2]) / float64(g.in[e[1]])
		}
		if inS[e[1]] > 0 {
			extS[e[1]] += float64(e[2]-g.countD[key]) / inS[e[1]]
		}
	}
	for i := range threads {
		v := g.nodeOf[threads[i].utid]
		f := &threads[i].Features
		f.External = round3(ext[v])
		total := float64(g.in[v])
		if total == 0 {
			continue
		}
		var io, extW, peer, entry, inner, sum, sumSq float64
		for _, ei := range g.inE[v] {
			e := g.edges[ei]
			w := int(e[0])
			d := float64(g.countD[[2]int{w, v}])
			io += d
			cw := float64(e[2]) - d
			if g.nodes[w].Kind != NodeThread {
				extW += cw
				continue
			}
			if w == v {
				continue
			}
			back := float64(g.count[[2]int{v, w}] - g.countD[[2]int{v, w}])
			mutual := math.Min(cw, back)
			rem := cw - mutual
			peer += mutual
			entry += rem * extS[w]
			inner += rem * (1 - extS[w])
			sum += rem
			sumSq += rem * rem
		}
		if sumSq > 0 {
			f.FanIn = round3(sum * sum / sumSq)
		}
		fan := ramp(f.FanIn, 1.5, 3)
		f.IOWake = round3(io / total)
		f.Peer = round3(peer / total)
		f.Entry = round3(entry / total)
		f.Inner = round3(inner / total)
		f.Source = round3((extW + entry*(1-fan)) / total)
		f.Chain = round3((inner + entry*fan) / total)
	}
}

// topPeers fills each thread's top wakers and wakees.
func (g *wakeGraph) topPeers(threads []Thread, limit int) {
	for i := range threads {
		v := g.nodeOf[threads[i].utid]
		var by, to []Peer
		for _, ei := range g.inE[v][:min(limit, len(g.inE[v]))] {
			e := g.edges[ei]
			by = append(by, Peer{Node: g.nodes[e[0]].ID, Count: e[2], Share: round3(float64(e[2]) / float64(g.in[v]))})
		}
		for _, ei := range g.outE[v][:min(limit, len(g.outE[v]))] {
			e := g.edges[ei]
			to = append(to, Peer{Node: g.nodes[e[1]].ID, Count: e[2], Share: round3(float64(e[2]) / float64(g.out[v]))})
		}
		threads[i].WokenBy = firstN(by, limit)
		threads[i].Wakes = firstN(to, limit)
	}
}

func firstN[T any](s []T, n int) []T {
	if s == nil {
		return []T{}
	}
	if len(s) > n {
		return s[:n]
	}
	return s
}
