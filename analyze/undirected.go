package analyze

import (
	"slices"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/iterator"
	"gonum.org/v1/gonum/graph/simple"
)

// orderedUndirected is a weighted undirected graph whose Nodes and From
// iterate in ID order. gonum's simple graphs iterate maps, and Louvain's
// result depends on the order it meets nodes and edges in; this type makes
// community detection reproducible.
type orderedUndirected struct {
	ids []int64                     // sorted
	adj map[int64]map[int64]float64 // symmetric weights
	nbr map[int64][]int64           // sorted neighbours, built lazily
}

var _ graph.WeightedUndirected = (*orderedUndirected)(nil)

func newOrderedUndirected(sizeHint int) *orderedUndirected {
	return &orderedUndirected{adj: make(map[int64]map[int64]float64, sizeHint)}
}

func (g *orderedUndirected) addNode(id int64) {
	if _, ok := g.adj[id]; ok {
		return
	}
	g.adj[id] = map[int64]float64{}
	i, _ := slices.BinarySearch(g.ids, id)
	g.ids = slices.Insert(g.ids, i, id)
	g.nbr = nil
}

// addWeight adds w to the edge between a and b (a ≠ b), creating both nodes.
func (g *orderedUndirected) addWeight(a, b int64, w float64) {
	g.addNode(a)
	g.addNode(b)
	g.adj[a][b] += w
	g.adj[b][a] += w
	g.nbr = nil
}

func (g *orderedUndirected) totalWeight() float64 {
	var t float64
	for _, a := range g.ids {
		for _, b := range g.neighbours(a) {
			if a < b {
				t += g.adj[a][b]
			}
		}
	}
	return t
}

// neighbours returns id's neighbours in ID order (cached until the next change).
func (g *orderedUndirected) neighbours(id int64) []int64 {
	if g.nbr == nil {
		g.nbr = make(map[int64][]int64, len(g.ids))
		for _, a := range g.ids {
			var n []int64
			for b := range g.adj[a] {
				n = append(n, b)
			}
			slices.Sort(n)
			g.nbr[a] = n
		}
	}
	return g.nbr[id]
}

func (g *orderedUndirected) nodes(ids []int64) graph.Nodes {
	if len(ids) == 0 {
		return graph.Empty
	}
	ns := make([]graph.Node, len(ids))
	for i, id := range ids {
		ns[i] = simple.Node(id)
	}
	return iterator.NewOrderedNodes(ns)
}

// Node returns the node with the given ID, or nil.
func (g *orderedUndirected) Node(id int64) graph.Node {
	if _, ok := g.adj[id]; !ok {
		return nil
	}
	return simple.Node(id)
}

// Nodes returns all nodes in ID order.
func (g *orderedUndirected) Nodes() graph.Nodes { return g.nodes(g.ids) }

// From returns the neighbours of id in ID order.
func (g *orderedUndirected) From(id int64) graph.Nodes { return g.nodes(g.neighbours(id)) }

// HasEdgeBetween reports whether x and y are joined.
func (g *orderedUndirected) HasEdgeBetween(x, y int64) bool {
	_, ok := g.adj[x][y]
	return ok
}

// Edge returns the edge between u and v, or nil.
func (g *orderedUndirected) Edge(u, v int64) graph.Edge { return g.WeightedEdge(u, v) }

// EdgeBetween returns the edge between x and y, or nil.
func (g *orderedUndirected) EdgeBetween(x, y int64) graph.Edge { return g.WeightedEdge(x, y) }

// WeightedEdgeBetween returns the weighted edge between x and y, or nil.
func (g *orderedUndirected) WeightedEdgeBetween(x, y int64) graph.WeightedEdge {
	return g.WeightedEdge(x, y)
}

// WeightedEdge returns the weighted edge between u and v, or nil.
func (g *orderedUndirected) WeightedEdge(u, v int64) graph.WeightedEdge {
	w, ok := g.adj[u][v]
	if !ok {
		return nil
	}
	return simple.WeightedEdge{F: simple.Node(u), T: simple.Node(v), W: w}
}

// Weight returns the weight between x and y: 0 and true for x == y (no
// self-loops), false when they are not joined.
func (g *orderedUndirected) Weight(x, y int64) (float64, bool) {
	if x == y {
		if _, ok := g.adj[x]; ok {
			return 0, true
		}
		return 0, false
	}
	w, ok := g.adj[x][y]
	return w, ok
}
