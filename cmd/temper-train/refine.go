package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/internal/console"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/pipeline"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/bench"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/rig"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/scheduler/lease"
	"temper.codes/temper-train/target"
)

// refineFlags are refine's command-line settings.
type refineFlags struct {
	targetFlags
	bench      string
	adapter    string
	metric     string
	guards     []string
	background int
	ladder     string
	backend    string
	noCeilings bool
	maxTrials  int
	maxTime    time.Duration
	alpha      float64
	minEffect  string
	harm       string
	equiv      string
	ledger     string
	resume     string
	out        string
	seed       uint64
	warmup     time.Duration
	timeout    time.Duration
	n          [3]int // calibration, race, final
	quiet      bool
	waitLock   time.Duration

	// The node-shaped rig (rig.Options) for -- CMD and --pid targets.
	noRig      bool
	noTier     bool
	request    string
	limit      string
	clientCPUs string
	rig        *rig.Rig // in force once takeTarget made it
}

func newRefineCmd() *cobra.Command {
	var f refineFlags
	var canary bool
	cmd := &cobra.Command{
		Use:   "refine PROFILE (--pid PID | --cgroup PATH | --pod NS/NAME | -- CMD [ARGS...]) --bench 'CMD ...'",
		Short: "Measure whether a profile helps the workload and keep only the changes that do",
		Long: `Refine measures a workload profile against stock CFS with a benchmark and keeps
only what measurably helps.

It climbs one parameter at a time from PROFILE: a group's treatment (relaxed or
dropped, e.g. for a group that helps under load and hurts at idle),
exclusive_cores with cpu_fraction following the sizing rule, slice_us, weight,
preempt, and whether a family belongs to its group. Every candidate is linted for
the backend and this machine and never applied if lint refuses it, and never run
if it leaves the kernel state as an arm already measured does. Each round is a
race: the candidates run against the current profile by successive halving
(--race-n runs each in the first rung, three times as many for the best third in
the next), every block between two runs of the current profile, shared by the
blocks at one level (one benchmark run = one sample; between arms the previous
profile is reverted and --warmup discarded). A race ranks and tests nothing; its
winner becomes the current profile when it gained at least half --min-effect and
more than two standard errors. After a step, a candidate the last race already
measured (its kernel state, or its move on a group no step has touched since) is
not raced again when that measure says it would not step. The race's repeats
measure the noise, which sizes the final.

The final is the one test: stock against the refined profile on fresh runs,
group-sequential (two looks, --alpha spent over them), the background levels
strata of one stratified rank test. The profile is kept only when the interval of
its common effect clears --min-effect and, at every level, the loss of the metric
is bounded within --harm and every --guard's within its bound (non-inferiority).
The plan is printed first and re-planned as runs arrive within --max-trials and
--max-time; when one raced round and the final cannot fit, refine says so after
the first block, with the budget that would. --calibration-n N adds a stock
against stock comparison first (A/A: a measured false accept).

The mechanism check: for a step taken refine compares the changed group's
involuntary preemptions per second between the winner's runs and the current
profile's; a metric win without it is flagged SUSPECT.

With --background N (or each level of --ladder) every trial runs N CPU spinners
in a cgroup of their own with the lowest CPU weight (BestEffort pods), the same
in every arm.

Outputs, in --out DIR (default ./refine-<id>-<time>): ledger.jsonl (every trial
and decision, fsynced line by line), REPORT.md, and the refined profile as
DIR/<id>/<shape>.toml (a profiles tree: copy it over the input to adopt it).

--resume LEDGER continues a run that was killed or interrupted: recorded trials
are not run again, a trial cut off mid-run is run again (the ledger says so),
and spinners the dead run left are killed. The configuration comes from the
ledger; give the same PROFILE, target and --bench.

Benchmarks (--adapter, default from the command's name): redis-benchmark,
memaslap (memcached), pgbench, sysbench, wrk, and jsonl: one JSON object per
line, {"metric": "p99_ms", "value": 0.41, "unit": "ms"}.

Reverts on Ctrl-C, SIGTERM and errors; after a SIGKILL run
'temper-train apply --revert' (cfs) and refine --resume.

To refine a live workload in a loop, the last good profile in force between
cycles and a regression rolled back at once: 'temper-train canary'.`,
		Example: `  # the demo workload, its latency read by scripts/demo-bench.sh (jsonl)
  bin/workload --stats /tmp/wl.stats &
  temper-train refine bin/demo/profiles/demo-workload/2cpu-2c-smt1.toml --pid $! \
      --bench 'scripts/demo-bench.sh /tmp/wl.stats 2' --adapter jsonl --metric p99_ms --max-time 2m

  # Redis under redis-benchmark, at 0, 1, 2 and 4 background spinners
  temper-train refine profiles/redis/2cpu-2c-smt1.toml --pid $(pidof redis-server) \
      --bench 'redis-benchmark -p 6390 -c 20 -n 20000 -t get --csv' \
      --metric p99_ms --guard throughput:-5% --ladder 0,1,2,4 --backend cfs

  # start the workload for the run, and resume after a crash
  temper-train refine my.toml --bench 'wrk -t2 -c20 -d5s --latency http://127.0.0.1:8080/' -- ./server
  temper-train refine my.toml --pid 4242 --bench 'wrk ...' --resume refine-my-20261125-2130/ledger.jsonl`,
		RunE: func(cmd *cobra.Command, a []string) error {
			a, command := splitDash(cmd, a)
			if canary {
				return usageError{errors.New("--canary: the canary loop is its own command, 'temper-train canary' (it synthesizes its own candidates; see its --help)")}
			}
			if len(a) != 1 {
				return usageError{fmt.Errorf("refine takes one profile file, got %d arguments", len(a))}
			}
			return runRefine(cmd, f, a[0], command)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&canary, "canary", false, "")
	cmd.Flags().MarkHidden("canary")
	return cmd
}

func (f *refineFlags) register(cmd *cobra.Command) {
	f.targetFlags.register(cmd, "refine the profile of")
	fl := cmd.Flags()
	fl.StringVar(&f.bench, "bench", "", "the benchmark command, one trial per run (quoted: 'redis-benchmark -c 20 --csv')")
	fl.StringVar(&f.adapter, "adapter", "", "how to read the benchmark's output: redis-benchmark, memaslap, pgbench, sysbench, wrk or jsonl (default: from the command's name)")
	fl.StringVar(&f.metric, "metric", "p99_ms", "the metric to improve")
	fl.StringSliceVar(&f.guards, "guard", []string{"throughput:-5%", "errors:0%"}, "a metric that must not get worse than this bound (METRIC:-5%); guards the benchmark does not report are noted and skipped")
	fl.IntVar(&f.background, "background", 0, "CPU spinners (BestEffort-like background load) during every trial")
	fl.StringVar(&f.ladder, "ladder", "", "background levels every comparison is measured at, e.g. 0,1,2,4,8 (instead of --background)")
	fl.StringVar(&f.backend, "backend", backendAuto, "how to apply: auto, sched_ext or cfs")
	fl.BoolVar(&f.noCeilings, "no-ceilings", false, noCeilingsHelp)
	fl.IntVar(&f.maxTrials, "max-trials", 0, "stop hill climbing when the next round and the final comparison would exceed this many trials (0: no limit)")
	fl.DurationVar(&f.maxTime, "max-time", 0, "the same in wall time, estimated from the trials so far (0: no limit)")
	fl.Float64Var(&f.alpha, "alpha", 0.05, "one-sided level of the final comparison (spent over its looks) and of every non-inferiority bound")
	fl.StringVar(&f.minEffect, "min-effect", "5%", "the smallest relative improvement worth a change")
	fl.StringVar(&f.ledger, "ledger", "", "the ledger file (default DIR/ledger.jsonl)")
	fl.StringVar(&f.resume, "resume", "", "continue the run this ledger records")
	fl.StringVar(&f.out, "out", "", "output directory (default ./refine-<id>-<time>)")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the ABBA order (default: random, recorded in the ledger)")
	fl.DurationVar(&f.warmup, "warmup", time.Second, "discarded after each switch of profile before a trial")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "a benchmark run taking longer is killed and the run stops")
	fl.IntVar(&f.n[0], "calibration-n", 0, "before the search, stock against itself (A/A) this many runs per arm and level: a measured false accept (even; 0: none)")
	fl.IntVar(&f.n[1], "race-n", 1, "runs per candidate in the first rung of a round's race (each later rung: 3× the runs, a third of the candidates)")
	fl.IntVar(&f.n[2], "final-n", 0, "fresh runs per arm and level of the final comparison at its last look (even; 0: sized from the noise the race measures)")
	fl.StringVar(&f.equiv, "equivalence", "", "instead of a search, check that the profile changes --metric by no more than this either way against stock (e.g. 3%): two one-sided tests on fresh trials, sized from the noise, within the budget; no tier arm")
	fl.StringVar(&f.harm, "harm", "", "the loss of the metric tolerated at any background level (default: the minimum effect)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress line")
	fl.DurationVar(&f.waitLock, "wait-lock", 0, "wait up to this long for another run that owns this node's scheduling state (0: refuse at once)")
	fl.BoolVar(&f.noRig, "no-rig", false, "run a -- CMD or --pid target where it is, not in a pod of a node-shaped rig (and measure no tier arm)")
	fl.BoolVar(&f.noTier, "no-tier", false, "with the rig, measure no tier-only arm: decide the profile against stock CFS")
	fl.StringVar(&f.request, "request", "", "the rig's pod CPU request (1000m, 1.5; default 1000m): its cgroup weight")
	fl.StringVar(&f.limit, "limit", "", "the rig's pod CPU limit (default none): CFS quota; equal to the request makes it Guaranteed, above it Burstable")
	fl.StringVar(&f.clientCPUs, "client-cpus", "", "CPUs reserved for the benchmark's client, as if on another node (e.g. 1); the node under test gets the rest")
}

