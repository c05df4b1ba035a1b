// Package canary is the canary loop: it trains a live workload again every
// interval, keeps the last good profile in force between cycles and rolls
// back what regresses. Each cycle observes, analyzes and synthesizes under
// the profile in force (Env.Synthesize), looks for drift (canary/drift),
// refines a candidate against the last good profile (refine.Run) and puts
// what refine kept through the guard check (refine.CheckCandidate) on
// fresh trials. The check's outcome is the cycle's state:
//
//   - passed: the candidate is the new last good profile, committed to the
//     profiles repository when there is one;
//   - failed: rolled back at once; MaxFailures of them stop the loop;
//   - inconclusive: kept in force and checked again next cycle with twice
//     the trials, failed instead after its last check (n, 2n, 4n within
//     refine's MaxN: refine.Config.CheckLooks), the checks sharing α;
//   - unchanged: refine kept nothing new (or could not measure).
//
// A drill (Config.Drills) puts a profile in as if refine had accepted it:
// the check must fail it, or the loop ends with ErrDrillNotCaught.
// Everything goes to the loop's ledger (LedgerFile, one ledger.Cycle per
// cycle) and each cycle's own refine ledger (cycle-NN/ledger.jsonl).
//
// The loop acts only through Env, so that it runs against fakes in tests
// as refine does against its Env.
package canary

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/canary/drift"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/ledger"
)

// LedgerFile is the loop's ledger in Config.Dir.
const LedgerFile = "canary.jsonl"

// Unchanged is the state of a cycle that checked no candidate: refine kept
// nothing new, so the last good profile stays.
const Unchanged = "unchanged"

// ErrDrillNotCaught is wrapped in the loop's error when the guard check did
// not fail a drill.
var ErrDrillNotCaught = errors.New("the guard check did not catch the drill")

// ErrMaxFailures is wrapped in the loop's error when it stopped after
// Config.MaxFailures failed cycles.
var ErrMaxFailures = errors.New("too many failed cycles")

// aliveEvery is how often a kept profile's target is looked at after the
// loop (OnExit Keep).
const aliveEvery = time.Second

// OnExit is what the loop leaves in force when it stops.
type OnExit string

// Choices of OnExit.
const (
	// Revert: all scheduling back to stock.
	Revert OnExit = "revert"
	// Keep: the last good profile in force until Env.KeepUntil's context
	// is done or the target exits, then reverted.
	Keep OnExit = "keep"
)

// Config is what the loop does.
type Config struct {
	ID string // the profile id, as the ledgers name the loop
	// Dir is where the loop's ledger and each cycle's directory
	// (cycle-NN/) go; it must exist.
	Dir    string
	Refine refine.Config
	// Interval is the time from one cycle's start to the next's; a longer
	// cycle is followed at once.
	Interval time.Duration
	// Cycles stops the loop after that many cycles; MaxFailures after that
	// many failed ones (0: never).
	Cycles      int
	MaxFailures int
	OnExit      OnExit
	// Drills are planted candidates, by cycle (from 1).
	Drills map[int]Drill
	// Start is the last good profile when the loop starts, read from
	// StartPath (nil: none, stock CFS).
	Start     *profiles.Profile
	StartPath string
}

// Drill is a profile that goes in at its cycle as if refine had accepted
// it; the guard check must roll it back.
type Drill struct {
	Path    string
	Profile *profiles.Profile
}

// Committer keeps the profiles that pass: GitRepo.
type Committer interface {
	// Commit records the profile file src with msg, unless it fails lint,
	// and returns the commit's name.
	Commit(src []byte, lint func(*profiles.Profile) []profiles.Finding, msg string) (string, error)
}

