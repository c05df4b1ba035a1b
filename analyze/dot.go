package analyze

import (
	"fmt"
	"io"
	"math"
	"strings"

	"temper.codes/temper-train/internal/atomicfile"
)

// classColors fill thread nodes by their cluster's class.
var classColors = map[Class]string{
	ClassSyncCompute:     "#f4a582",
	ClassLatencyCritical: "#92c5de",
	ClassIOWakeChain:     "#b8e186",
	ClassSporadic:        "#e0e0e0",
}

// dotMinShare is the share of its wakee's wakeups an edge needs to be
// drawn. Real servers have dense webs of weak edges (MariaDB's connection
// threads hand a mutex to each other, ~1% of each one's wakeups per pair)
// that would bury the edges that carry the work; they are counted in the
// graph's caption and listed in the JSON.
const dotMinShare = 0.05

// WriteDOT writes the wake graph for Graphviz: target threads grouped in one
// box per cluster and filled by class, outside wakers aggregated as today's
// graph nodes (grey boxes), edges carrying at least 5% of their wakee's
// wakeups drawn with a width growing with the square root of their wake
// count and labelled with it (a pair waking each other both ways as one
// line with two heads, each count at its head). A caption names the trace
// and says what was left out.
func (a *Analysis) WriteDOT(w io.Writer) error {
	var b strings.Builder
	var maxCount, total, hiddenWakes int64
	hidden := 0
	for _, e := range a.Graph.Edges {
		maxCount = max(maxCount, e.Count)
		total += e.Count
		if e.ShareOfTo < dotMinShare {
			hidden++
			hiddenWakes += e.Count
		}
	}
	caption := fmt.Sprintf("wake graph of %s, %.3f s: %s",
		a.Trace.Path, float64(a.Trace.WindowNs)/1e9, plural(len(a.Graph.Edges)-hidden, "edge"))
	if hidden > 0 {
		caption += fmt.Sprintf("; %d more, each under %.0f%% of its wakee's wakeups (%.1f%% of all wakes), not drawn",
			hidden, 100*dotMinShare, 100*float64(hiddenWakes)/float64(total))
	}
	caption += "\nnumbers count wakes (of the node an arrowhead points into); widths grow with their square root"
	// newrank: dot 2.43 fails with "trouble in init_rank" on the MariaDB
	// trace's graph (edges across clusters both ways) without it.
	b.WriteString("digraph wakes {\n  rankdir=LR;\n  newrank=true;\n  nodesep=0.15;\n  ranksep=0.6;\n")
	fmt.Fprintf(&b, "  label=%s;\n  labelloc=t;\n  fontname=\"Helvetica\";\n  fontsize=12;\n", dotQuote(caption))
	b.WriteString("  node [style=filled, fontname=\"Helvetica\", fontsize=10, margin=\"0.08,0.03\"];\n  edge [fontname=\"Helvetica\", fontsize=9, arrowsize=0.6];\n")
	cluster := map[string]int{}
	for _, t := range a.Threads {
		cluster[fmt.Sprintf("%s/%d", t.Comm, t.Tid)] = t.Cluster
	}
	for _, c := range a.Clusters {
		var nodes []GraphNode
		for _, n := range a.Graph.Nodes {
			if n.Kind == NodeThread && cluster[n.ID] == c.ID {
				nodes = append(nodes, n)
			}
		}
		if len(nodes) == 0 {
			continue // threads with no wakes in either direction are not graph nodes
		}
		label := fmt.Sprintf("cluster %d: %s (%.2f)", c.ID, c.Class, c.Confidence)
		if n := len(c.Members) - len(nodes); n > 0 {
			label += fmt.Sprintf("\n+%s without wakes", plural(n, "thread"))
		}
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%s;\n    fontsize=10;\n    color=\"#808080\";\n", c.ID, dotQuote(label))
		for _, n := range nodes {
			fmt.Fprintf(&b, "    %s [label=%s, fillcolor=%s];\n", dotQuote(n.ID), dotQuote(threadLabel(n)), dotQuote(classColors[c.Class]))
		}
		b.WriteString("  }\n")
	}
	for _, n := range a.Graph.Nodes {
		if n.Kind == NodeThread {
			if _, ok := cluster[n.ID]; !ok {
				fmt.Fprintf(&b, "  %s [label=%s];\n", dotQuote(n.ID), dotQuote(threadLabel(n)))
			}
			continue
		}
		fmt.Fprintf(&b, "  %s [shape=box, fillcolor=\"#bababa\"];\n", dotQuote(n.ID))
	}
	// A pair that wakes each other both ways is one line with two arrowheads,
	// each count at the head of the wakes it counts: bundles of opposite
	// edges (a client and its server thread) are what made graphs unreadable.
	drawn := map[[2]string]int64{}
	for _, e := range a.Graph.Edges {
		if e.ShareOfTo >= dotMinShare {
			drawn[[2]string{e.From, e.To}] = e.Count
		}
	}
	for _, e := range a.Graph.Edges {
		if e.ShareOfTo < dotMinShare {
			continue
		}
		back, both := drawn[[2]string{e.To, e.From}]
		if both && (back > e.Count || back == e.Count && e.To < e.From) {
			continue // drawn with its reverse
		}
		width := 0.6 + 6*math.Sqrt(float64(e.Count)/float64(maxCount))
		if both {
			fmt.Fprintf(&b, "  %s -> %s [dir=both, headlabel=%s, taillabel=%s, labeldistance=2.2, penwidth=%.2f, weight=%d];\n",
				dotQuote(e.From), dotQuote(e.To), dotQuote(compactCount(e.Count)), dotQuote(compactCount(back)), width, 1+int(width))
			continue
		}
		fmt.Fprintf(&b, "  %s -> %s [label=%s, penwidth=%.2f, weight=%d];\n", dotQuote(e.From), dotQuote(e.To),
			dotQuote(compactCount(e.Count)), width, 1+int(width))
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// threadLabel names a thread node on two short lines, comm over tid, so
// the graph stays narrow.
func threadLabel(n GraphNode) string {
	if n.Tid == 0 {
		return n.ID
	}
	comm := strings.TrimSuffix(n.ID, fmt.Sprintf("/%d", n.Tid))
	return fmt.Sprintf("%s\n%d", comm, n.Tid)
}

// compactCount writes a wake count in at most five characters: 987, 4587,
// 33.8k.
func compactCount(n int64) string {
	switch {
	case n < 10_000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1fM", float64(n)/1e6)
}

// WriteDOTFile writes the DOT graph to path atomically.
func (a *Analysis) WriteDOTFile(path string) error {
	if err := atomicfile.Write(path, 0o644, a.WriteDOT); err != nil {
		return fmt.Errorf("wake graph %s: %w", path, err)
	}
	return nil
}

// dotQuote quotes s as a DOT string.
func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
