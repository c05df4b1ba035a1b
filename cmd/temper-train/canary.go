package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/canary"
	"temper.codes/temper-train/internal/console"
	"temper.codes/temper-train/pipeline"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/target"
)

// canaryFlags are the canary loop's settings: train's (refine's, --id,
// --duration) and the loop's own.
type canaryFlags struct {
	trainFlags
	interval    time.Duration
	cycles      int
	maxFailures int
	onExit      string
	gitRepo     string
	drills      []string
	start       string
}

func newCanaryCmd() *cobra.Command {
	var f canaryFlags
	cmd := &cobra.Command{
		Use:   "canary (--pid PID | --cgroup PATH | --pod NS/NAME | -- CMD [ARGS...]) --bench 'CMD ...' --id ID --interval D",
		Short: "Train a live workload in a loop: keep the last good profile in force, roll back what regresses",
		Long: `Canary repeats train on a live workload every --interval and keeps the last good
profile in force in between (none at first: stock CFS; --start PROFILE begins
from one, e.g. the profiles repository's). Each cycle:

  observe     trace the workload under the profile in force for --duration,
              the benchmark running                        → DIR/cycle-NN/observe/
  analyze     → DIR/cycle-NN/analysis.json
  drift       compare the fresh analysis with the profile in force: a group's
              threads changed class, a matcher matches nothing, a new hot thread
              family lands in the catch-all. On drift (or with no profile yet) the
              candidate is the fresh synthesis; otherwise the profile in force.
  synthesize  → DIR/cycle-NN/profiles/ID/SHAPE.toml
  refine      climb from the candidate against the profile in force (refine's
              races and its one final comparison; 'temper-train refine
              --help'); the final is against the profile in force, so
              only a profile that beats it is kept      → DIR/cycle-NN/ledger.jsonl
  check       a kept profile goes in, then the guard check: --final-n (default 8)
              fresh trials per arm of the last good profile (A) against it (B),
              ABBA, judged as refine's final is. The cycle is
                passed        better again, no harm left possible: the new last
                              good profile (committed with --git-commit)
                failed        harm shown: the metric or a --guard lost more than
                              its tolerance: rolled back at once, the ledger says why
                inconclusive  neither: kept in force, checked again next cycle
                              with twice the trials, each check held to its
                              share of --alpha (spent over n, 2n, 4n within
                              40 per arm, refine's cap on n); inconclusive
                              at the last, it fails
                unchanged     refine kept nothing new

--max-failures N stops the loop after N failed cycles (0: never); --cycles N
after N cycles (0: until Ctrl-C).

--git-commit REPO commits each profile that passes to REPO/profiles/ID/SHAPE.toml
(synthesize's layout), one commit each, the message giving the evidence (metric,
n, shift with its interval, p, the ledger). It uses the git command, so your git
identity, signing and hooks apply. A profile that fails lint is never committed;
a REPO with uncommitted changes or a merge under way is a one-line error and
nothing is forced.

--drill CYCLE:PROFILE.toml is the fire drill that proves rollback: at that cycle
PROFILE goes in as if refine had accepted it (no refine that cycle), marked as a
drill in the ledger and on the terminal; the guard check must catch it. A drill
is never kept: if the check does not fail it, canary says so and exits non-zero
at the end.

Ctrl-C or SIGTERM stops the cycle; the trial under way is cut off, the ledger
keeps everything so far. --on-exit revert (default) then reverts all scheduling
and exits; --on-exit keep puts the last good profile back in force and keeps it
there (as apply does) until the next Ctrl-C/SIGTERM or the target exits, then
reverts. After a SIGKILL, 'temper-train apply --revert'.

Outputs in --out DIR (default ./canary-ID-TIME): canary.jsonl (the loop's ledger:
one "cycle" record per cycle with state, reason, drift, check lines, commit) and
cycle-NN/ (each cycle's observe, analysis, profiles, refine ledger and REPORT.md).`,
		Example: `  # the demo workload, 3 cycles, a drill at cycle 2 that must be rolled back
  bin/workload --stats /tmp/wl.stats &
  git init -q /tmp/profiles-repo
  temper-train canary --pid $! --id demo-workload --interval 1m --cycles 3 --duration 3s \
      --bench 'scripts/demo-bench.sh /tmp/wl.stats 1' --adapter jsonl --metric p99_ms --guard p50_ms:-10% \
      --max-trials 40 --drill 2:testdata/drills/demo-harmful.toml --git-commit /tmp/profiles-repo

  # Redis under redis-benchmark: scripts/canary-redis.sh`,
		RunE: func(cmd *cobra.Command, a []string) error {
			command, err := commandAfterDash(cmd, a)
			if err != nil {
				return err
			}
			return runCanary(cmd, f, command)
		},
	}
	f.refineFlags.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "profile id: lowercase letters, digits and '-' (required)")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "how long each cycle's observe traces the workload")
	fl.DurationVar(&f.interval, "interval", 0, "time from one cycle's start to the next's (a longer cycle is followed at once; required)")
	fl.IntVar(&f.cycles, "cycles", 0, "stop after this many cycles (0: until Ctrl-C, SIGTERM or --max-failures)")
	fl.IntVar(&f.maxFailures, "max-failures", 3, "stop after this many failed (rolled back) cycles (0: never)")
	fl.StringVar(&f.onExit, "on-exit", string(canary.Revert), "when the loop stops: revert (all scheduling back to stock) or keep (the last good profile in force until the next Ctrl-C/SIGTERM)")
	fl.StringVar(&f.gitRepo, "git-commit", "", "commit each profile that passes to this git repository of profiles (profiles/ID/SHAPE.toml)")
	fl.StringVar(&f.start, "start", "", "the profile in force when the loop starts, e.g. the one the profiles repository holds (default none: stock CFS)")
	fl.StringArrayVar(&f.drills, "drill", nil, "CYCLE:PROFILE.toml: at that cycle put PROFILE in as if refine had accepted it; the guard check must roll it back (repeatable)")
	return cmd
}

