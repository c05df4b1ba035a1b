package canary

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/scheduler"
)

// prof is a profile the fakes tell apart by weight. With gone it has a
// group that matches none of the (empty) analysis's threads: drift.
func prof(weight int, gone bool) *profiles.Profile {
	p := &profiles.Profile{SchemaVersion: 1, ID: "svc", MachineShape: profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1}}
	if gone {
		p.ThreadGroups = append(p.ThreadGroups, profiles.ThreadGroup{Name: "gone", Match: profiles.Match{CommPrefix: []string{"wl-gone"}}, Treatment: profiles.Batch})
	}
	p.ThreadGroups = append(p.ThreadGroups, profiles.ThreadGroup{Name: "rest", Match: profiles.Match{All: true}, Treatment: profiles.Normal, Weight: weight})
	return p
}

var (
	fresh  = prof(100, false) // what every cycle synthesizes
	candA  = prof(200, false)
	candB  = prof(300, false)
	drill  = prof(1, false)
	stale  = prof(400, true) // a start profile the workload has left
	staleA = prof(500, true)
)

// fakeScheduler records what went in force and out, by hash.
type fakeScheduler struct {
	events  []string
	inForce string
}

type fakeSession struct {
	s    *fakeScheduler
	hash string
	done bool
}

func (s *fakeScheduler) Apply(_ context.Context, p *profiles.Profile) (refine.Session, error) {
	h := hashOf(p)
	s.events = append(s.events, "apply "+h)
	s.inForce = h
	return &fakeSession{s: s, hash: h}, nil
}

func (s *fakeScheduler) Alive() error { return nil }

func (f *fakeSession) Stats() ([]scheduler.GroupStats, error) { return nil, nil }

func (f *fakeSession) Stop() error {
	if !f.done {
		f.done = true
		f.s.events = append(f.s.events, "stop "+f.hash)
		f.s.inForce = refine.StockHash
	}
	return nil
}

// outcome is what the fake refine does in one call.
type outcome struct {
	kept *profiles.Profile // nil: kept nothing
	err  error
}

// fakeCommitter records the messages it was given.
type fakeCommitter struct{ msgs []string }

func (c *fakeCommitter) Commit(src []byte, _ func(*profiles.Profile) []profiles.Finding, msg string) (string, error) {
	if _, err := profiles.Parse("candidate", src); err != nil {
		return "", err
	}
	c.msgs = append(c.msgs, msg)
	return fmt.Sprintf("c0ffee%02d", len(c.msgs)), nil
}

// world is one loop run against fakes and what it did.
type world struct {
	sched    fakeScheduler
	refines  []outcome
	checks   []refine.State
	cancelAt int // cancel the loop's context in this refine call (1-based), 0 never

	observedUnder []string // the profile in force at each synthesize
	bases         []string // what refine started from
	refs          []string // what refine measured against
	checked       []string // last vs candidate, n
	commits       fakeCommitter
	repo          Committer // nil: commits
}

