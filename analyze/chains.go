package analyze

import (
	"cmp"
	"slices"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/simple"
)

// Thresholds for the edges chains follow and for hubs.
const (
	chainMinShare = 0.2
	chainMinRate  = 1.0
	hubMinRate    = 1.0
	hubMinDegree  = 3
)

// Chain is a path of dominant wake edges between families (A wakes B wakes
// C): each edge carries at least chainMinShare of its wakee's wakeups and
// chainMinRate per second. Counts are per edge, in path order.
type Chain struct {
	Path   []string `json:"path"`
	Counts []int64  `json:"counts"`
}

// Hub is a node that wakes (fan-out) or is woken by (fan-in) many distinct
// nodes, each at least hubMinRate per second.
type Hub struct {
	Node   string `json:"node"`
	FanOut int    `json:"fan_out"`
	FanIn  int    `json:"fan_in"`
	Out    int64  `json:"wakes_out"`
	In     int64  `json:"wakes_in"`
}

// hubs finds nodes with at least hubMinDegree distinct partners, each edge
// at least hubMinRate per second.
func (g *wakeGraph) hubs(d *simple.WeightedDirectedGraph, window float64) []Hub {
	var hubs []Hub
	for i := range g.nodes {
		h := Hub{Node: g.nodes[i].ID}
		for _, nb := range sortedNodes(d.From(int64(i))) {
			w, _ := d.Weight(int64(i), nb)
			if rate(int64(w), window) >= hubMinRate {
				h.FanOut++
				h.Out += int64(w)
			}
		}
		for _, nb := range sortedNodes(d.To(int64(i))) {
			w, _ := d.Weight(nb, int64(i))
			if rate(int64(w), window) >= hubMinRate {
				h.FanIn++
				h.In += int64(w)
			}
		}
		if h.FanOut >= hubMinDegree || h.FanIn >= hubMinDegree {
			hubs = append(hubs, h)
		}
	}
	slices.SortStableFunc(hubs, func(a, b Hub) int {
		return cmp.Compare(max(b.FanOut, b.FanIn), max(a.FanOut, a.FanIn))
	})
	if hubs == nil {
		hubs = []Hub{}
	}
	return hubs
}

// sortedNodes drains a gonum node iterator into sorted IDs: gonum's simple
// graphs iterate maps, and every output here must be in a fixed order.
func sortedNodes(it graph.Nodes) []int64 {
	var ids []int64
	for it.Next() {
		ids = append(ids, it.Node().ID())
	}
	slices.Sort(ids)
	return ids
}

// chains finds maximal paths of dominant edges in the family-level graph
// (target threads merged by family; outside nodes as they are).
func (g *wakeGraph) chains(window float64) []Chain {
	// Family-level nodes.
	var names []string
	idx := map[string]int{}
	fam := make([]int, len(g.nodes))
	for i, n := range g.nodes {
		name := n.ID
		if n.Kind == NodeThread {
			name = n.Family
		}
		if _, ok := idx[name]; !ok {
			idx[name] = len(names)
			names = append(names, name)
		}
		fam[i] = idx[name]
	}
	fg := simple.NewWeightedDirectedGraph(0, 0)
	for i := range names {
		fg.AddNode(simple.Node(int64(i)))
	}
	in := make([]float64, len(names))
	w := map[[2]int]float64{}
	for _, e := range g.edges {
		a, b := fam[e[0]], fam[e[1]]
		in[b] += float64(e[2])
		if a != b {
			w[[2]int{a, b}] += float64(e[2])
		}
	}
	for a := range names {
		for b := range names {
			if x := w[[2]int{a, b}]; x > 0 && x/in[b] >= chainMinShare && rate(int64(x), window) >= chainMinRate {
				fg.SetWeightedEdge(simple.WeightedEdge{F: simple.Node(int64(a)), T: simple.Node(int64(b)), W: x})
			}
		}
	}
	// Maximal simple paths of at least two edges; depth and count bounded.
	var paths [][]int
	var walk func(path []int, onPath []bool)
	walk = func(path []int, onPath []bool) {
		if len(paths) >= 1000 {
			return
		}
		last := path[len(path)-1]
		extended := false
		if len(path) < 8 {
			for _, nb := range sortedNodes(fg.From(int64(last))) {
				if onPath[nb] {
					continue
				}
				extended = true
				onPath[nb] = true
				walk(append(path, int(nb)), onPath)
				onPath[nb] = false
			}
		}
		if !extended && len(path) >= 3 {
			paths = append(paths, slices.Clone(path))
		}
	}
	// Start where no dominant edge leads in; a graph of cycles only has no
	// such node, so then start everywhere.
	var starts []int
	for s := range names {
		if fg.To(int64(s)).Len() == 0 {
			starts = append(starts, s)
		}
	}
	if len(starts) == 0 {
		for s := range names {
			starts = append(starts, s)
		}
	}
	for _, s := range starts {
		onPath := make([]bool, len(names))
		onPath[s] = true
		walk([]int{s}, onPath)
	}
	// Drop paths contained in longer ones.
	var chains []Chain
	for i, p := range paths {
		contained := false
		for j, q := range paths {
			if i != j && len(q) > len(p) && containsRun(q, p) {
				contained = true
				break
			}
		}
		if contained {
			continue
		}
		c := Chain{}
		for k, n := range p {
			c.Path = append(c.Path, names[n])
			if k > 0 {
				x, _ := fg.Weight(int64(p[k-1]), int64(n))
				c.Counts = append(c.Counts, int64(x))
			}
		}
		chains = append(chains, c)
	}
	slices.SortStableFunc(chains, func(a, b Chain) int {
		if c := cmp.Compare(len(b.Path), len(a.Path)); c != 0 {
			return c
		}
		return cmp.Compare(slices.Min(b.Counts), slices.Min(a.Counts))
	})
	if len(chains) > 10 {
		chains = chains[:10]
	}
	if chains == nil {
		chains = []Chain{}
	}
	return chains
}

// containsRun reports whether p occurs in q as a contiguous run.
func containsRun(q, p []int) bool {
	for i := 0; i+len(p) <= len(q); i++ {
		if slices.Equal(q[i:i+len(p)], p) {
			return true
		}
	}
	return false
}
