package planted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/pipeline"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/bench"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/stats"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/target"
)

// minEffect is the runs' --min-effect: 20% (PLANTED_MIN_EFFECT overrides
// it). The final keeps only what its interval shows clears the minimum
// effect, so at CV 10% a planted effect of 1.5× it needs n per arm ∝
// (CV / (0.5·minEffect))²: at 20%, about 10 per arm; at 10%, more than
// refine's cap of 40 (the table says what that costs). The harm scenario
// sets its own tolerance (--harm 5%), since a 10% loss is within a 20%
// default.
var minEffect = 0.20

// harmTolerance is the harm scenario's --harm: below the 10% loss it
// plants, so that keeping it is a false keep of the non-inferiority test.
const harmTolerance = "5%"

// The planted group and parameter (testdata/planted/planted.toml).
const (
	plantedGroup = "alpha"
	plantedParam = "slice_us"
	plantedComm  = "lat-"
)

// guards are the command's defaults (--guard throughput:-5% errors:0%):
// every scenario runs as a user runs refine.
var guards = []string{"throughput:-5%", "errors:0%"}

// outcome is what one refine run decided.
type outcome struct {
	kept    bool // Result.Kept: the refined profile beat stock
	planted bool // kept, with an accepted step on alpha's slice_us and alpha's slice below the default in the refined profile
	trials  int
	// final is the final's trials (both arms, every level) and looks how
	// many of its looks ran: where the trials went.
	final, looks int
	wall         time.Duration
}

// scenario is one row of the table: what the benchmark plants and which
// outcome is counted against which target.
type scenario struct {
	name   string
	ladder string
	// effect is the relative improvement of p50_ms at each background
	// level while the planted state is in force (negative: worse).
	effect   map[int]float64
	cv       float64 // of p50_ms
	tputCost float64 // throughput lost in the planted state
	tputCV   float64
	// counted is the outcome the rate counts, what names it.
	counted func(outcome) bool
	what    string
	// holds says whether x of n meets the target, and the target.
	holds  func(x, n int) bool
	target string
}

func scenarios() []scenario {
	e := 1.5 * minEffect
	return []scenario{
		{name: "planted", ladder: "0", effect: map[int]float64{0: e}, cv: 0.10, tputCV: 0.05,
			counted: func(o outcome) bool { return o.planted }, what: "right param kept",
			holds: func(x, n int) bool { return float64(x) >= 0.80*float64(n) }, target: "≥ 80%"},
		{name: "null", ladder: "0", effect: nil, cv: 0.10, tputCV: 0.05,
			counted: func(o outcome) bool { return o.kept }, what: "false keeps",
			holds: func(x, n int) bool { return stats.UpperBound(x, n, 0.95) <= 0.05 }, target: "upper 95% ≤ 5%"},
		{name: "harm", ladder: "0,1", effect: map[int]float64{0: 0.30, 1: -0.10}, cv: 0.10, tputCV: 0.05,
			counted: func(o outcome) bool { return o.planted }, what: "harmful kept",
			holds: func(x, n int) bool { return float64(x) <= 0.05*float64(n) }, target: "≤ 5%"},
		{name: "guard", ladder: "0", effect: map[int]float64{0: e}, cv: 0.05, tputCost: 0.10, tputCV: 0.05,
			counted: func(o outcome) bool { return !o.planted }, what: "vetoed",
			holds: func(x, n int) bool { return float64(x) >= 0.95*float64(n) }, target: "≥ 95%"},
	}
}

// benchConfig is the benchmark's config.json (testdata/planted/bench).
type benchConfig struct {
	Pid            int                `json:"pid"`
	Seed           uint64             `json:"seed"`
	Prefix         string             `json:"prefix"`
	When           string             `json:"when"`
	Effect         map[string]float64 `json:"effect"`
	CV             float64            `json:"cv"`
	ThroughputCost float64            `json:"throughput_cost"`
	ThroughputCV   float64            `json:"throughput_cv"`
}

// harness is the target running, the benchmark built and the CFS backend
// set up to apply profiles to it.
type harness struct {
	live    *pipeline.Live
	tgt     *target.Target
	prof    *profiles.Profile
	dir     string
	state   string // the benchmark's -state directory
	sliceNs uint64 // the kernel's default slice: the main thread's
	before  map[int]threadState
}

