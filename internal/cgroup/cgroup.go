// Package cgroup makes, fills and removes the cpu cgroups temper-train owns:
// the spinners' cgroups and the node-shaped rig's pods. It knows the two
// layouts the kernel offers — cgroup v1, with the cpu controller in a
// hierarchy of its own and cpuset apart, and cgroup v2 — so that its callers
// speak of one cgroup and its knobs, not of mounts.
package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"temper.codes/temper-train/internal/mountinfo"
)

// ErrNoCPU is wrapped when no mounted hierarchy has the cpu controller.
var ErrNoCPU = errors.New("no cgroup hierarchy with the cpu controller is mounted")

// Hierarchy is where cpu cgroups are made.
type Hierarchy struct {
	Root    string // the cpu controller's mount point
	Version int    // 1 or 2
	// Cpuset is the v1 cpuset hierarchy's mount point ("" when it is not
	// mounted apart). Every cgroup made here gets a twin there, so that a
	// backend that keeps exclusive cores free by narrowing other cgroups'
	// cpusets (as the kubelet's static CPU manager does) can narrow it.
	Cpuset string
	// Acct is the v1 cpuacct hierarchy's mount point when it is mounted
	// apart from cpu ("" when the two share one, and on v2): a cgroup's CPU
	// usage is counted there. Only the cgroups made below an accounted Dir
	// (Accounted) get a twin in it, so that nothing else temper-train makes
	// leaves one behind.
	Acct string
}

// Find returns the hierarchy holding the cpu controller: the v1 one when
// mounted (a hybrid host keeps the controllers there), else v2.
func Find() (Hierarchy, error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return Hierarchy{}, fmt.Errorf("cgroup: %w", err)
	}
	var v2, cpuset, acct string
	for _, m := range mounts {
		if m.FSType != "cgroup" || slices.Contains(m.SuperOptions, "cpu") {
			continue
		}
		if slices.Contains(m.SuperOptions, "cpuset") {
			cpuset = m.MountPoint
		}
		if slices.Contains(m.SuperOptions, "cpuacct") {
			acct = m.MountPoint
		}
	}
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup":
			if slices.Contains(m.SuperOptions, "cpu") {
				return Hierarchy{Root: m.MountPoint, Version: 1, Cpuset: cpuset, Acct: acct}, nil
			}
		case "cgroup2":
			if v2 == "" {
				v2 = m.MountPoint
			}
		}
	}
	if v2 != "" {
		ctrls, err := os.ReadFile(filepath.Join(v2, "cgroup.controllers"))
		if err == nil && slices.Contains(strings.Fields(string(ctrls)), "cpu") {
			return Hierarchy{Root: v2, Version: 2}, nil
		}
	}
	return Hierarchy{}, fmt.Errorf("cgroup: %w", ErrNoCPU)
}

// Top is the hierarchy's root cgroup.
func (h Hierarchy) Top() Dir { return Dir{h: h, CPU: h.Root, Cpuset: h.Cpuset} }

// WeightFile names the file that holds a cgroup's CPU weight.
func (h Hierarchy) WeightFile() string {
	if h.Version == 1 {
		return "cpu.shares"
	}
	return "cpu.weight"
}

// Weight is the weight the kubelet writes for a CPU request in millicores
// (Kubernetes' MilliCPUToShares, then its v1→v2 conversion): 1000m is 1024
// shares, the lowest is 2 shares (weight 1 on v2), the BestEffort value.
func (h Hierarchy) Weight(millicores int) string {
	shares := max(millicores*1024/1000, 2)
	shares = min(shares, 262144)
	if h.Version == 1 {
		return strconv.Itoa(shares)
	}
	return strconv.Itoa(1 + (shares-2)*9999/262142)
}

// Quota is the kubelet's CPU limit for millicores over a 100 ms period:
// the pair for cpu.cfs_quota_us and cpu.cfs_period_us on v1, or the
// "QUOTA PERIOD" line of cpu.max on v2. millicores ≤ 0 is no limit.
func (h Hierarchy) Quota(millicores int) (file, value string) {
	const period = 100000
	if h.Version == 1 {
		if millicores <= 0 {
			return "cpu.cfs_quota_us", "-1"
		}
		return "cpu.cfs_quota_us", strconv.Itoa(millicores * period / 1000)
	}
	if millicores <= 0 {
		return "cpu.max", "max " + strconv.Itoa(period)
	}
	return "cpu.max", fmt.Sprintf("%d %d", millicores*period/1000, period)
}

// Dir is one cgroup: its directory in the cpu hierarchy and its twins in
// the v1 cpuset and cpuacct hierarchies ("" when there is none).
type Dir struct {
	h      Hierarchy
	CPU    string
	Cpuset string
	Acct   string
}

// dirs are d's directories in every hierarchy it has one in.
func (d Dir) dirs() []string {
	var out []string
	for _, dir := range []string{d.CPU, d.Cpuset, d.Acct} {
		if dir != "" {
			out = append(out, dir)
		}
	}
	return out
}

// Accounted is d with its twin in the v1 cpuacct hierarchy named, where
// that is mounted apart from cpu (elsewhere d as it is): the cgroups made
// below it get twins there, and the tasks moved or started into them are
// counted, so that ReadCPU can read their usage. d's own twin must exist
// (the top's always does).
func (d Dir) Accounted() Dir {
	if d.h.Acct == "" || d.Acct != "" {
		return d
	}
	rel, err := filepath.Rel(d.h.Root, d.CPU)
	if err != nil {
		rel = d.CPU
	}
	d.Acct = filepath.Join(d.h.Acct, rel)
	return d
}

