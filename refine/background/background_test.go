package background

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/procfs"
)

// helperEnv makes the test binary a run that starts spinners, prints them
// and waits to be killed: the crashed run of the Reap tests.
const helperEnv = "BACKGROUND_TEST_HELPER"

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		os.Exit(helper(v))
	}
	os.Exit(m.Run())
}

type helperOut struct {
	Pids   []int
	Cgroup string
}

func helper(v string) int {
	n, pdeathsig, _ := strings.Cut(v, ",")
	count, _ := strconv.Atoi(n)
	h, err := cgroup.Find()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := start(h.Top(), count, pdeathsig == "pdeathsig")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(helperOut{s.Pids(), s.Cgroup()})
	select {}
}

// needCgroups fails under CI and skips loudly elsewhere when spinner cgroups
// cannot be made: that takes root and a cpu controller.
func needCgroups(t *testing.T) cgroup.Hierarchy {
	t.Helper()
	h, err := cgroup.Find()
	if err == nil && os.Geteuid() != 0 {
		err = fmt.Errorf("making cgroups needs root")
	}
	if err != nil {
		need.Unmet(t, "spinner cgroups", err.Error()+" (run the tests as root on a host with the cpu controller)")
	}
	return h
}

var fsys = procfs.New("/proc")

func running(pid int) bool {
	st, err := fsys.Stat(pid)
	return err == nil && !st.Exited()
}

// eventually polls cond for up to d.
func eventually(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func cpuTicks(t *testing.T, pid int) uint64 {
	st, err := fsys.Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.Utime + st.Stime
}

// checkSpinners checks that the spinners run, are in their cgroup at the
// lowest weight (checkPlaced), and get CPU time.
func checkSpinners(t *testing.T, h cgroup.Hierarchy, pids []int, cgroup string) {
	t.Helper()
	checkPlaced(t, h, pids, cgroup)
	// At the lowest weight a spinner gets CPU time only when the machine
	// has some to spare. No rate is asserted, only that each one spins.
	t0 := map[int]uint64{}
	for _, pid := range pids {
		t0[pid] = cpuTicks(t, pid)
	}
	for _, pid := range pids {
		if !eventually(60*time.Second, func() bool { return cpuTicks(t, pid) > t0[pid] }) {
			t.Errorf("spinner %d got no CPU time in 60s", pid)
		}
	}
}

// checkPlaced checks that the spinners are spinners, in their cgroup at
// the lowest weight: what is read at once, with no wait.
func checkPlaced(t *testing.T, h cgroup.Hierarchy, pids []int, cgroup string) {
	t.Helper()
	file, want := h.WeightFile(), h.Weight(0)
	b, err := os.ReadFile(filepath.Join(cgroup, file))
	if err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("%s/%s = %q, %v; want %s", cgroup, file, b, err, want)
	}
	procs, _ := os.ReadFile(filepath.Join(cgroup, "cgroup.procs"))
	for _, pid := range pids {
		if !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(pid)) {
			t.Errorf("spinner %d is not in %s (cgroup.procs %q)", pid, cgroup, procs)
		}
		cg, err := fsys.Cgroup(pid)
		if err != nil || filepath.Join(h.Root, cg.CPU()) != cgroup {
			t.Errorf("spinner %d: cgroup %q, %v; want %s", pid, cg.CPU(), err, cgroup)
		}
		// An empty command line is a process gone or exiting.
		cmd, _ := fsys.Cmdline(pid)
		if args := cmd.Args(); len(args) == 0 || args[0] != spinnerName {
			t.Errorf("spinner %d runs %q (empty: gone)", pid, args)
		}
	}
}

