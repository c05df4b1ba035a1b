package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/internal/console"
	"temper.codes/temper-train/observe"
	"temper.codes/temper-train/observe/record"
	"temper.codes/temper-train/pipeline"
	"temper.codes/temper-train/target"
)

// observeFlags are observe's command-line settings.
type observeFlags struct {
	targetFlags
	duration  time.Duration
	maxEvents int64
	maxBytes  string
	buffer    string
	out       string
	agentURL  string
	attach    string
	quiet     bool
	top       int
	filterSw  bool
}

func newObserveCmd() *cobra.Command {
	var f observeFlags
	cmd := &cobra.Command{
		Use:   "observe (--pid PID | --cgroup PATH | --pod NS/NAME [--container NAME] | -- CMD [ARGS...])",
		Short: "Trace a live workload's scheduling and snapshot its threads, cgroup and CPU topology",
		Long: `Trace a live workload with a BPF tracer and write, into --out DIR:

  trace.pftrace   a Perfetto trace (opens in ui.perfetto.dev): every context switch
                  and wakeup of the target's threads, the tasks they switch with and
                  wake, and on SMT machines what ran on their sibling hyperthreads
  snapshot.json   the target's threads (affinity, policy, nice, context-switch
                  counters at start and end), the CPU topology, the target cgroup's
                  CPU limits and throttling counters, pod metadata with --pod, and the
                  node agent's /observe answer with --agent-url

The target is a process and its descendants (--pid), every process of a cgroup
(--cgroup, v1 or v2), a Kubernetes pod or one of its containers on this node
(--pod, through the Kubernetes API), or a command started for the purpose
(after --; it is stopped when tracing ends).

Tracing stops at the first of --duration, --max-events and --max-bytes, when the
target has exited, or at Ctrl-C; the trace written is always complete and valid
for what was recorded. Events the kernel could not hand over in time are counted
per CPU and reported, never dropped silently.

Needs root (or CAP_BPF with CAP_PERFMON) and a kernel with BPF ring buffers (5.8+).`,
		Example: `  temper-train observe --pid 4242 --duration 30s
  temper-train observe --pod shop/checkout --container app --out checkout-trace
  temper-train observe --cgroup /sys/fs/cgroup/unified/system.slice/redis.service
  temper-train observe --duration 5s -- redis-benchmark -q -n 100000`,
		RunE: func(cmd *cobra.Command, a []string) error {
			command, err := commandAfterDash(cmd, a)
			if err != nil {
				return err
			}
			return runObserve(cmd, f, command)
		},
	}
	f.targetFlags.register(cmd, "trace")
	fl := cmd.Flags()
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "stop tracing after this long")
	fl.Int64Var(&f.maxEvents, "max-events", 0, "stop after this many events (0: no bound)")
	fl.StringVar(&f.maxBytes, "max-bytes", "0", "stop when the trace reaches this size, e.g. 256MiB (0: no bound)")
	fl.StringVar(&f.buffer, "buffer-size", "16MiB", "kernel ring buffer size (a power of two)")
	fl.StringVar(&f.out, "out", "", "output directory (default ./observe-<target>-<time>)")
	fl.StringVar(&f.agentURL, "agent-url", "", "also fetch the node agent's /observe endpoint at this URL into the snapshot")
	fl.StringVar(&f.attach, "attach", "auto", "how to hook the scheduler tracepoints: auto, tp_btf or raw_tp")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress line")
	fl.IntVar(&f.top, "top", 15, "threads in the closing summary (0: all)")
	fl.BoolVar(&f.filterSw, "filter-switches", false, "record only the context switches that involve the target (smaller, but other tasks' states are incomplete and trace_processor reports mismatched switches; the trace says it is filtered)")
	return cmd
}

// runObserve resolves the target and observes it with the pipeline; the
// command adds the progress line and the closing summary.
func runObserve(cmd *cobra.Command, f observeFlags, command []string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	opts, err := f.recordOptions()
	if err != nil {
		return usageError{err}
	}
	spec := f.spec()
	spec.Command, spec.Stdout, spec.Stderr = command, stderr, stderr
	if !f.given() && len(command) == 0 {
		return usageError{errors.New("no target: give --pid, --cgroup, --pod, or a command after --")}
	}
	// Checked here, before a command is started or a snapshot taken, so
	// a host that cannot trace fails early and clearly; Run is told not
	// to probe again.
	if err := record.CheckTracing(); err != nil {
		return err
	}
	opts.TracingChecked = true

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // a second Ctrl-C kills as usual

	tgt, err := resolveTarget(ctx, spec)
	if err != nil {
		return err
	}
	defer tgt.Stop(2 * time.Second)

	prog := console.NewLine(stderr, f.quiet, 5*time.Second)
	obs, err := pipeline.Observe(ctx, tgt, pipeline.ObserveOptions{Dir: f.out, Record: opts, AgentURL: f.agentURL, StopCommand: true,
		Progress: func(r record.Progress) {
			prog.Update(fmt.Sprintf("%5.1fs/%s  %d events  %.0f events/s  %d lost  %s",
				r.Elapsed.Seconds(), r.Duration, r.Events, r.Rate, r.Lost, humanBytes(r.Bytes)))
		},
		OnAttached: func() {
			if !f.quiet {
				prog.Log("tracing %s (%d processes) for up to %s; Ctrl-C stops early", tgt.Description, len(tgt.Tgids), f.duration)
			}
		}})
	prog.Done()
	if err != nil {
		return outFlagError(err)
	}
	if obs.StopErr != nil {
		fmt.Fprintf(stderr, "warning: stopping %s: %v\n", tgt.Description, obs.StopErr)
	}
	return printObserveSummary(stdout, obs, tgt, f.top)
}

