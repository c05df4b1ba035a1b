package analyze

import "testing"

// TestScoreThread classifies behaviour shapes of real servers, described by
// their features alone.
func TestScoreThread(t *testing.T) {
	ms, us := int64(1e6), int64(1e3)
	run := func(p90 int64) Dist { return Dist{N: 1000, P50: p90 / 2, P90: p90} }
	cases := []struct {
		name     string
		f        Features
		neverRan bool
		want     Class
	}{
		{"intra-op pool member: 2 ms runs, 40% CPU, barrier peers", Features{CPUShare: 0.4, RunTimeP50: 2 * ms, Run: run(3 * ms),
			WakeRate: 180, Peer: 0.5, External: 0.5, Source: 0.5}, false, ClassSyncCompute},
		{"spinning batch thread: always runnable, preempted", Features{CPUShare: 0.95, RunTimeP50: 4 * ms, Run: run(4 * ms),
			PreemptShare: 1}, false, ClassSyncCompute},
		{"connection thread woken by the network", Features{CPUShare: 0.05, RunTimeP50: 80 * us, Run: run(150 * us),
			WakeRate: 800, External: 1, Source: 1}, false, ClassLatencyCritical},
		{"backend process woken by its client process", Features{CPUShare: 0.02, RunTimeP50: 60 * us, Run: run(200 * us),
			WakeRate: 300, External: 0.95, Source: 0.95, Chain: 0.05}, false, ClassLatencyCritical},
		{"pool worker woken by a dispatcher that the network wakes", Features{CPUShare: 0.01, RunTimeP50: 30 * us, Run: run(90 * us),
			WakeRate: 250, Entry: 1, Source: 1, FanIn: 1}, false, ClassLatencyCritical},
		{"WAL writer fed by many backends", Features{CPUShare: 0.01, RunTimeP50: 20 * us, Run: run(60 * us),
			WakeRate: 600, Entry: 0.9, FanIn: 12, Chain: 0.9, Source: 0.1, External: 0.1}, false, ClassIOWakeChain},
		{"fsync thread: woken by the log writer, then by disk completions", Features{CPUShare: 0.01, RunTimeP50: 50 * us, Run: run(100 * us),
			WakeRate: 120, DiskShare: 0.7, IOWake: 0.7, External: 0.7, Chain: 0.3}, false, ClassIOWakeChain},
		{"database backend: woken by its client, fsyncs its commits", Features{CPUShare: 0.08, RunTimeP50: 80 * us, Run: run(120 * us),
			WakeRate: 1000, DiskShare: 0.17, IOWake: 0.23, External: 0.6, Source: 0.55, Peer: 0.2}, false, ClassLatencyCritical},
		{"reader thread mostly waiting on the disk", Features{CPUShare: 0.05, RunTimeP50: 40 * us, Run: run(90 * us),
			WakeRate: 400, DiskShare: 0.8, IOWake: 0.8, External: 1, Source: 0.2}, false, ClassIOWakeChain},
		{"10 Hz housekeeping tick", Features{CPUShare: 0.00005, RunTimeP50: 5 * us, Run: run(8 * us),
			WakeRate: 10, External: 1, Source: 1}, false, ClassSporadic},
		{"1 Hz stats thread", Features{CPUShare: 0.001, RunTimeP50: 500 * us, Run: run(900 * us),
			WakeRate: 1, External: 1, Source: 1}, false, ClassSporadic},
		{"parked pool thread", Features{}, true, ClassSporadic},
		{"housekeeping ticking 900/s on its own timer, handing nothing on", Features{CPUShare: 0.01, RunTimeP50: 10 * us, Run: run(15 * us),
			WakeRate: 900, External: 1, HardIRQ: 1}, false, ClassSporadic},
		{"accept loop paced by a timer, feeding a worker pool", Features{CPUShare: 0.016, RunTimeP50: 40 * us, Run: run(45 * us),
			WakeRate: 830, External: 0.94, HardIRQ: 0.94, DispatchSource: 0.9}, false, ClassLatencyCritical},
		{"periodic real-time loop: 1 kHz timer, 20% CPU in short runs", Features{CPUShare: 0.2, RunTimeP50: 200 * us, Run: run(300 * us),
			WakeRate: 1000, External: 1, HardIRQ: 1}, false, ClassLatencyCritical},
		{"timer-paced stage feeding a log writer", Features{CPUShare: 0.01, RunTimeP50: 20 * us, Run: run(40 * us),
			WakeRate: 200, External: 1, HardIRQ: 1, DispatchChain: 0.9}, false, ClassIOWakeChain},
	}
	for _, c := range cases {
		s := scoreThread(&c.f, c.neverRan)
		got, conf := s.best()
		if got != c.want {
			t.Errorf("%s: %s (%.2f), want %s; scores %+v", c.name, got, conf, c.want, s)
		}
	}
}

func TestRamps(t *testing.T) {
	if ramp(5, 0, 10) != 0.5 || ramp(-1, 0, 10) != 0 || ramp(11, 0, 10) != 1 {
		t.Error("ramp")
	}
	if rampLog(10, 1, 100) != 0.5 || rampLog(0, 1, 100) != 0 {
		t.Error("rampLog")
	}
	if c, conf := (Scores{}).best(); c != ClassSporadic || conf != 0 {
		t.Error("all-zero scores should be sporadic with score share 0")
	}
}

// TestConfidence: a cluster's confidence is its score share only when many
// runs back it; with none it says nothing (1/4, as if every class were
// equally likely), and it grows with the runs, never past the share.
func TestConfidence(t *testing.T) {
	cases := []struct {
		share float64
		runs  int64
		want  float64
	}{
		{1, 0, 0.25},       // never ran: no evidence
		{0.6, 0, 0.25},     //
		{1, 30, 0.625},     // as many runs as the prior: halfway
		{0.25, 500, 0.25},  // a share of 1/4 stays 1/4
		{0.9, 3000, 0.894}, // thousands of runs: within a percent of the share
		{0, 30, 0.125},     // no class scored: towards 0
	}
	for _, c := range cases {
		if got := confidence(c.share, c.runs); got != c.want {
			t.Errorf("confidence(%v, %d runs) = %v, want %v", c.share, c.runs, got, c.want)
		}
	}
	prev := 0.0
	for _, runs := range []int64{0, 1, 10, 100, 1000, 100000} {
		got := confidence(0.8, runs)
		if got < prev || got > 0.8 {
			t.Errorf("confidence(0.8, %d runs) = %v: want growing with runs, at most the share 0.8 (previous %v)", runs, got, prev)
		}
		prev = got
	}
}
