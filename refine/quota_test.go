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
	for _, tt := range []struct {
		backend, hash string
		ceilings      []float64
		want          string
	}{
		{"cfs", "1f2e3d4c5b6a", nil, report.EnforcedCFS},
		{"sched_ext", StockHash, nil, report.EnforcedCFS},
		{"sched_ext", StockHash + TierSuffix, nil, report.EnforcedCFS},
		{"sched_ext", "1f2e3d4c5b6a", []float64{1.5, 1.5, 1.5}, "the scheduler's ceiling, 1.5 CPUs (sched_ext), not the kernel"},
		{"sched_ext", "1f2e3d4c5b6a" + TierSuffix, []float64{0.5}, "the scheduler's ceiling, 0.5 CPUs (sched_ext), not the kernel"},
		{"sched_ext", "1f2e3d4c5b6a", []float64{0, 0}, "none: not limited (sched_ext ignores cpu.max)"},
		{"sched_ext", "1f2e3d4c5b6a", nil, "the scheduler (sched_ext; its ceiling not recorded), not the kernel"},
	} {
		if got := enforcement(tt.backend, tt.hash, tt.ceilings); got != tt.want {
			t.Errorf("enforcement(%s, %s, %v) = %q; want %q", tt.backend, tt.hash, tt.ceilings, got, tt.want)
		}
	}
}

// ceilingScheduler runs profile arms in sessions that report a CPU
// ceiling, as the sched_ext backend's do (Ceilinged); stock's do not.
type ceilingScheduler struct {
	*fakeScheduler
	ceiling float64
}

type ceilingSession struct {
	Session
	ceiling float64
}

func (c ceilingSession) Ceiling() (float64, error) { return c.ceiling, nil }

func (s ceilingScheduler) Apply(ctx context.Context, p *profiles.Profile) (Session, error) {
	sess, err := s.fakeScheduler.Apply(ctx, p)
	if err != nil || p == nil {
		return sess, err
	}
	return ceilingSession{sess, s.ceiling}, nil
}

// TestCeilingRecorded: a profile arm's trials record the ceiling their
// session held the pod to, stock's none; the quota table says per arm
// what held it: the ceiling in CPUs, or nothing (ceilings off).
func TestCeilingRecorded(t *testing.T) {
	for _, tt := range []struct {
		ceiling float64
		want    string
	}{
		{1.5, "the scheduler's ceiling, 1.5 CPUs (sched_ext), not the kernel"},
		{0, "none: not limited (sched_ext ignores cpu.max)"},
	} {
		fake := &fakeScheduler{}
		env := testEnv(t, fake, noisyBench(fake, 5, 0.03, nil))
		env.Scheduler = ceilingScheduler{fake, tt.ceiling}
		env.Usage = func() (cgroup.CPUStat, error) { return cgroup.CPUStat{Usage: time.Second, Limit: 1.5}, nil }
		cfg := testConfig(11)
		cfg.MaxRounds = 1
		if _, err := Run(context.Background(), cfg, testProfile(), env); err != nil {
			t.Fatal(err)
		}
		l, err := ledger.Read(env.Ledger.Path())
		if err != nil {
			t.Fatal(err)
		}
		arm := map[string]string{}
		for _, s := range l.Starts {
			arm[s.Trial] = s.Candidate
		}
		for _, e := range l.Ends {
			stock := arm[e.Trial] == StockHash
			if e.CPU == nil || (e.CPU.Ceiling == nil) != stock || (!stock && *e.CPU.Ceiling != tt.ceiling) {
				t.Fatalf("trial %s (%s): usage %+v; want a ceiling of %g recorded for a profile arm only", e.Trial, arm[e.Trial], e.CPU, tt.ceiling)
			}
		}
		l.Header.Backend = "sched_ext"
		rep, err := ReportOf(l, ReportInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Quota) == 0 {
			t.Fatal("no quota rows")
		}
		for _, q := range rep.Quota {
			want := tt.want
			if q.Arm == rep.Arms[0].Name {
				want = report.EnforcedCFS
			}
			if q.Enforced != want {
				t.Errorf("ceiling %g: %s enforced by %q; want %q", tt.ceiling, q.Arm, q.Enforced, want)
			}
		}
	}
}
