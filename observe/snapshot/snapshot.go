// Package snapshot records the state around a trace that the trace itself
// does not carry: the target's threads with their affinity, policy, nice and
// context-switch counters, the CPU topology, the target's cgroup CPU limits
// and throttling counters, the node agent's view, and host identity.
//
// The observe stage takes it in two halves around the trace:
//
//	s, err := snapshot.Begin(ctx, snapshot.Options{Tgids: tgids, ...})
//	... trace ...
//	err = s.End(ctx)
//	s.Events = snapshot.EventCounts{Total: n, LostPerCPU: lost}
//	err = s.WriteFile(filepath.Join(dir, "snapshot.json"))
//
// and analyze reads it back with Load, computing deltas between the halves
// (Thread.Delta, CgroupRecord.Delta). Problems that leave the snapshot usable
// (an unreachable agent, a cgroup file that does not exist, a process that
// exited during the trace) are appended to Snapshot.Warnings for the caller
// to show; they are not errors.
//
// The JSON form is versioned by its "schema" field (Schema); Load refuses
// any other version.
package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/machine"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/internal/bounded"
	"temper.codes/temper-train/internal/jsonerr"
	"temper.codes/temper-train/internal/mountinfo"
)

// Schema identifies the JSON layout this package writes and reads.
const Schema = "temper-train/snapshot/v1"

// Options describe the target and what the caller wants recorded with it.
type Options struct {
	// Tgids are the thread-group (process) ids of the target; at least one.
	// Every thread of each is recorded. Processes the target forks during
	// the trace are not followed: list them here if they matter.
	Tgids []int
	// Cgroup is the target's cgroup directory, an absolute path below a
	// cgroup mount (e.g. /sys/fs/cgroup/cpu/kubepods/pod1). When empty, the
	// cgroups of the first tgid are recorded: its v1 cpu cgroup and its v2
	// cgroup, whichever are mounted.
	Cgroup string
	// Pod is the Kubernetes pod of the target, when it is one.
	Pod *Pod
	// AgentURL is the full URL of the node agent's /observe endpoint; empty
	// to not ask the agent.
	AgentURL string
	// AgentTimeout bounds each agent request; DefaultAgentTimeout if zero.
	AgentTimeout time.Duration
	// Target describes the target for people (the command line, "pod ns/name").
	Target string
	// Trace is how the trace was taken, recorded as given.
	Trace TraceParams
}

// TraceParams are the trace settings the caller records with the snapshot.
type TraceParams struct {
	Attach     string            `json:"attach,omitempty"`      // "tp_btf" or "raw_tp"
	DurationNs int64             `json:"duration_ns,omitempty"` // requested trace length
	MaxEvents  int64             `json:"max_events,omitempty"`  // bound on recorded events, 0 = none
	MaxBytes   int64             `json:"max_bytes,omitempty"`   // bound on trace size, 0 = none
	Params     map[string]string `json:"params,omitempty"`      // anything else worth keeping
}

// EventCounts are the tracer's totals, filled by the caller after End.
type EventCounts struct {
	Total      int64   `json:"total"`        // events written to the trace
	LostPerCPU []int64 `json:"lost_per_cpu"` // events dropped, indexed by CPU
}

// Lost is the sum of LostPerCPU.
func (e EventCounts) Lost() int64 {
	var n int64
	for _, v := range e.LostPerCPU {
		n += v
	}
	return n
}

// Snapshot is the state recorded around one trace. Begin fills the begin
// halves, End the end halves; the caller fills Events.
type Snapshot struct {
	Schema   string            `json:"schema"`
	Host     Host              `json:"host"`
	Taken    Taken             `json:"taken"`
	Target   Target            `json:"target"`
	Pod      *Pod              `json:"pod,omitempty"`
	Trace    TraceParams       `json:"trace"`
	Events   EventCounts       `json:"events"`
	Topology *machine.Topology `json:"topology"`
	Threads  []Thread          `json:"threads"` // sorted by tgid, tid, start
	Cgroups  []CgroupRecord    `json:"cgroups"` // the one governing CPU first; see CPUCgroup
	NodeCPU  *NodeCPU          `json:"node_cpu,omitempty"`
	Agent    *Agent            `json:"agent,omitempty"`
	Warnings []string          `json:"warnings"`

	// live is set by Begin: what End needs to read the system again.
	live *liveState
}

