package main

import (
	"regexp"

	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/scheduler/schedulertest"
)

// needSchedPrivileges needs what the cfs backend needs to reschedule other
// processes' threads (apply, canary and refine tests call it).
func needSchedPrivileges(t *testing.T) {
	t.Helper()
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
}

// applyProfile treats each of the workload's roles differently; wl-main,
// wl-acceptor and wl-timer match no group (the sleeper group is for the
// descendant `sleep` of startWorkloadTree).
const applyProfile = `schema_version = 1
id = "apply-test"

[[thread_groups]]
name = "compute"
match = { comm_prefix = ["wl-compute"] }
treatment = "exclusive"
exclusive_cores = 1

[[thread_groups]]
name = "workers"
match = { comm_prefix = ["wl-worker"] }
treatment = "latency"
weight = 200

[[thread_groups]]
name = "wal"
match = { comm_prefix = ["wl-logger", "wl-syncer"] }
treatment = "batch"

[[thread_groups]]
name = "idle"
match = { comm_prefix = ["wl-idle"] }
treatment = "yield"

[[thread_groups]]
name = "sleeper"
match = { comm_prefix = ["sleep"] }
treatment = "yield"
`

// schedView is a thread's scheduling as /proc reports it.
type schedView struct {
	CPUs   string
	Policy int
	Nice   int
}

func readSched(t *testing.T, tid int) schedView {
	t.Helper()
	var proc procfs.FS
	st, err := proc.Stat(tid)
	if err != nil {
		t.Fatalf("thread %d: %v", tid, err)
	}
	status, err := proc.Status(tid)
	if err != nil {
		t.Fatalf("thread %d: %v", tid, err)
	}
	return schedView{Nice: st.Nice, Policy: st.Policy, CPUs: status.CPUsAllowedList}
}

// workloadTree is the C workload with a `sleep` child, started as a
// process tree for --pid, and the tids of its threads by name.
type workloadTree struct {
	cmd  *exec.Cmd
	tids map[string]int
}

