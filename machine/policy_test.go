package machine

import "testing"

func TestPolicyName(t *testing.T) {
	for n, want := range map[int]string{0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", 3: "SCHED_BATCH", 5: "SCHED_IDLE", 6: "SCHED_DEADLINE", 7: "SCHED_EXT", 4: "SCHED_4"} {
		if got := PolicyName(n); got != want {
			t.Errorf("PolicyName(%d) = %s, want %s", n, got, want)
		}
	}
}
