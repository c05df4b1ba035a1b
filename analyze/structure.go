package analyze

import "math"

// graphFeatures fills each target thread's wake-structure features by
// splitting its wakeups by what ended the wait:
//   - io_wake: the waking ended a D wait (an I/O completion or kernel lock
//     hand-over, whoever delivered it);
//   - hardirq: out of S, in hard interrupt context: an hrtimer (the thread
//     paces itself: sleeps, periodic ticks) or a device completion;
//   - external: out of S, from the rest of the outside world (softirq —
//     network receive —, kernel threads, other processes such as clients);
//   - peer: mutual with another workload thread (A wakes B as often as B
//     wakes A: barriers, ping-pong);
//   - entry / inner: from a workload thread that is itself woken from
//     outside (an acceptor, a dispatcher) or from inside the workload.
//
// Source (waiting for requests) is external plus entry wakes that do not
// converge from many threads; Chain (waiting on the workload) is inner plus
// converging entry wakes (fan-in). A self-paced thread (hardirq) is request
// serving or part of a chain only through what it hands on: Dispatch says
// how many request-serving (DispatchSource) and chain (DispatchChain)
// wakings it performs per wakeup of its own.
func (g *wakeGraph) graphFeatures(threads []Thread) {
	n := len(g.nodes)
	ext := make([]float64, n)  // share of all wakeups from outside
	extS := make([]float64, n) // share of wakeups out of S from outside (timers included)
	inS := make([]float64, n)
	for _, e := range g.edges {
		inS[e[1]] += float64(e[2] - g.countD[[2]int{int(e[0]), int(e[1])}])
	}
	for _, e := range g.edges {
		if g.nodes[e[0]].Kind == NodeThread {
			continue
		}
		if g.in[e[1]] > 0 {
			ext[e[1]] += float64(e[2]) / float64(g.in[e[1]])
		}
		if inS[e[1]] > 0 {
			extS[e[1]] += float64(e[2]-g.countD[[2]int{int(e[0]), int(e[1])}]) / inS[e[1]]
		}
	}
	byNode := make([]*Features, n)
	for i := range threads {
		v := g.nodeOf[threads[i].utid]
		f := &threads[i].Features
		byNode[v] = f
		f.External = round3(ext[v])
		total := float64(g.in[v])
		if total == 0 {
			continue
		}
		var io, hard, extW, peer, entry, inner, sum, sumSq float64
		for _, ei := range g.inE[v] {
			e := g.edges[ei]
			w := int(e[0])
			d := float64(g.countD[[2]int{w, v}])
			io += d
			cw := float64(e[2]) - d
			switch {
			case g.nodes[w].Kind == NodeHardIRQ:
				hard += cw
				continue
			case g.nodes[w].Kind != NodeThread:
				extW += cw
				continue
			case w == v:
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
		f.HardIRQ = round3(hard / total)
		f.Peer = round3(peer / total)
		f.Entry = round3(entry / total)
		f.Inner = round3(inner / total)
		f.Source = round3((extW + entry*(1-fan)) / total)
		f.Chain = round3((inner + entry*fan) / total)
	}
	// Dispatch: where the thread's own wakings go, weighted by what the
	// wakees wait for.
	for i := range threads {
		v := g.nodeOf[threads[i].utid]
		f := &threads[i].Features
		if g.out[v] == 0 {
			continue
		}
		var src, chain float64
		for _, ei := range g.outE[v] {
			e := g.edges[ei]
			if w := byNode[e[1]]; w != nil && int(e[1]) != v {
				src += float64(e[2]) * w.Source
				chain += float64(e[2]) * math.Min(1, w.Chain+w.IOWake)
			}
		}
		// Per wakeup of its own (or per waking it does, if more): a thread
		// that wakes a worker once in a thousand ticks hands nothing on.
		per := float64(max(g.out[v], g.in[v]))
		f.DispatchSource = round3(src / per)
		f.DispatchChain = round3(chain / per)
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
