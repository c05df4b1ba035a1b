package synthesize

import (
	"fmt"
	"slices"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/profiles"
)

// shapeChoice is the machine shape a profile is keyed to and where it came
// from, for the header and the description.
type shapeChoice struct {
	shape  profiles.Shape
	source string
	// logicalOnly: only the number of logical CPUs is known (the trace's
	// system info), so no core can be reserved.
	logicalOnly bool
}

// chooseShape picks the machine shape: the snapshot's topology (what the
// trace ran on, measured), else --shape, else the logical CPU count the trace
// recorded. A shape that contradicts the trace (fewer CPUs than the threads
// ran on, a different CPU count than the trace recorded) is an error: a
// profile is keyed to the machine it was measured on.
func chooseShape(a *analyze.Analysis, opt Options) (shapeChoice, error) {
	var c shapeChoice
	switch {
	case opt.Snapshot != nil:
		s, err := machine.ShapeOf(opt.Snapshot.Topology)
		if err != nil {
			return c, fmt.Errorf("snapshot %s: %w", opt.snapshotName(), err)
		}
		if opt.Shape != nil && !opt.Shape.Matches(s) {
			return c, tagged(ErrShape, "shape %s contradicts the snapshot's topology %s: leave the shape out (the snapshot measured the machine)", opt.Shape.Key(), s.Key())
		}
		c = shapeChoice{shape: s, source: fmt.Sprintf("the snapshot's CPU topology (%s)", opt.snapshotName())}
	case opt.Shape != nil:
		if err := opt.Shape.Check(); err != nil {
			return c, tagged(ErrShape, "shape %s: %w", opt.Shape.Key(), err)
		}
		if opt.Shape.Specificity() == 0 {
			return c, tagged(ErrShape, "shape any: a synthesized profile is keyed to the machine it was measured on; give its shape, e.g. 8cpu-4c-smt2")
		}
		c = shapeChoice{shape: *opt.Shape, source: "--shape " + opt.Shape.Key()}
		if c.shape.CoreCount() == 0 {
			c.logicalOnly = true
		}
	case a.Trace.NumCPUs > 0:
		c = shapeChoice{
			shape:       profiles.Shape{LogicalCPUs: a.Trace.NumCPUs},
			source:      fmt.Sprintf("the trace's system info (%d logical CPUs; cores and SMT unknown)", a.Trace.NumCPUs),
			logicalOnly: true,
		}
	default:
		return c, tagged(ErrNoShape, "no machine shape: no snapshot, no shape given, and the analysis' trace did not record its CPU count")
	}
	return c, checkShapeAgainstTrace(c, a, opt.Snapshot)
}

// checkShapeAgainstTrace rejects a shape the trace proves wrong.
func checkShapeAgainstTrace(c shapeChoice, a *analyze.Analysis, snap *snapshot.Snapshot) error {
	n := c.shape.LogicalCPUs
	if n == 0 {
		return nil // "4c-smt2" without a CPU count: nothing to compare
	}
	var online []int
	if snap != nil && snap.Topology != nil {
		online = snap.Topology.Online
	}
	if snap == nil && a.Trace.NumCPUs > 0 && a.Trace.NumCPUs != n {
		return fmt.Errorf("%s has %d logical CPUs but the trace was recorded on %d: a profile is keyed to the machine it was measured on", c.source, n, a.Trace.NumCPUs)
	}
	if a.Trace.CPUsSeen > n {
		return fmt.Errorf("%s has %d logical CPUs but the trace saw events on %d", c.source, n, a.Trace.CPUsSeen)
	}
	for i := range a.Threads {
		t := &a.Threads[i]
		for _, cpu := range t.Features.CPUs {
			bad := cpu < 0 || (online == nil && cpu >= n) || (online != nil && !slices.Contains(online, cpu))
			if bad {
				return fmt.Errorf("thread %d (%s) ran on CPU %d, which %s does not have", t.Tid, quote(t.Comm), cpu, c.source)
			}
		}
	}
	return nil
}
