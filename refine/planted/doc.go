// Package planted measures refine's decisions end to end on a benchmark
// whose answer is known: the target testdata/planted/planted.c has four
// thread groups, the profile testdata/planted/planted.toml four tunable
// parameters, and the jsonl benchmark testdata/planted/bench reads from
// /proc the scheduling state the CFS backend actually applied and answers
// better only when the planted one (group alpha's slice below the
// kernel's default) is in force, with seeded lognormal noise.
//
// Its tests run refine.Run through the real CFS backend on the real
// target (pipeline.Live, as temper-train refine does) in four scenarios —
// a planted effect, none, an effect that helps at one background level
// and hurts at another, and one that costs the guarded throughput — and
// print one table of trials and rates. `go test` runs a few runs and
// checks the apparatus (the benchmark reacts to the applied state and to
// nothing else, every thread ends as it began); `make planted` runs RUNS
// per scenario and holds the rates to issue 23's targets. The package has
// no code of its own: everything is in its tests.
package planted