// newHarness builds and starts everything; the test's cleanup stops the
// target and checks that nothing it started is left.
func newHarness(t *testing.T) *harness {
	t.Helper()
	need.Root(t, "the CFS backend changes other threads' policy, nice and slice")
	goTool := need.Tool(t, "go", "golang")
	dir := t.TempDir()
	targetBin := testkit.BuildC(t, testkit.RepoFile(t, "testdata/planted/planted.c"))
	benchBin := filepath.Join(dir, "planted-bench")
	build := exec.Command(goTool, "build", "-o", benchBin, "./testdata/planted/bench")
	build.Dir = testkit.RepoFile(t, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the benchmark: %v\n%s", err, out)
	}
	src, err := os.ReadFile(testkit.RepoFile(t, "testdata/planted/planted.toml"))
	if err != nil {
		t.Fatal(err)
	}
	prof, err := profiles.Parse("planted.toml", src)
	if err != nil {
		t.Fatal(err)
	}

	ready := newReadyWriter()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tgt, err := target.Resolve(ctx, target.Spec{Command: []string{targetBin}, Stdout: ready})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopTarget(t, tgt) })
	select {
	case <-ready.ready:
	case <-tgt.Exited():
		t.Fatal("the target exited before it was ready")
	case <-ctx.Done():
		t.Fatal("the target did not print ready within 10 s")
	}

	backend := cfs.New(cfs.Options{StateFile: filepath.Join(dir, stateFile)})
	if err := backend.Probe(); err != nil {
		t.Skip(err)
	}
	jsonl, err := bench.Lookup("jsonl")
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	live, err := pipeline.NewLive(backend, tgt, bench.Command{Argv: []string{benchBin, "-state", state}, Adapter: jsonl, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{live: live, tgt: tgt, prof: prof, dir: dir, state: state}
	main, err := unix.SchedGetAttr(tgt.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if main.Runtime == 0 {
		need.Unmet(t, "a kernel that takes a fair thread's slice (Linux 6.12+)", "the planted parameter is a slice; run on a newer kernel")
	}
	h.sliceNs = main.Runtime
	if h.before, err = threadStates(tgt.Pid); err != nil {
		t.Fatal(err)
	}
	if len(h.before) != 9 {
		t.Fatalf("the target has %d threads, want 9 (main and four groups of two)", len(h.before))
	}
	return h
}

// stateFile is the CFS backend's state file, in the harness's directory.
const stateFile = "cfs-state.json"

func (h *harness) stateFile() string { return filepath.Join(h.dir, stateFile) }

// readyWriter closes ready once the target has printed "ready".
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func newReadyWriter() *readyWriter { return &readyWriter{ready: make(chan struct{})} }

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "\nready\n") {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

// stopTarget stops the target and checks that this test process has no
// child left: no target, no spinner, no benchmark.
func stopTarget(t *testing.T, tgt *target.Target) {
	t.Helper()
	if _, err := tgt.Stop(5 * time.Second); err != nil {
		t.Errorf("stop the target: %v", err)
	}
	if kids := children(); len(kids) > 0 {
		t.Errorf("processes left behind: %s", strings.Join(kids, ", "))
	}
}

// children lists this process's live child processes as "pid comm".
func children() []string {
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) > 1 && f[1] == me && f[0] != "Z" {
			out = append(out, e.Name()+" "+s[open+1:end])
		}
	}
	return out
}

// threadState is what the CFS backend may change in a thread, read with
// syscalls (not /proc, which the benchmark reads).
type threadState struct {
	Policy uint32
	Nice   int32
	Slice  uint64
	CPUs   string
}

func threadStates(pid int) (map[int]threadState, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	out := map[int]threadState{}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			return nil, fmt.Errorf("thread %d: %w", tid, err)
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			return nil, fmt.Errorf("thread %d: %w", tid, err)
		}
		var cpus []string
		for c := range 1024 {
			if set.IsSet(c) {
				cpus = append(cpus, strconv.Itoa(c))
			}
		}
		out[tid] = threadState{Policy: a.Policy, Nice: a.Nice, Slice: a.Runtime, CPUs: strings.Join(cpus, ",")}
	}
	return out, nil
}

