package main

import (
	"temper.codes/temper-train/rig"

	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/scheduler/schedulertest"
)

// refineProfile gives the demo workload's workers latency treatment and
// yields the rest: four one-parameter candidates, few enough for short
// runs.
const refineProfile = `schema_version = 1
id = "refine-test"

[[thread_groups]]
name = "workers"
match = { comm_prefix = ["wl-worker", "wl-acceptor"] }
treatment = "latency"

[[thread_groups]]
name = "rest"
match = { all = true }
treatment = "yield"
`

// demoWorkload is the C workload started with --stats: its latency
// histogram is what scripts/demo-bench.sh measures.
type demoWorkload struct {
	cmd   *exec.Cmd
	stats string
	tids  map[string]int
}

func startDemo(t *testing.T, extra ...string) *demoWorkload {
	t.Helper()
	bin := testkit.Workload(t)
	dir := t.TempDir()
	w := &demoWorkload{stats: filepath.Join(dir, "wl.stats"), tids: map[string]int{}}
	w.cmd = exec.Command(bin, append([]string{"--dir", dir, "--rate", "1000", "--stats", w.stats}, extra...)...)
	// Gone with the test binary too when Cleanup cannot run (a -timeout
	// panic): a CI run once left it spinning, loading the next tests.
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.cmd.Process.Signal(syscall.SIGTERM)
		w.cmd.Wait()
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
	waitFor(t, "the workload's stats file", func() bool { _, err := os.Stat(w.stats); return err == nil })
	return w
}

func (w *demoWorkload) views(t *testing.T) map[string]schedView {
	t.Helper()
	out := map[string]schedView{}
	for n, tid := range w.tids {
		out[n] = readSched(t, tid)
	}
	return out
}

func writeProfile(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	testkit.WriteTree(t, dir, map[string]string{"refine-test.toml": refineProfile})
	return filepath.Join(dir, "refine-test.toml")
}

// demoBench is the jsonl benchmark of the demo workload, secs per trial.
func demoBench(t *testing.T, stats string, secs float64) string {
	t.Helper()
	return fmt.Sprintf("%s %s %g", testkit.RepoFile(t, "scripts/demo-bench.sh"), stats, secs)
}

// shortRun are the smallest sizes: a race and a final of 4 per arm, a few
// dozen trials.
var shortRun = []string{"--adapter", "jsonl", "--final-n", "4", "--warmup", "100ms", "--backend", "cfs", "-q",
	"--metric", "p50_ms", "--min-effect", "95%"} // the machine is shared: these tests are about the machinery, not effects

// checkClean asserts what every refine exit must leave: the workload's
// threads scheduled as before, no cfs state file of the run, and no
// spinner the ledger recorded still running.
func checkClean(t *testing.T, w *demoWorkload, before map[string]schedView, ledgerPath string) {
	t.Helper()
	if after := w.views(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("scheduling not reverted:\nbefore %v\nafter  %v", before, after)
	}
	if l, err := ledger.Read(ledgerPath); err != nil {
		t.Errorf("ledger: %v", err)
	} else {
		checkSpinners(t, l)
	}
	// The node rig is gone: no cgroup of it, no state file.
	for _, pat := range []string{"/sys/fs/cgroup/*/temper-rig.*", "/sys/fs/cgroup/temper-rig.*", filepath.Join(rig.StateDir, "*")} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			t.Errorf("rig left behind: %v", m)
		}
	}
	files, _ := filepath.Glob(filepath.Join(cfs.DefaultStateDir, "apply-*.json"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), fmt.Sprintf(`"pid": %d`, w.cmd.Process.Pid)) {
			t.Errorf("state file %s left behind", f)
		}
	}
}

// checkSpinners asserts that no spinner the ledger recorded still runs,
// and that some were recorded.
func checkSpinners(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	n := 0
	for _, s := range l.Starts {
		for _, pid := range s.Spinners {
			n++
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(st), ") Z ") {
				t.Errorf("spinner %d of trial %s still running", pid, s.Trial)
			}
		}
	}
	if n == 0 && l.Header.Config != nil && strings.Contains(string(l.Header.Config), `"ladder":[1]`) {
		t.Error("the ledger recorded no spinner pids for --background 1")
	}
}

