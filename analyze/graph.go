package analyze

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"gonum.org/v1/gonum/graph/simple"
	"temper.codes/temper-train/observe"
)

// Node kinds of the wake graph. Outside wakers are aggregated so the graph
// stays small whatever the machine ran besides the workload.
const (
	NodeThread = "thread" // a target thread
	// NodeHardIRQ: wakings in hard interrupt context — hrtimers expiring
	// (sleeps, timeouts) and device completions. Node id "hardirq".
	NodeHardIRQ = "hardirq"
	// NodeSoftIRQ: wakings in softirq context — network receive, timer-wheel
	// timeouts, block completions deferred there. Node id "softirq".
	NodeSoftIRQ = "softirq"
	// NodeInterrupt: wakings by the idle task outside interrupt context
	// (remote wakeups it processes for other CPUs): the waker is unknown.
	// Node id "interrupt".
	NodeInterrupt = "interrupt"
	NodeKernel    = "kernel"  // kernel threads (ksoftirqd, kworkers, ...)
	NodeProcess   = "process" // another process, by name
	NodeOthers    = "others"  // the remaining other processes
)

// maxProcessNodes bounds the "process <name>" nodes; the rest are merged.
const maxProcessNodes = 8

// WakeGraph is the waker→wakee graph of the target's threads, with outside
// wakers and wakees aggregated into a few nodes.
type WakeGraph struct {
	Nodes       []GraphNode `json:"nodes"`
	Edges       []GraphEdge `json:"edges"` // by count, descending
	Chains      []Chain     `json:"chains"`
	Hubs        []Hub       `json:"hubs"`
	Communities Communities `json:"communities"`
}

// GraphNode is a target thread or an aggregate of outside tasks.
type GraphNode struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Tid    int32  `json:"tid,omitempty"`
	Family string `json:"family,omitempty"`
}

// GraphEdge counts the wakings of To by From over the window.
type GraphEdge struct {
	From      string  `json:"from"`
	To        string  `json:"to"`
	Count     int64   `json:"count"`
	Rate      float64 `json:"rate_per_s"`
	ShareOfTo float64 `json:"share_of_wakee"` // of To's wakeups
}

// wakeGraph is the graph while it is built: node indexes, and edge counts.
type wakeGraph struct {
	nodes   []GraphNode
	index   map[string]int
	nodeOf  map[int]int // UTID → node, target threads only
	count   map[[2]int]int64
	countD  map[[2]int]int64 // of count, the wakings that ended a D wait
	edges   [][3]int64       // from, to, count; sorted
	in, out []int64          // per node totals
	inE     [][]int          // per node: indexes into edges that end there, in edge order
	outE    [][]int          // per node: indexes into edges that start there
}

