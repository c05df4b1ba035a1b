package refine

// TierDesc says in a few words what the node's tier is on a backend, for
// the log and the report's arms: on CFS (and "") the BestEffort pods'
// parent made an idle entity; under sched_ext the scheduler's own
// treatment of them (scheduler/scx, Backend.BestEffort).
func TierDesc(backend string) string {
	if backend == "sched_ext" {
		return "BestEffort pods in the scheduler's tier: they run only on CPUs nothing else wants"
	}
	return "BestEffort pods an idle entity"
}
