package pipeline

import (
	"temper.codes/temper-train/rig"

	"context"
	"errors"
	"time"

	"temper.codes/temper-train/refine/background"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/scheduler/lease"
)

// Reverted is what Revert restored.
type Reverted struct {
	// Files are the CFS state files restored, in the order restored.
	Files []string
	// None is set when, without a file given, the state directory held no
	// state file (cfs.ErrNoState).
	None bool
	// Rigs are the node rigs of dead runs taken down (their cgroup roots).
	Rigs []string
}

// Revert restores what killed runs left changed on this node. It holds
// the node's lease meanwhile, waiting up to wait for a live owner (an
// error wrapping lease.ErrHeld): a live run's state is its own, and
// reverting beside it would undo its cpusets under it. A dead owner's
// lease is taken over at once, what it left being what Revert restores.
// With stateFile it restores that CFS state file (cfs.RevertFile);
// without, every state file in cfs.DefaultStateDir whose run no longer
// runs (cfs.RevertStale) and then the spinner cgroups killed runs left
// (a live run's stay). note hears what was skipped.
func Revert(ctx context.Context, stateFile string, wait time.Duration, note func(string)) (Reverted, error) {
	var r Reverted
	node, err := lease.Acquire(ctx, cfs.DefaultStateDir, lease.Options{Wait: wait,
		OnStale: func(lease.Owner) error { return nil }})
	if err != nil {
		return r, err
	}
	defer node.Release()
	if stateFile != "" {
		if err := cfs.RevertFile(stateFile, note); err != nil {
			return r, err
		}
		r.Files = []string{stateFile}
		return r, nil
	}
	r.Files, err = cfs.RevertStale(cfs.DefaultStateDir, note)
	r.None = errors.Is(err, cfs.ErrNoState)
	if err != nil && !r.None {
		return r, err
	}
	if r.Rigs, err = rig.RemoveStale(); err != nil {
		return r, err
	}
	return r, background.RemoveLeftovers()
}
