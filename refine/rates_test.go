package refine

import (
	"context"
	"testing"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/stats"
)

// runMany runs the whole engine runs times against a benchmark with 5%
// lognormal noise whose p99 is scaled by effect(profile in force), and
// counts the rounds that accepted a step, the steps that were the planted
// one (workers → latency), and the runs whose refined profile was kept.
func runMany(t *testing.T, runs int, effect func(*profiles.Profile) float64) (rounds, accepts, planted, kept int) {
	t.Helper()
	for i := range runs {
		sched := &fakeScheduler{}
		cfg := testConfig(uint64(1000 + i))
		cfg.MaxRounds = 2
		res, err := Run(context.Background(), cfg, testProfile(), testEnv(t, sched, noisyBench(sched, uint64(i), 0.05, effect)))
		if err != nil {
			t.Fatal(err)
		}
		rounds += len(res.Rounds)
		accepts += len(res.Accepted)
		for _, s := range res.Accepted {
			if s.Group == "workers" && s.To == "latency" {
				planted++
				break
			}
		}
		if res.Kept {
			kept++
		}
	}
	return
}

// falseAcceptRuns is how many A/A runs TestFalseAcceptRate makes: enough
// that the one-sided 95% upper bound of the rate can show ≤ 5% (0 of 59
// does; 120 leaves room for one false accept). `go test -short` makes
// fewer and checks the rate itself; `make stats-rates` makes them all.
const falseAcceptRuns, falseAcceptRunsShort = 120, 30

// TestFalseAcceptRate is the A/A measurement: the benchmark's numbers do
// not depend on the profile, so every accepted step and every kept profile
// is a false accept. The upper bound of both rates must be ≤ 5% (with
// -short: the rates themselves).
func TestFalseAcceptRate(t *testing.T) {
	runs := falseAcceptRuns
	if testing.Short() {
		runs = falseAcceptRunsShort
	}
	rounds, accepts, _, kept := runMany(t, runs, nil)
	fa, fk := stats.UpperBound(accepts, rounds, 0.95), stats.UpperBound(kept, runs, 0.95)
	t.Logf("A/A, 5%% noise, min effect 5%%, alpha 0.05: %d of %d round decisions accepted a step (upper bound %.1f%%); %d of %d final decisions kept a profile (upper bound %.1f%%)",
		accepts, rounds, 100*fa, kept, runs, 100*fk)
	if rounds < runs {
		t.Fatalf("only %d round decisions in %d runs", rounds, runs)
	}
	if testing.Short() {
		fa, fk = float64(accepts)/float64(rounds), float64(kept)/float64(runs)
	}
	if fa > 0.05 || fk > 0.05 {
		t.Errorf("false-accept rate above 5%%: rounds %.3f, final %.3f", fa, fk)
	}
}

// TestPower is the planted effect: p99 is lower by the effect while the
// workers group has latency treatment; the power is the share of runs that
// find that step (and keep the refined profile).
func TestPower(t *testing.T) {
	for _, tc := range []struct {
		effect float64
		runs   int
		min    float64 // power below this fails the test
	}{
		{0.15, 30, 0.8},
		{0.10, 30, 0}, // measured, not asserted: twice the minimum effect
	} {
		planted, kept := 0, 0
		_, _, planted, kept = runMany(t, tc.runs, func(p *profiles.Profile) float64 {
			if latencyWorkers(p) {
				return 1 - tc.effect
			}
			return 1
		})
		pw := stats.Proportion(planted, tc.runs, 0.95)
		t.Logf("planted %.0f%% effect, 5%% noise, min effect 5%%: found in %d of %d runs (power %.0f%% [%.0f%%, %.0f%%]); refined profile kept in %d",
			100*tc.effect, planted, tc.runs, 100*pw.Center, 100*pw.Lo, 100*pw.Hi, kept)
		if pw.Center < tc.min {
			t.Errorf("power %.2f at a %.0f%% effect, want ≥ %.2f", pw.Center, 100*tc.effect, tc.min)
		}
	}
}
