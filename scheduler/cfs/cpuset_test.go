package cfs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler/schedulertest"
)

// cpusetCgroup makes a cpuset cgroup below parent with its parent's CPUs
// and memory nodes (v1 needs both before a task may join) and removes it
// when the test ends.
func cpusetCgroup(t *testing.T, parent, name string, v2 bool) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if v2 {
		testkit.Must(t, os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpuset"), 0))
	}
	testkit.Must(t, os.Mkdir(dir, 0o755))
	t.Cleanup(func() { os.Remove(dir) })
	if !v2 {
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(parent, f))
			testkit.Must(t, err)
			testkit.Must(t, os.WriteFile(filepath.Join(dir, f), b, 0))
		}
	}
	return dir
}

// TestCpusetExclusive: while a profile with an exclusive group is applied,
// a spinner in another cgroup (a BestEffort pod, as the kubelet would see
// it) is kept off the group's CPUs through its cgroup's cpuset; revert
// restores the cpuset and the spinner's CPUs exactly; a state file left by
// an apply that is gone restores them too (apply --revert after SIGKILL).
func TestCpusetExclusive(t *testing.T) {
	schedulertest.NeedBackend(t, New(Options{}))
	needCores(t, 2)
	dir, v2, ok := cpusets(DefaultCgroupRoot)
	if !ok {
		need.Unmet(t, "a cpuset cgroup hierarchy", "run the tests on a host with v1 cpuset or v2 with the cpuset controller")
	}
	scope := cpusetCgroup(t, dir, "temper-cfs-test-"+strconv.Itoa(os.Getpid()), v2)
	pod := cpusetCgroup(t, scope, "besteffort", v2)
	orig, err := readCpus(pod, "cpuset.cpus")
	testkit.Must(t, err)
	origScope, err := readCpus(scope, "cpuset.cpus")
	testkit.Must(t, err)

	spin := exec.Command("sh", "-c", "while :; do :; done")
	testkit.Must(t, spin.Start())
	t.Cleanup(func() { spin.Process.Kill(); spin.Wait() })
	testkit.Must(t, os.WriteFile(filepath.Join(pod, "cgroup.procs"), []byte(strconv.Itoa(spin.Process.Pid)), 0))
	allowed := func() string {
		st, err := procfs.FS{}.Status(spin.Process.Pid)
		testkit.Must(t, err)
		return st.CPUsAllowedList
	}
	before := allowed()

	w := startWorkload(t)
	prof, err := profiles.Parse("contract.toml", []byte(schedulertest.Profile))
	testkit.Must(t, err)
	p := plan(t, prof, w.cmd.Process.Pid)
	owned, shared := p.Cores.Exclusive[0], cpus(p.Cores.Shared)
	state := filepath.Join(t.TempDir(), "state.json")
	notes := &noteLog{}
	b := New(Options{StateFile: state, Note: notes.add, CpusetScope: scope})

	a, err := b.Apply(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Revert() })
	got, _ := readCpus(pod, "cpuset.cpus")
	gotScope, _ := readCpus(scope, "cpuset.cpus")
	if !sameCpus(got, shared) || !sameCpus(gotScope, shared) || !sameCpus(allowed(), shared) {
		t.Errorf("applied (compute owns %s): besteffort cpuset %q, scope %q, spinner allowed %q; want all %q", cpus(owned), got, gotScope, allowed(), shared)
	}
	st, err := ReadState(state)
	testkit.Must(t, err)
	if len(st.Cpusets) != 2 || st.Cpusets[0].Path != pod || st.Cpusets[1].Path != scope {
		t.Errorf("state file cpusets %+v: want the besteffort cgroup, then its parent", st.Cpusets)
	}
	stats, err := a.Stats()
	testkit.Must(t, err)
	if !strings.Contains(strings.Join(stats[0].Notes, " "), "exclusivity through cpusets") {
		t.Errorf("the exclusive group's notes do not say how exclusivity is kept: %q", stats[0].Notes)
	}
	t.Logf("applied: besteffort cpuset %s, spinner allowed %s; notes:\n%s", got, allowed(), notes)

	testkit.Must(t, a.Revert())
	got, _ = readCpus(pod, "cpuset.cpus")
	gotScope, _ = readCpus(scope, "cpuset.cpus")
	if got != orig || gotScope != origScope || allowed() != before {
		t.Errorf("reverted: besteffort cpuset %q (was %q), scope %q (was %q), spinner allowed %q (was %q)", got, orig, gotScope, origScope, allowed(), before)
	}

	// A state file whose apply is gone (what SIGKILL leaves): RevertFile
	// restores the cpusets. The live apply's file is copied and given a
	// dead owner.
	a2, err := New(Options{StateFile: state, Note: notes.add, CpusetScope: scope}).Apply(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a2.Revert() })
	st, err = ReadState(state)
	testkit.Must(t, err)
	dead := exec.Command("true")
	testkit.Must(t, dead.Run())
	st.Pid = dead.Process.Pid
	orphan := filepath.Join(t.TempDir(), "orphan.json")
	b2, err := json.Marshal(st)
	testkit.Must(t, err)
	testkit.Must(t, os.WriteFile(orphan, b2, 0o600))
	if got, _ := readCpus(pod, "cpuset.cpus"); !sameCpus(got, shared) {
		t.Fatalf("second apply: besteffort cpuset %q, want %q", got, shared)
	}
	if err := RevertFile(orphan, notes.add); err != nil {
		t.Fatalf("revert from the state file: %v", err)
	}
	got, _ = readCpus(pod, "cpuset.cpus")
	gotScope, _ = readCpus(scope, "cpuset.cpus")
	if got != orig || gotScope != origScope || allowed() != before {
		t.Errorf("reverted from the state file: besteffort cpuset %q (was %q), scope %q (was %q), spinner allowed %q (was %q)", got, orig, gotScope, origScope, allowed(), before)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("state file after a clean revert: %v", err)
	}
}
