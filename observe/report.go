package observe

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"temper.codes/temper-train/internal/table"
)

// SummarizeFile opens a trace file and summarises it.
func SummarizeFile(path string) (*Summary, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return Summarize(r)
}

// ReportOptions say how much of a summary a report shows, and how it
// tells the reader to see more.
type ReportOptions struct {
	// Top is the number of threads listed, busiest first; 0 lists all.
	Top int
	// Wide also shows each thread's switch-outs, preemptions and CPUs
	// (-o wide); the default view fits a 120-column terminal.
	Wide bool
	// AllThreads says how the reader lists every thread when Top leaves
	// some out, in the caller's words (the command names its flag); empty
	// leaves it unsaid.
	AllThreads string
	// Filter says how a trace filtered to the traced tasks was recorded,
	// in the caller's words; empty leaves it unsaid.
	Filter string
}

// Report writes the summary for a terminal: the trace (named name), its
// span, events and losses, notes on what makes states uncertain, and the
// threads' time by state.
func (s *Summary) Report(w io.Writer, name string, opts ReportOptions) error {
	span := s.LastTS - s.FirstTS
	format := s.Info.Format
	if s.Info.Gzip {
		format += ", gzip"
	}
	kernel := s.Info.KernelRelease
	if kernel == "" {
		kernel = "not recorded"
	}
	fmt.Fprintf(w, "trace    %s (%s)\n", name, format)
	fmt.Fprintf(w, "kernel   %s; %d CPUs recorded events\n", kernel, s.CPUs)
	fmt.Fprintf(w, "span     %.3f s\n", float64(span)/1e9)
	var total int64
	kinds := make([]Kind, 0, len(s.Events))
	for k, n := range s.Events {
		total += n
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return s.Events[kinds[i]] > s.Events[kinds[j]] })
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, s.Events[k])
	}
	fmt.Fprintf(w, "events   %d (%s)\n", total, strings.Join(parts, ", "))
	lost, gaps := s.Read.TotalLost()
	switch {
	case lost == 0 && gaps == 0:
		fmt.Fprintln(w, "lost     none reported by the recorder")
	default:
		fmt.Fprintf(w, "lost     %d events, %d gaps of unknown size: states around them are uncertain\n", lost, gaps)
	}
	if s.Read.Cropped > 0 {
		fmt.Fprintf(w, "cropped  %d events before every CPU's data was complete\n", s.Read.Cropped)
	}
	fmt.Fprintf(w, "threads  %d in %d processes; %d spurious wakings ignored\n",
		len(s.Threads), s.Processes, s.Sched.SpuriousWakings)
	note := func(head, text string) {
		var b strings.Builder
		table.Wrap(&b, text, head, "         ", table.Width)
		io.WriteString(w, b.String())
	}
	if s.Info.Filtered {
		how := ""
		if opts.Filter != "" {
			how = " (" + opts.Filter + ")"
		}
		note("filtered ", "only the switches that involve the traced tasks were recorded"+how+": other tasks' states are incomplete")
	}
	if s.Read.NoCPUBundles > 0 {
		note("skipped  ", fmt.Sprintf("%d ftrace bundles (%d events) without a cpu field, as trace_processor skips them (ftrace_bundle_tokenizer_errors)", s.Read.NoCPUBundles, s.Read.NoCPUEvents))
	}
	switch m := s.Sched.MismatchedSwitch; {
	case m > 0 && s.Info.Filtered:
		note("note     ", fmt.Sprintf("%d switches out of a task the CPU was not known to run: the trace is filtered to some tasks; Running times of unfiltered tasks near them are uncertain", m))
	case m > 0:
		note("note     ", fmt.Sprintf("%d switches out of a task the CPU was not known to run: the kernel did not report some switches (some kernels drop some out of the idle task, or every one out of a few tasks; tracefs and perf show the same), or the recorder missed them; Running times near them are uncertain", m))
	}
	fmt.Fprintln(w)
	return ReportThreads(w, s.Threads, span, opts)
}

