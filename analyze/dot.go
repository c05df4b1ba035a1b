package analyze

import (
	"fmt"
	"io"
	"math"
	"strings"

	"temper.codes/temper-train/internal/atomicfile"
)

// classColors fill thread nodes by their cluster's class.
var classColors = map[string]string{
	ClassSyncCompute:     "#f4a582",
	ClassLatencyCritical: "#92c5de",
	ClassIOWakeChain:     "#b8e186",
	ClassSporadic:        "#e0e0e0",
}

// WriteDOT writes the wake graph for Graphviz: target threads grouped in one
// subgraph per cluster and filled by class, outside aggregates as grey
// boxes, edges labelled with their wake count and drawn thicker the more
// wakes they carry.
func (a *Analysis) WriteDOT(w io.Writer) error {
	var b strings.Builder
	b.WriteString("digraph wakes {\n  rankdir=LR;\n  node [style=filled, fontname=\"Helvetica\"];\n  edge [fontname=\"Helvetica\", fontsize=9];\n")
	cluster := map[string]int{}
	class := map[int]string{}
	for _, c := range a.Clusters {
		class[c.ID] = c.Class
	}
	for _, t := range a.Threads {
		cluster[fmt.Sprintf("%s/%d", t.Comm, t.Tid)] = t.Cluster
	}
	for _, c := range a.Clusters {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%s;\n", c.ID, dotQuote(fmt.Sprintf("cluster %d: %s (%.2f)", c.ID, c.Class, c.Confidence)))
		for _, n := range a.Graph.Nodes {
			if n.Kind == NodeThread && cluster[n.ID] == c.ID {
				fmt.Fprintf(&b, "    %s [fillcolor=%s];\n", dotQuote(n.ID), dotQuote(classColors[c.Class]))
			}
		}
		b.WriteString("  }\n")
	}
	for _, n := range a.Graph.Nodes {
		if n.Kind == NodeThread {
			if _, ok := cluster[n.ID]; !ok {
				fmt.Fprintf(&b, "  %s;\n", dotQuote(n.ID))
			}
			continue
		}
		fmt.Fprintf(&b, "  %s [shape=box, fillcolor=\"#bababa\"];\n", dotQuote(n.ID))
	}
	for _, e := range a.Graph.Edges {
		width := 1 + math.Log10(float64(e.Count))
		fmt.Fprintf(&b, "  %s -> %s [label=\"%d\", penwidth=%.2f];\n", dotQuote(e.From), dotQuote(e.To), e.Count, width)
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
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
