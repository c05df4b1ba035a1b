package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/target"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/refine/background"
	"temper.codes/temper-train/refine/bench"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/report"
	"temper.codes/temper-train/scheduler/cfs"
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
	maxTrials  int
	maxTime    time.Duration
	alpha      float64
	minEffect  string
	ledger     string
	resume     string
	out        string
	seed       uint64
	warmup     time.Duration
	timeout    time.Duration
	n          [4]int // calibration, screen, confirm, final
	quiet      bool
}

func newRefineCmd() *cobra.Command {
	var f refineFlags
	var canary bool
	cmd := &cobra.Command{
		Use:   "refine PROFILE (--pid PID | --cgroup PATH | --pod NS/NAME | -- CMD [ARGS...]) --bench 'CMD ...'",
		Short: "Measure whether a profile helps the workload and keep only the changes that do",
		Long: `Refine measures a workload profile against stock CFS with a benchmark and keeps
only what measurably helps.

It first runs stock against stock (calibration): the benchmark's noise per metric.
When the noise is large against --min-effect it raises the number of trials, or
refuses with the numbers. Then it climbs one parameter at a time from PROFILE: a
group's treatment (relaxed or dropped, e.g. for a group that helps under load and
hurts at idle), exclusive_cores with cpu_fraction following the sizing rule,
slice_us, weight, preempt, and whether a family belongs to its group. Every
candidate is linted for the backend and this machine and never applied if lint
refuses it. Each candidate runs against the current profile in randomised ABBA
blocks (one benchmark run = one sample; between arms the previous profile is
reverted and --warmup discarded), screened on a few trials and confirmed on
fresh ones. A step is accepted only when the Mann-Whitney test is significant at
--alpha after Holm's correction across the round, the shift's interval clears
--min-effect, and no --guard metric regresses. It stops when a round accepts
nothing or the budget (--max-trials, --max-time) would not fit another round,
then compares stock against the refined profile on fresh trials: only a profile
that wins there is written.

The mechanism check: for each confirmed step refine compares the changed group's
involuntary preemptions per second between the arms; a metric win without it is
flagged SUSPECT.

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
memtier, memaslap, pgbench, sysbench, wrk, and jsonl: one JSON object per line,
{"metric": "p99_ms", "value": 0.41, "unit": "ms"}.

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
			_, err := runRefine(cmd, f, a[0], command)
			return err
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
	fl.StringVar(&f.adapter, "adapter", "", "how to read the benchmark's output: redis-benchmark, memtier, memaslap, pgbench, sysbench, wrk or jsonl (default: from the command's name)")
	fl.StringVar(&f.metric, "metric", "p99_ms", "the metric to improve")
	fl.StringSliceVar(&f.guards, "guard", []string{"throughput:-5%", "errors:0%"}, "a metric that must not get worse than this bound (METRIC:-5%); guards the benchmark does not report are noted and skipped")
	fl.IntVar(&f.background, "background", 0, "CPU spinners (BestEffort-like background load) during every trial")
	fl.StringVar(&f.ladder, "ladder", "", "background levels every comparison is measured at, e.g. 0,1,2,4,8 (instead of --background)")
	fl.StringVar(&f.backend, "backend", backendAuto, "how to apply: auto, sched_ext or cfs")
	fl.IntVar(&f.maxTrials, "max-trials", 0, "stop hill climbing when the next round and the final comparison would exceed this many trials (0: no limit)")
	fl.DurationVar(&f.maxTime, "max-time", 0, "the same in wall time, estimated from the trials so far (0: no limit)")
	fl.Float64Var(&f.alpha, "alpha", 0.05, "significance level of every decision (Holm-corrected within a round)")
	fl.StringVar(&f.minEffect, "min-effect", "5%", "the smallest relative improvement worth a change")
	fl.StringVar(&f.ledger, "ledger", "", "the ledger file (default DIR/ledger.jsonl)")
	fl.StringVar(&f.resume, "resume", "", "continue the run this ledger records")
	fl.StringVar(&f.out, "out", "", "output directory (default ./refine-<id>-<time>)")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the ABBA order (default: random, recorded in the ledger)")
	fl.DurationVar(&f.warmup, "warmup", time.Second, "discarded after each switch of profile before a trial")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "a benchmark run taking longer is killed and the run stops")
	fl.IntVar(&f.n[0], "calibration-n", 4, "stock runs per arm and level of the A/A calibration (even)")
	fl.IntVar(&f.n[1], "screen-n", 4, "runs per arm and level to screen a candidate (even)")
	fl.IntVar(&f.n[2], "confirm-n", 8, "fresh runs per arm and level to confirm a candidate (even; calibration may raise it)")
	fl.IntVar(&f.n[3], "final-n", 8, "fresh runs per arm and level of the final stock-vs-refined comparison (even)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress line")
}

// parsePercent reads "5%", "-5%" or "0.05" as a fraction.
func parsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a percentage (e.g. 5%%)", s)
	}
	if pct {
		v /= 100
	}
	return v, nil
}

// parseGuard reads METRIC:BOUND, e.g. throughput:-5% (5% worse allowed).
func parseGuard(s string) (refine.Guard, error) {
	m, b, ok := strings.Cut(s, ":")
	if !ok || m == "" {
		return refine.Guard{}, fmt.Errorf("--guard %q: want METRIC:BOUND, e.g. throughput:-5%%", s)
	}
	v, err := parsePercent(b)
	if err != nil {
		return refine.Guard{}, fmt.Errorf("--guard %q: %v", s, err)
	}
	d, err := bench.DirectionOf(m)
	if err != nil {
		return refine.Guard{}, fmt.Errorf("--guard %q: %w", s, err)
	}
	if v > 0 {
		return refine.Guard{}, fmt.Errorf("--guard %q: the bound is how much worse is tolerated, ≤ 0 (e.g. -5%%)", s)
	}
	return refine.Guard{Metric: m, Dir: int8(d), Bound: math.Abs(v)}, nil
}

// parseLadder reads "0,1,2,4".
func parseLadder(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 256 {
			return nil, fmt.Errorf("--ladder %q: %q is not a spinner count 0..256", s, p)
		}
		out = append(out, n)
	}
	return out, nil
}

// splitCommand splits a command line the way a POSIX shell splits words:
// blanks separate, single quotes keep everything, double quotes keep all
// but \" and \\, a backslash outside quotes escapes the next byte.
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
				i++
				cur.WriteByte(s[i])
			default:
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// refineRun is what runRefine leaves for train and tests.
type refineRun struct {
	Dir     string
	Ledger  string
	Refined string // the refined profile's path; "" when none was kept
	Result  *refine.Result
}

// runRefine sets everything up, runs the engine and writes the outputs.
// Every path after the first change reverts.
func runRefine(cmd *cobra.Command, f refineFlags, profilePath string, command []string) (*refineRun, error) {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var notedMu sync.Mutex
	noted := map[string]bool{}
	note := func(msg string) { // each once: the backend repeats its notes at every apply
		notedMu.Lock()
		defer notedMu.Unlock()
		if !noted[msg] {
			noted[msg] = true
			fmt.Fprintf(stderr, "note: %s\n", msg)
		}
	}
	switch {
	case f.backend != backendAuto && f.backend != backendSchedExt && f.backend != backendCFS:
		return nil, usageError{fmt.Errorf("--backend %q: want auto, sched_ext or cfs", f.backend)}
	case !f.given() && len(command) == 0:
		return nil, usageError{errors.New("no target: give --pid, --cgroup, --pod, or a command after --")}
	case f.bench == "":
		return nil, usageError{errors.New("no benchmark: give --bench 'CMD ARGS...'")}
	case f.background != 0 && f.ladder != "":
		return nil, usageError{errors.New("--background and --ladder: give one")}
	case f.background < 0:
		return nil, usageError{fmt.Errorf("--background %d: want ≥ 0", f.background)}
	case f.timeout <= 0:
		return nil, usageError{fmt.Errorf("--timeout %s: want > 0", f.timeout)}
	}
	argv, adapter, err := benchCommand(f.bench, f.adapter)
	if err != nil {
		return nil, err
	}

	src, err := os.ReadFile(profilePath)
	if err != nil {
		return nil, err
	}
	prof, err := profiles.Parse(profilePath, src)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(src)
	profHash := hex.EncodeToString(sum[:])

	topo, err := machine.ReadTopology("/")
	if err != nil {
		return nil, fmt.Errorf("CPU topology: %w", err)
	}
	shape, err := machine.ShapeOf(topo)
	if err != nil {
		return nil, fmt.Errorf("machine shape: %w", err)
	}
	machine := machineID(shape)

	// The configuration: from the flags, or from the ledger being resumed.
	var cfg refine.Config
	var old *ledger.Ledger
	if f.resume != "" {
		if old, err = ledger.Read(f.resume); err != nil {
			return nil, err
		}
		if err := old.Check(f.resume, ledger.Identity{ProfileHash: profHash, Machine: machine, Target: old.Header.Target, Bench: argv,
			Adapter: adapter.Name(), Backend: old.Header.Backend, Tools: toolVersions(argv[0], adapter.Name())}); err != nil {
			return nil, err
		}
		if old.End != nil {
			return nil, fmt.Errorf("--resume %s: that run finished (%s); nothing to resume", f.resume, old.End.Reason)
		}
		if err := json.Unmarshal(old.Header.Config, &cfg); err != nil {
			return nil, fmt.Errorf("--resume %s line 1: config: %v", f.resume, err)
		}
		note(fmt.Sprintf("resuming %s: %d trials recorded, %d cut off; its configuration (seed %d, metric %s, ladder %v) replaces the flags",
			f.resume, len(old.Done()), len(old.Open()), cfg.Seed, cfg.Metric, cfg.Ladder))
	} else {
		if cfg, err = f.config(); err != nil {
			return nil, usageError{err}
		}
	}

	backendName := f.backend
	if old != nil {
		backendName = old.Header.Backend
	}
	statePath := cfs.StatePath(cfs.DefaultStateDir, os.Getpid())
	backend, err := chooseBackend(backendName, cfs.Options{StateFile: statePath, Note: note}, stderr)
	if err != nil {
		return nil, err
	}
	lint := func(p *profiles.Profile) []profiles.Finding {
		return profiles.Lint(p, profiles.LintOptions{Backend: backend.Name(), Shape: &shape})
	}
	if err := lintForRefine(prof, profilePath, lint, stderr); err != nil {
		return nil, err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	spec := f.spec()
	spec.Command, spec.Stdout, spec.Stderr = command, stderr, stderr
	tgt, err := target.Resolve(ctx, spec)
	if err != nil {
		if errors.Is(err, target.ErrInvalidSpec) {
			return nil, usageError{err}
		}
		return nil, err
	}
	defer tgt.Stop(2 * time.Second)

	// Output directory and ledger.
	dir := f.out
	if dir == "" && old != nil {
		dir = filepath.Dir(f.resume)
	}
	if dir == "" {
		dir = fmt.Sprintf("refine-%s-%s", prof.ID, time.Now().Format("20060102-150405"))
	}
	if _, err := makeDir(dir); err != nil {
		return nil, err
	}
	env := refine.Env{TrialDir: filepath.Join(dir, "trials")}
	var lw *ledger.Writer
	if old != nil {
		if lw, err = ledger.Append(f.resume); err != nil {
			return nil, err
		}
		env.Done, env.Started, env.StartTimes = old.Done(), map[string]bool{}, map[string]time.Time{}
		for _, s := range old.Starts {
			env.StartTimes[s.Trial] = s.Start
		}
		if err := cleanUpCutOff(lw, old, note); err != nil {
			lw.Close()
			return nil, err
		}
		for _, s := range old.Open() {
			env.Started[s.Trial] = true
		}
		for id, e := range old.Ends {
			if e.Error != "" {
				env.Started[id] = true // failed or interrupted: runs again
			}
		}
	} else {
		path := f.ledger
		if path == "" {
			path = filepath.Join(dir, "ledger.jsonl")
		}
		raw, _ := json.Marshal(cfg)
		h := ledger.Header{Start: time.Now().UTC(), Profile: profilePath, ProfileHash: profHash, ProfileCommit: gitCommitOf(profilePath),
			Machine: machine, Backend: backend.Name(), Tools: toolVersions(argv[0], adapter.Name()), Command: os.Args, Bench: argv,
			Adapter: adapter.Name(), Target: tgt.Description, Seed: cfg.Seed, Config: raw}
		if lw, err = ledger.Create(path, h); err != nil {
			return nil, err
		}
	}
	defer lw.Close()
	if err := lw.Append(ledger.Note{Text: fmt.Sprintf("pid %d; cfs state file %s", os.Getpid(), statePath)}); err != nil {
		return nil, err
	}

	prog := newRefineProgress(stderr, f.quiet)
	env.Scheduler = &liveScheduler{backend: backend, topo: topo, tgt: tgt}
	env.Lint = lint
	env.Ledger = lw
	env.Log = prog.log
	env.Progress = prog.update
	timeout := f.timeout
	openLoop := false
	env.Bench = func(ctx context.Context, trialDir string) (map[string]float64, error) {
		r, err := bench.Run(ctx, bench.Command{Argv: argv, Adapter: adapter, Timeout: timeout, Dir: trialDir})
		if err != nil {
			return nil, err
		}
		openLoop = r.OpenLoop
		return r.Metrics, nil
	}
	env.Background = func(n int) (refine.Spinners, error) { return background.Start(n) }

	fmt.Fprintf(stderr, "refine: %s (%s) on %s, backend %s, benchmark %q (%s), metric %s, ledger %s\n",
		profilePath, prof.ID, tgt.Description, backend.Name(), f.bench, adapter.Name(), cfg.Metric, lw.Path())
	res, runErr := refine.Run(ctx, cfg, prof, env)
	prog.done()

	run := &refineRun{Dir: dir, Ledger: lw.Path(), Result: res}
	if runErr != nil {
		if ctx.Err() != nil {
			runErr = fmt.Errorf("interrupted (%v); everything reverted; continue with --resume %s", ctx.Err(), lw.Path())
		} else {
			runErr = fmt.Errorf("%w; everything reverted; the ledger %s keeps every trial so far", runErr, lw.Path())
		}
		// The report of what was measured, even of a run cut short.
		if err := writeReport(dir, lw.Path(), openLoop, prof); err != nil {
			note(err.Error())
		}
		return run, flatErr(runErr)
	}
	endRec := ledger.End{Reason: res.Stopped}
	if res.Kept {
		path := filepath.Join(dir, res.Refined.ID, shape.Key()+".toml")
		if err := writeRefined(path, res, lw.Path(), lint); err != nil {
			return run, err
		}
		run.Refined, endRec.Refined = path, path
	}
	if err := lw.Append(endRec); err != nil {
		return run, err
	}
	if err := writeReport(dir, lw.Path(), openLoop, prof); err != nil {
		return run, err
	}
	printRefineSummary(stdout, res, cfg.Metric, run)
	return run, nil
}

// writeReport writes DIR/REPORT.md and its pictures from the ledger.
func writeReport(dir, ledgerPath string, openLoop bool, prof *profiles.Profile) error {
	l, err := ledger.Read(ledgerPath)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	caveats := []string{"one machine, one run of each trial sequence; other load on the machine during the run is not isolated"}
	if ownsCores(prof) {
		caveats = append(caveats, "the benchmark client ran on this machine, outside the workload: while a profile owned whole cores, the client shared the remaining CPUs with the background spinners, so the client's own slowdown is in that arm's numbers (on a node the client is elsewhere)")
	}
	r, err := refine.ReportOf(l, refine.ReportInfo{OpenLoop: openLoop, Caveats: caveats})
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

func cmp(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// config builds the engine's configuration from the flags.
func (f *refineFlags) config() (refine.Config, error) {
	c := refine.Config{Metric: f.metric, Alpha: f.alpha, MaxTrials: f.maxTrials, MaxTime: f.maxTime, Warmup: f.warmup, Seed: f.seed,
		CalibrationN: f.n[0], ScreenN: f.n[1], ConfirmN: f.n[2], FinalN: f.n[3]}
	d, err := bench.DirectionOf(f.metric)
	if err != nil {
		return c, fmt.Errorf("--metric: %w", err)
	}
	c.Dir = int8(d)
	if c.MinEffect, err = parsePercent(f.minEffect); err != nil {
		return c, fmt.Errorf("--min-effect: %v", err)
	}
	for _, g := range f.guards {
		gd, err := parseGuard(g)
		if err != nil {
			return c, err
		}
		if gd.Metric != f.metric {
			c.Guards = append(c.Guards, gd)
		}
	}
	switch {
	case f.ladder != "":
		if c.Ladder, err = parseLadder(f.ladder); err != nil {
			return c, err
		}
	default:
		c.Ladder = []int{f.background}
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	c.Defaults()
	return c, c.Check()
}

// cleanUpCutOff reaps the spinners of trials a dead run left open and
// reverts the scheduling changes its state file records, noting both.
func cleanUpCutOff(lw *ledger.Writer, old *ledger.Ledger, note func(string)) error {
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
	for _, n := range old.Notes {
		var pid int
		var state string
		if _, err := fmt.Sscanf(n.Text, "pid %d; cfs state file %s", &pid, &state); err != nil {
			continue
		}
		if _, err := os.Stat(state); err != nil {
			continue
		}
		if err := cfs.RevertFile(state, note); err != nil {
			return fmt.Errorf("revert what the dead run (pid %d) left applied: %w", pid, err)
		}
		msg := fmt.Sprintf("reverted what the dead run (pid %d) left applied, from %s", pid, state)
		note(msg)
		if err := lw.Append(ledger.Note{Text: msg}); err != nil {
			return err
		}
	}
	return nil
}

func lintForRefine(p *profiles.Profile, path string, lint func(*profiles.Profile) []profiles.Finding, w io.Writer) error {
	for _, f := range lint(p) {
		if f.Severity == profiles.Error {
			return fmt.Errorf("%s: %s; nothing was changed", path, f)
		}
		fmt.Fprintf(w, "%s: %s\n", path, f)
	}
	return nil
}

// machineID names this machine for the ledger.
func machineID(shape profiles.Shape) ledger.Machine {
	m := ledger.Machine{Shape: shape.Key()}
	m.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
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

// toolVersions records temper-train's, Go's and the benchmark's versions:
// a known load tool's --version line, or for a jsonl benchmark (a script
// that must not be run outside a trial) the sha256 of its file.
func toolVersions(benchTool string, adapter string) map[string]string {
	v := map[string]string{"temper-train": version, "go": runtime.Version()}
	name := filepath.Base(benchTool)
	if adapter == "jsonl" {
		if path, err := exec.LookPath(benchTool); err == nil {
			if b, err := os.ReadFile(path); err == nil {
				sum := sha256.Sum256(b)
				v[name] = "sha256:" + hex.EncodeToString(sum[:])
			}
		}
		return v
	}
	for _, flag := range []string{"--version", "-v", "-V"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		out, err := exec.CommandContext(ctx, benchTool, flag).CombinedOutput()
		cancel()
		line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
		if err == nil && len(line) > 0 && len(line) < 200 {
			v[name] = string(line)
			break
		}
	}
	return v
}

// writeRefined writes the refined profile atomically with its evidence
// updated, after checking it is lint-clean.
func writeRefined(path string, res *refine.Result, ledgerPath string, lint func(*profiles.Profile) []profiles.Finding) error {
	p := refine.WithEvidence(res, filepath.Base(ledgerPath), time.Now())
	if fs := lint(p); profiles.HasErrors(fs) {
		return fmt.Errorf("refined profile fails lint (not written): %s", fs[0])
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

func printRefineSummary(w io.Writer, res *refine.Result, metric string, run *refineRun) {
	fmt.Fprintf(w, "calibration (stock vs stock):\n")
	for _, c := range res.Calibration {
		fmt.Fprintf(w, "  bg=%d  %s CV %.1f%% over %d trials\n", c.Bg, metric, 100*c.CV[metric], c.N)
	}
	fmt.Fprintf(w, "hill climbing: %d round(s), %d step(s) accepted; %s\n", len(res.Rounds), len(res.Accepted), res.Stopped)
	for _, s := range res.Accepted {
		fmt.Fprintf(w, "  accepted  %s\n", s)
	}
	fmt.Fprintf(w, "final (stock A vs refined B):\n")
	for _, d := range res.Final {
		fmt.Fprintf(w, "  %s\n", d.Line)
	}
	fmt.Fprintf(w, "trials    %d\n", res.Trials)
	fmt.Fprintf(w, "ledger    %s\n", run.Ledger)
	fmt.Fprintf(w, "report    %s\n", filepath.Join(run.Dir, report.File))
	if run.Refined != "" {
		fmt.Fprintf(w, "refined   %s\n", run.Refined)
	} else {
		fmt.Fprintf(w, "refined   none written: the refined profile did not beat stock CFS in the final comparison\n")
	}
}

// refineProgress shows progress: one line rewritten on a terminal, a line
// every 10 s otherwise; log lines go above it.
type refineProgress struct {
	w     io.Writer
	quiet bool
	tty   bool
	drawn bool
	last  time.Time
}

func newRefineProgress(w io.Writer, quiet bool) *refineProgress {
	p := &refineProgress{w: w, quiet: quiet}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		p.tty = err == nil
	}
	return p
}

func (p *refineProgress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

func (p *refineProgress) log(format string, args ...any) {
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *refineProgress) update(r refine.Progress) {
	if p.quiet {
		return
	}
	line := fmt.Sprintf("trial %d/~%d  %s  %s  round %d, %d accepted  %s elapsed, ETA %s",
		r.Trials, r.Planned, r.Stage, truncate(r.Step, 40), r.Round, r.Accepted,
		r.Elapsed.Round(time.Second), r.ETA.Round(time.Second))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.drawn = true
		return
	}
	if time.Since(p.last) >= 10*time.Second {
		fmt.Fprintln(p.w, line)
		p.last = time.Now()
	}
}

func (p *refineProgress) done() { p.clear() }

func truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// benchCommand splits --bench into its argv, finds the adapter that reads
// its output (--adapter, else from the command's name) and checks that the
// command exists.
func benchCommand(command, adapterName string) ([]string, bench.Adapter, error) {
	argv, err := splitCommand(command)
	if err != nil || len(argv) == 0 {
		return nil, nil, usageError{fmt.Errorf("--bench %q: %v", command, cmp(err, errors.New("empty command")))}
	}
	var adapter bench.Adapter
	if adapterName != "" {
		adapter, err = bench.Lookup(adapterName)
	} else {
		adapter, err = bench.Detect(argv)
	}
	if errors.Is(err, bench.ErrNoAdapter) {
		return nil, nil, usageError{fmt.Errorf("--bench: %w with --adapter", err)}
	}
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--bench: %w", err)}
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, nil, usageError{fmt.Errorf("--bench %q: %s: %v", command, argv[0], errors.Unwrap(err))}
	}
	return argv, adapter, nil
}
