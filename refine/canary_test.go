package refine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/ledger"
)

// shiftedBench returns lognormal p99 (5% noise) and throughput (2% noise)
// scaled by what the profile in force does to them.
func shiftedBench(sched *fakeScheduler, seed uint64, p99, tput func(*profiles.Profile) float64) Bench {
	rng := rand.New(rand.NewPCG(seed, 7))
	var mu sync.Mutex
	return func(context.Context, string) (map[string]float64, error) {
		mu.Lock()
		a, b := rng.NormFloat64(), rng.NormFloat64()
		mu.Unlock()
		cur := sched.current()
		return map[string]float64{
			"p99_ms":     math.Exp(0.05*a) * p99(cur),
			"throughput": 1000 * math.Exp(0.02*b) * tput(cur),
		}, nil
	}
}

func TestCheckCandidateStates(t *testing.T) {
	last := testProfile()
	cand := testProfile()
	cand.ThreadGroups[0].Treatment = profiles.Latency
	isCand := func(p *profiles.Profile) bool { return latencyWorkers(p) }
	one := func(*profiles.Profile) float64 { return 1 }
	by := func(f float64) func(*profiles.Profile) float64 {
		return func(p *profiles.Profile) float64 {
			if isCand(p) {
				return f
			}
			return 1
		}
	}
	for _, tc := range []struct {
		name      string
		p99, tput func(*profiles.Profile) float64
		want      State
		reason    string
	}{
		{"better", by(0.7), one, Passed, "passed"},
		{"worse primary", by(1.4), one, Failed, "p99_ms at bg=0"},
		{"guard regresses", one, by(0.7), Failed, "guard throughput"},
		{"no difference", one, one, Inconclusive, "inconclusive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched := &fakeScheduler{}
			env := testEnv(t, sched, shiftedBench(sched, 3, tc.p99, tc.tput))
			chk, err := CheckCandidate(context.Background(), testConfig(11), last, cand, 8, "c1/check", env)
			if err != nil {
				t.Fatal(err)
			}
			if chk.State != tc.want || !strings.Contains(chk.Reason, tc.reason) {
				t.Fatalf("state %s (%s), want %s with %q", chk.State, chk.Reason, tc.want, tc.reason)
			}
			if chk.Trials != 16 || len(chk.Decisions) != 1 || chk.Decisions[0].Stage != StageCanary {
				t.Fatalf("trials %d, decisions %+v", chk.Trials, chk.Decisions)
			}
			if sched.current() != nil || sched.open != 0 {
				t.Fatal("the check left a profile in force")
			}
			l, err := ledger.Read(env.Ledger.Path())
			if err != nil {
				t.Fatal(err)
			}
			// The reference arm is the last good profile, not stock.
			lastHash, _ := Hash(last)
			arms := map[string]int{}
			for _, s := range l.Starts {
				arms[s.Arm+":"+s.Candidate]++
			}
			if arms["A:"+lastHash] != 8 || arms["A:"+StockHash] != 0 {
				t.Fatalf("arms %v, want 8 trials of the last good profile %s as A", arms, lastHash)
			}
		})
	}
}

