//go:build linux

package record

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/observe"
	"temper.codes/temper-train/observe/internal/recordtest"
)

// TestRecordRedis traces a real redis-server from Debian under
// redis-benchmark. Redis serves every command on its main thread (an event
// loop woken by the network); background threads (bio_*) close files, fsync
// the AOF and free memory lazily. The test checks the trace against that
// documented structure and against /proc.
func TestRecordRedis(t *testing.T) {
	requireRoot(t)
	server := need.Tool(t, "redis-server", "redis-server")
	bench := need.Tool(t, "redis-benchmark", "redis-tools")
	port := testkit.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	srv := testkit.StartServer(t, server, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--daemonize", "no")
	srv.WaitReady(t, 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		fmt.Fprintf(c, "PING\r\n")
		buf := make([]byte, 16)
		n, _ := c.Read(buf)
		return strings.HasPrefix(string(buf[:n]), "+PONG")
	})
	pid := srv.Cmd.Process.Pid

	load := exec.Command(bench, "-h", "127.0.0.1", "-p", fmt.Sprint(port), "-c", "20", "-n", "10000000", "-t", "set,get", "-q")
	load.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { load.Process.Kill(); load.Wait() })
	time.Sleep(300 * time.Millisecond) // connections up

	// /proc is read at both edges of the window while the load generator is
	// stopped, so the server is idle then and the traced window and the
	// /proc window count the same switches, however long attaching or
	// detaching takes on a busy machine.
	stop := func() { load.Process.Signal(syscall.SIGSTOP); time.Sleep(100 * time.Millisecond) }
	stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var buf bytes.Buffer
	var before, after []recordtest.Switches
	tids := threadIDs(t, pid)
	done := make(chan struct{})
	res, err := Run(ctx, &buf, Options{Tgids: []int{pid}, Duration: time.Minute,
		OnAttached: func() {
			before = recordtest.ReadSwitches(t, pid, tids)
			load.Process.Signal(syscall.SIGCONT)
			go func() {
				defer close(done)
				time.Sleep(2 * time.Second)
				stop()
				after = recordtest.ReadSwitches(t, pid, tids)
				cancel()
			}()
		}})
	if before == nil { // failed before attaching: no window to wait for
		t.Fatalf("Run: %v", err)
	}
	<-done
	load.Process.Signal(syscall.SIGCONT)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Run: %d events, %.1f bytes/event, lost %v, stop %s", res.Events,
		float64(res.Bytes)/float64(max(res.Events, 1)), res.Lost, res.StopReason)
	if res.TotalLost() != 0 {
		t.Errorf("lost %d events", res.TotalLost())
	}

	r, err := observe.NewReader(bytes.NewReader(buf.Bytes()), "redis.pftrace")
	if err != nil {
		t.Fatal(err)
	}
	threads := observe.NewThreads()
	sched := observe.NewSched(threads)
	outs := map[int32]int64{}
	wakers := map[string]int64{} // who wakes the main thread
	loadPid := int32(load.Process.Pid)
	err = observe.ForEach(r, func(ev *observe.Event) error {
		sched.Add(ev)
		switch ev.Kind {
		case observe.KindSwitch:
			outs[ev.PrevTid]++
		case observe.KindWaking:
			if ev.Tid != int32(pid) {
				break
			}
			switch th := threads.Lookup(ev.Pid); {
			case ev.IRQ != observe.IRQNone:
				wakers["interrupt"]++
			case th != nil && th.Tgid == loadPid:
				wakers["redis-benchmark"]++
			case th != nil && th.Tgid == int32(pid):
				wakers["redis itself"]++
			default:
				wakers["other"]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sched.Finish()
	t.Logf("main thread woken by %v", wakers)

	// Every thread of the server is in the trace with its name.
	names := map[string]bool{}
	for i, tid := range tids {
		th := threads.Lookup(int32(tid))
		if th == nil {
			t.Errorf("thread %d not in the trace", tid)
			continue
		}
		names[th.Name] = true
		delta := after[i].Vol + after[i].Nonvol - before[i].Vol - before[i].Nonvol
		// The server runs on while /proc is read, just after attaching and
		// just after detaching, so the two windows differ at their edges
		// by a few switches either way.
		t.Logf("%6d %-16s switch-outs %6d, /proc delta %6d", tid, th.Name, outs[int32(tid)], delta)
		if diff := delta - outs[int32(tid)]; diff < -5-delta/50 || diff > 5+delta/50 {
			t.Errorf("thread %d (%s): %d switch-outs traced, /proc counted %d", tid, th.Name, outs[int32(tid)], delta)
		}
	}
	if !names["redis-server"] {
		t.Errorf("no redis-server main thread among %v", names)
	}
	hasBio := false
	for n := range names {
		hasBio = hasBio || strings.HasPrefix(n, "bio_")
	}
	if !hasBio {
		t.Errorf("no bio_* background thread among %v", names)
	}
	// The event loop is woken by the network: requests arrive from the
	// load generator (loopback delivery runs in its context or in softirq),
	// not from redis's own threads.
	var total int64
	for _, n := range wakers {
		total += n
	}
	if total < 100 {
		t.Fatalf("main thread woken %d times in 2 s of load, want ≥ 100", total)
	}
	if own := wakers["redis itself"]; own*10 > total {
		t.Errorf("main thread woken by its own threads %d of %d times; want the network", own, total)
	}
}

// threadIDs lists a process's threads.
func threadIDs(t *testing.T, pid int) []int32 {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var tids []int32
	for _, e := range ents {
		var tid int32
		if _, err := fmt.Sscan(e.Name(), &tid); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}