// liveState is how a snapshot taken in this process reads the system.
type liveState struct {
	proc         procReader
	client       *http.Client
	agentTimeout time.Duration
}

// Host identifies the machine and kernel the trace ran on.
type Host struct {
	Hostname      string `json:"hostname"`
	KernelRelease string `json:"kernel_release"`
	BootID        string `json:"boot_id"` // monotonic timestamps only compare within one boot
	NumCPU        int    `json:"num_cpu"` // online logical CPUs
	ClockTicks    int64  `json:"clock_ticks_per_sec"`
}

// Taken says when the two halves were read.
type Taken struct {
	Begin Stamp  `json:"begin"`
	End   *Stamp `json:"end"` // nil until End
}

// Stamp is one moment in wall-clock time, in CLOCK_BOOTTIME and in
// CLOCK_MONOTONIC. Trace timestamps are CLOCK_BOOTTIME (the BPF tracer
// stamps events with bpf_ktime_get_boot_ns, the clock Perfetto expects), so
// the Boottime fields place them against the snapshot directly; the two
// clocks differ by the time the machine spent suspended. The Monotonic
// fields are kept for readers of older snapshots, which have only them.
type Stamp struct {
	Wall        time.Time `json:"wall"`         // RFC 3339, UTC
	MonotonicNs int64     `json:"monotonic_ns"` // when reading began
	// DoneMonotonicNs is when the threads and cgroups had been read: the
	// counters were sampled between MonotonicNs and DoneMonotonicNs.
	DoneMonotonicNs int64 `json:"done_monotonic_ns"`
	// Clock names the clock of the *MonotonicNs fields: "CLOCK_MONOTONIC",
	// or "uptime" (CLOCK_BOOTTIME from /proc/uptime, centisecond
	// resolution) when clock_gettime failed.
	Clock string `json:"clock"`
	// BoottimeNs and DoneBoottimeNs are the same two moments on
	// CLOCK_BOOTTIME, the trace's clock (0: not recorded, an older snapshot).
	BoottimeNs     int64 `json:"boottime_ns,omitempty"`
	DoneBoottimeNs int64 `json:"done_boottime_ns,omitempty"`
}

// Target is what was observed.
type Target struct {
	Description string `json:"description,omitempty"`
	Tgids       []int  `json:"tgids"`
	Cgroup      string `json:"cgroup,omitempty"` // Options.Cgroup as given
}

// Thread is one thread of the target over the trace. A thread is identified
// by tid and start time together, so a tid the kernel reused during the
// trace yields two Threads.
type Thread struct {
	Tid        int    `json:"tid"`
	Tgid       int    `json:"tgid"`
	StartTicks int64  `json:"start_ticks"` // start time in clock ticks after boot (stat field 22)
	Comm       string `json:"comm"`        // at End if present then, else at Begin

	// PresentAtBegin is false for a thread created during the trace;
	// PresentAtEnd is false for one that exited during it.
	PresentAtBegin bool `json:"present_at_begin"`
	PresentAtEnd   bool `json:"present_at_end"`

	Begin *ThreadState `json:"begin"`
	End   *ThreadState `json:"end"`
}

// ThreadDelta is how a thread's counters moved over the trace.
type ThreadDelta struct {
	VoluntaryCtxtSwitches    int64
	NonvoluntaryCtxtSwitches int64
	UtimeNs                  int64
	StimeNs                  int64
}

// Delta returns End − Begin, or false when the thread was not present at
// both ends of the trace.
func (t *Thread) Delta() (ThreadDelta, bool) {
	if t.Begin == nil || t.End == nil {
		return ThreadDelta{}, false
	}
	return ThreadDelta{
		VoluntaryCtxtSwitches:    t.End.VoluntaryCtxtSwitches - t.Begin.VoluntaryCtxtSwitches,
		NonvoluntaryCtxtSwitches: t.End.NonvoluntaryCtxtSwitches - t.Begin.NonvoluntaryCtxtSwitches,
		UtimeNs:                  t.End.UtimeNs - t.Begin.UtimeNs,
		StimeNs:                  t.End.StimeNs - t.Begin.StimeNs,
	}, true
}

// CPUCgroup returns the cgroup whose cpu controller governs the target — the
// caller's cgroup, or on a v1 host the cpu hierarchy's — or nil if no cgroup
// was recorded.
func (s *Snapshot) CPUCgroup() *CgroupRecord {
	if len(s.Cgroups) == 0 {
		return nil
	}
	return &s.Cgroups[0]
}