// Hierarchy is the hierarchy d is in.
func (d Dir) Hierarchy() Hierarchy { return d.h }

// Child is d's child name, made or not.
func (d Dir) Child(name string) Dir {
	c := Dir{h: d.h, CPU: filepath.Join(d.CPU, name)}
	if d.Cpuset != "" {
		c.Cpuset = filepath.Join(d.Cpuset, name)
	}
	if d.Acct != "" {
		c.Acct = filepath.Join(d.Acct, name)
	}
	return c
}

// Make makes d's child name in every hierarchy d is in. A v1 cpuset twin
// is allowed what its parent is (a new one has no CPUs and takes no task);
// on v2 the parent hands the cpu controller down first.
func (d Dir) Make(name string) (Dir, error) {
	c := d.Child(name)
	if d.h.Version == 2 {
		ctl := filepath.Join(d.CPU, "cgroup.subtree_control")
		b, err := os.ReadFile(ctl)
		if err != nil {
			return Dir{}, fmt.Errorf("cgroup: %w", err)
		}
		if !slices.Contains(strings.Fields(string(b)), "cpu") {
			if err := os.WriteFile(ctl, []byte("+cpu"), 0); err != nil {
				return Dir{}, fmt.Errorf("cgroup: enabling the cpu controller in %s: %w", d.CPU, err)
			}
		}
	}
	if err := os.Mkdir(c.CPU, 0o755); err != nil {
		return Dir{}, fmt.Errorf("cgroup: %w", err)
	}
	if c.Cpuset != "" {
		if err := os.Mkdir(c.Cpuset, 0o755); err != nil {
			return Dir{}, errors.Join(fmt.Errorf("cgroup: %w", err), rmdir(c.CPU))
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(d.Cpuset, f))
			if err == nil {
				err = os.WriteFile(filepath.Join(c.Cpuset, f), b, 0)
			}
			if err != nil {
				return Dir{}, errors.Join(fmt.Errorf("cgroup: %s: %w", f, err), c.Remove())
			}
		}
	}
	if c.Acct != "" {
		if err := os.Mkdir(c.Acct, 0o755); err != nil {
			c.Acct = ""
			return Dir{}, errors.Join(fmt.Errorf("cgroup: %w", err), c.Remove())
		}
	}
	return c, nil
}

// Set writes value to d's knob file in the cpu hierarchy.
func (d Dir) Set(file, value string) error {
	if err := os.WriteFile(filepath.Join(d.CPU, file), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup: %s = %s: %w", filepath.Join(d.CPU, file), value, err)
	}
	return nil
}

// SetCpus confines d to cpus (a CPU list such as "0-1"): the v1 cpuset
// twin's cpuset.cpus, or cpuset.cpus on v2 once the parent hands the cpuset
// controller down. Children made after take it.
func (d Dir) SetCpus(cpus string) error {
	if d.h.Version == 1 {
		if d.Cpuset == "" {
			return fmt.Errorf("cgroup: confining %s to CPUs %s: no cpuset hierarchy is mounted", d.CPU, cpus)
		}
		if err := os.WriteFile(filepath.Join(d.Cpuset, "cpuset.cpus"), []byte(cpus), 0); err != nil {
			return fmt.Errorf("cgroup: %s cpuset.cpus = %s: %w", d.Cpuset, cpus, err)
		}
		return nil
	}
	ctl := filepath.Join(filepath.Dir(d.CPU), "cgroup.subtree_control")
	if err := os.WriteFile(ctl, []byte("+cpuset"), 0); err != nil {
		return fmt.Errorf("cgroup: enabling the cpuset controller in %s: %w", filepath.Dir(d.CPU), err)
	}
	return d.Set("cpuset.cpus", cpus)
}

// Get reads d's knob file in the cpu hierarchy, trimmed.
func (d Dir) Get(file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(d.CPU, file))
	if err != nil {
		return "", fmt.Errorf("cgroup: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Procs lists the processes in d (cpu hierarchy).
func (d Dir) Procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(d.CPU, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// Move moves process pid (all its threads) into d, in every hierarchy.
func (d Dir) Move(pid int) error {
	for _, dir := range d.dirs() {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroup: moving %d into %s: %w", pid, dir, err)
		}
	}
	return nil
}

// moveThread moves one thread into d (v1 only: its tasks files).
func (d Dir) moveThread(tid int) error {
	for _, dir := range d.dirs() {
		if err := os.WriteFile(filepath.Join(dir, "tasks"), []byte(strconv.Itoa(tid)), 0); err != nil {
			return fmt.Errorf("cgroup: moving thread %d into %s: %w", tid, dir, err)
		}
	}
	return nil
}

// Remove removes d (empty) from every hierarchy; a cgroup already gone is
// not an error.
func (d Dir) Remove() error {
	var errs []error
	for _, dir := range d.dirs() {
		errs = append(errs, rmdir(dir))
	}
	return errors.Join(errs...)
}

// RemoveTree removes d and every cgroup below it, deepest first. A cgroup
// that still holds a task is not removed, and the error says so.
func (d Dir) RemoveTree() error {
	var errs []error
	for _, root := range d.dirs() {
		var dirs []string
		filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			errs = append(errs, rmdir(dirs[i]))
		}
	}
	return errors.Join(errs...)
}

// rmdir removes an empty cgroup directory. The kernel may report it busy
// for a moment after its last task exits.
func rmdir(dir string) error {
	var err error
	for range 100 {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("cgroup: removing %s: %w", dir, err)
}
