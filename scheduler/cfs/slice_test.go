package cfs

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler/schedulertest"
)

// sliceOf reads a thread's slice as sched_getattr reports it.
func sliceOf(t *testing.T, tid int) uint64 {
	t.Helper()
	attr, err := unix.SchedGetAttr(tid, 0)
	testkit.Must(t, err)
	return attr.Runtime
}

// TestSliceApplyRevert loads a latency group's slice_us into the kernel and
// takes it out again, by Revert and, after a simulated crash, by RevertFile
// from the state file Apply wrote: a thread that had the default slice gets
// the default back, one that had a slice of its own gets that back.
func TestSliceApplyRevert(t *testing.T) {
	schedulertest.NeedBackend(t, New(Options{}))
	k := probeSlice()
	if !k.slice {
		need.Unmet(t, "a kernel that takes a fair thread's slice (6.12+)", k.sliceWhy)
	}
	prof := &profiles.Profile{SchemaVersion: 1, ID: "slice", ThreadGroups: []profiles.ThreadGroup{
		{Name: "sleepers", Match: profiles.Match{CommPrefix: []string{"sleep"}}, Treatment: profiles.Latency, SliceUs: 300},
	}}
	const own = 700_000 // a slice the thread set itself
	for _, crash := range []bool{false, true} {
		name := "Revert"
		if crash {
			name = "RevertFile"
		}
		t.Run(name, func(t *testing.T) {
			def := start(t, "sleep", "60").cmd.Process.Pid
			custom := start(t, "sleep", "60").cmd.Process.Pid
			testkit.Must(t, setAttr(custom, Settings{Policy: unix.SCHED_NORMAL, SliceNs: own}))
			base := sliceOf(t, def)
			if base == own {
				t.Fatalf("the kernel's default slice is %v, the test's own slice: pick another", time.Duration(base))
			}
			before := map[int]kernelView{def: readKernel(t, def), custom: readKernel(t, custom)}

			a, state, _ := applyForTest(t, context.Background(), plan(t, prof, def, custom))
			for _, tid := range []int{def, custom} {
				if got := sliceOf(t, tid); got != 300_000 {
					t.Errorf("applied: thread %d slice %v, want 300µs", tid, time.Duration(got))
				}
				if got := readKernel(t, tid).Nice; got != before[tid].Nice {
					t.Errorf("applied: thread %d nice %d, want %d kept (no weight)", tid, got, before[tid].Nice)
				}
			}
			st, err := ReadState(state)
			testkit.Must(t, err)
			for _, r := range st.Threads {
				want := uint64(0)
				if r.Tid == custom {
					want = own
				}
				if !r.Changed.Slice || r.Original.SliceNs != want {
					t.Errorf("state file: thread %d changed %s, original slice %d; want slice changed, original %d", r.Tid, r.Changed, r.Original.SliceNs, want)
				}
			}

			if crash {
				// The apply process died: its state file names a process
				// that is gone, and another process reverts from it.
				st.Pid, st.PidStart = exec1(t), 1
				testkit.Must(t, writeStateFile(state, st))
				testkit.Must(t, RevertFile(state, func(m string) { t.Log(m) }))
			} else {
				testkit.Must(t, a.Revert())
			}
			for tid, want := range map[int]uint64{def: base, custom: own} {
				if got := sliceOf(t, tid); got != want {
					t.Errorf("reverted: thread %d slice %v, want %v", tid, time.Duration(got), time.Duration(want))
				}
				if got := readKernel(t, tid); got != before[tid] {
					t.Errorf("reverted: thread %d %v, want %v", tid, got, before[tid])
				}
			}
		})
	}
}
