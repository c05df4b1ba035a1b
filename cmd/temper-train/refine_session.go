package main

import (
	"context"
	"errors"
	"fmt"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/target"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/scheduler"
)

// liveScheduler applies refine's arms to the target through a scheduler
// backend: each arm is a scheduler.Session, the library call apply uses.
type liveScheduler struct {
	backend scheduler.Backend
	topo    *machine.Topology
	tgt     *target.Target
}

func (s *liveScheduler) Apply(ctx context.Context, p *profiles.Profile) (refine.Session, error) {
	plan, err := scheduler.NewPlan(p, s.topo, func() ([]profiles.Thread, error) {
		ids, err := s.tgt.Refresh()
		if err != nil {
			return nil, err
		}
		return scheduler.ListThreads(ids)
	})
	if err != nil {
		return nil, err
	}
	sess, err := scheduler.Start(ctx, s.backend, plan, scheduler.Options{})
	if err != nil {
		return nil, flatErr(err)
	}
	return liveSession{sess}, nil
}

// Alive fails when the target has no process left.
func (s *liveScheduler) Alive() error {
	ids, err := s.tgt.Refresh()
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("%w: %s has no process left", errTargetGone, s.tgt.Description)
	}
	return nil
}

var errTargetGone = errors.New("the target exited")

// liveSession is a scheduler.Session as refine uses it: Stop reports only
// whether everything was reverted.
type liveSession struct{ s *scheduler.Session }

func (l liveSession) Stats() ([]scheduler.GroupStats, error) { return l.s.Stats() }

func (l liveSession) Stop() error {
	sum := l.s.Stop()
	if sum.RevertErr != nil {
		return sum.RevertErr
	}
	if sum.Reason == scheduler.Failed {
		return fmt.Errorf("keeping the profile in force: %w", sum.Err)
	}
	return nil
}
