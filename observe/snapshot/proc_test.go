package snapshot

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/procfs"
)

// TestThreadCgroup: a thread's cgroups are the v2 path and the path in the
// v1 hierarchy holding the cpu controller.
func TestThreadCgroup(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want ThreadCgroup
	}{
		{"hybrid, cpu alone", "9:name=systemd:/\n2:cpuacct:/a\n1:cpu:/kubepods/pod1\n0::/unified/x\n", ThreadCgroup{V2: "/unified/x", V1CPU: "/kubepods/pod1"}},
		{"v1 cpu,cpuacct", "4:memory:/m\n3:cpu,cpuacct:/k/p\n", ThreadCgroup{V1CPU: "/k/p"}},
		{"cpuset is not cpu", "3:cpuset:/s\n0::/\n", ThreadCgroup{V2: "/"}},
		{"pure v2", "0::/kubepods.slice/pod.slice\n", ThreadCgroup{V2: "/kubepods.slice/pod.slice"}},
		{"path with colon", "0::/a:b\n", ThreadCgroup{V2: "/a:b"}},
		{"empty", "", ThreadCgroup{}},
	}
	for _, tt := range tests {
		cg, err := procfs.ParseCgroup([]byte(tt.in))
		if got := threadCgroup(cg); err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

// fakeProc lays out a directory like /proc: files by path relative to it.
func fakeProc(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// statTail is the part of a stat line after "(comm) ": state R, utime 7,
// stime 3, nice -5 (field 19), starttime 4242 (22), processor 1 (39),
// rt_priority 0 (40), policy 7 = SCHED_EXT (41), and the fields after 41.
const statTail = "R 1 1 1 0 -1 4194304 99 0 0 0 7 3 0 0 20 -5 1 0 4242 3133440 412 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 1 0 7 0 0 0 0 0 0 0 0 0 0"

const threadStatusFile = "Name:\tx\nTgid:\t100\nCpus_allowed_list:\t0-1\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n"

// TestReadProcessFake reads a process from a fake /proc: every thread's
// state from its stat, status and cgroup, sorted by tid; a thread being
// reaped is left out; what is not a process, or is gone, is said so.
func TestReadProcessFake(t *testing.T) {
	root := fakeProc(t, map[string]string{
		"100/status":          threadStatusFile,
		"100/cmdline":         "postgres: walwriter \x00\x00",
		"100/task/100/stat":   "100 (main) " + statTail + "\n",
		"100/task/100/status": threadStatusFile,
		"100/task/100/cgroup": "1:cpu,cpuacct:/k/p\n0::/u\n",
		"100/task/9/stat":     "9 (a) b (c)) " + statTail + "\n",
		"100/task/9/status":   strings.Replace(threadStatusFile, "0-1", "1", 1),
		"100/task/9/cgroup":   "0::/u\n",
		"100/task/11/stat":    "", // being reaped
		"100/task/11/status":  "",
		"100/task/11/cgroup":  "",
		"101/status":          threadStatusFile, // a thread of 100
		"103/status":          strings.Replace(threadStatusFile, "100", "103", 1),
		"103/task/103/stat":   "103 (short) R 1 2 3\n",
		"103/task/103/status": strings.Replace(threadStatusFile, "100", "103", 1),
		"103/task/103/cgroup": "0::/\n",
	})
	p := procReader{proc: root, ticks: 100}
	recs, err := p.readProcess(100)
	if err != nil {
		t.Fatal(err)
	}
	state := ThreadState{Comm: "a) b (c)", State: "R", CPU: 1, CPUsAllowedList: "1", CPUsAllowed: []int{1},
		Policy: "SCHED_EXT", PolicyNum: 7, Nice: -5, VoluntaryCtxtSwitches: 12, NonvoluntaryCtxtSwitches: 3,
		UtimeNs: 70_000_000, StimeNs: 30_000_000, Cgroup: ThreadCgroup{V2: "/u"}, Cmdline: "postgres: walwriter"}
	main := state
	main.Comm, main.CPUsAllowedList, main.CPUsAllowed, main.Cgroup = "main", "0-1", []int{0, 1}, ThreadCgroup{V2: "/u", V1CPU: "/k/p"}
	want := []threadRecord{{Tid: 9, Tgid: 100, StartTicks: 4242, State: state}, {Tid: 100, Tgid: 100, StartTicks: 4242, State: main}}
	if !reflect.DeepEqual(recs, want) {
		t.Errorf("readProcess(100) =\n%+v\nwant\n%+v", recs, want)
	}

	for _, tt := range []struct {
		tgid int
		want string
		gone bool
	}{
		{101, "101 is a thread of process 100, not a process", false},
		{103, "103/task/103/stat: stat line has 6 fields", false},
		{104, "process 104: exited", true},
	} {
		_, err := p.readProcess(tt.tgid)
		if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, errGone) != tt.gone {
			t.Errorf("readProcess(%d) = %v; want an error mentioning %q, gone %v", tt.tgid, err, tt.want, tt.gone)
		}
	}
}

func TestClockTicks(t *testing.T) {
	auxv := func(pairs ...uint64) []byte {
		var b []byte
		for _, v := range pairs {
			b = binary.NativeEndian.AppendUint64(b, v)
		}
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want int64
	}{
		{"found", auxv(6, 4096, 17, 250, 0, 0), 250},
		{"absent", auxv(6, 4096, 0, 0), 100},
		{"after terminator", auxv(0, 0, 17, 250), 100},
		{"truncated", auxv(6, 4096, 17)[:20], 100},
		{"empty", nil, 100},
	}
	for _, tt := range tests {
		if got := clockTicks(tt.in); got != tt.want {
			t.Errorf("%s: clockTicks = %d, want %d", tt.name, got, tt.want)
		}
	}
	real, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		t.Fatal(err)
	}
	if got := clockTicks(real); got != 100 {
		t.Logf("this kernel's USER_HZ is %d", got)
	}
}

func TestTicksToNs(t *testing.T) {
	for _, tt := range []struct{ ticks, hz, want int64 }{
		{0, 100, 0}, {1, 100, 10_000_000}, {150, 100, 1_500_000_000}, {7, 1000, 7_000_000}, {1, 0, 0},
		{1 << 36, 100, (1 << 36) * 10_000_000}, {7, 3, 2_333_333_333},
	} {
		if got := ticksToNs(tt.ticks, tt.hz); got != tt.want {
			t.Errorf("ticksToNs(%d, %d) = %d, want %d", tt.ticks, tt.hz, got, tt.want)
		}
	}
}
