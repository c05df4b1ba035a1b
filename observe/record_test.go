package observe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bpfRecorder records the workload with Record, the BPF tracer.
type bpfRecorder struct {
	attach string
	path   string
	cancel context.CancelFunc
	done   chan struct{}
	res    *RecordResult
	err    error
}

func (r *bpfRecorder) events() []string {
	return []string{"sched_switch", "sched_waking", "sched_wakeup_new", "sched_process_fork", "sched_process_exit", "task_rename"}
}

func (r *bpfRecorder) start(t *testing.T, pid int) {
	t.Helper()
	r.path = filepath.Join(t.TempDir(), "bpf.pftrace")
	f, err := os.Create(r.path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	attached := make(chan struct{})
	go func() {
		defer close(r.done)
		r.res, r.err = Record(ctx, f, RecordOptions{Tgids: []int{pid}, Duration: time.Minute, Attach: r.attach,
			OnAttached: func() { close(attached) }})
		if cerr := f.Close(); r.err == nil {
			r.err = cerr
		}
	}()
	select {
	case <-attached:
	case <-r.done:
		t.Fatalf("Record: %v", r.err)
	}
	t.Cleanup(func() { cancel(); <-r.done })
}

func (r *bpfRecorder) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	<-r.done
	if r.err != nil {
		t.Fatalf("Record: %v", r.err)
	}
	if r.res.StopReason != StopInterrupted {
		t.Errorf("stop reason %q, want %q", r.res.StopReason, StopInterrupted)
	}
	t.Logf("Record: attach %s, %d events, %d bytes (%.1f bytes/event), emitted %v, lost %v, clamped %d, discarded %d, warnings %q",
		r.res.Attach, r.res.Events, r.res.Bytes, float64(r.res.Bytes)/float64(max(r.res.Events, 1)),
		r.res.Emitted, r.res.Lost, r.res.Clamped, r.res.Discarded, r.res.Warnings)
}

func (r *bpfRecorder) write(t *testing.T, path string) map[int]int64 {
	t.Helper()
	if err := os.Rename(r.path, path); err != nil {
		t.Fatal(err)
	}
	lost := map[int]int64{}
	for cpu, n := range r.res.Lost {
		lost[cpu] = int64(n)
	}
	return lost
}

func requireRoot(t *testing.T) {
	t.Helper()
	if err := CheckTracing(); err != nil {
		if errors.Is(err, ErrNoPrivilege) {
			t.Skipf("NOT RUN: %s needs root to load BPF (%v); CI runs it as root", t.Name(), err)
		}
		t.Fatal(err)
	}
}

// TestRecordWorkload traces testdata/workload with the BPF tracer over an
// exact window (see recorded_test.go) and checks the trace against /proc and
// against the wake structure the program is written to have.
func TestRecordWorkload(t *testing.T) {
	for _, mode := range []string{AttachBTF, AttachRawTP} {
		t.Run(mode, func(t *testing.T) {
			requireRoot(t)
			dir := t.TempDir()
			bin := buildWorkload(t, dir)
			tracePath := filepath.Join(dir, "trace.pftrace")
			rec := &bpfRecorder{attach: mode}
			meta := recordWorkload(t, bin, dir, tracePath, rec)
			if rec.res.Attach != mode {
				t.Errorf("attached with %s, want %s", rec.res.Attach, mode)
			}
			checkRecorded(t, tracePath, meta)
			checkWakeEdges(t, tracePath, meta)
		})
	}
}

// checkWakeEdges checks that the dominant waker of each thread, among the
// workload's own threads, is the one the program's code makes wake it:
// the acceptor wakes workers, workers wake the logger, the logger wakes
// the syncer.
func checkWakeEdges(t *testing.T, path string, meta *recordedMeta) {
	t.Helper()
	comm := map[int32]string{}
	for _, th := range meta.Threads {
		comm[th.Tid] = th.Comm
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	edges := map[string]map[string]int{} // wakee -> waker -> count
	err = ForEach(r, func(ev *Event) error {
		if ev.Kind != KindWaking || ev.IRQ != IRQNone {
			return nil
		}
		waker, wakee := comm[ev.Pid], comm[ev.Tid]
		if waker == "" || wakee == "" {
			return nil
		}
		family := func(c string) string {
			if i := strings.LastIndexByte(c, '-'); i > 0 && strings.Trim(c[i+1:], "0123456789") == "" {
				return c[:i]
			}
			return c
		}
		wakee = family(wakee)
		if edges[wakee] == nil {
			edges[wakee] = map[string]int{}
		}
		edges[wakee][family(waker)]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ wakee, waker string }{
		{"wl-worker", "wl-acceptor"},
		{"wl-logger", "wl-worker"},
		{"wl-syncer", "wl-logger"},
	} {
		top, topN := "", 0
		for w, n := range edges[want.wakee] {
			if n > topN || n == topN && w < top {
				top, topN = w, n
			}
		}
		t.Logf("%s woken by %v", want.wakee, edges[want.wakee])
		if top != want.waker {
			t.Errorf("%s: dominant waker %q (%d), want %q; all: %v", want.wakee, top, topN, want.waker, edges[want.wakee])
		}
	}
}
