package main

import (
	"regexp"

	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/scheduler/schedulertest"
)

// canaryArgs are the smallest sizes of a canary run on the demo workload
// with the planted benchmark: the check's n (--final-n 6) is the smallest
// whose first check can pass at its share of α (refine.CheckCandidate).
func canaryArgs(t *testing.T, w *demoWorkload, out string) []string {
	t.Helper()
	bench, err := filepath.Abs("testdata/planted-bench.sh")
	if err != nil {
		t.Fatal(err)
	}
	return []string{"canary", "--pid", strconv.Itoa(w.cmd.Process.Pid), "--id", "demo-workload", "--out", out,
		"--bench", fmt.Sprintf("%s %d 0.1", bench, w.tids["wl-worker-0"]), "--adapter", "jsonl", "--metric", "p99_ms", "--min-effect", "20%",
		"--interval", "1s", "--duration", "2s", "--final-n", "6",
		"--max-trials", "60", "--warmup", "50ms", "--backend", "cfs", "-q"}
}

// TestCanaryLoop: three cycles on the demo workload, a drill at cycle 2.
// Cycle 1 refines the fresh synthesis against stock and its check passes
// (the workers' latency group, its short slice, is what the planted
// benchmark rewards): one commit. The drill is caught and rolled back, the ledger says why, and the
// profile in force is the last good one again. Nothing stays changed.
func TestCanaryLoop(t *testing.T) {
	needTracing(t)
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
	tt := buildCLI(t)
	w := startDemo(t)
	before := w.views(t)
	repo := testkit.GitRepo(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "canary")
	// The request path under SCHED_IDLE: the planted benchmark reports it
	// 3× worse.
	drill := testkit.RepoFile(t, "testdata/drills/demo-harmful.toml")
	args := append(canaryArgs(t, w, out), "--cycles", "3", "--drill", "2:"+drill, "--git-commit", repo)
	b, err := exec.Command(tt, args...).CombinedOutput()
	t.Logf("%s", b)
	if err != nil {
		t.Fatalf("canary: %v", err)
	}
	l, err := ledger.Read(filepath.Join(out, "canary.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Cycles) != 3 || l.End == nil {
		t.Fatalf("%d cycle records, end %v", len(l.Cycles), l.End)
	}
	c1, c2 := l.Cycles[0], l.Cycles[1]
	if c1.State != "passed" || c1.Commit == "" || c1.After == "stock" {
		t.Errorf("cycle 1: %+v, want passed and committed", c1)
	}
	if !c2.Drill || c2.State != "failed" || !strings.Contains(c2.Reason, "rolled back") || c2.After != c1.After || c2.Commit != "" {
		t.Errorf("cycle 2 (drill): %+v, want failed, rolled back to %s", c2, c1.After)
	}
	if !strings.Contains(string(b), "FAILED (DRILL)") {
		t.Errorf("no drill line on the terminal")
	}
	// The cycle's own ledger holds the check's decision and the drill note.
	cl, err := ledger.Read(c2.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Decisions) != 1 || cl.Decisions[0].Stage != "canary" || cl.Decisions[0].Verdict != "harm not excluded" {
		t.Errorf("cycle 2 decisions: %+v", cl.Decisions)
	}
	// git: one commit per passed cycle, each of the one profile path, the
	// message with the evidence.
	passed := 0
	for _, c := range l.Cycles {
		if c.State == "passed" {
			passed++
		}
	}
	shape := strings.TrimSuffix(filepath.Base(c1.CandidatePath), ".toml")
	log := testkit.Git(t, repo, "log", "--format=%H %s", "--name-only")
	if got := strings.Count(log, "canary cycle"); got != passed {
		t.Errorf("%d canary commits for %d passed cycles:\n%s", got, passed, log)
	}
	if !strings.Contains(log, "profiles/demo-workload/"+shape+".toml") {
		t.Errorf("no profiles/demo-workload/%s.toml in the log:\n%s", shape, log)
	}
	msg := testkit.Git(t, repo, "log", "-1", "--format=%B", c1.Commit)
	for _, want := range []string{"p99_ms at bg=0", "n=6+6", "p=", "Ledger: "} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}
	if st := testkit.Git(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("repo left dirty: %s", st)
	}
	if after := w.views(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("scheduling not reverted:\nbefore %v\nafter  %v", before, after)
	}
}

