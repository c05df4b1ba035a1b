package analyze

import (
	"cmp"
	"slices"
	"strings"

	"temper.codes/temper-train/observe"
)

// processWakers fills each target thread's ProcessWakers: its wakeups by
// user processes outside the workload, by process name, busiest first,
// as shares of its wakeups. This is what tells a server that answers a
// load generator on the same node (pgbench, redis-benchmark) from one
// whose clients are elsewhere.
//
// A waking in softirq context is counted as the process of the task the
// softirq interrupted (the row's waker). Over loopback that is the sender:
// its send runs the receive softirq on its own CPU before it returns, so a
// client's request wakes the server "from softirq" with the client as the
// interrupted task. Wakings the trace cannot attribute stay out: softirq
// work run by ksoftirqd (a kernel thread: who raised it is not in the
// trace), softirqs that interrupted the idle task (a remote NIC or timer),
// and hard interrupts (timers, devices).
func processWakers(c *collector, p *procInfo, threads []Thread, in []bool) {
	idx := make(map[int]int, len(threads))
	for i := range threads {
		idx[threads[i].utid] = i
	}
	byThread := make([]map[string]int64, len(threads))
	for k, n := range c.edges {
		wr, we := int(k.waker), int(k.wakee)
		i, ok := idx[we]
		if !ok || k.irq == observe.IRQHard || wr <= 0 || wr >= len(in) || in[wr] || p.kernel[wr] {
			continue
		}
		if byThread[i] == nil {
			byThread[i] = map[string]int64{}
		}
		byThread[i][p.pname[wr]] += n
	}
	for i := range threads {
		t := &threads[i]
		t.ProcessWakers = []Peer{}
		if t.Features.Wakeups == 0 {
			continue
		}
		for name, n := range byThread[i] {
			t.ProcessWakers = append(t.ProcessWakers, Peer{Node: "process " + name, Count: n,
				Share: round3(float64(n) / float64(t.Features.Wakeups))})
		}
		slices.SortFunc(t.ProcessWakers, func(a, b Peer) int {
			if c := cmp.Compare(b.Count, a.Count); c != 0 {
				return c
			}
			return strings.Compare(a.Node, b.Node)
		})
	}
}