func (w *world) run(t *testing.T, cfg Config) (*ledger.Ledger, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.ID, cfg.Dir = "svc", t.TempDir()
	if cfg.OnExit == "" {
		cfg.OnExit = Revert
	}
	if cfg.Refine.FinalN == 0 {
		cfg.Refine.FinalN = 4
	}
	env := Env{
		Synthesize: func(_ context.Context, dir string) (*profiles.Profile, string, *analyze.Analysis, error) {
			w.observedUnder = append(w.observedUnder, w.sched.inForce)
			path := filepath.Join(dir, "profiles", profiles.RelPath(fresh.ID, fresh.MachineShape))
			return fresh, path, &analyze.Analysis{}, nil
		},
		Scheduler: &w.sched,
		Lint:      func(*profiles.Profile) []profiles.Finding { return nil },
		RefineEnv: func(lw *ledger.Writer, trialDir string) refine.Env { return refine.Env{Ledger: lw, TrialDir: trialDir} },
		Header: func(profile, hash string, cfg refine.Config) ledger.Header {
			raw, _ := json.Marshal(cfg)
			return ledger.Header{Profile: profile, ProfileHash: hash, Config: raw}
		},
		WriteRefined: func(path string, res *refine.Result, _ string) error {
			b, err := profiles.Marshal(res.Refined)
			if err != nil {
				return err
			}
			os.MkdirAll(filepath.Dir(path), 0o755)
			return os.WriteFile(path, b, 0o644)
		},
		Repo:      cmp.Or[Committer](w.repo, &w.commits),
		KeepUntil: func() (context.Context, context.CancelFunc) { return context.WithCancel(canceled()) },
		Refine: func(_ context.Context, _ refine.Config, base *profiles.Profile, env refine.Env) (*refine.Result, error) {
			w.bases = append(w.bases, hashOf(base))
			w.refs = append(w.refs, hashOf(env.Reference))
			if len(w.bases) == w.cancelAt {
				cancel()
				return nil, ctx.Err()
			}
			if len(w.refines) == 0 {
				t.Fatalf("refine call %d not scripted", len(w.bases))
			}
			o := w.refines[0]
			w.refines = w.refines[1:]
			if o.err != nil {
				return nil, o.err
			}
			return &refine.Result{Kept: o.kept != nil, Refined: o.kept, Stopped: "converged", Reference: hashOf(env.Reference)}, nil
		},
		Check: func(_ context.Context, _ refine.Config, last, cand *profiles.Profile, n int, _ string, _ refine.Env) (*refine.Check, error) {
			w.checked = append(w.checked, fmt.Sprintf("%s vs %s n=%d", hashOf(last), hashOf(cand), n))
			if len(w.checks) == 0 {
				t.Fatalf("check %d not scripted", len(w.checked))
			}
			s := w.checks[0]
			w.checks = w.checks[1:]
			return &refine.Check{State: s, Reason: string(s) + ": fake", Decisions: []ledger.Decision{{Line: "fake decision"}}}, nil
		},
	}
	err := Run(ctx, cfg, env)
	l, lerr := ledger.Read(filepath.Join(cfg.Dir, LedgerFile))
	if lerr != nil {
		t.Fatal(lerr)
	}
	return l, err
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func states(l *ledger.Ledger) []string {
	var s []string
	for _, c := range l.Cycles {
		st := c.State
		if c.Drill {
			st += " drill"
		}
		s = append(s, st)
	}
	return s
}

// TestRun: the loop's state machine, cycle by cycle, against fakes.
func TestRun(t *testing.T) {
	a, b, fr, st, sa := hashOf(candA), hashOf(candB), hashOf(fresh), hashOf(stale), hashOf(staleA)
	for _, tc := range []struct {
		name      string
		cfg       Config
		w         world
		states    []string
		err       error  // errors.Is the loop's error; nil: none
		errText   string // in the loop's error
		checked   []string
		bases     []string
		after     []string // each cycle's After
		reason    []string // in each cycle's reason
		commits   int
		events    []string       // the scheduler's, in order; nil: not checked
		observed  []string       // in force at each cycle's observe ("": nothing applied yet); nil: not checked
		note      string         // in a note of the loop's ledger
		cycleNote map[int]string // in a note of that cycle's ledger
		msgs      []string       // in each commit's message
	}{
		{
			name:    "passed is committed",
			cfg:     Config{Cycles: 1},
			w:       world{refines: []outcome{{kept: candA}}, checks: []refine.State{refine.Passed}},
			states:  []string{"passed"},
			checked: []string{"stock vs " + a + " n=4"},
			bases:   []string{fr},
			after:   []string{a},
			reason:  []string{"committed c0ffee01"},
			commits: 1,
			msgs:    []string{"svc/2cpu-2c-smt1: canary cycle 1 passed (" + a + ")\n\nGuard check against the last good profile none (stock CFS)"},
		},
		{
			name:     "inconclusive is kept in force and checked again with 2n",
			cfg:      Config{Cycles: 2},
			w:        world{refines: []outcome{{kept: candA}}, checks: []refine.State{refine.Inconclusive, refine.Passed}},
			states:   []string{"inconclusive", "passed"},
			checked:  []string{"stock vs " + a + " n=4", "stock vs " + a + " n=8"},
			bases:    []string{fr},
			after:    []string{a + " (inconclusive)", a},
			reason:   []string{"checked again next cycle with n=8", "committed"},
			commits:  1,
			observed: []string{"", a},
		},
		{
			name:    "inconclusive at the cap fails",
			cfg:     Config{Cycles: 2, Refine: refine.Config{MaxN: 8}},
			w:       world{refines: []outcome{{kept: candA}}, checks: []refine.State{refine.Inconclusive, refine.Inconclusive}},
			states:  []string{"inconclusive", "failed"},
			checked: []string{"stock vs " + a + " n=4", "stock vs " + a + " n=8"},
			after:   []string{a + " (inconclusive)", "stock"},
			reason:  []string{"n=8", "the last of its checks (n = 4, 8 within the largest n, 8)"},
		},
		{
			name:      "drill caught",
			cfg:       Config{Cycles: 1, Drills: map[int]Drill{1: {Path: "harmful.toml", Profile: drill}}},
			w:         world{checks: []refine.State{refine.Failed}},
			states:    []string{"failed drill"},
			cycleNote: map[int]string{1: "DRILL: harmful.toml goes in"},
			checked:   []string{"stock vs " + hashOf(drill) + " n=4"},
			after:     []string{"stock"},
		},
		{
			name:    "drill not caught",
			cfg:     Config{Cycles: 2, Drills: map[int]Drill{1: {Path: "harmful.toml", Profile: drill}}},
			w:       world{refines: []outcome{{}}, checks: []refine.State{refine.Passed}},
			states:  []string{"passed drill", "unchanged"},
			err:     ErrDrillNotCaught,
			errText: "at cycle(s) [1]",
			after:   []string{"stock", "stock"},
			reason:  []string{"DRILL NOT CAUGHT", "refine kept nothing new: converged"},
		},
		{
			name:    "max failures stops an endless loop",
			cfg:     Config{MaxFailures: 2},
			w:       world{refines: []outcome{{kept: candA}, {kept: candB}}, checks: []refine.State{refine.Failed, refine.Failed}},
			states:  []string{"failed", "failed"},
			err:     ErrMaxFailures,
			errText: "2 failed cycle(s), at most 2 allowed; the last good profile is none (stock CFS)",
			checked: []string{"stock vs " + a + " n=4", "stock vs " + b + " n=4"},
		},
		{
			name:   "refine kept nothing",
			cfg:    Config{Cycles: 1},
			w:      world{refines: []outcome{{}}},
			states: []string{"unchanged"},
			reason: []string{"refine kept nothing new: converged"},
		},
		{
			name:   "noisy and over budget: unchanged, the loop goes on",
			cfg:    Config{Cycles: 2},
			w:      world{refines: []outcome{{err: fmt.Errorf("%w: CV 30%%", refine.ErrNoisy)}, {err: fmt.Errorf("%w: 3 trials left", refine.ErrBudget)}}},
			states: []string{"unchanged", "unchanged"},
			reason: []string{"refine measured nothing: refine: benchmark too noisy", "refine measured nothing: refine: budget"},
		},
		{
			name:      "drift drops the pending candidate",
			cfg:       Config{Cycles: 2, Start: stale, StartPath: "start.toml"},
			w:         world{refines: []outcome{{kept: staleA}, {kept: candB}}, checks: []refine.State{refine.Inconclusive, refine.Passed}},
			states:    []string{"inconclusive", "passed"},
			checked:   []string{st + " vs " + sa + " n=4", st + " vs " + b + " n=4"},
			bases:     []string{fr, fr},
			after:     []string{sa + " (inconclusive)", b},
			commits:   1,
			reason:    []string{"checked again next cycle with n=8", "passed"},
			cycleNote: map[int]string{2: "drift: the inconclusive candidate " + sa + " is dropped"},
			msgs:      []string{"last good profile start.toml (" + st + ")"},
		},
		{
			name:     "hold between cycles, revert on exit",
			cfg:      Config{Cycles: 2},
			w:        world{refines: []outcome{{kept: candA}, {}}, checks: []refine.State{refine.Passed}},
			states:   []string{"passed", "unchanged"},
			bases:    []string{fr, a},
			commits:  1,
			events:   []string{"apply " + a, "stop " + a},
			observed: []string{"", a},
		},
		{
			name:    "keep on exit",
			cfg:     Config{Cycles: 2, OnExit: Keep},
			w:       world{refines: []outcome{{kept: candA}, {}}, checks: []refine.State{refine.Passed}},
			states:  []string{"passed", "unchanged"},
			commits: 1,
			events:  []string{"apply " + a, "stop " + a, "apply " + a, "stop " + a},
		},
		{
			name:   "keep on exit with nothing good: stock",
			cfg:    Config{Cycles: 1, OnExit: Keep},
			w:      world{refines: []outcome{{}}},
			states: []string{"unchanged"},
			events: []string{},
		},
		{
			name:    "a cycle cut off",
			cfg:     Config{Cycles: 3},
			w:       world{refines: []outcome{{kept: candA}}, checks: []refine.State{refine.Passed}, cancelAt: 2},
			states:  []string{"passed"},
			err:     context.Canceled,
			errText: "interrupted",
			commits: 1,
			note:    "cycle 2 cut off: refine: context canceled",
			events:  []string{"apply " + a, "stop " + a},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.w
			l, err := w.run(t, tc.cfg)
			if tc.err == nil && err != nil {
				t.Fatalf("loop: %v", err)
			}
			if tc.err != nil && (!errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.errText)) {
				t.Fatalf("loop: %v, want %v with %q", err, tc.err, tc.errText)
			}
			if got := states(l); !slices.Equal(got, tc.states) {
				t.Errorf("states %q, want %q", got, tc.states)
			}
			if l.End == nil || (err != nil && l.End.Reason != err.Error()) {
				t.Errorf("end record %+v, want the loop's error %v", l.End, err)
			}
			if tc.checked != nil && !slices.Equal(w.checked, tc.checked) {
				t.Errorf("checks %q, want %q", w.checked, tc.checked)
			}
			if tc.bases != nil && !slices.Equal(w.bases, tc.bases) {
				t.Errorf("refine started from %q, want %q", w.bases, tc.bases)
			}
			for i, want := range tc.after {
				if l.Cycles[i].After != want {
					t.Errorf("cycle %d: after %q, want %q", i+1, l.Cycles[i].After, want)
				}
			}
			for i, want := range tc.reason {
				if !strings.Contains(l.Cycles[i].Reason, want) {
					t.Errorf("cycle %d: reason %q, want %q in it", i+1, l.Cycles[i].Reason, want)
				}
			}
			if len(w.commits.msgs) != tc.commits {
				t.Errorf("%d commits, want %d", len(w.commits.msgs), tc.commits)
			}
			if tc.events != nil && !slices.Equal(w.sched.events, tc.events) && !(len(tc.events) == 0 && len(w.sched.events) == 0) {
				t.Errorf("scheduler %q, want %q", w.sched.events, tc.events)
			}
			if tc.observed != nil && !slices.Equal(w.observedUnder, tc.observed) {
				t.Errorf("observed under %q, want %q", w.observedUnder, tc.observed)
			}
			if tc.note != "" && !slices.ContainsFunc(l.Notes, func(n ledger.Note) bool { return strings.Contains(n.Text, tc.note) }) {
				t.Errorf("loop ledger notes %+v, want %q", l.Notes, tc.note)
			}
			for c, want := range tc.cycleNote {
				cl, err := ledger.Read(l.Cycles[c-1].Ledger)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(cl.Notes, func(n ledger.Note) bool { return strings.Contains(n.Text, want) }) {
					t.Errorf("cycle %d ledger notes %+v, want %q", c, cl.Notes, want)
				}
			}
			for i, want := range tc.msgs {
				if !strings.Contains(w.commits.msgs[i], want) {
					t.Errorf("commit %d message %q, want %q in it", i+1, w.commits.msgs[i], want)
				}
			}
			if w.sched.inForce != "" && w.sched.inForce != refine.StockHash {
				t.Errorf("left %s in force", w.sched.inForce)
			}
		})
	}
}

