package pipeline

import (
	"bytes"
	"strings"
	"testing"

	"temper.codes/temper-train/observe/record"
	"temper.codes/temper-train/observe/snapshot"
)

// TestObservationReport reports an observation of the committed workload
// trace: the hints appear only when the caller gives them, and the table
// lists only the target's threads.
func TestObservationReport(t *testing.T) {
	obs := &Observation{TracePath: workloadTrace, SnapshotPath: "snap.json",
		Snapshot: &snapshot.Snapshot{Target: snapshot.Target{Description: "pid 19560"}, Warnings: []string{"no agent"}},
		Record: &record.Result{Attach: "tp_btf", StopReason: "duration", Start: 1e9, End: 3e9, Events: 1000,
			Bytes: 3 << 20, Lost: []uint64{0, 7}, Targets: []int{workloadPid}}}
	cases := []struct {
		name      string
		opts      ObservationReportOptions
		want, not []string
	}{
		{"hints", ObservationReportOptions{Top: 2, AllThreads: "--top 0", BiggerBuffer: "--buffer-size 64MiB"},
			[]string{"target    pid 19560\n", "stopped   after 2.00 s: duration\n", "3.0 MiB on disk",
				"LOST      7 events (per CPU [0 7]): the kernel's ring buffer was full; states near the gaps are uncertain (try --buffer-size 64MiB)\n",
				"warning   no agent\n", "wrote     " + workloadTrace + "\n          snap.json\n", "threads of the target", "; --top 0 lists all)\n"},
			nil},
		{"unsaid", ObservationReportOptions{Top: 2}, []string{"uncertain\n", "more threads)\n"}, []string{"try", "lists all"}},
	}
	for _, c := range cases {
		var b bytes.Buffer
		if err := obs.Report(&b, c.opts); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, b.String())
			}
		}
		for _, w := range c.not {
			if strings.Contains(b.String(), w) {
				t.Errorf("%s: %q in\n%s", c.name, w, b.String())
			}
		}
		for _, line := range strings.Split(b.String(), "\n") {
			if strings.Contains(line, "wl-") && !strings.Contains(line, " 19560 ") {
				t.Errorf("%s: a thread outside the target: %s", c.name, line)
			}
		}
	}
}
