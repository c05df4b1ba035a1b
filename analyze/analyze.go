package analyze

import (
	"errors"
	"fmt"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/observe"
	"temper.codes/temper-train/observe/snapshot"
)

// Options say what to analyse.
type Options struct {
	// Path names the trace in the report and JSON.
	Path string
	// Snapshot is the snapshot recorded with the trace, or nil. It supplies
	// the target (its target.tgids), thread groups the trace does not state,
	// the CPU topology for the SMT check and the cgroup counters for the CFS
	// bandwidth check.
	Snapshot *snapshot.Snapshot
	// Pids are thread-group ids to analyse; they override the snapshot's.
	Pids []int
	// Process selects every process with this name; it overrides the
	// snapshot's target. Pids and Process exclude each other.
	Process string
}

// ErrNoEvents is returned for a trace without scheduling events.
var ErrNoEvents = errors.New("the trace has no scheduling events")

// File opens a trace (Perfetto or ftrace text, optionally gzipped)
// and analyses it.
func File(path string, opts Options) (*Analysis, error) {
	r, err := observe.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if opts.Path == "" {
		opts.Path = path
	}
	return Trace(r, opts)
}

// Trace reads the whole trace from r and analyses the target's threads.
// Memory grows with the number of threads and distinct wake pairs in the
// trace, not with its length.
func Trace(r observe.Reader, opts Options) (*Analysis, error) {
	if len(opts.Pids) > 0 && opts.Process != "" {
		return nil, errors.New("give pids or a process name, not both")
	}
	for _, p := range opts.Pids {
		if p <= 0 {
			return nil, fmt.Errorf("pid %d: not a process id", p)
		}
	}
	mode, tgids := TargetAll, []int(nil)
	switch {
	case len(opts.Pids) > 0:
		mode, tgids = TargetPID, opts.Pids
	case opts.Process != "":
		mode = TargetProcess
	case opts.Snapshot != nil:
		mode, tgids = TargetSnapshot, opts.Snapshot.Target.Tgids
	}
	var topo *machine.Topology
	if opts.Snapshot != nil {
		topo = opts.Snapshot.Topology
	}
	c := newCollector(newSMTTracker(topo))
	if err := c.read(r); err != nil {
		return nil, err
	}
	c.finish()
	if c.lastTS <= c.firstTS {
		return nil, fmt.Errorf("%s: %w", opts.Path, ErrNoEvents)
	}
	window := float64(c.lastTS-c.firstTS) / 1e9
	threadsSeen := c.threads.Len() - 1

	snapTgid := map[int32]int32{}
	if opts.Snapshot != nil {
		for _, t := range opts.Snapshot.Threads {
			snapTgid[int32(t.Tid)] = int32(t.Tgid)
		}
		addSnapshotThreads(c, opts.Snapshot, tgids)
	}
	p := buildProcInfo(c, snapTgid)
	target, desc, err := selectTarget(c, p, mode, tgids, opts.Process)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Path, err)
	}
	in := make([]bool, c.threads.Len())
	for _, u := range target {
		in[u] = true
	}

	threads := buildThreads(c, p, target, window)
	if opts.Snapshot != nil {
		attachProcDeltas(threads, opts.Snapshot)
	}
	g := buildWakeGraph(c, p, threads, in)
	g.graphFeatures(threads)
	g.topPeers(threads, 5)
	processWakers(c, p, threads, in)
	for i := range threads {
		t := &threads[i]
		t.Scores = scoreThread(&t.Features, t.NeverRan)
		t.OwnClass, _ = t.Scores.best()
		t.LatCrit = ownLatCrit(&t.Features, c.acc[t.utid].prio, window)
	}
	propagateLatCrit(g, threads)
	clusters := clusterThreads(threads)
	classifyClusters(clusters, threads)
	if c, moved := reconcileClusters(clusters, threads); moved {
		clusters = c
		classifyClusters(clusters, threads)
	}

	info, stats, sst := r.Info(), r.Stats(), c.sched.Stats()
	lost, gaps := stats.TotalLost()
	a := &Analysis{
		Schema: Schema,
		Trace: TraceMeta{Path: opts.Path, Format: info.Format, Gzip: info.Gzip, KernelRelease: info.KernelRelease,
			NumCPUs: info.NumCPUs, CPUsSeen: len(bitList(c.cpusSeen)), FirstTSNs: c.firstTS, LastTSNs: c.lastTS,
			WindowNs: c.lastTS - c.firstTS, Events: c.events, LostEvents: lost, LostGaps: gaps, Cropped: stats.Cropped,
			Spurious: sst.SpuriousWakings, Mismatched: sst.MismatchedSwitch, ThreadsSeen: threadsSeen},
		Target:   TargetMeta{Mode: mode, Tgids: tgids, Process: opts.Process, Description: desc, Threads: len(threads)},
		Threads:  threads,
		Clusters: clusters,
		Graph:    g.export(window),
	}
	procs := map[int32]bool{}
	for _, t := range threads {
		procs[t.Tgid] = true
	}
	a.Target.Processes = len(procs)
	a.Families = familyStats(threads)
	nodeName := func(u int) string { return g.nodes[g.nodeOf[u]].ID }
	a.Lint = Lint{SMT: smtLint(opts.Snapshot, c.smt, threads, nodeName), CFS: cfsLint(opts.Snapshot)}
	a.Notes = notes(a, opts.Snapshot, info.Filtered)
	if mode == TargetPID || mode == TargetSnapshot {
		unknown := 0
		for u := 1; u < len(p.unknown); u++ {
			if p.unknown[u] && !p.kernel[u] && !in[u] {
				unknown++
			}
		}
		if unknown > 0 {
			a.Notes = append(a.Notes, fmt.Sprintf("%s outside the target with no known thread group (the trace did not record it): any of the target's among them were missed; record tgids (ftrace's record-tgid option; observe does) or pass the snapshot", plural(unknown, "user thread")))
		}
	}
	return a, nil
}

