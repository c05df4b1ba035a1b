// Package report writes the evidence of one refine run: REPORT.md, in the
// shape of the product's benchmark records (a background ladder, bg
// spinners × arm), with every decision line, the A/A calibration, the
// measured false-accept rate and power of the decision rule, the mechanism
// check per step and the caveats; and the pictures of the metric per step
// and per background level (SVG and PNG, through package chart).
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
	Stopped  string        // why the hill climbing stopped

	Rule stats.Rule // primary metric, α, minimum effect, direction
	// Guards are the guard metrics with their bounds, e.g. "throughput:-5%".
	Guards []string

	Arms []Arm
	// DeltaBase is the arm each level's Delta measures against (the
	// decision's baseline): 0, stock, or tier only when the run measured
	// the tier (Report.Tier).
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

	Calibration []Calibration
	// Rates are simulated error rates of the decision rule at the measured
	// noise and the n the run used (stats.Simulate).
	Rates []stats.SimResult
	Steps []Step
	// Kept says whether the refined profile beat the baseline in the final
	// comparison; Final holds that comparison's decision lines.
	Kept  bool
	Final []string

	Caveats []string // beyond the ones the report states itself
	Notes   []string // re-run trials, reaped spinners, noise warnings
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
	// metric; nil when they were not compared at this level.
	Delta *Delta
	// Product compares the last arm (tier + refined) with stock, as a
	// description, when the run measured the tier.
	Product *Delta
}

// Cell is one arm at one level: medians across trials (one trial, one
// sample) with their intervals, per metric.
type Cell struct {
	N      int
	Values map[string]stats.Interval
}

// Delta is the relative shift of a comparison with its interval.
type Delta struct {
	NBase, NCand int
	Effect       stats.Interval // relative shift cand/base − 1
	P            float64
	Verdict      string
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

// Step is one decision of the hill climbing.
type Step struct {
	Round int
	Stage string // "screen", "confirm", "final"
	Name  string // what changed, e.g. "redis-server: slice_us 2000 → 1000"
	Group string // the group the step changes
	Bg    int
	// Base and Cand are the primary metric's medians of the two arms.
	Base, Cand stats.Interval
	Accepted   bool
	Verdict    string
	Line       string   // the benchstat-style decision line
	Guards     []string // one line per guard metric
	// Mechanism says whether the group's scheduler stats moved as the
	// treatment predicts ("" if not checked); Suspect marks a metric win
	// without the mechanism.
	Mechanism string
	Suspect   bool
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

// NewDelta is the ladder's Δ column for a comparison.
func NewDelta(c stats.Comparison, verdict string) *Delta {
	return &Delta{NBase: c.NBase, NCand: c.NCand, Effect: c.Rel, P: c.P, Verdict: verdict}
}
