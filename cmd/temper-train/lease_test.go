package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"temper.codes/temper-train/internal/need"
)

// holdLeaseEnv makes the test binary TestLeaseHolder: it takes the node's
// lease, says "held" on stdout and releases it when its stdin closes.
const holdLeaseEnv = "TEMPER_TEST_HOLD_LEASE"

// TestLeaseHolder is not a test: it is the other run of the lease tests,
// started as a process of its own (a process holds one lease at most).
func TestLeaseHolder(t *testing.T) {
	if os.Getenv(holdLeaseEnv) == "" {
		t.Skip("the lease holder of TestLease*, run as their subprocess")
	}
	// Another run on the machine (another test binary) may hold the lease
	// for a while: wait for it.
	l, err := (&refineFlags{waitLock: 10 * time.Minute}).takeNode(context.Background(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}

// holdLease starts TestLeaseHolder and waits until it holds the node's
// lease; release (also called when the test ends) makes it give the lease
// up and waits for it to exit.
func holdLease(t *testing.T) (pid int, release func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), holdLeaseEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	// A child that outlives the command (killed) must not hold Wait on
	// the pipe: once it has exited, Wait returns within WaitDelay.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { stdin.Close(); cmd.Wait() }) }
	t.Cleanup(release)
	held := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() && sc.Text() != "held" {
		}
		held <- sc.Err() == nil && sc.Text() == "held"
		io.Copy(io.Discard, stdout)
	}()
	select {
	case ok := <-held:
		if !ok {
			t.Fatalf("the lease holder exited without the lease:\n%s", stderr.String())
		}
	case <-time.After(10 * time.Minute):
		t.Fatalf("the lease holder did not get the lease in 10 minutes:\n%s", stderr.String())
	}
	return cmd.Process.Pid, release
}

// TestLeaseRefused: while another run owns the node, refine, train and
// canary refuse at once, before they change anything or write their
// output, with one line naming the owner and how to wait for it.
func TestLeaseRefused(t *testing.T) {
	need.Root(t, "to take the node's lease")
	tt := buildCLI(t)
	prof := writeProfile(t)
	dir := t.TempDir()
	owner, _ := holdLease(t)
	pid := strconv.Itoa(owner)
	common := []string{"--pid", pid, "--bench", "true", "--adapter", "jsonl", "--backend", "cfs"}
	for _, args := range [][]string{
		append([]string{"refine", prof, "--out", filepath.Join(dir, "refine")}, common...),
		append([]string{"train", "--id", "x", "--out", filepath.Join(dir, "train")}, common...),
		append([]string{"canary", "--id", "x", "--interval", "1m", "--out", filepath.Join(dir, "canary")}, common...),
	} {
		t.Run(args[0], func(t *testing.T) {
			start := time.Now()
			b, err := exec.Command(tt, args...).CombinedOutput()
			took := time.Since(start)
			msg := strings.TrimSpace(string(b))
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
				t.Errorf("exit %v, want %d; output %q", err, exitFailure, msg)
			}
			if strings.Contains(msg, "\n") || !strings.Contains(msg, "pid "+pid+" ") || !strings.Contains(msg, "--wait-lock") {
				t.Errorf("output %q: want one line naming the owner (pid %s) and --wait-lock", msg, pid)
			}
			if took > 10*time.Second {
				t.Errorf("refused after %v: want at once", took)
			}
			if _, err := os.Stat(filepath.Join(dir, args[0])); err == nil {
				t.Errorf("a refused %s wrote its output directory", args[0])
			}
		})
	}
}

// TestLeaseWait: with --wait-lock a run waits for the owner, and goes on
// as soon as the owner releases the lease (here to read its profile, which
// does not exist: the error after the lease is the proof).
func TestLeaseWait(t *testing.T) {
	need.Root(t, "to take the node's lease")
	tt := buildCLI(t)
	_, release := holdLease(t)
	const hold = 2 * time.Second
	go func() { time.Sleep(hold); release() }()
	missing := filepath.Join(t.TempDir(), "missing.toml")
	start := time.Now()
	b, err := exec.Command(tt, "refine", missing, "--pid", strconv.Itoa(os.Getpid()), "--bench", "true", "--adapter", "jsonl",
		"--backend", "cfs", "--wait-lock", "30s").CombinedOutput()
	took := time.Since(start)
	msg := string(b)
	if err == nil || !strings.Contains(msg, "missing.toml") || strings.Contains(msg, "owned by another run") {
		t.Errorf("exit %v, output %q: want the error of reading the profile, after the lease", err, msg)
	}
	if took < hold || took > 25*time.Second {
		t.Errorf("took %v: want the owner's %v and a little more", took, hold)
	}
}