// resolveTarget resolves the target the flags name; a target named wrong
// is a usage error.
func resolveTarget(ctx context.Context, spec target.Spec) (*target.Target, error) {
	tgt, err := target.Resolve(ctx, spec)
	if errors.Is(err, target.ErrInvalidSpec) {
		return nil, usageError{err}
	}
	return tgt, err
}

// outFlagError names --out in an error about the output directory.
func outFlagError(err error) error {
	var de *pipeline.DirError
	if errors.As(err, &de) {
		return fmt.Errorf("--out %w", err)
	}
	return err
}

// recordOptions checks the bounds and sizes given on the command line.
func (f observeFlags) recordOptions() (record.Options, error) {
	var o record.Options
	if f.duration <= 0 {
		return o, fmt.Errorf("--duration must be positive, got %s", f.duration)
	}
	if f.maxEvents < 0 {
		return o, fmt.Errorf("--max-events must be ≥ 0, got %d", f.maxEvents)
	}
	if f.top < 0 {
		return o, fmt.Errorf("--top must be ≥ 0, got %d", f.top)
	}
	maxBytes, err := parseSize(f.maxBytes)
	if err != nil {
		return o, fmt.Errorf("--max-bytes: %w", err)
	}
	buf, err := parseSize(f.buffer)
	if err != nil {
		return o, fmt.Errorf("--buffer-size: %w", err)
	}
	if buf < int64(os.Getpagesize()) || buf&(buf-1) != 0 || buf > 1<<30 {
		return o, fmt.Errorf("--buffer-size %s: want a power of two between %d bytes and 1GiB", f.buffer, os.Getpagesize())
	}
	attach := map[string]string{"auto": record.AttachAuto, "tp_btf": record.AttachBTF, "raw_tp": record.AttachRawTP}
	mode, ok := attach[f.attach]
	if !ok {
		return o, fmt.Errorf("--attach %q: want auto, tp_btf or raw_tp", f.attach)
	}
	return record.Options{Duration: f.duration, MaxEvents: f.maxEvents, MaxBytes: maxBytes,
		BufferBytes: int(buf), Attach: mode, FilterSwitches: f.filterSw}, nil
}

var sizeRE = regexp.MustCompile(`^(\d+)\s*([KMGT]i?B?|B)?$`)

// parseSize reads a byte count such as 4096, 64KiB, 16MiB, 1G (powers of 1024).
func parseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a size (e.g. 4096, 64KiB, 16MiB, 1GiB)", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	shift := map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}
	if m[2] != "" && m[2] != "B" {
		sh := shift[m[2][0]]
		if n > (1<<62)>>sh {
			return 0, fmt.Errorf("%q is too large", s)
		}
		n <<= sh
	}
	return n, nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// printObserveSummary prints one screen about the recording: where it went,
// why it stopped, what was lost, and the target's busiest threads.
func printObserveSummary(w io.Writer, obs *pipeline.Observation, tgt *target.Target, top int) error {
	res, snap, exit := obs.Record, obs.Snapshot, obs.Exit
	span := res.End - res.Start
	fmt.Fprintf(w, "target    %s\n", tgt.Description)
	if exit != nil {
		fmt.Fprintf(w, "command   %s\n", exit)
	}
	fmt.Fprintf(w, "stopped   after %.2f s: %s\n", float64(span)/1e9, res.StopReason)
	fmt.Fprintf(w, "events    %d (%.0f/s) via %s, %s on disk (%.1f bytes/event)\n", res.Events,
		float64(res.Events)/max(float64(span)/1e9, 1e-9), res.Attach, humanBytes(res.Bytes),
		float64(res.Bytes)/float64(max(res.Events, 1)))
	if lost := res.TotalLost(); lost > 0 {
		fmt.Fprintf(w, "LOST      %d events (per CPU %v): the kernel's ring buffer was full; states near the gaps are uncertain (try --buffer-size 64MiB)\n", lost, res.Lost)
	} else {
		fmt.Fprintln(w, "lost      none")
	}
	if res.Discarded > 0 {
		fmt.Fprintf(w, "discarded %d events that arrived after the bound was reached\n", res.Discarded)
	}
	for _, msg := range snap.Warnings {
		fmt.Fprintf(w, "warning   %s\n", msg)
	}
	fmt.Fprintf(w, "wrote     %s\n          %s\n", obs.TracePath, obs.SnapshotPath)

	r, err := observe.Open(obs.TracePath)
	if err != nil {
		return err
	}
	defer r.Close()
	sum, err := observe.Summarize(r)
	if err != nil {
		return fmt.Errorf("read back %s: %w", obs.TracePath, err)
	}
	traced := map[int32]bool{}
	for _, g := range res.Targets {
		traced[int32(g)] = true
	}
	var threads []observe.ThreadSummary
	for _, th := range sum.Threads {
		if traced[th.Tgid] {
			threads = append(threads, th)
		}
	}
	fmt.Fprintf(w, "\n%d threads of the target (CPU%% of %.2f s):\n", len(threads), float64(span)/1e9)
	return printThreadTable(w, threads, span, top, false)
}
