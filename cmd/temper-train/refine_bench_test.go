package main

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine/background"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/cfs"
)

// BenchmarkRefineSwitchover is refine's own cost per trial on the CFS
// backend: putting an arm's profile in force on the demo workload and
// reverting it (scheduler.Start + Stop), and starting and stopping one
// background spinner. trials/h@1s is what that leaves of an hour for a
// 1-second benchmark with refine's defaults: ABBA blocks switch arms every
// second trial and each switch waits the 1 s warm-up.
func BenchmarkRefineSwitchover(b *testing.B) {
	if err := cfs.New(cfs.Options{}).Probe(); err != nil {
		need.Unmet(b, "to change real threads' scheduling", err.Error())
	}
	dir := b.TempDir()
	bin := testkit.Workload(b)
	wl := exec.Command(bin, "--dir", dir)
	wl.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone with a panicking benchmark too
	out, err := wl.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := wl.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { wl.Process.Signal(syscall.SIGTERM); wl.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	prof, err := profiles.Parse("bench.toml", []byte(refineProfile))
	if err != nil {
		b.Fatal(err)
	}
	topo, err := machine.ReadTopology("/")
	if err != nil {
		b.Fatal(err)
	}
	plan, err := scheduler.NewPlan(prof, topo, func() ([]profiles.Thread, error) { return scheduler.ListThreads([]int{wl.Process.Pid}) })
	if err != nil {
		b.Fatal(err)
	}
	backend := cfs.New(cfs.Options{StateFile: filepath.Join(dir, "state.json")})
	var switchNs float64
	b.Run("apply+revert", func(b *testing.B) {
		for b.Loop() {
			s, err := scheduler.Start(context.Background(), backend, plan, scheduler.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if sum := s.Stop(); sum.RevertErr != nil {
				b.Fatal(sum.RevertErr)
			}
		}
		switchNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("spinner", func(b *testing.B) {
		for b.Loop() {
			s, err := background.Start(1)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Stop(); err != nil {
				b.Fatal(err)
			}
		}
		spinNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if switchNs > 0 {
			// one 1 s benchmark run, half a switch and half a warm-up, one spinner start/stop
			perTrial := float64(time.Second) + 0.5*(switchNs+float64(time.Second)) + spinNs
			b.ReportMetric(float64(time.Hour)/perTrial, "trials/h@1s")
			b.ReportMetric(float64(time.Hour)/(float64(time.Second)+0.5*float64(time.Second)), "trials/h@1s-no-cost")
		}
	})
}
