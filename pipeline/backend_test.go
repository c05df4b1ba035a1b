package pipeline

import (
	"errors"
	"strings"
	"testing"

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
