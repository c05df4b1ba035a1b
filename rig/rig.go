// Package rig lays this machine out as a Kubernetes node for a measurement:
// the workload in a pod cgroup where the kubelet would put it, the
// benchmark's client in a cgroup of its own outside the pods (or on CPUs of
// its own, a client on another node), and the background load as BestEffort
// pods under a besteffort parent. A profile is then measured against the
// neighbours it will have in production, and the node's tier — what the
// scheduler does for the QoS classes, whatever the profile — becomes a
// lever of its own (Rig.Tier).
//
// The tree lives under one cgroup temper-train owns, named after the owner's
// pid and start time; Remove takes it down, and RemoveStale takes down the
// tree of a run that died (SIGKILL), moving a process it adopted back where
// it was and killing what the run started.
package rig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/machine"
)

// prefix starts the name of a rig's root cgroup: temper-rig.PID.START.
const prefix = "temper-rig."

// StateDir holds one file per live rig: the processes it adopted, so that
// RemoveStale can move them back after the owner was killed.
const StateDir = "/run/temper-train/rig"

// ErrNoTier is wrapped when the tier cannot be put in force here.
var ErrNoTier = errors.New("the tier needs cpu.idle (Linux ≥ 5.15)")

// Options shape the pod and the node.
type Options struct {
	// Request is the pod's CPU request in millicores: the weight its cgroup
	// gets (1000m is 1024 shares). 0 is 1000m.
	Request int
	// Limit is the pod's CPU limit in millicores (CFS quota over 100 ms);
	// 0 is none. A pod whose limit equals its request is Guaranteed and
	// sits directly under kubepods; one with a higher limit is Burstable.
	Limit int
	// ClientCPUs are reserved for the benchmark's client, as if it ran on
	// another node: the pods (and the node under test) get the rest.
	ClientCPUs []int
}

// Check refuses options no node could have.
func (o Options) Check(online []int) error {
	switch {
	case o.Request < 0:
		return fmt.Errorf("request %dm: want ≥ 0", o.Request)
	case o.Limit < 0:
		return fmt.Errorf("limit %dm: want ≥ 0", o.Limit)
	case o.Limit > 0 && o.Limit < o.request():
		return fmt.Errorf("limit %dm is below the request %dm: Kubernetes refuses such a pod", o.Limit, o.request())
	}
	for _, c := range o.ClientCPUs {
		if !slices.Contains(online, c) {
			return fmt.Errorf("client CPU %d: not online here (online: %s)", c, machine.FormatCPUList(online))
		}
	}
	if len(o.ClientCPUs) > 0 && len(online)-len(o.ClientCPUs) < 1 {
		return fmt.Errorf("client CPUs %s leave the node no CPU", machine.FormatCPUList(o.ClientCPUs))
	}
	return nil
}

func (o Options) request() int {
	if o.Request == 0 {
		return 1000
	}
	return o.Request
}

// QoS is the pod's Kubernetes QoS class.
func (o Options) QoS() string {
	if o.Limit == 0 || o.Limit == o.request() {
		return "Guaranteed"
	}
	return "Burstable"
}

// Rig is a node-shaped cgroup tree in force.
type Rig struct {
	opts  Options
	h     cgroup.Hierarchy
	name  string
	state string

	root, kubepods, pod, besteffort, client cgroup.Dir
	nodeCPUs                                []int

	mu      sync.Mutex
	adopted []adoption
	// idleWas and weightWas are besteffort's cpu.idle and weight before
	// Tier(true); idleWas is "" when the tier is not in force.
	idleWas, weightWas string
}

// adoption is a process that was running before the rig and was moved into
// its pod: Remove moves it back.
type adoption struct {
	Pid    int    `json:"pid"`
	Start  uint64 `json:"start"`
	CPU    string `json:"cpu"`              // its cgroup in the cpu hierarchy, from the root
	Cpuset string `json:"cpuset,omitempty"` // and in the v1 cpuset hierarchy
	Acct   string `json:"acct,omitempty"`   // and in a v1 cpuacct hierarchy apart
}

// state is a rig's file in StateDir.
type state struct {
	Root    string     `json:"root"`
	Adopted []adoption `json:"adopted,omitempty"`
}

