package refine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/report"
	"temper.codes/temper-train/scheduler"
)

// testProfile is a small two-group profile for a 2-core machine: a worker
// group at normal treatment (so "latency" is one of its candidates) and a
// yield remainder.
func testProfile() *profiles.Profile {
	return &profiles.Profile{SchemaVersion: 1, ID: "t", MachineShape: profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1, NUMANodes: 1},
		Traits: profiles.Traits{CPURequestMillicores: 1000},
		ThreadGroups: []profiles.ThreadGroup{
			{Name: "workers", Match: profiles.Match{CommPrefix: []string{"wl-worker"}}, Treatment: profiles.Normal},
			{Name: "rest", Match: profiles.Match{All: true}, Treatment: profiles.Yield, Weight: 10},
		}}
}

func testLint(p *profiles.Profile) []profiles.Finding {
	shape := profiles.Shape{LogicalCPUs: 2, Cores: 2, ThreadsPerCore: 1, NUMANodes: 1}
	return profiles.Lint(p, profiles.LintOptions{Backend: "cfs", Shape: &shape})
}

// fakeScheduler tracks which profile is in force and checks that every
// apply is reverted before the next.
type fakeScheduler struct {
	mu      sync.Mutex
	cur     *profiles.Profile
	applies int
	open    int
	dead    bool
}

func (f *fakeScheduler) Apply(_ context.Context, p *profiles.Profile) (Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open != 0 {
		return nil, errors.New("apply while another profile is in force")
	}
	f.cur, f.open = p, 1
	f.applies++
	return &fakeSession{f: f}, nil
}

func (f *fakeScheduler) Alive() error {
	if f.dead {
		return errors.New("target gone")
	}
	return nil
}

