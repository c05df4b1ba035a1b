package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/observe/target"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/refine"
	"temper.codes/temper-train/scheduler"
)

// liveScheduler applies refine's arms to the target through a scheduler
// backend, keeping each in force (new threads classified every
// applyRefresh) until its session stops.
type liveScheduler struct {
	backend scheduler.Backend
	topo    *snapshot.Topology
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
	// The backend's context is the session's: a signal cancels the run's
	// context, and the engine then stops the session, which reverts.
	actx, cancel := context.WithCancel(context.Background())
	applied, err := s.backend.Apply(actx, plan)
	if err != nil {
		cancel()
		return nil, flatErr(err)
	}
	ss := &liveSession{applied: applied, cancel: cancel, done: make(chan struct{}), stopped: make(chan struct{})}
	go ss.keep()
	return ss, nil
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

type liveSession struct {
	applied scheduler.Applied
	cancel  context.CancelFunc
	done    chan struct{} // closed by Stop
	stopped chan struct{} // closed when keep returns
	once    sync.Once
	err     error
}

func (s *liveSession) keep() {
	defer close(s.stopped)
	t := time.NewTicker(applyRefresh)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			// A refresh error (a thread gone mid-classification) is not
			// fatal here: the trial's Alive check decides about the target.
			s.applied.Refresh()
		}
	}
}

func (s *liveSession) Stats() ([]scheduler.GroupStats, error) { return s.applied.Stats() }

func (s *liveSession) Stop() error {
	s.once.Do(func() {
		close(s.done)
		<-s.stopped
		s.err = s.applied.Revert()
		s.cancel()
	})
	return s.err
}
