package rig

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/internal/testkit"
)

// holderEnv makes the test binary a run that makes a rig, starts a child
// in its pod, adopts the pid given and waits to be killed: the crashed run
// of TestRemoveStale.
const holderEnv = "RIG_TEST_HOLDER"

func TestMain(m *testing.M) {
	if v := os.Getenv(holderEnv); v != "" {
		os.Exit(holder(v))
	}
	os.Exit(m.Run())
}

func holder(v string) int {
	adopt, _ := strconv.Atoi(v)
	r, err := New(Options{Request: 500})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	child := exec.Command("sleep", "600")
	if err := r.Pod().Start(child); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := r.Adopt(adopt); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := r.Tier(true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("holding")
	select {}
}

func needRig(t *testing.T) cgroup.Hierarchy {
	t.Helper()
	need.Root(t, "to make cgroups")
	h, err := cgroup.Find()
	if err != nil {
		need.Unmet(t, "a cgroup hierarchy with the cpu controller", err.Error())
	}
	return h
}

// cpuCgroup is pid's cgroup in the cpu hierarchy, as a directory.
func cpuCgroup(t *testing.T, h cgroup.Hierarchy, pid int) string {
	t.Helper()
	cg, err := procfs.New("/proc").Cgroup(pid)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(h.Root, cg.CPU())
}

func read(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestRig(t *testing.T) {
	h := needRig(t)
	for _, tc := range []struct {
		name  string
		opts  Options
		pod   string // below kubepods
		quota string
	}{
		{"guaranteed default", Options{}, "pod-workload", ""},
		{"guaranteed limited", Options{Request: 1500, Limit: 1500}, "pod-workload", "150000"},
		{"burstable", Options{Request: 500, Limit: 1000}, "burstable/pod-workload", "100000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Remove()
			if want := filepath.Join(r.root.CPU, "kubepods", tc.pod); r.Pod().CPU != want {
				t.Errorf("pod %s, want %s", r.Pod().CPU, want)
			}
			wf := h.WeightFile()
			if got, want := read(t, r.Pod().CPU, wf), h.Weight(tc.opts.request()); got != want {
				t.Errorf("pod %s = %s, want %s", wf, got, want)
			}
			if got, want := read(t, r.BestEffort().CPU, wf), h.Weight(0); got != want {
				t.Errorf("besteffort %s = %s, want %s", wf, got, want)
			}
			if tc.quota != "" {
				f, _ := h.Quota(1)
				if got := read(t, r.Pod().CPU, f); !strings.HasPrefix(got, tc.quota) {
					t.Errorf("pod %s = %s, want %s", f, got, tc.quota)
				}
			}
			// A command started in the pod is in it from its first
			// instruction, and so is what it forks.
			cmd := exec.Command("sh", "-c", "sleep 30 & wait")
			if err := r.Pod().Start(cmd); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			if got := cpuCgroup(t, h, cmd.Process.Pid); got != r.Pod().CPU {
				t.Errorf("command in %s, want %s", got, r.Pod().CPU)
			}
			if got := cpuCgroup(t, h, os.Getpid()); strings.HasPrefix(got, r.root.CPU) {
				t.Errorf("the test itself moved into %s", got)
			}
			// Its usage is accounted to the pod, with the pod's limit.
			st, err := r.PodCPU()
			if err != nil {
				t.Fatal(err)
			}
			if want := float64(tc.opts.Limit) / 1000; st.Limit != want {
				t.Errorf("pod limit %g CPUs, want %g", st.Limit, want)
			}
			// The tier: cpu.idle on besteffort, restored exactly.
			if err := r.Tier(true); err != nil {
				t.Fatal(err)
			}
			if got := read(t, r.BestEffort().CPU, "cpu.idle"); got != "1" {
				t.Errorf("cpu.idle with the tier = %s", got)
			}
			if err := r.Tier(false); err != nil {
				t.Fatal(err)
			}
			if got := read(t, r.BestEffort().CPU, "cpu.idle"); got != "0" {
				t.Errorf("cpu.idle after = %s", got)
			}
			if got, want := read(t, r.BestEffort().CPU, wf), h.Weight(0); got != want {
				t.Errorf("besteffort %s after the tier = %s, want %s", wf, got, want)
			}
			r.Tier(true) // Remove takes it back
			if err := r.Remove(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(r.root.CPU); !os.IsNotExist(err) {
				t.Errorf("rig %s after Remove: %v", r.root.CPU, err)
			}
			for _, twin := range []string{r.root.Cpuset, r.root.Acct} {
				if twin == "" {
					continue
				}
				if _, err := os.Stat(twin); !os.IsNotExist(err) {
					t.Errorf("rig twin %s after Remove: %v", twin, err)
				}
			}
			// What the run started is gone with the rig.
			cmd.Wait()
			if _, err := os.Stat(r.state); !os.IsNotExist(err) {
				t.Errorf("state file %s after Remove: %v", r.state, err)
			}
		})
	}
}

// TestClientCPUs: --client-cpus gives the client CPUs of its own and the
// node (kubepods) the rest, in the cpuset hierarchy.
func TestClientCPUs(t *testing.T) {
	h := needRig(t)
	if h.Version == 1 && h.Cpuset == "" {
		need.Unmet(t, "a cpuset hierarchy", "mount the v1 cpuset controller")
	}
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil || strings.TrimSpace(string(online)) == "0" {
		need.Unmet(t, "2 CPUs", "run on a machine with more than one CPU")
	}
	r, err := New(Options{ClientCPUs: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Remove()
	dir := func(d cgroup.Dir) string {
		if h.Version == 1 {
			return d.Cpuset
		}
		return d.CPU
	}
	if got := read(t, dir(r.Client()), "cpuset.cpus"); got != "1" {
		t.Errorf("client cpuset.cpus = %q, want 1", got)
	}
	if got := read(t, dir(r.Pod()), "cpuset.cpus"); got == "" || strings.Contains(got, "1") {
		t.Errorf("pod cpuset.cpus = %q, want the node's CPUs without 1", got)
	}
	if got := r.Describe()[0]; !strings.Contains(got, "(1)") {
		t.Errorf("Describe says %q, want a node of 1 CPU", got)
	}
}

func TestAdoptMovesBack(t *testing.T) {
	h := needRig(t)
	outside := exec.Command("sleep", "60")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { outside.Process.Kill(); outside.Wait() }()
	was := cpuCgroup(t, h, outside.Process.Pid)
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Adopt(outside.Process.Pid); err != nil {
		r.Remove()
		t.Fatal(err)
	}
	if got := cpuCgroup(t, h, outside.Process.Pid); got != r.Pod().CPU {
		t.Errorf("adopted into %s, want %s", got, r.Pod().CPU)
	}
	if err := r.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := cpuCgroup(t, h, outside.Process.Pid); got != was {
		t.Errorf("after Remove in %s, want %s (where it was)", got, was)
	}
	if err := syscall.Kill(outside.Process.Pid, 0); err != nil {
		t.Errorf("the adopted process did not survive the rig: %v", err)
	}
}

// TestRemoveStale kills a run holding a rig (SIGKILL: nothing of its own
// cleans up) and checks that RemoveStale puts back the process it adopted,
// kills what it started and removes its cgroups and state.
func TestRemoveStale(t *testing.T) {
	h := needRig(t)
	outside := exec.Command("sleep", "60")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { outside.Process.Kill(); outside.Wait() }()
	was := cpuCgroup(t, h, outside.Process.Pid)

	hold := testkit.Hold(t, holderEnv, strconv.Itoa(outside.Process.Pid))
	root := filepath.Join(h.Root, fmt.Sprintf("%s%d.", prefix, hold.Cmd.Process.Pid))
	matches, _ := filepath.Glob(root + "*")
	if len(matches) != 1 {
		t.Fatalf("the holder's rig: %v", matches)
	}
	rigDir := matches[0]
	procs, _ := os.ReadFile(filepath.Join(rigDir, "kubepods", "pod-workload", "cgroup.procs"))
	pids := strings.Fields(string(procs))
	if len(pids) != 2 {
		t.Fatalf("pod holds %q, want the holder's child and the adopted process", procs)
	}
	// A live run's rig is left alone.
	if removed, err := RemoveStale(); err != nil || slices.Contains(removed, rigDir) {
		t.Fatalf("RemoveStale with the owner alive: %v, %v", removed, err)
	}
	hold.Cmd.Process.Kill()
	hold.Cmd.Wait()
	removed, err := RemoveStale()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, rigDir) {
		t.Errorf("RemoveStale removed %v, not %s", removed, rigDir)
	}
	if _, err := os.Stat(rigDir); !os.IsNotExist(err) {
		t.Errorf("%s after RemoveStale: %v", rigDir, err)
	}
	if h.Acct != "" {
		twin := filepath.Join(h.Acct, filepath.Base(rigDir))
		if _, err := os.Stat(twin); !os.IsNotExist(err) {
			t.Errorf("cpuacct twin %s after RemoveStale: %v", twin, err)
		}
	}
	if got := cpuCgroup(t, h, outside.Process.Pid); got != was {
		t.Errorf("adopted process in %s after RemoveStale, want %s", got, was)
	}
	for _, p := range pids {
		pid, _ := strconv.Atoi(p)
		if pid == outside.Process.Pid {
			continue
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			st, err := procfs.New("/proc").Stat(pid)
			if err != nil || st.Exited() {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the dead run's child %d still runs", pid)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if ms, _ := filepath.Glob(filepath.Join(StateDir, filepath.Base(rigDir)+".json")); len(ms) != 0 {
		t.Errorf("state file left: %v", ms)
	}
}

func TestOptionsCheck(t *testing.T) {
	online := []int{0, 1}
	for _, tc := range []struct {
		opts Options
		err  string
	}{
		{Options{}, ""},
		{Options{Request: 1500, Limit: 1500}, ""},
		{Options{Request: 2000, Limit: 1000}, "below the request"},
		{Options{Request: -1}, "want ≥ 0"},
		{Options{ClientCPUs: []int{1}}, ""},
		{Options{ClientCPUs: []int{0, 1}}, "leave the node no CPU"},
		{Options{ClientCPUs: []int{7}}, "not online"},
	} {
		err := tc.opts.Check(online)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v: %v, want %q", tc.opts, err, tc.err)
		}
	}
}
