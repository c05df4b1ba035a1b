package scx

// Diagnostics for the VM tests: when the kernel disables the scheduler in
// the middle of a test, the failure should name the task that starved and
// say why it could not run (its affinity, class, kthread-ness) without a
// second, instrumented run. One such ejection (an RCU stall naming only a
// pid) once took a rerun to explain.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/procfs"
)

const (
	pfKthread = 0x00200000 // PF_KTHREAD, include/linux/sched.h
)

var policyNames = map[string]string{
	"0": "normal", "1": "fifo", "2": "rr", "3": "batch", "5": "idle", "6": "deadline", "7": "ext",
}

// describeTask is one line on a thread: comm, allowed CPUs, scheduling
// policy and priority, kthread and per-CPU-ness, and state. Threads of
// higher classes (fifo, rr, deadline) are not sched_ext's to run; per-CPU
// kthreads can run nowhere but their CPU.
func describeTask(tid int) string {
	dir := "/proc/" + strconv.Itoa(tid)
	comm, err := os.ReadFile(dir + "/comm")
	if err != nil {
		return fmt.Sprintf("%d: gone (%v)", tid, err)
	}
	var cpus, state string
	if b, err := os.ReadFile(dir + "/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				cpus = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "State:"); ok {
				state = strings.TrimSpace(v)
			}
		}
	}
	desc := fmt.Sprintf("%d %q cpus=%s state=%q", tid, strings.TrimSpace(string(comm)), cpus, state)
	if b, err := os.ReadFile(dir + "/stat"); err == nil {
		if f, err := procfs.StatFields(b); err == nil && len(f) > 41-3 {
			// proc(5) field N is f[N-3]: 9 flags, 19 nice, 40 rt_priority, 41 policy.
			flags, _ := strconv.ParseUint(f[9-3], 10, 64)
			pol := policyNames[f[41-3]]
			if pol == "" {
				pol = "policy " + f[41-3]
			}
			desc += fmt.Sprintf(" policy=%s rtprio=%s nice=%s flags=%#x", pol, f[40-3], f[19-3], flags)
			if flags&pfKthread != 0 {
				desc += " kthread"
				if !strings.ContainsAny(cpus, ",-") {
					desc += " per-CPU"
				}
			}
		}
	}
	if b, err := os.ReadFile(dir + "/sched"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "ext.enabled") {
				desc += " " + strings.Join(strings.Fields(l), "")
			}
		}
	}
	return desc
}

// taskSnapshot describes every thread now, keyed by tid: taken before a
// test loads the machine, so a starved thread that exits before the report
// is still named.
func taskSnapshot() map[int]string {
	snap := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
	for _, d := range dirs {
		tid, err := strconv.Atoi(filepath.Base(d))
		if err == nil {
			snap[tid] = describeTask(tid)
		}
	}
	return snap
}

// kernelLog returns the kernel's log buffer, message text only.
func kernelLog() ([]string, error) {
	fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var lines []string
	buf := make([]byte, 8192)
	for {
		n, err := syscall.Read(fd, buf)
		if errors.Is(err, syscall.EAGAIN) {
			return lines, nil
		}
		if errors.Is(err, syscall.EPIPE) { // overwritten while reading: go on
			continue
		}
		if err != nil {
			return lines, err
		}
		// "prio,seq,usec,flags[,...];text\n" and continuation lines.
		rec := string(buf[:n])
		head, text, ok := strings.Cut(rec, ";")
		if !ok {
			continue
		}
		f := strings.Split(head, ",")
		if len(f) >= 3 {
			if us, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				text = fmt.Sprintf("[%12.6f] %s", float64(us)/1e6, text)
			}
		}
		lines = append(lines, strings.TrimRight(strings.SplitN(text, "\n", 2)[0], "\n"))
	}
}

var (
	// rcu: 	Tasks blocked on level-0 rcu_node (CPUs 0-3): P55/1:b..l
	rcuTaskRe = regexp.MustCompile(`\bP(\d+)(?:/\d+)?:`)
	// sched_ext: ... runnable task stall (kworker/0:1[55] failed to run for 30.1s)
	scxStallRe = regexp.MustCompile(`\[(\d+)\] failed to run`)
)

// stalledTasks returns the tids the kernel log names as stalled: tasks
// blocking an RCU grace period and runnable tasks sched_ext's watchdog
// caught.
func stalledTasks(log []string) []int {
	var tids []int
	for _, l := range log {
		var ms [][]string
		switch {
		case strings.Contains(l, "rcu") && strings.Contains(l, "blocked"):
			ms = rcuTaskRe.FindAllStringSubmatch(l, -1)
		case strings.Contains(l, "sched_ext"):
			ms = scxStallRe.FindAllStringSubmatch(l, -1)
		}
		for _, m := range ms {
			if tid, err := strconv.Atoi(m[1]); err == nil && !slices.Contains(tids, tid) {
				tids = append(tids, tid)
			}
		}
	}
	return tids
}

// explainEjection logs why the scheduler left the enabled state: the exit
// info ops.exit recorded, the kernel's RCU and sched_ext lines, and each
// task those lines name, as it was before the test (before) and now.
func explainEjection(t *testing.T, a *Applied, before map[int]string) {
	t.Helper()
	info, ok := a.ExitInfo()
	for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		info, ok = a.ExitInfo()
	}
	if ok {
		t.Logf("ejection: %s", info)
	} else if info, err := a.readExit(); err == nil {
		t.Logf("ejection (read directly): %s", info)
	} else {
		t.Logf("ejection: no exit info (%v)", err)
	}
	log, err := kernelLog()
	if err != nil {
		t.Logf("kernel log: %v", err)
	}
	for _, l := range log {
		if strings.Contains(l, "rcu") || strings.Contains(l, "sched_ext") {
			t.Logf("kernel: %s", l)
		}
	}
	for _, tid := range stalledTasks(log) {
		t.Logf("stalled task before the test: %s", orGone(before[tid]))
		t.Logf("stalled task now:             %s", describeTask(tid))
	}
}

func orGone(s string) string {
	if s == "" {
		return "(not in the snapshot)"
	}
	return s
}

// TestStalledTasks reads the tids out of the kernel lines of the one RCU
// stall ejection seen in make vmtest, and of a sched_ext watchdog stall.
func TestStalledTasks(t *testing.T) {
	log := []string{
		"[   51.585540] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
		"[   51.587422] rcu: \tTasks blocked on level-0 rcu_node (CPUs 0-3): P55/1:b..l P61/2:b..l",
		"[   51.591232] rcu: \t(detected by 0, t=5252 jiffies, g=37, q=5 ncpus=4)",
		"[   52.448878] sched_ext: BPF scheduler \"temper_layered\" disabled (runtime error)",
		"[   60.000000] sched_ext: temper_layered: runnable task stall (kworker/0:1[12] failed to run for 30.52s)",
	}
	if got, want := stalledTasks(log), []int{55, 61, 12}; !slices.Equal(got, want) {
		t.Errorf("stalledTasks = %v, want %v", got, want)
	}
	// describeTask works on any Linux: this test's own thread.
	if d := describeTask(os.Getpid()); !strings.Contains(d, "cpus=") || !strings.Contains(d, "policy=") {
		t.Errorf("describeTask(self) = %q lacks cpus or policy", d)
	}
}
