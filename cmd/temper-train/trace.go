package main

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/internal/bounded"
	"temper.codes/temper-train/internal/table"
	"temper.codes/temper-train/internal/tpcheck"
	"temper.codes/temper-train/observe"
)

func newTraceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Inspect and convert scheduling traces",
		Long: `Inspect and convert kernel scheduling traces: Perfetto protobuf traces (written by
temper-train observe or recorded by stock perfetto) and ftrace text from
/sys/kernel/tracing/trace, either optionally gzip-compressed.`,
	}
	cmd.AddCommand(newTraceSummaryCmd(), newTraceConvertCmd(), newTraceCheckCmd())
	return cmd
}

func newTraceSummaryCmd() *cobra.Command {
	var top int
	var asJSON, wide bool
	cmd := &cobra.Command{
		Use:   "summary TRACE",
		Short: "Summarise a trace: span, events, losses, and each thread's time by state",
		Long: `Summarise a trace: its span and event counts, lost events, and for each thread
the time it spent Running, waiting for a CPU (R after a wakeup, R+ after being
preempted), sleeping (S) and in uninterruptible wait (D), with its switch-out,
preemption and wakeup counts. States are reconstructed with the semantics of
Perfetto's trace_processor.`,
		Example: `  temper-train trace summary testdata/traces/workload-tracefs.txt.gz
  temper-train trace summary -o wide testdata/traces/workload-tracefs.txt.gz
  temper-train trace summary --top 0 --json trace.pftrace > summary.json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if top < 0 {
				return usageError{fmt.Errorf("--top must be ≥ 0, got %d", top)}
			}
			sum, err := summarizeFile(a[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeSummaryJSON(cmd.OutOrStdout(), a[0], sum, top)
			}
			return printSummary(cmd.OutOrStdout(), a[0], sum, top, wide)
		},
	}
	cmd.Flags().IntVar(&top, "top", 20, "threads to list, busiest first (0 = all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	addWideFlags(cmd, &wide)
	return cmd
}

func summarizeFile(path string) (*observe.Summary, error) {
	r, err := observe.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return observe.Summarize(r)
}

func ms(ns int64) string { return fmt.Sprintf("%.1f", float64(ns)/1e6) }

func printSummary(w io.Writer, path string, s *observe.Summary, top int, wide bool) error {
	span := s.LastTS - s.FirstTS
	format := s.Info.Format
	if s.Info.Gzip {
		format += ", gzip"
	}
	kernel := s.Info.KernelRelease
	if kernel == "" {
		kernel = "not recorded"
	}
	fmt.Fprintf(w, "trace    %s (%s)\n", path, format)
	fmt.Fprintf(w, "kernel   %s; %d CPUs recorded events\n", kernel, s.CPUs)
	fmt.Fprintf(w, "span     %.3f s\n", float64(span)/1e9)
	var total int64
	kinds := make([]observe.Kind, 0, len(s.Events))
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
		note("filtered ", "only the switches that involve the traced tasks were recorded (observe --filter-switches): other tasks' states are incomplete")
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
	return printThreadTable(w, s.Threads, span, top, wide)
}

// printThreadTable prints the first top threads (all for 0) with their time
// by state over span: by default the time in each state and the wakeups,
// with -o wide also the switch-out and preemption counts and the CPUs used.
func printThreadTable(w io.Writer, threads []observe.ThreadSummary, span int64, top int, wide bool) error {
	n := len(threads)
	if top > 0 && top < n {
		n = top
	}
	t := table.New(table.Column{Name: "TID"}, table.Column{Name: "TGID"}, table.Column{Name: "COMM", Left: true},
		table.Column{Name: "CPU%"}, table.Column{Name: "RUN ms"}, table.Column{Name: "R ms"}, table.Column{Name: "R+ ms"},
		table.Column{Name: "S ms"}, table.Column{Name: "D ms"}, table.Column{Name: "SWITCH-OUTS", Wide: true},
		table.Column{Name: "PREEMPTED", Wide: true}, table.Column{Name: "WAKEUPS"}, table.Column{Name: "CPUS", Wide: true})
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
	if err := t.Write(w, wide); err != nil {
		return err
	}
	if n < len(threads) {
		fmt.Fprintf(w, "(%d more threads; --top 0 lists all)\n", len(threads)-n)
	}
	return nil
}

// summaryJSON is the stable machine-readable form of a summary.
type summaryJSON struct {
	SchemaVersion int                     `json:"schema_version"`
	Trace         string                  `json:"trace"`
	Format        string                  `json:"format"`
	Gzip          bool                    `json:"gzip"`
	KernelRelease string                  `json:"kernel_release,omitempty"`
	SpanNS        int64                   `json:"span_ns"`
	Events        map[string]int64        `json:"events"`
	LostEvents    int64                   `json:"lost_events"`
	LostGaps      int64                   `json:"lost_gaps"`
	Cropped       int64                   `json:"cropped_events"`
	Filtered      bool                    `json:"filtered,omitempty"`
	NoCPUBundles  int64                   `json:"bundles_without_cpu,omitempty"`
	Threads       []observe.ThreadSummary `json:"threads"`
}

func writeSummaryJSON(w io.Writer, path string, s *observe.Summary, top int) error {
	lost, gaps := s.Read.TotalLost()
	out := summaryJSON{SchemaVersion: 1, Trace: path, Format: s.Info.Format, Gzip: s.Info.Gzip,
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

func newTraceCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check TRACE.pftrace",
		Short: "Check a Perfetto trace against trace_processor's import rules",
		Long: `Check a Perfetto trace (optionally gzipped) against the rules under which
trace_processor's ftrace importer drops data or counts errors: every ftrace bundle
has a cpu, every event a timestamp, every packet a sequence id and every process a
cmdline; compact_sched columns agree; each CPU's switches chain (a switch's
outgoing task is the CPU's last incoming one). Switch-outs the kernel never
reports (out of the idle task, or out of a few tasks it never reports) are counted
apart, and a trace that says it is filtered may have mismatched switches. The
bytes are read with protowire, not with temper-train's own reader. Exits 1 when a
rule is broken.`,
		Example: `  temper-train trace check observe-out/trace.pftrace`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			data, err := bounded.ReadFile(a[0], tpcheck.MaxTraceBytes)
			if err != nil {
				return err
			}
			rep, err := tpcheck.Check(data)
			if err != nil {
				return fmt.Errorf("%s: %w", a[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", a[0], rep)
			if err := rep.Err(); err != nil {
				return fmt.Errorf("%s: trace_processor would drop or flag data: %w", a[0], err)
			}
			return nil
		},
	}
}

func newTraceConvertCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "convert IN OUT",
		Short: "Convert a trace (ftrace text or Perfetto) to a Perfetto trace",
		Long: `Convert a trace to Perfetto's protobuf format, which opens in ui.perfetto.dev and
trace_processor. IN may be ftrace text or a Perfetto trace, optionally gzipped;
OUT is gzip-compressed when its name ends in .gz. OUT is written whole or not
at all.`,
		Example: `  cat /sys/kernel/tracing/trace > sched.txt
  temper-train trace convert sched.txt sched.pftrace`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return convert(cmd.ErrOrStderr(), a[0], a[1])
		},
	}
	return cmd
}

func convert(status io.Writer, in, out string) error {
	r, err := observe.Open(in)
	if err != nil {
		return err
	}
	defer r.Close()
	start := time.Now()
	var n int64
	err = atomicfile.Write(out, 0o644, func(f io.Writer) error {
		var zw *gzip.Writer
		if strings.HasSuffix(out, ".gz") {
			zw = gzip.NewWriter(f)
			f = zw
		}
		// The reader learns the kernel release from the trace itself, which
		// for a Perfetto input comes before its events.
		var w *observe.PerfettoWriter
		err := observe.ForEach(r, func(ev *observe.Event) error {
			if w == nil {
				w = observe.NewPerfettoWriter(f, r.Info())
			}
			if err := w.Write(ev); err != nil {
				return fmt.Errorf("%s: %w", out, err)
			}
			n++
			return nil
		})
		if err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
		if zw != nil {
			return zw.Close()
		}
		return nil
	})
	if err != nil {
		return err
	}
	st, _ := os.Stat(out)
	fmt.Fprintf(status, "wrote %d events to %s (%d bytes, %.1f bytes/event) in %s\n",
		n, out, st.Size(), float64(st.Size())/float64(max(n, 1)), time.Since(start).Round(time.Millisecond))
	return nil
}
