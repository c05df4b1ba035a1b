package scheduler

import (
	"bytes"
	"testing"
	"time"

	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/profiles"
)

// TestWriteStatsGolden renders the per-group stats table, with counters
// the backend does not measure and notes shared by groups, against
// testdata/stats-table.txt (-update rewrites it).
func TestWriteStatsGolden(t *testing.T) {
	cfsMissing := []Unmeasured{
		{Counter: Dispatches, Why: "CFS has no dispatch queues"},
		{Counter: SiblingBusy, Why: "needs the sched_ext backend"},
	}
	stats := []GroupStats{
		{Group: "compute", Treatment: profiles.Exclusive, Threads: 2, RuntimeNs: 9_870_000_000, Preemptions: 12, Missing: cfsMissing,
			Notes: []string{"exclusive cores 2-3 (SMT siblings idle)"}},
		{Group: "requests", Treatment: profiles.Latency, Threads: 5, RuntimeNs: 1_234_000_000, Preemptions: 3456, Missing: cfsMissing},
		{Group: "housekeeping", Treatment: profiles.Yield, Threads: 4, RuntimeNs: 5_000_000, Missing: cfsMissing},
		{Group: Unmatched, Threads: 2, RuntimeNs: 0, Preemptions: 0, Missing: cfsMissing},
	}
	var b bytes.Buffer
	if err := WriteStats(&b, stats, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "testdata/stats-table.txt", b.Bytes())
}
