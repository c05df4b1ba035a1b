//go:build linux

package analyze

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/observe/record"
	"temper.codes/temper-train/observe/snapshot"
)

// TestRecordAndAnalyze records the workload afresh with observe's BPF tracer
// and a snapshot around it, as `temper-train observe` does, and checks that
// the analysis of that Perfetto trace finds the documented classes
// (workloadClasses) and runs the snapshot-based lint.
func TestRecordAndAnalyze(t *testing.T) {
	need.Root(t, "to load BPF")
	if err := record.CheckTracing(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := testkit.Workload(t)
	cmd := exec.Command(bin, "--dir", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "ready" {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	time.Sleep(200 * time.Millisecond) // past start-up
	pid := cmd.Process.Pid

	ctx := context.Background()
	snap, err := snapshot.Begin(ctx, snapshot.Options{Tgids: []int{pid}, Target: "workload"})
	if err != nil {
		t.Fatal(err)
	}
	tracePath := filepath.Join(dir, "trace.pftrace")
	f, err := os.Create(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := record.Run(ctx, f, record.Options{Tgids: []int{pid}, Duration: 2 * time.Second,
		Siblings: snap.Topology.SiblingLists()})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.End(ctx); err != nil {
		t.Fatal(err)
	}
	snapPath := filepath.Join(dir, "snapshot.json")
	if err := snap.WriteFile(snapPath); err != nil {
		t.Fatal(err)
	}
	loaded, err := snapshot.Load(snapPath)
	if err != nil {
		t.Fatal(err)
	}
	a, err := File(tracePath, Options{Snapshot: loaded})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events (lost %d)", res.Events, res.TotalLost())
	if a.Target.Mode != TargetSnapshot || a.Target.Threads != 13 {
		t.Errorf("target %+v, want the workload's 13 threads from the snapshot", a.Target)
	}
	for _, th := range a.Threads {
		if want := workloadClasses[th.Family]; th.Class != want {
			t.Errorf("%s/%d: class %s, want %s (own %s, scores %+v)", th.Comm, th.Tid, th.Class, want, th.OwnClass, th.Scores)
		}
	}
	smt := false
	for _, c := range loaded.Topology.Cores {
		smt = smt || len(c.CPUs) > 1
	}
	if l := a.Lint.SMT; l.Checked != smt || (!smt && !strings.HasPrefix(l.Status, "no SMT on this machine")) {
		t.Errorf("SMT lint %+v on a machine with SMT %v", l, smt)
	}
	if strings.HasPrefix(a.Lint.CFS.Status, "no snapshot") {
		t.Errorf("CFS lint ignored the snapshot: %q", a.Lint.CFS.Status)
	}
	if testing.Verbose() {
		a.Report(os.Stdout, ReportOptions{Edges: 10})
	}
}