// New makes the tree: ROOT/kubepods[/burstable]/pod-workload,
// ROOT/kubepods/besteffort and ROOT/client, with the kubelet's weights
// (kubepods gets the node's CPUs as its request, besteffort the lowest
// weight) and the pod's quota when it has a limit.
func New(opts Options) (*Rig, error) {
	topo, err := machine.ReadTopology("/")
	if err != nil {
		return nil, fmt.Errorf("rig: %w", err)
	}
	online := topo.Online
	if err := opts.Check(online); err != nil {
		return nil, fmt.Errorf("rig: %w", err)
	}
	h, err := cgroup.Find()
	if err != nil {
		return nil, fmt.Errorf("rig: %w", err)
	}
	st, err := procfs.New("/proc").Stat(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("rig: %w", err)
	}
	r := &Rig{opts: opts, h: h, name: fmt.Sprintf("%s%d.%d", prefix, st.PID, st.StartTime)}
	r.state = filepath.Join(StateDir, r.name+".json")
	r.nodeCPUs = without(online, opts.ClientCPUs)
	if err := r.make(); err != nil {
		return nil, errors.Join(err, r.root.RemoveTree(), os.Remove(r.state))
	}
	return r, nil
}

func (r *Rig) make() error {
	var err error
	if err := r.save(); err != nil {
		return err
	}
	// Accounted: the pod's CPU usage is read from its cgroup (PodCPU).
	if r.root, err = r.h.Top().Accounted().Make(r.name); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	if r.kubepods, err = r.root.Make("kubepods"); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	if len(r.opts.ClientCPUs) > 0 {
		if err := r.kubepods.SetCpus(machine.FormatCPUList(r.nodeCPUs)); err != nil {
			return fmt.Errorf("rig: %w", err)
		}
	}
	if err := r.kubepods.Set(r.h.WeightFile(), r.h.Weight(1000*len(r.nodeCPUs))); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	parent := r.kubepods
	if r.opts.QoS() == "Burstable" {
		if parent, err = r.kubepods.Make("burstable"); err != nil {
			return fmt.Errorf("rig: %w", err)
		}
		if err := parent.Set(r.h.WeightFile(), r.h.Weight(r.opts.request())); err != nil {
			return fmt.Errorf("rig: %w", err)
		}
	}
	if r.pod, err = parent.Make("pod-workload"); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	if err := r.pod.Set(r.h.WeightFile(), r.h.Weight(r.opts.request())); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	if r.opts.Limit > 0 {
		if err := r.pod.Set(r.h.Quota(r.opts.Limit)); err != nil {
			return fmt.Errorf("rig: %w", err)
		}
	}
	if r.besteffort, err = r.kubepods.Make("besteffort"); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	if err := r.besteffort.Set(r.h.WeightFile(), r.h.Weight(0)); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	if r.client, err = r.root.Make("client"); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	if len(r.opts.ClientCPUs) > 0 {
		if err := r.client.SetCpus(machine.FormatCPUList(r.opts.ClientCPUs)); err != nil {
			return fmt.Errorf("rig: %w", err)
		}
	}
	return nil
}