// rigOptions are the rig's shape from the flags; a value that does not
// parse names its flag.
func (f *refineFlags) rigOptions() (rig.Options, error) {
	var o rig.Options
	var err error
	if f.request != "" {
		if o.Request, err = profiles.ParseMillicores(f.request); err != nil {
			return o, usageError{fmt.Errorf("--request %w", err)}
		}
	}
	if f.limit != "" {
		if o.Limit, err = profiles.ParseMillicores(f.limit); err != nil {
			return o, usageError{fmt.Errorf("--limit %w", err)}
		}
	}
	if f.clientCPUs != "" {
		if o.ClientCPUs, err = machine.ParseCPUList(f.clientCPUs); err != nil {
			return o, usageError{fmt.Errorf("--client-cpus %w", err)}
		}
	}
	return o, nil
}

// clientBench is bc run as the rig's client, when there is a rig.
func (f *refineFlags) clientBench(bc bench.Command) bench.Command {
	if f.rig != nil {
		c := f.rig.Client()
		bc.Cgroup = &c
	}
	return bc
}

// runRefine checks the flags, resolves the target and refines the profile
// with the pipeline; the command adds the progress line and the summary.
func runRefine(cmd *cobra.Command, f refineFlags, profilePath string, command []string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	switch {
	case f.backend != backendAuto && f.backend != backendSchedExt && f.backend != backendCFS:
		return usageError{fmt.Errorf("--backend %q: want auto, sched_ext or cfs", f.backend)}
	case f.noCeilings && f.backend == backendCFS:
		return usageError{errNoCeilingsCFS}
	case !f.given() && len(command) == 0:
		return usageError{errors.New("no target: give --pid, --cgroup, --pod, or a command after --")}
	case f.bench == "":
		return usageError{errors.New("no benchmark: give --bench 'CMD ARGS...'")}
	}
	bc, err := f.benchCommand()
	if err != nil {
		return err
	}
	var cfg refine.Config
	if f.resume == "" { // a resumed run's configuration is its ledger's
		if cfg, err = f.config(); err != nil {
			return usageError{err}
		}
	}
	if f.resume != "" {
		// Before a command is started or anything reaped: a live run's
		// ledger is its own.
		if err := ledger.CheckUnlocked(f.resume); err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tgt, release, err := f.takeTarget(ctx, command, stderr)
	if err != nil {
		return err
	}
	defer release()
	prog := console.NewLine(stderr, f.quiet, 10*time.Second)
	run, err := pipeline.Refine(ctx, tgt, profilePath, f.options(cfg, bc, prog, stderr))
	prog.Clear()
	if err != nil {
		return refineFlagError(err, run)
	}
	return run.Report(stdout)
}

// takeNode takes the node's lease on its scheduling state for the run (see
// pipeline.TakeNode); a live owner is an error saying how to wait for it.
func (f *refineFlags) takeNode(ctx context.Context, stderr io.Writer) (*lease.Lease, error) {
	return takeNode(ctx, f.waitLock, "", stderr)
}

// takeTarget takes the node's lease, then resolves the target the flags or
// the command after -- name (a command is started here, once, so that every
// stage sees the same process). release stops a started command, then gives
// the lease up: call it after everything applied is reverted.
func (f *refineFlags) takeTarget(ctx context.Context, command []string, stderr io.Writer) (*target.Target, func(), error) {
	ropts, err := f.rigOptions()
	if err != nil {
		return nil, nil, err
	}
	node, err := f.takeNode(ctx, stderr)
	if err != nil {
		return nil, nil, err
	}
	spec := f.spec()
	spec.Command, spec.Stdout, spec.Stderr = command, stderr, stderr
	if !f.noRig && (len(command) > 0 || spec.Pid > 0) {
		if f.rig, err = rig.New(ropts); err != nil {
			node.Release()
			return nil, nil, err
		}
		if len(command) > 0 {
			pod := f.rig.Pod()
			spec.StartIn = &pod
		}
	}
	undo := func() {
		if f.rig != nil {
			if err := f.rig.Remove(); err != nil {
				fmt.Fprintf(stderr, "warning: %v (apply --revert removes it)\n", err)
			}
			f.rig = nil
		}
		node.Release()
	}
	tgt, err := resolveTarget(ctx, spec)
	if err != nil {
		undo()
		return nil, nil, err
	}
	if f.rig != nil && spec.Pid > 0 {
		for _, pid := range tgt.Tgids {
			if err := f.rig.Adopt(pid); err != nil {
				undo()
				return nil, nil, err
			}
		}
	}
	return tgt, func() {
		tgt.Stop(2 * time.Second)
		undo()
	}, nil
}

// takeNode is pipeline.TakeNode with the notes on stderr and the flag that
// waits for a live owner named.
func takeNode(ctx context.Context, wait time.Duration, stateFile string, stderr io.Writer) (*lease.Lease, error) {
	l, err := pipeline.TakeNode(ctx, wait, stateFile, func(msg string) { fmt.Fprintf(stderr, "note: %s\n", msg) })
	if errors.Is(err, lease.ErrHeld) {
		return nil, fmt.Errorf("%w; wait for it with --wait-lock DURATION", err)
	}
	return l, err
}

// benchCommand checks --bench, --adapter and --timeout: a usage error when
// the benchmark cannot run.
func (f *refineFlags) benchCommand() (bench.Command, error) {
	switch {
	case f.background != 0 && f.ladder != "":
		return bench.Command{}, usageError{errors.New("--background and --ladder: give one")}
	case f.background < 0:
		return bench.Command{}, usageError{fmt.Errorf("--background %d: want ≥ 0", f.background)}
	case f.timeout <= 0:
		return bench.Command{}, usageError{fmt.Errorf("--timeout %s: want > 0", f.timeout)}
	}
	c, err := parseBench(f.bench, f.adapter)
	c.Timeout = f.timeout
	return c, err
}

// parseBench splits --bench into its argv and finds the adapter that
// reads its output (--adapter, else from the command's name).
func parseBench(line, adapter string) (bench.Command, error) {
	c, err := bench.ParseCommand(line, adapter)
	var ce *bench.CommandError
	switch {
	case errors.As(err, &ce):
		return c, usageError{fmt.Errorf("--bench %w", err)}
	case errors.Is(err, bench.ErrNoAdapter):
		return c, usageError{fmt.Errorf("--bench: %w with --adapter", err)}
	case err != nil:
		return c, usageError{fmt.Errorf("--bench: %w", err)}
	}
	return c, nil
}

// options are the pipeline's refine options from the flags.
func (f *refineFlags) options(cfg refine.Config, bc bench.Command, prog *console.Line, stderr io.Writer) pipeline.RefineOptions {
	return pipeline.RefineOptions{Config: cfg, Backend: f.backend, Bench: f.clientBench(bc), BenchLine: f.bench, Resume: f.resume,
		Rig: f.rig, NoTier: f.noTier, NoCeilings: f.noCeilings,
		Dir: f.out, Ledger: f.ledger, Version: version, Log: prog.Log,
		ChooseBackend: func(name string, o cfs.Options) (scheduler.Backend, error) {
			return chooseBackend(name, o, false, stderr)
		},
		Note:     console.Once(func(msg string) { prog.Log("note: %s", msg) }),
		Progress: func(r refine.Progress) { prog.Update(r.String()) }}
}

// refineFlagError names the flags behind an error of pipeline.Refine.
func refineFlagError(err error, run *pipeline.RefineRun) error {
	var re *pipeline.ResumeError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("--resume %w", err)
	case errors.Is(err, pipeline.ErrCeilings):
		return usageError{fmt.Errorf("--no-ceilings: %w", err)}
	case run != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return fmt.Errorf("%w; continue with --resume %s", err, run.Ledger)
	}
	return outFlagError(err)
}

// config builds the engine's configuration from the flags; a setting that
// does not parse names its flag.
func (f *refineFlags) config() (refine.Config, error) {
	c, err := refine.Settings{Config: refine.Config{Metric: f.metric, Alpha: f.alpha, MaxTrials: f.maxTrials, MaxTime: f.maxTime,
		Warmup: f.warmup, Seed: f.seed, CalibrationN: f.n[0], RaceN: f.n[1], FinalN: f.n[2]},
		MinEffect: f.minEffect, Harm: f.harm, Equivalence: f.equiv, Guards: f.guards, Ladder: f.ladder, Background: f.background}.Parse()
	var se *refine.SettingError
	if errors.As(err, &se) {
		flag := map[string]string{"Metric": "--metric: ", "MinEffect": "--min-effect: ", "Harm": "--harm: ", "Equivalence": "--equivalence: ", "Guards": "--guard ", "Ladder": "--ladder "}
		return c, fmt.Errorf("%s%w", flag[se.Setting], se.Err)
	}
	if errors.Is(err, refine.ErrBudget) {
		return c, fmt.Errorf("%w (--max-trials %d; --calibration-n, --final-n)", err, f.maxTrials)
	}
	return c, err
}