// Env is what the loop acts on and where it reports.
type Env struct {
	// Synthesize observes the workload as it runs (under the profile in
	// force, the benchmark running), analyzes the trace and synthesizes a
	// profile, all into dir; it returns the fresh profile, its file and
	// the analysis, which drift compares with the profile in force.
	Synthesize func(ctx context.Context, dir string) (*profiles.Profile, string, *analyze.Analysis, error)
	// Scheduler keeps the profile in force between cycles.
	Scheduler refine.Scheduler
	// Lint checks a profile for the backend and this machine.
	Lint func(*profiles.Profile) []profiles.Finding
	// RefineEnv is refine's environment for one cycle: its ledger lw, its
	// trials' directories under trialDir.
	RefineEnv func(lw *ledger.Writer, trialDir string) refine.Env
	// Header is the header of a ledger of the loop's, the loop's own
	// (profile "canary ID", no hash) and each cycle's, with the loop's
	// refine configuration.
	Header func(profile, profileHash string, cfg refine.Config) ledger.Header
	// Started, when set, records what cleaning up after a crash needs in
	// the loop's ledger, right after its header.
	Started func(lw *ledger.Writer) error
	// WriteRefined writes the profile refine kept (res.Refined with its
	// evidence from the ledger at ledgerPath) to path, refusing one that
	// fails lint.
	WriteRefined func(path string, res *refine.Result, ledgerPath string) error
	// Report, when set, writes a cycle's report into dir from its ledger
	// when refine ran (from base).
	Report func(dir, ledgerPath string, base *profiles.Profile) error
	// Repo, when set, gets a commit of every profile that passes.
	Repo Committer
	// Log receives the loop's lines, one per call.
	Log func(format string, args ...any)
	// KeepUntil, with OnExit Keep, is called when the loop ends: the
	// context that ends the keeping (in the command, the next Ctrl-C) and
	// its release. Nil: kept until the target exits.
	KeepUntil func() (context.Context, context.CancelFunc)
	// Refine and Check are refine.Run and refine.CheckCandidate (the
	// default when nil); tests replace them.
	Refine func(ctx context.Context, cfg refine.Config, base *profiles.Profile, env refine.Env) (*refine.Result, error)
	Check  func(ctx context.Context, cfg refine.Config, last, cand *profiles.Profile, n int, id string, env refine.Env) (*refine.Check, error)
}

// loop is the loop's state across cycles.
type loop struct {
	cfg Config
	env Env
	log *ledger.Writer

	last      *profiles.Profile // the last good profile; nil: stock
	lastPath  string
	pending   *pending       // inconclusive, kept in force
	held      refine.Session // the profile kept in force between cycles
	heldHash  string
	failures  int
	undrilled []int // drills the check did not catch
	durs      []time.Duration
}

// pending is a candidate whose check was inconclusive: in force, checked
// again with n per arm next cycle.
type pending struct {
	prof *profiles.Profile
	path string
	src  []byte
	n    int
}

// Run runs the loop until Config.Cycles, Config.MaxFailures, ctx's end or
// an error, then leaves in force what Config.OnExit says. The loop's
// ledger keeps every cycle; the error, if any, is also its end record's
// reason.
func Run(ctx context.Context, cfg Config, env Env) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if err := env.check(); err != nil {
		return err
	}
	if env.Refine == nil {
		env.Refine = refine.Run
	}
	if env.Check == nil {
		env.Check = refine.CheckCandidate
	}
	if env.Log == nil {
		env.Log = func(string, ...any) {}
	}
	cfg.Refine.Defaults()
	l := &loop{cfg: cfg, env: env, last: cfg.Start, lastPath: cfg.StartPath}
	lw, err := ledger.Create(filepath.Join(cfg.Dir, LedgerFile), env.Header("canary "+cfg.ID, "", cfg.Refine))
	if err != nil {
		return err
	}
	defer lw.Close()
	l.log = lw
	if env.Started != nil {
		if err := env.Started(lw); err != nil {
			return err
		}
	}
	return l.exit(ctx, l.run(ctx))
}

func (c *Config) check() error {
	switch {
	case c.ID == "":
		return errors.New("canary: no profile id")
	case c.Dir == "":
		return errors.New("canary: no directory for the ledgers")
	case c.OnExit != Revert && c.OnExit != Keep:
		return fmt.Errorf("canary: on exit %q: want %s or %s", c.OnExit, Keep, Revert)
	case c.Cycles < 0 || c.MaxFailures < 0:
		return errors.New("canary: cycles and max failures: want ≥ 0")
	}
	return nil
}

func (e *Env) check() error {
	switch {
	case e.Synthesize == nil, e.Scheduler == nil, e.Lint == nil, e.RefineEnv == nil, e.Header == nil, e.WriteRefined == nil:
		return errors.New("canary: Env needs Synthesize, Scheduler, Lint, RefineEnv, Header and WriteRefined")
	}
	return nil
}

// say prints a line of the loop's.
func (l *loop) say(format string, args ...any) {
	l.env.Log("%s", strings.TrimSuffix(fmt.Sprintf(format, args...), "\n"))
}

