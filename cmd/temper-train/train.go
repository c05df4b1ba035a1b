package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/internal/console"
	"temper.codes/temper-train/pipeline"
)

// trainFlags are train's settings: refine's, plus what observe and
// synthesize need.
type trainFlags struct {
	refineFlags
	id       string
	duration time.Duration
}

func newTrainCmd() *cobra.Command {
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train (--pid PID | --cgroup PATH | --pod NS/NAME | -- CMD [ARGS...]) --bench 'CMD ...' --id ID",
		Short: "Observe, analyze, synthesize and refine: a measured profile for a live workload in one command",
		Long: `Train runs the four stages on one live workload:

  observe     trace it for --duration, the benchmark running back to back
              → DIR/observe/trace.pftrace, snapshot.json
  analyze     its thread groups and classes      → DIR/analysis.json, wake-graph.dot, plots/
  synthesize  a profile for this machine          → DIR/profiles/ID/SHAPE.toml
  refine      measure it against stock CFS with --bench, keep only what helps
              → DIR/refine/ledger.jsonl, REPORT.md, DIR/refine/ID/SHAPE.toml

A command after -- is started once and serves every stage (the benchmark starts
--warmup after it); it is stopped at the end. Refine's flags (--metric, --guard,
--ladder, --max-time, ...) apply to the refine stage; see 'temper-train refine --help'.`,
		Example: `  # the built-in demo workload with its latency benchmark, about two minutes
  temper-train train --id demo-workload --out bin/train --max-time 90s \
      --bench 'scripts/demo-bench.sh /tmp/wl.stats 1' --adapter jsonl -- bin/workload --stats /tmp/wl.stats --dir bin

  # Redis, started for the run, under redis-benchmark at 0 and 2 spinners
  temper-train train --id redis --ladder 0,2 --max-time 20m \
      --bench 'redis-benchmark -p 6390 -c 20 -n 20000 -t get --csv' -- redis-server --port 6390`,
		RunE: func(cmd *cobra.Command, a []string) error {
			command, err := commandAfterDash(cmd, a)
			if err != nil {
				return err
			}
			return runTrain(cmd, f, command)
		},
	}
	f.refineFlags.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "profile id: lowercase letters, digits and '-' (required)")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "how long observe traces the workload")
	return cmd
}

func runTrain(cmd *cobra.Command, f trainFlags, command []string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	switch {
	case f.id == "":
		return usageError{errors.New("no --id: name the profile, e.g. --id my-service")}
	case !f.given() && len(command) == 0:
		return usageError{errors.New("no target: give --pid, --cgroup, --pod, or a command after --")}
	case f.bench == "":
		return usageError{errors.New("no benchmark: give --bench 'CMD ARGS...'")}
	case f.resume != "":
		return usageError{errors.New("--resume: resume the refine stage with 'temper-train refine PROFILE --resume LEDGER'")}
	case f.noCeilings && f.backend == backendCFS:
		return usageError{errNoCeilingsCFS}
	}
	bc, err := f.benchCommand()
	if err != nil {
		return err
	}
	cfg, err := f.config()
	if err != nil {
		return usageError{err}
	}
	dir := f.out
	if dir == "" {
		dir = fmt.Sprintf("train-%s-%s", f.id, time.Now().Format("20060102-150405"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tgt, release, err := f.takeTarget(ctx, command, stderr)
	if err != nil {
		return err
	}
	defer release()

	prog := console.NewLine(stderr, f.quiet, 10*time.Second)
	ro := f.options(cfg, bc, prog, stderr)
	ro.Dir = filepath.Join(dir, "refine")
	res, err := pipeline.Train(ctx, tgt, pipeline.TrainOptions{Refine: ro, Warmup: f.warmup,
		Fresh: pipeline.FreshOptions{ID: f.id, Dir: dir, Duration: f.duration, Bench: f.clientBench(bc), Pictures: true,
			Stage: func(name string) { fmt.Fprintf(stderr, "train: %s\n", name) }},
		Synthesized: func(fr *pipeline.FreshProfile) error {
			fmt.Fprintf(stderr, "train: the benchmark ran %d times while observe traced\n", fr.Runs)
			if err := printFresh(stdout, stderr, fr); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "train: refine %s\n", fr.Profile.Path)
			return nil
		}})
	prog.Clear()
	var de *pipeline.DirError
	switch {
	case errors.As(err, &de) && de.Dir == dir:
		return fmt.Errorf("--out %w", err)
	case errors.Is(err, pipeline.ErrLoadTooLong):
		return fmt.Errorf("%w: lengthen --duration", err)
	case err != nil:
		var run *pipeline.RefineRun
		if res != nil {
			run = res.Refine
		}
		return refineFlagError(err, run)
	}
	if err := res.Refine.Report(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "train: %s: observe/, analysis.json, profiles/%s, refine/ (ledger, REPORT.md%s)\n", dir, f.id,
		map[bool]string{true: ", refined profile", false: ""}[res.Refine.Refined != ""])
	return nil
}

// printFresh prints what observe, analyze and synthesize print for the
// stages train ran.
func printFresh(stdout, stderr io.Writer, fr *pipeline.FreshProfile) error {
	if err := printObserveSummary(stdout, fr.Observation, 15); err != nil {
		return err
	}
	if fr.Analysis.NoSVG != "" {
		fmt.Fprintln(stderr, fr.Analysis.NoSVG)
	}
	if err := fr.Analysis.Report(stdout, analyze.ReportOptions{Edges: 15, AllThreads: filepath.Join(filepath.Dir(fr.Observation.Dir), "analysis.json")}); err != nil {
		return err
	}
	r := fr.Profile
	for _, w := range r.Warnings {
		fmt.Fprintf(stderr, "temper-train: warning: %s\n", w)
	}
	for _, fd := range r.Lint {
		fmt.Fprintf(stderr, "temper-train: lint: %s\n", fd)
	}
	return r.Report(stdout)
}
