//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"temper.codes/temper-train/internal/procfs"
)

// Starting a command inside a cgroup needs Linux's clone3 (v2) or the
// forking thread's id (v1); the rest of the package, reading cgroup files,
// builds everywhere, so that observe's snapshot reader stays portable.

// Start starts cmd with its first instruction already in d, so that nothing
// it forks runs outside: on v2 it is born there (clone3 with
// CLONE_INTO_CGROUP); v1 has no such call, so the forking thread moves into
// d for the fork and back after. Start locks the calling goroutine to its
// thread while it works; a caller that sets Pdeathsig keeps it locked for the
// child's lifetime (the kernel signals when the forking thread exits).
func (d Dir) Start(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if d.h.Version == 2 {
		fd, err := os.Open(d.CPU)
		if err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		defer fd.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(fd.Fd())
		return cmd.Start()
	}
	tid := syscall.Gettid()
	was, err := procfs.New("/proc").TaskCgroup(os.Getpid(), tid)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	back := d.h.Top().Child(was.CPU())
	if d.Cpuset != "" {
		back.Cpuset = filepath.Join(d.h.Cpuset, was.V1["cpuset"])
	}
	if d.Acct != "" {
		back.Acct = filepath.Join(d.h.Acct, was.V1["cpuacct"])
	}
	if err := d.moveThread(tid); err != nil {
		return errors.Join(err, back.moveThread(tid))
	}
	startErr := cmd.Start()
	if err := back.moveThread(tid); err != nil {
		// The thread stays in d: a later fork on it would land there too.
		// Ending the thread (returning locked) is the safe way out.
		runtime.LockOSThread()
		return errors.Join(startErr, err)
	}
	return startErr
}
