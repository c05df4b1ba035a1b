package cfs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/scheduler"
)

func TestNiceForWeight(t *testing.T) {
	cases := []struct{ weight, nice int }{
		{0, 0},       // no weight: a default thread
		{100, 0},     // the default weight is nice 0's 1024
		{200, -3},    // 2048: nearest 1991 (nice -3)
		{50, 3},      // 512: nearest 526
		{1000, -10},  // 10240: nearest 9548
		{10000, -20}, // beyond the table
		{1, 19},      // below it
		{-7, 0},      // invalid reads as unset
		{125, -1},    // 1280: 1277
		{80, 1},      // 819: 820
		{3000, -15},  // 30720: 29154
		{8700, -20},  // 89088: 88761
		{4, 14},      // 40.96: 45 is nearer than 36 on the log scale
	}
	for _, c := range cases {
		if got := NiceForWeight(c.weight); got != c.nice {
			t.Errorf("NiceForWeight(%d) = %d, want %d", c.weight, got, c.nice)
		}
	}
}

func TestCPUString(t *testing.T) {
	cases := []struct {
		cpus []int
		want string
	}{
		{nil, "(none)"},
		{[]int{0}, "0"},
		{[]int{0, 1, 2, 3}, "0-3"},
		{[]int{3, 1, 0, 6, 7}, "0-1,3,6-7"},
	}
	for _, c := range cases {
		if got := cpuString(c.cpus); got != c.want {
			t.Errorf("cpuString(%v) = %q, want %q", c.cpus, got, c.want)
		}
	}
}

func TestCheckRTBounded(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		content string // "" for a missing file
		err     string
	}{
		{"950000\n", ""},
		{"0\n", ""},
		{"-1\n", "is -1, so SCHED_RR threads would run unbounded"},
		{"lots\n", "lots"},
		{"", "needs the kernel's RT throttling"},
	}
	for i, c := range cases {
		path := filepath.Join(dir, "rt"+itoa(i))
		if c.content != "" {
			testkit.Must(t, os.WriteFile(path, []byte(c.content), 0o644))
		}
		err := checkRTBounded(path)
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: error %v, want %q", c.content, err, c.err)
		}
	}
}

// TestRevertStale: every state file of an apply that no longer runs is
// reverted (and removed), one whose apply still runs is left and noted,
// and a directory without state files says so.
func TestRevertStale(t *testing.T) {
	dir := t.TempDir()
	if _, err := RevertStale(dir, nil); !errors.Is(err, ErrNoState) || !strings.Contains(err.Error(), dir) {
		t.Errorf("empty dir: %v, want ErrNoState naming %s", err, dir)
	}
	self, err := scheduler.TaskStartTime(os.Getpid())
	testkit.Must(t, err)
	write := func(pid int, start uint64) string {
		path := StatePath(dir, pid)
		testkit.Must(t, writeStateFile(path, &State{Version: StateVersion, Backend: Name, Profile: "p", Pid: os.Getpid(), PidStart: start}))
		return path
	}
	stale1, stale2 := write(1, self+1), write(2, self+2)
	live := write(3, self)
	testkit.Must(t, os.WriteFile(filepath.Join(dir, "other.json"), []byte("{"), 0o644))
	notes := &noteLog{}
	done, err := RevertStale(dir, notes.add)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done, []string{stale1, stale2}) {
		t.Errorf("reverted %v, want %v", done, []string{stale1, stale2})
	}
	for _, p := range []string{stale1, stale2} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after its revert: %v", p, err)
		}
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the running apply's state file: %v", err)
	}
	if !strings.Contains(notes.String(), live) || !strings.Contains(notes.String(), "still running") {
		t.Errorf("notes %q do not name %s as still running", notes, live)
	}

	// A file that cannot be read is an error, the others still reverted.
	testkit.Must(t, os.WriteFile(StatePath(dir, 4), []byte("{"), 0o644))
	stale5 := write(5, self+1)
	done, err = RevertStale(dir, nil)
	if err == nil || !strings.Contains(err.Error(), "apply-4.json") || !slices.Equal(done, []string{stale5}) {
		t.Errorf("got %v, %v; want %s reverted and an error naming apply-4.json", done, err, stale5)
	}
}
