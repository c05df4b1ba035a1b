package bench

import (
	"temper.codes/temper-train/internal/cgroup"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrTimeout is wrapped by Run when a trial outlives its timeout.
var ErrTimeout = errors.New("benchmark timed out")

// CommandFailed says whether err, from Run, is the command's own failure:
// it exited non-zero, was killed, or outlived its timeout. Output that does
// not parse (*ParseError), a missing tool or trial directory are not: they
// are the benchmark's setup, the same whatever runs beside it.
func CommandFailed(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) || errors.Is(err, ErrTimeout)
}

// Command is one trial's benchmark command.
type Command struct {
	Argv    []string
	Adapter Adapter       // nil: Detect from Argv[0]
	Timeout time.Duration // 0: none beyond ctx
	// Dir is the trial's scratch directory, for files the tool writes
	// (pgbench's transaction log). It must exist; "" gives a temporary one,
	// removed afterwards. The command runs in the caller's working
	// directory, so that its relative paths mean what they say.
	Dir string
	// Cgroup is where the tool runs, in a session of its own (the node
	// rig's client cgroup); nil: temper-train's cgroup and session.
	Cgroup *cgroup.Dir
}

// outputLimit bounds what Run keeps of a tool's standard output; the reports
// parsed here are a few KiB.
const outputLimit = 16 << 20

// killWait bounds how long Run waits for the output pipes to close once the
// tool's process group is killed: a descendant that left the group (setsid)
// could otherwise keep them open forever.
const killWait = 2 * time.Second

// Run runs one trial: the prepared command in a process group of its own,
// killed whole when the command exits (nothing it started outlives the
// trial), on timeout and when ctx is cancelled. A failed run is an error and
// never a Result: ErrTimeout (wrapped) on timeout; the *exec.ExitError
// wrapped with the tool's last line on stderr (else stdout) when it exits
// non-zero or is killed; a *ParseError when its output does not parse.
func Run(ctx context.Context, c Command) (Result, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return Result{}, errors.New("bench: empty command")
	}
	a := c.Adapter
	if a == nil {
		var err error
		if a, err = Detect(c.Argv); err != nil {
			return Result{}, err
		}
	}
	dir := c.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "bench-trial-")
		if err != nil {
			return Result{}, fmt.Errorf("%s: scratch dir: %w", a.Name(), err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Result{}, fmt.Errorf("%s: trial dir %s: not a directory", a.Name(), dir)
	}
	argv, err := a.Prepare(c.Argv, dir)
	if err != nil {
		return Result{}, err
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.Timeout, ErrTimeout)
		defer cancel()
	}
	stdout, stderr, pid, err := run(ctx, argv, c.Cgroup)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			if errors.Is(cause, ErrTimeout) {
				return Result{}, fmt.Errorf("%s: %w after %v (process group killed)", a.Name(), ErrTimeout, c.Timeout)
			}
			return Result{}, fmt.Errorf("%s: %w (process group killed)", a.Name(), cause)
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			last := lastLine(stderr)
			if last == "" {
				last = lastLine(stdout)
			}
			if last == "" {
				last = "(no output)"
			}
			return Result{}, fmt.Errorf("%s: %w: %s", a.Name(), err, last)
		}
		return Result{}, fmt.Errorf("%s: %w", a.Name(), err)
	}
	res, err := a.Parse(Trial{Argv: argv, Dir: dir, Pid: pid, Stdout: stdout})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// run starts argv in a new process group and waits for it, killing the group
// when the leader exits or ctx is done.
func run(ctx context.Context, argv []string, dir *cgroup.Dir) (stdout, stderr []byte, pid int, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, 0, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	// Pdeathsig kills the tool if this process dies without killing it (a
	// SIGKILL). The kernel sends it when the thread that forked the child
	// exits, not the process, so the fork happens on a thread locked for as
	// long as the child runs: Go never ends a thread a goroutine is locked to
	// while it is locked, and unlocking hands the thread back to the pool.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if dir != nil {
		// A client of its own: its session (whose id is its process group,
		// killed as one below) and its cgroup.
		cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Setsid = false, true
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, 0, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, 0, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var startErr error
	if dir != nil {
		startErr = dir.Start(cmd)
	} else {
		startErr = cmd.Start()
	}
	outW.Close()
	errW.Close()
	if startErr != nil {
		outR.Close()
		errR.Close()
		return nil, nil, 0, startErr
	}
	pid = cmd.Process.Pid
	var wg sync.WaitGroup
	var outBuf, errBuf bytes.Buffer
	for _, p := range []struct {
		r *os.File
		b *bytes.Buffer
	}{{outR, &outBuf}, {errR, &errBuf}} {
		wg.Go(func() {
			io.Copy(p.b, io.LimitReader(p.r, outputLimit))
			io.Copy(io.Discard, p.r)
		})
	}
	killGroup := func() { syscall.Kill(-pid, syscall.SIGKILL) }
	stop := context.AfterFunc(ctx, killGroup)
	waitErr := cmd.Wait()
	stop()
	// Whatever the leader left behind in its group goes with it.
	killGroup()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(killWait):
		// Unblock the readers: a process outside the group holds the pipes.
		outR.Close()
		errR.Close()
		<-done
	}
	outR.Close()
	errR.Close()
	if waitErr == nil && ctx.Err() != nil {
		waitErr = ctx.Err()
	}
	return outBuf.Bytes(), errBuf.Bytes(), pid, waitErr
}

// lastLine is the last non-blank line of b, trimmed; progress output that
// rewrites a line with '\r' gives its last version.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if j := strings.LastIndexByte(strings.TrimRight(l, "\r"), '\r'); j >= 0 {
			l = l[j+1:]
		}
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
