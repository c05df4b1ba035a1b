package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary a run that starts a trial and waits to be
// killed: the crashed refine of TestRunParentKilled.
const helperEnv = "BENCH_TEST_HELPER"

func TestMain(m *testing.M) {
	if pidFile := os.Getenv(helperEnv); pidFile != "" {
		jl, _ := Lookup("jsonl")
		// sh writes its pid, then becomes sleep (exec keeps the pid).
		argv := []string{"/bin/sh", "-c", `echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 300`, pidFile}
		_, err := Run(context.Background(), Command{Argv: argv, Adapter: jl})
		fmt.Fprintln(os.Stderr, "helper: Run returned:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestRunParentKilled: a trial whose runner is SIGKILLed dies with it
// (PR_SET_PDEATHSIG), so a crashed refine leaves no load tool running.
func TestRunParentKilled(t *testing.T) {
	marker := markEnv(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+pidFile)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatalf("pid file holds %q", b)
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the helper's trial did not start in 30s")
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	gone := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			gone = true
			break
		}
	}
	if !gone {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("trial %d outlived its SIGKILLed runner", pid)
	}
	noneLeft(t, marker)
}
