package tracefs

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/mountinfo"
	"temper.codes/temper-train/internal/need"
)

// Accepted and ignored, so that the documented command
// `go test ./internal/tracefs/ ./observe/ -update-recorded` works: go test
// passes the flag to every package's test binary, and an undefined flag fails
// the run. The recording it updates lives in observe/recorded_linux_test.go.
var _ = flag.Bool("update-recorded", false, "no effect in this package (see observe/recorded_linux_test.go)")

func TestCheckEventName(t *testing.T) {
	for _, ev := range []string{"sched/sched_switch", "task/task_newtask"} {
		if err := checkEventName(ev); err != nil {
			t.Errorf("%q: %v", ev, err)
		}
	}
	for _, ev := range []string{"", "sched", "sched/", "/sched_switch", "sched/../x", "../sched/x", "a/b/c", "sched/sched switch"} {
		if err := checkEventName(ev); err == nil {
			t.Errorf("%q accepted", ev)
		}
	}
}

func TestCheckRoot(t *testing.T) {
	if err := checkRoot(0); err != nil {
		t.Fatal(err)
	}
	err := checkRoot(1000)
	if !errors.Is(err, ErrNotRoot) {
		t.Fatalf("got %v, want ErrNotRoot", err)
	}
	if got, want := err.Error(), "tracefs: recording needs root (running as euid 1000)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func TestParseLost(t *testing.T) {
	stats := `entries: 12
overrun: 3
commit overrun: 1
bytes: 4096
oldest event ts:     0.000000
now ts:   746.392440
dropped events: 2
read events: 7
`
	n, err := parseLost([]byte(stats))
	if err != nil || n != 6 {
		t.Fatalf("parseLost = %d, %v; want 6", n, err)
	}
	if _, err := parseLost([]byte("entries: 1\n")); err == nil {
		t.Error("stats without overrun line accepted")
	}
	if _, err := parseLost([]byte("overrun: x\n")); err == nil {
		t.Error("non-numeric overrun accepted")
	}
}

func TestTracefsMounts(t *testing.T) {
	info := `22 27 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
29 22 0:12 / /sys/kernel/tracing rw,relatime shared:12 - tracefs nodev rw
31 22 0:7 / /sys/kernel/debug rw,relatime shared:14 - debugfs debugfs rw
40 31 0:12 / /sys/kernel/debug/tracing rw,relatime - tracefs tracefs rw
41 22 0:13 / /mnt/trace\040fs rw - tracefs nodev rw
`
	mounts, err := mountinfo.Parse(strings.NewReader(info))
	if err != nil {
		t.Fatal(err)
	}
	got := tracefsMounts(mounts)
	want := []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing", "/mnt/trace fs"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStalePID(t *testing.T) {
	for name, want := range map[string]int{"temper-123-4": 123, "temper-1-0": 1} {
		if pid, ok := stalePID(name); !ok || pid != want {
			t.Errorf("%s: %d %v", name, pid, ok)
		}
	}
	for _, name := range []string{"temper-", "temper-x-1", "temper-12", "temper-12-x", "other-12-1", "temper-0-1"} {
		if _, ok := stalePID(name); ok {
			t.Errorf("%s accepted", name)
		}
	}
}