// parseDrills reads --drill CYCLE:PATH values; every drill profile is
// parsed and linted before the loop starts.
func parseDrills(values []string, lint func(*profiles.Profile) []profiles.Finding) (map[int]canary.Drill, error) {
	out := map[int]canary.Drill{}
	for _, v := range values {
		c, path, ok := strings.Cut(v, ":")
		n, err := strconv.Atoi(c)
		if !ok || err != nil || n < 1 || path == "" {
			return nil, usageError{fmt.Errorf("--drill %q: want CYCLE:PROFILE.toml with CYCLE ≥ 1, e.g. 3:harmful.toml", v)}
		}
		if _, dup := out[n]; dup {
			return nil, usageError{fmt.Errorf("--drill: two drills at cycle %d", n)}
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--drill %s: %w", v, err)
		}
		p, err := profiles.Parse(path, src)
		if err != nil {
			return nil, fmt.Errorf("--drill: %w", err)
		}
		if f, bad := profiles.FirstError(lint(p)); bad {
			return nil, fmt.Errorf("--drill %s: %s: a drill profile must pass lint to be applied", v, f)
		}
		out[n] = canary.Drill{Path: path, Profile: p}
	}
	return out, nil
}

func runCanary(cmd *cobra.Command, f canaryFlags, command []string) error {
	stderr := cmd.ErrOrStderr()
	onExit := canary.OnExit(f.onExit)
	switch {
	case f.id == "":
		return usageError{errors.New("no --id: name the profile, e.g. --id my-service")}
	case !f.given() && len(command) == 0:
		return usageError{errors.New("no target: give --pid, --cgroup, --pod, or a command after --")}
	case f.bench == "":
		return usageError{errors.New("no benchmark: give --bench 'CMD ARGS...'")}
	case f.equiv != "":
		return usageError{errors.New("--equivalence: the canary refines the profile in force each cycle; check a profile with refine --equivalence")}
	case f.interval <= 0:
		return usageError{errors.New("no --interval: how often a cycle starts, e.g. --interval 10m")}
	case onExit != canary.Revert && onExit != canary.Keep:
		return usageError{fmt.Errorf("--on-exit %q: want keep or revert", f.onExit)}
	case f.cycles < 0 || f.maxFailures < 0:
		return usageError{errors.New("--cycles and --max-failures: want ≥ 0")}
	case f.resume != "":
		return usageError{errors.New("--resume: a canary loop is not resumed; start a new one (each cycle's ledger stays readable)")}
	case f.backend != backendAuto && f.backend != backendSchedExt && f.backend != backendCFS:
		return usageError{fmt.Errorf("--backend %q: want auto, sched_ext or cfs", f.backend)}
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
	prog := console.NewLine(stderr, f.quiet, 10*time.Second)
	statePath := cfs.StatePath(cfs.DefaultStateDir, os.Getpid())
	copts := cfs.Options{StateFile: statePath, Note: console.Once(func(msg string) { prog.Log("note: %s", msg) })}
	backend, err := chooseBackend(f.backend, copts, f.noCeilings, stderr)
	if err != nil {
		return err
	}
	// The target is resolved once the flags and files are known good and
	// the node is ours; lint needs only the backend and this machine.
	live, err := pipeline.NewLive(backend, nil, bc)
	if err != nil {
		return err
	}
	live.Version, live.Log = version, prog.Log
	live.Progress = func(r refine.Progress) { prog.Update(r.String()) }
	drills, err := parseDrills(f.drills, live.Lint)
	if err != nil {
		return err
	}
	for c, d := range drills {
		if f.cycles > 0 && c > f.cycles {
			return usageError{fmt.Errorf("--drill %d:%s: the loop stops after --cycles %d", c, d.Path, f.cycles)}
		}
	}
	start, err := readStart(f.start, live.Lint, prog)
	if err != nil {
		return err
	}
	var repo canary.Committer
	if f.gitRepo != "" {
		r, err := canary.OpenGitRepo(f.gitRepo)
		if err != nil {
			return fmt.Errorf("--git-commit: %w", err)
		}
		repo = r
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Released last: after the loop's final revert, or after the profile
	// --on-exit keep kept in force is reverted.
	tgt, release, err := f.takeTarget(ctx, command, stderr)
	if err != nil {
		return err
	}
	defer release()
	live.Target, live.Rig, live.Bench = tgt, f.rig, f.clientBench(live.Bench)
	bc = live.Bench
	if _, onCFS := backend.(*cfs.Backend); onCFS && f.rig != nil {
		// The rig exists now: whole cores a profile reserves are taken
		// from the rig's pods only, never from the client's cpuset (a
		// client narrowed onto a spinner's CPU can starve, as refine's
		// backend knows too).
		copts.CpusetScope = f.rig.CpusetScope()
		backend = cfs.New(copts)
		live.Backend = backend
	}
	if len(command) > 0 {
		time.Sleep(f.warmup) // a server just started is not listening yet
	}

	dir := f.out
	if dir == "" {
		dir = fmt.Sprintf("canary-%s-%s", f.id, time.Now().Format("20060102-150405"))
	}
	if _, err := pipeline.MakeDir(dir); err != nil {
		return err
	}
	env := canary.Env{
		Synthesize: func(ctx context.Context, cdir string) (*profiles.Profile, string, *analyze.Analysis, error) {
			return freshProfile(ctx, tgt, pipeline.FreshOptions{ID: f.id, Dir: cdir, Duration: f.duration, Bench: bc}, prog)
		},
		Scheduler: live.Scheduler(),
		Lint:      live.Lint,
		RefineEnv: live.Env,
		Header: func(profile, profileHash string, cfg refine.Config) ledger.Header {
			return live.Header(profile, profileHash, "", cfg)
		},
		Started: func(lw *ledger.Writer) error {
			return lw.Append(ledger.Process{Pid: os.Getpid(), StateFile: statePath})
		},
		WriteRefined: func(path string, res *refine.Result, ledgerPath string) error {
			return pipeline.WriteRefined(path, res, ledgerPath, live.Lint)
		},
		Report: func(cdir, ledgerPath string, base *profiles.Profile) error {
			return pipeline.WriteReport(cdir, ledgerPath, live.OpenLoop(), base)
		},
		Repo: repo,
		Log:  prog.Log,
		KeepUntil: func() (context.Context, context.CancelFunc) {
			return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		},
	}
	fmt.Fprintf(stderr, "canary: %s on %s, backend %s, every %s, benchmark %q, metric %s, ledger %s\n",
		f.id, tgt.Description, backend.Name(), f.interval, f.bench, cfg.Metric, filepath.Join(dir, canary.LedgerFile))
	return canary.Run(ctx, canary.Config{ID: f.id, Dir: dir, Refine: cfg, Interval: f.interval, Cycles: f.cycles, MaxFailures: f.maxFailures,
		OnExit: onExit, Drills: drills, Start: start, StartPath: f.start}, env)
}

// readStart reads and lints --start (nil when not given): a lint error
// refuses it, warnings are printed.
func readStart(path string, lint func(*profiles.Profile) []profiles.Finding, prog *console.Line) (*profiles.Profile, error) {
	if path == "" {
		return nil, nil
	}
	p, err := profiles.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--start: %w", err)
	}
	fs := lint(p)
	if f, bad := profiles.FirstError(fs); bad {
		return nil, fmt.Errorf("--start: %s: %s; nothing was changed", path, f)
	}
	for _, f := range fs {
		prog.Log("%s: %s", path, f)
	}
	return p, nil
}

// freshProfile is a cycle's observe, analyze and synthesize: the fresh
// profile as written (read back, so that it is what a repository would
// get), its file and the analysis.
func freshProfile(ctx context.Context, tgt *target.Target, opts pipeline.FreshOptions, prog *console.Line) (*profiles.Profile, string, *analyze.Analysis, error) {
	fr, err := pipeline.Fresh(ctx, tgt, opts)
	if errors.Is(err, pipeline.ErrLoadTooLong) {
		return nil, "", nil, fmt.Errorf("%w: lengthen --duration", err)
	}
	if err != nil {
		return nil, "", nil, err
	}
	for _, w := range fr.Profile.Warnings {
		prog.Log("temper-train: warning: %s", w)
	}
	for _, fd := range fr.Profile.Lint {
		prog.Log("temper-train: lint: %s", fd)
	}
	p, err := profiles.Load(fr.Profile.Path)
	if err != nil {
		return nil, "", nil, fmt.Errorf("synthesize: %w", err)
	}
	return p, fr.Profile.Path, fr.Analysis.Analysis, nil
}
