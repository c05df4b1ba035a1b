package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/observe"
	"temper.codes/temper-train/observe/record"
	"temper.codes/temper-train/observe/snapshot"
)

// needTracing needs root to load BPF, and fails the test if tracing is not
// possible for another reason.
func needTracing(t *testing.T) {
	t.Helper()
	need.Root(t, "to load BPF")
	if err := record.CheckTracing(); err != nil {
		t.Fatal(err)
	}
}

// buildWorkload is testdata/workload (13 named threads), built for the test.
func buildWorkload(t *testing.T) string {
	t.Helper()
	return testkit.Workload(t)
}

var workloadThreads = []string{"wl-main", "wl-acceptor", "wl-worker-0", "wl-worker-1", "wl-worker-2", "wl-worker-3",
	"wl-logger", "wl-syncer", "wl-compute-0", "wl-compute-1", "wl-timer", "wl-idle-0", "wl-idle-1"}

// TestObserveCommand runs `observe -- workload` end to end and checks both
// output files and the closing summary.
func TestObserveCommand(t *testing.T) {
	needTracing(t)
	bin := buildWorkload(t)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI("observe", "--duration", "1500ms", "--out", out, "--", bin, "--dir", t.TempDir())
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	t.Logf("stdout:\n%s", stdout)
	for _, want := range []string{"stopped   after", ": duration", "lost      none", "13 threads of the target", "wl-compute-0"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	snap, err := snapshot.Load(filepath.Join(out, "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, th := range snap.Threads {
		got[th.Comm] = true
		// The command starts just before the snapshot's first half: its
		// threads are (usually) created during the trace; the process's
		// first thread is there at the beginning.
		if th.End == nil || (th.Tid == th.Tgid && th.Begin == nil) {
			t.Errorf("thread %d (%s): begin %v, end %v", th.Tid, th.Comm, th.Begin != nil, th.End != nil)
		}
	}
	for _, name := range workloadThreads {
		if !got[name] {
			t.Errorf("snapshot lacks thread %s", name)
		}
	}
	if snap.Events.Total == 0 || snap.Events.Lost() != 0 || snap.Trace.Attach == "" {
		t.Errorf("snapshot events %+v, attach %q", snap.Events, snap.Trace.Attach)
	}
	r, err := observe.Open(filepath.Join(out, "trace.pftrace"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sum, err := observe.Summarize(r)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, th := range sum.Threads {
		names[th.Name] = true
	}
	for _, name := range workloadThreads {
		if !names[name] {
			t.Errorf("trace lacks thread %s", name)
		}
	}
}

// TestObserveBounds checks --max-events stops the trace at exactly that
// many events and says why, and that --agent-url embeds the agent's answer.
func TestObserveBounds(t *testing.T) {
	needTracing(t)
	bin := buildWorkload(t)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"profile":"none","node":"test"}`)
	}))
	defer agent.Close()
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI("observe", "-q", "--max-events", "500", "--agent-url", agent.URL+"/observe",
		"--out", out, "--", bin, "--dir", t.TempDir())
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, ": max-events") || !strings.Contains(stdout, "events    500 ") {
		t.Errorf("summary does not show the max-events stop at 500:\n%s", stdout)
	}
	snap, err := snapshot.Load(filepath.Join(out, "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Events.Total != 500 {
		t.Errorf("snapshot says %d events, want 500", snap.Events.Total)
	}
	var body bytes.Buffer
	if snap.Agent != nil && snap.Agent.Begin != nil {
		json.Compact(&body, snap.Agent.Begin.Body)
	}
	if snap.Agent == nil || !snap.Agent.Begin.OK() || !snap.Agent.End.OK() ||
		body.String() != `{"profile":"none","node":"test"}` {
		t.Errorf("agent answer not embedded: begin %+v end %+v", snap.Agent.Begin, snap.Agent.End)
	}
}

// TestObserveInterrupt sends SIGINT to a running observe: it must stop,
// exit 0 and leave a complete trace and snapshot.
func TestObserveInterrupt(t *testing.T) {
	needTracing(t)
	wl := buildWorkload(t)
	tt := buildCLI(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cmd := exec.Command(tt, "observe", "--duration", "1m", "--out", out, "--", wl, "--dir", dir)
	stderr, _ := cmd.StderrPipe()
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "tracing ") {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	time.Sleep(700 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("observe after SIGINT: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), ": interrupted") {
		t.Errorf("summary does not say interrupted:\n%s", stdout.String())
	}
	r, err := observe.Open(filepath.Join(out, "trace.pftrace"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if sum, err := observe.Summarize(r); err != nil || len(sum.Threads) < len(workloadThreads) {
		t.Errorf("trace after SIGINT: err %v", err)
	}
	if _, err := snapshot.Load(filepath.Join(out, "snapshot.json")); err != nil {
		t.Error(err)
	}
}

// TestObserveBadInput: usage errors exit 2, failures exit 1 with one line,
// and neither leaves an output directory behind.
func TestObserveBadInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	out := filepath.Join(dir, "out")
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"observe"}, exitUsage, "no target"},
		{[]string{"observe", "--pid", "1", "--cgroup", "/x"}, exitUsage, "more than one target"},
		{[]string{"observe", "--pid", "1", "--max-bytes", "lots"}, exitUsage, "--max-bytes"},
		{[]string{"observe", "--pid", "1", "--buffer-size", "3000"}, exitUsage, "power of two"},
		{[]string{"observe", "--pid", "1", "--attach", "kprobe"}, exitUsage, "--attach"},
		{[]string{"observe", "--pid", "1", "--duration", "0s"}, exitUsage, "--duration"},
		{[]string{"observe", "stray"}, exitUsage, "after --"},
		{[]string{"observe", "--container", "c", "--pid", "1"}, exitUsage, "container"},
	}
	if record.CheckTracing() == nil {
		cases = append(cases,
			struct {
				args []string
				code int
				err  string
			}{[]string{"observe", "--pid", "999999999", "--out", out}, exitFailure, "999999999"},
			struct {
				args []string
				code int
				err  string
			}{[]string{"observe", "--pid", "1", "--out", file}, exitFailure, "not a directory"},
			struct {
				args []string
				code int
				err  string
			}{[]string{"observe", "--out", out, "--", filepath.Join(dir, "no-such-program")}, exitFailure, "no-such-program"},
		)
	}
	for _, c := range cases {
		code, _, stderr := runCLI(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.err)
		}
		if c.code == exitFailure && strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: error is not one line: %q", c.args, stderr)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a failed observe left %s behind", out)
	}
}

// buildCLI builds the temper-train binary for tests that run it as a process.
func buildCLI(t *testing.T) string {
	t.Helper()
	tt := filepath.Join(t.TempDir(), "temper-train")
	if out, err := exec.Command("go", "build", "-o", tt, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return tt
}

// TestObserveWithoutPrivileges runs observe as an unprivileged user: a
// one-line error that says what to do, exit 1, nothing written.
func TestObserveWithoutPrivileges(t *testing.T) {
	need.Root(t, "to switch to an unprivileged user")
	tt := buildCLI(t)
	// t.TempDir's parent is private to root: use a world-readable directory.
	dir, err := os.MkdirTemp("", "observe-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	bin := filepath.Join(dir, "temper-train")
	if b, err := os.ReadFile(tt); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copy binary: %v", err)
	}
	tt = bin
	out := filepath.Join(dir, "out")
	cmd := exec.Command(tt, "observe", "--pid", "1", "--out", out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
		t.Fatalf("exit %v, want %d; output %q", err, exitFailure, b)
	}
	msg := strings.TrimSpace(string(b))
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "root") || !strings.Contains(msg, "CAP_BPF") {
		t.Errorf("error %q: want one line naming root and CAP_BPF", msg)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s created although observe could not trace", out)
	}
}