// Begin takes the first half of a snapshot of the target, at trace start.
// It fails when a tgid does not exist or the caller's cgroup cannot be read:
// the target is then not what the caller thinks it is. ctx bounds the agent
// request.
func Begin(ctx context.Context, opts Options) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("snapshot begin: %w", err)
	}
	tgids, err := checkTgids(opts.Tgids)
	if err != nil {
		return nil, fmt.Errorf("snapshot begin: %w", err)
	}
	auxv, _ := os.ReadFile("/proc/self/auxv")
	live := &liveState{
		proc:         procReader{proc: "/proc", ticks: clockTicks(auxv)},
		client:       &http.Client{},
		agentTimeout: opts.AgentTimeout,
	}
	s := &Snapshot{
		Schema:   Schema,
		Target:   Target{Description: opts.Target, Tgids: tgids, Cgroup: opts.Cgroup},
		Pod:      opts.Pod,
		Trace:    opts.Trace,
		Events:   EventCounts{LostPerCPU: []int64{}},
		Threads:  []Thread{},
		Cgroups:  []CgroupRecord{},
		Warnings: []string{},
		live:     live,
	}
	s.Taken.Begin.Wall = time.Now().UTC()
	s.Taken.Begin.MonotonicNs, s.Taken.Begin.Clock = monotonicNow()
	s.Taken.Begin.BoottimeNs = boottimeNow()

	// Counters first, so that they are read as close to trace start as
	// possible; the slower, static parts follow.
	s.NodeCPU = &NodeCPU{}
	if s.NodeCPU.Begin, err = readCPUTimes(filepath.Join(live.proc.proc, "stat")); err != nil {
		s.warnf("begin: node CPU time: %v", err)
	}
	for _, tgid := range tgids {
		recs, err := live.proc.readProcess(tgid)
		if err != nil {
			return nil, fmt.Errorf("snapshot begin: %w", err)
		}
		for _, r := range recs {
			st := r.State
			s.Threads = append(s.Threads, Thread{
				Tid: r.Tid, Tgid: r.Tgid, StartTicks: r.StartTicks, Comm: st.Comm,
				PresentAtBegin: true, Begin: &st,
			})
		}
	}
	if err := s.beginCgroups(opts.Cgroup, tgids[0]); err != nil {
		return nil, fmt.Errorf("snapshot begin: %w", err)
	}
	s.Taken.Begin.DoneMonotonicNs, _ = monotonicNow()
	s.Taken.Begin.DoneBoottimeNs = boottimeNow()

	if s.Topology, err = machine.ReadTopology("/"); err != nil {
		return nil, fmt.Errorf("snapshot begin: %w", err)
	}
	if len(s.Topology.LLCs) == 0 {
		s.warnf("begin: topology: sysfs has no CPU cache information; llcs is empty")
	}
	if len(s.Topology.NUMANodes) == 0 {
		s.warnf("begin: topology: no /sys/devices/system/node; numa_nodes is empty")
	}
	s.Host = readHost(live.proc.ticks, len(s.Topology.Online), s.warnf)

	if opts.AgentURL != "" {
		s.Agent = &Agent{URL: opts.AgentURL}
		s.Agent.Begin = fetchAgent(ctx, live.client, opts.AgentURL, live.agentTimeout)
		if !s.Agent.Begin.OK() {
			s.warnf("begin: %s", s.Agent.Begin.Error)
		}
	}
	return s, nil
}

// beginCgroups finds and reads the target's cgroups.
func (s *Snapshot) beginCgroups(cgroup string, firstTgid int) error {
	all, err := mountinfo.Read()
	if err != nil {
		return fmt.Errorf("read /proc/self/mountinfo: %w", err)
	}
	mounts := newCgroupMounts(all)
	if cgroup != "" {
		rec, err := mounts.resolveCgroupOption(cgroup)
		if err != nil {
			return err
		}
		if rec.Begin, err = ReadCgroupCPU(rec.dir()); err != nil {
			return err
		}
		s.Cgroups = append(s.Cgroups, rec)
		return nil
	}
	path := filepath.Join(s.live.proc.proc, strconv.Itoa(firstTgid), "cgroup")
	pc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	recs, warns, err := mounts.resolveProcessCgroups(pc)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	for _, w := range warns {
		s.warnf("begin: %s", w)
	}
	if len(recs) == 0 {
		s.warnf("begin: cgroup: process %d has no cgroup in a mounted hierarchy", firstTgid)
	}
	for _, rec := range recs {
		if rec.Begin, err = ReadCgroupCPU(rec.dir()); err != nil {
			s.warnf("begin: %v", err)
		}
		s.Cgroups = append(s.Cgroups, rec)
	}
	return nil
}