// TestRunCommitsToGit: a cycle that passes is committed to a real profiles
// repository, at the profile's own id and shape, with the evidence.
func TestRunCommitsToGit(t *testing.T) {
	dir := testkit.GitRepo(t)
	repo, err := OpenGitRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := world{refines: []outcome{{kept: candA}}, checks: []refine.State{refine.Passed}, repo: repo}
	l, err := w.run(t, Config{Cycles: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := l.Cycles[0]
	if c.State != "passed" || c.Commit == "" {
		t.Fatalf("cycle %+v, want passed and committed", c)
	}
	got := testkit.Git(t, dir, "show", "--name-only", "--format=%B", c.Commit)
	for _, want := range []string{"svc/2cpu-2c-smt1: canary cycle 1 passed", "at bg=0", "Ledger: " + c.Ledger, "profiles/svc/2cpu-2c-smt1.toml"} {
		if !strings.Contains(got, want) {
			t.Errorf("commit %q lacks %q", got, want)
		}
	}
	if filepath.Base(filepath.Dir(c.CandidatePath)) != "svc" || filepath.Base(c.CandidatePath) != "2cpu-2c-smt1.toml" {
		t.Errorf("candidate %s: want .../svc/2cpu-2c-smt1.toml (the profile's id and shape)", c.CandidatePath)
	}
}
