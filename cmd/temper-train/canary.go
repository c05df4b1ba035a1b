package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/background"
	"temper.codes/temper-train/refine/bench"
	"temper.codes/temper-train/refine/drift"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/stats"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/synthesize"
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

// Choices of --on-exit.
const (
	onExitRevert = "revert"
	onExitKeep   = "keep"
)

// cycleUnchanged is a cycle that checked no candidate: refine kept nothing
// new, so the last good profile stays.
const cycleUnchanged = "unchanged"

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
              calibration, screen, confirm, Holm, guards; 'temper-train refine
              --help'); the final comparison is against the profile in force, so
              only a profile that beats it is kept      → DIR/cycle-NN/ledger.jsonl
  check       a kept profile goes in, then the guard check: --final-n fresh
              trials per arm of the last good profile (A) against it (B), ABBA,
              judged with refine's rule. The cycle is
                passed        better again, no guard regresses: the new last good
                              profile (committed with --git-commit)
                failed        the metric is worse or a --guard regresses beyond its
                              bound: rolled back at once, the ledger says why
                inconclusive  neither: kept in force, checked again next cycle
                              with twice the trials; when that would pass 40 per
                              arm (refine's cap on n) it fails instead
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
	fl.StringVar(&f.onExit, "on-exit", onExitRevert, "when the loop stops: revert (all scheduling back to stock) or keep (the last good profile in force until the next Ctrl-C/SIGTERM)")
	fl.StringVar(&f.gitRepo, "git-commit", "", "commit each profile that passes to this git repository of profiles (profiles/ID/SHAPE.toml)")
	fl.StringVar(&f.start, "start", "", "the profile in force when the loop starts, e.g. the one the profiles repository holds (default none: stock CFS)")
	fl.StringArrayVar(&f.drills, "drill", nil, "CYCLE:PROFILE.toml: at that cycle put PROFILE in as if refine had accepted it; the guard check must roll it back (repeatable)")
	return cmd
}

// canaryDrill is one --drill.
type canaryDrill struct {
	path string
	prof *profiles.Profile
}

// parseDrills reads --drill CYCLE:PATH values; every drill profile is
// parsed and linted before the loop starts.
func parseDrills(values []string, lint func(*profiles.Profile) []profiles.Finding) (map[int]canaryDrill, error) {
	out := map[int]canaryDrill{}
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
		for _, f := range lint(p) {
			if f.Severity == profiles.Error {
				return nil, fmt.Errorf("--drill %s: %s: a drill profile must pass lint to be applied", v, f)
			}
		}
		out[n] = canaryDrill{path: path, prof: p}
	}
	return out, nil
}

// canaryLoop is the loop's state across cycles.
type canaryLoop struct {
	f       canaryFlags
	cfg     refine.Config
	dir     string
	stderr  io.Writer
	sched   *liveScheduler
	lint    func(*profiles.Profile) []profiles.Finding
	shape   profiles.Shape
	machine ledger.Machine
	argv    []string
	adapter bench.Adapter
	target  []string // the target as command-line flags, for observe
	repo    *profileRepo
	drills  map[int]canaryDrill
	log     *ledger.Writer
	prog    *refineProgress // trial progress; every other line goes above it

	last     *profiles.Profile // the last good profile; nil: stock
	lastPath string
	pending  *pendingCandidate // inconclusive, kept in force
	held     refine.Session    // the profile kept in force between cycles
	heldHash string
	failures int
	undrill  []int // drills the check did not catch
	durs     []time.Duration
}

// pendingCandidate is a candidate whose check was inconclusive: in force,
// checked again with n per arm next cycle.
type pendingCandidate struct {
	prof *profiles.Profile
	path string
	src  []byte
	n    int
}