// TestCanarySIGTERM: SIGTERM mid-cycle (during a trial) stops the loop with a
// one-line error; scheduling is reverted, the ledgers read back, no
// trial is left open.
func TestCanarySIGTERM(t *testing.T) {
	needTracing(t)
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
	tt := buildCLI(t)
	w := startDemo(t)
	before := w.views(t)
	out := filepath.Join(t.TempDir(), "canary")
	cmd := exec.Command(tt, append(canaryArgs(t, w, out), "--cycles", "2", "--background", "1")...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	// A child that outlives the command (killed) must not hold Wait on
	// the pipe: once it has exited, Wait returns within WaitDelay.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ledgerPath := filepath.Join(out, "cycle-01", "ledger.jsonl")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if l, err := ledger.Read(ledgerPath); err == nil && len(l.Starts) >= 5 {
			break
		}
		if time.Now().After(deadline) {
			threads := hungThreads(cmd.Process.Pid, w.cmd.Process.Pid)
			// SIGQUIT makes the Go runtime print every goroutine's stack:
			// where the canary waits. Its rig and cpusets are then taken
			// down as after any crash.
			cmd.Process.Signal(syscall.SIGQUIT)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			rev, _ := exec.Command(tt, "apply", "--revert").CombinedOutput()
			t.Fatalf("no 5th trial within 2 minutes\nthreads:\n%s\napply --revert: %s\n%s", threads, rev, stderr.String())
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %v\n%s", err, stderr.String())
	}
	l, err := ledger.Read(ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Open()) != 0 {
		t.Errorf("%d trials left open", len(l.Open()))
	}
	cl, err := ledger.Read(filepath.Join(out, "canary.jsonl"))
	if err != nil || cl.End == nil || !strings.Contains(cl.End.Reason, "interrupted") {
		t.Errorf("canary ledger: %v, end %+v", err, cl)
	}
	checkClean(t, w, before, ledgerPath)
}

// TestCanaryOnExitKeep: with --on-exit keep the last good profile (cycle 1
// passes: the workers' latency group, its 250 µs slice) stays in force after the loop until
// SIGTERM, and is reverted then.
func TestCanaryOnExitKeep(t *testing.T) {
	needTracing(t)
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
	tt := buildCLI(t)
	w := startDemo(t)
	before := w.views(t)
	out := filepath.Join(t.TempDir(), "canary")
	cmd := exec.Command(tt, append(canaryArgs(t, w, out), "--cycles", "1", "--on-exit", "keep")...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	// A child that outlives the command (killed) must not hold Wait on
	// the pipe: once it has exited, Wait returns within WaitDelay.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(stderr.String(), "stays in force"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the loop did not hand over within 2 minutes\n%s", stderr.String())
		}
	}
	worker := w.tids["wl-worker-0"]
	if kept := readSched(t, worker); kept.Policy != before["wl-worker-0"].Policy {
		t.Errorf("after the loop, wl-worker-0 has policy %d: the last good profile (latency) is not in force", kept.Policy)
	}
	sched, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/sched", w.cmd.Process.Pid, worker))
	if !regexp.MustCompile(`se\.slice\s+:\s+250000\b`).Match(sched) {
		t.Errorf("after the loop, wl-worker-0's slice is not the last good profile's 250 µs:\n%s", sched)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "scheduling reverted") {
		t.Errorf("no revert line:\n%s", stderr.String())
	}
	if after := w.views(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("scheduling not reverted:\nbefore %v\nafter  %v", before, after)
	}
}