// TestRefineDemo runs refine end to end on the demo workload with its jsonl
// benchmark and the CFS backend: a raced round, the final comparison, a
// ledger that reads back and nothing left changed.
func TestRefineDemo(t *testing.T) {
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
	tt := buildCLI(t)
	w := startDemo(t)
	before := w.views(t)
	out := filepath.Join(t.TempDir(), "out")
	args := append([]string{"refine", writeProfile(t), "--pid", strconv.Itoa(w.cmd.Process.Pid), "--bench", demoBench(t, w.stats, 0.3),
		"--out", out, "--max-trials", "40"}, shortRun...)
	cmd := exec.Command(tt, args...)
	b, err := cmd.CombinedOutput()
	t.Logf("%s", b)
	if err != nil {
		t.Fatalf("refine: %v", err)
	}
	l, err := ledger.Read(filepath.Join(out, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]int{}
	for _, d := range l.Decisions {
		stages[d.Stage]++
	}
	// A race, then the final with the rig's three arms: a look or two of
	// the common effect, the level's checks, tier only and the product
	// described; the profile decided against tier only.
	looks := 0
	for _, d := range l.Decisions {
		if d.Look != nil {
			looks++
		}
	}
	if stages["race"] == 0 || looks == 0 || stages["final"] != looks+3 || stages["calibration"] != 0 || l.End == nil {
		t.Errorf("decisions by stage %v (%d looks), end %v", stages, looks, l.End)
	}
	if len(l.Done()) != len(l.Starts) {
		t.Errorf("%d trials started, %d done", len(l.Starts), len(l.Done()))
	}
	if !strings.Contains(string(b), "hill climbing: 1 round(s)") || !strings.Contains(string(b), "final (tier + refined vs tier only):") {
		t.Error("no summary")
	}
	checkClean(t, w, before, filepath.Join(out, "ledger.jsonl"))
}

// misbehave writes a benchmark that measures the demo workload for its
// first five runs (the race's first block: the incumbent, then candidates,
// so that a profile is in force) and then does what mode says: fail, print
// garbage, hang, or kill the target (pid) mid-run.
func misbehave(t *testing.T, stats, mode string, pid int) string {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "bench.sh")
	body := fmt.Sprintf(`#!/bin/sh
n=$(cat %[1]s/count 2>/dev/null || echo 0)
echo $((n + 1)) > %[1]s/count
[ "$n" -lt 5 ] && exec %[2]s
case %[3]s in
fail) echo boom >&2; exit 3 ;;
garbage) echo this is not json ;;
hang) sleep 60 ;;
kill) kill %[4]d; exec %[2]s ;;
esac
`, dir, demoBench(t, stats, 0.3), mode, pid)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// TestRefineErrors: each way a benchmark or target can fail, with a
// profile in force and spinners running, is a one-line error, with the
// ledger intact, scheduling reverted and spinners gone.
func TestRefineErrors(t *testing.T) {
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
	tt := buildCLI(t)
	for _, tc := range []struct {
		name  string
		mode  string // misbehave's mode; "" for bench
		bench string
		extra []string
		code  int
		want  string
	}{
		{name: "no such command", bench: "no-such-benchmark-xyz --x", code: exitUsage, want: "no-such-benchmark-xyz"},
		{name: "equivalence margin", bench: "true", extra: []string{"--equivalence", "200%"}, code: exitUsage, want: "--equivalence"},
		{name: "fails", mode: "fail", code: exitFailure, want: "exit status 3: boom"},
		{name: "unparsable", mode: "garbage", code: exitFailure, want: "jsonl output line 1"},
		{name: "hangs", mode: "hang", extra: []string{"--timeout", "2s"}, code: exitFailure, want: "timed out"},
		{name: "target exits", mode: "kill", code: exitFailure, want: "exited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := startDemo(t)
			before := w.views(t)
			bench := tc.bench
			if tc.mode != "" {
				bench = misbehave(t, w.stats, tc.mode, w.cmd.Process.Pid)
			}
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"refine", writeProfile(t), "--pid", strconv.Itoa(w.cmd.Process.Pid), "--bench", bench, "--out", out, "--background", "1"}, shortRun...)
			cmd := exec.Command(tt, append(args, tc.extra...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			// A child that outlives the command (killed) must not hold Wait on
			// the pipe: once it has exited, Wait returns within WaitDelay.
			cmd.WaitDelay = 10 * time.Second
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			if code == exitUsage {
				last = lines[len(lines)-2]
			}
			t.Logf("exit %d: %s", code, last)
			if code != tc.code || !strings.Contains(last, tc.want) || !strings.HasPrefix(last, "temper-train: ") {
				t.Errorf("exit %d, error line %q; want exit %d and %q\n%s", code, last, tc.code, tc.want, stderr.String())
			}
			if tc.code == exitUsage {
				if _, err := os.Stat(out); err == nil {
					t.Errorf("a usage error left %s", out)
				}
				return
			}
			l, err := ledger.Read(filepath.Join(out, "ledger.jsonl"))
			if err != nil {
				t.Fatalf("ledger: %v", err)
			}
			failed := 0
			for _, e := range l.Ends {
				if e.Error != "" {
					failed++
				}
			}
			if failed != 1 || len(l.Open()) != 0 || len(l.Done()) < 4 {
				t.Errorf("ledger: %d failed trials, %d open, %d done", failed, len(l.Open()), len(l.Done()))
			}
			if tc.name == "target exits" {
				w.cmd.Wait()
				checkSpinners(t, l)
				return
			}
			checkClean(t, w, before, filepath.Join(out, "ledger.jsonl"))
		})
	}
}