func runCanary(cmd *cobra.Command, f canaryFlags, command []string) error {
	stderr := cmd.ErrOrStderr()
	switch {
	case f.id == "":
		return usageError{errors.New("no --id: name the profile, e.g. --id my-service")}
	case !f.given() && len(command) == 0:
		return usageError{errors.New("no target: give --pid, --cgroup, --pod, or a command after --")}
	case f.bench == "":
		return usageError{errors.New("no benchmark: give --bench 'CMD ARGS...'")}
	case f.interval <= 0:
		return usageError{errors.New("no --interval: how often a cycle starts, e.g. --interval 10m")}
	case f.onExit != onExitRevert && f.onExit != onExitKeep:
		return usageError{fmt.Errorf("--on-exit %q: want keep or revert", f.onExit)}
	case f.cycles < 0 || f.maxFailures < 0:
		return usageError{errors.New("--cycles and --max-failures: want ≥ 0")}
	case f.resume != "":
		return usageError{errors.New("--resume: a canary loop is not resumed; start a new one (each cycle's ledger stays readable)")}
	case f.backend != backendAuto && f.backend != backendSchedExt && f.backend != backendCFS:
		return usageError{fmt.Errorf("--backend %q: want auto, sched_ext or cfs", f.backend)}
	}
	argv, adapter, err := benchCommand(f.bench, f.adapter)
	if err != nil {
		return err
	}
	cfg, err := f.config()
	if err != nil {
		return usageError{err}
	}
	topo, err := machine.ReadTopology("/")
	if err != nil {
		return fmt.Errorf("CPU topology: %w", err)
	}
	shape, err := machine.ShapeOf(topo)
	if err != nil {
		return fmt.Errorf("machine shape: %w", err)
	}
	note := func(msg string) { fmt.Fprintf(stderr, "note: %s\n", msg) }
	statePath := cfs.StatePath(cfs.DefaultStateDir, os.Getpid())
	backend, err := chooseBackend(f.backend, cfs.Options{StateFile: statePath, Note: onceNotes(note)}, stderr)
	if err != nil {
		return err
	}
	lint := func(p *profiles.Profile) []profiles.Finding {
		return profiles.Lint(p, profiles.LintOptions{Backend: backend.Name(), Shape: &shape})
	}
	drills, err := parseDrills(f.drills, lint)
	if err != nil {
		return err
	}
	var start *profiles.Profile
	if f.start != "" {
		src, err := os.ReadFile(f.start)
		if err != nil {
			return fmt.Errorf("--start: %w", err)
		}
		if start, err = profiles.Parse(f.start, src); err != nil {
			return fmt.Errorf("--start: %w", err)
		}
		if err := lintForRefine(start, f.start, lint, stderr); err != nil {
			return fmt.Errorf("--start: %w", err)
		}
	}
	for c, d := range drills {
		if f.cycles > 0 && c > f.cycles {
			return usageError{fmt.Errorf("--drill %d:%s: the loop stops after --cycles %d", c, d.path, f.cycles)}
		}
	}
	var repo *profileRepo
	if f.gitRepo != "" {
		repo = &profileRepo{dir: f.gitRepo}
		if err := repo.check(); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	spec := f.spec()
	spec.Command, spec.Stdout, spec.Stderr = command, stderr, stderr
	tgt, err := target.Resolve(ctx, spec)
	if err != nil {
		if errors.Is(err, target.ErrInvalidSpec) {
			return usageError{err}
		}
		return err
	}
	defer tgt.Stop(2 * time.Second)
	tf := f.targetFlags
	if len(command) > 0 {
		tf = targetFlags{pid: tgt.Tgids[0]}
		time.Sleep(f.warmup) // a server just started is not listening yet
	}

	dir := f.out
	if dir == "" {
		dir = fmt.Sprintf("canary-%s-%s", f.id, time.Now().Format("20060102-150405"))
	}
	if _, err := makeDir(dir); err != nil {
		return err
	}
	raw, _ := json.Marshal(cfg)
	lw, err := ledger.Create(filepath.Join(dir, "canary.jsonl"), ledger.Header{Start: time.Now().UTC(), Profile: "canary " + f.id,
		Machine: machineID(shape), Backend: backend.Name(), Tools: toolVersions(argv[0], adapter.Name()), Command: os.Args, Bench: argv,
		Adapter: adapter.Name(), Target: tgt.Description, Seed: cfg.Seed, Config: raw})
	if err != nil {
		return err
	}
	defer lw.Close()
	if err := lw.Append(ledger.Note{Text: fmt.Sprintf("pid %d; cfs state file %s", os.Getpid(), statePath)}); err != nil {
		return err
	}

	l := &canaryLoop{f: f, cfg: cfg, dir: dir, stderr: stderr, sched: &liveScheduler{backend: backend, topo: topo, tgt: tgt},
		lint: lint, shape: shape, machine: machineID(shape), argv: argv, adapter: adapter, target: tf.args(), repo: repo,
		drills: drills, log: lw, prog: newRefineProgress(stderr, f.quiet), last: start, lastPath: f.start}
	fmt.Fprintf(stderr, "canary: %s on %s, backend %s, every %s, benchmark %q, metric %s, ledger %s\n",
		f.id, tgt.Description, backend.Name(), f.interval, f.bench, cfg.Metric, lw.Path())
	loopErr := l.run(ctx)
	return l.exit(ctx, loopErr)
}

// say prints a line above the progress line.
func (l *canaryLoop) say(format string, args ...any) {
	l.prog.log("%s", strings.TrimSuffix(fmt.Sprintf(format, args...), "\n"))
}

// onceNotes prints each distinct note once: the backend repeats its notes
// at every apply.
func onceNotes(note func(string)) func(string) {
	seen := map[string]bool{}
	return func(msg string) {
		if !seen[msg] {
			seen[msg] = true
			note(msg)
		}
	}
}

// run runs cycles until --cycles, --max-failures, a signal or an error.
func (l *canaryLoop) run(ctx context.Context) error {
	begin := time.Now()
	for c := 1; l.f.cycles == 0 || c <= l.f.cycles; c++ {
		start := time.Now()
		rec, err := l.cycle(ctx, c)
		rec.End = time.Now().UTC()
		l.durs = append(l.durs, time.Since(start))
		if rec.State != "" {
			rec.Line = l.summary(c, rec, begin)
			l.say("%s", rec.Line)
			if lerr := l.log.Append(rec); lerr != nil && err == nil {
				err = lerr
			}
		}
		if err != nil {
			if rec.State == "" {
				l.log.Append(ledger.Note{Text: fmt.Sprintf("cycle %d cut off: %v", c, err)})
			}
			return err
		}
		if l.f.maxFailures > 0 && l.failures >= l.f.maxFailures {
			return fmt.Errorf("stopped: %d failed cycle(s) (--max-failures %d); the last good profile is %s", l.failures, l.f.maxFailures, l.lastName())
		}
		if l.f.cycles != 0 && c == l.f.cycles {
			break
		}
		// Until the next cycle the profile in force stays in force.
		if err := l.hold(ctx, l.inForce()); err != nil {
			return err
		}
		wait := time.Until(start.Add(l.f.interval))
		if wait > 0 {
			l.say("canary: next cycle at %s\n", time.Now().Add(wait).Format("15:04:05"))
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	return nil
}

func (l *canaryLoop) inForce() *profiles.Profile {
	if l.pending != nil {
		return l.pending.prof
	}
	return l.last
}

func (l *canaryLoop) lastName() string {
	if l.last == nil {
		return "none (stock CFS)"
	}
	h, _ := refine.Hash(l.last)
	return fmt.Sprintf("%s (%s)", l.lastPath, h)
}

func hashOf(p *profiles.Profile) string {
	if p == nil {
		return refine.StockHash
	}
	h, _ := refine.Hash(p)
	return h
}

// hold keeps p in force between cycles (nil: stock).
func (l *canaryLoop) hold(ctx context.Context, p *profiles.Profile) error {
	h := hashOf(p)
	if h == l.heldHash && (l.held != nil || p == nil) {
		return nil
	}
	if err := l.release(); err != nil {
		return err
	}
	if p == nil {
		l.heldHash = refine.StockHash
		return nil
	}
	s, err := l.sched.Apply(ctx, p)
	if err != nil {
		return fmt.Errorf("put %s in force: %w", h, err)
	}
	l.held, l.heldHash = s, h
	return nil
}

func (l *canaryLoop) release() error {
	if l.held == nil {
		return nil
	}
	err := l.held.Stop()
	l.held, l.heldHash = nil, ""
	return err
}

// summary is the cycle's line on the terminal, with the loop's ETA.
func (l *canaryLoop) summary(c int, rec ledger.Cycle, begin time.Time) string {
	var mean time.Duration
	for _, d := range l.durs {
		mean += d
	}
	mean /= time.Duration(len(l.durs))
	per := max(mean, l.f.interval)
	eta := "until stopped"
	of := ""
	if l.f.cycles > 0 {
		of = fmt.Sprintf("/%d", l.f.cycles)
		left := time.Duration(l.f.cycles-c) * per
		if c == l.f.cycles {
			left = 0
		}
		eta = "ETA " + left.Round(time.Second).String()
	}
	state := strings.ToUpper(rec.State)
	if rec.Drill {
		state += " (DRILL)"
	}
	cand := ""
	if rec.Candidate != "" {
		cand = " candidate " + rec.Candidate
	}
	return fmt.Sprintf("cycle %d%s  %-21s%s  in force %s → %s  %s  [%s, %s elapsed, %s]",
		c, of, state, cand, rec.Before, rec.After, rec.Reason, time.Since(time.Time(rec.Start)).Round(time.Second), time.Since(begin).Round(time.Second), eta)
}

// cycle runs one cycle; the record's State is empty when the cycle was cut
// off before it judged anything.
func (l *canaryLoop) cycle(ctx context.Context, c int) (ledger.Cycle, error) {
	rec := ledger.Cycle{Cycle: c, Start: time.Now().UTC(), Before: hashOf(l.last)}
	rec.After = rec.Before
	cdir := filepath.Join(l.dir, fmt.Sprintf("cycle-%02d", c))
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return rec, err
	}
	// Observe the workload as it runs: under the profile in force.
	if err := l.hold(ctx, l.inForce()); err != nil {
		return rec, err
	}
	l.say("canary: cycle %d: observe, analyze, synthesize (profile in force: %s)\n", c, hashOf(l.inForce()))
	fresh, freshPath, a, err := l.synthesize(ctx, cdir)
	if err != nil {
		return rec, err
	}
	if l.last != nil {
		fs, err := drift.Find(a, l.inForce(), fresh)
		if err != nil {
			return rec, err
		}
		for _, x := range fs {
			rec.Drift = append(rec.Drift, x.String())
			l.say("canary: cycle %d: drift: %s\n", c, x)
		}
		if len(fs) > 0 {
			l.say("canary: cycle %d: the workload left the profile in force: re-synthesized (%s)\n", c, freshPath)
		}
	}
	if err := l.release(); err != nil { // refine and the check apply their own arms
		return rec, err
	}

	// The candidate: a drill, a pending one checked again, or what refine
	// keeps.
	var cand *profiles.Profile
	var candSrc []byte
	n := l.cfg.FinalN
	lw, lpath, err := l.cycleLedger(cdir, c)
	if err != nil {
		return rec, err
	}
	defer lw.Close()
	rec.Ledger = lpath
	var refineRes *refine.Result
	var refined *profiles.Profile // what refine started from; nil when it did not run
	switch d, drill := l.drills[c]; {
	case drill:
		cand, rec.Drill, rec.CandidatePath = d.prof, true, d.path
		candSrc, _ = os.ReadFile(d.path)
		lw.Append(ledger.Note{Text: fmt.Sprintf("DRILL: %s goes in as if refine had accepted it; the guard check must roll it back", d.path)})
		l.say("canary: cycle %d: DRILL: %s goes in as if refine had accepted it\n", c, d.path)
	case l.pending != nil && len(rec.Drift) == 0:
		cand, candSrc, rec.CandidatePath, n = l.pending.prof, l.pending.src, l.pending.path, l.pending.n
		lw.Append(ledger.Note{Text: fmt.Sprintf("the inconclusive candidate %s is checked again with n=%d per arm", hashOf(cand), n)})
	default:
		if l.pending != nil {
			lw.Append(ledger.Note{Text: fmt.Sprintf("drift: the inconclusive candidate %s is dropped; refine starts from the fresh synthesis", hashOf(l.pending.prof))})
			l.pending = nil
		}
		base, basePath := l.last, l.lastPath
		if base == nil || len(rec.Drift) > 0 {
			base, basePath = fresh, freshPath
		}
		l.say("canary: cycle %d: refine %s against %s\n", c, basePath, map[bool]string{true: "stock CFS", false: "the profile in force " + hashOf(l.last)}[l.last == nil])
		refined = base
		refineRes, err = l.refine(ctx, lw, cdir, base)
		if ctx.Err() == nil && (errors.Is(err, refine.ErrNoisy) || errors.Is(err, refine.ErrBudget)) {
			// This cycle could not measure; the next may (a quieter
			// machine): nothing changes, the loop goes on.
			rec.State = cycleUnchanged
			rec.Reason = "refine measured nothing: " + err.Error()
			return rec, l.endCycle(lw, cdir, rec.Reason, refined)
		}
		if err != nil {
			return rec, err
		}
		if refineRes.Kept {
			path := filepath.Join(cdir, "refined", refineRes.Refined.ID, l.shape.Key()+".toml")
			if err := writeRefined(path, refineRes, lpath, l.lint); err != nil {
				return rec, err
			}
			if candSrc, err = os.ReadFile(path); err != nil {
				return rec, err
			}
			if cand, err = profiles.Parse(path, candSrc); err != nil {
				return rec, err
			}
			rec.CandidatePath = path
		}
	}
	if cand == nil {
		rec.State = cycleUnchanged
		rec.Reason = "refine kept nothing new: " + refineRes.Stopped
		for _, d := range refineRes.Final {
			rec.Reason += fmt.Sprintf("; final vs %s at bg=%d: %s %s [%s %s], p=%.3g, %s", refineRes.Reference, d.Bg, d.Metric,
				stats.FormatShift(float64(d.Effect.Center)), stats.FormatShift(float64(d.Effect.Lo)), stats.FormatShift(float64(d.Effect.Hi)), float64(d.P), d.Verdict)
		}
		return rec, l.endCycle(lw, cdir, rec.Reason, refined)
	}
	rec.Candidate = hashOf(cand)

	chk, err := refine.CheckCandidate(ctx, l.cfg, l.last, cand, n, "check", l.env(lw, cdir))
	if err != nil {
		return rec, err
	}
	for _, d := range chk.Decisions {
		rec.Check = append(rec.Check, d.Line)
	}
	rec.State, rec.Reason = string(chk.State), chk.Reason
	switch {
	case rec.Drill:
		// A drill is never kept, whatever the check found.
		if chk.State != refine.Failed {
			l.undrill = append(l.undrill, c)
			rec.Reason = "DRILL NOT CAUGHT (" + chk.Reason + "); the drill profile is removed anyway"
		} else {
			l.failures++
		}
	case chk.State == refine.Passed:
		msg := l.commitMessage(c, cand, chk, refineRes, lpath)
		l.last, l.lastPath, l.pending = cand, rec.CandidatePath, nil
		if l.repo != nil {
			commit, err := l.repo.commit(candSrc, l.lint, msg)
			if err != nil {
				rec.Reason += "; NOT COMMITTED: " + err.Error()
				l.say("canary: cycle %d: %v\n", c, err)
			} else {
				rec.Commit = commit
				rec.Reason += "; committed " + commit[:min(12, len(commit))]
			}
		}
	case chk.State == refine.Failed:
		l.failures++
		l.pending = nil
	case chk.State == refine.Inconclusive:
		next := 2 * n
		if next > l.cfg.MaxN {
			rec.State = string(refine.Failed)
			rec.Reason = fmt.Sprintf("rolled back: inconclusive at n=%d per arm and the next check would need %d > %d (the largest n)", n, next, l.cfg.MaxN)
			l.failures++
			l.pending = nil
		} else {
			l.pending = &pendingCandidate{prof: cand, path: rec.CandidatePath, src: candSrc, n: next}
			rec.Reason += fmt.Sprintf("; kept in force, checked again next cycle with n=%d", next)
		}
	}
	rec.After = hashOf(l.last)
	if l.pending != nil {
		rec.After = hashOf(l.pending.prof) + " (inconclusive)"
	}
	return rec, l.endCycle(lw, cdir, rec.State+": "+rec.Reason, refined)
}

// endCycle closes the cycle's ledger and writes its report when refine ran
// (from base).
func (l *canaryLoop) endCycle(lw *ledger.Writer, cdir, reason string, base *profiles.Profile) error {
	if err := lw.Append(ledger.End{Reason: reason}); err != nil {
		return err
	}
	if base != nil {
		return writeReport(cdir, lw.Path(), false, base)
	}
	return nil
}

// synthesize runs observe (the benchmark running), analyze and synthesize
// into cdir and returns the fresh profile and the analysis.
func (l *canaryLoop) synthesize(ctx context.Context, cdir string) (*profiles.Profile, string, *analyze.Analysis, error) {
	stage := func(name string, args ...string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		root := newRootCmd(io.Discard, l.stderr)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return ctx.Err()
	}
	obs := filepath.Join(cdir, "observe")
	stopLoad, err := startLoad(l.f.bench, l.f.adapter, l.f.timeout)
	if err != nil {
		return nil, "", nil, err
	}
	err = stage("observe", append([]string{"observe", "--duration", l.f.duration.String(), "--out", obs, "-q"}, l.target...)...)
	runs, loadErr := stopLoad()
	if err != nil {
		return nil, "", nil, err
	}
	if runs == 0 {
		return nil, "", nil, fmt.Errorf("observe: the benchmark finished no run while the workload was traced: %w", cmp(loadErr, errors.New("it ran for the whole trace: lengthen --duration")))
	}
	analysis := filepath.Join(cdir, "analysis.json")
	if err := stage("analyze", "analyze", "--snapshot", filepath.Join(obs, "snapshot.json"), "--json", analysis, filepath.Join(obs, "trace.pftrace")); err != nil {
		return nil, "", nil, err
	}
	profDir := filepath.Join(cdir, "profiles")
	if err := stage("synthesize", "synthesize", analysis, "--id", l.f.id, "--snapshot", filepath.Join(obs, "snapshot.json"), "--out", profDir); err != nil {
		return nil, "", nil, err
	}
	path := filepath.Join(profDir, l.f.id, l.shape.Key()+".toml")
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, "", nil, fmt.Errorf("synthesize: %w", err)
	}
	p, err := profiles.Parse(path, src)
	if err != nil {
		return nil, "", nil, err
	}
	a, err := synthesize.LoadAnalysis(analysis)
	if err != nil {
		return nil, "", nil, err
	}
	return p, path, a, nil
}

// cycleLedger starts the cycle's ledger: refine's format, so that its
// report and every trial read the same as a refine run's.
func (l *canaryLoop) cycleLedger(cdir string, c int) (*ledger.Writer, string, error) {
	raw, _ := json.Marshal(l.cfg)
	src, _ := json.Marshal(struct{ Cycle int }{c})
	sum := sha256.Sum256(src)
	path := filepath.Join(cdir, "ledger.jsonl")
	lw, err := ledger.Create(path, ledger.Header{Start: time.Now().UTC(), Profile: fmt.Sprintf("canary %s cycle %d", l.f.id, c),
		ProfileHash: hex.EncodeToString(sum[:]), Machine: l.machine, Backend: l.sched.backend.Name(), Tools: toolVersions(l.argv[0], l.adapter.Name()),
		Command: os.Args, Bench: l.argv, Adapter: l.adapter.Name(), Target: l.sched.tgt.Description, Seed: l.cfg.Seed, Config: raw})
	return lw, path, err
}

// env is refine's environment for one cycle.
func (l *canaryLoop) env(lw *ledger.Writer, cdir string) refine.Env {
	prog := l.prog
	return refine.Env{
		Scheduler: l.sched,
		Lint:      l.lint,
		Ledger:    lw,
		TrialDir:  filepath.Join(cdir, "trials"),
		Log:       prog.log,
		Progress:  prog.update,
		Bench: func(ctx context.Context, trialDir string) (map[string]float64, error) {
			r, err := bench.Run(ctx, bench.Command{Argv: l.argv, Adapter: l.adapter, Timeout: l.f.timeout, Dir: trialDir})
			if err != nil {
				return nil, err
			}
			return r.Metrics, nil
		},
		Background: func(n int) (refine.Spinners, error) { return background.Start(n) },
	}
}

// refine runs refine from base against the last good profile.
func (l *canaryLoop) refine(ctx context.Context, lw *ledger.Writer, cdir string, base *profiles.Profile) (*refine.Result, error) {
	env := l.env(lw, cdir)
	env.Reference = l.last
	res, err := refine.Run(ctx, l.cfg, base, env)
	if err != nil {
		return res, fmt.Errorf("refine: %w", err)
	}
	return res, nil
}

// commitMessage summarises the evidence for a profile that passed.
func (l *canaryLoop) commitMessage(c int, cand *profiles.Profile, chk *refine.Check, res *refine.Result, ledgerPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s: canary cycle %d passed (%s)\n\n", cand.ID, l.shape.Key(), c, hashOf(cand))
	fmt.Fprintf(&b, "Guard check against the last good profile %s, fresh ABBA trials (mann-whitney-u, alpha %g):\n", l.lastName(), l.cfg.Alpha)
	for _, d := range chk.Decisions {
		fmt.Fprintf(&b, "  %s at bg=%d: %.4g -> %.4g, delta %+.1f%% [%+.1f%%, %+.1f%%], n=%d+%d, p=%.3g\n",
			d.Metric, d.Bg, float64(d.Base.Center), float64(d.Cand.Center), 100*float64(d.Effect.Center), 100*float64(d.Effect.Lo), 100*float64(d.Effect.Hi), d.N[0], d.N[1], float64(d.P))
		for _, g := range d.Guards {
			fmt.Fprintf(&b, "  guard %s: %+.1f%% (bound -%g%%), p=%.3g\n", g.Metric, 100*float64(g.Effect), 100*g.Bound, float64(g.P))
		}
	}
	if res != nil {
		fmt.Fprintf(&b, "Refine: %d step(s) accepted; %s\n", len(res.Accepted), res.Stopped)
		for _, s := range res.Accepted {
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	fmt.Fprintf(&b, "Ledger: %s\n", ledgerPath)
	return b.String()
}

// exit puts scheduling where --on-exit says and returns the loop's error.
func (l *canaryLoop) exit(ctx context.Context, loopErr error) error {
	interrupted := ctx.Err() != nil
	if interrupted {
		loopErr = fmt.Errorf("interrupted (%v); the ledger %s keeps every cycle so far", ctx.Err(), l.log.Path())
	}
	if len(l.undrill) > 0 && loopErr == nil {
		loopErr = fmt.Errorf("the guard check did not catch the drill at cycle(s) %v", l.undrill)
	}
	end := ledger.End{Reason: "finished"}
	if loopErr != nil {
		end.Reason = loopErr.Error()
	}
	if l.last != nil {
		end.Refined = l.lastPath
	}
	l.log.Append(end)
	if l.f.onExit == onExitKeep && l.last != nil {
		// Back to the last good profile, kept in force until the next
		// signal or the target's exit.
		kctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := l.release(); err != nil {
			return errors.Join(loopErr, fmt.Errorf("revert: %w", err))
		}
		if err := l.hold(kctx, l.last); err != nil {
			return errors.Join(loopErr, err)
		}
		l.say("canary: the last good profile %s stays in force until Ctrl-C, SIGTERM or the target exits\n", l.lastName())
		if loopErr != nil {
			l.say("canary: %v\n", loopErr)
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
	wait:
		for {
			select {
			case <-kctx.Done():
				break wait
			case <-t.C:
				if l.sched.Alive() != nil {
					break wait
				}
			}
		}
	}
	if err := l.release(); err != nil {
		return errors.Join(loopErr, fmt.Errorf("revert: %w", err))
	}
	l.say("canary: scheduling reverted; last good profile: %s\n", l.lastName())
	return loopErr
}
