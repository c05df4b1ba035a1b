package analyze

import (
	"strings"
	"testing"
	"time"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/observe/snapshot"
)

// smtSnapshot is a snapshot of a 2-core × 2-thread machine (CPUs 0,1 on
// core 0; 2,3 on core 1) whose target is process 100.
func smtSnapshot(cores [][]int) *snapshot.Snapshot {
	topo := &machine.Topology{}
	for i, c := range cores {
		topo.Cores = append(topo.Cores, machine.Core{CoreID: i, CPUs: c})
	}
	return &snapshot.Snapshot{Schema: snapshot.Schema, Topology: topo,
		Target: snapshot.Target{Tgids: []int{100}}}
}

// smtTrace: hot threads A and B of process 100 run for 20 ms each. For
// the first 10 ms they share core 0 (CPUs 0 and 1); then B moves to CPU 2.
// CPU 2 and 3 start idle; with busyElsewhere, X of another process keeps
// CPU 2 busy for the first 10 ms, so no core is entirely idle then.
func smtTrace(busyElsewhere bool) *trace {
	const A, B, X, Y = 101, 102, 300, 301
	b := newTrace().thread(A, 100, "hot").thread(B, 100, "hot").thread(X, 300, "x").thread(Y, 301, "y").
		sw(0, 0, 0, stR, A).
		sw(0, 1, 0, stR, B)
	if busyElsewhere {
		b.sw(0, 2, Y, stS, X)
	} else {
		b.sw(0, 2, X, stS, 0)
	}
	b.sw(0, 3, Y, stS, 0).
		sw(10000, 2, X, stS, 0).
		sw(10000, 1, B, stR, 0).
		sw(10000, 2, 0, stR, B).
		sw(20000, 0, A, stS, 0).
		sw(20000, 2, B, stS, 0)
	return b
}

func TestSMTStacking(t *testing.T) {
	cases := []struct {
		name          string
		busyElsewhere bool
		withIdle      time.Duration
		share         float64
		finding       bool
	}{
		{"another core idle", false, 10 * time.Millisecond, 0.5, true},
		{"every other core busy", true, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := smtTrace(c.busyElsewhere).analyze(t, Options{Snapshot: smtSnapshot([][]int{{0, 1}, {2, 3}})})
			l := a.Lint.SMT
			if !l.Checked || l.Cores != 2 || l.PerCore != 2 || len(l.HotThreads) != 2 {
				t.Fatalf("SMT lint %+v", l)
			}
			if len(l.Pairs) != 1 {
				t.Fatalf("pairs %+v, want A+B", l.Pairs)
			}
			p := l.Pairs[0]
			if p.TogetherNs != 10e6 || p.WithIdleCore != int64(c.withIdle) || p.Share != c.share {
				t.Errorf("pair %+v: want together 10 ms, with idle core %v, share %v", p, c.withIdle, c.share)
			}
			if got := len(l.Findings) > 0; got != c.finding {
				t.Errorf("findings %q, want finding %v", l.Findings, c.finding)
			}
		})
	}
}

func TestSMTStatus(t *testing.T) {
	a := smtTrace(false).analyze(t, Options{Pids: []int{100}})
	if s := a.Lint.SMT.Status; !strings.HasPrefix(s, "no SMT information") || a.Lint.SMT.Checked {
		t.Errorf("without a snapshot: %q", s)
	}
	a = smtTrace(false).analyze(t, Options{Snapshot: smtSnapshot([][]int{{0}, {1}, {2}, {3}})})
	if s := a.Lint.SMT.Status; s != "no SMT on this machine: 4 cores, one hardware thread each" {
		t.Errorf("without SMT: %q", s)
	}
}

func i64(v int64) *int64 { return &v }

func TestCFSBandwidth(t *testing.T) {
	snap := smtSnapshot([][]int{{0}, {1}, {2}, {3}})
	snap.Taken.Begin.MonotonicNs = 5e9
	snap.Taken.End = &snapshot.Stamp{MonotonicNs: 6e9}
	reading := func(periods, throttled, thrNs, usage int64) *snapshot.CgroupCPU {
		return &snapshot.CgroupCPU{Version: 2, CPUController: true,
			Bandwidth: &snapshot.Bandwidth{QuotaUsec: 200000, PeriodUsec: 100000},
			NrPeriods: i64(periods), NrThrottled: i64(throttled), ThrottledNs: i64(thrNs), UsageNs: i64(usage)}
	}
	snap.Cgroups = []snapshot.CgroupRecord{{Version: 2, Path: "/sys/fs/cgroup/pod", Source: "process",
		Begin: reading(100, 10, 50e6, 10e9), End: reading(110, 14, 90e6, 11.9e9)}}
	a := smtTrace(false).analyze(t, Options{Snapshot: snap})
	l := a.Lint.CFS
	if l.QuotaCPUs != 2 || *l.Periods != 10 || *l.Throttled != 4 || *l.ThrottledNs != 40e6 || l.UsedCPUs != 1.9 ||
		l.QuotaUsed != 0.95 || l.ThrottledShare != 0.4 {
		t.Errorf("CFS lint %+v", l)
	}
	if len(l.Findings) != 2 || !strings.Contains(l.Findings[0], "throttled in 4 of 10 periods (40%), 40.0ms") {
		t.Errorf("findings %q", l.Findings)
	}
	if !strings.Contains(l.Status, "quota 2.00 CPUs per 100000 µs; used 1.90 CPUs (95% of quota)") {
		t.Errorf("status %q", l.Status)
	}

	a = smtTrace(false).analyze(t, Options{Pids: []int{100}})
	if !strings.HasPrefix(a.Lint.CFS.Status, "no snapshot") {
		t.Errorf("without a snapshot: %q", a.Lint.CFS.Status)
	}
}

// TestSnapshotTarget: the snapshot names the target, fills a thread group
// the trace did not state, and adds a thread the trace never saw.
func TestSnapshotTarget(t *testing.T) {
	snap := smtSnapshot([][]int{{0}, {1}})
	snap.Threads = []snapshot.Thread{
		{Tid: 100, Tgid: 100, Comm: "svc"},
		{Tid: 102, Tgid: 100, Comm: "svc-io"},
		{Tid: 105, Tgid: 100, Comm: "svc-park"},
	}
	b := newTrace().thread(100, 100, "svc")
	b.comm[102] = "svc-io" // no thread record: tgid unknown to the trace
	b.sw(0, 0, 0, stR, 100).
		wake(100, 0, 100, 102, 0).
		sw(200, 0, 100, stS, 102).
		sw(300, 0, 102, stS, 0)
	a := b.analyze(t, Options{Snapshot: snap})
	if got := tids(a); len(got) != 3 || got[0] != 100 || got[1] != 102 || got[2] != 105 {
		t.Fatalf("target %v, want 100, 102, 105", got)
	}
	if a.Target.Mode != TargetSnapshot || !strings.Contains(a.Target.Description, "from the snapshot") {
		t.Errorf("target %+v", a.Target)
	}
	park := threadByTid(t, a, 105)
	if !park.NeverRan || park.Class != ClassSporadic || park.Comm != "svc-park" {
		t.Errorf("thread 105: %+v", park)
	}
	if threadByTid(t, a, 102).Tgid != 100 {
		t.Errorf("thread 102's tgid not taken from the snapshot")
	}
}
