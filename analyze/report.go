package analyze

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"temper.codes/temper-train/internal/table"
)

// ReportOptions say how much the terminal report shows.
type ReportOptions struct {
	// Edges is the number of wake edges listed; 0 lists all.
	Edges int
	// Wide shows every column of the tables (-o wide); the default view
	// fits a 120-column terminal with the columns a person decides by.
	Wide bool
	// AllThreads says where the reader finds every thread when the report
	// lists only the busiest, in the caller's words (the command names
	// its JSON flag); empty leaves it unsaid.
	AllThreads string
	// GiveSnapshot says how the reader gives the analysis a snapshot, in
	// the caller's words, after the lint checks that need one
	// (StatusNoTopology, StatusNoSnapshot); empty leaves it unsaid.
	GiveSnapshot string
}

// Report writes the terminal report: what was analysed, the clusters with
// their class and the numbers behind it, the threads, the top wake edges,
// chains, hubs, communities, lint findings and caveats. Every figure comes
// with the number of samples it rests on (in the wide view where the
// default has no room for it).
func (a *Analysis) Report(w io.Writer, opts ReportOptions) error {
	t := a.Trace
	format := t.Format
	if t.Gzip {
		format += ", gzip"
	}
	kernel := t.KernelRelease
	if kernel == "" {
		kernel = "kernel not recorded"
	}
	fmt.Fprintf(w, "trace    %s (%s; %s; %d CPUs with events)\n", t.Path, format, kernel, t.CPUsSeen)
	fmt.Fprintf(w, "window   %.3f s, %d events, %d threads seen\n", float64(t.WindowNs)/1e9, t.Events, t.ThreadsSeen)
	if t.LostEvents == 0 && t.LostGaps == 0 {
		fmt.Fprintln(w, "lost     none reported by the recorder")
	} else {
		fmt.Fprintf(w, "lost     %d events, %d gaps of unknown size\n", t.LostEvents, t.LostGaps)
	}
	fmt.Fprintf(w, "target   %s\n\n", a.Target.Description)

	fmt.Fprintln(w, "CLUSTERS (class from the members' mean scores; evidence = member medians)")
	if err := clusterTable(a).Write(w, opts.Wide); err != nil {
		return err
	}
	fmt.Fprintln(w)

	shown := reportThreads(a.Threads, maxReportThreads)
	if len(shown) < len(a.Threads) {
		if opts.AllThreads != "" {
			fmt.Fprintf(w, "THREADS (the %d busiest of %d; all are in %s)\n", len(shown), len(a.Threads), opts.AllThreads)
		} else {
			fmt.Fprintf(w, "THREADS (the %d busiest of %d)\n", len(shown), len(a.Threads))
		}
	} else {
		fmt.Fprintln(w, "THREADS")
	}
	if err := threadTable(shown).Write(w, opts.Wide); err != nil {
		return err
	}
	fmt.Fprintln(w)

	edges := a.Graph.Edges
	if opts.Edges > 0 && len(edges) > opts.Edges {
		edges = edges[:opts.Edges]
	}
	fmt.Fprintf(w, "WAKE EDGES (top %d of %d)\n", len(edges), len(a.Graph.Edges))
	tab := table.New(table.Column{Name: "WAKER", Left: true}, table.Column{Name: "WAKEE", Left: true},
		table.Column{Name: "WAKES"}, table.Column{Name: "WAKES/s"}, table.Column{Name: "% OF WAKEE"})
	for _, e := range edges {
		tab.Row(e.From, e.To, fmt.Sprint(e.Count), fmt.Sprintf("%.1f", e.Rate), pct(e.ShareOfTo))
	}
	if err := tab.Write(w, opts.Wide); err != nil {
		return err
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "CHAINS (family level; each edge ≥ %.0f%% of its wakee's wakeups and ≥ %.0f/s)\n", 100*chainMinShare, chainMinRate)
	if len(a.Graph.Chains) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, c := range a.Graph.Chains {
		var b strings.Builder
		for i, n := range c.Path {
			if i > 0 {
				fmt.Fprintf(&b, " —%d→ ", c.Counts[i-1])
			}
			b.WriteString(n)
		}
		wrap(w, b.String())
	}
	fmt.Fprintf(w, "HUBS (≥ %d distinct partners at ≥ %.0f/s each)\n", hubMinDegree, hubMinRate)
	if len(a.Graph.Hubs) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, h := range a.Graph.Hubs {
		fmt.Fprintf(w, "  %s: wakes %s (%d wakes), woken by %s (%d wakes)\n", h.Node, plural(h.FanOut, "node"), h.Out, plural(h.FanIn, "node"), h.In)
	}
	cm := a.Graph.Communities
	fmt.Fprintf(w, "COMMUNITIES (Louvain on thread-to-thread wakes, modularity %.3f; %d threads in none)\n", cm.Modularity, cm.Singletons)
	if len(cm.Groups) == 0 {
		fmt.Fprintln(w, "  none")
	}
	names := map[int32]string{}
	for _, th := range a.Threads {
		names[th.Tid] = th.Comm
	}
	for i, grp := range cm.Groups {
		s := make([]string, len(grp))
		for j, tid := range grp {
			s[j] = fmt.Sprintf("%s/%d", names[tid], tid)
		}
		wrap(w, fmt.Sprintf("%d: %s", i+1, strings.Join(s, ", ")))
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "LINT")
	wrap(w, "SMT stacking: "+withHint(a.Lint.SMT.Status, StatusNoTopology, opts.GiveSnapshot))
	for _, p := range a.Lint.SMT.Pairs {
		wrapIn(w, "    ", fmt.Sprintf("%s + %s: %s on one core, %s of it with another core idle (%.0f%% of the less busy one's run time)",
			p.Threads[0], p.Threads[1], fmtDur(p.TogetherNs), fmtDur(p.WithIdleCore), 100*p.Share))
	}
	for _, f := range a.Lint.SMT.Findings {
		wrapIn(w, "    ", "FINDING: "+f)
	}
	wrap(w, "CFS bandwidth: "+withHint(a.Lint.CFS.Status, StatusNoSnapshot, opts.GiveSnapshot))
	for _, f := range a.Lint.CFS.Findings {
		wrapIn(w, "    ", "FINDING: "+f)
	}
	if len(a.Notes) > 0 {
		fmt.Fprintln(w, "\nNOTES")
		for _, n := range a.Notes {
			wrapIn(w, "  ", "- "+n)
		}
	}
	return nil
}