// TestRefineResumeAfterSIGKILL kills refine mid-trial (a real SIGKILL, with
// a profile in force and spinners running), then resumes from its ledger:
// the cut-off trial is run again and said so, no completed trial runs
// twice, the dead run's spinners are reaped and its scheduling reverted.
func TestRefineResumeAfterSIGKILL(t *testing.T) {
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
	tt := buildCLI(t)
	w := startDemo(t)
	before := w.views(t)
	prof := writeProfile(t)
	out := filepath.Join(t.TempDir(), "out")
	marks := filepath.Join(t.TempDir(), "marks")
	bench := fmt.Sprintf(`sh -c "echo x >> %s; exec %s"`, marks, demoBench(t, w.stats, 0.4))
	args := append([]string{"refine", prof, "--pid", strconv.Itoa(w.cmd.Process.Pid), "--bench", bench,
		"--out", out, "--background", "1", "--max-trials", "60", "--seed", "5"}, shortRun...)
	cmd := exec.Command(tt, args...)
	var log1 strings.Builder
	cmd.Stderr = &log1
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill during the 9th trial: inside the race, a profile in force.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(marks)
		if strings.Count(string(b), "x") >= 9 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("refine ended before the 9th trial: %v\n%s", err, log1.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 9th trial within 2 minutes\n%s", log1.String())
		}
	}
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	ledgerPath := filepath.Join(out, "ledger.jsonl")
	l, err := ledger.Read(ledgerPath)
	if err != nil {
		t.Fatalf("ledger after SIGKILL: %v\n%s", err, log1.String())
	}
	open := l.Open()
	if len(open) != 1 {
		t.Fatalf("%d open trials after SIGKILL, want 1", len(open))
	}
	done := len(l.Done())
	// A copy of the ledger as the killed run left it, for resuming with
	// another profile below (the resumed run finishes this one).
	cutOff := filepath.Join(t.TempDir(), "cut-off.jsonl")
	if b, err := os.ReadFile(ledgerPath); err != nil || os.WriteFile(cutOff, b, 0o644) != nil {
		t.Fatalf("copy the ledger: %v", err)
	}

	res := exec.Command(tt, "refine", prof, "--pid", strconv.Itoa(w.cmd.Process.Pid), "--bench", bench, "--adapter", "jsonl",
		"--resume", ledgerPath, "-q", "--backend", "cfs")
	b, err := res.CombinedOutput()
	t.Logf("resume:\n%s", b)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	l2, err := ledger.Read(ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]int{}
	for _, s := range l2.Starts {
		starts[s.Trial]++
	}
	for id, n := range starts {
		if n > 1 && id != open[0].Trial {
			t.Errorf("trial %s started %d times", id, n)
		}
	}
	if starts[open[0].Trial] != 2 {
		t.Errorf("cut-off trial %s started %d times, want 2", open[0].Trial, starts[open[0].Trial])
	}
	if len(l2.Done()) != len(starts) || len(l2.Done()) <= done {
		t.Errorf("%d trials done of %d started (%d before resuming)", len(l2.Done()), len(starts), done)
	}
	var rerun, reaped bool
	for _, n := range l2.Notes {
		rerun = rerun || strings.Contains(n.Text, open[0].Trial+" did not complete")
		reaped = reaped || strings.Contains(n.Text, "reaped its spinners")
	}
	if !rerun || (!reaped && len(open[0].Spinners) > 0) || l2.End == nil {
		t.Errorf("ledger notes: rerun %v, reaped %v, end %v", rerun, reaped, l2.End)
	}
	checkClean(t, w, before, ledgerPath)

	// Another profile's ledger is refused in one line.
	dir := t.TempDir()
	testkit.WriteTree(t, dir, map[string]string{"other.toml": strings.Replace(refineProfile, `"refine-test"`, `"other"`, 1)})
	b, err = exec.Command(tt, "refine", filepath.Join(dir, "other.toml"), "--pid", strconv.Itoa(w.cmd.Process.Pid), "--bench", bench,
		"--adapter", "jsonl", "--resume", cutOff).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "was made for profile") || strings.Count(strings.TrimSpace(string(b)), "\n") > 0 {
		t.Errorf("another profile's ledger: %v\n%s", err, b)
	}
}

