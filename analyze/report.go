package analyze

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// Report writes the terminal report: what was analysed, the clusters with
// their class and the numbers behind it, every thread, the top wake edges,
// chains, hubs, communities, lint findings and caveats. Every figure comes
// with the number of samples it rests on.
func (a *Analysis) Report(w io.Writer, topEdges int) error {
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
	tab := newTable(w)
	tab.Header("CLUSTER", "CLASS", "CONF", "THREADS", "FAMILIES", "CPU%", "RUN p50/p90 (n)", "TIME-W RUN p50", "WAKES/s (n)", "D%", "SRC/CHAIN/IO/HARDIRQ")
	for _, c := range a.Clusters {
		fams := make([]string, len(c.Families))
		for i, f := range c.Families {
			fams[i] = fmt.Sprintf("%s×%d", f.Family, f.Count)
		}
		e := c.Evidence
		if err := tab.Append(fmt.Sprint(c.ID), c.Class, fmt.Sprintf("%.2f", c.Confidence), fmt.Sprint(len(c.Members)),
			strings.Join(fams, " "), pct(c.CPUShare), runP50P90(a, c), fmtDur(e.RunTimeP50),
			fmt.Sprintf("%.1f (%d)", e.WakeRate, e.Wakeups), pct(e.DiskShare), fmt.Sprintf("%.2f/%.2f/%.2f/%.2f", e.Source, e.Chain, e.IOWake, e.HardIRQ)); err != nil {
			return err
		}
	}
	if err := tab.Render(); err != nil {
		return err
	}
	for _, c := range a.Clusters {
		fmt.Fprintf(w, "  %d %s: %s; scores sync %.2f / latency %.2f / chain %.2f / sporadic %.2f\n", c.ID, c.Class, c.Reason,
			c.Scores.SyncCompute, c.Scores.LatencyCritical, c.Scores.IOWakeChain, c.Scores.Sporadic)
	}
	fmt.Fprintln(w)

	shown := reportThreads(a.Threads, maxReportThreads)
	if len(shown) < len(a.Threads) {
		fmt.Fprintf(w, "THREADS (the %d busiest of %d; all are in --json)\n", len(shown), len(a.Threads))
	} else {
		fmt.Fprintln(w, "THREADS")
	}
	tab = newTable(w)
	tab.Header("TID", "COMM", "FAMILY", "CL", "CLASS", "CPU%", "RUNS", "RUN p50", "p90", "p99", "WAKES", "/s",
		"WAKE LAT p50/p90 (n)", "PREEMPT/S/D %", "MIGR", "CPUS", "LATCRIT", "TOP WAKER")
	for _, th := range shown {
		f := th.Features
		waker := "-"
		if len(th.WokenBy) > 0 {
			waker = fmt.Sprintf("%s %.0f%%", th.WokenBy[0].Node, 100*th.WokenBy[0].Share)
		}
		class := th.Class
		if th.OwnClass != th.Class {
			class += " (own: " + th.OwnClass + ")"
		}
		if err := tab.Append(fmt.Sprint(th.Tid), th.Comm, th.Family, fmt.Sprint(th.Cluster), class, pct(f.CPUShare),
			fmt.Sprint(f.Run.N), durOrDash(f.Run.P50, f.Run.N), durOrDash(f.Run.P90, f.Run.N), durOrDash(f.Run.P99, f.Run.N),
			fmt.Sprint(f.Wakeups), fmt.Sprintf("%.1f", f.WakeRate),
			fmt.Sprintf("%s/%s (%d)", durOrDash(f.WakeLatency.P50, f.WakeLatency.N), durOrDash(f.WakeLatency.P90, f.WakeLatency.N), f.WakeLatency.N),
			fmt.Sprintf("%.0f/%.0f/%.0f of %d", 100*f.PreemptShare, 100*f.SleepShare, 100*f.DiskShare, f.SwitchOuts),
			fmt.Sprint(f.Migrations), fmt.Sprint(len(f.CPUs)), fmt.Sprintf("%.0f", th.LatCrit.Normalised), waker); err != nil {
			return err
		}
	}
	if err := tab.Render(); err != nil {
		return err
	}
	fmt.Fprintln(w)

	edges := a.Graph.Edges
	if topEdges > 0 && len(edges) > topEdges {
		edges = edges[:topEdges]
	}
	fmt.Fprintf(w, "WAKE EDGES (top %d of %d)\n", len(edges), len(a.Graph.Edges))
	tab = newTable(w)
	tab.Header("WAKER", "WAKEE", "WAKES", "/s", "SHARE OF WAKEE")
	for _, e := range edges {
		if err := tab.Append(e.From, e.To, fmt.Sprint(e.Count), fmt.Sprintf("%.1f", e.Rate), pct(e.ShareOfTo)); err != nil {
			return err
		}
	}
	if err := tab.Render(); err != nil {
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
		fmt.Fprintf(w, "  %s\n", b.String())
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
		fmt.Fprintf(w, "  %d: %s\n", i+1, strings.Join(s, ", "))
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "LINT")
	fmt.Fprintf(w, "  SMT stacking: %s\n", a.Lint.SMT.Status)
	for _, p := range a.Lint.SMT.Pairs {
		fmt.Fprintf(w, "    %s + %s: %s on one core, %s of it with another core idle (%.0f%% of the less busy one's run time)\n",
			p.Threads[0], p.Threads[1], fmtDur(p.TogetherNs), fmtDur(p.WithIdleCore), 100*p.Share)
	}
	for _, f := range a.Lint.SMT.Findings {
		fmt.Fprintf(w, "    FINDING: %s\n", f)
	}
	fmt.Fprintf(w, "  CFS bandwidth: %s\n", a.Lint.CFS.Status)
	for _, f := range a.Lint.CFS.Findings {
		fmt.Fprintf(w, "    FINDING: %s\n", f)
	}
	if len(a.Notes) > 0 {
		fmt.Fprintln(w, "\nNOTES")
		for _, n := range a.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
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

// newTable returns a table in the CLI's style.
func newTable(w io.Writer) *tablewriter.Table {
	return tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAlignment(tw.AlignRight))
}

func pct(x float64) string { return fmt.Sprintf("%.1f", 100*x) }

func durOrDash(ns, n int64) string {
	if n == 0 {
		return "-"
	}
	return fmtDur(ns)
}

// runP50P90 shows the members' median run p50 and p90 with the run count.
func runP50P90(a *Analysis, c Cluster) string {
	var p50, p90 []float64
	for _, t := range a.Threads {
		if t.Cluster == c.ID && t.Features.Run.N > 0 {
			p50 = append(p50, float64(t.Features.Run.P50))
			p90 = append(p90, float64(t.Features.Run.P90))
		}
	}
	if len(p50) == 0 {
		return "- (0)"
	}
	return fmt.Sprintf("%s/%s (%d)", fmtDur(int64(median(p50))), fmtDur(int64(median(p90))), c.Evidence.Runs)
}
