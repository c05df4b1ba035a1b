package machine

import "strconv"

// policyNames are the kernel's scheduling policy numbers (uapi/linux/sched.h).
var policyNames = map[int]string{
	0: "SCHED_OTHER",
	1: "SCHED_FIFO",
	2: "SCHED_RR",
	3: "SCHED_BATCH",
	5: "SCHED_IDLE",
	6: "SCHED_DEADLINE",
	7: "SCHED_EXT",
}

// PolicyName names a scheduling policy number; an unknown one reads SCHED_<n>.
func PolicyName(policy int) string {
	if n, ok := policyNames[policy]; ok {
		return n
	}
	return "SCHED_" + strconv.Itoa(policy)
}