// TestRunAgainstReference: refine measured against the profile in force
// (the canary's cycles after the first) calibrates and compares with it,
// and keeps a refined profile only when it beats it.
func TestRunAgainstReference(t *testing.T) {
	last := testProfile()
	sched := &fakeScheduler{}
	// latency workers help 20% over anything else, stock included.
	env := testEnv(t, sched, noisyBench(sched, 5, 0.03, func(p *profiles.Profile) float64 {
		if latencyWorkers(p) {
			return 0.8
		}
		return 1
	}))
	env.Reference = last
	res, err := Run(context.Background(), testConfig(21), last, env)
	if err != nil {
		t.Fatal(err)
	}
	lastHash, _ := Hash(last)
	if !res.Kept || !strings.Contains(res.Reference, lastHash) || len(res.Final) != 2 || res.Final[0].Look == nil || !strings.Contains(res.Final[0].Step, "profile in force") {
		t.Fatalf("kept %v, reference %q, final %+v", res.Kept, res.Reference, res.Final)
	}
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Starts {
		if (s.Stage == StageCalibration || (s.Stage == StageFinal && s.Arm == "A")) && s.Candidate != lastHash {
			t.Fatalf("trial %s: arm %s is %s, want the profile in force %s", s.Trial, s.Arm, s.Candidate, lastHash)
		}
	}
	if p := WithEvidence(res, "l.jsonl", l.Header.Start); !strings.Contains(strings.Join(p.Traits.Refined, "\n"), "vs profile in force "+lastHash) {
		t.Fatalf("evidence %q does not name the reference", p.Traits.Refined)
	}

	// Nothing helps: the climb ends on the reference, no final comparison.
	sched = &fakeScheduler{}
	env = testEnv(t, sched, noisyBench(sched, 6, 0.03, nil))
	env.Reference = last
	res, err = Run(context.Background(), testConfig(22), last, env)
	if err != nil {
		t.Fatal(err)
	}
	if res.Kept || len(res.Final) != 0 {
		t.Fatalf("kept %v with final %+v: want nothing new", res.Kept, res.Final)
	}
}

// TestCheckCandidateBenchFailed: a candidate the benchmark fails under
// fails its check (rolled back), with the failure in the reason and one
// recorded decision; under the last good profile the failure is the
// check's error.
func TestCheckCandidateBenchFailed(t *testing.T) {
	exit := exec.Command("sh", "-c", "exit 1").Run()
	if exit == nil {
		t.Fatal("sh -c 'exit 1' did not fail")
	}
	starved := fmt.Errorf("jsonl: %w: no requests completed in the window", exit)
	last := testProfile()
	cand := testProfile()
	cand.ThreadGroups[0].Treatment = profiles.Latency
	one := func(*profiles.Profile) float64 { return 1 }
	failUnder := func(sched *fakeScheduler, bad func(*profiles.Profile) bool) Bench {
		inner := shiftedBench(sched, 3, one, one)
		return func(ctx context.Context, dir string) (map[string]float64, error) {
			if bad(sched.current()) {
				return nil, starved
			}
			return inner(ctx, dir)
		}
	}
	sched := &fakeScheduler{}
	env := testEnv(t, sched, failUnder(sched, latencyWorkers))
	chk, err := CheckCandidate(context.Background(), testConfig(11), last, cand, 8, "c1/check", env)
	if err != nil {
		t.Fatalf("a candidate's failed benchmark ended the check: %v", err)
	}
	if chk.State != Failed || !strings.Contains(chk.Reason, "rolled back: the benchmark failed under the candidate") || !strings.Contains(chk.Reason, starved.Error()) {
		t.Errorf("state %s (%s), want failed for the benchmark's failure", chk.State, chk.Reason)
	}
	if len(chk.Decisions) != 1 || chk.Decisions[0].Verdict != string(Failed) || chk.Decisions[0].Accepted {
		t.Errorf("decisions %+v, want one failed", chk.Decisions)
	}
	if sched.current() != nil || sched.open != 0 {
		t.Error("the check left a profile in force")
	}
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Decisions) != 1 || l.Decisions[0].Verdict != string(Failed) {
		t.Errorf("the ledger's decisions %+v, want the one failed", l.Decisions)
	}

	// The last good profile failing is the benchmark's (or the machine's)
	// fault: the check's error.
	sched = &fakeScheduler{}
	isLast := func(p *profiles.Profile) bool { return p != nil && !latencyWorkers(p) }
	if _, err := CheckCandidate(context.Background(), testConfig(11), last, cand, 8, "c1/check", testEnv(t, sched, failUnder(sched, isLast))); !errors.Is(err, starved) {
		t.Errorf("the last good profile's failed benchmark: %v, want the check to end with it", err)
	}
}
