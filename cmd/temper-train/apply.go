package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/pipeline"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/scheduler/lease"
	"temper.codes/temper-train/target"
)

// applyFlags are apply's command-line settings.
type applyFlags struct {
	targetFlags
	backend   string
	noCeil    bool
	forDur    time.Duration
	state     string
	statsJSON string
	quiet     bool
	revert    bool
	demote    bool
	waitLock  time.Duration
}

// Backend choices of --backend.
const (
	backendAuto     = pipeline.BackendAuto
	backendSchedExt = pipeline.BackendSchedExt
	backendCFS      = pipeline.BackendCFS
)

// applyReport is how often apply prints its stats table while it runs.
const applyReport = 5 * time.Second

func newApplyCmd() *cobra.Command {
	var f applyFlags
	cmd := &cobra.Command{
		Use:   "apply PROFILE (--pid PID | --cgroup PATH | --pod NS/NAME [--container NAME])\n  temper-train apply --revert [STATEFILE]",
		Short: "Put a workload profile in force on a live workload until stopped, then revert",
		Long: `Put a workload profile in force on a live workload's threads, keep it in force
while the workload creates threads (they are classified every 100 ms), and put
everything back when apply stops: at the end of --for, on Ctrl-C or SIGTERM,
when the target exits, or on any error. The closing table gives each thread
group's threads, CPU time, dispatches and preemptions while applied.

Backends (--backend):
  sched_ext  an embedded sched_ext scheduler; needs a kernel with sched_ext. It is
             an error, never a fallback, when it cannot attach.
  cfs        CPU affinity, scheduling policy and nice through the fair class: the
             exclusive treatment keeps only the workload's own other threads off
             its cores, not other pods. See docs/scheduler.md.
  auto       sched_ext when it can attach here, else cfs; the choice and its
             reason are printed.

The profile is loaded strictly and linted for the chosen backend and this
machine before anything changes; a lint error stops apply. An exclusive group
that needs more whole cores than this machine can give (one core always stays
shared) is such an error; with --demote it gets latency treatment instead
(what 'lint --demote' reports as "will be demoted").

The cfs backend records every thread's original affinity, policy and nice in a
state file before changing it (default /run/temper-train/apply-<pid>.json,
removed after a clean revert). If apply was killed (SIGKILL, a crash), run
'temper-train apply --revert [STATEFILE]': it restores every recorded thread that
still exists, skips threads that exited, and never touches a thread whose id now
belongs to another thread. Without STATEFILE it reverts every state file in
/run/temper-train whose apply is no longer running.

--stats-json writes the closing stats and each thread's group as JSON (see
docs/scheduler.md for the schema).

Needs root (CAP_SYS_NICE for cfs; CAP_BPF and CAP_SYS_ADMIN for sched_ext).`,
		Example: `  temper-train apply profiles/mysql-innodb/8cpu-4c-smt2.toml --pod shop/db --for 10m
  temper-train apply my-profile.toml --pid 4242 --backend cfs --stats-json stats.json
  temper-train apply --revert /run/temper-train/apply-31337.json`,
		RunE: func(cmd *cobra.Command, a []string) error {
			if cmd.ArgsLenAtDash() >= 0 {
				return usageError{errors.New("apply takes no command after --: start the workload, then give --pid")}
			}
			if f.revert {
				return runRevert(cmd, f, a)
			}
			if len(a) != 1 {
				return usageError{fmt.Errorf("apply takes one profile file, got %d arguments", len(a))}
			}
			return runApply(cmd, f, a[0])
		},
	}
	f.targetFlags.register(cmd, "apply the profile to")
	fl := cmd.Flags()
	fl.StringVar(&f.backend, "backend", backendAuto, "how to apply: auto, sched_ext or cfs")
	fl.BoolVar(&f.noCeil, "no-ceilings", false, noCeilingsHelp)
	fl.DurationVar(&f.forDur, "for", 0, "revert after this long (0: run until Ctrl-C, SIGTERM or the target exits)")
	fl.StringVar(&f.state, "state", "", "cfs state file (default /run/temper-train/apply-<pid>.json)")
	fl.StringVar(&f.statsJSON, "stats-json", "", "write the closing per-group stats and each thread's group to this JSON file")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress messages or periodic stats")
	fl.BoolVar(&f.revert, "revert", false, "restore the threads a killed apply left changed, from its state file")
	fl.DurationVar(&f.waitLock, "wait-lock", 0, "wait up to this long for another run that owns this node's scheduling state (0: refuse at once)")
	fl.BoolVar(&f.demote, "demote", false, "give an exclusive group too big for this machine latency treatment instead of refusing the profile")
	return cmd
}