// fakeRoot builds a directory tree that looks like tracefs to Start's checks:
// instances/ and the given events. mkdir in it creates an ordinary empty
// directory, so configuring the "instance" fails on its first control file.
func fakeRoot(t *testing.T, events ...string) string {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "instances"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		d := filepath.Join(root, "events", ev)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "enable"), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func instances(t *testing.T, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, "instances"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestMissingEvent(t *testing.T) {
	root := fakeRoot(t, "sched/sched_switch")
	_, err := Start(Options{Root: root})
	if !errors.Is(err, ErrEventMissing) {
		t.Fatalf("got %v, want ErrEventMissing", err)
	}
	if got, want := err.Error(), "tracefs: event sched/sched_waking not available in this kernel"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if n := instances(t, root); len(n) != 0 {
		t.Errorf("instances left behind: %q", n)
	}
}

func TestNoInstancesDir(t *testing.T) {
	_, err := Start(Options{Root: t.TempDir()})
	if !errors.Is(err, ErrNoTracefs) {
		t.Fatalf("got %v, want ErrNoTracefs", err)
	}
}

func TestBadOptions(t *testing.T) {
	root := fakeRoot(t, "sched/sched_switch")
	if _, err := Start(Options{Root: root, Events: []string{"sched_switch"}}); err == nil {
		t.Error("event without system accepted")
	}
	if _, err := Start(Options{Root: root, Events: []string{"sched/sched_switch"}, BufferKB: -1}); err == nil {
		t.Error("negative buffer accepted")
	}
}

// TestRemovedOnError: when configuring the instance fails, Start removes it.
func TestRemovedOnError(t *testing.T) {
	root := fakeRoot(t, "sched/sched_switch")
	_, err := Start(Options{Root: root, Events: []string{"sched/sched_switch"}})
	if err == nil || !strings.Contains(err.Error(), "tracing_on") {
		t.Fatalf("got %v, want a failure to set tracing_on", err)
	}
	if n := instances(t, root); len(n) != 0 {
		t.Errorf("instances left behind: %q", n)
	}
}

// TestRemoveStale: instances of dead processes are removed, others kept.
func TestRemoveStale(t *testing.T) {
	root := fakeRoot(t)
	// A pid that does not exist: above pid_max's usual range is not
	// guaranteed, so find a free one.
	dead := 0
	for p := 4000000; p > 1000; p -= 7919 {
		if _, err := os.Stat("/proc/" + strconv.Itoa(p)); errors.Is(err, os.ErrNotExist) {
			dead = p
			break
		}
	}
	if dead == 0 {
		t.Fatal("no free pid found to stand for a dead recorder")
	}
	keep := []string{"temper-1-1", "temper-" + strconv.Itoa(os.Getpid()) + "-1", "someone-else"}
	for _, n := range append([]string{"temper-" + strconv.Itoa(dead) + "-3"}, keep...) {
		if err := os.Mkdir(filepath.Join(root, "instances", n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removeStale(root)
	if got := strings.Join(instances(t, root), " "); got != "someone-else temper-1-1 temper-"+strconv.Itoa(os.Getpid())+"-1" {
		t.Errorf("left %q", got)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	need.Root(t, "to use tracefs")
}

// globalState is what a recording must leave untouched in the global instance.
func globalState(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []string{"tracing_on", "buffer_size_kb", "options/record-tgid", "trace_clock",
		"events/sched/sched_switch/enable", "events/sched/sched_waking/enable", "events/task/task_newtask/enable"} {
		v, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(f + "=" + strings.TrimSpace(string(v)) + "\n")
	}
	return b.String()
}

// TestLiveSession records a process being started and checks the trace, the
// loss counters, that the global instance was not touched and that Close
// removes the instance.
func TestLiveSession(t *testing.T) {
	requireRoot(t)
	root, err := findOrMount()
	if err != nil {
		t.Fatal(err)
	}
	before := globalState(t, root)
	s, err := Start(Options{BufferKB: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Name(), "temper-"+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("instance name %q", s.Name())
	}
	// The kernel rounds the size up to whole sub-buffers.
	if got, err := os.ReadFile(filepath.Join(s.Dir(), "buffer_size_kb")); err != nil {
		t.Error(err)
	} else if kb, err := strconv.Atoi(strings.TrimSpace(string(got))); err != nil || kb < 4096 || kb > 4096+64 {
		t.Errorf("instance buffer_size_kb = %q, want about 4096", got)
	}
	cmd := exec.Command("/bin/sh", "-c", "exec /bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	child := cmd.Process.Pid
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	var buf bytes.Buffer
	if err := s.WriteTrace(&buf); err != nil {
		t.Fatal(err)
	}
	tr := buf.String()
	for _, want := range []string{
		"sched_switch: prev_comm=",
		"task_newtask: pid=" + strconv.Itoa(child) + " ",
		"sched_process_exit: comm=true pid=" + strconv.Itoa(child) + " ",
		"sched_wakeup_new: comm=",
		"task_rename: pid=" + strconv.Itoa(child) + " ",
	} {
		if !strings.Contains(tr, want) {
			t.Errorf("trace lacks %q", want)
		}
	}
	// record-tgid: the header announces the TGID column, and lines carry it.
	if !regexp.MustCompile(`(?m)^#\s+TASK-PID\s+TGID\s`).MatchString(tr) ||
		!regexp.MustCompile(`(?m)-`+strconv.Itoa(child)+`\s+\(\s*`+strconv.Itoa(child)+`\) \[`).MatchString(tr) {
		t.Errorf("trace header has no TGID column:\n%.600s", tr)
	}
	over, err := s.Overruns()
	if err != nil {
		t.Fatal(err)
	}
	for cpu, n := range over {
		if n != 0 {
			t.Errorf("cpu%d lost %d events", cpu, n)
		}
	}
	t.Logf("instance %s: %d bytes of trace, overruns %v", s.Name(), len(tr), over)
	if after := globalState(t, s.root); after != before {
		t.Errorf("global instance changed:\n%s\nto\n%s", before, after)
	}
	dir := s.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("instance %s still exists after Close: %v", dir, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.WriteTrace(&buf); err == nil {
		t.Error("WriteTrace after Close succeeded")
	}
}

// TestLiveMissingEvent checks the message for an event this kernel lacks.
func TestLiveMissingEvent(t *testing.T) {
	requireRoot(t)
	_, err := Start(Options{Events: []string{"sched/sched_switch", "sched/no_such_event"}})
	if !errors.Is(err, ErrEventMissing) || err.Error() != "tracefs: event sched/no_such_event not available in this kernel" {
		t.Fatalf("got %v", err)
	}
}
