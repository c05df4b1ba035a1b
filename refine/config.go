package refine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/stats"
	"temper.codes/temper-train/scheduler"
)

// Config is how a refine run measures and decides. It is recorded in the
// ledger's header; a resumed run takes it from there so that it replays
// the same plan.
type Config struct {
	Metric string `json:"metric"` // the primary metric, e.g. p99_ms
	// Dir is which way Metric improves (bench.DirectionOf tells it from the
	// name); the ledger records it as -1 or +1. It has no default: Check
	// refuses the zero value.
	Dir    stats.Direction `json:"dir"`
	Guards []Guard         `json:"guards"`
	// Ladder lists the background levels (CPU spinners) every comparison is
	// measured at; [0] when no background is asked for.
	Ladder    []int   `json:"ladder"`
	Alpha     float64 `json:"alpha"`
	MinEffect float64 `json:"min_effect"` // relative, 0.05 = 5%

	// CalibrationN, when > 0, runs an A/A calibration first: that many
	// trials per arm and level of the reference against itself, a
	// measured false accept (never used to size n: the race's incumbent
	// trials, which switch arms as every other trial does, measure the
	// noise). 0 skips it. Even.
	CalibrationN int `json:"calibration_n,omitempty"`
	// RaceN is how many trials each candidate gets in the first rung of a
	// round's race; every later rung gives Eta times more to a third as
	// many candidates (successive halving, Eta = 3).
	RaceN int `json:"race_n"`
	Eta   int `json:"eta"`
	// FinalN is n per arm and level of the final comparison at its last
	// look; 0 sizes it from the noise the race measured (stats.FinalN,
	// 90% power at 1.5× MinEffect), within MaxN and the budget.
	FinalN int `json:"final_n,omitempty"`
	// Harm is the loss of the primary metric tolerated at any level: the
	// final keeps a profile only if at every level the one-sided upper
	// bound of its loss is within it (non-inferiority). 0: MinEffect.
	Harm float64 `json:"harm,omitempty"`
	// MaxN caps FinalN.
	MaxN int `json:"max_n"`
	// Equivalence, when > 0, makes the run an equivalence check instead of
	// a search: no hill climbing; the input profile against the reference
	// on fresh trials until the common effect on Metric is shown within
	// ±Equivalence (two one-sided tests at Alpha, group-sequential), shown
	// beyond it, or the budget or MaxN ends it. It answers "does this
	// profile do no harm?", which the superiority final cannot: that one
	// stops as soon as MinEffect is out of reach. A profile that changes
	// nothing in the kernel on the backend is equivalent by construction
	// and runs no trials.
	Equivalence float64 `json:"equivalence,omitempty"`

	MaxTrials int           `json:"max_trials"`
	MaxTime   time.Duration `json:"max_time"`
	MaxRounds int           `json:"max_rounds"`
	// Warmup is discarded after each switch of arm before a trial runs.
	Warmup time.Duration `json:"warmup"`
	// Tier measures the seeds' three arms: the profile's steps are decided
	// against the node's tier alone (Env.Tier in force, no profile), and
	// the final comparison runs stock, tier only and tier + refined side
	// by side. It needs Env.Tier.
	Tier bool   `json:"tier,omitempty"`
	Seed uint64 `json:"seed"`
}

// Guard is a metric that must not regress beyond Bound (relative, e.g.
// 0.05: 5% worse) for a candidate to be accepted.
type Guard struct {
	Metric string          `json:"metric"`
	Dir    stats.Direction `json:"dir"` // no default, as Config.Dir
	Bound  float64         `json:"bound"`
	// Count is set for a count such as errors (bench.IsCount): its change
	// is the absolute change of the mean per trial and Bound a fraction of
	// the reference's mean, so a reference without errors tolerates none.
	Count bool `json:"count,omitempty"`
}

// Measure is how the guard's change is measured.
func (g Guard) Measure() stats.Measure {
	if g.Count {
		return stats.Count
	}
	return stats.Relative
}

// String prints the guard as METRIC:BOUND: "throughput:-5%"; a bound of 0
// is "errors:+0" (no increase tolerated), never "-0%".
func (g Guard) String() string {
	if g.Bound == 0 {
		return g.Metric + ":+0"
	}
	return fmt.Sprintf("%s:-%g%%", g.Metric, 100*g.Bound)
}

