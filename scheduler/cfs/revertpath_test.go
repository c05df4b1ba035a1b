package cfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/mountinfo"
)

func TestCheckCpusetPaths(t *testing.T) {
	v2 := t.TempDir() // a cgroup2 mount point whose root offers cpuset
	if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu cpuset io\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v2bare := t.TempDir() // one that does not
	mounts := []mountinfo.Mount{
		{MountPoint: "/", FSType: "ext4"},
		{MountPoint: "/sys/fs/cgroup", FSType: "tmpfs"},
		{MountPoint: "/sys/fs/cgroup/cpuset", FSType: "cgroup", SuperOptions: []string{"rw", "cpuset"}},
		{MountPoint: "/sys/fs/cgroup/cpu,cpuacct", FSType: "cgroup", SuperOptions: []string{"rw", "cpu", "cpuacct"}},
		{MountPoint: "/sys/fs/cgroup/cpuset/hidden", FSType: "tmpfs"},
		{MountPoint: v2, FSType: "cgroup2"},
		{MountPoint: v2bare, FSType: "cgroup2"},
	}
	for _, tc := range []struct {
		path string
		want string // "" for accepted, else a part of the error
	}{
		{"/sys/fs/cgroup/cpuset/kubepods", ""},
		{"/sys/fs/cgroup/cpuset", ""},
		{v2 + "/kubepods.slice", ""},
		{"/sys/fs/cgroup/cpu,cpuacct/kubepods", "on cgroup mounted at /sys/fs/cgroup/cpu,cpuacct"},
		{"/sys/fs/cgroup/cpusetx/kubepods", "on tmpfs mounted at /sys/fs/cgroup"},
		{"/sys/fs/cgroup/cpuset/hidden/x", "on tmpfs mounted at /sys/fs/cgroup/cpuset/hidden"},
		{"/etc", "on ext4 mounted at /"},
		{"/sys/fs/cgroup/cpuset/../../../etc", "not an absolute, clean path"},
		{"kubepods", "not an absolute, clean path"},
		{v2bare + "/x", "on cgroup2 mounted at " + v2bare},
	} {
		err := checkCpusetPaths([]Cpuset{{Path: "/sys/fs/cgroup/cpuset/ok"}, {Path: tc.path}}, mounts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.path, err)
		case tc.want != "" && (!errors.Is(err, ErrNotCpusetPath) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want ErrNotCpusetPath containing %q", tc.path, err, tc.want)
		}
	}
}

// TestRevertFileRefusesForeignPath: a state file naming a cpuset.cpus outside
// every cpuset hierarchy is refused in one line before anything is written:
// not that file, not the threads, not the state file.
func TestRevertFileRefusesForeignPath(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "cpuset.cpus"), []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "apply-1.json")
	st := &State{Version: StateVersion, Backend: Name, Profile: "p", Pid: 1 << 22, PidStart: 1, // above any pid_max: gone
		Threads: []Record{{Tid: os.Getpid(), Tgid: os.Getpid(), Start: 1, Comm: "x", Original: Settings{Nice: 19}, Changed: Fields{Nice: true}}},
		Cpusets: []Cpuset{{Path: victim, Original: "0-1", Set: "1"}}}
	if err := writeStateFile(state, st); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(state)
	err := RevertFile(state, func(msg string) { t.Errorf("note %q: RevertFile went on", msg) })
	if !errors.Is(err, ErrNotCpusetPath) || !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), "nothing was reverted") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
	if b, _ := os.ReadFile(filepath.Join(victim, "cpuset.cpus")); string(b) != "precious\n" {
		t.Errorf("cpuset.cpus outside cgroupfs now holds %q", b)
	}
	if after, _ := os.ReadFile(state); string(after) != string(before) {
		t.Errorf("state file changed")
	}
}
