package cfs

import (
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

// RealiseOn is Realise on a kernel that takes a fair thread's slice or not
// (slice), with RT throttling on and no cpusets narrowed: what the tests
// outside the package compare, independent of the host.
func RealiseOn(p *profiles.Profile, t *machine.Topology, slice bool) (scheduler.Realised, error) {
	cores, err := scheduler.Allocate(p, t)
	if err != nil {
		return scheduler.Realised{}, err
	}
	k := kernel{slice: slice, sliceWhy: "the test's kernel takes no slice", rtRuntimePath: "testdata/rt_runtime_us"}
	groups, _, err := treatments(p, cores, k, cpusetPlan{})
	if err != nil {
		return scheduler.Realised{}, err
	}
	return realised(p, groups, cpusetPlan{}), nil
}
