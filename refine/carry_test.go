package refine

import (
	"context"
	"strings"
	"testing"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/report"
)

// TestCarry: after round 1 steps (workers → latency, 20% better), round 2
// does not race again the moves of the untouched group ("rest") whose
// round-1 gain was below the step's threshold, nor a state round 1
// measured; each is in the ledger once, as carried, with its estimate,
// and no trial of round 2 runs it.
func TestCarry(t *testing.T) {
	sched := &fakeScheduler{}
	b := noisyBench(sched, 3, 0.05, func(p *profiles.Profile) float64 {
		if latencyWorkers(p) {
			return 0.8
		}
		return 1
	})
	env := testEnv(t, sched, b)
	cfg := testConfig(11)
	res, err := Run(context.Background(), cfg, testProfile(), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rounds) < 2 || len(res.Accepted) == 0 || res.Accepted[0].Group != "workers" {
		t.Fatalf("rounds %d, accepted %v: want round 1 to step on workers", len(res.Rounds), res.Accepted)
	}
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	carried := map[string]bool{}
	for _, d := range l.Decisions {
		if d.Stage != StageRace || d.Round != 2 || d.Verdict != report.Carried {
			continue
		}
		carried[d.Candidate] = true
		// The stepped group's moves can carry only by state: its moves
		// were measured from another state of the group.
		if d.Race == nil || d.Race.CarriedFrom != 1 || d.Race.Basis != basisState && d.Race.Basis != basisMove ||
			d.Group == "workers" && d.Race.Basis != basisState {
			t.Errorf("carried %s: %+v", d.Step, d.Race)
		}
		if !strings.Contains(d.Reason, "not raced") || !strings.Contains(d.Reason, "below the step's") {
			t.Errorf("carried %s: reason %q", d.Step, d.Reason)
		}
	}
	if len(carried) == 0 || res.Rounds[1].Carried != len(carried) {
		t.Fatalf("round 2 carried %d candidates, Round.Carried = %d", len(carried), res.Rounds[1].Carried)
	}
	for _, tr := range l.Starts {
		if strings.HasPrefix(tr.Trial, "r2/") && carried[tr.Candidate] {
			t.Errorf("trial %s ran carried candidate %s", tr.Trial, tr.Candidate)
		}
	}
	t.Logf("round 2 raced %d candidates and carried %d", res.Rounds[1].Candidates, res.Rounds[1].Carried)
}
