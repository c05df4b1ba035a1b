package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"temper.codes/temper-train/profiles"
)

// DefaultRefresh is how often a Session looks for new threads of its
// target when Options.Refresh is zero.
const DefaultRefresh = 100 * time.Millisecond

// Options tune a Session.
type Options struct {
	// For stops the session after this long; zero runs until Stop, the
	// context ends, the target exits or a refresh fails.
	For time.Duration
	// Refresh is how often new threads are classified (DefaultRefresh when
	// zero).
	Refresh time.Duration
}

// StopReason says why a Session stopped.
type StopReason int

const (
	// Running: the session has not stopped.
	Running StopReason = iota
	// Stopped: Stop was called.
	Stopped
	// Cancelled: the context given to Start ended (a signal, usually).
	Cancelled
	// Elapsed: Options.For passed.
	Elapsed
	// TargetExited: the plan's thread lister found no thread left.
	TargetExited
	// Failed: a refresh failed; Summary.Err says why.
	Failed
)

func (r StopReason) String() string {
	switch r {
	case Running:
		return "running"
	case Stopped:
		return "stopped"
	case Cancelled:
		return "interrupted"
	case Elapsed:
		return "its time passed"
	case TargetExited:
		return "the target exited"
	case Failed:
		return "error"
	}
	return fmt.Sprintf("StopReason(%d)", int(r))
}

// Summary is what a Session read when it stopped, just before it reverted:
// a sched_ext scheduler's counters go with it, so they are read first.
type Summary struct {
	Reason StopReason
	// Err is the refresh error that stopped the session (Reason Failed).
	Err error
	// Elapsed runs from the moment the plan was in force to the moment the
	// session stopped keeping it in force.
	Elapsed time.Duration
	// Stats are the closing counters (nil when StatsErr is set).
	Stats    []GroupStats
	StatsErr error
	// Threads are the target's threads when it stopped (nil when
	// ThreadsErr is set).
	Threads    []profiles.Thread
	ThreadsErr error
	// RevertErr is nil when every change was put back.
	RevertErr error
}

// Session keeps a plan in force: it applies it, classifies the target's new
// threads every Options.Refresh, and, when it stops, reads the closing
// stats and reverts. It stops on Stop, when the context given to Start
// ends, when Options.For passes, when the target has no thread left, or
// when a refresh fails; in every case it reverts before Done is closed.
// Its methods are safe to call from several goroutines.
type Session struct {
	backend Backend
	applied Applied
	plan    Plan
	opts    Options
	begin   time.Time
	cancel  context.CancelFunc // the backend's context

	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{}
	summary  Summary

	mu    sync.Mutex
	empty bool // the last thread listing found no thread
}

// ErrStopped is returned by a Session's Stats once it has stopped (the
// plan is reverted, its counters gone).
var ErrStopped = errors.New("scheduler session stopped")

// Start applies p through b and keeps it in force in the background until
// the session stops (see Session). On error nothing stays changed.
// Cancelling ctx stops the session, which then reverts; the backend itself
// gets a context of the session's own, so the closing stats are read
// before anything is reverted.
func Start(ctx context.Context, b Backend, p Plan, opts Options) (*Session, error) {
	if opts.For < 0 {
		return nil, fmt.Errorf("scheduler session: negative duration %s", opts.For)
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	if p.Threads == nil {
		return nil, errors.New("scheduler session: plan has no thread lister")
	}
	s := &Session{backend: b, opts: opts, quit: make(chan struct{}), done: make(chan struct{})}
	list := p.Threads
	p.Threads = func() ([]profiles.Thread, error) {
		ts, err := list()
		if err == nil {
			s.mu.Lock()
			s.empty = len(ts) == 0
			s.mu.Unlock()
		}
		return ts, err
	}
	s.plan = p
	bctx, cancel := context.WithCancel(context.Background())
	applied, err := b.Apply(bctx, p)
	if err != nil {
		cancel()
		return nil, err
	}
	s.applied, s.cancel, s.begin = applied, cancel, time.Now()
	go s.run(ctx)
	return s, nil
}

// Backend returns the backend the session applies through.
func (s *Session) Backend() Backend { return s.backend }

// Plan returns the plan in force.
func (s *Session) Plan() Plan { return s.plan }

// Applied returns the backend's handle on the plan in force, for what only
// one backend offers (a type assertion). Revert it only through Stop.
func (s *Session) Applied() Applied { return s.applied }

// Began returns when the plan was in force.
func (s *Session) Began() time.Time { return s.begin }

// Done is closed once the session has stopped and reverted.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns the refresh error that stopped the session, nil while it runs
// or when it stopped for another reason.
func (s *Session) Err() error {
	select {
	case <-s.done:
		return s.summary.Err
	default:
		return nil
	}
}

// Stats returns each group's counters since Apply (see Applied.Stats).
// Once the session has stopped it returns ErrStopped; the closing counters
// are in Stop's Summary.
func (s *Session) Stats() ([]GroupStats, error) {
	select {
	case <-s.done:
		return nil, ErrStopped
	default:
	}
	st, err := s.applied.Stats()
	if err != nil && errors.Is(err, ErrReverted) {
		return nil, ErrStopped
	}
	return st, err
}

// Stop stops keeping the plan in force, reads the closing stats and the
// target's threads, reverts, and returns what it read. It is idempotent:
// every call, concurrent ones included, returns once the one revert is
// done, with the same Summary. After the session stopped on its own, Stop
// returns that Summary.
func (s *Session) Stop() Summary {
	s.quitOnce.Do(func() { close(s.quit) })
	<-s.done
	return s.summary
}

// run keeps the plan in force until a reason to stop, then closes.
func (s *Session) run(ctx context.Context) {
	reason, err := s.keep(ctx)
	sum := Summary{Reason: reason, Err: err, Elapsed: time.Since(s.begin)}
	sum.Threads, sum.ThreadsErr = s.plan.Threads()
	if sum.ThreadsErr != nil {
		sum.Threads = nil
	}
	sum.Stats, sum.StatsErr = s.applied.Stats()
	sum.RevertErr = s.applied.Revert()
	s.cancel()
	s.summary = sum
	close(s.done)
}

// keep refreshes the plan every opts.Refresh and says why it stopped.
func (s *Session) keep(ctx context.Context) (StopReason, error) {
	tick := time.NewTicker(s.opts.Refresh)
	defer tick.Stop()
	var deadline <-chan time.Time
	if s.opts.For > 0 {
		t := time.NewTimer(s.opts.For - time.Since(s.begin))
		defer t.Stop()
		deadline = t.C
	}
	for {
		select {
		case <-s.quit:
			return Stopped, nil
		case <-ctx.Done():
			return Cancelled, nil
		case <-deadline:
			return Elapsed, nil
		case <-tick.C:
			if err := s.applied.Refresh(); err != nil {
				return Failed, err
			}
			s.mu.Lock()
			empty := s.empty
			s.mu.Unlock()
			if empty {
				return TargetExited, nil
			}
		}
	}
}