// checkRestored fails t unless every thread of the target is as it was
// before anything was applied and the backend holds no state file (its
// record of what is still to revert).
func (h *harness) checkRestored(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(h.stateFile()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the CFS backend's state file %s is left (%v): something is still applied", h.stateFile(), err)
	}
	now, err := threadStates(h.tgt.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for tid, was := range h.before {
		if is, ok := now[tid]; !ok {
			t.Errorf("thread %d is gone", tid)
		} else if is != was {
			t.Errorf("thread %d is %+v, was %+v before", tid, is, was)
		}
	}
}

// configure writes the benchmark's config for one run and resets its trial
// counter.
func (h *harness) configure(sc scenario, seed uint64) error {
	c := benchConfig{Pid: h.tgt.Pid, Seed: seed, Prefix: plantedComm, When: "slice_below_default",
		Effect: map[string]float64{}, CV: sc.cv, ThroughputCost: sc.tputCost, ThroughputCV: sc.tputCV}
	for bg, e := range sc.effect {
		c.Effect[strconv.Itoa(bg)] = e
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(h.state, "counter")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(filepath.Join(h.state, "config.json"), b, 0o644)
}

// realisesPlanted says whether p, applied by the CFS backend, gives alpha's
// threads a slice below the default: the backend's own rule (Realise) read.
func (h *harness) realisesPlanted(p *profiles.Profile) (bool, error) {
	if p == nil {
		return false, nil
	}
	r, err := h.live.Backend.(scheduler.Realiser).Realise(p, h.live.Topology)
	if err != nil {
		return false, err
	}
	for _, g := range r.Groups {
		if g.Name != plantedGroup {
			continue
		}
		for _, s := range g.Settings {
			if s.Name == "slice" {
				d, err := time.ParseDuration(s.Value)
				if err != nil {
					return false, fmt.Errorf("group %s: slice %q: %w", g.Name, s.Value, err)
				}
				return uint64(d) < h.sliceNs, nil
			}
		}
	}
	return false, nil
}

// seedOf is run i's seed in scenario name: the same runs every time.
func seedOf(name string, i int) uint64 {
	f := fnv.New64a()
	fmt.Fprintf(f, "%s/%d", name, i)
	return f.Sum64() | 1
}

// run is one refine run of sc with seed: a ledger of its own, the
// benchmark configured for it, the real backend on the real target.
func (h *harness) run(ctx context.Context, sc scenario, i int) (outcome, *refine.Result, error) {
	seed := seedOf(sc.name, i)
	if err := h.configure(sc, seed); err != nil {
		return outcome{}, nil, err
	}
	harm := ""
	if sc.name == "harm" {
		harm = harmTolerance
	}
	cfg, err := refine.Settings{Config: refine.Config{Metric: "p50_ms", Warmup: 5 * time.Millisecond, Seed: seed},
		MinEffect: fmt.Sprintf("%g%%", 100*minEffect), Harm: harm, Guards: guards, Ladder: sc.ladder}.Parse()
	if err != nil {
		return outcome{}, nil, err
	}
	rdir := filepath.Join(h.dir, "runs", fmt.Sprintf("%s-%d", sc.name, i))
	if err := os.MkdirAll(rdir, 0o755); err != nil {
		return outcome{}, nil, err
	}
	hash, err := refine.Hash(h.prof)
	if err != nil {
		return outcome{}, nil, err
	}
	lw, err := ledger.Create(filepath.Join(rdir, "ledger.jsonl"), h.live.Header("testdata/planted/planted.toml", hash, "", cfg))
	if err != nil {
		return outcome{}, nil, err
	}
	defer lw.Close()
	env := h.live.Env(lw, filepath.Join(rdir, "trials"))
	start := time.Now()
	res, err := refine.Run(ctx, cfg, h.prof, env)
	o := outcome{wall: time.Since(start)}
	if res != nil {
		o.trials = res.Trials
		o.kept = res.Kept
		for _, d := range res.Final {
			if d.Look != nil {
				o.looks++
				o.final = d.N[0] + d.N[1]
			}
		}
	}
	if err != nil {
		return o, res, fmt.Errorf("%s run %d (seed %d): %w (ledger %s)", sc.name, i, seed, err, lw.Path())
	}
	if res.Kept && slices.ContainsFunc(res.Accepted, func(s refine.Step) bool { return s.Group == plantedGroup && s.Param == plantedParam }) {
		if o.planted, err = h.realisesPlanted(res.Refined); err != nil {
			return o, res, err
		}
	}
	if os.Getenv("PLANTED_KEEP") == "" {
		os.RemoveAll(rdir)
	} else {
		os.Rename(rdir, filepath.Join(os.Getenv("PLANTED_KEEP"), filepath.Base(rdir)))
	}
	return o, res, nil
}

// TestBenchReadsAppliedState applies stock, the profile and each of its
// one-step candidates through the CFS backend and runs the benchmark
// without noise: it answers better exactly when the backend realises the
// planted state, which one candidate does (alpha's slice halved), and no
// move of the other three groups changes its answer. Every thread is
// back as it was after each arm.
func TestBenchReadsAppliedState(t *testing.T) {
	h := newHarness(t)
	sc := scenario{name: "exact", effect: map[int]float64{0: 0.3}, tputCost: 0.1}
	if err := h.configure(sc, 1); err != nil {
		t.Fatal(err)
	}
	cands, rejected, err := refine.Candidates(h.prof, h.live.Lint)
	if err != nil {
		t.Fatal(err)
	}
	if len(rejected) > 0 {
		t.Errorf("lint rejected candidates: %v", rejected)
	}
	input, err := refine.NewArm(h.prof, refine.Step{Param: "input profile"})
	if err != nil {
		t.Fatal(err)
	}
	stock, _ := refine.NewArm(nil, refine.Step{Param: "stock"})
	arms := append([]refine.Arm{stock, input}, cands...)
	env := h.live.Env(nil, h.dir)
	inputKey, err := h.live.Realise(h.prof)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{} // groups with a candidate whose kernel state differs from the input's
	var plantedSteps []refine.Step
	var applyBench, revert []time.Duration
	for _, a := range arms {
		if a.Step.Group != "" {
			key, err := h.live.Realise(a.Profile)
			if err != nil {
				t.Fatal(err)
			}
			if key != inputKey {
				ran[a.Step.Group] = true
			}
		}
		want, err := h.realisesPlanted(a.Profile)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		sess, err := h.live.Scheduler().Apply(context.Background(), a.Profile)
		if err != nil {
			t.Fatalf("%s: %v", a.Step, err)
		}
		dir := filepath.Join(h.dir, "trial")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		m, err := env.Bench(context.Background(), dir)
		t2 := time.Now()
		if serr := sess.Stop(); serr != nil {
			t.Errorf("%s: revert: %v", a.Step, serr)
		}
		applyBench = append(applyBench, t2.Sub(t0))
		revert = append(revert, time.Since(t2))
		if err != nil {
			t.Fatalf("%s: bench: %v", a.Step, err)
		}
		p50, tput := 10.0, 1000.0
		if want {
			p50, tput = 7, 900
			plantedSteps = append(plantedSteps, a.Step)
		}
		if math.Abs(m["p50_ms"]-p50) > 1e-9 || math.Abs(m["throughput"]-tput) > 1e-6 || m["errors"] != 0 {
			t.Errorf("%s (planted state %v): the benchmark says %v, want p50_ms %g, throughput %g, errors 0", a.Step, want, m, p50, tput)
		}
		h.checkRestored(t)
	}
	if len(plantedSteps) != 1 || plantedSteps[0].Group != plantedGroup || plantedSteps[0].Param != plantedParam {
		t.Errorf("arms realising the planted state: %v, want one: group %q %s halved", plantedSteps, plantedGroup, plantedParam)
	}
	for _, g := range h.prof.ThreadGroups {
		if !ran[g.Name] {
			t.Errorf("group %q has no candidate whose kernel state differs from the input profile's: refine never runs a move of it", g.Name)
		}
	}
	t.Logf("one trial, apply + benchmark: median %s; revert: median %s (%d arms: stock, the input and %d candidates)",
		median(applyBench), median(revert), len(arms), len(cands))
}

// TestPlanted runs refine PLANTED_RUNS times per scenario (default 1; 0 or
// -short: none) on the real target through the CFS backend and prints the
// table. With PLANTED_RATES=1 (make planted) it holds each scenario's rate
// to issue 23's target; without, it checks only what a few runs can: every
// run decides without an error, and every thread ends as it began with no
// process left.
func TestPlanted(t *testing.T) {
	runs := 1
	if s := os.Getenv("PLANTED_MIN_EFFECT"); s != "" {
		m, err := refine.ParsePercent(s)
		if err != nil || m <= 0 {
			t.Fatalf("PLANTED_MIN_EFFECT=%q: want a percentage such as 20%%", s)
		}
		minEffect = m
	}
	if s, ok := os.LookupEnv("PLANTED_GUARDS"); ok {
		// What the default guards cost in trials: e.g. PLANTED_GUARDS=errors:0%
		// with -run '^TestPlanted$/^(planted|null)$' (the guard scenario
		// needs the throughput guard).
		guards = strings.Fields(s)
	}
	if s := os.Getenv("PLANTED_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("PLANTED_RUNS=%q: want a count ≥ 0", s)
		}
		runs = n
	}
	if testing.Short() || runs == 0 {
		t.Skip("no runs (-short or PLANTED_RUNS=0)")
	}
	rates := os.Getenv("PLANTED_RATES") == "1"
	h := newHarness(t)
	ctx := context.Background()
	var rows []row
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			r := row{sc: sc}
			for i := range runs {
				o, _, err := h.run(ctx, sc, i)
				if err != nil {
					t.Errorf("%v", err)
					r.failed++
					continue
				}
				r.outcomes = append(r.outcomes, o)
				if testing.Verbose() {
					t.Logf("run %d: kept %v, planted %v, %d trials in %s", i, o.kept, o.planted, o.trials, o.wall.Round(time.Millisecond))
				}
			}
			rows = append(rows, r)
			h.checkRestored(t)
			if x, n := r.count(); rates && !sc.holds(x, n) {
				t.Errorf("%s %d of %d (%s), target %s", sc.what, x, n, r.rate(), sc.target)
			}
		})
	}
	t.Logf("min effect %g%% (harm scenario: --harm %s), guards %s, %d runs per scenario\n%s", 100*minEffect, harmTolerance, strings.Join(guards, " "), runs, table(rows))
}