// runApply loads, checks and applies the profile, keeps it in force and
// reverts it. Every exit path after Apply reverts.
func runApply(cmd *cobra.Command, f applyFlags, profilePath string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	switch {
	case f.backend != backendAuto && f.backend != backendSchedExt && f.backend != backendCFS:
		return usageError{fmt.Errorf("--backend %q: want auto, sched_ext or cfs", f.backend)}
	case f.noCeil && f.backend == backendCFS:
		return usageError{errNoCeilingsCFS}
	case f.forDur < 0:
		return usageError{fmt.Errorf("--for must be ≥ 0, got %s", f.forDur)}
	case !f.given():
		return usageError{errors.New("no target: give --pid, --cgroup or --pod")}
	case f.container != "" && f.pod == "":
		return usageError{fmt.Errorf("--container %q given without --pod: a container is chosen within a pod", f.container)}
	}
	note := func(msg string) { fmt.Fprintf(stderr, "note: %s\n", msg) }

	prof, err := profiles.Load(profilePath)
	if err != nil {
		return err
	}
	backend, err := chooseBackend(f.backend, cfs.Options{StateFile: f.state, Note: note}, f.noCeil, stderr)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	node, err := takeNode(ctx, f.waitLock, f.state, stderr)
	if err != nil {
		return err
	}
	defer node.Release()
	tgt, err := target.Resolve(ctx, f.spec())
	if err != nil {
		if errors.Is(err, target.ErrInvalidSpec) {
			return usageError{err}
		}
		return err
	}
	sess, err := pipeline.Apply(ctx, tgt, profilePath, prof, pipeline.ApplyOptions{Backend: backend, For: f.forDur, Demote: f.demote,
		Warn: func(fd profiles.Finding) { fmt.Fprintf(stderr, "%s: %s\n", profilePath, lintFinding(fd)) },
		Note: func(msg string) { fmt.Fprintf(stderr, "%s: %s\n", profilePath, msg) }})
	var refused *pipeline.RefusedError
	switch {
	case errors.As(err, &refused):
		return errors.New(refused.Format(lintFinding))
	case err != nil:
		return flatErr(stateFlagError(err, f.state))
	}
	defer sess.Stop()
	state := ""
	if backend.Name() == backendCFS {
		state = f.state
		if state == "" {
			state = cfs.StatePath(cfs.DefaultStateDir, os.Getpid())
		}
		state = "; state file " + state
	}
	until := "until Ctrl-C"
	if f.forDur > 0 {
		until = fmt.Sprintf("for %s (Ctrl-C reverts early)", f.forDur)
	}
	procs := "processes"
	if len(tgt.Tgids) == 1 {
		procs = "process"
	}
	prof = sess.Plan().Profile
	every := applyReport
	if f.quiet {
		every = 0
	} else {
		fmt.Fprintf(stderr, "applied profile %s with backend %s to %s (%d %s) %s%s\n", prof.ID, backend.Name(), tgt.Description, len(tgt.Tgids), procs, until, state)
	}

	sess.Wait(every, func(stats []scheduler.GroupStats, elapsed time.Duration) {
		fmt.Fprintf(stderr, "%.0fs applied:\n", elapsed.Seconds())
		scheduler.WriteStats(stderr, stats, elapsed)
	})
	sum := sess.Stop()
	reason := sum.Reason.String()
	if sum.Reason == scheduler.Elapsed {
		reason = "--for " + f.forDur.String() + " passed"
	}

	retry := ""
	if state != "" {
		retry = " (the state file is kept: run temper-train apply --revert to retry)"
	}
	errs := sum.Errs(retry)
	if f.statsJSON != "" && sum.StatsErr == nil {
		if err := scheduler.NewReport(sess.Plan(), backend.Name(), tgt.Description, reason, sum).Write(f.statsJSON); err != nil {
			errs = append(errs, fmt.Errorf("--stats-json: %w", err))
		}
	}
	sum.Write(stdout, prof.ID, backend.Name(), tgt.Description, reason)
	return flatErr(errors.Join(errs...))
}

// noCeilingsHelp is --no-ceilings' help, the same on every command.
const noCeilingsHelp = "run the sched_ext backend without its per-pod CPU ceilings from cpu.max (which the kernel does not enforce under sched_ext), to measure what they cost or prevent; refused on any other backend"