// dir is what ReadCgroupCPU needs to read the record's cgroup.
func (r *CgroupRecord) dir() CgroupDir {
	return CgroupDir{Version: r.Version, Path: r.Path, CPUAcctPath: r.CPUAcctPath}
}

// End takes the second half of the snapshot, at trace end. Threads created
// since Begin are added; threads gone since are marked. Nothing found at End
// fails it — a process that exited or a cgroup that was removed is a
// warning — so the trace is never lost to it; it fails only on a snapshot
// that was not begun in this process or was already ended. ctx bounds the
// agent request only, so a context cancelled to stop the trace still
// yields the counters.
func (s *Snapshot) End(ctx context.Context) error {
	if s.live == nil {
		return errors.New("snapshot end: the snapshot was not begun by this process")
	}
	if s.Taken.End != nil {
		return errors.New("snapshot end: already ended")
	}
	end := &Stamp{Wall: time.Now().UTC()}
	end.MonotonicNs, end.Clock = monotonicNow()
	end.BoottimeNs = boottimeNow()

	if s.NodeCPU != nil {
		var err error
		if s.NodeCPU.End, err = readCPUTimes(filepath.Join(s.live.proc.proc, "stat")); err != nil {
			s.warnf("end: node CPU time: %v", err)
		}
	}
	index := map[threadKey]int{}
	for i, t := range s.Threads {
		index[threadKey{t.Tid, t.StartTicks}] = i
	}
	for _, tgid := range s.Target.Tgids {
		recs, err := s.live.proc.readProcess(tgid)
		if errors.Is(err, errGone) {
			s.warnf("end: process %d exited during the trace", tgid)
			continue
		}
		if err != nil {
			s.warnf("end: %v", err)
			continue
		}
		for _, r := range recs {
			st := r.State
			if i, ok := index[threadKey{r.Tid, r.StartTicks}]; ok {
				s.Threads[i].End, s.Threads[i].PresentAtEnd, s.Threads[i].Comm = &st, true, st.Comm
				continue
			}
			s.Threads = append(s.Threads, Thread{
				Tid: r.Tid, Tgid: r.Tgid, StartTicks: r.StartTicks, Comm: st.Comm,
				PresentAtEnd: true, End: &st,
			})
		}
	}
	sortThreads(s.Threads)

	for i := range s.Cgroups {
		c, err := ReadCgroupCPU(s.Cgroups[i].dir())
		if err != nil {
			s.warnf("end: %v", err)
			continue
		}
		s.Cgroups[i].End = c
	}
	end.DoneMonotonicNs, _ = monotonicNow()
	end.DoneBoottimeNs = boottimeNow()
	s.Taken.End = end

	if s.Agent != nil {
		s.Agent.End = fetchAgent(ctx, s.live.client, s.Agent.URL, s.live.agentTimeout)
		if !s.Agent.End.OK() {
			s.warnf("end: %s", s.Agent.End.Error)
		}
	}
	return nil
}

type threadKey struct {
	tid   int
	start int64
}

func sortThreads(ts []Thread) {
	sort.SliceStable(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.Tgid != b.Tgid {
			return a.Tgid < b.Tgid
		}
		if a.Tid != b.Tid {
			return a.Tid < b.Tid
		}
		return a.StartTicks < b.StartTicks
	})
}

