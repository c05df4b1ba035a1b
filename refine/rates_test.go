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

// TestFalseAcceptRate is the A/A measurement: the benchmark's numbers do
// not depend on the profile, so every accepted step and every kept profile
// is a false accept. Over ≥ 40 runs (each a hill-climbing round decision
// and a final decision) the rate must stay ≤ 5%.
func TestFalseAcceptRate(t *testing.T) {
	const runs = 60
	rounds, accepts, _, kept := runMany(t, runs, nil)
	fa := stats.Proportion(accepts, rounds, 0.95)
	fk := stats.Proportion(kept, runs, 0.95)
	t.Logf("A/A, 5%% noise, min effect 5%%, alpha 0.05: %d of %d round decisions accepted a step (false-accept rate %.1f%% [%.1f%%, %.1f%%]); %d of %d final decisions kept a profile (%.1f%% [%.1f%%, %.1f%%])",
		accepts, rounds, 100*fa.Center, 100*fa.Lo, 100*fa.Hi, kept, runs, 100*fk.Center, 100*fk.Lo, 100*fk.Hi)
	if rounds < 40 {
		t.Fatalf("only %d round decisions", rounds)
	}
	if fa.Center > 0.05 || fk.Center > 0.05 {
		t.Errorf("false-accept rate above 5%%: rounds %.3f, final %.3f", fa.Center, fk.Center)
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