// errNoCeilingsCFS refuses --no-ceilings with --backend cfs before anything
// is resolved.
var errNoCeilingsCFS = fmt.Errorf("--no-ceilings: %w: --backend cfs enforces cpu.max in the kernel", pipeline.ErrCeilings)

// chooseBackend returns the backend --backend names (pipeline.ChooseBackend),
// without its CPU ceilings when noCeilings (--no-ceilings), and says on w
// which one auto chose and why.
func chooseBackend(name string, opts cfs.Options, noCeilings bool, w io.Writer) (scheduler.Backend, error) {
	c, err := pipeline.ChooseBackend(name, opts)
	if err == nil && noCeilings {
		if err := pipeline.WithoutCeilings(c.Backend); err != nil {
			return nil, noCeilingsError(err, c.Fallback)
		}
	}
	switch {
	case errors.Is(err, pipeline.ErrBackendName):
		return nil, usageError{fmt.Errorf("--backend %q: want auto, sched_ext or cfs", name)}
	case errors.Is(err, pipeline.ErrNoBackend):
		return nil, fmt.Errorf("--backend auto: %w", err)
	case name == backendSchedExt && errors.Is(err, scheduler.ErrUnsupported):
		return nil, fmt.Errorf("%w (--backend cfs)", err)
	case err != nil:
		return nil, err
	case name != backendAuto:
	case c.Fallback == nil:
		fmt.Fprintln(w, "backend: sched_ext (--backend auto: a sched_ext scheduler can attach here)")
	default:
		fmt.Fprintf(w, "backend: CFS, NOT sched_ext (--backend auto): %v\n", c.Fallback)
		fmt.Fprintln(w, "backend: CFS approximates the profile with affinity, policy and nice: no idle SMT siblings, no reserved cores, no per-thread slices (docs/scheduler.md)")
	}
	return c.Backend, nil
}

// noCeilingsError is pipeline.WithoutCeilings' refusal as --no-ceilings',
// with why auto did not choose sched_ext when it fell back (fallback).
func noCeilingsError(err, fallback error) error {
	if fallback != nil {
		err = fmt.Errorf("%w (--backend auto fell back to it: %v)", err, fallback)
	}
	return usageError{fmt.Errorf("--no-ceilings: %w", err)}
}

// runRevert restores what killed applies left changed, from their state
// files: the one given, or every one in the default directory whose apply
// no longer runs.
func runRevert(cmd *cobra.Command, f applyFlags, a []string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if f.given() || f.container != "" || f.statsJSON != "" || f.state != "" || f.forDur != 0 || f.demote || f.noCeil || cmd.Flags().Changed("backend") {
		return usageError{errors.New("--revert takes only a state file: apply --revert [STATEFILE]")}
	}
	if len(a) > 1 {
		return usageError{fmt.Errorf("--revert takes at most one state file, got %d", len(a))}
	}
	file := ""
	if len(a) == 1 {
		file = a[0]
	}
	r, err := pipeline.Revert(context.Background(), file, f.waitLock, func(msg string) { fmt.Fprintf(stderr, "note: %s\n", msg) })
	for _, path := range r.Files {
		fmt.Fprintf(stdout, "reverted  %s\n", path)
	}
	for _, root := range r.Rigs {
		fmt.Fprintf(stdout, "removed   node rig %s\n", root)
	}
	if r.None && len(r.Rigs) == 0 {
		fmt.Fprintf(stdout, "nothing to revert: no state files in %s\n", cfs.DefaultStateDir)
	}
	if errors.Is(err, lease.ErrHeld) {
		return fmt.Errorf("%w; wait for it with --wait-lock DURATION", err)
	}
	return flatErr(err)
}

// stateFlagError adds to an error of the CFS backend about its state file
// how to fix it with this command's flags (the backend names none).
func stateFlagError(err error, state string) error {
	switch {
	case errors.Is(err, cfs.ErrStateExists):
		if state == "" {
			state = cfs.StatePath(cfs.DefaultStateDir, os.Getpid())
		}
		return fmt.Errorf("%w (temper-train apply --revert %s) or choose another --state", err, state)
	case errors.Is(err, cfs.ErrStateDir):
		return fmt.Errorf("%w (choose another with --state)", err)
	}
	return err
}

// flatErr puts a multi-line error (errors.Join) on one line, keeping a
// one-line error (or nil) as it is.
func flatErr(err error) error {
	if err == nil || !strings.Contains(err.Error(), "\n") {
		return err
	}
	return errors.New(oneLine(err))
}
