package target

import (
	"runtime"
	"temper.codes/temper-train/internal/cgroup"

	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// startCommand starts spec.Command and makes a command target of it.
//
// The command runs in a process group of its own, so that Stop reaches the
// processes it starts too, and so that a terminal's Ctrl-C goes to the
// tracer alone, which can then finish the trace and stop the command itself.
// A goroutine waits for the command so that it is reaped as soon as it
// exits; Exited reports that moment.
func startCommand(spec Spec) (*Target, error) {
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Output copied through pipes (a Stdout that is not a file) is not waited
	// for beyond this once the command has exited: a background process it
	// left behind may hold the pipe open for ever.
	cmd.WaitDelay = time.Second
	line := strings.Join(spec.Command, " ")
	// proceed lets the waiter reap the command once its start time is read.
	proceed := make(chan struct{})
	wait, err := launch(cmd, spec.StartIn, proceed)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return nil, newError(ErrNotFound, err, fmt.Sprintf("start command %q: program %q not found (check the name and PATH)", line, spec.Command[0]))
		}
		return nil, fmt.Errorf("start command %q: %w", line, err)
	}
	t := &Target{
		Kind:        KindCommand,
		Description: fmt.Sprintf("command %q (pid %d) and its descendants", line, cmd.Process.Pid),
		Identity:    fmt.Sprintf("command %q and its descendants", line),
		Pid:         cmd.Process.Pid,
		Cmd:         cmd,
		done:        make(chan struct{}),
	}
	// The start time identifies the process in refreshTree. Read it before
	// the waiter can reap it; a command that has already exited is still a
	// zombie here because nothing has waited for it yet.
	st, statErr := readStat(cmd.Process.Pid)
	close(proceed)
	go func() {
		err := <-wait
		t.mu.Lock()
		t.waitErr = err
		t.mu.Unlock()
		close(t.done)
	}()
	if statErr != nil {
		_, _ = t.Stop(0)
		return nil, fmt.Errorf("command %q (pid %d): %w", line, cmd.Process.Pid, statErr)
	}
	t.tracked = map[int]uint64{cmd.Process.Pid: st.start}
	t.mu.Lock()
	tgids, err := t.refreshTree()
	t.mu.Unlock()
	if err != nil {
		_, _ = t.Stop(0)
		return nil, err
	}
	if len(tgids) == 0 {
		// It exited at once; the trace still records that it ran.
		tgids = []int{cmd.Process.Pid}
	}
	t.Tgids = tgids
	return t, nil
}

// launch starts cmd and returns the channel its Wait result comes on, once
// proceed is closed. In a cgroup (dir != nil) the command is forked on a
// thread locked for its lifetime and gets PR_SET_PDEATHSIG: the kernel
// sends it when the forking thread ends, and Go ends a thread only when the
// goroutine locked to it returns — after Wait.
func launch(cmd *exec.Cmd, dir *cgroup.Dir, proceed <-chan struct{}) (<-chan error, error) {
	wait := make(chan error, 1)
	if dir == nil {
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		go func() { <-proceed; wait <- cmd.Wait() }()
		return wait, nil
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := dir.Start(cmd); err != nil {
			started <- err
			return
		}
		started <- nil
		<-proceed
		wait <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return wait, nil
}

// Exited returns a channel that is closed when the command of a command
// target has exited. For other targets it returns nil, which never becomes
// ready.
func (t *Target) Exited() <-chan struct{} {
	if t.Kind != KindCommand {
		return nil
	}
	return t.done
}

// Stop ends the command of a command target and reports how it ended. If
// the command is still running, its process group gets SIGTERM, and SIGKILL
// if the command has not exited after grace. A command that had already
// exited is not an error, whatever its status: the returned state (exit
// code, or the signal that ended it) records it. The error is for failures to
// signal or wait. For other targets Stop does nothing and returns nil, nil.
// Stop may be called more than once.
//
// When the command exited on its own, processes it left running in its
// process group are not signalled: once the group leader has been reaped
// its pid, and with it the group id, may belong to an unrelated process.
func (t *Target) Stop(grace time.Duration) (*os.ProcessState, error) {
	if t.Kind != KindCommand || t.Cmd == nil {
		return nil, nil
	}
	select {
	case <-t.done:
		return t.exitState()
	default:
	}
	pgid := t.Cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return nil, fmt.Errorf("stop %s: SIGTERM: %w", t.Description, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-t.done:
	case <-timer.C:
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("stop %s: SIGKILL after %v: %w", t.Description, grace, err)
		}
		<-t.done
	}
	return t.exitState()
}

// exitState returns the exited command's state. A non-zero exit or death
// by a signal is the command's business, not an error of Stop.
func (t *Target) exitState() (*os.ProcessState, error) {
	t.mu.Lock()
	err := t.waitErr
	t.mu.Unlock()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return t.Cmd.ProcessState, fmt.Errorf("wait for %s: %w", t.Description, err)
	}
	return t.Cmd.ProcessState, nil
}