// startWorkloadTree starts `sh -c 'sleep 300 & exec workload'`: the
// workload's 13 threads plus a descendant process, all one --pid target.
func startWorkloadTree(t *testing.T, bin string) *workloadTree {
	t.Helper()
	cmd := exec.Command("sh", "-c", `sleep 300 & exec "$0" --dir "$1" --rate 500`, bin, t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workloadTree{cmd: cmd, tids: map[string]int{}}
	t.Cleanup(func() {
		if pid, ok := w.tids["sleep"]; ok {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "thread" {
			w.tids[f[2]], _ = strconv.Atoi(f[1])
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
	if err != nil || len(strings.Fields(string(kids))) != 1 {
		t.Fatalf("children of the workload: %q %v", kids, err)
	}
	w.tids["sleep"], _ = strconv.Atoi(strings.Fields(string(kids))[0])
	if len(w.tids) != len(workloadThreads)+1 {
		t.Fatalf("workload announced %v", w.tids)
	}
	return w
}

func (w *workloadTree) views(t *testing.T) map[string]schedView {
	t.Helper()
	out := map[string]schedView{}
	for n, tid := range w.tids {
		out[n] = readSched(t, tid)
	}
	return out
}

// exclusiveCPUs is what the profile's compute group gets on this machine:
// the highest core.
func exclusiveCPUs(t *testing.T) (excl, shared string) {
	t.Helper()
	topo, err := machine.ReadTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	need.Cores(t, 2, len(topo.Cores)) // one exclusive, one shared
	last := topo.Cores[len(topo.Cores)-1].CPUs
	var rest []int
	for _, c := range topo.Cores[:len(topo.Cores)-1] {
		rest = append(rest, c.CPUs...)
	}
	return cpuListString(last), cpuListString(rest)
}

func cpuListString(c []int) string {
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", c[i], c[j]))
		} else {
			parts = append(parts, strconv.Itoa(c[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestApplyCommand runs apply --for on the workload tree in-process: every
// thread (the descendant sleep included) is treated while it runs, restored
// exactly after, and --stats-json places each thread in its group.
func TestApplyCommand(t *testing.T) {
	needSchedPrivileges(t)
	excl, shared := exclusiveCPUs(t)
	w := startWorkloadTree(t, buildWorkload(t))
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	testkit.Must(t, os.WriteFile(prof, []byte(applyProfile), 0o644))
	state, statsPath := filepath.Join(dir, "state.json"), filepath.Join(dir, "stats.json")
	before := w.views(t)

	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, o, e := runCLI("apply", prof, "--pid", strconv.Itoa(w.cmd.Process.Pid), "--backend", "cfs", "--for", "2s",
			"--state", state, "--stats-json", statsPath)
		done <- result{code, o, e}
	}()
	waitFor(t, "the compute threads on the exclusive core", func() bool {
		return readSched(t, w.tids["wl-compute-0"]).CPUs == excl && readSched(t, w.tids["wl-idle-1"]).Policy == 5
	})
	want := map[string]schedView{
		"wl-compute-0": {excl, 0, 0}, "wl-worker-2": {shared, 0, -3}, "wl-logger": {shared, 3, 0},
		"wl-idle-0": {shared, 5, 0}, "wl-main": {shared, 0, 0}, "sleep": {shared, 5, 0},
	}
	for n, v := range want {
		if got := readSched(t, w.tids[n]); got != v {
			t.Errorf("applied: %s: %+v, want %+v", n, got, v)
		}
	}
	if _, err := cfs.ReadState(state); err != nil {
		t.Errorf("state file while applied: %v", err)
	}
	r := <-done
	if r.code != exitOK {
		t.Fatalf("apply: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	for _, s := range []string{"backend cfs", "--for 2s passed", "reverted  every change", "compute", "(unmatched)", "sibling_busy: not measured"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q", s)
		}
	}
	if !strings.Contains(r.stderr, "applied profile apply-test with backend cfs") {
		t.Errorf("stderr lacks the applied line:\n%s", r.stderr)
	}
	for n, b := range before {
		if got := readSched(t, w.tids[n]); got != b {
			t.Errorf("reverted: %s: %+v, want %+v", n, got, b)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state file after a clean run: %v", err)
	}

	var stats scheduler.Report
	b, err := os.ReadFile(statsPath)
	testkit.Must(t, err)
	testkit.Must(t, json.Unmarshal(b, &stats))
	groupOf := map[int]string{}
	for _, th := range stats.Threads {
		groupOf[th.Tid] = th.Group
	}
	wantGroup := map[string]string{"wl-compute-1": "compute", "wl-worker-0": "workers", "wl-syncer": "wal", "wl-idle-1": "idle",
		"sleep": "sleeper", "wl-main": "", "wl-timer": ""}
	for n, g := range wantGroup {
		if got, ok := groupOf[w.tids[n]]; !ok || got != g {
			t.Errorf("stats json: %s (tid %d) in group %q (listed %v), want %q", n, w.tids[n], got, ok, g)
		}
	}
	if len(stats.Threads) != 14 || stats.Backend != "cfs" || stats.Profile != "apply-test" || len(stats.Groups) != 6 || stats.Groups[0].Threads != 2 {
		t.Errorf("stats json: %d threads, backend %q, profile %q, groups %+v", len(stats.Threads), stats.Backend, stats.Profile, stats.Groups)
	}
}

// TestApplySignals runs a real apply process twice. SIGTERM: it reverts
// every thread, exits 0 and removes its state file. SIGKILL: the threads
// stay changed and the state file stays; apply --revert then restores every
// thread, notes the one that exited meanwhile, and removes the file.
func TestApplySignals(t *testing.T) {
	needSchedPrivileges(t)
	excl, _ := exclusiveCPUs(t)
	tt := buildCLI(t)
	w := startWorkloadTree(t, buildWorkload(t))
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	testkit.Must(t, os.WriteFile(prof, []byte(applyProfile), 0o644))
	state := filepath.Join(dir, "state.json")
	before := w.views(t)

	startApply := func() *exec.Cmd {
		cmd := exec.Command(tt, "apply", prof, "--pid", strconv.Itoa(w.cmd.Process.Pid), "--backend", "cfs", "--state", state, "-q")
		cmd.Stderr = &testLog{t: t, prefix: "apply: "}
		cmd.Stdout = cmd.Stderr
		testkit.Must(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill() })
		waitFor(t, "apply to change the threads", func() bool {
			return readSched(t, w.tids["wl-compute-1"]).CPUs == excl && readSched(t, w.tids["sleep"]).Policy == 5
		})
		return cmd
	}

	cmd := startApply()
	testkit.Must(t, cmd.Process.Signal(syscall.SIGTERM))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("apply after SIGTERM: %v", err)
	}
	for n, tid := range w.tids {
		if got := readSched(t, tid); got != before[n] {
			t.Errorf("after SIGTERM: %s: %+v, want %+v", n, got, before[n])
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("state file after SIGTERM: %v", err)
	}

	cmd = startApply()
	testkit.Must(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	time.Sleep(300 * time.Millisecond)
	if got := readSched(t, w.tids["wl-compute-1"]); got.CPUs != excl {
		t.Fatalf("after SIGKILL wl-compute-1 is %+v: the crash left nothing to revert, the test proves nothing", got)
	}
	st, err := cfs.ReadState(state)
	if err != nil || len(st.Threads) != 14 {
		t.Fatalf("state file after SIGKILL: %v, %+v", err, st)
	}

	// A thread that exits before the revert is skipped with a note.
	sleepPid := w.tids["sleep"]
	testkit.Must(t, syscall.Kill(sleepPid, syscall.SIGKILL))
	waitFor(t, "sleep to exit", func() bool {
		_, err := scheduler.TaskStartTime(sleepPid) // a zombie counts as exited
		return errors.Is(err, scheduler.ErrThreadGone)
	})
	delete(w.tids, "sleep")

	out, err := exec.Command(tt, "apply", "--revert", state).CombinedOutput()
	if err != nil {
		t.Fatalf("apply --revert: %v\n%s", err, out)
	}
	t.Logf("apply --revert:\n%s", out)
	if !strings.Contains(string(out), "note: 1 thread(s) had exited, nothing to restore: sleep×1") ||
		!strings.Contains(string(out), "reverted  "+state) {
		t.Errorf("apply --revert output lacks the note on the exited sleep or the reverted line:\n%s", out)
	}
	for n, tid := range w.tids {
		if got := readSched(t, tid); got != before[n] {
			t.Errorf("after --revert: %s: %+v, want %+v", n, got, before[n])
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state file after a clean --revert: %v", err)
	}
	// Reverting again is an error naming the missing file, not a crash.
	out, err = exec.Command(tt, "apply", "--revert", state).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || !strings.Contains(string(out), state) {
		t.Errorf("second --revert: %v %q", err, out)
	}
}

// TestApplyTargetExits: a descendant process created after apply started
// is treated on a refresh, and apply stops, reverts and succeeds when the
// target has no process left.
func TestApplyTargetExits(t *testing.T) {
	needSchedPrivileges(t)
	_, shared := exclusiveCPUs(t)
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	testkit.Must(t, os.WriteFile(prof, []byte(applyProfile), 0o644))
	// "; true" keeps the shell from exec'ing the last command itself.
	sh := exec.Command("sh", "-c", "read x; sleep 1.5; true")
	stdin, err := sh.StdinPipe()
	testkit.Must(t, err)
	testkit.Must(t, sh.Start())
	defer sh.Process.Kill()
	go sh.Wait()
	shPid := sh.Process.Pid
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, o, e := runCLI("apply", prof, "--pid", strconv.Itoa(shPid), "--backend", "cfs", "--state", filepath.Join(dir, "s.json"))
		done <- result{code, o, e}
	}()
	// sh matches no group: moved off the exclusive core once apply runs.
	waitFor(t, "apply to move sh off the exclusive core", func() bool { return readSched(t, shPid).CPUs == shared })
	fmt.Fprintln(stdin, "go")
	var child int
	waitFor(t, "the new sleep to get SCHED_IDLE", func() bool {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", shPid, shPid))
		if f := strings.Fields(string(kids)); len(f) == 1 {
			child, _ = strconv.Atoi(f[0])
			return readSched(t, child).Policy == 5
		}
		return false
	})
	select {
	case r := <-done:
		if r.code != exitOK || !strings.Contains(r.stdout, "the target exited") {
			t.Errorf("apply: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("apply did not stop after its target exited")
	}
}

// TestApplyWithoutPrivileges runs apply as nobody: one line naming
// CAP_SYS_NICE, exit 1, no thread changed, no state file.
func TestApplyWithoutPrivileges(t *testing.T) {
	need.Root(t, "to switch to an unprivileged user")
	tt := buildCLI(t)
	dir, err := os.MkdirTemp("", "apply-unprivileged-")
	testkit.Must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	testkit.Must(t, os.Chmod(dir, 0o777))
	bin := filepath.Join(dir, "temper-train")
	b, err := os.ReadFile(tt)
	testkit.Must(t, err)
	testkit.Must(t, os.WriteFile(bin, b, 0o755))
	prof := filepath.Join(dir, "p.toml")
	testkit.Must(t, os.WriteFile(prof, []byte(applyProfile), 0o644))
	w := startWorkloadTree(t, buildWorkload(t))
	before := w.views(t)
	state := filepath.Join(dir, "state.json")
	for _, backend := range []string{"auto", "cfs"} {
		cmd := exec.Command(bin, "apply", prof, "--pid", strconv.Itoa(w.cmd.Process.Pid), "--backend", backend, "--state", state, "--for", "1s")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
			t.Fatalf("--backend %s as nobody: %v, want exit %d; output %q", backend, err, exitFailure, out)
		}
		msg := strings.TrimSpace(string(out))
		if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "CAP_SYS_NICE") || !strings.Contains(msg, "root") {
			t.Errorf("--backend %s as nobody: %q; want one line naming root and CAP_SYS_NICE", backend, msg)
		}
	}
	for n, b := range before {
		if got := readSched(t, w.tids[n]); got != b {
			t.Errorf("%s changed by an unprivileged apply: %+v, was %+v", n, got, b)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("unprivileged apply wrote a state file: %v", err)
	}
}

// TestApplyRefusesBeforeChanging: a profile that does not load or lint, or
// a backend that cannot run, stops apply with one line before any thread
// changes or a state file appears.
func TestApplyRefusesBeforeChanging(t *testing.T) {
	needSchedPrivileges(t)
	w := startWorkloadTree(t, buildWorkload(t))
	before := w.views(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	pid := strconv.Itoa(w.cmd.Process.Pid)
	cases := []struct {
		name, profile, backend, err string
	}{
		{"unknown key", applyProfile + "\nweigth = 3\n", "cfs", "unknown key"},
		{"toml syntax", "schema_version = 1\nid = \"x\n", "cfs", "p.toml"},
		{"bad regex", strings.Replace(applyProfile, `comm_prefix = ["wl-worker"]`, `comm_regex = "(?=x)"`, 1), "cfs", "comm_regex"},
		{"rt on batch", strings.Replace(applyProfile, `treatment = "batch"`, "treatment = \"batch\"\nrt_priority = 5", 1), "cfs", "rt_priority"},
		{"too many cores", strings.Replace(applyProfile, "exclusive_cores = 1", "exclusive_cores = 4096\nslice_us = 3000", 1), "cfs", "compute"},
		{"no sched_ext here", applyProfile, "sched_ext", "sched_ext"},
	}
	if _, err := os.Stat("/sys/kernel/sched_ext"); err == nil {
		cases = cases[:len(cases)-1]
	}
	for _, c := range cases {
		prof := filepath.Join(dir, "p.toml")
		testkit.Must(t, os.WriteFile(prof, []byte(c.profile), 0o644))
		code, _, stderr := runCLI("apply", prof, "--pid", pid, "--backend", c.backend, "--state", state, "--for", "1s", "-q")
		if code != exitFailure || !strings.Contains(stderr, c.err) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, code, stderr, exitFailure, c.err)
		}
		if lines := strings.Split(strings.TrimSpace(stderr), "\n"); !strings.HasPrefix(lines[len(lines)-1], "temper-train: ") {
			t.Errorf("%s: last line of stderr is not the error: %q", c.name, stderr)
		}
		t.Logf("%s: %s", c.name, strings.TrimSpace(stderr))
		for n, b := range before {
			if got := readSched(t, w.tids[n]); got != b {
				t.Errorf("%s: %s changed: %+v, was %+v", c.name, n, got, b)
			}
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("%s: state file written: %v", c.name, err)
		}
	}
}

// TestApplyDemote: a profile whose exclusive group cannot fit is refused
// (the lint error says so); with --demote the group gets latency treatment
// (its slice_us as the fair slice, no nice without a weight, no exclusive
// core), as lint --demote says it will.
func TestApplyDemote(t *testing.T) {
	needSchedPrivileges(t)
	w := startWorkloadTree(t, buildWorkload(t))
	before := w.views(t)
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	testkit.Must(t, os.WriteFile(prof, []byte(strings.Replace(applyProfile, "exclusive_cores = 1", "exclusive_cores = 4096\nslice_us = 3000", 1)), 0o644))
	pid := strconv.Itoa(w.cmd.Process.Pid)
	code, _, stderr := runCLI("apply", prof, "--pid", pid, "--backend", "cfs", "--state", filepath.Join(dir, "s.json"), "--for", "1s", "-q")
	if code != exitFailure || !strings.Contains(stderr, "apply refuses it") {
		t.Errorf("without --demote: exit %d, stderr %q; want exit %d and \"apply refuses it\"", code, stderr, exitFailure)
	}
	done := make(chan struct {
		code           int
		stdout, stderr string
	}, 1)
	go func() {
		c, o, e := runCLI("apply", prof, "--pid", pid, "--backend", "cfs", "--state", filepath.Join(dir, "s.json"), "--for", "3s", "--demote")
		done <- struct {
			code           int
			stdout, stderr string
		}{c, o, e}
	}()
	waitFor(t, "the demoted compute threads at their latency slice", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/sched", w.cmd.Process.Pid, w.tids["wl-compute-0"]))
		return regexp.MustCompile(`se\.slice\s+:\s+3000000\b`).Match(b)
	})
	if got := readSched(t, w.tids["wl-compute-0"]); got.Nice != before["wl-compute-0"].Nice {
		t.Errorf("demoted compute thread at nice %d, was %d: no weight, no nice", got.Nice, before["wl-compute-0"].Nice)
	}
	// No group is exclusive any more: nobody's affinity changes.
	if got := readSched(t, w.tids["wl-compute-0"]); got.CPUs != before["wl-compute-0"].CPUs {
		t.Errorf("demoted compute thread confined to CPUs %s, was %s", got.CPUs, before["wl-compute-0"].CPUs)
	}
	r := <-done
	if r.code != exitOK || !strings.Contains(r.stderr, "will be demoted to latency treatment") || !strings.Contains(r.stderr, "demoted to latency") {
		t.Errorf("--demote: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "compute") || !strings.Contains(r.stdout, "latency") {
		t.Errorf("--demote: the stats do not show compute as a latency group:\n%s", r.stdout)
	}
	for n, b := range before {
		if got := readSched(t, w.tids[n]); got != b {
			t.Errorf("after --demote: %s: %+v, want %+v", n, got, b)
		}
	}
}

// TestApplyUsage: calls that cannot mean anything exit 2.
func TestApplyUsage(t *testing.T) {
	cases := []struct {
		args []string
		err  string
	}{
		{[]string{"apply", "p.toml"}, "no target"},
		{[]string{"apply", "--pid", "1"}, "one profile file"},
		{[]string{"apply", "a.toml", "b.toml", "--pid", "1"}, "one profile file"},
		{[]string{"apply", "p.toml", "--pid", "1", "--backend", "bpf"}, "--backend"},
		{[]string{"apply", "p.toml", "--pid", "1", "--for", "-1s"}, "--for"},
		{[]string{"apply", "--revert", "--pid", "1"}, "--revert takes only a state file"},
		{[]string{"apply", "--revert", "a.json", "b.json"}, "at most one"},
		{[]string{"apply", "--revert", "--demote"}, "--revert takes only a state file"},
		{[]string{"apply", "p.toml", "--pid", "1", "--", "sleep", "1"}, "no command after --"},
		{[]string{"apply", "p.toml", "--container", "c", "--pid", "1", "--backend", "cfs"}, "container"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.err) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, exitUsage, c.err)
		}
	}
}

// testLog writes a subprocess's output to the test log.
type testLog struct {
	t      *testing.T
	prefix string
}

func (l *testLog) Write(b []byte) (int, error) {
	l.t.Logf("%s%s", l.prefix, strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestApplyStateExists: a state file left by an apply that did not finish
// stops apply before anything changes, and the message says how to revert
// it and which flag chooses another (the backend's own error names no flag).
func TestApplyStateExists(t *testing.T) {
	needSchedPrivileges(t)
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	testkit.Must(t, os.WriteFile(prof, []byte(applyProfile), 0o644))
	state := filepath.Join(dir, "s.json")
	testkit.Must(t, os.WriteFile(state, []byte("{}"), 0o600))
	code, _, stderr := runCLI("apply", prof, "--pid", strconv.Itoa(os.Getpid()), "--backend", "cfs", "--state", state, "--for", "1s", "-q")
	want := "state file " + state + " already exists, left by an apply that did not finish: revert it first (temper-train apply --revert " + state + ") or choose another --state"
	if code != exitFailure || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, exitFailure, want)
	}
}
