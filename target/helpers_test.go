package target

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"temper.codes/temper-train/internal/kubetest"
	"temper.codes/temper-train/internal/mountinfo"
	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
)

// cgroupTestRoots are test-owned directories inside the machine's real
// cgroup hierarchies. Tests create real cgroups below them and move real
// processes in; they never touch cgroups they did not create.
type cgroupTestRoots struct {
	v2 string // in the cgroup2 mount, "" if there is none
	v1 string // in the cgroup v1 cpu controller's mount, "" if there is none
}

// newCgroupTestRoots creates a fresh pair of roots and removes them (and
// everything the test created below them) when the test ends. It needs root.
func newCgroupTestRoots(t *testing.T) cgroupTestRoots {
	t.Helper()
	need.Root(t, "to create cgroups and move processes into them")
	all, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	name := "temper-target-test-" + kubetest.RandomHex(6)
	var r cgroupTestRoots
	for _, m := range cgroupMounts(all) {
		switch {
		case m.Version == 2 && r.v2 == "":
			r.v2 = filepath.Join(m.Dir, name)
		case m.Version == 1 && m.has("cpu") && r.v1 == "":
			r.v1 = filepath.Join(m.Dir, name)
		}
	}
	for _, dir := range []string{r.v2, r.v1} {
		if dir == "" {
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatalf("create test cgroup: %v", err)
		}
		t.Cleanup(func() { testkit.RemoveCgroupTree(t, dir) })
	}
	return r
}

// root returns the v1 or v2 root; the test needs that hierarchy.
func (r cgroupTestRoots) root(t *testing.T, version int) string {
	t.Helper()
	dir := r.v2
	if version == 1 {
		need.CgroupV1(t)
		dir = r.v1
	} else {
		need.CgroupV2(t)
	}
	if dir == "" {
		t.Fatalf("no test root in the cgroup v%d hierarchy this machine mounts", version)
	}
	return dir
}

// mkCgroup creates the cgroup dir and its missing parents; they are removed
// with the test root.
func mkCgroup(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	return dir
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// startSleep starts `sleep 60`, moves it into the cgroup dir if dir is not
// empty, and kills it when the test ends.
func startSleep(t *testing.T, dir string) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
	if dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatalf("move pid %d into cgroup %s: %v", pid, dir, err)
		}
	}
	return pid
}

// checkErr checks that err matches want with errors.Is and that its message
// contains every string of contains.
func checkErr(t *testing.T, err, want error, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one matching %v", want)
	}
	t.Logf("error: %v", err)
	if !errors.Is(err, want) {
		t.Errorf("error %q does not match %v", err, want)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

// waitTgids refreshes tgt until it reports want (sorted) or 5 s pass: a
// process tree needs a moment to fork.
func waitTgids(t *testing.T, tgt *Target, want []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := tgt.Refresh()
		if err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Refresh = %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// childPids lists the children of pid, from /proc/PID/task/*/children.
func childPids(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range tasks {
		for _, s := range strings.Fields(readFile(f)) {
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