func TestStartStop(t *testing.T) {
	h := needCgroups(t)
	s, err := Start(2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	pids := s.Pids()
	t.Logf("spinners %v in %s (cgroup v%d)", pids, s.Cgroup(), h.Version)
	if len(pids) != 2 || !strings.HasPrefix(filepath.Base(s.Cgroup()), cgroupPrefix) {
		t.Fatalf("pids %v, cgroup %q", pids, s.Cgroup())
	}
	checkSpinners(t, h, pids, s.Cgroup())
	if h.Cpuset != "" {
		// A cpuset cgroup of their own, allowed what the root is, so that
		// a backend can narrow it; in the root cpuset it could not.
		procs, _ := os.ReadFile(filepath.Join(s.dir.Cpuset, "cgroup.procs"))
		for _, pid := range pids {
			if !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(pid)) {
				t.Errorf("spinner %d is not in cpuset %s (cgroup.procs %q)", pid, s.dir.Cpuset, procs)
			}
		}
		root, _ := os.ReadFile(filepath.Join(h.Cpuset, "cpuset.cpus"))
		own, _ := os.ReadFile(filepath.Join(s.dir.Cpuset, "cpuset.cpus"))
		if string(own) != string(root) {
			t.Errorf("cpuset %s allows CPUs %q, the root %q", s.dir.Cpuset, own, root)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if running(pid) {
			t.Errorf("spinner %d runs after Stop", pid)
		}
	}
	for _, dir := range []string{s.Cgroup(), s.dir.Cpuset} {
		if _, err := os.Stat(dir); dir != "" && !os.IsNotExist(err) {
			t.Errorf("cgroup %s after Stop: %v", dir, err)
		}
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestStartNone(t *testing.T) {
	s, err := Start(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pids()) != 0 || s.Cgroup() != "" {
		t.Errorf("Start(0): pids %v, cgroup %q", s.Pids(), s.Cgroup())
	}
	if err := s.Stop(); err != nil || s.Stop() != nil {
		t.Errorf("Stop: %v", err)
	}
	if _, err := Start(-1); err == nil {
		t.Error("Start(-1) succeeded")
	}
}

// crashedRun starts a helper process with n spinners and SIGKILLs it.
func crashedRun(t *testing.T, n int, pdeathsig bool) helperOut {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	mode := "none"
	if pdeathsig {
		mode = "pdeathsig"
	}
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%s", helperEnv, n, mode))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got helperOut
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &got)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil || len(got.Pids) != n {
		t.Fatalf("helper: %v, %+v", err, got)
	}
	return got
}

func TestReapAfterCrash(t *testing.T) {
	h := needCgroups(t)
	// Another package's test may reap at the same time (apply --revert):
	// holding the reaper lock keeps the orphans below for this test's
	// checks until its own Reap. The checks read and wait for nothing
	// (checkPlaced, not checkSpinners, which waits for CPU time), so the
	// other reaper waits milliseconds: a lock held while lowest-weight
	// spinners waited for CPU on a loaded machine held every Reap with it.
	unlock, err := lockReaping(reapLock, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	// Without PR_SET_PDEATHSIG the spinners outlive the crashed run: what
	// Reap is for (it also covers a death between fork and prctl).
	run := crashedRun(t, 2, false)
	t.Cleanup(func() {
		for _, pid := range run.Pids {
			if running(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	for _, pid := range run.Pids {
		if !running(pid) {
			t.Fatalf("spinner %d died with its run: nothing to reap", pid)
		}
	}
	checkPlaced(t, h, run.Pids, run.Cgroup)
	unlock() // whoever reaps next, the end state is the same
	if err := Reap(run.Pids); err != nil {
		t.Fatal(err)
	}
	for _, pid := range run.Pids {
		if running(pid) {
			t.Errorf("spinner %d runs after Reap", pid)
		}
	}
	if _, err := os.Stat(run.Cgroup); !os.IsNotExist(err) {
		t.Errorf("cgroup %s after Reap: %v", run.Cgroup, err)
	}
}

// TestReapUnrecorded: a spinner whose pid did not reach the ledger is found
// in its dead run's cgroup.
func TestReapUnrecorded(t *testing.T) {
	needCgroups(t)
	run := crashedRun(t, 1, false)
	if err := Reap(nil); err != nil {
		t.Fatal(err)
	}
	if running(run.Pids[0]) {
		syscall.Kill(run.Pids[0], syscall.SIGKILL)
		t.Errorf("spinner %d runs after Reap", run.Pids[0])
	}
	if _, err := os.Stat(run.Cgroup); !os.IsNotExist(err) {
		t.Errorf("cgroup %s after Reap: %v", run.Cgroup, err)
	}
}

func TestPdeathsig(t *testing.T) {
	needCgroups(t)
	run := crashedRun(t, 2, true)
	for _, pid := range run.Pids {
		if !eventually(5*time.Second, func() bool { return !running(pid) }) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("spinner %d outlived its SIGKILLed run", pid)
		}
	}
	// The cgroup is left to the next Reap.
	if err := Reap(run.Pids); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(run.Cgroup); !os.IsNotExist(err) {
		t.Errorf("cgroup %s after Reap: %v", run.Cgroup, err)
	}
}

// TestRemoveLeftovers: the cgroups of SIGKILLed runs go, with any spinner
// still in them; a live run's stay, its spinners running.
func TestRemoveLeftovers(t *testing.T) {
	needCgroups(t)
	dead := crashedRun(t, 1, true) // its spinner dies with it: an empty cgroup
	outlived := crashedRun(t, 1, false)
	live, err := Start(1)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop()
	if err := RemoveLeftovers(); err != nil {
		t.Fatal(err)
	}
	for _, run := range []helperOut{dead, outlived} {
		if _, err := os.Stat(run.Cgroup); !os.IsNotExist(err) {
			t.Errorf("cgroup %s after RemoveLeftovers: %v", run.Cgroup, err)
		}
	}
	if running(outlived.Pids[0]) {
		syscall.Kill(outlived.Pids[0], syscall.SIGKILL)
		t.Errorf("spinner %d runs after RemoveLeftovers", outlived.Pids[0])
	}
	if _, err := os.Stat(live.Cgroup()); err != nil || !running(live.pids[0]) {
		t.Errorf("the live run's cgroup %s (%v) or spinner %d was touched", live.Cgroup(), err, live.pids[0])
	}
}

// TestReapSparesOthers: Reap never kills a process that is not a spinner of a
// dead run, whatever pid it is given.
func TestReapSparesOthers(t *testing.T) {
	needCgroups(t)
	// A pid reused by an unrelated process.
	other := exec.Command("sleep", "300")
	// A process that looks like a spinner but is in no spinner cgroup.
	lookalike := &exec.Cmd{Path: shell, Args: []string{spinnerName, "-c", spinScript}}
	for _, c := range []*exec.Cmd{other, lookalike} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { c.Process.Kill(); c.Wait() }()
	}
	// Spinners of a live run (this one).
	live, err := Start(1)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop()
	pids := append([]int{other.Process.Pid, lookalike.Process.Pid, 0, -1, 1 << 30}, live.Pids()...)
	if err := Reap(pids); err != nil {
		t.Fatal(err)
	}
	for _, pid := range append([]int{other.Process.Pid, lookalike.Process.Pid}, live.Pids()...) {
		if !running(pid) {
			t.Errorf("Reap killed %d", pid)
		}
	}
	if err := live.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestParseCgroupName(t *testing.T) {
	for name, ok := range map[string]bool{
		"temper-bg.12.345.1": true, "temper-bg.12.345": false, "temper-bg.x.345.1": false,
		"temper-bg.0.345.1": false, "kubepods": false, "temper-bg.12.345.1.2": false,
	} {
		if _, _, got := parseCgroupName(name); got != ok {
			t.Errorf("parseCgroupName(%q) ok = %v, want %v", name, got, ok)
		}
	}
}

// TestLowestWeight: a spinner sharing a CPU with an ordinary busy process
// (nice 0, outside the spinners' cgroup) gets a small fraction of it. At
// cpu.shares 2 against 1024 the kernel's share is 1/513; the bound checked
// is loose (1/5), to stay clear of the noise of a shared machine: the test
// asserts the weight is in force, not its exact value.
func TestLowestWeight(t *testing.T) {
	needCgroups(t)
	need.CPUs(t, 2) // one is shared by the pair
	s, err := Start(1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	rival := exec.Command(shell, "-c", spinScript)
	if err := rival.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { rival.Process.Kill(); rival.Wait() }()
	cpu := strconv.Itoa(runtime.NumCPU() - 1)
	for _, pid := range []int{s.Pids()[0], rival.Process.Pid} {
		var sched unix.CPUSet
		n, _ := strconv.Atoi(cpu)
		sched.Set(n)
		if err := unix.SchedSetaffinity(pid, &sched); err != nil {
			t.Fatal(err)
		}
	}
	spin0, rival0 := cpuTicks(t, s.Pids()[0]), cpuTicks(t, rival.Process.Pid)
	time.Sleep(3 * time.Second)
	spin, riv := cpuTicks(t, s.Pids()[0])-spin0, cpuTicks(t, rival.Process.Pid)-rival0
	t.Logf("on CPU %s for 3s: spinner %d ticks, nice-0 rival %d ticks", cpu, spin, riv)
	if riv == 0 || float64(spin) > float64(riv)/5 {
		t.Errorf("spinner got %d ticks against the rival's %d: its low weight is not in force", spin, riv)
	}
}

// TestReaperLock: a second reaper waits for the first and, past its wait,
// gets one line naming the lock; once the first lets go it gets the lock.
func TestReaperLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reap.lock")
	unlock, err := lockReaping(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockReaping(path, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
		t.Errorf("a second reaper got %v; want one line naming %s", err, path)
	}
	unlock()
	unlock() // a second call is harmless
	again, err := lockReaping(path, 0)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again()
}
