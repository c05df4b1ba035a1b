package pipeline

import (
	"errors"
	"fmt"
	"strings"

	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/scheduler/scx"
)

// Backend names, as apply, refine and canary take them.
const (
	BackendAuto     = "auto"
	BackendSchedExt = "sched_ext"
	BackendCFS      = "cfs"
)

// Errors of ChooseBackend.
var (
	// ErrBackendName: not one of the Backend names.
	ErrBackendName = errors.New("unknown backend")
	// ErrNoBackend: auto found neither backend usable here.
	ErrNoBackend = errors.New("no backend can run here")
	// ErrCeilings: WithoutCeilings asked of a backend that has none.
	ErrCeilings = errors.New("only the sched_ext backend has CPU ceilings to turn off")
)

// BackendChoice is the backend chosen and, when auto fell back to CFS, why
// sched_ext could not run.
type BackendChoice struct {
	Backend  scheduler.Backend
	Fallback error
}

// ChooseBackend returns the backend name names, probed: sched_ext or cfs
// as asked, or for auto sched_ext when a sched_ext scheduler can attach
// here, else CFS. opts configure the CFS backend.
func ChooseBackend(name string, opts cfs.Options) (BackendChoice, error) {
	c := cfs.New(opts)
	s := scx.New()
	switch name {
	case BackendCFS:
		if err := c.Probe(); err != nil {
			return BackendChoice{}, err
		}
		return BackendChoice{Backend: c}, nil
	case BackendSchedExt:
		if err := s.Probe(); err != nil {
			return BackendChoice{}, err
		}
		return BackendChoice{Backend: s}, nil
	case BackendAuto:
	default:
		return BackendChoice{}, fmt.Errorf("%w %q: want %s, %s or %s", ErrBackendName, name, BackendAuto, BackendSchedExt, BackendCFS)
	}
	serr := s.Probe()
	if serr == nil {
		return BackendChoice{Backend: s}, nil
	}
	if err := c.Probe(); err != nil {
		return BackendChoice{}, fmt.Errorf("%w: %v; and %w", ErrNoBackend, serr, err)
	}
	return BackendChoice{Backend: c, Fallback: serr}, nil
}

// WithoutCeilings turns off b's per-pod CPU ceilings (scx.Backend.NoCeilings:
// the embedded sched_ext scheduler then leaves cpu.max unenforced, as the
// kernel does under any sched_ext scheduler), for measuring what they cost
// or prevent. Any other backend is refused, wrapping ErrCeilings: on CFS
// the kernel enforces cpu.max itself, and a run that asked for no ceilings
// must not measure with them.
func WithoutCeilings(b scheduler.Backend) error {
	s, ok := b.(*scx.Backend)
	if !ok {
		return fmt.Errorf("%w: the backend is %s, where the kernel enforces cpu.max itself", ErrCeilings, b.Name())
	}
	s.NoCeilings = true
	return nil
}

// flatError is an error on one line (errors.Join puts each on its own),
// still wrapping what it wrapped.
type flatError struct{ err error }

func (e flatError) Error() string { return strings.ReplaceAll(e.err.Error(), "\n", " ") }
func (e flatError) Unwrap() error { return e.err }

func flat(err error) error {
	if err == nil || !strings.Contains(err.Error(), "\n") {
		return err
	}
	return flatError{err}
}