// Defaults fills the zero fields of c with refine's defaults.
func (c *Config) Defaults() {
	set := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	set(&c.RaceN, 1)
	set(&c.Eta, 3)
	if c.Equivalence > 0 {
		// A margin of a few percent at real servers' noise needs
		// hundreds of trials per arm; the budget bounds it.
		set(&c.MaxN, 400)
	}
	set(&c.MaxN, 40)
	set(&c.MaxRounds, 10)
	if c.Alpha == 0 {
		c.Alpha = 0.05
	}
	if c.Harm == 0 {
		c.Harm = c.MinEffect
	}
	if len(c.Ladder) == 0 {
		c.Ladder = []int{0}
	}
}

// Check returns a one-line error for a configuration refine cannot run.
func (c *Config) Check() error {
	for _, n := range []struct {
		name string
		v    int
	}{{"calibration n", c.CalibrationN}, {"final n", c.FinalN}} {
		if n.v < 0 || n.v%2 != 0 {
			return fmt.Errorf("%s = %d: want an even number (one ABBA block gives 2 samples per arm), or 0", n.name, n.v)
		}
	}
	if c.FinalN != 0 && c.FinalN < minFinalN {
		return fmt.Errorf("final n = %d: want ≥ %d (fewer cannot bound a loss at every level), or 0 to size it from the noise", c.FinalN, minFinalN)
	}
	if c.RaceN < 1 || c.Eta < 2 {
		return fmt.Errorf("race: %d trial(s) per candidate in the first rung, halving by %d: want ≥ 1 and ≥ 2", c.RaceN, c.Eta)
	}
	switch {
	case c.Metric == "":
		return errors.New("no metric")
	case c.Dir.Check() != nil:
		return fmt.Errorf("metric %s: %w", c.Metric, c.Dir.Check())
	case !(c.Alpha > 0 && c.Alpha < 0.5):
		return fmt.Errorf("alpha %v: want 0 < alpha < 0.5", c.Alpha)
	case !(c.MinEffect >= 0 && c.MinEffect < 1):
		return fmt.Errorf("min effect %v: want 0 ≤ min effect < 1 (a fraction: 0.05 is 5%%)", c.MinEffect)
	case !(c.Harm > 0 && c.Harm < 1):
		return fmt.Errorf("harm tolerance %v: want 0 < tolerance < 1 (a fraction; a tolerance of 0 cannot be shown by any finite n)", c.Harm)
	case !(c.Equivalence >= 0 && c.Equivalence < 1):
		return fmt.Errorf("equivalence margin %v: want 0 < margin < 1 (a fraction: 0.03 is ±3%%), or 0 for a search", c.Equivalence)
	case c.Equivalence > 0 && c.Tier:
		return errors.New("an equivalence check compares the profile with the reference alone: it measures no tier arm")
	case c.Equivalence > 0 && c.CalibrationN > 0:
		return errors.New("an equivalence check is its own A/B on fresh trials: it runs no A/A calibration (calibration n must be 0)")
	case c.MaxTrials < 0 || c.MaxTime < 0:
		return errors.New("budget: the maximum trials and time must be ≥ 0")
	}
	for _, g := range c.Guards {
		if err := g.Dir.Check(); err != nil {
			return fmt.Errorf("guard %s: %w", g.Metric, err)
		}
	}
	for _, l := range c.Ladder {
		if l < 0 {
			return fmt.Errorf("background level %d: want ≥ 0 spinners", l)
		}
	}
	// The least a run can do is calibrate and make the final comparison;
	// a trial budget below that is refused before the first trial.
	if cal, fin := c.trials(c.CalibrationN), c.finalTrials(c.finalNOr(minFinalN)); c.MaxTrials > 0 && cal+fin > c.MaxTrials {
		return fmt.Errorf("%w: at most %d trials, but calibration (%d trials) and the final comparison (%d trials: %d per arm × %d background level(s)) need at least %d; raise the maximum trials",
			ErrBudget, c.MaxTrials, cal, fin, c.finalNOr(minFinalN), len(c.Ladder), cal+fin)
	}
	return nil
}

// trials is the number of trials a comparison of n per arm takes: both
// arms at every background level.
func (c *Config) trials(n int) int { return 2 * n * len(c.Ladder) }

// finalTrials is the number of trials of a final comparison of n per arm
// and level: two arms, or three with the tier.
func (c *Config) finalTrials(n int) int {
	if c.Tier {
		return 3 * n * len(c.Ladder)
	}
	return c.trials(n)
}

// finalPower is the power the final is sized for (stats.FinalN) at 1.5×
// the minimum effect, and that the smallest detectable effect is stated
// at: above the 80% a whole run is held to at that effect, since the race
// before it misses the right step now and then.
const finalPower = 0.9

// minFinalN is the least n per arm and level of a final: with fewer, no
// level's loss can be bounded at α = 0.05 (stats.NonInferior).
const minFinalN = 4