// ReportThreads writes the first opts.Top threads (all for 0) as a table of
// their time by state over span: by default the time in each state and the
// wakeups, with opts.Wide also the switch-out and preemption counts and the
// CPUs used.
func ReportThreads(w io.Writer, threads []ThreadSummary, span int64, opts ReportOptions) error {
	n := len(threads)
	if opts.Top > 0 && opts.Top < n {
		n = opts.Top
	}
	t := table.New(table.Column{Name: "TID"}, table.Column{Name: "TGID"}, table.Column{Name: "COMM", Left: true},
		table.Column{Name: "CPU%"}, table.Column{Name: "RUN ms"}, table.Column{Name: "R ms"}, table.Column{Name: "R+ ms"},
		table.Column{Name: "S ms"}, table.Column{Name: "D ms"}, table.Column{Name: "SWITCH-OUTS", Wide: true},
		table.Column{Name: "PREEMPTED", Wide: true}, table.Column{Name: "WAKEUPS"}, table.Column{Name: "CPUS", Wide: true})
	ms := func(ns int64) string { return fmt.Sprintf("%.1f", float64(ns)/1e6) }
	for _, th := range threads[:n] {
		cpu := 0.0
		if span > 0 {
			cpu = 100 * float64(th.Running) / float64(span)
		}
		tgid := "?"
		if th.Tgid != 0 {
			tgid = fmt.Sprint(th.Tgid)
		}
		t.Row(fmt.Sprint(th.Tid), tgid, th.Name, fmt.Sprintf("%.1f", cpu), ms(th.Running), ms(th.Runnable),
			ms(th.Preempted), ms(th.Sleeping), ms(th.DiskWait), fmt.Sprint(th.SwitchOuts),
			fmt.Sprint(th.Preemptions), fmt.Sprint(th.Wakeups), fmt.Sprint(th.CPUsUsed))
	}
	if err := t.Write(w, opts.Wide); err != nil {
		return err
	}
	if n < len(threads) {
		how := ""
		if opts.AllThreads != "" {
			how = "; " + opts.AllThreads + " lists all"
		}
		fmt.Fprintf(w, "(%d more threads%s)\n", len(threads)-n, how)
	}
	return nil
}

// SummaryJSON is the stable machine-readable form of a summary
// (schema_version 1): WriteJSON writes it, readers decode it.
type SummaryJSON struct {
	SchemaVersion int              `json:"schema_version"`
	Trace         string           `json:"trace"`
	Format        string           `json:"format"`
	Gzip          bool             `json:"gzip"`
	KernelRelease string           `json:"kernel_release,omitempty"`
	SpanNS        int64            `json:"span_ns"`
	Events        map[string]int64 `json:"events"`
	LostEvents    int64            `json:"lost_events"`
	LostGaps      int64            `json:"lost_gaps"`
	Cropped       int64            `json:"cropped_events"`
	Filtered      bool             `json:"filtered,omitempty"`
	NoCPUBundles  int64            `json:"bundles_without_cpu,omitempty"`
	Threads       []ThreadSummary  `json:"threads"`
}

// WriteJSON writes the summary of the trace named name as indented JSON
// (schema_version 1), with the first top threads (all for 0).
func (s *Summary) WriteJSON(w io.Writer, name string, top int) error {
	lost, gaps := s.Read.TotalLost()
	out := SummaryJSON{SchemaVersion: 1, Trace: name, Format: s.Info.Format, Gzip: s.Info.Gzip,
		KernelRelease: s.Info.KernelRelease, SpanNS: s.LastTS - s.FirstTS,
		Events: map[string]int64{}, LostEvents: lost, LostGaps: gaps, Cropped: s.Read.Cropped,
		Filtered: s.Info.Filtered, NoCPUBundles: s.Read.NoCPUBundles, Threads: s.Threads}
	for k, n := range s.Events {
		out.Events[k.String()] = n
	}
	if top > 0 && top < len(out.Threads) {
		out.Threads = out.Threads[:top]
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
