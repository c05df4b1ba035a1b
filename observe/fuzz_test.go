package observe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzRead reads data to the end, checking the reader's promises: no panic,
// errors that are one-line *FormatErrors naming the input, and memory bounded
// by what it decoded.
func fuzzRead(t *testing.T, data []byte) ([]Event, Reader, bool) {
	r, err := NewReader(bytes.NewReader(data), "fuzz")
	if err != nil {
		checkFormatError(t, err)
		return nil, nil, false
	}
	var evs []Event
	for {
		var ev Event
		err := r.Next(&ev)
		if errors.Is(err, io.EOF) {
			return evs, r, true
		}
		if err != nil {
			checkFormatError(t, err)
			return nil, nil, false
		}
		evs = append(evs, ev)
		if len(evs) > 1<<20 {
			t.Fatalf("more than 1M events from %d bytes", len(data))
		}
	}
}

func checkFormatError(t *testing.T, err error) {
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error is %T, not *FormatError: %v", err, err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "fuzz") {
		t.Fatalf("bad error message %q", msg)
	}
}

// roundTrip checks that events read from any input survive a rewrite.
func roundTrip(t *testing.T, evs []Event, info TraceInfo, late int64) {
	if late > 0 || len(evs) == 0 {
		return // out-of-order input cannot be rewritten in order
	}
	var buf bytes.Buffer
	w := NewPerfettoWriter(&buf, info)
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			return // e.g. a state this kernel layout cannot express
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, ok := fuzzRead(t, buf.Bytes())
	if !ok {
		t.Fatalf("rewritten trace does not read back")
	}
	want, have := canonical(evs), canonical(got)
	if len(want) != len(have) {
		t.Fatalf("rewrite kept %d of %d events", len(have), len(want))
	}
	for i := range want {
		if fmt.Sprintf("%+v", want[i]) != fmt.Sprintf("%+v", have[i]) {
			t.Fatalf("event %d changed in rewrite:\n%+v\n%+v", i, want[i], have[i])
		}
	}
}

func addSeedFiles(f *testing.F, patterns ...string) {
	for _, p := range patterns {
		files, _ := filepath.Glob(p)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil && len(data) < 1<<20 {
				f.Add(data)
			}
		}
	}
}

func FuzzPerfettoReader(f *testing.F) {
	f.Add(writeEvents(f, goldenInfo, goldenEvents()))
	f.Add(writeEvents(f, TraceInfo{}, goldenEvents()[3:9]))
	addSeedFiles(f, filepath.Join("..", "testdata", "golden", "*.pftrace"))
	if d := conformanceDirOrEmpty(); d != "" {
		addSeedFiles(f, filepath.Join(d, "*", "trace.pb"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, r, ok := fuzzRead(t, data)
		if ok && r.Info().Format == FormatPerfetto {
			roundTrip(t, evs, r.Info(), r.Stats().OutOfOrder)
		}
	})
}

const fuzzTextSeed = `# tracer: nop
#
           <idle>-0       (-------) [001] d..2.  1234.000001: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=Web Content next_pid=42 next_prio=120
      Web Content-42      (     40) [001] d.h2.  1234.000200: sched_waking: comm=kworker/u8:2-events pid=7 prio=120 target_cpu=000
      Web Content-42      (     40) [001] d..2.  1234.000500: sched_switch: prev_comm=Web Content prev_pid=42 prev_prio=120 prev_state=D|K ==> next_comm=swapper/1 next_pid=0 next_prio=120
            bash-100 [000] ....  1234.000600: task_newtask: pid=101 comm=bash clone_flags=3d0f00 oom_score_adj=0
            bash-101 [000] ....  1234.000700: task_rename: pid=101 oldcomm=bash newcomm=my worker oom_score_adj=0
            bash-101 [000] ....  1234.000800: sched_process_exit: comm=my worker pid=101 prio=120 group_dead=true
CPU:1 [LOST 12 EVENTS]
            bash-100 [000] ....  1234.000900: sched_process_free: comm=my worker pid=101 prio=120
`

func FuzzTextReader(f *testing.F) {
	f.Add([]byte(fuzzTextSeed))
	addSeedFiles(f, filepath.Join("..", "testdata", "traces", "*.txt"))
	if d := conformanceDirOrEmpty(); d != "" {
		addSeedFiles(f, filepath.Join(d, "*", "trace.systrace"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, r, ok := fuzzRead(t, data)
		if ok && r.Info().Format == FormatFtraceText {
			roundTrip(t, evs, r.Info(), r.Stats().OutOfOrder)
		}
	})
}

// TestTextReaderVariants pins the line forms the text reader accepts.
func TestTextReaderVariants(t *testing.T) {
	evs, r, ok := fuzzRead(t, []byte(fuzzTextSeed))
	if !ok {
		t.Fatal("seed does not read")
	}
	var switches, wakings []Event
	for _, ev := range evs {
		switch ev.Kind {
		case KindSwitch:
			switches = append(switches, ev)
		case KindWaking:
			wakings = append(wakings, ev)
		}
	}
	if len(switches) != 2 || switches[0].Comm != "Web Content" || switches[1].PrevComm != "Web Content" {
		t.Errorf("comms with spaces: %+v", switches)
	}
	if switches[1].PrevState != StateUninterruptible|StateWakeKill || switches[1].PrevTid != 42 {
		t.Errorf("prev_state D|K: got %v", switches[1].PrevState)
	}
	if len(wakings) != 1 || wakings[0].Comm != "kworker/u8:2-events" || wakings[0].Pid != 42 || wakings[0].IRQ != IRQHard || wakings[0].TargetCPU != 0 {
		t.Errorf("waking: %+v", wakings)
	}
	if switches[0].TS != 1234000001000 {
		t.Errorf("timestamp %d, want 1234000001000", switches[0].TS)
	}
	if lost := r.Stats().LostEvents[1]; lost != 12 {
		t.Errorf("lost events on cpu1 = %d, want 12", lost)
	}
	var tgidSeen bool
	for _, ev := range evs {
		if ev.Kind == KindThreadInfo && ev.Tid == 42 && ev.Tgid == 40 && ev.Comm == "Web Content" {
			tgidSeen = true
		}
		if ev.Kind == KindRename && (ev.Comm != "my worker" || ev.PrevComm != "bash") {
			t.Errorf("rename: %+v", ev)
		}
	}
	if !tgidSeen {
		t.Error("the (tgid) column did not yield thread identity")
	}
}
