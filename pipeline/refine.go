package pipeline

import (
	"temper.codes/temper-train/synthesize"

	"errors"

	"temper.codes/temper-train/rig"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/background"
	"temper.codes/temper-train/refine/bench"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/report"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/target"
)

// RefineOptions say how to refine a profile on a live workload.
type RefineOptions struct {
	// Config is the engine's configuration; a resumed run uses the
	// ledger's instead, so that it replays the same plan.
	Config refine.Config
	// Backend names the backend (BackendAuto, …; a resumed run uses the
	// ledger's). ChooseBackend picks it (nil: the package's
	// ChooseBackend, silently), e.g. to say which it chose.
	Backend       string
	ChooseBackend func(name string, opts cfs.Options) (scheduler.Backend, error)
	Bench         bench.Command // with its Timeout
	BenchLine     string        // the benchmark as given, for the opening line
	// Resume is a ledger to continue: recorded trials are not run again,
	// a trial cut off is, and what the dead run left applied is undone.
	Resume string
	// Dir receives the ledger, REPORT.md and the refined profile ("":
	// the resumed ledger's directory, else refine-<id>-<time>); Ledger is
	// the ledger's path ("": Dir/ledger.jsonl).
	Dir, Ledger string
	Version     string // temper-train's, for the ledger
	// Note receives notes (from the backend too, repeated at each apply;
	// wrap it with console.Once); Log the run's lines; Progress its state.
	Note     func(string)
	Log      func(format string, args ...any)
	Progress func(refine.Progress)
	// Rig is the node-shaped rig the target and the benchmark's client run
	// in (nil: none); NoTier leaves the tier arm out of a new run that has
	// one.
	Rig    *rig.Rig
	NoTier bool
	// NoCeilings turns the sched_ext backend's per-pod CPU ceilings off
	// (WithoutCeilings); a run on another backend is refused. A resumed
	// run keeps its ledger's setting (Header.NoCeilings).
	NoCeilings bool
}

// RefineRun is what a refine run left.
type RefineRun struct {
	Dir     string
	Ledger  string
	Refined string // the refined profile's path; "" when none was kept
	Config  refine.Config
	Result  *refine.Result
}

// ResumeError is a ledger that cannot be resumed (the message names it).
type ResumeError struct{ Err error }

func (e *ResumeError) Error() string { return e.Err.Error() }
func (e *ResumeError) Unwrap() error { return e.Err }

