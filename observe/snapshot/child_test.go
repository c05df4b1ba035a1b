package snapshot

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The tests observe a real multi-threaded process: the test binary run
// again with childEnv set. Its threads are OS threads pinned to goroutines,
// each named with prctl(PR_SET_NAME) so the snapshot can be checked against
// known comms.
const childEnv = "TEMPER_SNAPSHOT_TEST_CHILD"

// Names the child gives its threads. The third has a space and parentheses
// in it, which a naive /proc/<pid>/stat parser splits wrongly.
const (
	sleeperA  = "snap-sleep-a"
	sleeperB  = "snap-nice5"
	oddName   = "a) b (c)"
	burnName  = "snap-burn"
	lateName  = "snap-late"
	exitName  = "snap-exit"
	niceValue = 5
)

// init keeps the child's main thread to the main goroutine (an init-time
// LockOSThread holds through main), so that no named thread is the main
// thread, which the runtime never ends.
func init() {
	if os.Getenv(childEnv) != "" {
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

// runChild is the observed process. It starts its named threads, prints
// "ready name=tid ...", then obeys commands on stdin until EOF:
// "spawn" starts a thread named lateName and prints "late <tid>";
// "exit" ends the thread named exitName and prints "exited <tid>".
func runChild(mode string) int {
	type started struct {
		name string
		tid  int
	}
	ready := make(chan started)
	stop := make(chan struct{})
	// thread runs body on a fresh OS thread named name. When body returns,
	// the goroutine exits still locked, and the runtime ends the thread.
	thread := func(name string, nice bool, body func()) {
		go func() {
			runtime.LockOSThread()
			setThreadName(name)
			if nice {
				if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), niceValue); err != nil {
					fmt.Fprintln(os.Stderr, "setpriority:", err)
					os.Exit(3)
				}
			}
			ready <- started{name, unix.Gettid()}
			body()
		}()
	}
	sleep := func() {
		ts := unix.NsecToTimespec(int64(2 * time.Millisecond))
		for {
			unix.Nanosleep(&ts, nil)
		}
	}
	var spinSink atomic.Int64
	burn := func() {
		for i := int64(0); ; i++ {
			spinSink.Store(i)
		}
	}

	thread(sleeperA, false, sleep)
	thread(sleeperB, true, sleep)
	thread(oddName, false, sleep)
	thread(exitName, false, func() {
		ts := unix.NsecToTimespec(int64(time.Millisecond))
		for {
			select {
			case <-stop:
				return
			default:
				unix.Nanosleep(&ts, nil)
			}
		}
	})
	n := 4
	if mode == "burn" {
		// Two spinning threads want two CPUs, so a half-CPU quota binds
		// even when other work on the host takes some of the CPU time.
		thread(burnName, false, burn)
		thread(burnName+"2", false, burn)
		n += 2
	}
	tids := map[string]int{}
	var line []string
	for range n {
		s := <-ready
		tids[s.name] = s.tid
		line = append(line, s.name+"="+strconv.Itoa(s.tid))
	}
	fmt.Printf("ready %s\n", strings.Join(line, "\t"))

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "spawn":
			// A goroutine may land on an idle thread that already existed.
			// Such a thread is ended (its locked goroutine returns) until one
			// runs on a thread that is newer than the command.
			old := map[int]bool{}
			ents, _ := os.ReadDir("/proc/self/task")
			for _, e := range ents {
				tid, _ := strconv.Atoi(e.Name())
				old[tid] = true
			}
			for {
				fresh := make(chan bool)
				go func() {
					runtime.LockOSThread()
					if old[unix.Gettid()] {
						fresh <- false
						return // ends this thread
					}
					setThreadName(lateName)
					fresh <- true
					ready <- started{lateName, unix.Gettid()}
					sleep()
				}()
				if <-fresh {
					break
				}
			}
			s := <-ready
			fmt.Printf("late %d\n", s.tid)
		case "exit":
			close(stop)
			tid := tids[exitName]
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err != nil {
					break
				}
			}
			fmt.Printf("exited %d\n", tid)
		}
	}
	return 0
}

// setThreadName sets the calling thread's comm.
func setThreadName(name string) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		panic(err)
	}
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0); err != nil {
		panic(err)
	}
}

// child is a running observed process.
type child struct {
	cmd  *exec.Cmd
	pid  int
	tids map[string]int // thread name → tid
	in   io.WriteCloser
	out  *bufio.Scanner
}

// startChild runs the test binary as an observed process in mode "threads"
// or "burn" (which adds two threads spinning on CPUs). It is killed when the
// test ends.
func startChild(t *testing.T, mode string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := &child{cmd: cmd, pid: cmd.Process.Pid, tids: map[string]int{}, in: in, out: bufio.NewScanner(outPipe)}
	fields := c.expect(t, "ready")
	for _, f := range fields {
		name, tid, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(tid)
		if !ok || err != nil {
			t.Fatalf("child said %q", f)
		}
		c.tids[name] = n
	}
	return c
}

// expect reads the child's next line, which must start with word, and
// returns the rest split on tabs.
func (c *child) expect(t *testing.T, word string) []string {
	t.Helper()
	lines := make(chan string, 1)
	go func() {
		if c.out.Scan() {
			lines <- c.out.Text()
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("child exited before saying %q", word)
		}
		rest, found := strings.CutPrefix(l, word+" ")
		if !found {
			t.Fatalf("child said %q, want %q", l, word)
		}
		return strings.Split(rest, "\t")
	case <-time.After(10 * time.Second):
		t.Fatalf("child did not say %q within 10s", word)
	}
	return nil
}

// command sends a command and returns the tid in the child's answer.
func (c *child) command(t *testing.T, cmd, answer string) int {
	t.Helper()
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		t.Fatal(err)
	}
	f := c.expect(t, answer)
	tid, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatalf("child answered %q", f)
	}
	return tid
}
