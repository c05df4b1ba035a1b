package profiles

import (
	"fmt"
	"slices"
)

// Backend names as MatcherKinds and LintOptions know them.
const (
	// BackendSchedExt is scheduler/scx: an embedded sched_ext scheduler;
	// threads are classified in Go with the Classifier.
	BackendSchedExt = "sched_ext"
	// BackendCFS is scheduler/cfs: CFS policy, nice and affinity; threads are
	// classified in Go with the Classifier.
	BackendCFS = "cfs"
	// BackendSCXLayered is an export to scx_layered's JSON layer spec, where
	// matching happens in scx_layered's own BPF code.
	BackendSCXLayered = "scx-layered"
)

// AllKinds lists every matcher kind of schema v1, in Match's field order.
func AllKinds() []string {
	return []string{KindCommPrefix, KindCommRegex, KindExcludePrefix, KindPcommPrefix,
		KindCmdlinePrefix, KindGroupLeader, KindCgroupPrefix, KindAll}
}

// ShippedBackends are the backends temper-train applies profiles with; lint
// checks against all of them when no backend is named.
func ShippedBackends() []string { return []string{BackendSchedExt, BackendCFS} }

// Backends lists every backend name MatcherKinds accepts.
func Backends() []string { return []string{BackendSchedExt, BackendCFS, BackendSCXLayered} }

// MatcherKinds returns the matcher kinds backend can evaluate. sched_ext and
// cfs match in Go with the Classifier and so support every kind.
// scx_layered has no comm regex (its CommPrefix, CommPrefixExclude,
// PcommPrefix, IsGroupLeader and CgroupPrefix cover the rest) and nothing
// that tests a cmdline prefix. A profile using a kind its backend lacks must
// never reach a node: the scheduler would refuse it and the node would stay
// on its old scheduling without anyone noticing.
func MatcherKinds(backend string) ([]string, error) {
	switch backend {
	case BackendSchedExt, BackendCFS:
		return AllKinds(), nil
	case BackendSCXLayered:
		return slices.DeleteFunc(AllKinds(), func(k string) bool {
			return k == KindCommRegex || k == KindCmdlinePrefix
		}), nil
	}
	return nil, fmt.Errorf("unknown backend %q (known: %s, %s, %s)", backend, BackendSchedExt, BackendCFS, BackendSCXLayered)
}
