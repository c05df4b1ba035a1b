package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/internal/bytesize"
	"temper.codes/temper-train/internal/console"
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
				r.Elapsed.Seconds(), r.Duration, r.Events, r.Rate, r.Lost, bytesize.Format(r.Bytes)))
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
	return printObserveSummary(stdout, obs, f.top)
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

// recordOptions reads the bounds and sizes given on the command line and
// checks them with record.Options.Check.
func (f observeFlags) recordOptions() (record.Options, error) {
	if f.top < 0 {
		return record.Options{}, fmt.Errorf("--top must be ≥ 0, got %d", f.top)
	}
	maxBytes, err := bytesize.Parse(f.maxBytes)
	if err != nil {
		return record.Options{}, fmt.Errorf("--max-bytes: %w", err)
	}
	buf, err := bytesize.Parse(f.buffer)
	if err != nil {
		return record.Options{}, fmt.Errorf("--buffer-size: %w", err)
	}
	mode, err := record.ParseAttach(f.attach)
	if err != nil {
		return record.Options{}, fmt.Errorf("--attach %q: want auto, tp_btf or raw_tp", f.attach)
	}
	o := record.Options{Duration: f.duration, MaxEvents: f.maxEvents, MaxBytes: maxBytes,
		BufferBytes: int(buf), Attach: mode, FilterSwitches: f.filterSw}
	err = o.Check()
	var oe *record.OptionError
	if !errors.As(err, &oe) {
		return o, err
	}
	// The flag that sets the field, and its value as given.
	flag := map[string][2]string{"Duration": {"--duration", f.duration.String()},
		"MaxEvents": {"--max-events", strconv.FormatInt(f.maxEvents, 10)},
		"MaxBytes":  {"--max-bytes", f.maxBytes}, "BufferBytes": {"--buffer-size", f.buffer}}
	if fl, ok := flag[oe.Field]; ok {
		return o, fmt.Errorf("%s must be %s, got %s", fl[0], oe.Want, fl[1])
	}
	return o, err
}

// printObserveSummary prints observe's closing summary (train prints it
// too).
func printObserveSummary(w io.Writer, obs *pipeline.Observation, top int) error {
	return obs.Report(w, pipeline.ObservationReportOptions{Top: top, AllThreads: "--top 0", BiggerBuffer: "--buffer-size 64MiB"})
}
