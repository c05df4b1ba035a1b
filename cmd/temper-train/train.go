package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/target"
	"temper.codes/temper-train/refine/bench"
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
	stderr := cmd.ErrOrStderr()
	switch {
	case f.id == "":
		return usageError{errors.New("no --id: name the profile, e.g. --id my-service")}
	case !f.given() && len(command) == 0:
		return usageError{errors.New("no target: give --pid, --cgroup, --pod, or a command after --")}
	case f.bench == "":
		return usageError{errors.New("no benchmark: give --bench 'CMD ARGS...'")}
	case f.resume != "":
		return usageError{errors.New("--resume: resume the refine stage with 'temper-train refine PROFILE --resume LEDGER'")}
	}
	dir := f.out
	if dir == "" {
		dir = fmt.Sprintf("train-%s-%s", f.id, time.Now().Format("20060102-150405"))
	}
	if _, err := makeDir(dir); err != nil {
		return err
	}

	// A command is started once here, so that every stage sees the same
	// process; the stages get its pid.
	tf := f.targetFlags
	if len(command) > 0 {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		tgt, err := target.Resolve(ctx, target.Spec{Command: command, Stdout: stderr, Stderr: stderr})
		stop()
		if err != nil {
			return err
		}
		defer tgt.Stop(2 * time.Second)
		tf = targetFlags{pid: tgt.Tgids[0]}
		// A server just started is not listening yet, and some load tools
		// (redis-benchmark) spin instead of failing on a refused
		// connection: give it --warmup before the first load.
		time.Sleep(f.warmup)
	}
	targetArgs := tf.args()

	stage := func(name string, args ...string) error {
		fmt.Fprintf(stderr, "train: %s\n", name)
		root := newRootCmd(cmd.OutOrStdout(), stderr)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	obs := filepath.Join(dir, "observe")
	// The trace must show the workload under the load refine will measure
	// it with, not idle: the benchmark runs back to back while observe
	// traces.
	stopLoad, err := startLoad(f.bench, f.adapter, f.timeout)
	if err != nil {
		return err
	}
	err = stage("observe", append([]string{"observe", "--duration", f.duration.String(), "--out", obs, "-q"}, targetArgs...)...)
	runs, loadErr := stopLoad()
	if err != nil {
		return err
	}
	if runs == 0 {
		return fmt.Errorf("observe: the benchmark finished no run while the workload was traced: %w", cmp(loadErr, errors.New("it ran for the whole trace: lengthen --duration")))
	}
	fmt.Fprintf(stderr, "train: the benchmark ran %d times while observe traced\n", runs)
	analysis := filepath.Join(dir, "analysis.json")
	if err := stage("analyze", "analyze", "--snapshot", filepath.Join(obs, "snapshot.json"), "--json", analysis,
		"--dot", filepath.Join(dir, "wake-graph.dot"), "--plot", filepath.Join(dir, "plots"), filepath.Join(obs, "trace.pftrace")); err != nil {
		return err
	}
	profDir := filepath.Join(dir, "profiles")
	if err := stage("synthesize", "synthesize", analysis, "--id", f.id, "--snapshot", filepath.Join(obs, "snapshot.json"), "--out", profDir); err != nil {
		return err
	}
	profs, err := filepath.Glob(filepath.Join(profDir, f.id, "*.toml"))
	if err != nil || len(profs) != 1 {
		return fmt.Errorf("synthesize: want one profile in %s, found %d", filepath.Join(profDir, f.id), len(profs))
	}
	fmt.Fprintf(stderr, "train: refine %s\n", profs[0])
	rf := f.refineFlags
	rf.targetFlags = tf
	rf.out = filepath.Join(dir, "refine")
	run, err := runRefine(cmd, rf, profs[0], nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "train: %s: observe/, analysis.json, profiles/%s, refine/ (ledger, REPORT.md%s)\n", dir, f.id,
		map[bool]string{true: ", refined profile", false: ""}[run.Refined != ""])
	return nil
}

// args turns the target flags back into command-line arguments.
func (f targetFlags) args() []string {
	var a []string
	if f.pid != 0 {
		a = append(a, "--pid", strconv.Itoa(f.pid))
	}
	if f.cgroup != "" {
		a = append(a, "--cgroup", f.cgroup)
	}
	if f.pod != "" {
		a = append(a, "--pod", f.pod)
	}
	if f.container != "" {
		a = append(a, "--container", f.container)
	}
	if f.kubeconfig != "" {
		a = append(a, "--kubeconfig", f.kubeconfig)
	}
	if f.node != "" {
		a = append(a, "--node", f.node)
	}
	return a
}

// startLoad runs the benchmark back to back until the returned stop is
// called; stop returns how many runs completed and the last failure. A run
// cut short by stop counts as neither.
func startLoad(command, adapterName string, timeout time.Duration) (stop func() (int, error), err error) {
	argv, adapter, err := benchCommand(command, adapterName)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runs int
	var last error
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, err := bench.Run(ctx, bench.Command{Argv: argv, Adapter: adapter, Timeout: timeout})
			switch {
			case ctx.Err() != nil:
			case err != nil:
				last = err
				// A failing benchmark is not retried in a tight loop.
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			default:
				runs++
			}
		}
	}()
	return func() (int, error) {
		cancel()
		<-done
		return runs, last
	}, nil
}