// buildWakeGraph aggregates the collector's edges into the node graph.
// threads are the target threads in report order.
func buildWakeGraph(c *collector, p *procInfo, threads []Thread, in []bool) *wakeGraph {
	g := &wakeGraph{index: map[string]int{}, nodeOf: map[int]int{}, count: map[[2]int]int64{}, countD: map[[2]int]int64{}}
	for _, t := range threads {
		id := fmt.Sprintf("%s/%d", t.Comm, t.Tid)
		if _, dup := g.index[id]; dup {
			id = fmt.Sprintf("%s/%d#%d", t.Comm, t.Tid, t.utid)
		}
		g.index[id] = len(g.nodes)
		g.nodeOf[t.utid] = len(g.nodes)
		g.nodes = append(g.nodes, GraphNode{ID: id, Kind: NodeThread, Tid: t.Tid, Family: t.Family})
	}
	// Outside endpoints by name; process nodes beyond the busiest few merge.
	outside := func(u int, irq observe.IRQContext) string {
		switch {
		case irq == observe.IRQHard:
			return "hardirq"
		case irq == observe.IRQSoft:
			return "softirq"
		case u == 0:
			return "interrupt"
		case p.kernel[u]:
			return "kernel thread"
		}
		return "process " + p.pname[u]
	}
	// An endpoint is a target thread's node or an outside name.
	type end struct {
		node int // -1 for outside
		name string
	}
	type pending struct {
		from, to end
		n        int64
		fromD    bool
	}
	var raw []pending
	procTotal := map[string]int64{}
	for k, n := range c.edges {
		wr, we := int(k.waker), int(k.wakee)
		wrIn := k.irq == observe.IRQNone && wr < len(in) && in[wr]
		weIn := we < len(in) && in[we]
		if !wrIn && !weIn {
			continue
		}
		from, to := end{node: -1}, end{node: -1}
		if wrIn {
			from.node = g.nodeOf[wr]
		} else {
			from.name = outside(wr, k.irq)
		}
		if weIn {
			to.node = g.nodeOf[we]
		} else {
			to.name = outside(we, observe.IRQNone)
		}
		for _, e := range []end{from, to} {
			if strings.HasPrefix(e.name, "process ") {
				procTotal[e.name] += n
			}
		}
		raw = append(raw, pending{from, to, n, k.fromD})
	}
	procs := make([]string, 0, len(procTotal))
	for name := range procTotal {
		procs = append(procs, name)
	}
	slices.SortFunc(procs, func(a, b string) int {
		if c := cmp.Compare(procTotal[b], procTotal[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	keep := map[string]bool{}
	for i, name := range procs {
		keep[name] = i < maxProcessNodes
	}
	resolve := func(s string) string {
		if strings.HasPrefix(s, "process ") && !keep[s] {
			return "other processes"
		}
		return s
	}
	// Outside nodes in a fixed order: interrupts, kernel, processes by name, others.
	var outNames []string
	seen := map[string]bool{}
	for _, r := range raw {
		for _, e := range []end{r.from, r.to} {
			if e.node < 0 && !seen[resolve(e.name)] {
				seen[resolve(e.name)] = true
				outNames = append(outNames, resolve(e.name))
			}
		}
	}
	rank := func(s string) int {
		switch s {
		case "hardirq":
			return 0
		case "softirq":
			return 1
		case "interrupt":
			return 2
		case "kernel thread":
			return 3
		case "other processes":
			return 5
		}
		return 4
	}
	slices.SortFunc(outNames, func(a, b string) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	kinds := [...]string{NodeHardIRQ, NodeSoftIRQ, NodeInterrupt, NodeKernel, NodeProcess, NodeOthers}
	for _, s := range outNames {
		g.index[s] = len(g.nodes)
		g.nodes = append(g.nodes, GraphNode{ID: s, Kind: kinds[rank(s)]})
	}
	node := func(e end) int {
		if e.node >= 0 {
			return e.node
		}
		return g.index[resolve(e.name)]
	}
	for _, r := range raw {
		key := [2]int{node(r.from), node(r.to)}
		g.count[key] += r.n
		if r.fromD {
			g.countD[key] += r.n
		}
	}
	g.in = make([]int64, len(g.nodes))
	g.out = make([]int64, len(g.nodes))
	for k, n := range g.count {
		g.edges = append(g.edges, [3]int64{int64(k[0]), int64(k[1]), n})
		g.out[k[0]] += n
		g.in[k[1]] += n
	}
	slices.SortFunc(g.edges, func(a, b [3]int64) int {
		if c := cmp.Compare(b[2], a[2]); c != 0 {
			return c
		}
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return cmp.Compare(a[1], b[1])
	})
	g.inE = make([][]int, len(g.nodes))
	g.outE = make([][]int, len(g.nodes))
	for i, e := range g.edges {
		g.outE[e[0]] = append(g.outE[e[0]], i)
		g.inE[e[1]] = append(g.inE[e[1]], i)
	}
	return g
}

// directed returns the graph as a gonum weighted directed graph; node IDs
// are node indexes.
func (g *wakeGraph) directed() *simple.WeightedDirectedGraph {
	d := simple.NewWeightedDirectedGraph(0, 0)
	for i := range g.nodes {
		d.AddNode(simple.Node(int64(i)))
	}
	for _, e := range g.edges {
		if e[0] == e[1] {
			continue // simple graphs have no self-loops
		}
		d.SetWeightedEdge(simple.WeightedEdge{F: simple.Node(e[0]), T: simple.Node(e[1]), W: float64(e[2])})
	}
	return d
}

// export builds the JSON form: nodes, edges, chains, hubs and communities.
func (g *wakeGraph) export(window float64) WakeGraph {
	out := WakeGraph{Nodes: g.nodes, Edges: []GraphEdge{}}
	for _, e := range g.edges {
		out.Edges = append(out.Edges, GraphEdge{From: g.nodes[e[0]].ID, To: g.nodes[e[1]].ID, Count: e[2],
			Rate: round3(rate(e[2], window)), ShareOfTo: round3(float64(e[2]) / float64(max(g.in[e[1]], 1)))})
	}
	d := g.directed()
	out.Chains = g.chains(window)
	out.Hubs = g.hubs(d, window)
	out.Communities = g.communities()
	return out
}
