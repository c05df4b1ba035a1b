package analyze

import (
	"cmp"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/graph/community"
)

// communitySeed seeds Louvain's random node order: fixed, so the result is
// reproducible.
const communitySeed = 0x7e3a9e5

// Communities are groups of target threads that wake each other more than
// chance would have it: Louvain modularity on the undirected projection of
// the thread-to-thread edges, with a fixed random seed.
type Communities struct {
	Modularity float64   `json:"modularity"`
	Groups     [][]int32 `json:"groups"`     // tids, groups of two or more
	Singletons int       `json:"singletons"` // threads in no group
}

// communities runs Louvain on the undirected projection of thread-to-thread
// wakes. The projection iterates nodes and neighbours in ID order and the
// random source has a fixed seed, so the result is the same on every run.
func (g *wakeGraph) communities() Communities {
	var ids []int
	for i, n := range g.nodes {
		if n.Kind == NodeThread {
			ids = append(ids, i)
		}
	}
	u := newOrderedUndirected(len(g.nodes))
	for _, i := range ids {
		u.addNode(int64(i))
	}
	for _, e := range g.edges {
		a, b := int(e[0]), int(e[1])
		if a == b || g.nodes[a].Kind != NodeThread || g.nodes[b].Kind != NodeThread {
			continue
		}
		u.addWeight(int64(a), int64(b), float64(e[2]))
	}
	res := Communities{Groups: [][]int32{}}
	if len(ids) == 0 || u.totalWeight() == 0 {
		res.Singletons = len(ids)
		return res
	}
	reduced := community.Modularize(u, 1, rand.NewPCG(communitySeed, 1))
	groups := reduced.Communities()
	res.Modularity = round3(community.Q(u, groups, 1))
	for _, grp := range groups {
		if len(grp) < 2 {
			res.Singletons += len(grp)
			continue
		}
		var tids []int32
		for _, n := range grp {
			tids = append(tids, g.nodes[n.ID()].Tid)
		}
		slices.Sort(tids)
		res.Groups = append(res.Groups, tids)
	}
	slices.SortFunc(res.Groups, func(a, b []int32) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return cmp.Compare(a[0], b[0])
	})
	return res
}