// Refine measures the profile at path against stock CFS on the target with
// the benchmark and writes what it keeps. Every path after the first
// change reverts. A run cut short still writes its report; when ctx ended
// it, the error wraps ctx.Err().
func Refine(ctx context.Context, tgt *target.Target, path string, opts RefineOptions) (*RefineRun, error) {
	note := opts.Note
	if note == nil {
		note = func(string) {}
	}
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	prof, err := profiles.Parse(path, src)
	if err != nil {
		return nil, err
	}
	// The ledger names the profile by refine.Hash, as every arm and the
	// canary's cycle ledgers do: a comment changed in the file is the same
	// profile.
	hash, err := refine.Hash(prof)
	if err != nil {
		return nil, err
	}
	_, shape, err := thisMachine()
	if err != nil {
		return nil, err
	}

	cfg, backendName := opts.Config, opts.Backend
	var old *ledger.Ledger
	if opts.Resume != "" {
		// A live run's ledger is refused before anything is read or
		// reaped: its spinners and its trials are its own.
		if err := ledger.CheckUnlocked(opts.Resume); err != nil {
			return nil, err
		}
		if old, err = ledger.Read(opts.Resume); err != nil {
			return nil, err
		}
		if b := opts.Backend; b != "" && b != BackendAuto && b != old.Header.Backend {
			return nil, &ResumeError{fmt.Errorf("%w: %s was made with backend %q, this run asks for %q; start a new ledger", ledger.ErrMismatch, opts.Resume, old.Header.Backend, b)}
		}
		if old.End != nil {
			return nil, &ResumeError{fmt.Errorf("%s: that run finished (%s); nothing to resume", opts.Resume, old.End.Reason)}
		}
		if err := json.Unmarshal(old.Header.Config, &cfg); err != nil {
			return nil, &ResumeError{fmt.Errorf("%s line 1: config: %v", opts.Resume, err)}
		}
		backendName = old.Header.Backend
	}

	statePath := cfs.StatePath(cfs.DefaultStateDir, os.Getpid())
	choose := opts.ChooseBackend
	if choose == nil {
		choose = func(name string, o cfs.Options) (scheduler.Backend, error) {
			c, err := ChooseBackend(name, o)
			return c.Backend, err
		}
	}
	copts := cfs.Options{StateFile: statePath, Note: note}
	if opts.Rig != nil {
		copts.CpusetScope = opts.Rig.CpusetScope()
	}
	backend, err := choose(backendName, copts)
	if err != nil {
		return nil, err
	}
	if opts.NoCeilings || (old != nil && old.Header.NoCeilings) {
		if err := WithoutCeilings(backend); err != nil {
			return nil, err
		}
	}
	live, err := NewLive(backend, tgt, opts.Bench)
	if err != nil {
		return nil, err
	}
	live.Version, live.Log, live.Progress, live.Rig = opts.Version, logf, opts.Progress, opts.Rig
	if old == nil {
		cfg.Tier = live.TierArm(opts.NoTier || cfg.Equivalence > 0, note)
	}
	if old != nil {
		// Trials of two experiments never mix in one ledger: the same
		// profile, machine, target, benchmark, backend and tools.
		if err := old.Check(opts.Resume, live.Header(path, hash, "", cfg).Identity()); err != nil {
			return nil, err
		}
		note(fmt.Sprintf("resuming %s: %d trials recorded, %d cut off; its configuration (seed %d, metric %s, ladder %v) replaces the flags",
			opts.Resume, len(old.Done()), len(old.Open()), cfg.Seed, cfg.Metric, cfg.Ladder))
	}
	var alts []refine.Alternative
	if cfg.Equivalence == 0 { // an equivalence check races nothing
		if alts, err = Portfolio(path); err != nil {
			return nil, err
		}
	}
	fs := live.Lint(prof)
	if err := lintError(fs, "%s", path); err != nil {
		return nil, fmt.Errorf("%w; nothing was changed", err)
	}
	for _, f := range fs {
		logf("%s: %s", path, f)
	}

	dir := opts.Dir
	if dir == "" && old != nil {
		dir = filepath.Dir(opts.Resume)
	}
	if dir == "" {
		dir = fmt.Sprintf("refine-%s-%s", prof.ID, time.Now().Format("20060102-150405"))
	}
	if _, err := MakeDir(dir); err != nil {
		return nil, err
	}
	var lw *ledger.Writer
	env := refine.Env{}
	if old != nil {
		if lw, err = ledger.Append(opts.Resume); err != nil {
			return nil, err
		}
		env = live.Env(lw, filepath.Join(dir, "trials"))
		if err := resume(&env, lw, old, note); err != nil {
			lw.Close()
			return nil, err
		}
	} else {
		lpath := opts.Ledger
		if lpath == "" {
			lpath = filepath.Join(dir, "ledger.jsonl")
		}
		if lw, err = ledger.Create(lpath, live.Header(path, hash, gitCommitOf(path), cfg)); err != nil {
			return nil, err
		}
		env = live.Env(lw, filepath.Join(dir, "trials"))
	}
	defer lw.Close()
	if err := lw.Append(ledger.Process{Pid: os.Getpid(), StateFile: statePath}); err != nil {
		return nil, err
	}

	adapter := ""
	if opts.Bench.Adapter != nil {
		adapter = opts.Bench.Adapter.Name()
	}
	logf("refine: %s (%s) on %s, backend %s, benchmark %q (%s), metric %s, ledger %s",
		path, prof.ID, tgt.Description, backend.Name(), opts.BenchLine, adapter, cfg.Metric, lw.Path())
	for _, l := range live.rigLines() {
		logf("rig: %s", l)
	}
	env.Alternatives = alts
	for _, a := range alts {
		logf("portfolio: %s alternative raced in round 1", a.Name)
	}
	res, runErr := refine.Run(ctx, cfg, prof, env)

	run := &RefineRun{Dir: dir, Ledger: lw.Path(), Config: cfg, Result: res}
	if runErr != nil {
		if ctx.Err() != nil {
			runErr = fmt.Errorf("interrupted (%w); everything reverted", ctx.Err())
		} else {
			runErr = fmt.Errorf("%w; everything reverted; the ledger %s keeps every trial so far", runErr, lw.Path())
		}
		// The report of what was measured, even of a run cut short.
		if err := WriteReport(dir, lw.Path(), live.OpenLoop(), prof); err != nil {
			note(err.Error())
		}
		return run, flat(runErr)
	}
	end := ledger.End{Reason: res.Stopped}
	if res.Kept {
		out := filepath.Join(dir, profiles.RelPath(res.Refined.ID, shape))
		if err := WriteRefined(out, res, lw.Path(), live.Lint); err != nil {
			return run, err
		}
		run.Refined, end.Refined = out, out
	}
	if err := lw.Append(end); err != nil {
		return run, err
	}
	if err := WriteReport(dir, lw.Path(), live.OpenLoop(), prof); err != nil {
		return run, err
	}
	return run, nil
}

