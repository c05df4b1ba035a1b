package analyze

import (
	"cmp"
	"fmt"
	"slices"

	"temper.codes/temper-train/observe/snapshot"
)

// addSnapshotThreads gives target threads that the snapshot lists but the
// trace never mentions a UTID of their own: they exist, and never ran.
func addSnapshotThreads(c *collector, s *snapshot.Snapshot, tgids []int) {
	want := map[int]bool{}
	for _, g := range tgids {
		want[g] = true
	}
	for _, t := range s.Threads {
		if !want[t.Tgid] || c.threads.Lookup(int32(t.Tid)) != nil {
			continue
		}
		u := c.threads.Get(int32(t.Tid))
		th := c.threads.All()[u]
		th.Tgid, th.Name = int32(t.Tgid), t.Comm
		c.grow(u)
	}
}

// buildThreads turns the accumulators of the target threads into Threads,
// ordered by family, then tid.
func buildThreads(c *collector, p *procInfo, target []int, window float64) []Thread {
	all := c.threads.All()
	threads := make([]Thread, 0, len(target))
	for _, u := range target {
		th := all[u]
		a := &c.acc[u]
		var f Features
		f.RunNs = a.runNs
		f.CPUShare = round4(float64(a.runNs) / 1e9 / window)
		f.Run = a.runs.Dist()
		f.RunTimeP50 = a.runs.WeightedQuantile(0.5)
		f.OpenRuns = a.openRuns
		f.Wakeups = a.wakeups
		f.WakeRate = round3(rate(a.wakeups, window))
		f.WakeLatency = a.wakeLat.Dist()
		f.Preempted, f.Sleep, f.Disk, f.Other = a.outs[outPreempt], a.outs[outSleep], a.outs[outDisk], a.outs[outOther]
		f.SwitchOuts = f.Preempted + f.Sleep + f.Disk + f.Other
		f.UntimedRuns = max(0, f.SwitchOuts-f.Run.N) + a.endless
		if f.SwitchOuts > 0 {
			n := float64(f.SwitchOuts)
			f.PreemptShare = round3(float64(f.Preempted) / n)
			f.SleepShare = round3(float64(f.Sleep) / n)
			f.DiskShare = round3(float64(f.Disk) / n)
		}
		f.RunnableNs, f.PreemptNs = a.runnable, a.waitNs[outPreempt]
		f.SleepNs, f.DiskNs = a.waitNs[outSleep], a.waitNs[outDisk]
		f.Migrations = a.migration
		f.CPUs = bitList(a.cpus)
		if f.CPUs == nil {
			f.CPUs = []int{}
		}
		f.WakesOut = a.wakesOut
		f.WakesOutRate = round3(rate(a.wakesOut, window))
		name := th.Name
		if name == "" {
			name = fmt.Sprintf("tid-%d", th.Tid)
		}
		threads = append(threads, Thread{
			Tid: th.Tid, Tgid: p.tgid[u], Comm: name, Process: p.pname[u], Family: Family(name),
			Features: f, NeverRan: a.runNs == 0 && a.runs.Count() == 0 && a.openRuns == 0,
			Kernel: p.kernel[u], utid: u,
		})
	}
	slices.SortStableFunc(threads, func(x, y Thread) int {
		if c := cmp.Compare(x.Family, y.Family); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Tid, y.Tid); c != 0 {
			return c
		}
		return cmp.Compare(x.utid, y.utid)
	})
	return threads
}

// attachProcDeltas sets /proc's counters from the snapshot beside the
// trace's, and each thread's process command line.
func attachProcDeltas(threads []Thread, s *snapshot.Snapshot) {
	type key struct{ tid, tgid int32 }
	recs := make(map[key][]*snapshot.Thread, len(s.Threads))
	for j := range s.Threads {
		st := &s.Threads[j]
		k := key{int32(st.Tid), int32(st.Tgid)}
		recs[k] = append(recs[k], st)
	}
	for i := range threads {
		for _, st := range recs[key{threads[i].Tid, threads[i].Tgid}] {
			if st.End != nil && st.End.Cmdline != "" {
				threads[i].Cmdline = st.End.Cmdline
			} else if st.Begin != nil {
				threads[i].Cmdline = st.Begin.Cmdline
			}
			if d, ok := st.Delta(); ok {
				threads[i].SnapDelta = &ProcDelta{Voluntary: d.VoluntaryCtxtSwitches,
					Nonvoluntary: d.NonvoluntaryCtxtSwitches, CPUNs: d.UtimeNs + d.StimeNs}
			}
		}
	}
}

// familyStats summarises families and the clusters they landed in.
func familyStats(threads []Thread) []FamilyStat {
	var out []FamilyStat
	for _, t := range threads { // threads are sorted by family
		if n := len(out); n == 0 || out[n-1].Family != t.Family {
			out = append(out, FamilyStat{Family: t.Family, Clusters: []int{}})
		}
		f := &out[len(out)-1]
		f.Threads++
		f.CPUShare += t.Features.CPUShare
		if !slices.Contains(f.Clusters, t.Cluster) {
			f.Clusters = append(f.Clusters, t.Cluster)
		}
	}
	for i := range out {
		slices.Sort(out[i].Clusters)
		out[i].CPUShare = round4(out[i].CPUShare)
	}
	if out == nil {
		out = []FamilyStat{}
	}
	return out
}
