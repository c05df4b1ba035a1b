package analyze

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/observe"
)

const forkFixture = "../testdata/analyze/fork.txt"

// TestTextFixtureForks reads a tiny ftrace-text trace (see the fixture's
// header) through observe's text reader: --pid follows the server's forks,
// --process finds every process of that name, the kernel thread is left
// out, and the children's features come out exactly.
func TestTextFixtureForks(t *testing.T) {
	for _, opts := range []Options{{Pids: []int{500}}, {Process: "srv"}} {
		a, err := File(forkFixture, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := tids(a); !slices.Equal(got, []int32{500, 600, 601}) {
			t.Errorf("%+v: target %v, want 500, 600, 601", opts, got)
		}
		if opts.Pids != nil && !strings.Contains(a.Target.Description, "2 of them forked inside the trace") {
			t.Errorf("description %q", a.Target.Description)
		}
	}
	a, err := File(forkFixture, Options{Pids: []int{500}})
	if err != nil {
		t.Fatal(err)
	}
	c601 := threadByTid(t, a, 601).Features
	if c601.Run.N != 2 || c601.Run.P50 != 400_000 || c601.Run.P90 != 600_000 || c601.Disk != 1 || c601.Sleep != 1 ||
		c601.WakeLatency.P50 != 100_000 || c601.DiskNs != 600_000 {
		t.Errorf("601: %+v", c601)
	}
	c600 := threadByTid(t, a, 600)
	if len(c600.WokenBy) != 1 || c600.WokenBy[0].Node != "process cron" || c600.WokenBy[0].Count != 1 {
		t.Errorf("600 woken by %+v, want process cron once", c600.WokenBy)
	}
	if w := threadByTid(t, a, 601).WokenBy; len(w) != 1 || w[0].Node != "hardirq" {
		t.Errorf("601 woken by %+v, want hardirq (the fixture's dNh3 flags)", w)
	}
	all, err := File(forkFixture, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tids(all); !slices.Equal(got, []int32{500, 600, 601, 700}) {
		t.Errorf("all user threads: %v, want srv and cron without the kworker", got)
	}
}

// FuzzAnalyzeTrace feeds arbitrary bytes through observe's readers into
// Analyze: whatever a reader accepts, the analysis must not panic, and it
// must be deterministic.
func FuzzAnalyzeTrace(f *testing.F) {
	seed, err := os.ReadFile(forkFixture)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(synthPerfetto(f, 2000, 20))
	var text bytes.Buffer
	text.WriteString("# tracer: nop\n")
	text.WriteString("  a-1 (1) [000] d..2. 1.000000: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=b next_pid=2 next_prio=120\n")
	f.Add(text.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		var out [2][]byte
		for i := range out {
			r, err := observe.NewReader(bytes.NewReader(data), "fuzz")
			if err != nil {
				return
			}
			a, err := Trace(r, Options{Path: "fuzz"})
			if err != nil {
				return
			}
			var b bytes.Buffer
			if err := a.Write(&b); err != nil {
				t.Fatal(err)
			}
			if err := a.Report(&bytes.Buffer{}, ReportOptions{Wide: true}); err != nil {
				t.Fatal(err)
			}
			out[i] = b.Bytes()
		}
		if !bytes.Equal(out[0], out[1]) {
			t.Fatal("analysis not deterministic")
		}
	})
}