// maxReportThreads bounds the THREADS table; the JSON has every thread.
const maxReportThreads = 60

// reportThreads returns at most limit threads, the busiest, in their report
// order (family, tid).
func reportThreads(threads []Thread, limit int) []Thread {
	if len(threads) <= limit {
		return threads
	}
	idx := make([]int, len(threads))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int {
		return cmp.Compare(threads[y].Features.RunNs, threads[x].Features.RunNs)
	})
	idx = idx[:limit]
	slices.Sort(idx)
	out := make([]Thread, len(idx))
	for i, j := range idx {
		out[i] = threads[j]
	}
	return out
}

// wrap writes a line of the report indented by two spaces, wrapped at
// table.Width with its continuation lines indented further.
func wrap(w io.Writer, text string) { wrapIn(w, "  ", text) }

// wrapIn writes text indented by indent, wrapped at table.Width.
func wrapIn(w io.Writer, indent, text string) {
	var b strings.Builder
	table.Wrap(&b, text, indent, indent+"    ", table.Width)
	io.WriteString(w, b.String())
}

func pct(x float64) string { return fmt.Sprintf("%.1f", 100*x) }

func durOrDash(ns, n int64) string {
	if n == 0 {
		return "-"
	}
	return fmtDur(ns)
}

// withHint appends hint in parentheses to status when status is want.
func withHint(status, want, hint string) string {
	if status != want || hint == "" {
		return status
	}
	return status + " (" + hint + ")"
}