// run runs cycles until Cycles, MaxFailures, ctx's end or an error.
func (l *loop) run(ctx context.Context) error {
	begin := time.Now()
	for c := 1; l.cfg.Cycles == 0 || c <= l.cfg.Cycles; c++ {
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
		if l.cfg.MaxFailures > 0 && l.failures >= l.cfg.MaxFailures {
			return fmt.Errorf("stopped: %w: %d failed cycle(s), at most %d allowed; the last good profile is %s", ErrMaxFailures, l.failures, l.cfg.MaxFailures, l.lastName())
		}
		if l.cfg.Cycles != 0 && c == l.cfg.Cycles {
			break
		}
		// Until the next cycle the profile in force stays in force.
		if err := l.hold(ctx, l.inForce()); err != nil {
			return err
		}
		wait := time.Until(start.Add(l.cfg.Interval))
		if wait > 0 {
			l.say("canary: next cycle at %s", time.Now().Add(wait).Format("15:04:05"))
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

// inForce is the profile in force between cycles: the pending candidate,
// else the last good profile (nil: stock).
func (l *loop) inForce() *profiles.Profile {
	if l.pending != nil {
		return l.pending.prof
	}
	return l.last
}

func (l *loop) lastName() string {
	if l.last == nil {
		return "none (stock CFS)"
	}
	return fmt.Sprintf("%s (%s)", l.lastPath, hashOf(l.last))
}

// hashOf is refine's name of a profile (refine.StockHash for none).
func hashOf(p *profiles.Profile) string {
	if p == nil {
		return refine.StockHash
	}
	h, _ := refine.Hash(p)
	return h
}

// hold keeps p in force between cycles (nil: stock).
func (l *loop) hold(ctx context.Context, p *profiles.Profile) error {
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
	s, err := l.env.Scheduler.Apply(ctx, p)
	if err != nil {
		return fmt.Errorf("put %s in force: %w", h, err)
	}
	l.held, l.heldHash = s, h
	return nil
}

// release reverts the profile hold put in force, if any.
func (l *loop) release() error {
	if l.held == nil {
		return nil
	}
	err := l.held.Stop()
	l.held, l.heldHash = nil, ""
	return err
}

// summary is the cycle's line on the terminal, with the loop's ETA.
func (l *loop) summary(c int, rec ledger.Cycle, begin time.Time) string {
	var mean time.Duration
	for _, d := range l.durs {
		mean += d
	}
	mean /= time.Duration(len(l.durs))
	per := max(mean, l.cfg.Interval)
	eta := "until stopped"
	of := ""
	if l.cfg.Cycles > 0 {
		of = fmt.Sprintf("/%d", l.cfg.Cycles)
		left := time.Duration(l.cfg.Cycles-c) * per
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
		c, of, state, cand, rec.Before, rec.After, rec.Reason, time.Since(rec.Start).Round(time.Second), time.Since(begin).Round(time.Second), eta)
}

// cycle runs one cycle; the record's State is empty when the cycle was cut
// off before it judged anything.
func (l *loop) cycle(ctx context.Context, c int) (ledger.Cycle, error) {
	rec := ledger.Cycle{Cycle: c, Start: time.Now().UTC(), Before: hashOf(l.last)}
	rec.After = rec.Before
	cdir := filepath.Join(l.cfg.Dir, fmt.Sprintf("cycle-%02d", c))
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return rec, err
	}
	// Observe the workload as it runs: under the profile in force.
	from := l.inForce()
	if err := l.hold(ctx, from); err != nil {
		return rec, err
	}
	l.say("canary: cycle %d: observe, analyze, synthesize (profile in force: %s)", c, hashOf(from))
	if err := ctx.Err(); err != nil {
		return rec, err
	}
	fresh, freshPath, a, err := l.env.Synthesize(ctx, cdir)
	if err != nil {
		return rec, err
	}
	if l.last != nil {
		fs, err := drift.Find(a, from, fresh)
		if err != nil {
			return rec, err
		}
		for _, x := range fs {
			rec.Drift = append(rec.Drift, x.String())
			l.say("canary: cycle %d: drift: %s", c, x)
		}
		if len(fs) > 0 {
			l.say("canary: cycle %d: the workload left the profile in force: re-synthesized (%s)", c, freshPath)
		}
	}
	if err := l.release(); err != nil { // refine and the check apply their own arms
		return rec, err
	}

	// The cycle's ledger is refine's format, so that its report and every
	// trial read the same as a refine run's. Its profile is the one the
	// cycle started from: in force while it observed.
	lw, err := ledger.Create(filepath.Join(cdir, "ledger.jsonl"), l.env.Header(fmt.Sprintf("canary %s cycle %d", l.cfg.ID, c), hashOf(from), l.cfg.Refine))
	if err != nil {
		return rec, err
	}
	defer lw.Close()
	rec.Ledger = lw.Path()

	// The candidate: a drill, a pending one checked again, or what refine
	// keeps.
	var cand *profiles.Profile
	var candSrc []byte
	n := l.cfg.Refine.FinalN
	if n == 0 {
		n = refine.CheckN
	}
	var res *refine.Result
	var refined *profiles.Profile // what refine started from; nil when it did not run
	switch d, drill := l.cfg.Drills[c]; {
	case drill:
		cand, rec.Drill, rec.CandidatePath = d.Profile, true, d.Path
		lw.Append(ledger.Note{Text: fmt.Sprintf("DRILL: %s goes in as if refine had accepted it; the guard check must roll it back", d.Path)})
		l.say("canary: cycle %d: DRILL: %s goes in as if refine had accepted it", c, d.Path)
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
		against := "stock CFS"
		if l.last != nil {
			against = "the profile in force " + hashOf(l.last)
		}
		l.say("canary: cycle %d: refine %s against %s", c, basePath, against)
		refined = base
		env := l.env.RefineEnv(lw, filepath.Join(cdir, "trials"))
		env.Reference = l.last
		if res, err = l.env.Refine(ctx, l.cfg.Refine, base, env); err != nil {
			err = fmt.Errorf("refine: %w", err)
		}
		if ctx.Err() == nil && (errors.Is(err, refine.ErrNoisy) || errors.Is(err, refine.ErrBudget)) {
			// This cycle could not measure; the next may (a quieter
			// machine): nothing changes, the loop goes on.
			rec.State = Unchanged
			rec.Reason = "refine measured nothing: " + err.Error()
			return rec, l.endCycle(lw, cdir, rec.Reason, refined)
		}
		if err != nil {
			return rec, err
		}
		if res.Kept {
			path := filepath.Join(cdir, "refined", profiles.RelPath(res.Refined.ID, res.Refined.MachineShape))
			if cand, candSrc, err = l.writeRefined(path, res, lw.Path()); err != nil {
				return rec, err
			}
			rec.CandidatePath = path
		}
	}
	if cand == nil {
		rec.State = Unchanged
		rec.Reason = "refine kept nothing new: " + res.Stopped
		for _, d := range res.Final {
			if math.IsNaN(float64(d.P)) {
				// A look that measured nothing (the benchmark failed
				// under the refined profile) says why in its reason.
				rec.Reason += fmt.Sprintf("; final vs %s: %s", res.Reference, d.Reason)
				continue
			}
			rec.Reason += fmt.Sprintf("; final vs %s at bg=%d: %s %s, p=%.3g, %s", res.Reference, d.Bg, d.Metric, d.Shift(), float64(d.P), d.Verdict)
		}
		return rec, l.endCycle(lw, cdir, rec.Reason, refined)
	}
	rec.Candidate = hashOf(cand)

	chk, err := l.env.Check(ctx, l.cfg.Refine, l.last, cand, n, "check", l.env.RefineEnv(lw, filepath.Join(cdir, "trials")))
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
			l.undrilled = append(l.undrilled, c)
			rec.Reason = "DRILL NOT CAUGHT (" + chk.Reason + "); the drill profile is removed anyway"
		} else {
			l.failures++
		}
	case chk.State == refine.Passed:
		msg := l.commitMessage(c, cand, chk, res, lw.Path())
		l.last, l.lastPath, l.pending = cand, rec.CandidatePath, nil
		if l.env.Repo != nil {
			commit, err := l.env.Repo.Commit(candSrc, l.env.Lint, msg)
			if err != nil {
				rec.Reason += "; NOT COMMITTED: " + err.Error()
				l.say("canary: cycle %d: %v", c, err)
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
		if looks := l.cfg.Refine.CheckLooks(); !slices.Contains(looks, next) {
			rec.State = string(refine.Failed)
			rec.Reason = fmt.Sprintf("rolled back: inconclusive at n=%d per arm, the last of its checks (n = %s within the largest n, %d)", n, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(looks)), ", "), "[]"), l.cfg.Refine.MaxN)
			l.failures++
			l.pending = nil
		} else {
			l.pending = &pending{prof: cand, path: rec.CandidatePath, src: candSrc, n: next}
			rec.Reason += fmt.Sprintf("; kept in force, checked again next cycle with n=%d", next)
		}
	}
	rec.After = hashOf(l.last)
	if l.pending != nil {
		rec.After = hashOf(l.pending.prof) + " (inconclusive)"
	}
	return rec, l.endCycle(lw, cdir, rec.State+": "+rec.Reason, refined)
}