// save writes the rig's state file (atomically).
func (r *Rig) save() error {
	b, err := json.Marshal(state{Root: r.name, Adopted: r.adopted})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	if err := atomicfile.Write(r.state, 0o644, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	return nil
}

// Pod is the workload's pod cgroup.
func (r *Rig) Pod() cgroup.Dir { return r.pod }

// PodCPU reads the pod cgroup's CPU accounting: what the workload used,
// how often its quota throttled it, and the quota.
func (r *Rig) PodCPU() (cgroup.CPUStat, error) { return r.pod.ReadCPU() }

// Client is the benchmark client's cgroup.
func (r *Rig) Client() cgroup.Dir { return r.client }

// BestEffort is the parent of the BestEffort pods (the spinners).
func (r *Rig) BestEffort() cgroup.Dir { return r.besteffort }

// CpusetScope is the directory below which a backend that reserves whole
// cores may narrow other cgroups' cpusets: the pods' (kubepods, in the
// cpuset hierarchy), as the kubelet's static CPU manager does, never the
// client's, which stands for another node or the node's own processes.
func (r *Rig) CpusetScope() string {
	if r.kubepods.Cpuset != "" {
		return r.kubepods.Cpuset
	}
	return r.kubepods.CPU
}

// NodeCPUs are the CPUs of the node under test: all but the client's.
func (r *Rig) NodeCPUs() []int { return r.nodeCPUs }

// Adopt moves a running process (all its threads) into the pod; Remove
// moves it back to where it was.
func (r *Rig) Adopt(pid int) error {
	fsys := procfs.New("/proc")
	st, err := fsys.Stat(pid)
	if err != nil {
		return fmt.Errorf("rig: adopting %d: %w", pid, err)
	}
	cg, err := fsys.Cgroup(pid)
	if err != nil {
		return fmt.Errorf("rig: adopting %d: %w", pid, err)
	}
	a := adoption{Pid: pid, Start: st.StartTime, CPU: cg.CPU()}
	if r.h.Cpuset != "" {
		a.Cpuset = cg.V1["cpuset"]
	}
	if r.h.Acct != "" {
		a.Acct = cg.V1["cpuacct"]
	}
	r.mu.Lock()
	r.adopted = append(r.adopted, a)
	err = r.save()
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.pod.Move(pid)
}

// Tier puts the node's tier in force (on) or takes it back: on CFS, the
// besteffort parent becomes an idle entity (cpu.idle = 1), so that no
// BestEffort task wins a wakeup-preemption contest against a pod's. The
// value before is restored exactly.
func (r *Rig) Tier(on bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if on == (r.idleWas != "") {
		return nil
	}
	if on {
		was, err := r.besteffort.Get("cpu.idle")
		if err != nil {
			return fmt.Errorf("rig: %w: %w", ErrNoTier, err)
		}
		weight, err := r.besteffort.Get(r.h.WeightFile())
		if err != nil {
			return fmt.Errorf("rig: tier: %w", err)
		}
		if err := r.besteffort.Set("cpu.idle", "1"); err != nil {
			return fmt.Errorf("rig: tier: %w", err)
		}
		r.idleWas, r.weightWas = was, weight
		return nil
	}
	// Leaving idle, the kernel gives the group the default weight, not the
	// one it had: that is written back too.
	if err := r.besteffort.Set("cpu.idle", r.idleWas); err != nil {
		return fmt.Errorf("rig: tier: %w", err)
	}
	if err := r.besteffort.Set(r.h.WeightFile(), r.weightWas); err != nil {
		return fmt.Errorf("rig: tier: %w", err)
	}
	r.idleWas = ""
	return nil
}

// Describe says what the rig is, for a report: one line per part.
func (r *Rig) Describe() []string {
	wf := r.h.WeightFile()
	lines := []string{
		fmt.Sprintf("node: CPUs %s (%d) of this machine; cgroup v%d under %s", machine.FormatCPUList(r.nodeCPUs), len(r.nodeCPUs), r.h.Version, r.root.CPU),
	}
	pod := fmt.Sprintf("workload: a %s pod, request %dm (%s %s)", r.opts.QoS(), r.opts.request(), wf, r.h.Weight(r.opts.request()))
	if r.opts.Limit > 0 {
		f, v := r.h.Quota(r.opts.Limit)
		pod += fmt.Sprintf(", limit %dm (%s %s)", r.opts.Limit, f, v)
	} else {
		pod += ", no CPU limit"
	}
	lines = append(lines, pod,
		fmt.Sprintf("background: spinners as BestEffort pods under kubepods/besteffort (%s %s)", wf, r.h.Weight(0)))
	if len(r.opts.ClientCPUs) > 0 {
		lines = append(lines, fmt.Sprintf("client: its own cgroup and session on CPUs %s, apart from the node (a client on another node)", machine.FormatCPUList(r.opts.ClientCPUs)))
	} else {
		lines = append(lines, fmt.Sprintf("client: its own cgroup (%s %s, outside kubepods) and session, sharing the node's CPUs", wf, r.h.Weight(1000)))
	}
	return lines
}

// Remove takes the tier back, moves adopted processes back where they
// were, kills what is left in the tree (what the run started) and removes
// it. Call it once the workload and the client have stopped.
func (r *Rig) Remove() error {
	errs := []error{r.Tier(false)}
	r.mu.Lock()
	adopted := r.adopted
	r.mu.Unlock()
	errs = append(errs, clear(r.h, r.root, r.pod, adopted))
	if err := errors.Join(errs...); err != nil {
		return err // the state file stays, for RemoveStale
	}
	return ignoreMissing(os.Remove(r.state))
}

// clear empties and removes the tree at root: adopted processes, and what
// they forked since, go back to where each adopted process came from;
// anything else in the tree (what the run started) is killed.
func clear(h cgroup.Hierarchy, root, pod cgroup.Dir, adopted []adoption) error {
	var errs []error
	fsys := procfs.New("/proc")
	origin := func(a adoption) cgroup.Dir {
		b := h.Top().Child(a.CPU)
		if h.Cpuset != "" {
			b.Cpuset = filepath.Join(h.Cpuset, a.Cpuset)
		}
		if h.Acct != "" {
			b.Acct = filepath.Join(h.Acct, a.Acct)
		}
		return b
	}
	if len(adopted) > 0 {
		pids, _ := pod.Procs()
		for _, pid := range pids {
			if a, ok := adoptedAncestor(fsys, pid, adopted); ok {
				errs = append(errs, ignoreGone(origin(a).Move(pid)))
			}
		}
	}
	errs = append(errs, killTree(root), root.RemoveTree())
	return errors.Join(errs...)
}

// adoptedAncestor finds the adopted process pid is, or descends from.
func adoptedAncestor(fsys procfs.FS, pid int, adopted []adoption) (adoption, bool) {
	for range 64 {
		st, err := fsys.Stat(pid)
		if err != nil {
			return adoption{}, false
		}
		for _, a := range adopted {
			if a.Pid == pid && a.Start == st.StartTime {
				return a, true
			}
		}
		if st.PPID <= 1 {
			return adoption{}, false
		}
		pid = st.PPID
	}
	return adoption{}, false
}

// killTree kills every process in the cgroups under root and waits until
// the cgroups are empty.
func killTree(root cgroup.Dir) error {
	var dirs []string
	filepath.WalkDir(root.CPU, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for _, d := range dirs {
		if err := killAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveStale takes down the rigs of runs that are gone. A live run's rig
// is left alone.
func RemoveStale() ([]string, error) {
	h, err := cgroup.Find()
	if err != nil {
		return nil, nil // no cpu controller: no rig can have been made
	}
	entries, err := os.ReadDir(h.Root)
	if err != nil {
		return nil, fmt.Errorf("rig: %w", err)
	}
	fsys := procfs.New("/proc")
	var removed []string
	var errs []error
	for _, e := range entries {
		pid, start, ok := parseName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		if st, err := fsys.Stat(pid); err == nil && st.StartTime == start && !st.Exited() {
			continue
		}
		var s state
		path := filepath.Join(StateDir, e.Name()+".json")
		if b, err := os.ReadFile(path); err == nil {
			if err := json.Unmarshal(b, &s); err != nil {
				errs = append(errs, fmt.Errorf("rig: %s: %w", path, err))
				continue
			}
		}
		root := h.Top().Accounted().Child(e.Name())
		pod := root.Child("kubepods").Child("pod-workload")
		if _, err := os.Stat(pod.CPU); err != nil {
			pod = root.Child("kubepods").Child("burstable").Child("pod-workload")
		}
		if err := clear(h, root, pod, s.Adopted); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, ignoreMissing(os.Remove(path)))
		removed = append(removed, root.CPU)
	}
	return removed, errors.Join(errs...)
}

// parseName parses temper-rig.PID.START.
func parseName(name string) (pid int, start uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, 0, false
	}
	p, s, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(s, 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return 0, 0, false
	}
	return pid, start, true
}

func without(all, drop []int) []int {
	var out []int
	for _, c := range all {
		if !slices.Contains(drop, c) {
			out = append(out, c)
		}
	}
	return out
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// ignoreGone drops the error of moving a process that has exited.
func ignoreGone(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// killAll kills every process in the cgroup dir and waits until it is
// empty.
func killAll(dir string) error {
	d := cgroup.Dir{CPU: dir}
	for range 500 {
		pids, err := d.Procs()
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("rig: killing %d in %s: %w", pid, dir, err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("rig: %s still holds processes 5s after SIGKILL", dir)
}
