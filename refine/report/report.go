// Package report writes the evidence of one refine run: REPORT.md, read
// like benchstat, in the shape of the product's benchmark records (a
// background ladder, bg spinners × arm): the noise the race measured and
// the smallest effect the final could detect, one table per raced round
// (one verdict per candidate), the final's looks, each level's
// non-inferiority checks, the optional A/A calibration, the final rule's
// simulated error rates and the caveats; and the pictures of the race
// entries' gains and of the metric per background level (SVG and PNG,
// through package chart).
//
// The input is a plain Report value: refine fills it from its ledger, so
// the report can be rewritten from a ledger alone.
package report

import (
	"time"

	"temper.codes/temper-train/refine/stats"
)

// Report is everything REPORT.md and the pictures show.
type Report struct {
	Title   string // e.g. "refine redis-server"
	Profile string // the input profile
	Refined string // the refined profile written, "" if nothing was kept
	Bench   string // the benchmark command line
	Tool    string // the load tool's adapter, e.g. "redis-benchmark"
	// OpenLoop says the tool ran at a fixed request rate; closed-loop
	// clients hide tail latency (coordinated omission).
	OpenLoop bool
	Backend  string // "cfs", "sched_ext"
	Machine  string // e.g. "2 CPUs (1 core × 2 SMT), 24 GiB, kernel 6.18, cgroup v1"
	Started  time.Time
	Duration time.Duration // wall time of the run
	Trials   int           // trials run (and replayed on resume)
	Stopped  string        // why the search stopped

	Rule stats.Rule // primary metric, α, minimum effect, direction
	// Guards are the guard metrics with their tolerances, as the command
	// line spells them, e.g. "throughput:-5%", "errors:+0".
	Guards []string

	// Noise is the run-to-run noise that sized the final: the standard
	// deviation of the log primary metric per trial, measured by the race
	// from its repeats (trials that switch arms); NaN when none was
	// measured.
	Noise float64
	// FinalN is the final's n per arm and background level at its last
	// look (0: no final).
	FinalN int
	// Detectable is the smallest relative effect the final had 90% power
	// to keep at Noise and FinalN; 0 or NaN when unknown.
	Detectable float64

	Arms []Arm
	// DeltaBase is the arm each level's Delta and the final measure
	// against: 0, stock, or tier only when the run measured the tier
	// (Report.Tier).
	DeltaBase int
	// Tier says the run measured the seeds' three arms: stock, tier only,
	// tier + profile; each level's Product then compares tier + refined
	// with stock.
	Tier bool
	// Rig describes the node-shaped rig the run measured on, one line per
	// part; empty when the workload ran where temper-train did.
	Rig []string
	// Columns are the metrics of the ladder table, the one shown first in
	// each cell first (as the seeds show throughput, then p99 in
	// parentheses), e.g. ["throughput", "p99_ms"].
	Columns []string
	Ladder  []Level
	// Quota is the quota parity table (QuotaRow), in ladder order; empty
	// when no trial recorded its pod's CPU usage (no rig).
	Quota []QuotaRow

	// Calibration is the optional A/A (reference against itself): it
	// measures false accepts; it does not size n (Noise does).
	Calibration []Calibration
	// Rates are the final rule's simulated error rates at Noise and
	// FinalN.
	Rates []Rate
	// Races are the search's rounds, in order.
	Races []Race
	// Kept says the final kept the refined profile; Looks are the final's
	// looks, in order (empty: no final ran).
	Kept  bool
	Looks []Look
	// Equivalence is set for an equivalence check (no search): the input
	// profile against the reference within ±Margin; Looks are its looks.
	Equivalence *Equivalence

	Caveats []string // beyond the ones the report states itself
	Notes   []string // re-run trials, reaped spinners, noise warnings
}

// Equivalence is what an equivalence check found.
type Equivalence struct {
	Margin float64 // relative, either way
	// Finding: "equivalent", "different", "not shown", or "identical"
	// (the profile's kernel state is the reference's: no trial ran).
	Finding string
	Reason  string // one line: why
}

// Arm is one side of the comparisons: stock CFS, the input profile, the
// refined profile.
type Arm struct {
	Name string // short column name: "stock CFS", "synthesized", "refined"
	Desc string // what it is: a profile path and hash, "no profile"
}

// Level is one row of the ladder: one background level, every arm.
type Level struct {
	Bg    int    // CPU spinners running beside the workload
	Cells []Cell // one per arm, in Report.Arms order; N == 0: not measured
	// Delta compares the last arm with Report.DeltaBase on the primary
	// metric, descriptively (the final's stratified test decides), with
	// the level's non-inferiority check; nil when they were not compared
	// at this level.
	Delta *Delta
	// Product compares the last arm (tier + refined) with stock, as a
	// description, when the run measured the tier.
	Product *Delta
	// Guards are the level's non-inferiority checks of the guard metrics.
	Guards []GuardCheck
}

// Cell is one arm at one level: medians across trials (one trial, one
// sample) with their intervals, per metric.
type Cell struct {
	N      int
	Values map[string]stats.Interval
}