// resume fills env from the ledger of a run that died, reaps the spinners
// of its cut-off trials and reverts what it left applied, noting both.
func resume(env *refine.Env, lw *ledger.Writer, old *ledger.Ledger, note func(string)) error {
	env.Done, env.Started, env.StartTimes = old.Done(), map[string]bool{}, map[string]time.Time{}
	for _, s := range old.Starts {
		env.StartTimes[s.Trial] = s.Start
	}
	for _, s := range old.Open() {
		if len(s.Spinners) > 0 {
			if err := background.Reap(s.Spinners); err != nil {
				return fmt.Errorf("reap the spinners of cut-off trial %s: %w", s.Trial, err)
			}
			msg := fmt.Sprintf("trial %s was cut off: reaped its spinners %v", s.Trial, s.Spinners)
			note(msg)
			if err := lw.Append(ledger.Note{Text: msg}); err != nil {
				return err
			}
		}
	}
	for _, p := range old.Processes {
		if p.StateFile == "" {
			continue
		}
		if _, err := os.Stat(p.StateFile); err != nil {
			continue
		}
		if err := cfs.RevertFile(p.StateFile, note); err != nil {
			return fmt.Errorf("revert what the dead run (pid %d) left applied: %w", p.Pid, err)
		}
		msg := fmt.Sprintf("reverted what the dead run (pid %d) left applied, from %s", p.Pid, p.StateFile)
		note(msg)
		if err := lw.Append(ledger.Note{Text: msg}); err != nil {
			return err
		}
	}
	for _, s := range old.Open() {
		env.Started[s.Trial] = true
	}
	for id, e := range old.Ends {
		if e.Error != "" {
			env.Started[id] = true // failed or interrupted: runs again
		}
	}
	return nil
}

// WriteReport writes DIR/REPORT.md and its pictures from the ledger of a
// run that refined prof.
func WriteReport(dir, ledgerPath string, openLoop bool, prof *profiles.Profile) error {
	l, err := ledger.Read(ledgerPath)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	caveats := []string{"one machine, one run of each trial sequence; other load on the machine during the run is not isolated"}
	if ownsCores(prof) {
		caveats = append(caveats, "the benchmark client ran on this machine, outside the workload: while a profile owned whole cores, the client shared the remaining CPUs with the background spinners, so the client's own slowdown is in that arm's numbers (on a node the client is elsewhere)")
	}
	r, err := refine.ReportOf(l, refine.ReportInfo{OpenLoop: openLoop, Caveats: caveats, Resume: "--resume"})
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return report.Write(dir, r)
}

// ownsCores says whether a profile gives some group whole cores of its own.
func ownsCores(p *profiles.Profile) bool {
	for _, g := range p.ThreadGroups {
		if g.Treatment == profiles.Exclusive {
			return true
		}
	}
	return false
}

// WriteRefined writes the refined profile to path atomically with its
// evidence updated, after checking it passes lint.
func WriteRefined(path string, res *refine.Result, ledgerPath string, lint func(*profiles.Profile) []profiles.Finding) error {
	p := refine.WithEvidence(res, filepath.Base(ledgerPath), time.Now())
	if err := lintError(lint(p), "refined profile fails lint (not written)"); err != nil {
		return err
	}
	b, err := profiles.Marshal(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	head := fmt.Sprintf("# Refined by temper-train refine (ledger %s): %d step(s) accepted; kept because it beat stock CFS in the final comparison.\n\n", ledgerPath, len(res.Accepted))
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		if _, err := io.WriteString(w, head); err != nil {
			return err
		}
		_, err := w.Write(b)
		return err
	})
}

// gitCommitOf is the commit that last changed path, "" outside a git
// repository or for an uncommitted file.
func gitCommitOf(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	out, err := exec.Command("git", "-C", filepath.Dir(abs), "log", "-1", "--format=%H", "--", abs).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Portfolio reads the alternatives synthesize wrote beside the profile at
// path (synthesize.PortfolioDir: DIR/.portfolio/SHAPE.RISK.toml), least
// risky first; none is not an error.
func Portfolio(path string) ([]refine.Alternative, error) {
	shape := strings.TrimSuffix(filepath.Base(path), ".toml")
	var out []refine.Alternative
	for _, risk := range []synthesize.Risk{synthesize.Conservative, synthesize.Moderate, synthesize.Aggressive} {
		alt := filepath.Join(filepath.Dir(path), synthesize.PortfolioDir, shape+"."+string(risk)+".toml")
		src, err := os.ReadFile(alt)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		p, err := profiles.Parse(alt, src)
		if err != nil {
			return nil, err
		}
		out = append(out, refine.Alternative{Name: string(risk), Profile: p})
	}
	return out, nil
}
