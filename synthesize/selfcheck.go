package synthesize

import (
	"fmt"

	"temper.codes/temper-train/profiles"
)

// selfCheck compiles the profile the way the scheduler backends will and
// runs every analysed thread through it: each must land in the group
// synthesized for it (threads no matcher can name are in the catch-all by
// design, and are members of it). A mismatch is an error naming the thread
// and both groups: a profile that would put a thread somewhere else than its
// evidence says must not be written.
func selfCheck(p *profiles.Profile, groups []*group, ms []member) error {
	c, err := profiles.Compile(p)
	if err != nil {
		return fmt.Errorf("self-check: %w", err)
	}
	want := make([]int, len(ms))
	for i := range want {
		want[i] = -1
	}
	for gi, g := range groups {
		for _, i := range g.members {
			want[i] = gi
		}
	}
	name := func(gi int) string {
		if gi < 0 || gi >= len(p.ThreadGroups) {
			return "no group"
		}
		return fmt.Sprintf("group %q", p.ThreadGroups[gi].Name)
	}
	for i := range ms {
		m := &ms[i]
		if got := c.Group(m.seen); got != want[i] {
			return fmt.Errorf("self-check: thread %d (comm %s, process %s, cluster %d %s) lands in %s but was synthesized for %s",
				m.th.Tid, quote(m.th.Comm), quote(m.th.Process), m.th.Cluster, m.cluster.Class, name(got), name(want[i]))
		}
	}
	return nil
}
