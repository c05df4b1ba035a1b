package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/pipeline"
)

// analyzeFlags are the analyze command's options.
type analyzeFlags struct {
	snapshot string
	pids     string
	process  string
	json     string
	dot      string
	plot     string
	edges    int
	wide     bool
}

// newAnalyzeCmd is `temper-train analyze`. Register it on the root command.
func newAnalyzeCmd() *cobra.Command {
	var f analyzeFlags
	cmd := &cobra.Command{
		Use:   "analyze TRACE",
		Short: "Find a workload's thread groups, their wake graph and their scheduling classes",
		Long: `Analyze a scheduling trace (written by temper-train observe, recorded by stock
perfetto, or ftrace text; optionally gzipped) and report the target workload's
thread structure: per-thread CPU share, run lengths, wake rates and latencies,
preemption vs sleep vs disk wait, migrations; the waker→wakee graph with its
chains, hubs and communities; latency criticality; clusters of similar threads
classified as sync_compute, latency_critical, io_wake_chain or sporadic; and
placement lint (SMT stacking, CFS bandwidth throttling).

The target is the snapshot's (--snapshot, written by observe next to the trace),
or --pid (thread-group ids; processes they fork inside the trace are included),
or --process (every process with that name). With none of them every user
thread in the trace is analysed.

The tables fit a 120-column terminal with the columns a person decides by
(class, CPU%, run p90, wakes/s, wake-latency p99); -o wide (or --wide) shows
every column. --json writes the analysis (schema temper-train/analysis/v1) to
a file, or to stdout with "-" (the report is then not printed). --dot writes
the wake graph for Graphviz and, when Graphviz is installed, lays it out as
SVG next to it (FILE.svg for FILE.dot); without Graphviz it says so on stderr.
--plot writes pictures to a directory (created if missing), each as SVG and
PNG: runtime-wakerate (every thread's CPU share against its wake rate,
log–log, coloured by cluster), runlength-cdf and wakelatency-cdf (per cluster,
pooled from the threads' quantile sketches weighted by sample count). The
paths of the files written are printed after the report. Files are written
whole or not at all.`,
		Example: `  temper-train analyze testdata/traces/workload-tracefs.txt.gz --pid 19560
  temper-train analyze out/trace.pftrace --snapshot out/snapshot.json --json out/analysis.json --dot out/wakes.dot
  temper-train analyze out/trace.pftrace --snapshot out/snapshot.json --plot out/plots -o wide
  temper-train analyze pg.pftrace --process postgres --json - | jq '.clusters'`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runAnalyze(cmd, f, a[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.snapshot, "snapshot", "", "snapshot.json recorded with the trace (target, topology, cgroup)")
	fl.StringVar(&f.pids, "pid", "", "thread-group ids to analyse, comma-separated")
	fl.StringVar(&f.process, "process", "", "analyse every process with this name")
	fl.StringVar(&f.json, "json", "", `write the analysis as JSON to FILE ("-" for stdout)`)
	fl.StringVar(&f.dot, "dot", "", "write the wake graph as Graphviz DOT to FILE")
	fl.StringVar(&f.plot, "plot", "", "write pictures (SVG and PNG) of the clusters to directory DIR")
	fl.IntVar(&f.edges, "edges", 15, "wake edges to list in the report (0 = all)")
	addWideFlags(cmd, &f.wide)
	return cmd
}

// runAnalyze checks the flags, loads the snapshot, analyses the trace and
// writes the report, JSON, DOT and picture outputs (files atomically).
func runAnalyze(cmd *cobra.Command, f analyzeFlags, trace string) error {
	pids, err := analyze.ParsePids(f.pids)
	if err != nil {
		return usageError{fmt.Errorf("--pid %w", err)}
	}
	if len(pids) > 0 && f.process != "" {
		return usageError{errors.New("--pid and --process exclude each other")}
	}
	if f.edges < 0 {
		return usageError{fmt.Errorf("--edges must be ≥ 0, got %d", f.edges)}
	}
	if f.json != "" && f.json == f.dot {
		return usageError{errors.New("--json and --dot name the same file")}
	}
	opts := pipeline.AnalyzeOptions{Options: analyze.Options{Pids: pids, Process: f.process}, DOT: f.dot, Plots: f.plot}
	if f.json != "-" {
		opts.JSON = f.json
	}
	if f.snapshot != "" {
		s, err := snapshot.Load(f.snapshot)
		if err != nil {
			return err
		}
		opts.Snapshot = s
	}
	a, err := pipeline.Analyze(trace, opts)
	var pe *pipeline.PlotsError
	if errors.As(err, &pe) {
		return fmt.Errorf("--plot: %w", pe.Err)
	}
	if err != nil {
		return err
	}
	if a.NoSVG != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), a.NoSVG)
	}
	if f.json == "-" {
		return a.Write(cmd.OutOrStdout())
	}
	return a.Report(cmd.OutOrStdout(), analyze.ReportOptions{Edges: f.edges, Wide: f.wide, AllThreads: "--json", GiveSnapshot: "pass --snapshot"})
}
