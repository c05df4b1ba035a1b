package cfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/internal/testkit"
)

func TestRTRuntime(t *testing.T) {
	hier := t.TempDir()
	write := func(cgroup, v string) {
		d := filepath.Join(hier, cgroup)
		testkit.Must(t, os.MkdirAll(d, 0o755))
		testkit.Must(t, os.WriteFile(filepath.Join(d, "cpu.rt_runtime_us"), []byte(v+"\n"), 0o644))
	}
	write("/", "950000")
	write("/kubepods", "0")
	write("/kubepods/pod1", "0")
	write("/rt", "100000")
	write("/rt/pod", "50000")
	noRT := t.TempDir()
	cases := []struct {
		name      string
		hier      string
		cg        procfs.Cgroups
		available bool
		why       string
	}{
		{"v2 only", hier, procfs.Cgroups{V2: "/kubepods/pod1"}, true, "no cgroup v1 cpu hierarchy"},
		{"root", hier, procfs.Cgroups{V1: map[string]string{"cpu": "/"}}, true, "root cpu cgroup"},
		{"pod without runtime", hier, procfs.Cgroups{V1: map[string]string{"cpu": "/kubepods/pod1"}}, false, "cgroup /kubepods (cpu hierarchy) has cpu.rt_runtime_us 0"},
		{"pod with runtime", hier, procfs.Cgroups{V1: map[string]string{"cpu": "/rt/pod"}}, true, "cgroup /rt/pod and its ancestors"},
		{"no RT group scheduling", noRT, procfs.Cgroups{V1: map[string]string{"cpu": "/kubepods/pod1"}}, true, "no RT group scheduling"},
	}
	for _, c := range cases {
		got, err := rtRuntime(c.hier, c.cg)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !got.Checked || got.Available != c.available || !strings.Contains(got.Why, c.why) {
			t.Errorf("%s: %+v, want checked, available %t, why containing %q", c.name, got, c.available, c.why)
		}
	}
	if _, err := rtRuntime(hier, procfs.Cgroups{V1: map[string]string{"cpu": "/gone"}}); err == nil {
		t.Error("a cgroup that does not exist: no error")
	}
}

// TestRTRuntimeOf reads this process's own cgroup on the real host.
func TestRTRuntimeOf(t *testing.T) {
	got, err := RTRuntimeOf("", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Checked || got.Why == "" {
		t.Errorf("RTRuntimeOf(self) = %+v: not decided", got)
	}
	t.Logf("this process: %+v", got)
}

// TestRTRuntimeAgreesWithKernel puts a process in a new v1 cpu cgroup (no RT
// runtime, the default): RTRuntimeOf says RT is unavailable, and the kernel
// indeed refuses SCHED_RR there with EPERM.
func TestRTRuntimeAgreesWithKernel(t *testing.T) {
	need.Root(t, "to make a cpu cgroup")
	need.CgroupV1(t)
	hier := filepath.Join(DefaultCgroupRoot, "cpu")
	if _, err := os.Stat(filepath.Join(hier, "cpu.rt_runtime_us")); err != nil {
		need.Unmet(t, "RT group scheduling (cpu.rt_runtime_us)", err.Error())
	}
	dir := filepath.Join(hier, "temper-test-rt-"+itoa(os.Getpid()))
	testkit.Must(t, os.Mkdir(dir, 0o755))
	t.Cleanup(func() { testkit.RemoveCgroupTree(t, dir) })
	p := start(t, "sleep", "60")
	pid := p.cmd.Process.Pid
	testkit.Must(t, os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(itoa(pid)), 0))
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })

	got, err := RTRuntimeOf("", pid)
	testkit.Must(t, err)
	if !got.Checked || got.Available || !strings.Contains(got.Why, filepath.Base(dir)) {
		t.Errorf("RTRuntimeOf in a cgroup without RT runtime: %+v, want unavailable naming the cgroup", got)
	}
	err = setAttr(pid, Settings{Policy: unix.SCHED_RR, RTPriority: 1})
	if !errors.Is(err, unix.EPERM) {
		t.Errorf("SCHED_RR in a cgroup without RT runtime: %v, want EPERM", err)
	}
}
