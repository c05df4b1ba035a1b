package target

import (
	"bytes"
	"context"
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

	"temper.codes/temper-train/internal/procfs"
)

func TestResolveInvalidSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"nothing", Spec{}, "no target"},
		{"two targets", Spec{Pid: 1, Cgroup: "x"}, "more than one target (pid, cgroup)"},
		{"negative pid", Spec{Pid: -3}, "pid -3"},
		{"container without pod", Spec{Pid: 1, Container: "app"}, `container "app" given without a pod`},
		{"pod without namespace", Spec{Pod: "web"}, "NAMESPACE/NAME"},
		{"pod with empty name", Spec{Pod: "default/"}, "NAMESPACE/NAME"},
		{"pod with two slashes", Spec{Pod: "a/b/c"}, "NAMESPACE/NAME"},
		{"empty program", Spec{Command: []string{""}}, "empty program name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(context.Background(), tc.spec)
			checkErr(t, err, ErrInvalidSpec, tc.want)
		})
	}
}

// TestReadStat: the target's view of /proc/PID/stat is this process's own
// name, parent and start time, and a reaped process is gone.
func TestReadStat(t *testing.T) {
	st, err := readStat(os.Getpid())
	comm, _ := os.ReadFile("/proc/self/comm")
	if err != nil || st.comm != strings.TrimSpace(string(comm)) || st.ppid != os.Getppid() || st.start == 0 || !st.live() {
		t.Errorf("readStat(self) = %+v, %v; want comm %q, ppid %d, a start time, live", st, err, comm, os.Getppid())
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := readStat(cmd.Process.Pid); !procfs.IsGone(err) {
		t.Errorf("readStat of a reaped process: %v, want it gone", err)
	}
}

// descendants lists pid and all processes below it from the kernel's
// /proc/PID/task/*/children files: a different source than the ppid scan
// Refresh uses.
func descendants(t *testing.T, pid int) []int {
	out := []int{pid}
	for _, c := range childPids(t, pid) {
		out = append(out, descendants(t, c)...)
	}
	slices.Sort(out)
	return out
}

// TestResolvePidTree proves that a pid target is the process and every
// descendant, that Refresh follows the tree as it forks, and that
// descendants stay tracked after their parent dies and they are re-parented
// out of the tree.
func TestResolvePidTree(t *testing.T) {
	// sh → (subshell → sleep), sleep: two levels of descendants.
	cmd := exec.Command("sh", "-c", "(sleep 30 & wait) & sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := cmd.Process.Pid
	var all []int
	t.Cleanup(func() {
		for _, p := range all {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	tgt, err := Resolve(context.Background(), Spec{Pid: sh})
	if err != nil {
		t.Fatal(err)
	}
	if tgt.Kind != KindPid || tgt.Pid != sh || tgt.Cgroup != "" || tgt.Pod != nil {
		t.Errorf("target = %+v, want a pid target of %d", tgt, sh)
	}
	if !strings.Contains(tgt.Description, fmt.Sprintf("pid %d (sh)", sh)) {
		t.Errorf("Description = %q", tgt.Description)
	}
	if !slices.Contains(tgt.Tgids, sh) {
		t.Errorf("Tgids = %v, want it to contain %d", tgt.Tgids, sh)
	}

	deadline := time.Now().Add(5 * time.Second)
	for all = descendants(t, sh); len(all) < 4; all = descendants(t, sh) {
		if time.Now().After(deadline) {
			t.Fatalf("the shell did not start its processes: %v", all)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitTgids(t, tgt, all)

	// Kill the shell: its children are re-parented (to init or a
	// subreaper) but stay part of the target.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitTgids(t, tgt, slices.DeleteFunc(slices.Clone(all), func(p int) bool { return p == sh }))
}

// TestResolveThread proves that a thread id resolves to its process.
func TestResolveThread(t *testing.T) {
	self := os.Getpid()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	tid := 0
	for _, e := range tasks {
		if n, _ := strconv.Atoi(e.Name()); n != self {
			tid = n
			break
		}
	}
	if tid == 0 {
		t.Fatal("the test process has a single thread")
	}
	tgt, err := Resolve(context.Background(), Spec{Pid: tid})
	if err != nil {
		t.Fatal(err)
	}
	if tgt.Pid != self || !slices.Contains(tgt.Tgids, self) {
		t.Errorf("thread %d resolved to pid %d with tgids %v, want process %d", tid, tgt.Pid, tgt.Tgids, self)
	}
	if !strings.Contains(tgt.Description, fmt.Sprintf("thread %d", tid)) {
		t.Errorf("Description %q does not say it came from thread %d", tgt.Description, tid)
	}
}

func TestResolveNoSuchPid(t *testing.T) {
	// No pid reaches pid_max.
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Resolve(context.Background(), Spec{Pid: pid})
	checkErr(t, err, ErrNotFound, fmt.Sprintf("no process with pid %d", pid))
}

// TestCommand proves the command target: it starts the command, tracks its
// processes, stops it (SIGTERM, then SIGKILL after the grace period) and
// reports how it ended; a command that ends by itself is not an error.
func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		command  []string
		forks    int           // processes besides the command to wait for before stopping
		waitExit bool          // let the command exit by itself first
		grace    time.Duration // for Stop
		code     int           // want exit code, or -1 for a signal
		signal   syscall.Signal
		minStop  time.Duration // Stop must have waited at least this long
		output   string
	}{
		{name: "stopped by SIGTERM", command: []string{"sleep", "30"}, grace: 5 * time.Second, code: -1, signal: syscall.SIGTERM},
		{name: "children stopped too", command: []string{"sh", "-c", "sleep 30 & sleep 30 & wait"}, forks: 2, grace: 5 * time.Second, code: -1, signal: syscall.SIGTERM},
		{name: "SIGKILL after grace", command: []string{"sh", "-c", `trap "" TERM; sleep 30; sleep 30`}, forks: 1, grace: 300 * time.Millisecond, code: -1, signal: syscall.SIGKILL, minStop: 300 * time.Millisecond},
		{name: "exits by itself with status 3", command: []string{"sh", "-c", "echo hello; exit 3"}, waitExit: true, code: 3, output: "hello\n"},
		{name: "exits by itself with status 0", command: []string{"true"}, waitExit: true, code: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			tgt, err := Resolve(context.Background(), Spec{Command: tc.command, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = tgt.Stop(0) })
			// The command may have forked already when Resolve lists its tree.
			if tgt.Kind != KindCommand || tgt.Cmd == nil || tgt.Pid != tgt.Cmd.Process.Pid || !slices.Contains(tgt.Tgids, tgt.Pid) ||
				(tc.forks == 0 && len(tgt.Tgids) != 1) {
				t.Fatalf("target = %+v, want a command target of its own pid", tgt)
			}
			var tree []int
			if tc.forks > 0 {
				deadline := time.Now().Add(5 * time.Second)
				for tree = descendants(t, tgt.Pid); len(tree) < 1+tc.forks; tree = descendants(t, tgt.Pid) {
					if time.Now().After(deadline) {
						t.Fatalf("command did not start its processes: %v", tree)
					}
					time.Sleep(10 * time.Millisecond)
				}
				waitTgids(t, tgt, tree)
			}
			if tc.waitExit {
				select {
				case <-tgt.Exited():
				case <-time.After(5 * time.Second):
					t.Fatal("command did not exit")
				}
				if got, err := tgt.Refresh(); err != nil || len(got) != 0 {
					t.Errorf("Refresh after exit = %v, %v; want nothing, no error", got, err)
				}
			} else {
				select {
				case <-tgt.Exited():
					t.Fatal("Exited before Stop")
				default:
				}
			}

			start := time.Now()
			state, err := tgt.Stop(tc.grace)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if state.ExitCode() != tc.code {
				t.Errorf("exit code %d (%v), want %d", state.ExitCode(), state, tc.code)
			}
			if ws := state.Sys().(syscall.WaitStatus); tc.signal != 0 && (!ws.Signaled() || ws.Signal() != tc.signal) {
				t.Errorf("ended with %v, want signal %v", state, tc.signal)
			}
			if took < tc.minStop {
				t.Errorf("Stop took %v, want at least the grace period %v", took, tc.minStop)
			}
			if out.String() != tc.output {
				t.Errorf("output %q, want %q", out.String(), tc.output)
			}
			// Stopping again reports the same ending.
			if again, err := tgt.Stop(tc.grace); err != nil || again != state {
				t.Errorf("second Stop = %v, %v; want %v, nil", again, err, state)
			}
			// The whole process group is gone.
			for _, p := range tree {
				waitGone(t, p)
			}
		})
	}
}

// waitGone waits until pid no longer runs (it may linger as a zombie until
// whoever adopted it reaps it).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := readStat(pid)
		if err != nil || !st.live() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d (%s) still runs after Stop", pid, st.comm)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCommandNotFound(t *testing.T) {
	_, err := Resolve(context.Background(), Spec{Command: []string{"temper-no-such-program", "x"}})
	checkErr(t, err, ErrNotFound, `program "temper-no-such-program" not found`)
	_, err = Resolve(context.Background(), Spec{Command: []string{filepath.Join(t.TempDir(), "missing")}})
	checkErr(t, err, ErrNotFound, "not found")
}

func TestStopOtherKinds(t *testing.T) {
	tgt, err := Resolve(context.Background(), Spec{Pid: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	if state, err := tgt.Stop(time.Second); state != nil || err != nil {
		t.Errorf("Stop of a pid target = %v, %v; want nil, nil", state, err)
	}
	if tgt.Exited() != nil {
		t.Error("Exited of a pid target is not nil")
	}
}
