package refine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/report"
)

// TestUsageRecorded gives the engine a pod whose quota throttles stock
// (4 periods a reading) and not the latency profile: every trial's end
// records the change over its benchmark, and the report's quota table
// shows it per arm and level over the final's trials.
func TestUsageRecorded(t *testing.T) {
	sched := &fakeScheduler{}
	env := testEnv(t, sched, noisyBench(sched, 5, 0.03, func(p *profiles.Profile) float64 {
		if latencyWorkers(p) {
			return 0.7
		}
		return 1
	}))
	var mu sync.Mutex
	var acc cgroup.CPUStat
	env.Usage = func() (cgroup.CPUStat, error) {
		mu.Lock()
		defer mu.Unlock()
		acc.Usage += 15 * time.Millisecond
		acc.Periods += 10
		if !latencyWorkers(sched.current()) {
			acc.Throttled += 4
			acc.ThrottledTime += 20 * time.Millisecond
		}
		acc.Limit = 1.5
		return acc, nil
	}
	cfg := testConfig(11)
	res, err := Run(context.Background(), cfg, testProfile(), env)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Kept {
		t.Fatalf("the planted effect was not kept: %s", res.Stopped)
	}
	l, err := ledger.Read(env.Ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Ends {
		u := e.CPU
		if u == nil {
			t.Fatalf("trial %s: no CPU usage recorded", e.Trial)
		}
		if u.Usage != 0.015 || u.Periods != 10 || u.Quota != 1.5 || u.Wall <= 0 || (u.Throttled != 0 && u.Throttled != 4) {
			t.Errorf("trial %s: usage %+v; want one reading's change (15 ms, 10 periods, 0 or 4 throttled) under a 1.5-CPU quota", e.Trial, *u)
		}
	}
	rep, err := ReportOf(l, ReportInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Quota) != len(rep.Arms)*len(rep.Ladder) {
		t.Fatalf("%d quota rows for %d arms at %d levels", len(rep.Quota), len(rep.Arms), len(rep.Ladder))
	}
	for i, q := range rep.Quota {
		want := 4.0
		if q.Arm == "refined" {
			want = 0
		}
		if q.Throttled != want || q.Periods != 10 || q.Quota != 1.5 || q.Enforced != report.EnforcedCFS || q.Values["throughput"] != 1000 {
			t.Errorf("quota row %+v; want %g throttled periods of 10, quota 1.5 enforced by CFS", q, want)
		}
		// The ladder cell's trials: the final's, for an arm in it.
		lv, arm := i/len(rep.Arms), i%len(rep.Arms)
		if n := rep.Ladder[lv].Cells[arm].N; q.N != n || q.Arm != rep.Arms[arm].Name {
			t.Errorf("quota row %s has n=%d; want the ladder cell's %s n=%d", q.Arm, q.N, rep.Arms[arm].Name, n)
		}
	}
}

// TestUsageUnreadable: a pod whose usage cannot be read costs no trial;
// the run notes it once.
func TestUsageUnreadable(t *testing.T) {
	sched := &fakeScheduler{}
	env := testEnv(t, sched, noisyBench(sched, 5, 0.03, nil))
	env.Usage = func() (cgroup.CPUStat, error) { return cgroup.CPUStat{}, errors.New("no cpu.stat") }
	cfg := testConfig(11)
	cfg.MaxRounds = 1
	res, err := Run(context.Background(), cfg, testProfile(), env)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, note := range res.Notes {
		if strings.Contains(note, "CPU usage could not be read (no cpu.stat)") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d notes of the unreadable usage; want 1: %q", n, res.Notes)
	}
}

func TestEnforcement(t *testing.T) {
	for _, tt := range []struct{ backend, hash, want string }{
		{"cfs", "1f2e3d4c5b6a", report.EnforcedCFS},
		{"sched_ext", StockHash, report.EnforcedCFS},
		{"sched_ext", StockHash + TierSuffix, report.EnforcedCFS},
		{"sched_ext", "1f2e3d4c5b6a", "the scheduler's ceiling (sched_ext), not the kernel"},
		{"sched_ext", "1f2e3d4c5b6a" + TierSuffix, "the scheduler's ceiling (sched_ext), not the kernel"},
	} {
		if got := enforcement(tt.backend, tt.hash); got != tt.want {
			t.Errorf("enforcement(%s, %s) = %q; want %q", tt.backend, tt.hash, got, tt.want)
		}
	}
}