// writeRefined writes what refine kept to path and reads it back: the
// candidate is the file, as the repository gets it.
func (l *loop) writeRefined(path string, res *refine.Result, ledgerPath string) (*profiles.Profile, []byte, error) {
	if err := l.env.WriteRefined(path, res, ledgerPath); err != nil {
		return nil, nil, err
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	p, err := profiles.Parse(path, src)
	if err != nil {
		return nil, nil, err
	}
	return p, src, nil
}

// endCycle closes the cycle's ledger and writes its report when refine ran
// (from base).
func (l *loop) endCycle(lw *ledger.Writer, cdir, reason string, base *profiles.Profile) error {
	if err := lw.Append(ledger.End{Reason: reason}); err != nil {
		return err
	}
	if base != nil && l.env.Report != nil {
		return l.env.Report(cdir, lw.Path(), base)
	}
	return nil
}

// commitMessage summarises the evidence for a profile that passed.
func (l *loop) commitMessage(c int, cand *profiles.Profile, chk *refine.Check, res *refine.Result, ledgerPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s: canary cycle %d passed (%s)\n\n", cand.ID, cand.MachineShape.Key(), c, hashOf(cand))
	fmt.Fprintf(&b, "Guard check against the last good profile %s, fresh ABBA trials: %s\n", l.lastName(), chk.Reason)
	for _, d := range chk.Decisions {
		fmt.Fprintf(&b, "  %s at bg=%d: %.4g -> %.4g, delta %s, n=%d+%d, p=%.3g\n",
			d.Metric, d.Bg, float64(d.Base.Center), float64(d.Cand.Center), d.Shift(), d.N[0], d.N[1], float64(d.P))
		for _, g := range d.Guards {
			bound := fmt.Sprintf("-%g%%", 100*g.Bound)
			if g.Bound == 0 {
				bound = "+0"
			}
			fmt.Fprintf(&b, "  guard %s: %s, at worst %s (tolerance %s)\n", g.Metric, g.Change(), g.WorstChange(), bound)
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

// exit puts scheduling where OnExit says and returns the loop's error.
func (l *loop) exit(ctx context.Context, loopErr error) error {
	if ctx.Err() != nil {
		loopErr = fmt.Errorf("interrupted (%w); the ledger %s keeps every cycle so far", ctx.Err(), l.log.Path())
	}
	if len(l.undrilled) > 0 && loopErr == nil {
		loopErr = fmt.Errorf("%w at cycle(s) %v", ErrDrillNotCaught, l.undrilled)
	}
	end := ledger.End{Reason: "finished"}
	if loopErr != nil {
		end.Reason = loopErr.Error()
	}
	if l.last != nil {
		end.Refined = l.lastPath
	}
	l.log.Append(end)
	if l.cfg.OnExit == Keep && l.last != nil {
		if err := l.keep(loopErr); err != nil {
			loopErr = errors.Join(loopErr, err)
		}
	}
	if err := l.release(); err != nil {
		return errors.Join(loopErr, fmt.Errorf("revert: %w", err))
	}
	l.say("canary: scheduling reverted; last good profile: %s", l.lastName())
	return loopErr
}

// keep puts the last good profile back in force and keeps it there until
// Env.KeepUntil's context ends or the target exits.
func (l *loop) keep(loopErr error) error {
	ctx, stop := context.Background(), context.CancelFunc(func() {})
	if l.env.KeepUntil != nil {
		ctx, stop = l.env.KeepUntil()
	}
	defer stop()
	if err := l.release(); err != nil {
		return fmt.Errorf("revert: %w", err)
	}
	if err := l.hold(ctx, l.last); err != nil {
		return err
	}
	l.say("canary: the last good profile %s stays in force until Ctrl-C, SIGTERM or the target exits", l.lastName())
	if loopErr != nil {
		l.say("canary: %v", loopErr)
	}
	t := time.NewTicker(aliveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if l.env.Scheduler.Alive() != nil {
				return nil
			}
		}
	}
}
