package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"

	"temper.codes/temper-train/scheduler/cfs"
	"temper.codes/temper-train/scheduler/scx"
)

// TestWithoutCeilings: only the sched_ext backend has ceilings to turn
// off; CFS is refused, naming itself.
func TestWithoutCeilings(t *testing.T) {
	s := scx.New()
	if err := WithoutCeilings(s); err != nil || !s.NoCeilings {
		t.Errorf("sched_ext: %v, NoCeilings %v; want it set", err, s.NoCeilings)
	}
	err := WithoutCeilings(cfs.New(cfs.Options{}))
	if !errors.Is(err, ErrCeilings) || !strings.Contains(err.Error(), "the backend is "+cfs.Name) {
		t.Errorf("cfs: %v; want ErrCeilings naming the backend", err)
	}
}

// TestTightest: the ceiling a sched_ext arm records is the one that binds,
// the smallest in CPUs; none is 0.
func TestTightest(t *testing.T) {
	c := func(quota time.Duration) scx.CeilingStats {
		return scx.CeilingStats{Ceiling: scx.Ceiling{Cgroup: "/x", Quota: quota, Period: 100 * time.Millisecond}}
	}
	for _, tt := range []struct {
		cs   []scx.CeilingStats
		want float64
	}{
		{nil, 0},
		{[]scx.CeilingStats{c(150 * time.Millisecond)}, 1.5},
		{[]scx.CeilingStats{c(400 * time.Millisecond), c(50 * time.Millisecond), c(100 * time.Millisecond)}, 0.5},
	} {
		if got := tightest(tt.cs); got != tt.want {
			t.Errorf("tightest(%v) = %g; want %g", tt.cs, got, tt.want)
		}
	}
}