// checkTgids returns the tgids without duplicates, in the caller's order.
func checkTgids(in []int) ([]int, error) {
	if len(in) == 0 {
		return nil, errors.New("no tgids")
	}
	out := make([]int, 0, len(in))
	for _, t := range in {
		if t <= 0 {
			return nil, fmt.Errorf("tgid %d: not a process id", t)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (s *Snapshot) warnf(format string, args ...any) {
	s.Warnings = append(s.Warnings, fmt.Sprintf(format, args...))
}

// readHost gathers the host's identity; what cannot be read is left empty
// and reported through warn.
func readHost(ticks int64, numCPU int, warn func(string, ...any)) Host {
	h := Host{NumCPU: numCPU, ClockTicks: ticks}
	var err error
	if h.Hostname, err = os.Hostname(); err != nil {
		warn("begin: hostname: %v", err)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		warn("begin: uname: %v", err)
	} else {
		h.KernelRelease = unix.ByteSliceToString(u.Release[:])
	}
	if h.BootID, err = procfs.FirstLine("/proc/sys/kernel/random/boot_id"); err != nil {
		warn("begin: boot id: %v", err)
	}
	return h
}

// monotonicNow reads CLOCK_MONOTONIC. Should clock_gettime fail, it falls
// back to /proc/uptime (CLOCK_BOOTTIME, which runs ahead of CLOCK_MONOTONIC
// by the time spent suspended), and says so.
func monotonicNow() (int64, string) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err == nil {
		return ts.Nano(), "CLOCK_MONOTONIC"
	}
	line, err := procfs.FirstLine("/proc/uptime")
	if err != nil {
		return 0, "none"
	}
	up, _, _ := strings.Cut(line, " ")
	sec, frac, _ := strings.Cut(up, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	f, err2 := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, "none"
	}
	return s*1e9 + f, "uptime"
}

// Write writes the snapshot as indented JSON.
func (s *Snapshot) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	return nil
}

// WriteFile writes the snapshot to path atomically: a reader sees the old
// file or the complete new one, never a partial snapshot.
func (s *Snapshot) WriteFile(path string) error {
	if err := atomicfile.Write(path, 0o644, s.Write); err != nil {
		return fmt.Errorf("snapshot %s: %w", path, err)
	}
	return nil
}

// Load reads a snapshot file; errors name the file.
func Load(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	defer f.Close()
	s, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return s, nil
}

// maxBytes caps a snapshot file: the largest real ones (thousands of
// threads) are a few MiB.
const maxBytes = 256 << 20

// Read decodes a snapshot. It checks the schema before anything else, so a
// file of another version is reported as such rather than as a type error,
// and then that the content is consistent enough for analyze to rely on.
func Read(r io.Reader) (*Snapshot, error) {
	data, err := bounded.ReadAll(r, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty file")
	}
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonerr.Decode(err, data, "a snapshot")
	}
	if head.Schema == nil {
		return nil, fmt.Errorf("no \"schema\" field: not a temper-train snapshot (want %q)", Schema)
	}
	if *head.Schema != Schema {
		return nil, fmt.Errorf("schema %q, want %q", *head.Schema, Schema)
	}
	var s Snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, jsonerr.Decode(err, data, "a snapshot")
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// validate checks what analyze relies on without re-checking every field.
func (s *Snapshot) validate() error {
	if s.Topology == nil {
		return errors.New("no topology")
	}
	if len(s.Target.Tgids) == 0 {
		return errors.New("target has no tgids")
	}
	if s.Taken.Begin.Wall.IsZero() {
		return errors.New("taken.begin has no wall time")
	}
	for i, t := range s.Threads {
		switch {
		case t.Tid <= 0 || t.Tgid <= 0:
			return fmt.Errorf("threads[%d]: tid %d, tgid %d: want positive ids", i, t.Tid, t.Tgid)
		case t.PresentAtBegin != (t.Begin != nil):
			return fmt.Errorf("threads[%d] (tid %d): present_at_begin is %v but begin is %s", i, t.Tid, t.PresentAtBegin, nullness(t.Begin != nil))
		case t.PresentAtEnd != (t.End != nil):
			return fmt.Errorf("threads[%d] (tid %d): present_at_end is %v but end is %s", i, t.Tid, t.PresentAtEnd, nullness(t.End != nil))
		case t.Begin == nil && t.End == nil:
			return fmt.Errorf("threads[%d] (tid %d): neither begin nor end", i, t.Tid)
		}
	}
	for i, c := range s.Cgroups {
		if c.Version != 1 && c.Version != 2 {
			return fmt.Errorf("cgroups[%d] (%s): version %d, want 1 or 2", i, c.Path, c.Version)
		}
		for _, r := range []*CgroupCPU{c.Begin, c.End} {
			if r != nil && r.Version != c.Version {
				return fmt.Errorf("cgroups[%d] (%s): reading of version %d in a v%d record", i, c.Path, r.Version, c.Version)
			}
		}
	}
	return nil
}

func nullness(present bool) string {
	if present {
		return "set"
	}
	return "null"
}
