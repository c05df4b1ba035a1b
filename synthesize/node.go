package synthesize

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"temper.codes/temper-train/analyze"
)

// Exclusive cores are given only where the node keeps room for everything
// else (docs/synthesize.md, "Doing no harm"):
//
//   - MinSharedCores physical cores and MinSharedCPUs logical CPUs stay
//     shared: with one shared CPU every other thread of the node — the
//     pod's own housekeeping, other pods, kubelet, the load generator when
//     it runs beside the server — queues on it, and a single runnable
//     spinner doubles everyone's wait there;
//   - the rest of the node's measured demand (node-wide CPU use less what
//     the exclusive groups' threads used) fits in MaxSharedLoad of the
//     shared CPUs: at a utilisation ρ a CPU's expected queueing wait grows
//     as ρ/(1−ρ) of a run (2.3 runs at 0.7, 9 at 0.9), so above 0.7 the
//     threads left behind pay more than the caged ones gain.
const (
	MinSharedCores = 2
	MinSharedCPUs  = 2
	MaxSharedLoad  = 0.7
)

// nodeDemand is the node-wide CPU use while the trace was taken, in CPUs,
// and where it came from.
type nodeDemand struct {
	busy   float64
	known  bool
	source string
}

// chooseNodeDemand takes Options.NodeBusyCPUs, else the snapshot's
// node_cpu counters (/proc/stat at both ends of the trace). Without either
// the demand is unknown, and exclusive cores are not given: nothing shows
// that the node has room for them.
func chooseNodeDemand(opt Options, shape shapeChoice) nodeDemand {
	if opt.NodeBusyCPUs > 0 {
		return nodeDemand{busy: opt.NodeBusyCPUs, known: true, source: "given by the caller"}
	}
	if opt.Snapshot == nil {
		return nodeDemand{source: "not measured: no snapshot (observe records node-wide CPU use in snapshot.json)"}
	}
	logical := shape.shape.LogicalCPUs
	if logical == 0 {
		logical = opt.Snapshot.Host.NumCPU
	}
	if b, ok := opt.Snapshot.NodeCPU.BusyCPUs(logical); ok {
		return nodeDemand{busy: b, known: true, source: fmt.Sprintf("the snapshot's node_cpu (/proc/stat at both ends, %d logical CPUs)", logical)}
	}
	return nodeDemand{source: "not measured: the snapshot has no node_cpu (observe with this version records it)"}
}

// A load generator on the node is a process outside the target from which
// a group gets more than ClientShare of its wakeups, over at least
// minClientWakeups wakeups (below that the share says little: at 100 its
// standard error is at most 5 points). analyze counts a waking in softirq
// context as the process it interrupted, which over loopback is the sender
// (Thread.ProcessWakers).
//
// Favouring the server's threads on such a node takes CPU from the client
// that feeds them: a latency group's lower nice or a reserved core is paid
// by the load generator, and the benchmark then measures less load, not a
// faster server. So where one is found no group is favoured (no latency or
// exclusive treatment) and no cpuset changes.
const (
	ClientShare      = 0.5
	minClientWakeups = 100
)

// loadGenerator is one group's finding.
type loadGenerator struct {
	group, process string
	count, wakeups int64
}

func (l loadGenerator) String() string {
	return fmt.Sprintf("load generator on the node: group %s gets %s of its wakeups (%d of %d) from process %s, which is outside the target (softirq wakings counted as the process they interrupted); so no group is favoured over it (no latency or exclusive treatment) and no cpuset changes",
		l.group, percent(float64(l.count)/float64(l.wakeups)), l.count, l.wakeups, display(l.process))
}

// loadGenerators finds the groups driven by a process outside the target,
// in group order.
func loadGenerators(groups []*group, ms []member) []loadGenerator {
	var out []loadGenerator
	for _, g := range groups {
		var wakeups int64
		by := map[string]int64{}
		for _, i := range g.members {
			th := ms[i].th
			wakeups += th.Features.Wakeups
			for _, p := range th.ProcessWakers {
				by[strings.TrimPrefix(p.Node, "process ")] += p.Count
			}
		}
		if wakeups < minClientWakeups {
			continue
		}
		names := make([]string, 0, len(by))
		for n := range by {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int {
			if c := cmp.Compare(by[b], by[a]); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		if len(names) > 0 && float64(by[names[0]]) > ClientShare*float64(wakeups) {
			out = append(out, loadGenerator{group: g.name, process: names[0], count: by[names[0]], wakeups: wakeups})
		}
	}
	return out
}

// percent writes a share as a whole percentage, "<1%" for a small nonzero
// one.
func percent(x float64) string {
	if x > 0 && x < 0.005 {
		return "<1%"
	}
	return trimFloat(100*x, 0) + "%"
}

// wakeTargets maps each analysed thread's wake-graph node to its tid, so
// that edges can be followed between groups.
func wakeTargets(a *analyze.Analysis) map[string]int32 {
	m := map[string]int32{}
	for _, n := range a.Graph.Nodes {
		if n.Kind == analyze.NodeThread {
			m[n.ID] = n.Tid
		}
	}
	return m
}