// row is one scenario's runs.
type row struct {
	sc       scenario
	outcomes []outcome
	failed   int
}

func (r row) count() (x, n int) {
	for _, o := range r.outcomes {
		if r.sc.counted(o) {
			x++
		}
	}
	return x, len(r.outcomes)
}

// rate is the counted rate with its two-sided 95% interval, and for the
// null scenario the one-sided upper bound its target is on.
func (r row) rate() string {
	x, n := r.count()
	if n == 0 {
		return "-"
	}
	iv := stats.Proportion(x, n, 0.95)
	s := fmt.Sprintf("%.0f%% [%.0f%%, %.0f%%]", 100*float64(x)/float64(n), 100*iv.Lo, 100*iv.Hi)
	if r.sc.name == "null" {
		s += fmt.Sprintf(" (upper %.1f%%)", 100*stats.UpperBound(x, n, 0.95))
	}
	return s
}

// table prints the rows: scenario · runs · trials to the final decision
// (median, p90) · kept · right param · the counted rate with its interval
// · target · time per trial.
func table(rows []row) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "scenario\truns\ttrials median/p90\tfinal median/p90\t2nd look\tkept\tright param\trate (95% interval)\ttarget\tper trial")
	for _, r := range rows {
		var trials, final []int
		second := 0
		var wall time.Duration
		kept, right := 0, 0
		for _, o := range r.outcomes {
			trials = append(trials, o.trials)
			final = append(final, o.final)
			if o.looks > 1 {
				second++
			}
			wall += o.wall
			if o.kept {
				kept++
			}
			if o.planted {
				right++
			}
		}
		runs := strconv.Itoa(len(r.outcomes))
		if r.failed > 0 {
			runs += fmt.Sprintf(" (+%d failed)", r.failed)
		}
		per := "-"
		if t := sum(trials); t > 0 {
			per = (wall / time.Duration(t)).Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s/%s\t%s/%s\t%d\t%d\t%d\t%s: %s\t%s\t%s\n", r.sc.name, runs, quantile(trials, 0.5), quantile(trials, 0.9),
			quantile(final, 0.5), quantile(final, 0.9), second, kept, right, r.sc.what, r.rate(), r.sc.target, per)
	}
	w.Flush()
	return b.String()
}

func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2].Round(100 * time.Microsecond)
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// quantile is the nearest-rank q-quantile of xs ("-" for none).
func quantile(xs []int, q float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := slices.Sorted(slices.Values(xs))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return strconv.Itoa(s[max(i, 0)])
}