// finalNOr is FinalN, or n when it is to be sized from the noise.
func (c *Config) finalNOr(n int) int {
	if c.FinalN > 0 {
		return c.FinalN
	}
	return n
}

// Scheduler puts an arm's profile in force on the target.
type Scheduler interface {
	// Apply puts p in force; Session.Stop reverts it. p is nil for an
	// arm without a profile (stock, tier only): nothing is changed, but
	// the target is watched as in a profile's arm where the backend does
	// that, so that what the apparatus costs the machine (a refresh every
	// 100 ms) is the same in every arm and not blamed on the profile; a
	// nil Session then means there is nothing to watch.
	Apply(ctx context.Context, p *profiles.Profile) (Session, error)
	// Alive returns an error when the target has no process left.
	Alive() error
}

// Session is a profile in force.
type Session interface {
	// Stats are the per-group counters since Apply (scheduler.Applied.Stats).
	Stats() ([]scheduler.GroupStats, error)
	// Stop reverts the profile; idempotent.
	Stop() error
}

// Ceilinged is a Session whose backend runs the target outside CFS
// bandwidth control (sched_ext), so that the kernel does not hold its pod
// to cpu.max: the scheduler's own ceiling does, or nothing does.
type Ceilinged interface {
	// Ceiling is the tightest CPU ceiling in force on the target, in CPUs;
	// 0 when there is none.
	Ceiling() (float64, error)
}

// Bench runs one trial of the benchmark in dir, a scratch directory of its
// own, and returns its metrics. An error means the trial has no numbers.
type Bench func(ctx context.Context, dir string) (map[string]float64, error)

// Spinners are the background load of one trial.
type Spinners interface {
	Pids() []int
	Stop() error
}

// Env is what a run acts on and where it reports.
type Env struct {
	Scheduler Scheduler
	// Reference is what calibration and the final comparison measure
	// against and the refined profile must beat: nil for stock CFS, or the
	// profile in force (the canary loop's last good one).
	Reference *profiles.Profile
	Bench     Bench
	// Tier puts the node's tier in force (true) or takes it back (false);
	// nil when there is none (then Config.Tier is refused).
	Tier func(on bool) error
	// TierWhat says what the tier is on this backend, for the log
	// (TierDesc); "": CFS's.
	TierWhat string
	// Background starts n spinners (n > 0) for the length of a trial.
	Background func(n int) (Spinners, error)
	// Usage reads the target pod cgroup's CPU accounting (usage, CFS
	// bandwidth throttling, the quota); every trial records its change
	// over the benchmark (ledger.CPUUsage), which the report's quota
	// parity table shows. nil: not read (no pod cgroup, as without a rig).
	Usage func() (cgroup.CPUStat, error)
	// Alternatives are whole profiles the first round races beside the
	// one-step moves: the synthesized portfolio's other profiles (by risk).
	// Each is a candidate of round 1 like any other: linted, dropped when
	// it realises as the input does, raced against it.
	Alternatives []Alternative
	// Realise is the kernel state a profile puts the target in on the
	// backend in force, as a key ("" when the backend cannot say): a
	// candidate whose key is its incumbent's (or an earlier candidate's)
	// would measure the same arm twice and is never run. nil: every
	// candidate runs.
	Realise func(*profiles.Profile) (string, error)
	// Lint checks a candidate for the backend and this machine; a candidate
	// with an error finding is never applied.
	Lint func(*profiles.Profile) []profiles.Finding
	// Ledger records everything; Done holds the trials a resumed ledger
	// already completed, by id (nil for a new run).
	Ledger *ledger.Writer
	Done   map[string]ledger.TrialEnd
	// Started are trials a resumed ledger started but never ended (they
	// are run again and the ledger says so); StartTimes the start of every
	// recorded trial, for the time budget.
	Started    map[string]bool
	StartTimes map[string]time.Time
	// TrialDir is where each trial gets its scratch directory.
	TrialDir string
	// Log receives the plan, decision lines and notes; Progress the state
	// after every trial.
	Log      func(format string, args ...any)
	Progress func(Progress)
	// Sleep waits out warm-ups (tests make it instant); nil: time.Sleep
	// that a cancelled context cuts short.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Alternative is a whole profile to race in round 1, with its name (the
// portfolio's risk: "conservative").
type Alternative struct {
	Name    string
	Profile *profiles.Profile
}

// Progress is where a run stands.
type Progress struct {
	Stage    string
	Step     string
	Trials   int // run or replayed so far
	Planned  int // the estimate of the total
	Elapsed  time.Duration
	ETA      time.Duration
	PerTrial time.Duration
	Accepted int
	Round    int
}
