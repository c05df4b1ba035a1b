package main

import (
	"bytes"
	"testing"
	"time"

	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

// TestApplyStatsGolden renders apply's closing table of per-group counters,
// with counters the backend does not measure and notes shared by groups,
// against testdata/apply-stats.txt (-update rewrites it).
func TestApplyStatsGolden(t *testing.T) {
	cfsMissing := []scheduler.Unmeasured{
		{Counter: scheduler.Dispatches, Why: "CFS has no dispatch queues"},
		{Counter: scheduler.SiblingBusy, Why: "needs the sched_ext backend"},
	}
	stats := []scheduler.GroupStats{
		{Group: "compute", Treatment: profiles.Exclusive, Threads: 2, RuntimeNs: 9_870_000_000, Preemptions: 12, Missing: cfsMissing,
			Notes: []string{"exclusive cores 2-3 (SMT siblings idle)"}},
		{Group: "requests", Treatment: profiles.Latency, Threads: 5, RuntimeNs: 1_234_000_000, Preemptions: 3456, Missing: cfsMissing},
		{Group: "housekeeping", Treatment: profiles.Yield, Threads: 4, RuntimeNs: 5_000_000, Missing: cfsMissing},
		{Group: scheduler.Unmatched, Threads: 2, RuntimeNs: 0, Preemptions: 0, Missing: cfsMissing},
	}
	var b bytes.Buffer
	printApplyStats(&b, stats, 5*time.Second)
	testkit.Golden(t, "testdata/apply-stats.txt", b.Bytes())
}