// notes collects the caveats that come with the numbers.
func notes(a *Analysis, snap *snapshot.Snapshot, filtered bool) []string {
	n := []string{}
	t := a.Trace
	if t.LostEvents > 0 || t.LostGaps > 0 {
		n = append(n, fmt.Sprintf("the recorder lost %d events (%d gaps of unknown size): counts near them are low and states uncertain", t.LostEvents, t.LostGaps))
	}
	switch {
	case t.Mismatched > 0 && filtered:
		n = append(n, fmt.Sprintf("%d switch-outs of tasks the CPU was not known to run: the trace is filtered to some tasks; the target's own states are complete, other tasks' are not", t.Mismatched))
	case t.Mismatched > 0:
		n = append(n, fmt.Sprintf("%d switch-outs of tasks the CPU was not known to run: the kernel did not report some switches (out of the idle task, or out of a few tasks it never reports), or the recorder missed them; Running times near them are uncertain", t.Mismatched))
	}
	var untimed, outs int64
	for _, th := range a.Threads {
		untimed += th.Features.UntimedRuns
		outs += th.Features.SwitchOuts
	}
	if untimed > 0 {
		n = append(n, fmt.Sprintf("%d runs of target threads (against %d switch-outs) lack a recorded switch-in or switch-out: their lengths and CPU time are missing, so CPU shares are lower bounds",
			untimed, outs))
	}
	if a.Target.Mode == TargetAll {
		n = append(n, "no target given: every user thread in the trace is analysed (kernel threads excluded by parent, state I and comm; see isKernelThread)")
	}
	var never []string
	for _, th := range a.Threads {
		if th.NeverRan {
			never = append(never, fmt.Sprintf("%s/%d", th.Comm, th.Tid))
		}
	}
	if len(never) > 0 {
		n = append(n, fmt.Sprintf("%s never ran in the window (sporadic by definition): %s", plural(len(never), "thread"), joinLimited(never, 10)))
	}
	for _, f := range a.Families {
		if len(f.Clusters) > 1 {
			n = append(n, fmt.Sprintf("family %s (%d threads) split across clusters %v: its threads behave differently", f.Family, f.Threads, f.Clusters))
		}
	}
	for _, c := range a.Clusters {
		if len(c.Dissent) > 0 {
			n = append(n, fmt.Sprintf("cluster %d is %s, but on their own %d of its %d threads score another class: tids %v", c.ID, c.Class, len(c.Dissent), len(c.Members), c.Dissent))
		}
	}
	if snap != nil && len(a.Target.Tgids) > 0 && a.Target.Mode != TargetSnapshot {
		n = append(n, "the target was given on the command line and overrides the snapshot's")
	}
	return n
}
