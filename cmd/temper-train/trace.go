package main

import (
	"fmt"

	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/internal/bounded"
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
			sum, err := observe.SummarizeFile(a[0])
			if err != nil {
				return err
			}
			if asJSON {
				return sum.WriteJSON(cmd.OutOrStdout(), a[0], top)
			}
			return sum.Report(cmd.OutOrStdout(), a[0], observe.ReportOptions{Top: top, Wide: wide,
				AllThreads: "--top 0", Filter: "observe --filter-switches"})
		},
	}
	cmd.Flags().IntVar(&top, "top", 20, "threads to list, busiest first (0 = all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	addWideFlags(cmd, &wide)
	return cmd
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
			start := time.Now()
			c, err := observe.Convert(a[0], a[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d events to %s (%d bytes, %.1f bytes/event) in %s\n", c.Events, a[1],
				c.Bytes, float64(c.Bytes)/float64(max(c.Events, 1)), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	return cmd
}