func (f *fakeScheduler) current() *profiles.Profile {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

type fakeSession struct {
	f    *fakeScheduler
	once sync.Once
}

func (s *fakeSession) Stats() ([]scheduler.GroupStats, error) { return nil, nil }
func (s *fakeSession) Stop() error {
	s.once.Do(func() {
		s.f.mu.Lock()
		s.f.cur, s.f.open = nil, 0
		s.f.mu.Unlock()
	})
	return nil
}

// noisyBench returns lognormal p99 values with the given CV around 1 ms;
// effect(p) scales them for the profile in force (nil: stock).
func noisyBench(sched *fakeScheduler, seed uint64, cv float64, effect func(*profiles.Profile) float64) Bench {
	rng := rand.New(rand.NewPCG(seed, 99))
	var mu sync.Mutex
	sigma := math.Sqrt(math.Log(1 + cv*cv))
	return func(context.Context, string) (map[string]float64, error) {
		mu.Lock()
		z := rng.NormFloat64()
		mu.Unlock()
		v := math.Exp(sigma * z)
		if effect != nil {
			v *= effect(sched.current())
		}
		return map[string]float64{"p99_ms": v, "throughput": 1000}, nil
	}
}

func testEnv(t testing.TB, sched *fakeScheduler, b Bench) Env {
	dir := t.TempDir()
	lw, err := ledger.Create(filepath.Join(dir, "ledger.jsonl"), ledger.Header{Config: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lw.Close() })
	return Env{Scheduler: sched, Bench: b, Lint: testLint, Ledger: lw, TrialDir: filepath.Join(dir, "trials"),
		Background: func(n int) (Spinners, error) { return nil, fmt.Errorf("no background in this test") },
		Sleep:      func(context.Context, time.Duration) error { return nil }}
}

func testConfig(seed uint64) Config {
	return Config{Metric: "p99_ms", Dir: -1, MinEffect: 0.05, Alpha: 0.05, Seed: seed, MaxRounds: 3,
		Guards: []Guard{{Metric: "throughput", Dir: 1, Bound: 0.05}}}
}

// latencyWorkers is the planted effect: the workers group at latency
// treatment.
func latencyWorkers(p *profiles.Profile) bool {
	if p == nil {
		return false
	}
	for _, g := range p.ThreadGroups {
		if g.Name == "workers" && g.Treatment == profiles.Latency {
			return true
		}
	}
	return false
}

func TestCandidatesLintedAndOneParameter(t *testing.T) {
	p := testProfile()
	ok, rej, err := Candidates(p, testLint)
	if err != nil {
		t.Fatal(err)
	}
	if len(ok) == 0 {
		t.Fatal("no candidates")
	}
	var sawLatency, sawDrop bool
	for _, a := range ok {
		if fs := testLint(a.Profile); profiles.HasErrors(fs) {
			t.Errorf("candidate %s passed with lint errors: %v", a.Step, fs)
		}
		if a.Step.Group == "workers" && a.Step.To == "latency" {
			sawLatency = true
		}
		if a.Step.Group == "rest" && a.Step.Param == "treatment" && a.Step.To == "normal" {
			sawDrop = true
		}
		if a.Hash == StockHash || a.Profile == p {
			t.Errorf("candidate %s shares the input", a.Step)
		}
	}
	if !sawLatency || !sawDrop {
		t.Errorf("missing moves: workers→latency %v, drop rest %v", sawLatency, sawDrop)
	}
	if p.ThreadGroups[1].Weight != 10 || p.ThreadGroups[0].Treatment != profiles.Normal {
		t.Error("Candidates changed its input")
	}
	// An exclusive group on a 2-core machine: two cores leave none shared,
	// so exclusive_cores 2 is refused by lint and logged, never applied.
	q := testProfile()
	q.Traits.CPURequestMillicores = 2000
	q.ThreadGroups[0] = profiles.ThreadGroup{Name: "workers", Match: profiles.Match{CommPrefix: []string{"wl-worker"}}, Treatment: profiles.Exclusive, CPUFraction: 0.5, ExclusiveCores: 1}
	_, rej, err = Candidates(q, testLint)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rej {
		if r.Arm.Step.Param == "exclusive_cores" && r.Arm.Step.To == "2" {
			found = true
		}
	}
	if !found {
		t.Errorf("exclusive_cores 2 on 2 cores not refused: %+v", rej)
	}
}

// TestRaceDropsFailedCandidate: a candidate under which the benchmark
// fails (it starved the workload until the benchmark saw nothing) is
// dropped from the race with the failure as its reason, and the run goes
// on; a benchmark failing under the incumbent still ends the run.
func TestRaceDropsFailedCandidate(t *testing.T) {
	// As bench.Run reports a command that exits 1.
	exit := exec.Command("sh", "-c", "exit 1").Run()
	if exit == nil {
		t.Fatal("sh -c 'exit 1' did not fail")
	}
	starved := fmt.Errorf("jsonl: %w: demo-bench.sh: no requests completed in the window", exit)
	sched := &fakeScheduler{}
	inner := noisyBench(sched, 3, 0.05, nil)
	bench := func(ctx context.Context, dir string) (map[string]float64, error) {
		if latencyWorkers(sched.current()) {
			return nil, starved
		}
		return inner(ctx, dir)
	}
	cfg := testConfig(11)
	cfg.MinEffect = 0.10
	env := testEnv(t, sched, bench)
	res, err := Run(context.Background(), cfg, testProfile(), env)
	if err != nil {
		t.Fatalf("a candidate's failed benchmark ended the run: %v", err)
	}
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	md := reportText(t, l, cfg)
	if !strings.Contains(md, "the benchmark failed under it") || strings.Contains(md, "Inf") {
		t.Errorf("REPORT.md does not say the candidate's benchmark failed, or prints an infinity:\n%s", md)
	}
	dropped := 0
	for _, r := range res.Rounds {
		for _, d := range r.Decisions {
			if !strings.Contains(d.Step, "workers") || !strings.Contains(d.Step, "latency") {
				continue
			}
			if d.Verdict != "dropped" || !strings.Contains(d.Reason, "the benchmark failed under it") || !strings.Contains(d.Reason, starved.Error()) {
				t.Errorf("round %d: %s: %s, %q; want dropped for its failed benchmark", r.Index, d.Step, d.Verdict, d.Reason)
			}
			dropped++
		}
	}
	if dropped == 0 {
		t.Error("the failing candidate has no decision")
	}
	for _, s := range res.Accepted {
		if s.Group == "workers" && s.To == "latency" {
			t.Errorf("the failing candidate was taken: %v", res.Accepted)
		}
	}
	t.Logf("%d trials, %d rounds, stopped: %s", res.Trials, len(res.Rounds), res.Stopped)

	// The input profile is the race's incumbent: its benchmark failing is
	// the run's error.
	sched = &fakeScheduler{}
	inner = noisyBench(sched, 3, 0.05, nil)
	bench = func(ctx context.Context, dir string) (map[string]float64, error) {
		if p := sched.current(); p != nil && !latencyWorkers(p) && p.ThreadGroups[0].Treatment == profiles.Normal && p.ThreadGroups[1].Treatment == profiles.Yield {
			return nil, starved
		}
		return inner(ctx, dir)
	}
	if _, err := Run(context.Background(), cfg, testProfile(), testEnv(t, sched, bench)); !errors.Is(err, starved) {
		t.Errorf("the incumbent's failed benchmark: %v, want the run to end with it", err)
	}
}

// reportText is the REPORT.md a run with cfg writes from its ledger l.
func reportText(t *testing.T, l *ledger.Ledger, cfg Config) string {
	t.Helper()
	l.Header.Config, _ = json.Marshal(cfg)
	rep, err := ReportOf(l, ReportInfo{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := report.Write(dir, rep); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, report.File))
	if err != nil {
		t.Fatal(err)
	}
	return string(md)
}

// TestFinalFailedUnderRefined: a benchmark that fails under the refined
// profile in the final ends the final with the profile not kept, a
// recorded look that says why, and a report; under stock it ends the run.
func TestFinalFailedUnderRefined(t *testing.T) {
	exit := exec.Command("sh", "-c", "exit 1").Run()
	if exit == nil {
		t.Fatal("sh -c 'exit 1' did not fail")
	}
	starved := fmt.Errorf("jsonl: %w: no requests completed in the window", exit)
	// failIn fails the final's trials (their directories are named after
	// the final's trial ids) under a profile (refined) or under none (stock).
	failIn := func(sched *fakeScheduler, refined bool) Bench {
		inner := noisyBench(sched, 5, 0.05, func(p *profiles.Profile) float64 {
			if latencyWorkers(p) {
				return 0.7 // the step the race takes
			}
			return 1
		})
		return func(ctx context.Context, dir string) (map[string]float64, error) {
			if strings.HasPrefix(filepath.Base(dir), "final") && (sched.current() != nil) == refined {
				return nil, starved
			}
			return inner(ctx, dir)
		}
	}
	cfg := testConfig(7)
	cfg.MinEffect = 0.10
	sched := &fakeScheduler{}
	env := testEnv(t, sched, failIn(sched, true))
	res, err := Run(context.Background(), cfg, testProfile(), env)
	if err != nil {
		t.Fatalf("a failed benchmark under the refined profile ended the run: %v", err)
	}
	if res.Kept {
		t.Error("the refined profile the benchmark failed under was kept")
	}
	if len(res.Final) != 1 {
		t.Fatalf("the final has %d decisions, want the one look that ended it: %+v", len(res.Final), res.Final)
	}
	d := res.Final[0]
	if d.Verdict != "drop" || d.Look == nil || d.Look.Outcome != "drop" || !strings.Contains(d.Reason, "NOT KEPT: the benchmark failed under the refined profile") || !strings.Contains(d.Reason, starved.Error()) {
		t.Errorf("the final's decision: %s, %+v, %q; want a dropped look naming the failure", d.Verdict, d.Look, d.Reason)
	}
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	// The look counts the final's trials that completed, by arm.
	failed, done := 0, [2]int{}
	for _, st := range l.Starts {
		end, ok := l.Ends[st.Trial]
		switch {
		case !ok || st.Stage != StageFinal:
		case end.Error != "":
			failed++
		case st.Candidate == d.Candidate:
			done[1]++
		default:
			done[0]++
		}
	}
	if failed != 1 || d.N != done {
		t.Errorf("the ledger has %d failed final trials and %v completed; want 1 failed, and the look's n %v to count the completed", failed, done, d.N)
	}
	md := reportText(t, l, cfg)
	for _, want := range []string{"**Nothing kept**", "the benchmark failed under the refined profile", fmt.Sprintf("| 1 of 2 | %d+%d |", done[0], done[1]), "| drop |"} {
		if !strings.Contains(md, want) {
			t.Errorf("REPORT.md does not say %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "NaN") || strings.Contains(md, "Inf") {
		t.Errorf("REPORT.md prints a NaN or an infinity:\n%s", md)
	}

	// Under stock the workload itself fails: the run's error.
	sched = &fakeScheduler{}
	if _, err := Run(context.Background(), cfg, testProfile(), testEnv(t, sched, failIn(sched, false))); !errors.Is(err, starved) {
		t.Errorf("stock's failed benchmark in the final: %v, want the run to end with it", err)
	}
}

// TestTreatmentMoveFavour: a treatment move predicts fewer preemptions
// per run when it favours the group, more when it relaxes it, and only a
// change between normal and batch.
func TestTreatmentMoveFavour(t *testing.T) {
	for _, tc := range []struct {
		from, to profiles.Treatment
		want     int8
	}{
		{profiles.Normal, profiles.Latency, 1},
		{profiles.Latency, profiles.Normal, -1},
		{profiles.Batch, profiles.Yield, -1},
		{profiles.Yield, profiles.Batch, 1},
		{profiles.Normal, profiles.Batch, 0},
		{profiles.Batch, profiles.Normal, 0},
	} {
		m := treatmentMove(0, profiles.ThreadGroup{Name: "g", Treatment: tc.from}, tc.to)
		if m.step.Favour != tc.want {
			t.Errorf("%s → %s: favour %d, want %d", tc.from, tc.to, m.step.Favour, tc.want)
		}
	}
}

// TestCoreMovesSizing: a core move's cpu_fraction is synthesize's (the
// largest that gives exactly the new count) within what the other
// exclusive groups leave of the request, and a count the rest cannot give
// is no move at all.
func TestCoreMovesSizing(t *testing.T) {
	group := func(name string, tr profiles.Treatment, f float64, cores int) profiles.ThreadGroup {
		return profiles.ThreadGroup{Name: name, Match: profiles.Match{CommPrefix: []string{name}}, Treatment: tr, CPUFraction: f, ExclusiveCores: cores}
	}
	noLint := func(*profiles.Profile) []profiles.Finding { return nil }
	for _, tc := range []struct {
		name   string
		groups []profiles.ThreadGroup
		want   map[string]float64 // step → the changed group's cpu_fraction
	}{
		{"room left", []profiles.ThreadGroup{group("a", profiles.Exclusive, 0.5, 2), group("b", profiles.Exclusive, 0.25, 1), group("c", profiles.Latency, 0, 0)},
			map[string]float64{
				`group "a": exclusive_cores 2 → 1`:         0.25, // ceil(f × 4) = 1: f ≤ 0.25
				`group "a": exclusive_cores 2 → 3`:         0.75, // all b leaves
				`group "b": exclusive_cores 1 → 2`:         0.5,  // all a leaves
				`group "c": treatment latency → exclusive`: 0.25, // what a and b leave
			}},
		{"request taken", []profiles.ThreadGroup{group("a", profiles.Exclusive, 0.5, 2), group("b", profiles.Exclusive, 0.5, 2), group("c", profiles.Latency, 0, 0)},
			map[string]float64{
				`group "a": exclusive_cores 2 → 1`: 0.25,
				`group "b": exclusive_cores 2 → 1`: 0.25,
			}},
	} {
		p := testProfile()
		p.Traits.CPURequestMillicores = 4000
		p.ThreadGroups = tc.groups
		ok, _, err := Candidates(p, noLint)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, a := range ok {
			if a.Step.Param != "exclusive_cores" && a.Step.To != string(profiles.Exclusive) {
				continue
			}
			for _, g := range a.Profile.ThreadGroups {
				if g.Name == a.Step.Group {
					got[a.Step.String()] = g.CPUFraction
					if n := profiles.ExclusiveCoresFor(g.CPUFraction, 4000); n != g.ExclusiveCores {
						t.Errorf("%s: %s: cpu_fraction %v gives %d cores, not %d", tc.name, a.Step, g.CPUFraction, n, g.ExclusiveCores)
					}
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: core moves %v\nwant %v", tc.name, got, tc.want)
		}
	}
}

// TestDropTreatmentCandidate: a group with a non-normal treatment always
// gets a "drop to normal" and a "relax one step" candidate — the moves for a
// profile that helps under load and hurts at idle.
func TestDropTreatmentCandidate(t *testing.T) {
	q := testProfile()
	q.ThreadGroups[0] = profiles.ThreadGroup{Name: "workers", Match: profiles.Match{CommPrefix: []string{"wl-worker"}}, Treatment: profiles.Exclusive, CPUFraction: 1, ExclusiveCores: 1, SliceUs: 250}
	ok, _, err := Candidates(q, testLint)
	if err != nil {
		t.Fatal(err)
	}
	var tos []string
	for _, a := range ok {
		if a.Step.Group == "workers" && a.Step.Param == "treatment" {
			tos = append(tos, a.Step.To)
			if a.Profile.ThreadGroups[0].ExclusiveCores != 0 || a.Profile.ThreadGroups[0].CPUFraction != 0 {
				t.Errorf("%s kept the core sizing", a.Step)
			}
		}
	}
	if strings.Join(tos, ",") != "normal,latency" {
		t.Errorf("treatment moves %v, want normal,latency", tos)
	}
}

// TestPlantedEffectFound runs the engine against a benchmark whose p99 is
// 20% lower while the workers group has latency treatment: refine must
// accept that step, keep the profile, and apply nothing it did not revert.
func TestPlantedEffectFound(t *testing.T) {
	sched := &fakeScheduler{}
	b := noisyBench(sched, 1, 0.05, func(p *profiles.Profile) float64 {
		if latencyWorkers(p) {
			return 0.8
		}
		return 1
	})
	env := testEnv(t, sched, b)
	cfg := testConfig(7)
	res, err := Run(context.Background(), cfg, testProfile(), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Accepted) == 0 || res.Accepted[0].Group != "workers" || res.Accepted[0].To != "latency" {
		t.Fatalf("accepted %v, want workers → latency first", res.Accepted)
	}
	if !res.Kept || !latencyWorkers(res.Refined) {
		t.Errorf("kept %v, refined has latency workers %v", res.Kept, latencyWorkers(res.Refined))
	}
	if sched.open != 0 {
		t.Error("a profile is still in force after Run")
	}
	p := WithEvidence(res, "ledger.jsonl", time.Now())
	if len(p.Traits.Refined) != 1 || !strings.Contains(p.Traits.Refined[0], "p99_ms at every level") {
		t.Errorf("traits.refined %q", p.Traits.Refined)
	}
	if fs := testLint(p); profiles.HasErrors(fs) {
		t.Errorf("refined profile not lint-clean: %v", fs)
	}

	// The report is built from the ledger alone.
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Defaults()
	l.Header.Config, _ = json.Marshal(cfg)
	rep, err := ReportOf(l, ReportInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Arms) != 3 || len(rep.Ladder) != 1 || rep.Ladder[0].Delta == nil || !rep.Kept || len(rep.Calibration) != 0 || len(rep.Races) == 0 || len(rep.Looks) == 0 || len(rep.Rates) != 3 {
		t.Errorf("report: %d arms, ladder %+v, kept %v, %d calibrations, %d races, %d looks, %d rates", len(rep.Arms), rep.Ladder, rep.Kept, len(rep.Calibration), len(rep.Races), len(rep.Looks), len(rep.Rates))
	} else if lv := rep.Ladder[0]; lv.Cells[0].N != lv.Delta.NBase || lv.Cells[2].N != lv.Delta.NCand {
		// The cells of the arms in the final comparison hold its trials, as Δ does.
		t.Errorf("ladder cells n = %d (stock), %d (refined); final comparison n = %d, %d", lv.Cells[0].N, lv.Cells[2].N, lv.Delta.NBase, lv.Delta.NCand)
	}
	dir := t.TempDir()
	if err := report.Write(dir, rep); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, report.File))
	if err != nil || !strings.Contains(string(md), "stock CFS") || !strings.Contains(string(md), "workers") {
		t.Errorf("REPORT.md: %v\n%s", err, md)
	}
}

// TestErrorsGuardFromNone: the planted step is 20% faster but makes ~4
// errors per trial where stock makes none; the errors:0% guard (a count:
// absolute rates) must veto it in the final, so nothing is kept, and the
// ledger and report print the change as "+4", never NaN.
func TestErrorsGuardFromNone(t *testing.T) {
	sched := &fakeScheduler{}
	fast := noisyBench(sched, 1, 0.05, func(p *profiles.Profile) float64 {
		if latencyWorkers(p) {
			return 0.8
		}
		return 1
	})
	trial := 0
	b := func(ctx context.Context, dir string) (map[string]float64, error) {
		m, err := fast(ctx, dir)
		m["errors"] = 0
		if latencyWorkers(sched.current()) {
			trial++
			m["errors"] = float64(3 + trial%3) // 3, 4, 5
		}
		return m, err
	}
	env := testEnv(t, sched, b)
	cfg := testConfig(7)
	g, err := ParseGuard("errors:0%")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Guards = append(cfg.Guards, g)
	res, err := Run(context.Background(), cfg, testProfile(), env)
	if err != nil {
		t.Fatal(err)
	}
	if res.Kept {
		t.Fatalf("the profile that makes errors was kept: accepted %v", res.Accepted)
	}
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	vetoed := false
	for _, d := range l.Decisions {
		for _, gd := range d.Guards {
			if gd.Metric == "errors" && gd.Regresses && d.Stage == StageFinal {
				vetoed = true
				if !gd.Count || float64(gd.Effect) < 3 || gd.Change()[0] != '+' || strings.Contains(gd.WorstChange(), "NaN") {
					t.Errorf("errors guard recorded as %+v (%s, %s)", gd, gd.Change(), gd.WorstChange())
				}
			}
		}
		if d.Look != nil && (d.Accepted || !strings.Contains(d.Reason, "errors")) {
			t.Errorf("final look %d: accepted %v, reason %q: want not kept for the errors guard", d.Look.Index, d.Accepted, d.Reason)
		}
	}
	if !vetoed {
		t.Error("no level of the final records the errors guard vetoing")
	}
	cfg.Defaults()
	l.Header.Config, _ = json.Marshal(cfg)
	rep, err := ReportOf(l, ReportInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rep.Guards, ", "); got != "throughput:-5%, errors:+0" {
		t.Errorf("report guards %q", got)
	}
	for _, lv := range rep.Ladder {
		for _, g := range lv.Guards {
			if g.Metric == "errors" && (!g.Vetoed || g.Change[0] != '+' || strings.Contains(g.Change+g.Worst, "NaN")) {
				t.Errorf("report guard %+v", g)
			}
		}
	}
}

// TestBenchFailureStopsAndReverts: a failing trial ends the run with its
// error, recorded in the ledger, nothing left applied.
func TestBenchFailureStopsAndReverts(t *testing.T) {
	sched := &fakeScheduler{}
	calls := 0
	b := func(ctx context.Context, dir string) (map[string]float64, error) {
		calls++
		if calls == 12 {
			return nil, errors.New("jsonl output line 3: not JSON")
		}
		return map[string]float64{"p99_ms": 1 + 0.01*float64(calls%3)}, nil
	}
	env := testEnv(t, sched, b)
	_, err := Run(context.Background(), testConfig(3), testProfile(), env)
	if err == nil || !strings.Contains(err.Error(), "line 3: not JSON") {
		t.Fatalf("err %v", err)
	}
	if sched.open != 0 {
		t.Error("profile left in force")
	}
	l, rerr := ledger.Read(env.Ledger.Path())
	if rerr != nil {
		t.Fatal(rerr)
	}
	failed := 0
	for _, e := range l.Ends {
		if e.Error != "" {
			failed++
		}
	}
	if failed != 1 || len(l.Open()) != 0 {
		t.Errorf("ledger: %d failed ends, %d open trials", failed, len(l.Open()))
	}
}

// TestReplayIsExact: a run resumed from its own ledger after being cut off
// runs no recorded trial again and reaches the same decisions.
func TestReplayIsExact(t *testing.T) {
	sched := &fakeScheduler{}
	effect := func(p *profiles.Profile) float64 {
		if latencyWorkers(p) {
			return 0.8
		}
		return 1
	}
	cfg := testConfig(11)
	full, err := Run(context.Background(), cfg, testProfile(), testEnv(t, sched, noisyBench(sched, 5, 0.05, effect)))
	if err != nil {
		t.Fatal(err)
	}
	// Cut a second run off after 30 trials, then resume it from its ledger.
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	inner := noisyBench(sched, 5, 0.05, effect)
	env := testEnv(t, sched, func(c context.Context, d string) (map[string]float64, error) {
		n++
		if n == 30 {
			cancel()
			return nil, c.Err()
		}
		return inner(c, d)
	})
	if _, err := Run(ctx, cfg, testProfile(), env); !errors.Is(err, context.Canceled) {
		t.Fatalf("cut-off run: %v", err)
	}
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	cut := cfg
	cut.Defaults()
	l.Header.Config, _ = json.Marshal(cut)
	if rep, err := ReportOf(l, ReportInfo{}); err != nil || rep.Duration <= 0 || rep.Trials != 29 {
		t.Errorf("report of the cut-off run: %v, %d trials in %v (want 29 in > 0s)", err, rep.Trials, rep.Duration)
	}
	for info, want := range map[string]string{"": "its ledger can resume it", "--resume": "resume it with --resume"} {
		if rep, _ := ReportOf(l, ReportInfo{Resume: info}); !strings.Contains(rep.Stopped, want) {
			t.Errorf("cut-off run with Resume %q: stopped %q, want %q in it", info, rep.Stopped, want)
		}
	}
	env2 := env
	env2.Done = l.Done()
	ran := 0
	env2.Bench = func(c context.Context, d string) (map[string]float64, error) {
		ran++
		return inner(c, d)
	}
	res, err := Run(context.Background(), cfg, testProfile(), env2)
	if err != nil {
		t.Fatal(err)
	}
	if ran != full.Trials-len(env2.Done) {
		t.Errorf("resumed run ran %d trials, want %d (total %d, recorded %d)", ran, full.Trials-len(env2.Done), full.Trials, len(env2.Done))
	}
	if fmt.Sprint(res.Accepted) != fmt.Sprint(full.Accepted) || res.Trials != full.Trials {
		t.Errorf("resumed: %v in %d trials; uninterrupted: %v in %d", res.Accepted, res.Trials, full.Accepted, full.Trials)
	}
}

// TestBudget: with a trial budget too small for a whole race, refine cuts
// its rungs to what fits, keeps the final comparison and says why it
// stopped.
func TestBudget(t *testing.T) {
	sched := &fakeScheduler{}
	cfg := testConfig(2)
	cfg.MaxTrials = 60
	res, err := Run(context.Background(), cfg, testProfile(), testEnv(t, sched, noisyBench(sched, 2, 0.05, func(p *profiles.Profile) float64 {
		if latencyWorkers(p) {
			return 0.7
		}
		return 1
	})))
	if err != nil {
		t.Fatal(err)
	}
	looks := 0
	for _, d := range res.Final {
		if d.Look != nil {
			looks++
		}
	}
	if res.Trials > 60 || looks == 0 || len(res.Rounds) == 0 {
		t.Errorf("%d trials (budget 60), stopped %q, %d rounds, %d final looks", res.Trials, res.Stopped, len(res.Rounds), looks)
	}
	t.Logf("%d trials, stopped %q, final n %d, kept %v", res.Trials, res.Stopped, res.FinalN, res.Kept)
}

// TestBudgetRefusedAtOnce: a trial budget below calibration plus the final
// comparison is refused with the numbers before any trial runs.
func TestBudgetRefusedAtOnce(t *testing.T) {
	sched := &fakeScheduler{}
	cfg := testConfig(2)
	cfg.MaxTrials = 4
	ran := 0
	bench := func(context.Context, string) (map[string]float64, error) {
		ran++
		return nil, errors.New("no trial should run")
	}
	_, err := Run(context.Background(), cfg, testProfile(), testEnv(t, sched, bench))
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "at most 4 trials") || !strings.Contains(err.Error(), "need at least 8") {
		t.Errorf("err %v; want ErrBudget with the numbers", err)
	}
	if ran != 0 || sched.applies != 0 {
		t.Errorf("%d trials ran and %d profiles were applied before refusing", ran, sched.applies)
	}
}

// TestNoisyRefuses: a race that finds the noise far above the minimum
// effect, beyond what the largest final could resolve, refuses with the
// numbers.
func TestNoisyRefuses(t *testing.T) {
	sched := &fakeScheduler{}
	cfg := testConfig(4)
	cfg.RaceN = 4 // enough blocks to bound the noise from below
	_, err := Run(context.Background(), cfg, testProfile(), testEnv(t, sched, noisyBench(sched, 4, 0.6, nil)))
	if !errors.Is(err, ErrNoisy) || !strings.Contains(err.Error(), "minimum effect 5%") {
		t.Fatalf("err %v", err)
	}
}

// TestTierArms plants the seeds' result: the tier halves p99 at every
// level, the profile's latency step takes another 30% off on top of it.
// The run must decide steps against tier only, measure the three arms side
// by side in the final comparison, describe the tier's and the product's
// effect, keep the profile for what it adds, and leave the tier off.
func TestTierArms(t *testing.T) {
	sched := &fakeScheduler{}
	var mu sync.Mutex
	tierOn, switches := false, 0
	b := noisyBench(sched, 7, 0.03, func(p *profiles.Profile) float64 {
		mu.Lock()
		defer mu.Unlock()
		f := 1.0
		if tierOn {
			f = 0.5
		}
		if latencyWorkers(p) {
			f *= 0.7
		}
		return f
	})
	env := testEnv(t, sched, b)
	env.Background = func(n int) (Spinners, error) { return noSpinners{}, nil }
	env.Tier = func(on bool) error {
		mu.Lock()
		defer mu.Unlock()
		if on == tierOn {
			return fmt.Errorf("tier already %v", on)
		}
		tierOn = on
		switches++
		return nil
	}
	cfg := testConfig(3)
	cfg.Tier = true
	cfg.Ladder = []int{0, 2}
	res, err := Run(context.Background(), cfg, testProfile(), env)
	if err != nil {
		t.Fatal(err)
	}
	if tierOn {
		t.Error("the tier is still in force after the run")
	}
	if !res.Kept || len(res.Accepted) == 0 || res.Accepted[0].Param != "treatment" {
		t.Fatalf("kept %v, accepted %v; want the latency step kept", res.Kept, res.Accepted)
	}
	for _, d := range res.Final {
		if !strings.HasSuffix(d.Candidate, TierSuffix) || d.Step != "tier + refined vs tier only" {
			t.Errorf("final decision %s (%s): want tier + refined decided against tier only", d.Step, d.Candidate)
		}
		// What the profile adds: about −30%, not the tier's −50% with it.
		if c := float64(d.Effect.Center); c > -0.2 || c < -0.4 {
			t.Errorf("bg=%d: the profile's effect over tier only %.2f, want ≈ −0.30", d.Bg, c)
		}
	}
	if last := res.Final[len(res.Final)-1]; last.Look != nil {
		t.Errorf("the final's last record is a look; want the levels' checks after it")
	}
	if len(res.Described) != 2*len(cfg.Ladder) {
		t.Fatalf("%d described contrasts, want %d", len(res.Described), 2*len(cfg.Ladder))
	}
	for _, d := range res.Described {
		want := -0.5 // tier only vs stock
		if strings.HasPrefix(d.Step, "tier + refined") {
			want = -0.65 // the product: tier and profile
		}
		if c := float64(d.Effect.Center); math.Abs(c-want) > 0.08 || d.Accepted {
			t.Errorf("%s bg=%d: effect %.2f accepted %v, want ≈ %.2f, never accepted", d.Step, d.Bg, c, d.Accepted, want)
		}
	}
	// Every race trial ran with the tier.
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	arms := map[string]int{}
	for _, s := range l.Starts {
		if s.Stage == StageRace {
			if !strings.HasSuffix(s.Candidate, TierSuffix) {
				t.Errorf("trial %s (%s) ran without the tier", s.Trial, s.Stage)
			}
		}
		if s.Stage == StageFinal {
			arms[s.Arm]++
		}
	}
	if n := arms["A"]; n < minFinalN*len(cfg.Ladder) || arms["B"] != n || arms["C"] != n {
		t.Errorf("final arms %v, want %d trials each of A (stock), B (tier), C (tier + refined)", arms, n)
	}
	rep, err := ReportOf(l, ReportInfo{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range rep.Arms {
		names = append(names, a.Name)
	}
	if got := strings.Join(names, ", "); got != "stock CFS, tier only, tier + input profile, tier + refined" || !rep.Tier || rep.DeltaBase != 1 {
		t.Errorf("report arms %q (tier %v, Δ against %d)", got, rep.Tier, rep.DeltaBase)
	}
	for _, lv := range rep.Ladder {
		if lv.Delta == nil || lv.Product == nil || lv.Cells[1].N == 0 || lv.Delta.Harm == "" {
			t.Errorf("bg=%d: Δ %v, product %v, tier-only cell n=%d: want all three arms", lv.Bg, lv.Delta, lv.Product, lv.Cells[1].N)
		}
	}
	t.Logf("%d trials, %d tier switches", res.Trials, switches)
}

// noSpinners stands for a background level the fake bench ignores.
type noSpinners struct{}

func (noSpinners) Pids() []int { return nil }
func (noSpinners) Stop() error { return nil }

// TestUnchangedNotRun gives the engine a backend on which a weight moves
// nothing (as CFS for a non-latency group): no candidate that only changes
// a weight may be run, and the ledger says how many were left out.
func TestUnchangedNotRun(t *testing.T) {
	sched := &fakeScheduler{}
	env := testEnv(t, sched, noisyBench(sched, 5, 0.03, nil))
	env.Realise = func(p *profiles.Profile) (string, error) {
		if p == nil {
			return "stock", nil
		}
		var b strings.Builder
		for _, g := range p.ThreadGroups {
			fmt.Fprintf(&b, "%s/%s/%d;", g.Name, g.Treatment, g.SliceUs)
		}
		return b.String(), nil
	}
	cfg := testConfig(11)
	cfg.MaxRounds = 1
	res, err := Run(context.Background(), cfg, testProfile(), env)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Starts {
		if strings.Contains(s.Params, "weight") {
			t.Errorf("trial %s ran %s, which realises as its incumbent", s.Trial, s.Params)
		}
	}
	if len(res.Rounds) == 0 || res.Rounds[0].Unchanged == 0 {
		t.Fatalf("rounds %+v: want candidates left out as unchanged", res.Rounds)
	}
	found := false
	for _, n := range l.Notes {
		found = found || strings.Contains(n.Text, "leave the kernel state as")
	}
	if !found {
		t.Error("the ledger does not say which candidates were left out")
	}
	t.Logf("round 1: %d run, %d left out", res.Rounds[0].Candidates, res.Rounds[0].Unchanged)
}

// TestAlternativesRaced plants an effect no single step reaches: p99 falls
// only when the workers are latency and the rest normal at once. The
// portfolio's alternative that does both is raced in round 1 and taken.
func TestAlternativesRaced(t *testing.T) {
	sched := &fakeScheduler{}
	both := func(p *profiles.Profile) float64 {
		if p == nil || !latencyWorkers(p) {
			return 1
		}
		for _, g := range p.ThreadGroups {
			if g.Name == "rest" && g.Treatment == profiles.Normal {
				return 0.6
			}
		}
		return 1
	}
	env := testEnv(t, sched, noisyBench(sched, 9, 0.03, both))
	alt := testProfile()
	alt.ThreadGroups[0].Treatment, alt.ThreadGroups[1].Treatment, alt.ThreadGroups[1].Weight = profiles.Latency, profiles.Normal, 0
	env.Alternatives = []Alternative{{Name: "conservative", Profile: alt}}
	cfg := testConfig(4)
	cfg.MaxRounds = 1
	res, err := Run(context.Background(), cfg, testProfile(), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Accepted) != 1 || res.Accepted[0].Param != "portfolio: conservative" || !res.Kept {
		t.Fatalf("accepted %v, kept %v: want the portfolio's conservative profile", res.Accepted, res.Kept)
	}
}

// TestBudgetFirstBlockRefused: a trial budget that cannot hold round 1's
// first block beside the final is refused before any trial, in trials,
// with no time it has not measured ("0s at 0s a trial").
func TestBudgetFirstBlockRefused(t *testing.T) {
	sched := &fakeScheduler{}
	cfg := testConfig(3)
	cfg.FinalN = 4
	cfg.MaxTrials = 14 // the final's 8 and fewer than a block of every candidate
	env := testEnv(t, sched, noisyBench(sched, 3, 0.05, nil))
	_, err := Run(context.Background(), cfg, testProfile(), env)
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "first block of") || !strings.Contains(err.Error(), "at most 14 trials") || strings.Contains(err.Error(), "0s") {
		t.Fatalf("err %v; want ErrBudget in trials, with no time", err)
	}
	t.Log(err)
	if l, err := ledger.Read(env.Ledger.Path()); err != nil || len(l.Starts) != 0 {
		t.Errorf("ledger: %v, %d trials; want none run", err, len(l.Starts))
	}
}

// TestBudgetTimeRefusedEarly: a time budget that cannot hold round 1 and
// the least final is refused after the race's first block has timed a
// trial, with the budget that would do, and nothing is left applied.
func TestBudgetTimeRefusedEarly(t *testing.T) {
	sched := &fakeScheduler{}
	inner := noisyBench(sched, 3, 0.05, nil)
	ran := 0
	bench := func(ctx context.Context, dir string) (map[string]float64, error) {
		ran++
		time.Sleep(20 * time.Millisecond)
		return inner(ctx, dir)
	}
	cfg := testConfig(3)
	cfg.MaxTime = 250 * time.Millisecond // the first block takes about 200 ms
	_, err := Run(context.Background(), cfg, testProfile(), testEnv(t, sched, bench))
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "raise it to at least") {
		t.Fatalf("err %v; want ErrBudget saying what budget would do", err)
	}
	k := 0
	if ok, _, err := Candidates(testProfile(), testLint); err == nil {
		k = len(ok)
	}
	if ran != k+2 || sched.open != 0 {
		t.Errorf("%d trials ran (want the first block, %d), %d profiles open", ran, k+2, sched.open)
	}
}