// TestRefineInterrupt: Ctrl-C (SIGINT) mid-trial stops refine with a
// one-line error that says how to resume, with the trial recorded as
// failed, scheduling reverted and spinners gone.
func TestRefineInterrupt(t *testing.T) {
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
	tt := buildCLI(t)
	w := startDemo(t)
	before := w.views(t)
	out := filepath.Join(t.TempDir(), "out")
	marks := filepath.Join(t.TempDir(), "marks")
	bench := fmt.Sprintf(`sh -c "echo x >> %s; exec %s"`, marks, demoBench(t, w.stats, 0.5))
	cmd := exec.Command(tt, append([]string{"refine", writeProfile(t), "--pid", strconv.Itoa(w.cmd.Process.Pid), "--bench", bench,
		"--out", out, "--background", "1"}, shortRun...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	// A child that outlives the command (killed) must not hold Wait on
	// the pipe: once it has exited, Wait returns within WaitDelay.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(marks); strings.Count(string(b), "x") >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 6th trial within 2 minutes\n%s", stderr.String())
		}
	}
	time.Sleep(150 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	last := lines[len(lines)-1]
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailure || !strings.Contains(last, "interrupted") || !strings.Contains(last, "--resume") {
		t.Errorf("exit %v, last line %q", err, last)
	}
	l, err := ledger.Read(filepath.Join(out, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if l.End != nil || len(l.Open()) != 0 {
		t.Errorf("ledger: end %v, %d open trials (the interrupted one must be recorded as failed)", l.End, len(l.Open()))
	}
	checkClean(t, w, before, filepath.Join(out, "ledger.jsonl"))
}

// TestTrainDemo runs train end to end on the demo workload, started by
// train itself: observe, analyze, synthesize, refine with the demo's
// benchmark; every stage's output is there and the workload is stopped.
func TestTrainDemo(t *testing.T) {
	needTracing(t)
	schedulertest.NeedBackend(t, cfs.New(cfs.Options{}))
	tt := buildCLI(t)
	bin := testkit.Workload(t)
	dir := t.TempDir()
	stats := filepath.Join(dir, "wl.stats")
	out := filepath.Join(dir, "train")
	// 40 trials hold round 1's first block beside the final (12) for up
	// to 26 candidates: on a loaded machine the traced threads are not hot,
	// synthesis makes another profile, and its 17 racing candidates'
	// block (19) did not fit in 30.
	args := append([]string{"train", "--id", "demo-workload", "--out", out, "--duration", "2s", "--bench", demoBench(t, stats, 0.3),
		"--max-trials", "40"}, shortRun...)
	args = append(args, "--", bin, "--dir", dir, "--stats", stats)
	b, err := exec.Command(tt, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("train: %v\n%s", err, b)
	}
	if !regexp.MustCompile(`train: the benchmark ran [1-9][0-9]* times while observe traced`).Match(b) {
		t.Errorf("train traced the workload without its benchmark running:\n%s", b)
	}
	for _, f := range []string{"observe/trace.pftrace", "observe/snapshot.json", "analysis.json", "refine/ledger.jsonl", "refine/REPORT.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("train left no %s", f)
		}
	}
	if ps, _ := filepath.Glob(filepath.Join(out, "profiles", "demo-workload", "*.toml")); len(ps) != 1 {
		t.Errorf("synthesized profiles: %v", ps)
	}
	if pg, _ := exec.Command("pgrep", "-f", bin).Output(); len(pg) > 0 {
		t.Errorf("the workload train started still runs: %s", pg)
	}
}
