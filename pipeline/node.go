package pipeline

import (
	"errors"
	"temper.codes/temper-train/rig"

	"context"
	"fmt"
	"os"
	"time"

	"temper.codes/temper-train/refine/background"
	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/scheduler/lease"
)

// TakeNode takes the node-wide lease on its scheduling state (cpusets,
// policies, the tier) before a command changes any of it, waiting up to
// wait for a live owner. A lease a dead run left is taken over only after
// what that run left applied is reverted (its CFS state file) and its
// spinners and their cgroups are gone; note hears what was reverted. The
// caller releases the lease when everything it applied is reverted. A held
// lease is an error wrapping lease.ErrHeld that names the owner. stateFile
// is where this run's CFS backend keeps its state ("": the default for
// this process), recorded for whoever finds the lease stale.
func TakeNode(ctx context.Context, wait time.Duration, stateFile string, note func(string)) (*lease.Lease, error) {
	if note == nil {
		note = func(string) {}
	}
	if stateFile == "" {
		stateFile = cfs.StatePath(cfs.DefaultStateDir, os.Getpid())
	}
	return lease.Acquire(ctx, cfs.DefaultStateDir, lease.Options{
		Wait:      wait,
		StateFile: stateFile,
		OnStale: func(o lease.Owner) error {
			if o.StateFile != "" {
				if _, err := os.Stat(o.StateFile); err == nil {
					if err := cfs.RevertFile(o.StateFile, note); err != nil {
						return fmt.Errorf("revert what %s left applied: %w", o, err)
					}
					note(fmt.Sprintf("reverted what %s left applied (%s)", o, o.StateFile))
				}
			}
			removed, err := rig.RemoveStale()
			for _, r := range removed {
				note(fmt.Sprintf("took down the node rig %s that a dead run left", r))
			}
			return errors.Join(err, background.RemoveLeftovers())
		},
	})
}