// hungThreads lists every thread of the given processes and their
// children with its state, kernel wait channel, CPU and allowed CPUs: what
// a run that stopped making progress was waiting on.
func hungThreads(pids ...int) string {
	var b strings.Builder
	seen := map[int]bool{}
	for len(pids) > 0 {
		pid := pids[0]
		pids = pids[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
		for _, task := range tasks {
			read := func(name string) string {
				d, _ := os.ReadFile(filepath.Join(task, name))
				return strings.TrimSpace(string(d))
			}
			stat := read("stat")
			// comm may hold spaces: the fields after it start past ')'.
			var state, cpu string
			if i := strings.LastIndexByte(stat, ')'); i > 0 {
				f := strings.Fields(stat[i+1:])
				if len(f) > 36 {
					state, cpu = f[0], f[36]
				}
			}
			allowed := ""
			for _, l := range strings.Split(read("status"), "\n") {
				if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
					allowed = strings.TrimSpace(v)
				}
			}
			fmt.Fprintf(&b, "%s %-16s state %s wchan %s cpu %s allowed %s\n", task, read("comm"), state, read("wchan"), cpu, allowed)
			for _, c := range strings.Fields(read("children")) {
				if n, err := strconv.Atoi(c); err == nil {
					pids = append(pids, n)
				}
			}
		}
	}
	return b.String()
}

// syncBuffer is a strings.Builder safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCanaryDrift: the loop starts from a profile one of whose groups
// matches no thread of the demo workload; the cycle says so, records it and
// refines the fresh synthesis instead.
func TestCanaryDrift(t *testing.T) {
	needTracing(t)
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
	tt := buildCLI(t)
	w := startDemo(t)
	before := w.views(t)
	dir := t.TempDir()
	start := filepath.Join(dir, "start.toml")
	testkit.WriteTree(t, dir, map[string]string{"start.toml": `schema_version = 1
id = "demo-workload"

[[thread_groups]]
name = "workers"
match = { comm_prefix = ["wl-worker", "wl-acceptor"] }
treatment = "latency"
weight = 200

[[thread_groups]]
name = "gone"
match = { comm_prefix = ["wl-gone"] }
treatment = "batch"

[[thread_groups]]
name = "rest"
match = { all = true }
treatment = "normal"
`})
	out := filepath.Join(dir, "canary")
	b, err := exec.Command(tt, append(canaryArgs(t, w, out), "--cycles", "1", "--start", start)...).CombinedOutput()
	t.Logf("%s", b)
	if err != nil {
		t.Fatalf("canary: %v", err)
	}
	l, err := ledger.Read(filepath.Join(out, "canary.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Cycles) != 1 {
		t.Fatalf("%d cycles", len(l.Cycles))
	}
	c := l.Cycles[0]
	// The compute pool may also show as a new hot family (it is in the
	// catch-all here); the group that matches nothing must be there.
	if !slices.ContainsFunc(c.Drift, func(d string) bool { return strings.HasPrefix(d, `matches-nothing: group "gone"`) }) {
		t.Errorf("drift %q, want the group that matches nothing", c.Drift)
	}
	if !strings.Contains(string(b), "re-synthesized") || !strings.Contains(string(b), "cycle-01/profiles/demo-workload/") {
		t.Errorf("the cycle did not refine the fresh synthesis")
	}
	if after := w.views(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("scheduling not reverted:\nbefore %v\nafter  %v", before, after)
	}
}

// TestCanaryDirtyRepo: a profiles repository with uncommitted changes is a
// one-line error before anything runs.
func TestCanaryDirtyRepo(t *testing.T) {
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
	tt := buildCLI(t)
	repo := testkit.GitRepo(t)
	testkit.WriteTree(t, repo, map[string]string{"stray.toml": "x"})
	out := filepath.Join(t.TempDir(), "canary")
	b, err := exec.Command(tt, "canary", "--pid", strconv.Itoa(os.Getpid()), "--id", "x", "--interval", "1m", "--bench", "true",
		"--adapter", "jsonl", "--backend", "cfs", "--git-commit", repo, "--out", out).CombinedOutput()
	msg := strings.TrimSpace(string(b))
	if err == nil || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "uncommitted changes") || !strings.Contains(msg, "stray.toml") {
		t.Errorf("exit %v, output %q: want a one-line error naming the change", err, msg)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a dirty repository still started the loop")
	}
}
