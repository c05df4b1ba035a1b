// Package stats holds the two-sample statistics refine decides with, built
// so that it cannot overclaim: medians with distribution-free intervals, the
// Mann–Whitney U test, the Hodges–Lehmann shift with the interval that the
// Mann–Whitney distribution gives it, and a simulator of the final that
// measures the keep rate of the decision rule itself (SimulateFinal).
//
// The final — the one confirmatory comparison of a run — is a
// group-sequential test (Sequential): the background levels are strata of
// one test of a common effect (Stratified: stratified Hodges–Lehmann with
// the exact or van Elteren null), its looks share α by the Lan–DeMets
// Pocock-type spending function (Spend), and harm at every level and every
// guard must be excluded, not merely unproven (NonInferior). Its rate tests
// (TestFinal…Rate) simulate whole finals and are built to fail when one of
// these parts is removed.
//
// The U test and the median intervals come from golang.org/x/perf/benchmath
// (the engine of benchstat) and the distributions under it from
// github.com/aclements/go-moremath; gonum supplies the moments and the Beta
// quantiles. What neither has — the Hodges–Lehmann shift and its interval,
// the smallest reachable p, the stratified test, α-spending, the
// non-inferiority bounds, the acceptance rule — lives here.
//
// One trial is one sample: callers pass each trial's value of a metric (for
// example each run's p99), never latencies pooled across runs.
package stats
