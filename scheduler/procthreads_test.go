package scheduler

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/procfs"
)

// TestListThreadsSelf lists this test process's own threads and checks
// them against what the kernel says directly.
func TestListThreadsSelf(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := os.Getpid(), unix.Gettid()
	threads, err := ListThreads([]int{pid})
	if err != nil {
		t.Fatal(err)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	cg, _ := os.ReadFile("/proc/self/cgroup")
	parsed, _ := procfs.ParseCgroup(cg)
	wantCg := parsed.CPU()
	var sawLeader, sawMe bool
	for i, th := range threads {
		if i > 0 && threads[i-1].Tid >= th.Tid {
			t.Errorf("not sorted by tid: %d after %d", th.Tid, threads[i-1].Tid)
		}
		if th.Tgid != pid || th.Pcomm != strings.TrimSpace(string(comm)) || !strings.HasPrefix(th.Cmdline, os.Args[0]) || th.Cgroup != wantCg {
			t.Errorf("thread %+v: want tgid %d, pcomm %q, cmdline starting %q, cgroup %q", th, pid, comm, os.Args[0], wantCg)
		}
		sawLeader = sawLeader || th.Tid == pid && th.Leader()
		sawMe = sawMe || th.Tid == tid
	}
	if !sawLeader || !sawMe {
		t.Errorf("threads %v lack the leader %d or this thread %d", threads, pid, tid)
	}
	one, err := ReadThread(pid, tid)
	if err != nil || one.Tid != tid || one.Tgid != pid {
		t.Errorf("ReadThread: %+v, %v", one, err)
	}
}

// TestGoneProcesses: processes that exited are left out of lists and give
// ErrThreadGone when asked for alone.
func TestGoneProcesses(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	threads, err := ListThreads([]int{pid})
	if err != nil || len(threads) != 0 {
		t.Errorf("ListThreads of an exited process: %v, %v; want none and no error", threads, err)
	}
	if _, err := ProcessThreads(pid); !errors.Is(err, ErrThreadGone) {
		t.Errorf("ProcessThreads: %v, want ErrThreadGone", err)
	}
	if _, err := TaskStartTime(pid); !errors.Is(err, ErrThreadGone) || !IsGone(err) {
		t.Errorf("TaskStartTime: %v, want ErrThreadGone", err)
	}
}

func TestTaskStartTime(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	f, err := procfs.StatFields(b)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := strconv.ParseUint(f[22-3], 10, 64)
	got, err := TaskStartTime(os.Getpid())
	if err != nil || got != want || got == 0 {
		t.Errorf("TaskStartTime = %d, %v; want %d", got, err, want)
	}
}

// TestZombieIsGone: a process that exited but was not reaped yet has no
// thread left to schedule.
func TestZombieIsGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	for i := 0; ; i++ {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		if f, _ := procfs.StatFields(b); len(f) > 0 && f[0] == "Z" {
			break
		}
		if i > 500 {
			t.Fatal("true did not exit in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := TaskStartTime(pid); !errors.Is(err, ErrThreadGone) {
		t.Errorf("TaskStartTime of a zombie: %v, want ErrThreadGone", err)
	}
}
