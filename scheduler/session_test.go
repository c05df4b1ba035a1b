package scheduler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"temper.codes/temper-train/profiles"
)

// recorder is a Backend that records the calls a Session makes, so the
// session's ordering rules (closing stats before revert, one revert) can be
// checked without a kernel; the real backends are driven by
// schedulertest.TestBackend and the apply command's tests.
type recorder struct {
	mu         sync.Mutex
	calls      []string
	reverts    atomic.Int32
	refreshErr error
	ctx        context.Context
}

func (r *recorder) Name() string { return "recorder" }
func (r *recorder) Probe() error { return nil }
func (r *recorder) Apply(ctx context.Context, p Plan) (Applied, error) {
	r.ctx = ctx
	if _, err := p.Threads(); err != nil {
		return nil, err
	}
	return &recorded{r: r, p: p}, nil
}

func (r *recorder) log(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

type recorded struct {
	r        *recorder
	p        Plan
	mu       sync.Mutex
	reverted bool
}

func (a *recorded) Refresh() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reverted {
		return ErrReverted
	}
	if _, err := a.p.Threads(); err != nil {
		return err
	}
	return a.r.refreshErr
}

func (a *recorded) Stats() ([]GroupStats, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reverted {
		return nil, ErrReverted
	}
	a.r.log("stats")
	return []GroupStats{{Group: "g", At: time.Now()}}, nil
}

func (a *recorded) Revert() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.reverted {
		a.reverted = true
		a.r.reverts.Add(1)
		a.r.log("revert")
	}
	return nil
}

// threads lists n threads, n read at each call.
func threads(n *atomic.Int32) func() ([]profiles.Thread, error) {
	return func() ([]profiles.Thread, error) {
		out := make([]profiles.Thread, n.Load())
		for i := range out {
			out[i] = profiles.Thread{Tid: 100 + i, Tgid: 100, Comm: "t"}
		}
		return out, nil
	}
}

func TestSessionStopReasons(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name   string
		opts   Options
		act    func(s *Session, cancel context.CancelFunc, n *atomic.Int32)
		refErr error
		want   StopReason
	}{
		{"stop", Options{}, func(s *Session, _ context.CancelFunc, _ *atomic.Int32) { s.Stop() }, nil, Stopped},
		{"cancel", Options{}, func(_ *Session, c context.CancelFunc, _ *atomic.Int32) { c() }, nil, Cancelled},
		{"for", Options{For: 50 * time.Millisecond}, func(*Session, context.CancelFunc, *atomic.Int32) {}, nil, Elapsed},
		{"target exits", Options{Refresh: time.Millisecond}, func(_ *Session, _ context.CancelFunc, n *atomic.Int32) { n.Store(0) }, nil, TargetExited},
		{"refresh fails", Options{Refresh: time.Millisecond}, func(*Session, context.CancelFunc, *atomic.Int32) {}, boom, Failed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &recorder{refreshErr: c.refErr}
			var n atomic.Int32
			n.Store(3)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := Start(ctx, b, Plan{Threads: threads(&n)}, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			c.act(s, cancel, &n)
			select {
			case <-s.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("session did not stop")
			}
			sum := s.Stop()
			if sum.Reason != c.want {
				t.Errorf("reason %v, want %v", sum.Reason, c.want)
			}
			if !errors.Is(sum.Err, c.refErr) || !errors.Is(s.Err(), c.refErr) {
				t.Errorf("Err %v / %v, want %v", sum.Err, s.Err(), c.refErr)
			}
			if sum.StatsErr != nil || len(sum.Stats) != 1 || sum.Stats[0].At.IsZero() {
				t.Errorf("closing stats %+v, %v", sum.Stats, sum.StatsErr)
			}
			b.mu.Lock()
			calls := b.calls
			b.mu.Unlock()
			if len(calls) < 2 || calls[len(calls)-2] != "stats" || calls[len(calls)-1] != "revert" {
				t.Errorf("calls %v: want the closing stats, then the revert", calls)
			}
			if b.ctx.Err() == nil {
				t.Error("the backend's context is still live after the session stopped")
			}
			if _, err := s.Stats(); !errors.Is(err, ErrStopped) {
				t.Errorf("Stats after stop: %v, want ErrStopped", err)
			}
		})
	}
}

// TestSessionStopConcurrent: Stop from many goroutines, alongside Stats and
// a cancelled context, reverts once and gives every caller the same
// summary (run with -race).
func TestSessionStopConcurrent(t *testing.T) {
	for range 50 {
		b := &recorder{}
		var n atomic.Int32
		n.Store(2)
		ctx, cancel := context.WithCancel(context.Background())
		s, err := Start(ctx, b, Plan{Threads: threads(&n)}, Options{Refresh: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		sums := make([]Summary, 4)
		for i := range sums {
			wg.Go(func() { sums[i] = s.Stop() })
			wg.Go(func() {
				if _, err := s.Stats(); err != nil && !errors.Is(err, ErrStopped) {
					t.Errorf("Stats while stopping: %v", err)
				}
			})
		}
		wg.Go(cancel)
		wg.Wait()
		if got := b.reverts.Load(); got != 1 {
			t.Fatalf("%d reverts, want 1", got)
		}
		for _, sum := range sums[1:] {
			if sum.Reason != sums[0].Reason || sum.Elapsed != sums[0].Elapsed {
				t.Fatalf("summaries differ: %+v vs %+v", sum, sums[0])
			}
		}
	}
}

func TestStartApplyError(t *testing.T) {
	b := &recorder{}
	boom := errors.New("no threads for you")
	_, err := Start(context.Background(), b, Plan{Threads: func() ([]profiles.Thread, error) { return nil, boom }}, Options{})
	if !errors.Is(err, boom) {
		t.Fatalf("Start: %v, want %v", err, boom)
	}
	if b.ctx.Err() == nil {
		t.Error("backend context live after a failed Start")
	}
}

// TestSessionWait: Wait reports the stats every interval while the session
// runs and returns once it stopped on its own; interval 0 reports nothing.
func TestSessionWait(t *testing.T) {
	for _, c := range []struct {
		name     string
		interval time.Duration
		reports  bool
	}{{"reports", 10 * time.Millisecond, true}, {"quiet", 0, false}} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			n.Store(2)
			s, err := Start(context.Background(), &recorder{}, Plan{Threads: threads(&n)}, Options{For: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var got int
			s.Wait(c.interval, func(stats []GroupStats, elapsed time.Duration) {
				got++
				if len(stats) != 1 || elapsed <= 0 {
					t.Errorf("report %v after %v", stats, elapsed)
				}
			})
			select {
			case <-s.Done():
			default:
				t.Fatal("Wait returned before the session stopped")
			}
			if (got > 0) != c.reports {
				t.Errorf("%d reports, want reports %v", got, c.reports)
			}
			if r := s.Stop().Reason; r != Elapsed {
				t.Errorf("reason %v, want %v", r, Elapsed)
			}
		})
	}
}