// Delta is the relative shift of a comparison at one level, with its
// interval and unadjusted p, and the primary metric's non-inferiority
// check there.
type Delta struct {
	NBase, NCand int
	Effect       stats.Interval // relative shift cand/base − 1
	P            float64
	// Harm is the non-inferiority verdict: "harm excluded", "harm not
	// excluded", "too few samples"; "" when not checked (a Product).
	Harm string
	// Worst is the upper confidence bound of the loss, relative like
	// Effect and positive when worse; Tolerance is the harm tolerated
	// (positive). Harm is excluded when Worst ≤ Tolerance.
	Worst, Tolerance float64
}

// GuardCheck is one guard metric's non-inferiority check at one level,
// formatted the way the guard's measure prints (stats.FormatChange: a
// relative "-1.2%", a count's "+0"). An unbounded Worst ("-∞": too few
// samples) prints as a footnote.
type GuardCheck struct {
	Metric    string
	Change    string // the estimated change
	Worst     string // the upper confidence bound of the loss
	Tolerance string // the loss tolerated
	Vetoed    bool   // Worst is past Tolerance (or could not be bounded)
}

// Calibration is the A/A (baseline against baseline) at one level.
type Calibration struct {
	Bg   int
	N    int                // trials
	CV   map[string]float64 // run-to-run noise per metric
	Line string             // the A/A decision line
	// FalseAccept says the A/A decision accepted: one of the errors the
	// rule is allowed at rate ≤ α.
	FalseAccept bool
}

// Race is one round of the search: its candidates raced against the
// incumbent by successive halving. A race ranks by an estimated gain and
// tests nothing.
type Race struct {
	Round      int
	Candidates int // raced
	Unchanged  int // not run: same kernel state as an arm already measured
	Rejected   int // refused by lint
	Carried    int // not raced again (Entries with verdict Carried)
	Rungs      int
	Entries    []RaceEntry // every raced candidate, with its one verdict
	// Stopped says what the round ended with, e.g. `step: group "x":
	// treatment latency → normal, gain +31% ± 6%`, or why nothing.
	Stopped string
}

// The verdicts of a race entry.
const (
	Dropped     = "dropped"     // out at its rung
	Accepted    = "accepted"    // the winner: the next incumbent
	Unconfirmed = "unconfirmed" // the winner, held back by the step rule
	Carried     = "carried"     // not raced: an earlier round's measure says it would not step
)

// RaceEntry is one raced candidate and its one verdict.
type RaceEntry struct {
	Name  string // the step, e.g. `group "workers": treatment latency → normal`
	Group string
	// Trials are the candidate's own trials.
	Trials int
	// Shift is the estimated relative shift of the primary metric against
	// the incumbent (-0.2: 20% lower); NaN unknown.
	Shift float64
	// Gain is the estimated gain (positive better) over the entry's last
	// rung and GainSE its standard error at the races' pooled noise.
	Gain, GainSE float64
	// Rung is the last rung the entry ran in (1-based); Rank its rank
	// there among Of entries.
	Rung, Rank, Of int
	Verdict        string // Dropped, Accepted, Unconfirmed, Carried
	// Reason is, for a Carried entry, what it was carried on: "from
	// round 1, its state by difference"; for a Dropped one, why if not
	// its rank (its benchmark failed).
	Reason string
	// Mechanism says whether the group's scheduler stats moved as the
	// treatment predicts ("" if not checked); Suspect marks a gain
	// without the mechanism.
	Mechanism string
	Suspect   bool
}

// Look is one look of the final's group-sequential test: the reference
// against the refined profile, one stratified rank test of a common effect
// across the background levels.
type Look struct {
	Index, Of int
	// Alpha is this look's nominal one-sided level, Spent the α spent up
	// to and including it.
	Alpha, Spent float64
	N            [2]int         // trials per arm (reference, refined) over all levels
	Effect       stats.Interval // common relative shift cand/base − 1
	Confidence   float64        // of Effect's interval
	P            float64        // one-sided, held to Alpha
	Outcome      string         // "continue", "keep", "drop"; an equivalence check's: "continue", "equivalent", "different", "not shown"
	Reason       string
}

// Rate is one simulated error rate of the final rule at the run's noise
// and n.
type Rate struct {
	What   string  // e.g. "no effect", "effect = minimum effect"
	Effect float64 // the true relative improvement simulated
	Runs   int     // simulated finals
	// Keeps is the fraction of Runs that kept a profile, with its 95%
	// Clopper–Pearson interval (stats.Proportion).
	Keeps stats.Interval
}

// NewCell summarises one arm's trials at one level: per metric, the median
// across trials with its distribution-free interval at confidence.
func NewCell(confidence float64, trials map[string][]float64) Cell {
	c := Cell{Values: make(map[string]stats.Interval, len(trials))}
	for m, v := range trials {
		c.N = max(c.N, len(v))
		c.Values[m] = stats.Median(v, confidence)
	}
	return c
}
